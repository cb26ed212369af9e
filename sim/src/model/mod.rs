//! Simulated models: scripted agents, and the Rust API for programmatic ones.
//!
//! A [`SimulatedModel`] is a `coord_runtime::world::Model`. It reads each request
//! into a [`ConversationView`], asks its [`ModelPolicy`] for a reply, and delivers it
//! after the reply's latency on the run's clock (virtual time in a simulation). The
//! latency is drawn from the run's latency stream, so a run stays a function of its
//! seed. [`ScriptPolicy`] plays declarative per-agent scripts with reactive
//! triggers; any other policy is a few lines of Rust.

mod compaction;
mod misreading;
mod policy;
mod script;
mod shared_input;
mod shell_answer;
mod shell_gate;
mod size;
mod view;

pub use compaction::{holds_summary, is_compaction_request, summary_of, summary_with};
pub use policy::{ModelPolicy, PolicyReply};
pub use script::{
    response_content, response_for, scripted_tool_use_id, scripted_tool_use_position, AgentScript,
    CallOutcome, Latency, RecordedPrompt, ScriptPolicy, ScriptedCompaction, ScriptedToolCall,
    ScriptedTurn, Trigger,
};
pub use shared_input::SharedInput;
pub use shell_answer::{Killed, ShellAnswer, ShellAnswers};
pub use shell_gate::{GatedShell, ShellGates};
pub use size::json_size_bytes;
pub use view::{
    ends_agent_work, wildcard_match, ConversationView, EnvelopeMemo, LaunchInput, SpawnAnswer,
    FORK_PLACEHOLDER_RESULT, WAITING_TEXT,
};

use std::fmt;
use std::sync::{Arc, Mutex};

use coord_runtime::world::{BoxFuture, Clock, Model, ModelError, ModelRequest, ModelResponse};
use rand_chacha::ChaCha8Rng;

/// A model whose replies come from a policy, after simulated latency.
pub struct SimulatedModel {
    policy: Arc<dyn ModelPolicy>,
    clock: Arc<dyn Clock>,
    latency_rng: Mutex<ChaCha8Rng>,
}

impl fmt::Debug for SimulatedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatedModel")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl SimulatedModel {
    /// A model playing `policy`, sleeping on `clock`, drawing latencies from
    /// `latency_rng` (use the run's `Streams::LATENCY` stream).
    pub fn new(
        policy: Arc<dyn ModelPolicy>,
        clock: Arc<dyn Clock>,
        latency_rng: ChaCha8Rng,
    ) -> Self {
        Self {
            policy,
            clock,
            latency_rng: Mutex::new(latency_rng),
        }
    }
}

impl SimulatedModel {
    /// Answers `request`, whose conversation a caller already read into `view`
    /// (`ConversationView::of(&request)`): a tap that reads it too need not read it
    /// twice.
    pub fn send_viewed(
        &self,
        request: &ModelRequest,
        view: &ConversationView,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        self.deliver(self.reply_viewed(request, view))
    }

    /// The policy's reply to `request` (read into `view`), not yet delivered: a tap
    /// that prices the call needs its latency, the time to the first token.
    pub fn reply_viewed(&self, request: &ModelRequest, view: &ConversationView) -> PolicyReply {
        let mut rng = self.latency_rng.lock().expect("latency stream poisoned");
        self.policy.reply(request, view, &mut *rng)
    }

    /// The clock replies are delivered on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Delivers `reply` after its latency.
    pub fn deliver(
        &self,
        reply: PolicyReply,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        match reply {
            PolicyReply::Respond {
                response, latency, ..
            } => {
                let sleep = self.clock.sleep(latency);
                Box::pin(async move {
                    sleep.await;
                    Ok(response)
                })
            }
            PolicyReply::Fail { error, latency } => {
                let sleep = self.clock.sleep(latency);
                Box::pin(async move {
                    sleep.await;
                    Err(error)
                })
            }
            PolicyReply::Hang => Box::pin(std::future::pending()),
        }
    }
}

impl Model for SimulatedModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        self.send_viewed(&request, &ConversationView::of(&request))
    }

    fn compaction_wanted(&self, messages: &[coord_runtime::world::Message]) -> Option<bool> {
        self.policy.compaction_wanted(messages)
    }
}
