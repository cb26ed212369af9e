//! Worker transcripts: JSONL on disk, one line per message, what resume reads.
//!
//! ```text
//! {"type":"header","task_id":"a…","description":"…","agent_type":"worker","resumed_from":null}
//! {"type":"message","message":{"role":"user","content":[…]}}
//! {"type":"compact_boundary","trigger":"auto","pre_tokens":170251,"message":{"role":"user","content":[…]}}
//! ```
//!
//! A compaction boundary carries the message that replaced the conversation (the
//! continuation preamble and the summary): reading the transcript for a resume
//! starts from the last boundary's message, as the agent went on from it. The
//! boundary is one line, so a torn append loses it whole or not at all.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::world::{ContentBlock, Message, Role, World};

/// The first line of a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptHeader {
    /// The task the transcript belongs to.
    pub task_id: String,
    /// The spawn's description.
    pub description: String,
    /// The agent definition.
    pub agent_type: String,
    /// The task this one continues, if it is a resume.
    pub resumed_from: Option<String>,
    /// The team membership of a teammate's transcript, so a resumed teammate keeps
    /// its team and its permission mode. Absent for other workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teammate: Option<TranscriptTeammate>,
}

/// Who a teammate is in its team, as its transcript keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptTeammate {
    /// The team's name.
    pub team: String,
    /// The member's name in the team.
    pub member: String,
    /// The permission mode it was spawned with.
    pub mode: crate::agent::PermissionMode,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Header(TranscriptHeader),
    Message {
        message: Message,
    },
    CompactBoundary {
        trigger: String,
        pre_tokens: u64,
        message: Message,
    },
}

/// [`Line::Message`] as written: the same JSON, borrowing the message rather than
/// copying it (a worker's message can be megabytes).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum LineOut<'a> {
    Message {
        message: &'a Message,
    },
    CompactBoundary {
        trigger: &'a str,
        pre_tokens: u64,
        message: &'a Message,
    },
}

/// Why a transcript could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Reading or writing failed.
    #[error("transcript {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A line is not a transcript line.
    #[error("transcript {path}:{line}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the parser said.
        detail: String,
    },
    /// The file has no header line.
    #[error("transcript {0} has no header")]
    NoHeader(PathBuf),
}

/// Appends to one worker's transcript.
#[derive(Debug)]
pub struct TranscriptWriter {
    world: World,
    path: PathBuf,
}

impl TranscriptWriter {
    /// Creates the transcript at `path` with its header.
    pub fn create(
        world: &World,
        path: &Path,
        header: TranscriptHeader,
    ) -> Result<Self, TranscriptError> {
        let io_error = |source| TranscriptError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            world.disk.create_dir_all(dir).map_err(io_error)?;
        }
        let mut line = serde_json::to_vec(&Line::Header(header)).expect("headers serialize");
        line.push(b'\n');
        world.disk.create_new(path, &line).map_err(io_error)?;
        Ok(Self {
            world: world.clone(),
            path: path.to_owned(),
        })
    }

    /// Appends one message.
    pub fn append(&self, message: &Message) -> Result<(), TranscriptError> {
        self.append_line(&LineOut::Message { message })
    }

    /// Appends a compaction boundary: the conversation was replaced by `message`
    /// (the continuation preamble and the summary) when its context was
    /// `pre_tokens`.
    pub fn append_compact_boundary(
        &self,
        trigger: &str,
        pre_tokens: u64,
        message: &Message,
    ) -> Result<(), TranscriptError> {
        self.append_line(&LineOut::CompactBoundary {
            trigger,
            pre_tokens,
            message,
        })
    }

    fn append_line(&self, line: &LineOut<'_>) -> Result<(), TranscriptError> {
        let mut line = crate::json::to_vec(line).expect("transcript lines serialize");
        line.push(b'\n');
        self.world
            .disk
            .append(&self.path, &line)
            .map(|_| ())
            .map_err(|source| TranscriptError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Flushes the transcript to stable storage: its bytes, then its directory
    /// entry. A finished worker may be resumed from its transcript once it is out
    /// of memory (PROTOCOL.md §1), and a new file's name survives a crash only
    /// once its directory is synced.
    pub fn sync(&self) -> Result<(), TranscriptError> {
        self.world
            .disk
            .sync_file_and_parent(&self.path)
            .map_err(|source| TranscriptError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// A transcript read back for a resume.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// Its header.
    pub header: TranscriptHeader,
    /// Its messages, in order.
    pub messages: Vec<Message>,
}

impl Transcript {
    /// Reads the transcript at `path`. A torn last line (a crash mid-append) is
    /// ignored; any other bad line is an error with its line number.
    pub fn read(world: &World, path: &Path) -> Result<Transcript, TranscriptError> {
        let bytes = world
            .disk
            .read(path)
            .map_err(|source| TranscriptError::Io {
                path: path.to_owned(),
                source,
            })?;
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let complete_lines = if text.ends_with('\n') {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        let mut header = None;
        let mut messages = Vec::new();
        for (index, line) in lines.iter().take(complete_lines).enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line =
                serde_json::from_str(line).map_err(|error| TranscriptError::Corrupt {
                    path: path.to_owned(),
                    line: index + 1,
                    detail: error.to_string(),
                })?;
            match parsed {
                Line::Header(found) => header = Some(found),
                Line::Message { message } => messages.push(message),
                // The conversation before the boundary is what the summary covers.
                Line::CompactBoundary { message, .. } => messages = vec![message],
            }
        }
        let header = header.ok_or_else(|| TranscriptError::NoHeader(path.to_owned()))?;
        Ok(Transcript { header, messages })
    }
}

/// Drops tool results whose tool use is in no message (the append of the
/// assistant message that made the call failed, and a later one went through), and
/// any user message left empty by that: the Messages API refuses a result that
/// answers no call of the message before it. Returns how many were dropped.
pub fn drop_orphaned_tool_results(messages: &mut Vec<Message>) -> usize {
    let called: BTreeSet<String> = messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| message.content.iter())
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let mut dropped = 0;
    for message in messages.iter_mut() {
        if message.role != Role::User {
            continue;
        }
        message.content.retain(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } if !called.contains(tool_use_id) => {
                dropped += 1;
                false
            }
            _ => true,
        });
    }
    messages.retain(|message| !message.content.is_empty());
    dropped
}

/// Drops tool uses that never got a result (the worker stopped mid-round), and any
/// assistant message left empty by that. Returns how many tool uses were dropped.
pub fn drop_unresolved_tool_uses(messages: &mut Vec<Message>) -> usize {
    let resolved: BTreeSet<String> = messages
        .iter()
        .flat_map(|message| message.content.iter())
        .filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
            _ => None,
        })
        .collect();
    let mut dropped = 0;
    for message in messages.iter_mut() {
        if message.role != Role::Assistant {
            continue;
        }
        message.content.retain(|block| match block {
            ContentBlock::ToolUse { id, .. } if !resolved.contains(id) => {
                dropped += 1;
                false
            }
            _ => true,
        });
    }
    messages.retain(|message| !message.content.is_empty());
    dropped
}
