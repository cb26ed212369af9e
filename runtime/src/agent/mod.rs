//! The Agent tool: agent definitions, the strict input schema, the async decision,
//! and the async launch result.

mod decision;
mod definition;
mod input;

pub use decision::{is_async, AsyncInputs};
pub use definition::{builtin_definitions, AgentDefinition, AgentRegistry, ToolGrant};
pub use input::{AgentInput, AgentInputError, IsolationKind, ModelChoice, PermissionMode};

use serde::{Deserialize, Serialize};

/// What an async spawn returns at once, in Claude Code's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncLaunch {
    /// Always `async_launched`.
    pub status: String,
    /// The worker's task id.
    pub agent_id: String,
    /// The spawn's description.
    pub description: String,
    /// Where the worker's output goes.
    pub output_file: String,
}

impl AsyncLaunch {
    /// The launch result for a worker.
    pub fn new(agent_id: &str, description: &str, output_file: &str) -> Self {
        Self {
            status: "async_launched".to_owned(),
            agent_id: agent_id.to_owned(),
            description: description.to_owned(),
            output_file: output_file.to_owned(),
        }
    }
}
