//! The model boundary, shaped like the Anthropic Messages API.
//!
//! Requests and responses serialize to the API's own JSON shape, so a recorded
//! exchange, a scripted model and a real HTTP provider are interchangeable behind
//! [`Model`].

use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use super::BoxFuture;

/// How long a cache entry written at a breakpoint lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheTtl {
    /// Five minutes, refreshed on every hit (the default).
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour.
    #[serde(rename = "1h")]
    OneHour,
}

/// A `cache_control` breakpoint on a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// Always `ephemeral` in the current API.
    #[serde(rename = "type")]
    pub kind: CacheControlKind,
    /// The entry's lifetime; absent means five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<CacheTtl>,
}

/// The kind of a cache breakpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheControlKind {
    /// The only kind the API defines.
    Ephemeral,
}

impl CacheControl {
    /// An ephemeral breakpoint with the given TTL.
    pub fn ephemeral(ttl: Option<CacheTtl>) -> Self {
        Self {
            kind: CacheControlKind::Ephemeral,
            ttl,
        }
    }
}

/// One block of the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: TextKind,
    /// The text.
    pub text: String,
    /// A cache breakpoint after this block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// The `type` tag of a text block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextKind {
    /// `"type": "text"`.
    Text,
}

impl SystemBlock {
    /// A system text block without a breakpoint.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            kind: TextKind::Text,
            text: text.into(),
            cache_control: None,
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input. Shared: every request of every agent
    /// offers the same schemas, and a request is cloned on its way to the model.
    pub input_schema: Arc<serde_json::Value>,
    /// A cache breakpoint after this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user side: prompts, tool results, injected notifications.
    User,
    /// The model.
    Assistant,
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// A cache breakpoint after this block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// The model calls a tool.
    ToolUse {
        /// The call's id (`toolu_…`), echoed by its result.
        id: String,
        /// The tool's name.
        name: String,
        /// The tool's input. Shared: a scripted or replayed call hands every
        /// conversation that holds it the same value, and a JSON object costs
        /// hundreds of bytes a copy.
        input: std::sync::Arc<serde_json::Value>,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the call this answers.
        tool_use_id: String,
        /// The result text.
        content: String,
        /// Whether the call failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// A cache breakpoint after this block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl ContentBlock {
    /// A text block without a breakpoint.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: Vec<ContentBlock>,
}

/// Extended-thinking settings; part of the cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingConfig {
    /// Thinking on, with a token budget.
    Enabled {
        /// Tokens the model may think for.
        budget_tokens: u32,
    },
    /// Thinking off.
    Disabled,
}

/// A Messages API request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model id, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The most output tokens the response may have.
    pub max_tokens: u32,
    /// Tools, first in the cache prefix. Shared: an agent sends the same tools
    /// with every request, and the requests of a run number in the thousands.
    #[serde(default, skip_serializing_if = "is_empty_list")]
    pub tools: Arc<Vec<ToolDefinition>>,
    /// System prompt blocks, after tools in the cache prefix. Shared, as `tools`.
    #[serde(default, skip_serializing_if = "is_empty_list")]
    pub system: Arc<Vec<SystemBlock>>,
    /// The conversation, last in the cache prefix.
    pub messages: Vec<Message>,
    /// Extended thinking, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
}

fn is_empty_list<T>(list: &Arc<Vec<T>>) -> bool {
    list.is_empty()
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The turn is over.
    EndTurn,
    /// The model wants its tool calls run.
    ToolUse,
    /// `max_tokens` was reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// A long-running turn paused; send it back to continue.
    PauseTurn,
    /// The model declined.
    Refusal,
}

/// Cache-write tokens split by TTL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written with a five-minute TTL.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written with a one-hour TTL.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: u64,
}

/// Token usage of one response, in the API's shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens neither read from nor written to the cache.
    #[serde(default)]
    pub input_tokens: u64,
    /// Prompt tokens written to the cache (both TTLs).
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Prompt tokens read from the cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Cache writes split by TTL.
    #[serde(default)]
    pub cache_creation: CacheCreation,
    /// Generated tokens.
    #[serde(default)]
    pub output_tokens: u64,
}

/// A Messages API response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The response id (`msg_…`).
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// Always `assistant`.
    pub role: Role,
    /// What the model said and the tools it called.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// What it cost.
    pub usage: Usage,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// HTTP 429.
    #[error("rate limited (retry after {retry_after:?})")]
    RateLimited {
        /// What the `retry-after` header asked for.
        retry_after: Option<Duration>,
    },
    /// HTTP 529.
    #[error("model API overloaded")]
    Overloaded,
    /// No complete response within the deadline.
    #[error("model call timed out after {elapsed:?}")]
    Timeout {
        /// How long the call ran.
        elapsed: Duration,
    },
    /// The response ended early or did not parse.
    #[error("truncated or malformed response: {detail}")]
    Malformed {
        /// What was wrong.
        detail: String,
    },
    /// Any other API error status.
    #[error("model API error {status}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The API's error message.
        message: String,
    },
    /// The connection failed.
    #[error("transport error: {0}")]
    Transport(String),
}

impl ModelError {
    /// Whether the same request may succeed if sent again: a rate limit, an
    /// overload, a timeout, a failed connection, or an API status the API itself
    /// calls temporary (408 and 5xx). A malformed response or any other status
    /// would be met again. The session's retry loop, the only one, decides by this.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::RateLimited { .. }
            | ModelError::Overloaded
            | ModelError::Timeout { .. }
            | ModelError::Transport(_) => true,
            ModelError::Api { status, .. } => *status == 408 || (500..=599).contains(status),
            ModelError::Malformed { .. } => false,
        }
    }
}

/// A model: real API, scripted, or replayed from a recording.
pub trait Model: Send + Sync + Debug {
    /// Sends one request and waits for the whole response.
    ///
    /// One call is one attempt: a model does not retry, since the session's retry
    /// loop already does, within its one budget, and retries stacked on retries
    /// multiply. It reports a failure as a [`ModelError`] whose
    /// [`ModelError::is_transient`] says whether another attempt may help.
    ///
    /// The request is shared, not handed over: it carries the agent's whole
    /// conversation, which can run to megabytes, and the caller keeps it (to retry,
    /// to fork from, to take its messages back for the next turn). A model that
    /// must change a request copies it.
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>>;

    /// Whether the agent whose conversation is `messages` is compacted before its
    /// next request: `Some` decides, `None` (the default) leaves it to the
    /// session's threshold rule. A model replaying a recorded session answers
    /// from the recording, so that its compactions happen where they were
    /// recorded.
    fn compaction_wanted(&self, _messages: &[Message]) -> Option<bool> {
        None
    }
}
