//! The Agent tool's input: a strict schema, so a typo is an error and not a default.

use serde::{Deserialize, Serialize};

use crate::ipc::{validate_segment, NameError};

/// The model a spawn runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelChoice {
    /// Claude Sonnet.
    Sonnet,
    /// Claude Opus.
    Opus,
    /// Claude Haiku.
    Haiku,
    /// The parent's model.
    Inherit,
}

/// Where a worker runs and which files it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationKind {
    /// A git worktree of its own.
    Worktree,
    /// Another host.
    Remote,
}

/// The permission mode a worker runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Ask for permission as configured.
    Default,
    /// Accept file edits without asking.
    AcceptEdits,
    /// Never ask.
    BypassPermissions,
    /// Plan only; no changes.
    Plan,
}

/// The Agent tool's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    /// A short description (3–5 words), used in summaries.
    pub description: String,
    /// The task for the worker.
    pub prompt: String,
    /// The agent definition to use (default `general-purpose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
    /// The model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelChoice>,
    /// Run without waiting for the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_in_background: Option<bool>,
    /// A name that makes the worker addressable by SendMessage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The team the worker joins as a teammate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_name: Option<String>,
    /// The permission mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// Isolation beyond sharing the parent's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationKind>,
    /// The working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Why an Agent tool input was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentInputError {
    /// Not the schema: unknown field, wrong type, bad enum value, missing field.
    #[error("invalid Agent input: {0}")]
    Schema(String),
    /// A required text is blank.
    #[error("Agent input field `{0}` must not be blank")]
    Blank(&'static str),
    /// A name or team name is not a safe path segment.
    #[error("Agent input: {0}")]
    BadName(#[from] NameError),
    /// A teammate needs a name to be addressed by.
    #[error("Agent input: `team_name` needs a `name` for the teammate")]
    TeammateWithoutName,
}

impl AgentInput {
    /// Parses and validates the tool call's input.
    pub fn parse(input: &serde_json::Value) -> Result<AgentInput, AgentInputError> {
        let parsed: AgentInput = serde_json::from_value(input.clone())
            .map_err(|error| AgentInputError::Schema(error.to_string()))?;
        if parsed.description.trim().is_empty() {
            return Err(AgentInputError::Blank("description"));
        }
        if parsed.prompt.trim().is_empty() {
            return Err(AgentInputError::Blank("prompt"));
        }
        if let Some(name) = &parsed.name {
            validate_segment("agent name", name)?;
        }
        if let Some(team) = &parsed.team_name {
            validate_segment("team name", team)?;
            if parsed.name.is_none() {
                return Err(AgentInputError::TeammateWithoutName);
            }
        }
        Ok(parsed)
    }
}
