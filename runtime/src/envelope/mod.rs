//! The `<task-notification>` envelope: how a coordinator learns that a worker ended.
//!
//! The runtime builds envelopes from task state, out of band, and renders them with
//! every element body XML-escaped, so no text a worker produced can become markup.
//! [`parse_block`] finds envelopes in arbitrary text, including the raw, unescaped
//! envelopes that Claude Code itself writes, wherever those are well-formed.

mod parse;
mod render;
mod summary;

pub use parse::{
    parse_block, parse_block_with_warnings, EnvelopeWarning, EnvelopeWarningKind, ParsedBlock,
};
#[cfg(feature = "defects")]
pub use render::render_raw_result;
pub use render::{render, render_checked, render_to, RenderError};
pub use summary::{summary_completed, summary_failed, summary_first_line, summary_stopped};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::task::TaskStatus;

/// How a task ended, as the envelope says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeStatus {
    /// The worker finished.
    Completed,
    /// The worker failed.
    Failed,
    /// The worker was stopped.
    Killed,
    /// The worker's deadline expired. Only the `nexo` dialect says this on the wire;
    /// `claude-code` renders it as `killed`.
    Timeout,
}

impl EnvelopeStatus {
    /// Parses a wire status, ignoring ASCII case. Any other word is `None`, which
    /// means the surrounding text is not an envelope.
    pub fn parse(text: &str) -> Option<EnvelopeStatus> {
        [
            EnvelopeStatus::Completed,
            EnvelopeStatus::Failed,
            EnvelopeStatus::Killed,
            EnvelopeStatus::Timeout,
        ]
        .into_iter()
        .find(|status| status.as_str().eq_ignore_ascii_case(text))
    }

    /// The wire word.
    pub const fn as_str(self) -> &'static str {
        match self {
            EnvelopeStatus::Completed => "completed",
            EnvelopeStatus::Failed => "failed",
            EnvelopeStatus::Killed => "killed",
            EnvelopeStatus::Timeout => "timeout",
        }
    }

    /// The task status an envelope with this status reports.
    pub const fn task_status(self) -> TaskStatus {
        match self {
            EnvelopeStatus::Completed => TaskStatus::Completed,
            EnvelopeStatus::Failed => TaskStatus::Failed,
            EnvelopeStatus::Killed | EnvelopeStatus::Timeout => TaskStatus::Killed,
        }
    }
}

impl fmt::Display for EnvelopeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which published system's wire form to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// Claude Code: a deadline expiry is `killed`.
    ClaudeCode,
    /// nexo-rs: a deadline expiry is `timeout`.
    Nexo,
}

impl Dialect {
    /// The status word this dialect writes for `status`.
    pub const fn wire_status(self, status: EnvelopeStatus) -> EnvelopeStatus {
        match (self, status) {
            (Dialect::ClaudeCode, EnvelopeStatus::Timeout) => EnvelopeStatus::Killed,
            (_, status) => status,
        }
    }
}

/// The `<usage>` element.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeUsage {
    /// Tokens the worker used.
    pub total_tokens: u64,
    /// Tool calls the worker made.
    pub tool_uses: u64,
    /// How long the worker ran.
    pub duration_ms: u64,
}

/// The `<worktree>` element: where a worker's changes were kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeWorktree {
    /// The worktree's directory.
    pub path: String,
    /// The worktree's branch.
    pub branch: String,
}

/// One `<task-notification>`: the superset of the fields both dialects use.
///
/// Serialized to JSON with every key present and absent optional fields as `null`,
/// which is what `coordsim envelope parse --json` prints; `note` and `extra`, which
/// only newer dialects carry, appear only when present. Unknown JSON keys are refused,
/// so that a misspelt key given to `envelope render` is not dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The task's id.
    pub task_id: String,
    /// The `tool_use` id of the spawning call.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// Where the task's output is.
    #[serde(default)]
    pub output_file: Option<String>,
    /// How the task ended.
    pub status: EnvelopeStatus,
    /// One line for a human.
    pub summary: String,
    /// The `<note>` Claude Code 2.1 adds ("The same task-id may notify more than once.").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The worker's final text.
    #[serde(default)]
    pub result: Option<String>,
    /// Tokens, tool calls, duration.
    #[serde(default)]
    pub usage: Option<EnvelopeUsage>,
    /// The kept worktree, if the worker changed files in one.
    #[serde(default)]
    pub worktree: Option<EnvelopeWorktree>,
    /// Elements this codec does not know, by name (`usage.<name>` for one inside
    /// `<usage>`), with their text: a newer dialect's additions are kept, not lost.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
}
