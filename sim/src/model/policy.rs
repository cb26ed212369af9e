//! The programmatic model API: a policy sees the request and decides the reply.

use coord_runtime::world::{Message, ModelError, ModelRequest, ModelResponse};
use rand_chacha::rand_core::RngCore;
use std::fmt::Debug;
use std::time::Duration;

use super::view::ConversationView;

/// What a policy answers.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyReply {
    /// The response, delivered after `latency` of virtual time.
    Respond {
        /// The response.
        response: ModelResponse,
        /// How long the model takes.
        latency: Duration,
        /// Whether `response.usage` was recorded (a script's `usage`, a replayed
        /// transcript) rather than estimated: a cost model keeps recorded usage and
        /// replaces an estimate with its own.
        usage_recorded: bool,
    },
    /// An API failure, after `latency`.
    Fail {
        /// The error.
        error: ModelError,
        /// How long until it fails.
        latency: Duration,
    },
    /// No answer at all (a hung connection); only a deadline or abort ends the call.
    Hang,
}

/// A model policy: the Rust API for writing simulated models, for property tests and
/// for anything a script cannot say.
pub trait ModelPolicy: Send + Sync + Debug {
    /// Decides the reply to `request`, whose conversation is summarised in `view`.
    /// Latencies are drawn from `latency_rng`, the run's latency stream, so a policy
    /// is a pure function of the request and that stream.
    fn reply(
        &self,
        request: &ModelRequest,
        view: &ConversationView,
        latency_rng: &mut dyn RngCore,
    ) -> PolicyReply;

    /// Whether the agent whose conversation is `messages` is compacted before its
    /// next request (the runtime's [`Model::compaction_wanted`]): `Some` decides,
    /// `None` (the default) leaves it to the runtime's threshold rule.
    ///
    /// [`Model::compaction_wanted`]: coord_runtime::world::Model::compaction_wanted
    fn compaction_wanted(&self, _messages: &[Message]) -> Option<bool> {
        None
    }
}
