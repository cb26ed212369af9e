//! The API's JSON as it arrives, before it becomes a [`ModelResponse`].
//!
//! The real API is wider than the runtime's types: it sends content blocks the
//! runtime has no use for (`thinking`, `redacted_thinking`, `server_tool_use`, …),
//! usage fields that may be `null`, and error bodies. Decoding goes through these
//! lenient shapes so that new API features are dropped rather than failing a call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::world::{CacheCreation, ContentBlock, ModelError, ModelRequest, ModelResponse};
use crate::world::{Role, StopReason, Usage};

/// The request body: the request's own JSON plus `"stream": true` when streaming.
#[derive(Serialize)]
struct WireRequest<'a> {
    #[serde(flatten)]
    request: &'a ModelRequest,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// Serializes the request body.
pub(super) fn encode_request(request: &ModelRequest, stream: bool) -> Result<Vec<u8>, ModelError> {
    crate::json::to_vec(&WireRequest { request, stream }).map_err(|error| ModelError::Malformed {
        detail: format!("the request does not serialize to JSON: {error}"),
    })
}

/// A `usage` object whose counts may be absent or `null` (the API sends `null` for
/// counts that do not apply, and `message_delta` repeats only some of them).
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation: Option<WireCacheCreation>,
    output_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct WireCacheCreation {
    ephemeral_5m_input_tokens: Option<u64>,
    ephemeral_1h_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Overwrites the counts this object carries, keeping the others. Counts in a
    /// stream's `message_delta` are cumulative, so the latest value wins.
    pub(super) fn merge_into(&self, usage: &mut Usage) {
        let set = |target: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        set(&mut usage.input_tokens, self.input_tokens);
        set(
            &mut usage.cache_creation_input_tokens,
            self.cache_creation_input_tokens,
        );
        set(
            &mut usage.cache_read_input_tokens,
            self.cache_read_input_tokens,
        );
        set(&mut usage.output_tokens, self.output_tokens);
        if let Some(creation) = &self.cache_creation {
            let CacheCreation {
                ephemeral_5m_input_tokens,
                ephemeral_1h_input_tokens,
            } = &mut usage.cache_creation;
            set(
                ephemeral_5m_input_tokens,
                creation.ephemeral_5m_input_tokens,
            );
            set(
                ephemeral_1h_input_tokens,
                creation.ephemeral_1h_input_tokens,
            );
        }
    }
}

/// A whole message, as the non-streaming endpoint returns it.
#[derive(Debug, Deserialize)]
struct WireMessage {
    id: String,
    model: String,
    role: Role,
    #[serde(default)]
    content: Vec<Value>,
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// The `{"type":"error","error":{"type","message"}}` body of a failed call (also the
/// data of a stream's `error` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ApiErrorBody {
    /// The error type, e.g. `invalid_request_error`.
    pub(super) kind: String,
    /// The API's explanation.
    pub(super) message: String,
}

/// Reads an API error body; `None` when `body` is not one.
pub(super) fn decode_error_body(body: &[u8]) -> Option<ApiErrorBody> {
    #[derive(Deserialize)]
    struct Envelope {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        message: String,
    }
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    Some(ApiErrorBody {
        kind: envelope.error.kind,
        message: envelope.error.message,
    })
}

/// What decoding a whole message gave: the response, and the block types dropped.
#[derive(Debug)]
pub(super) struct DecodedMessage {
    pub(super) response: ModelResponse,
    pub(super) dropped_block_types: Vec<String>,
}

/// Decodes a non-streaming response body, dropping block types the runtime lacks.
pub(super) fn decode_message(body: &[u8]) -> Result<DecodedMessage, ModelError> {
    let message: WireMessage = serde_json::from_slice(body).map_err(|error| {
        malformed(format!(
            "response body ({} bytes) is not a Messages API message: {error}",
            body.len()
        ))
    })?;
    let mut content = Vec::with_capacity(message.content.len());
    let mut dropped_block_types = Vec::new();
    for (index, block) in message.content.into_iter().enumerate() {
        match decode_block(block)
            .map_err(|detail| malformed(format!("content[{index}]: {detail}")))?
        {
            KnownBlock::Kept(block) => content.push(block),
            KnownBlock::Dropped(kind) => dropped_block_types.push(kind),
        }
    }
    let stop_reason = decode_stop_reason(message.stop_reason.as_deref())?;
    let mut usage = Usage::default();
    if let Some(wire_usage) = &message.usage {
        wire_usage.merge_into(&mut usage);
    }
    Ok(DecodedMessage {
        response: ModelResponse {
            id: message.id,
            model: message.model,
            role: message.role,
            content,
            stop_reason,
            usage,
        },
        dropped_block_types,
    })
}

/// A content block the runtime keeps, or the type of one it drops.
#[derive(Debug)]
pub(super) enum KnownBlock {
    /// A block of a type [`ContentBlock`] has.
    Kept(ContentBlock),
    /// The `type` of a block the runtime has no variant for.
    Dropped(String),
}

/// Decodes one content block; `Err` explains why a block of a known type is invalid.
pub(super) fn decode_block(block: Value) -> Result<KnownBlock, String> {
    let kind = match block.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(_) => return Err("the block's \"type\" is not a string".to_owned()),
        None => return Err("the block has no \"type\"".to_owned()),
    };
    match kind.as_str() {
        "text" | "tool_use" | "tool_result" => serde_json::from_value(block)
            .map(KnownBlock::Kept)
            .map_err(|error| format!("invalid {kind} block: {error}")),
        _ => Ok(KnownBlock::Dropped(kind)),
    }
}

/// The stop reason of a finished message; absent or unknown is malformed, since the
/// runtime's next step depends on it.
pub(super) fn decode_stop_reason(stop_reason: Option<&str>) -> Result<StopReason, ModelError> {
    let text = stop_reason.ok_or_else(|| malformed("the message has no stop_reason".to_owned()))?;
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| malformed(format!("unknown stop_reason {text:?}")))
}

/// A [`ModelError::Malformed`] with `detail`.
pub(super) fn malformed(detail: String) -> ModelError {
    ModelError::Malformed { detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_blocks_are_dropped_and_null_usage_counts_are_zero() {
        let body = br#"{
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "hi", "citations": null},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 5, "cache_creation_input_tokens": null,
                      "cache_read_input_tokens": 2, "output_tokens": 9,
                      "service_tier": "standard"}
        }"#;
        let decoded = decode_message(body).unwrap();
        assert_eq!(decoded.dropped_block_types, ["thinking", "server_tool_use"]);
        assert_eq!(decoded.response.content.len(), 2);
        assert_eq!(decoded.response.stop_reason, StopReason::ToolUse);
        assert_eq!(decoded.response.usage.cache_creation_input_tokens, 0);
        assert_eq!(decoded.response.usage.cache_read_input_tokens, 2);
    }

    #[test]
    fn unknown_stop_reason_and_bad_known_blocks_are_malformed() {
        let body =
            br#"{"id":"m","role":"assistant","model":"m","content":[],"stop_reason":"later"}"#;
        assert!(
            matches!(decode_message(body), Err(ModelError::Malformed { detail }) if detail.contains("later"))
        );
        let body = br#"{"id":"m","role":"assistant","model":"m","content":[{"type":"tool_use"}],"stop_reason":"end_turn"}"#;
        assert!(
            matches!(decode_message(body), Err(ModelError::Malformed { detail }) if detail.starts_with("content[0]"))
        );
    }
}
