//! Server-sent events: an incremental parser for `text/event-stream` bodies.
//!
//! Follows the WHATWG HTML "event stream interpretation": lines end in `\r\n`, `\n`
//! or `\r`; a blank line dispatches the event being built; `:` starts a comment;
//! `field: value` loses one space after the colon; `data` lines join with `\n`;
//! `event` names the event (default `message`); `id` sets the last event id; other
//! fields (including `retry`, since the provider never reconnects a stream) are
//! ignored. An event with no `data` line is not dispatched, and a partial event
//! cut off by the end of the stream is discarded.
//!
//! Bytes can arrive in any chunks: a line or even a `\r\n` pair split across two
//! [`SseParser::push`] calls parses the same as when it arrives whole.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when there was none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen so far in the stream, if any.
    pub id: Option<String>,
}

/// Turns a byte stream into [`SseEvent`]s as the bytes arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`, so a leading `\n` belongs to that line end.
    after_cr: bool,
    /// Whether a line has been completed yet (a byte-order mark may open the first).
    first_line_done: bool,
    /// The `event:` field of the event being built.
    event: String,
    /// The `data:` lines of the event being built, each followed by `\n`.
    data: String,
    /// Whether any field line has been seen since the last dispatch.
    mid_event: bool,
    last_event_id: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes of the stream; returns the events they complete, in order.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&bytes[..end]);
            let ending = bytes[end];
            bytes = &bytes[end + 1..];
            if ending == b'\r' {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    // The `\n` of a `\r\n` may be the first byte of the next chunk.
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
        }
        self.line.extend_from_slice(bytes);
        events
    }

    /// Whether the stream so far ends inside an event (a field seen, or a line
    /// begun, without the blank line that dispatches it). At end of stream such an
    /// event is discarded.
    pub fn is_mid_event(&self) -> bool {
        self.mid_event || !self.line.is_empty()
    }

    fn process_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        let line = if self.first_line_done {
            line
        } else {
            self.first_line_done = true;
            line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line)
        };
        // Lines split on ASCII bytes only, so no UTF-8 sequence spans two lines.
        let line = String::from_utf8_lossy(line);
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        self.mid_event = true;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_event_id = Some(value.to_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        self.mid_event = false;
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return None;
        }
        data.pop();
        Some(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id: self.last_event_id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.to_owned(),
            data: data.to_owned(),
            id: None,
        }
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let mut parser = SseParser::new();
        let events = parser.push(
            b"\xEF\xBB\xBF: keep-alive\nevent: ping\ndata: {}\n\n\
              data:first\ndata:  second\n\n\
              event:empty\n\n\
              data\n\n",
        );
        assert_eq!(
            events,
            [
                event("ping", "{}"),
                event("message", "first\n second"),
                event("message", ""),
            ]
        );
        assert!(!parser.is_mid_event());
    }

    #[test]
    fn all_line_endings_and_split_crlf() {
        let mut parser = SseParser::new();
        let mut events = parser.push(b"event: a\r\ndata: 1\r");
        assert!(events.is_empty());
        events.extend(parser.push(b"\n\r\nevent: b\rdata: 2\r\rdata: 3\n"));
        assert_eq!(events, [event("a", "1"), event("b", "2")]);
        assert!(parser.is_mid_event());
    }

    #[test]
    fn last_event_id_carries_over() {
        let mut parser = SseParser::new();
        let events = parser.push(b"id: 7\ndata: x\n\ndata: y\n\n");
        assert_eq!(events[1].id.as_deref(), Some("7"));
    }
}
