//! How the host frames an SSE stream: the line ends, byte-order mark, field
//! spacing and extra lines that the event-stream grammar allows, one framing per
//! run, drawn from the host's seed.
//!
//! The real API writes `event: <name>\ndata: <json>\n\n`, one event at a time. The
//! grammar (WHATWG HTML, "Parsing an event stream") allows much more, and the
//! proxies and gateways that stand in front of the API use it:
//!
//! - a line may end in CRLF, LF or a lone CR;
//! - a byte-order mark may open the stream;
//! - the space after a field's colon is optional;
//! - a line that starts with `:` is a comment (a keep-alive);
//! - an event needs no `event:` line, and the API's data names its type anyway;
//! - the API's docs say new event types may appear, and a client skips the ones it
//!   does not know;
//! - the bytes of one event may reach the client in two pieces, split anywhere,
//!   CRLF included.
//!
//! A client that reads only the API's own framing breaks behind any of them, and a
//! host that only writes that framing cannot tell. So a seeded host writes every
//! stream of its run in one framing drawn from its seed: a run meets one server, and
//! a sweep meets every framing. The unseeded host
//! ([`ApiHost::new`](super::ApiHost::new)) writes the API's own.

use super::wire::SseEvent;

/// How a line of the stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineEnd {
    /// `\n`, as the API writes.
    Lf,
    /// `\r\n`.
    CrLf,
    /// `\r` alone.
    Cr,
}

impl LineEnd {
    fn bytes(self) -> &'static [u8] {
        match self {
            LineEnd::Lf => b"\n",
            LineEnd::CrLf => b"\r\n",
            LineEnd::Cr => b"\r",
        }
    }
}

/// One server's way of writing its event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SseFraming {
    /// How each line ends.
    pub(crate) line_end: LineEnd,
    /// Whether a byte-order mark opens the stream.
    pub(crate) byte_order_mark: bool,
    /// Whether a space follows each field's colon.
    pub(crate) space_after_colon: bool,
    /// Whether each event has its `event:` line (without it, the data's `type`
    /// names the event).
    pub(crate) event_lines: bool,
    /// Whether a keep-alive comment line opens each event.
    pub(crate) comments: bool,
    /// Whether an event of a type no client knows follows the `ping`.
    pub(crate) unknown_events: bool,
    /// Whether each event reaches the client in two chunks of the body, split at
    /// the last byte of its first line's end (between CR and LF in CRLF).
    pub(crate) split_events: bool,
}

/// The type of the event [`SseFraming::unknown_events`] adds: one the API has not
/// announced.
pub(crate) const UNKNOWN_EVENT_TYPE: &str = "unannounced_event";

impl SseFraming {
    /// The API's own framing.
    pub(crate) const API: SseFraming = SseFraming {
        line_end: LineEnd::Lf,
        byte_order_mark: false,
        space_after_colon: true,
        event_lines: true,
        comments: false,
        unknown_events: false,
        split_events: false,
    };

    /// The framing the bits of `bits` choose: LF for half of the values and CRLF
    /// and CR for a quarter each, then one bit for each other choice, so each
    /// appears in half of a sweep's seeds.
    pub(crate) fn drawn(bits: u64) -> SseFraming {
        let bit = |at: u32| bits >> at & 1 == 1;
        SseFraming {
            line_end: match bits & 3 {
                1 => LineEnd::CrLf,
                2 => LineEnd::Cr,
                _ => LineEnd::Lf,
            },
            byte_order_mark: bit(2),
            space_after_colon: !bit(3),
            event_lines: !bit(4),
            comments: bit(5),
            unknown_events: bit(6),
            split_events: bit(7),
        }
    }

    /// The stream's events, each with its blank line, as the chunks of the body
    /// that carry them, in order. `events` is a whole stream or its beginning: a
    /// byte-order mark goes before the first event, and an unknown event after a
    /// `ping`.
    pub(crate) fn chunks(&self, events: &[SseEvent]) -> Vec<Vec<u8>> {
        let unknown = self
            .unknown_events
            .then(|| SseEvent::type_only(UNKNOWN_EVENT_TYPE));
        let mut chunks = Vec::with_capacity(events.len() * 2 + 1);
        for event in events {
            let added = unknown.as_ref().filter(|_| event.name == "ping");
            for event in std::iter::once(event).chain(added) {
                let mut bytes = Vec::new();
                if self.byte_order_mark && chunks.is_empty() {
                    bytes.extend_from_slice("\u{feff}".as_bytes());
                }
                let first_line_end = self.render(event, &mut bytes);
                if self.split_events {
                    let rest = bytes.split_off(first_line_end);
                    chunks.push(bytes);
                    chunks.push(rest);
                } else {
                    chunks.push(bytes);
                }
            }
        }
        chunks
    }

    /// Appends `event`'s lines and its blank line to `out`; returns the offset just
    /// before the last byte of its first line's end.
    fn render(&self, event: &SseEvent, out: &mut Vec<u8>) -> usize {
        let mut first_line_end = None;
        let mut line = |out: &mut Vec<u8>, parts: &[&[u8]]| {
            for part in parts {
                out.extend_from_slice(part);
            }
            out.extend_from_slice(self.line_end.bytes());
            first_line_end.get_or_insert(out.len() - 1);
        };
        let colon: &[u8] = if self.space_after_colon { b": " } else { b":" };
        if self.comments {
            line(out, &[b": keep-alive"]);
        }
        if self.event_lines {
            line(out, &[b"event", colon, event.name.as_bytes()]);
        }
        line(out, &[b"data", colon, event.data.as_bytes()]);
        out.extend_from_slice(self.line_end.bytes());
        first_line_end.expect("every event has its data line")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::world::anthropic::SseParser;

    fn events() -> Vec<SseEvent> {
        vec![
            SseEvent::type_only("message_start"),
            SseEvent::type_only("ping"),
            SseEvent::type_only("message_stop"),
        ]
    }

    /// Every framing the bits can draw.
    fn every_framing() -> Vec<SseFraming> {
        (0..256).map(SseFraming::drawn).collect()
    }

    #[test]
    fn the_api_framing_is_the_apis_bytes() {
        // Goal: the unseeded host writes exactly what the API writes.
        let chunks = SseFraming::API.chunks(&events()[..1]);
        assert_eq!(
            chunks,
            [b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n".to_vec()]
        );
    }

    #[test]
    fn every_framing_parses_to_the_same_events() {
        // Goal: each framing is one the grammar allows, so a parser that follows
        // the grammar reads the API's events, by name or by the data's type, and
        // nothing else but the unknown event, whatever the chunks.
        for framing in every_framing() {
            let mut parser = SseParser::new();
            let parsed: Vec<(String, String)> = framing
                .chunks(&events())
                .iter()
                .flat_map(|chunk| parser.push(chunk))
                .map(|event| (event.event, event.data))
                .collect();
            let name = |event: &str| {
                if framing.event_lines {
                    event.to_owned()
                } else {
                    "message".to_owned()
                }
            };
            let data = |event: &str| format!("{{\"type\":\"{event}\"}}");
            let mut expected = vec![
                (name("message_start"), data("message_start")),
                (name("ping"), data("ping")),
            ];
            if framing.unknown_events {
                expected.push((name(UNKNOWN_EVENT_TYPE), data(UNKNOWN_EVENT_TYPE)));
            }
            expected.push((name("message_stop"), data("message_stop")));
            assert_eq!(parsed, expected, "{framing:?}");
            assert!(!parser.is_mid_event(), "{framing:?}");
        }
    }

    #[test]
    fn every_choice_is_drawn_both_ways() {
        // Goal: a sweep meets each framing choice: every line end, and each flag
        // on and off.
        let drawn = every_framing();
        for line_end in [LineEnd::Lf, LineEnd::CrLf, LineEnd::Cr] {
            assert!(drawn.iter().any(|framing| framing.line_end == line_end));
        }
        let flags: [fn(&SseFraming) -> bool; 6] = [
            |f| f.byte_order_mark,
            |f| f.space_after_colon,
            |f| f.event_lines,
            |f| f.comments,
            |f| f.unknown_events,
            |f| f.split_events,
        ];
        for flag in flags {
            assert!(drawn.iter().any(flag) && !drawn.iter().all(flag));
        }
    }

    #[test]
    fn a_split_crlf_event_breaks_between_cr_and_lf() {
        // Goal: the split meets a parser's hardest case, a CRLF whose LF starts the
        // next chunk.
        let framing = SseFraming {
            line_end: LineEnd::CrLf,
            split_events: true,
            ..SseFraming::API
        };
        let chunks = framing.chunks(&events()[..1]);
        assert_eq!(chunks[0], b"event: message_start\r");
        assert!(chunks[1].starts_with(b"\ndata: "));
    }
}
