//! The typed inputs of the file, shell, search and scratchpad tools.
//!
//! A tool's input arrives as JSON. It is parsed into one of these structs, each with
//! `deny_unknown_fields`, so a misspelt or invented field is a clear error rather than
//! something silently ignored. The [`ToolGate`](super::ToolGate) and
//! [`StandardTools`](super::StandardTools) parse with the same code, so the gate
//! checks exactly the path the tool will touch.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::{Path, PathBuf};

use super::surface::ToolName;
use crate::isolation::normalize;

/// `Read`: the text of a file, or a range of its lines.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The file; relative paths resolve against the caller's working directory.
    pub file_path: String,
    /// The 1-based line to start at (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to return (default: all).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `Write`: replace (or create) a file with `content`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// The file; relative paths resolve against the caller's working directory.
    pub file_path: String,
    /// The file's whole new content.
    pub content: String,
}

/// `Edit`: replace `old_string` with `new_string` in a file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    /// The file; relative paths resolve against the caller's working directory.
    pub file_path: String,
    /// The text to replace; must occur exactly once unless `replace_all`.
    pub old_string: String,
    /// Its replacement; must differ from `old_string`.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// `Bash`: run a command with `sh -c` in the caller's working directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command line.
    pub command: String,
    /// How long it may run, in milliseconds (default 120 000, at most 600 000).
    /// Claude Code calls this field `timeout`, which is accepted too.
    #[serde(default, alias = "timeout")]
    pub timeout_ms: Option<u64>,
    /// What the command is for, as the model describes it; not used.
    #[serde(default)]
    pub description: Option<String>,
}

/// `Glob`: files whose path matches a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// The pattern, relative to `path` (see [`GlobPattern`](super::GlobPattern)).
    pub pattern: String,
    /// The directory to search (default: the working directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// `Grep`: lines matching a regular expression.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// The regular expression (Rust `regex` syntax).
    pub pattern: String,
    /// A file or directory to search (default: the working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob (matched against the file name if it has
    /// no `/`, else against the path relative to `path`).
    #[serde(default)]
    pub glob: Option<String>,
}

/// `ScratchpadRead`: the value of a scratch key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchpadReadInput {
    /// The full key (by convention `<agentId>/<name>`).
    pub key: String,
}

/// `ScratchpadWrite`: set a scratch key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchpadWriteInput {
    /// The full key (by convention `<agentId>/<name>`).
    pub key: String,
    /// The new value.
    pub content: String,
}

/// The parsed input of one of the tools [`StandardTools`](super::StandardTools)
/// implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolInput {
    /// `Read`.
    Read(ReadInput),
    /// `Write`.
    Write(WriteInput),
    /// `Edit`.
    Edit(EditInput),
    /// `Bash`.
    Bash(BashInput),
    /// `Glob`.
    Glob(GlobInput),
    /// `Grep`.
    Grep(GrepInput),
    /// `ScratchpadRead`.
    ScratchpadRead(ScratchpadReadInput),
    /// `ScratchpadWrite`.
    ScratchpadWrite(ScratchpadWriteInput),
}

/// Why a tool's input could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input for {tool}: {message}")]
pub struct InputError {
    /// The tool.
    pub tool: ToolName,
    /// What is wrong, as serde says it (names the missing or unknown field).
    pub message: String,
}

impl ToolInput {
    /// Parses `input` for `tool`. `Ok(None)` if `tool` is not one of the standard
    /// tools (its input is someone else's to check).
    pub fn parse(
        tool: ToolName,
        input: &serde_json::Value,
    ) -> Result<Option<ToolInput>, InputError> {
        fn typed<T: DeserializeOwned>(
            tool: ToolName,
            input: &serde_json::Value,
        ) -> Result<T, InputError> {
            T::deserialize(input).map_err(|error| InputError {
                tool,
                message: error.to_string(),
            })
        }
        let parsed = match tool {
            ToolName::Read => ToolInput::Read(typed(tool, input)?),
            ToolName::Write => ToolInput::Write(typed(tool, input)?),
            ToolName::Edit => ToolInput::Edit(typed(tool, input)?),
            ToolName::Bash => ToolInput::Bash(typed(tool, input)?),
            ToolName::Glob => ToolInput::Glob(typed(tool, input)?),
            ToolName::Grep => ToolInput::Grep(typed(tool, input)?),
            ToolName::ScratchpadRead => ToolInput::ScratchpadRead(typed(tool, input)?),
            ToolName::ScratchpadWrite => ToolInput::ScratchpadWrite(typed(tool, input)?),
            _ => return Ok(None),
        };
        Ok(Some(parsed))
    }
}

/// The absolute path a tool's `file_path` names: relative paths are joined to `cwd`,
/// then `.` and `..` are applied lexically. A path whose `..` climbs above `/` is
/// returned joined but unnormalised (the disk will reject or resolve it; the
/// worktree check treats it as outside).
pub fn resolve_path(cwd: &Path, file_path: &str) -> PathBuf {
    let joined = cwd.join(file_path);
    normalize(&joined).unwrap_or(joined)
}
