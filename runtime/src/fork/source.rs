//! Where a fork comes from: the turn whose Agent call launches it, and the rule that
//! makes an Agent call a fork at all.
//!
//! An Agent call spawns a fork when it names the fork agent type, or names no type
//! while the fork experiment is on (PROTOCOL.md §2, §6). The fork then copies the
//! conversation of the turn that made the call: the request that turn sent, and the
//! assistant message holding the call.

use std::sync::Arc;

use super::guard::{ForkConfig, ForkError, ForkOrigin};
use super::params::CacheSafeParams;
use super::request::{build_fork, Fork};
use crate::profile::Profile;
use crate::world::{Message, ModelRequest};

/// The agent type that names a fork in the Agent tool's `subagent_type`.
pub const FORK_AGENT_TYPE: &str = "fork";

/// Whether agent type `agent_type` is the fork's.
pub fn is_fork_type(agent_type: &str) -> bool {
    agent_type == FORK_AGENT_TYPE
}

/// Whether an Agent call with `subagent_type` spawns a fork: a type chooses for
/// itself; without one, the fork experiment decides.
pub fn spawns_fork(subagent_type: Option<&str>, fork_experiment: bool) -> bool {
    match subagent_type {
        Some(agent_type) => is_fork_type(agent_type),
        None => fork_experiment,
    }
}

/// The conversation a fork would copy: the request that produced the assistant
/// message making the call, and that message.
#[derive(Debug)]
pub struct ForkSource {
    /// The turn's request, shared with the model call that sent it.
    pub request: Arc<ModelRequest>,
    /// The assistant message whose Agent call launches the fork.
    pub assistant: Message,
    /// The forking agent's own fork depth: 0 for an agent that is not a fork.
    pub depth: u32,
}

impl ForkSource {
    /// The fork that carries out `directive` from this turn, for a parent under
    /// `profile` (a coordinator when `coordinator_mode`), behind the guards, and the
    /// cache-safe parameters its first request must reuse.
    ///
    /// # Errors
    /// The refusals of [`build_fork`].
    pub fn fork(
        &self,
        directive: &str,
        profile: Profile,
        coordinator_mode: bool,
    ) -> Result<(CacheSafeParams, Fork), ForkError> {
        let params = CacheSafeParams::from_request(&self.request);
        let origin = ForkOrigin::main_thread(profile)
            .with_coordinator_mode(coordinator_mode)
            .with_depth(self.depth);
        let fork = build_fork(
            &params,
            &self.assistant,
            directive,
            &origin,
            &ForkConfig::default(),
        )?;
        Ok((params, fork))
    }

    /// The agent's conversation after the turn: the request's messages, which
    /// moved into it for the model call, and the assistant's answer.
    pub fn conversation_after(self) -> Vec<Message> {
        // The model call is over and dropped its share: the messages move out, and
        // are copied only if a model kept the request.
        let mut messages = Arc::unwrap_or_clone(self.request).messages;
        messages.push(self.assistant);
        messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_call_is_a_fork_by_its_type_or_by_the_experiment() {
        assert!(spawns_fork(Some(FORK_AGENT_TYPE), false));
        assert!(!spawns_fork(Some("worker"), true));
        assert!(spawns_fork(None, true));
        assert!(!spawns_fork(None, false));
    }
}
