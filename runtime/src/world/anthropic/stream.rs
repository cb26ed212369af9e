//! Streaming responses: Messages API events assembled into one [`ModelResponse`].
//!
//! A stream is `message_start`, then for each content block `content_block_start`,
//! any number of `content_block_delta`s and `content_block_stop`, then
//! `message_delta` (stop reason, cumulative usage) and `message_stop`. `ping` may
//! come anywhere; `error` ends the stream with an error. The response exists only
//! once `message_stop` arrives: a stream cut short is an error, never half a reply.
//!
//! Blocks of types the runtime lacks (`thinking`, `server_tool_use`, …) are tracked
//! by index so their deltas are accepted, and then dropped. Event and delta types
//! this module does not know are ignored, as the API's versioning policy asks.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::failure;
use super::sse::SseEvent;
use super::wire::{decode_block, decode_stop_reason, malformed, KnownBlock, WireUsage};
use crate::world::{ContentBlock, ModelError, ModelResponse, Role, StopReason, Usage};

/// Builds a response from a stream's events.
#[derive(Debug, Default)]
pub(super) struct MessageAssembler {
    start: Option<MessageStart>,
    blocks: BTreeMap<u64, BlockState>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    /// The types of blocks dropped, in index order, for tracing.
    dropped_block_types: Vec<String>,
}

#[derive(Debug)]
struct MessageStart {
    id: String,
    model: String,
    role: Role,
}

#[derive(Debug)]
struct BlockState {
    content: BlockContent,
    stopped: bool,
}

#[derive(Debug)]
enum BlockContent {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The `input` of `content_block_start`, used when no delta follows.
        initial_input: Value,
        /// The `partial_json` of every `input_json_delta`, concatenated.
        input_json: String,
    },
    /// A block the runtime keeps whole from its start event (e.g. `tool_result`).
    Whole(ContentBlock),
    Dropped(String),
}

#[derive(Deserialize)]
struct MessageStartEvent {
    message: MessageStartBody,
}

#[derive(Deserialize)]
struct MessageStartBody {
    id: String,
    model: String,
    role: Role,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct BlockStartEvent {
    index: u64,
    content_block: Value,
}

#[derive(Deserialize)]
struct BlockDeltaEvent {
    index: u64,
    delta: Delta,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct BlockStopEvent {
    index: u64,
}

#[derive(Deserialize)]
struct MessageDeltaEvent {
    delta: MessageDeltaBody,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorEvent {
    error: ErrorEventBody,
}

#[derive(Deserialize)]
struct ErrorEventBody {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

impl MessageAssembler {
    /// An assembler that has seen no event.
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// The types of the blocks dropped so far.
    pub(super) fn dropped_block_types(&self) -> &[String] {
        &self.dropped_block_types
    }

    /// Applies one event. `Ok(Some(_))` is the finished response (`message_stop`);
    /// `Err` is an `error` event or a stream that breaks the protocol.
    pub(super) fn apply(&mut self, event: &SseEvent) -> Result<Option<ModelResponse>, ModelError> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|error| fatal(format!("{} event: data is not JSON: {error}", event.event)))?;
        // The API names each event twice (`event:` and the data's `type`); a stream
        // without `event:` lines still carries the type in its data.
        let kind = match (
            event.event.as_str(),
            data.get("type").and_then(Value::as_str),
        ) {
            ("message", Some(data_type)) => data_type.to_owned(),
            (name, _) => name.to_owned(),
        };
        match kind.as_str() {
            "ping" => Ok(None),
            "error" => {
                let body: ErrorEvent = decode(&kind, data)?;
                Err(failure::from_error_event(&super::wire::ApiErrorBody {
                    kind: body.error.kind,
                    message: body.error.message,
                }))
            }
            "message_start" => {
                if self.start.is_some() {
                    return Err(fatal("a second message_start".to_owned()));
                }
                let body: MessageStartEvent = decode(&kind, data)?;
                if let Some(usage) = &body.message.usage {
                    usage.merge_into(&mut self.usage);
                }
                self.start = Some(MessageStart {
                    id: body.message.id,
                    model: body.message.model,
                    role: body.message.role,
                });
                Ok(None)
            }
            "content_block_start" => {
                self.require_started(&kind)?;
                let body: BlockStartEvent = decode(&kind, data)?;
                self.start_block(body)?;
                Ok(None)
            }
            "content_block_delta" => {
                self.require_started(&kind)?;
                let body: BlockDeltaEvent = decode(&kind, data)?;
                self.apply_delta(body)?;
                Ok(None)
            }
            "content_block_stop" => {
                self.require_started(&kind)?;
                let body: BlockStopEvent = decode(&kind, data)?;
                let block = self.open_block(body.index, &kind)?;
                block.stopped = true;
                Ok(None)
            }
            "message_delta" => {
                self.require_started(&kind)?;
                let body: MessageDeltaEvent = decode(&kind, data)?;
                if let Some(text) = body.delta.stop_reason.as_deref() {
                    self.stop_reason = Some(decode_stop_reason(Some(text))?);
                }
                if let Some(usage) = &body.usage {
                    usage.merge_into(&mut self.usage);
                }
                Ok(None)
            }
            "message_stop" => {
                self.require_started(&kind)?;
                self.finish().map(Some)
            }
            _ => Ok(None),
        }
    }

    fn require_started(&self, kind: &str) -> Result<(), ModelError> {
        match self.start {
            Some(_) => Ok(()),
            None => Err(fatal(format!("{kind} before message_start"))),
        }
    }

    fn start_block(&mut self, body: BlockStartEvent) -> Result<(), ModelError> {
        if self.blocks.contains_key(&body.index) {
            return Err(fatal(format!(
                "content_block_start for block {} twice",
                body.index
            )));
        }
        let index = body.index;
        let content = match decode_block(body.content_block)
            .map_err(|detail| fatal(format!("content_block_start {index}: {detail}")))?
        {
            KnownBlock::Kept(ContentBlock::Text { text, .. }) => BlockContent::Text(text),
            KnownBlock::Kept(ContentBlock::ToolUse { id, name, input }) => BlockContent::ToolUse {
                id,
                name,
                initial_input: std::sync::Arc::unwrap_or_clone(input),
                input_json: String::new(),
            },
            KnownBlock::Kept(whole) => BlockContent::Whole(whole),
            KnownBlock::Dropped(kind) => BlockContent::Dropped(kind),
        };
        self.blocks.insert(
            index,
            BlockState {
                content,
                stopped: false,
            },
        );
        Ok(())
    }

    fn open_block(&mut self, index: u64, kind: &str) -> Result<&mut BlockState, ModelError> {
        match self.blocks.get_mut(&index) {
            None => Err(fatal(format!(
                "{kind} for block {index}, which never started"
            ))),
            Some(block) if block.stopped => Err(fatal(format!(
                "{kind} for block {index}, which already stopped"
            ))),
            Some(block) => Ok(block),
        }
    }

    fn apply_delta(&mut self, body: BlockDeltaEvent) -> Result<(), ModelError> {
        let index = body.index;
        let block = self.open_block(index, "content_block_delta")?;
        match (&mut block.content, body.delta) {
            (BlockContent::Text(text), Delta::Text { text: more }) => text.push_str(&more),
            (BlockContent::ToolUse { input_json, .. }, Delta::InputJson { partial_json }) => {
                input_json.push_str(&partial_json);
            }
            // Thinking, signature and citation deltas, and anything on a dropped block.
            (_, Delta::Other) | (BlockContent::Dropped(_), _) => {}
            (content, _) => {
                return Err(fatal(format!(
                    "content_block_delta of the wrong type for {} block {index}",
                    content.type_name()
                )));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<ModelResponse, ModelError> {
        let start = self
            .start
            .take()
            .ok_or_else(|| fatal("message_stop before message_start".to_owned()))?;
        let stop_reason = self
            .stop_reason
            .ok_or_else(|| fatal("message_stop without a stop_reason".to_owned()))?;
        let mut content = Vec::with_capacity(self.blocks.len());
        for (index, block) in std::mem::take(&mut self.blocks) {
            if !block.stopped {
                return Err(fatal(format!(
                    "message_stop while block {index} is still open"
                )));
            }
            match block.content {
                BlockContent::Text(text) => content.push(ContentBlock::text(text)),
                BlockContent::ToolUse {
                    id,
                    name,
                    initial_input,
                    input_json,
                } => {
                    let input = if input_json.trim().is_empty() {
                        initial_input
                    } else {
                        serde_json::from_str(&input_json).map_err(|error| {
                            fatal(format!(
                                "tool_use block {index} ({name}): input is not JSON: {error}"
                            ))
                        })?
                    };
                    content.push(ContentBlock::ToolUse {
                        id,
                        name,
                        input: input.into(),
                    });
                }
                BlockContent::Whole(block) => content.push(block),
                BlockContent::Dropped(kind) => self.dropped_block_types.push(kind),
            }
        }
        Ok(ModelResponse {
            id: start.id,
            model: start.model,
            role: start.role,
            content,
            stop_reason,
            usage: self.usage,
        })
    }
}

impl BlockContent {
    fn type_name(&self) -> &str {
        match self {
            BlockContent::Text(_) => "text",
            BlockContent::ToolUse { .. } => "tool_use",
            BlockContent::Whole(_) => "tool_result",
            BlockContent::Dropped(kind) => kind,
        }
    }
}

fn decode<T: for<'de> Deserialize<'de>>(kind: &str, data: Value) -> Result<T, ModelError> {
    serde_json::from_value(data).map_err(|error| fatal(format!("{kind} event: {error}")))
}

/// A stream that breaks the protocol: the same request would likely break it again.
fn fatal(detail: String) -> ModelError {
    malformed(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&str, &str)]) -> Result<Option<ModelResponse>, ModelError> {
        let mut assembler = MessageAssembler::new();
        let mut last = Ok(None);
        for (event, data) in events {
            last = assembler.apply(&SseEvent {
                event: (*event).to_owned(),
                data: (*data).to_owned(),
                id: None,
            });
            if !matches!(last, Ok(None)) {
                break;
            }
        }
        last
    }

    const START: (&str, &str) = (
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#,
    );

    #[test]
    fn error_event_overloaded_is_retryable() {
        let failure = run(&[
            START,
            (
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
        ])
        .unwrap_err();
        assert_eq!(failure, ModelError::Overloaded);
        assert!(failure.is_transient());
    }

    #[test]
    fn delta_to_unknown_block_is_malformed() {
        let failure = run(&[
            START,
            ("content_block_delta", r#"{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}"#),
        ])
        .unwrap_err();
        assert!(!failure.is_transient());
        assert!(
            matches!(failure, ModelError::Malformed { detail } if detail.contains("never started"))
        );
    }

    #[test]
    fn tool_use_without_deltas_keeps_its_start_input() {
        let response = run(&[
            START,
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Ls","input":{}}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            response.content,
            [ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Ls".into(),
                input: serde_json::json!({}).into()
            }]
        );
        assert_eq!(response.usage.input_tokens, 3);
        assert_eq!(response.usage.output_tokens, 7);
    }
}
