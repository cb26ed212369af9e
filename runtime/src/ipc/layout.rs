//! Where a session's bus files live.
//!
//! ```text
//! <root>/tasks/<taskId>.output              one task's output
//! <root>/teams/<team>/inboxes/<agent>.json  one agent's mailbox (+ .lock beside it)
//! <root>/scratch/<agentId>/<key>            the scratchpad
//! <root>/transcripts/<taskId>.jsonl         one worker's transcript (what resume reads)
//! <root>/session.json                       the session's stored mode and profile
//! ```
//!
//! In production `<root>` is `<temp>/<session>`; the simulator points it at its
//! simulated disk.

use std::path::{Path, PathBuf};

use super::name::{validate_segment, NameError};
use crate::task::TaskId;

/// The paths of one session's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLayout {
    root: PathBuf,
}

impl SessionLayout {
    /// A layout under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The session's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of task output files.
    pub fn tasks_dir(&self) -> PathBuf {
        self.root.join("tasks")
    }

    /// The output file of task `id`. Task ids are validated, so they are safe segments.
    pub fn task_output(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.output"))
    }

    /// The inbox directory of `team`.
    pub fn inboxes_dir(&self, team: &str) -> Result<PathBuf, NameError> {
        validate_segment("team name", team)?;
        Ok(self.root.join("teams").join(team).join("inboxes"))
    }

    /// The mailbox file of `agent` in `team`.
    pub fn inbox(&self, team: &str, agent: &str) -> Result<PathBuf, NameError> {
        validate_segment("agent name", agent)?;
        Ok(self.inboxes_dir(team)?.join(format!("{agent}.json")))
    }

    /// The transcript of task `id`.
    pub fn transcript(&self, id: &TaskId) -> PathBuf {
        self.root.join("transcripts").join(format!("{id}.jsonl"))
    }

    /// The session metadata file.
    pub fn session_file(&self) -> PathBuf {
        self.root.join("session.json")
    }

    /// The scratchpad directory.
    pub fn scratch_dir(&self) -> PathBuf {
        self.root.join("scratch")
    }
}
