//! The Messages API's response bodies: the JSON message, its SSE event stream, and
//! the error body.
//!
//! Field order follows the API's own documents, fixed by the structs below rather than
//! by whatever order `serde_json`'s map happens to keep, so the bytes on the wire are
//! the same in every build.

use std::time::Duration;

use coord_runtime::world::{ContentBlock, ModelError, ModelResponse, Role, StopReason, Usage};
use serde::Serialize;

/// The most characters of text one `text_delta` carries. The real API streams text in
/// pieces of a few tokens; several deltas per block make a client's accumulation work.
pub(crate) const TEXT_DELTA_CHARS_MAX: usize = 16;

/// The most bytes of a tool's input JSON one `input_json_delta` carries.
pub(crate) const INPUT_JSON_DELTA_BYTES_MAX: usize = 16;

/// The non-streaming answer: a `message` object.
#[derive(Serialize)]
struct MessageBody<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: Role,
    model: &'a str,
    content: &'a [ContentBlock],
    stop_reason: Option<StopReason>,
    stop_sequence: Option<&'a str>,
    usage: Usage,
}

/// `response` as the JSON body of a non-streaming answer.
pub(crate) fn message_json(response: &ModelResponse) -> Vec<u8> {
    let body = MessageBody {
        id: &response.id,
        kind: "message",
        role: response.role,
        model: &response.model,
        content: &response.content,
        stop_reason: Some(response.stop_reason),
        stop_sequence: None,
        usage: response.usage,
    };
    coord_runtime::json::to_vec(&body).expect("a message body always serializes")
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` line.
    pub(crate) name: &'static str,
    /// The `data:` line: one JSON object, no newlines.
    pub(crate) data: String,
}

impl SseEvent {
    fn new(name: &'static str, data: &impl Serialize) -> Self {
        let data = serde_json::to_string(data).expect("an SSE payload always serializes");
        debug_assert!(!data.contains('\n'), "compact JSON has no newlines");
        Self { name, data }
    }

    /// An event whose data is only its type, `{"type":"<name>"}`.
    pub(crate) fn type_only(name: &'static str) -> Self {
        Self::new(name, &TypeOnly { kind: name })
    }
}

#[derive(Serialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: MessageBody<'a>,
}

#[derive(Serialize)]
struct BlockStart {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
    content_block: StartedBlock,
}

/// A content block as `content_block_start` announces it: empty, filled by deltas.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartedBlock {
    Text {
        text: &'static str,
    },
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Map<String, serde_json::Value>,
    },
}

#[derive(Serialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
    delta: Delta<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
}

#[derive(Serialize)]
struct BlockStop {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
}

#[derive(Serialize)]
struct MessageDelta {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta,
    usage: OutputUsage,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: StopReason,
    stop_sequence: Option<String>,
}

#[derive(Serialize)]
struct OutputUsage {
    output_tokens: u64,
}

/// Why a response cannot be streamed as the API would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("content block {index} is a {kind} block, which an assistant message never has")]
pub(crate) struct UnsendableBlock {
    /// The block's index.
    pub(crate) index: usize,
    /// Its type.
    pub(crate) kind: &'static str,
}

/// Checks that every block of `response` is one the API sends in an answer.
pub(crate) fn check_sendable(response: &ModelResponse) -> Result<(), UnsendableBlock> {
    for (index, block) in response.content.iter().enumerate() {
        if let ContentBlock::ToolResult { .. } = block {
            return Err(UnsendableBlock {
                index,
                kind: "tool_result",
            });
        }
    }
    Ok(())
}

/// `response` as the API streams it:
///
/// `message_start` (empty content, the full input-side usage, `output_tokens` at most
/// 1 as the real API reports before generating), `ping`, then per block
/// `content_block_start`, its deltas (`text_delta` pieces of at most
/// [`TEXT_DELTA_CHARS_MAX`] characters; `input_json_delta` pieces of at most
/// [`INPUT_JSON_DELTA_BYTES_MAX`] bytes of the input's JSON), `content_block_stop`;
/// then `message_delta` (stop reason, cumulative `output_tokens`) and `message_stop`.
///
/// # Panics
/// On a block [`check_sendable`] refuses; callers check first.
pub(crate) fn sse_events(response: &ModelResponse) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut start_usage = response.usage;
    start_usage.output_tokens = start_usage.output_tokens.min(1);
    events.push(SseEvent::new(
        "message_start",
        &MessageStart {
            kind: "message_start",
            message: MessageBody {
                id: &response.id,
                kind: "message",
                role: response.role,
                model: &response.model,
                content: &[],
                stop_reason: None,
                stop_sequence: None,
                usage: start_usage,
            },
        },
    ));
    events.push(SseEvent::new("ping", &TypeOnly { kind: "ping" }));
    for (index, block) in response.content.iter().enumerate() {
        let (started, pieces, delta): (StartedBlock, Vec<String>, fn(&str) -> Delta<'_>) =
            match block {
                ContentBlock::Text { text, .. } => (
                    StartedBlock::Text { text: "" },
                    split_chars(text, TEXT_DELTA_CHARS_MAX),
                    |text| Delta::TextDelta { text },
                ),
                ContentBlock::ToolUse { id, name, input } => (
                    StartedBlock::ToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input: serde_json::Map::new(),
                    },
                    split_bytes(
                        &serde_json::to_string(input).expect("a JSON value always serializes"),
                        INPUT_JSON_DELTA_BYTES_MAX,
                    ),
                    |partial_json| Delta::InputJsonDelta { partial_json },
                ),
                ContentBlock::ToolResult { .. } => {
                    panic!("sse_events called on a response check_sendable refuses")
                }
            };
        events.push(SseEvent::new(
            "content_block_start",
            &BlockStart {
                kind: "content_block_start",
                index,
                content_block: started,
            },
        ));
        for piece in &pieces {
            events.push(SseEvent::new(
                "content_block_delta",
                &BlockDelta {
                    kind: "content_block_delta",
                    index,
                    delta: delta(piece),
                },
            ));
        }
        events.push(SseEvent::new(
            "content_block_stop",
            &BlockStop {
                kind: "content_block_stop",
                index,
            },
        ));
    }
    events.push(SseEvent::new(
        "message_delta",
        &MessageDelta {
            kind: "message_delta",
            delta: StopDelta {
                stop_reason: response.stop_reason,
                stop_sequence: None,
            },
            usage: OutputUsage {
                output_tokens: response.usage.output_tokens,
            },
        },
    ));
    events.push(SseEvent::new(
        "message_stop",
        &TypeOnly {
            kind: "message_stop",
        },
    ));
    events
}

/// `text` in pieces of at most `chars_max` characters; no pieces for empty text.
fn split_chars(text: &str, chars_max: usize) -> Vec<String> {
    assert!(chars_max > 0, "pieces need room for a character");
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(chars_max)
        .map(|piece| piece.iter().collect())
        .collect()
}

/// `text` in pieces of at most `bytes_max` bytes, cut only at character boundaries (a
/// piece may run over to finish a character wider than `bytes_max`).
fn split_bytes(text: &str, bytes_max: usize) -> Vec<String> {
    assert!(bytes_max > 0, "pieces need room for a byte");
    let mut pieces = Vec::new();
    let mut rest = text;
    // Bounded: every round removes at least one character from `rest`.
    while !rest.is_empty() {
        let mut cut = bytes_max.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece.to_owned());
        rest = tail;
    }
    pieces
}

/// An error answer: status, the API's error type, its message, and for 429s the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorReply {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The API's `error.type`.
    pub(crate) kind: &'static str,
    /// The API's `error.message`.
    pub(crate) message: String,
    /// For 429s, what the `retry-after` headers say.
    pub(crate) retry_after: Option<Duration>,
    /// Which of the two retry headers carry it.
    pub(crate) retry_headers: RetryHeaders,
}

/// Which headers say a 429's wait. The API sends both; a proxy or gateway in front
/// of it may keep only the standard `retry-after`, and another API only the
/// milliseconds. A client must read each alone, in its own unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum RetryHeaders {
    /// `retry-after` (whole seconds) and `retry-after-ms`.
    #[default]
    Both,
    /// `retry-after` alone.
    Seconds,
    /// `retry-after-ms` alone.
    Milliseconds,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
}

impl ErrorReply {
    /// An error answer without a retry hint.
    pub(crate) fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            retry_after: None,
            retry_headers: RetryHeaders::Both,
        }
    }

    /// An error answer with the API's error type for `status`.
    pub(crate) fn for_status(status: u16, message: impl Into<String>) -> Self {
        Self::new(status, error_kind(status), message)
    }

    /// `400 invalid_request_error`.
    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", message)
    }

    /// `429 rate_limit_error`, asking the client to wait `retry_after` if known.
    pub(crate) fn rate_limited(retry_after: Option<Duration>) -> Self {
        Self {
            retry_after,
            ..Self::new(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            )
        }
    }

    /// `529 overloaded_error`.
    pub(crate) fn overloaded() -> Self {
        Self::new(529, "overloaded_error", "Overloaded")
    }

    /// What the API would answer had its model failed as `error` did: rate limits and
    /// overload pass through with their own statuses, an API error keeps its status,
    /// anything else is a `500 api_error`.
    pub(crate) fn from_upstream(error: &ModelError) -> Self {
        match error {
            ModelError::RateLimited { retry_after } => Self::rate_limited(*retry_after),
            ModelError::Overloaded => Self::overloaded(),
            ModelError::Api { status, message } if (400..=599).contains(status) => {
                Self::for_status(*status, message.clone())
            }
            other => Self::new(500, "api_error", format!("upstream model failed: {other}")),
        }
    }

    /// The JSON body: `{"type":"error","error":{"type":…,"message":…}}`.
    pub(crate) fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&ErrorBody {
            kind: "error",
            error: ErrorDetail {
                kind: self.kind,
                message: &self.message,
            },
        })
        .expect("an error body always serializes")
    }

    /// The `error` event a stream carries for this error once its `200` is out.
    pub(crate) fn sse_event(&self) -> SseEvent {
        SseEvent {
            name: "error",
            data: String::from_utf8(self.body()).expect("JSON text is UTF-8"),
        }
    }

    /// The retry headers of a 429, as [`RetryHeaders`] chooses them: `retry-after`
    /// in whole seconds rounded up, `retry-after-ms` in milliseconds rounded up.
    pub(crate) fn retry_headers(&self) -> Vec<(&'static str, String)> {
        let Some(retry_after) = self.retry_after else {
            return Vec::new();
        };
        let nanos = retry_after.as_nanos();
        let seconds = ("retry-after", nanos.div_ceil(1_000_000_000).to_string());
        let milliseconds = ("retry-after-ms", nanos.div_ceil(1_000_000).to_string());
        match self.retry_headers {
            RetryHeaders::Both => vec![seconds, milliseconds],
            RetryHeaders::Seconds => vec![seconds],
            RetryHeaders::Milliseconds => vec![milliseconds],
        }
    }
}

/// The API's `error.type` for an error status.
fn error_kind(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}
