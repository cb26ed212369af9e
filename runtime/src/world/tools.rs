//! The tools boundary: what a worker's tool calls do to the world.

use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::path::PathBuf;

use super::BoxFuture;

/// One tool call, as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id (`toolu_…`).
    pub id: String,
    /// The tool's name (`Read`, `Write`, `Edit`, `Bash`, `Glob`, `Grep`, …).
    pub name: String,
    /// The tool's input.
    pub input: serde_json::Value,
}

/// Who is calling, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The calling agent's id (the coordinator or a task id).
    pub agent_id: String,
    /// The directory relative paths resolve against (the agent's worktree, if any).
    pub cwd: PathBuf,
}

/// What a tool call produced, as it goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The result text.
    pub content: String,
    /// Whether the call failed (the model sees the error text).
    pub is_error: bool,
}

/// Tools: real ones on the real disk, or scripted effects in a simulation.
pub trait Tools: Send + Sync + Debug {
    /// Runs one call. Failures the model should see are `ToolOutput { is_error: true }`.
    fn call(&self, context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput>;
}
