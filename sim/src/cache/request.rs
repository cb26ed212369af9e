//! Everything about a request except its blocks: who sends it, to which model, with
//! which thinking settings, and when.

use coord_runtime::world::ThinkingConfig;
use std::time::Duration;

/// One request's parameters; its prefix is a separate [`Prompt`](super::Prompt).
///
/// Times are virtual: a `Duration` since any epoch the caller keeps fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The organization; caches are never shared between organizations.
    pub organization: String,
    /// The model id; caches are never shared between models.
    pub model: String,
    /// Extended-thinking settings; changing them invalidates cached messages.
    pub thinking: Option<ThinkingConfig>,
    /// The conversation (agent, fork) this request continues. Requests naming the
    /// same conversation are expected to share their predecessor's prefix, so a
    /// miss caused by a changed prefix is reported as a
    /// [`CacheBreak`](super::CacheBreak).
    pub conversation: Option<String>,
    /// When the request reaches the API; lookups and TTL refreshes happen then.
    pub sent_at: Duration,
    /// When its response starts; entries it writes become readable then.
    pub response_started_at: Duration,
    /// Generated tokens, echoed into `usage.output_tokens`.
    pub output_tokens: u64,
}

impl Request {
    /// A request from `organization` to `model` sent at `sent_at`, without thinking,
    /// conversation or output tokens, whose response starts the moment it is sent.
    pub fn new(
        organization: impl Into<String>,
        model: impl Into<String>,
        sent_at: Duration,
    ) -> Self {
        Self {
            organization: organization.into(),
            model: model.into(),
            thinking: None,
            conversation: None,
            sent_at,
            response_started_at: sent_at,
            output_tokens: 0,
        }
    }

    /// The same request with thinking settings.
    pub fn thinking(mut self, thinking: Option<ThinkingConfig>) -> Self {
        self.thinking = thinking;
        self
    }

    /// The same request as part of `conversation`.
    pub fn conversation(mut self, conversation: impl Into<String>) -> Self {
        self.conversation = Some(conversation.into());
        self
    }

    /// The same request with its response starting `latency` after it is sent.
    pub fn first_token_after(mut self, latency: Duration) -> Self {
        self.response_started_at = self.sent_at + latency;
        self
    }

    /// The same request with `output_tokens` generated tokens.
    pub fn output_tokens(mut self, output_tokens: u64) -> Self {
        self.output_tokens = output_tokens;
        self
    }
}
