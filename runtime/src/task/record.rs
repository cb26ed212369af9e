//! Task records: the part of a task's state that outlives its process.
//!
//! A [`TaskRecord`] is what a restarted runtime needs to account for a task it did
//! not see end: who it was, where its output went, how far it got, and whether its
//! notification was settled. The [`TaskRegistry`](super::TaskRegistry) hands every
//! change of a task to its [`TaskStore`], which decides where records live and how
//! they are made durable (the session keeps one file per task; see
//! `session::durable`).
//!
//! Progress and the output read offset are not recorded: they are advisory, and a
//! task that outlives a crash is a task that has ended.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Progress, TaskId, TaskKind, TaskState, TaskStatus};

/// The record format's version; a record with another version is unreadable.
pub const TASK_RECORD_VERSION: u32 = 1;

/// Where a task's notification stands, as far as the task itself knows. Whether
/// the coordinator actually received it is the coordinator's conversation's to say:
/// an enqueued envelope dies with the process until it is written there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationState {
    /// No notification yet.
    Pending,
    /// The envelope was enqueued for the coordinator.
    Enqueued,
    /// Marked notified with no notification (a stopped shell, a sync spawn).
    Suppressed,
}

/// A task's durable record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// [`TASK_RECORD_VERSION`].
    pub version: u32,
    /// The task.
    pub id: TaskId,
    /// Its kind (also encoded in the id; kept for readers of the file).
    pub kind: TaskKind,
    /// What the spawner said it was for.
    pub description: String,
    /// The `tool_use` id of the call that spawned it.
    pub tool_use_id: Option<String>,
    /// Who spawned it.
    pub parent: Option<String>,
    /// Whether it ran in the background.
    pub background: bool,
    /// Its status when the record was written.
    pub status: TaskStatus,
    /// Its notification's state.
    pub notification: NotificationState,
    /// Its output file.
    pub output_path: PathBuf,
    /// When it started, in ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// When it ended, if it has.
    pub ended_at_unix_ms: Option<u64>,
    /// The task it continues, for a resumed worker ([`TaskState::continues`]).
    /// Absent otherwise, and in records written before continuations were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<TaskId>,
}

impl TaskRecord {
    /// The record of `task` as it is now.
    pub fn of(task: &TaskState) -> TaskRecord {
        let notification = match (task.notified, task.suppressed) {
            (false, _) => NotificationState::Pending,
            (true, false) => NotificationState::Enqueued,
            (true, true) => NotificationState::Suppressed,
        };
        TaskRecord {
            version: TASK_RECORD_VERSION,
            id: task.id.clone(),
            kind: task.kind(),
            description: task.description.clone(),
            tool_use_id: task.tool_use_id.clone(),
            parent: task.parent.clone(),
            background: task.background,
            status: task.status,
            notification,
            output_path: task.output_path.clone(),
            started_at_unix_ms: task.started_at_unix_ms,
            ended_at_unix_ms: task.ended_at_unix_ms,
            continues: task.continues.clone(),
        }
    }

    /// The task this record describes, as a restarted runtime holds it before it
    /// settles the task. It is notified only if its notification was suppressed or
    /// `delivered_as` says its envelope reached the coordinator (an envelope merely
    /// enqueued was lost with the process). A delivered task is terminal whatever
    /// its record says: the record may lag its delivery (a write the disk refused),
    /// and then the delivered status, ended at `now_unix_ms`, is the one to keep.
    pub fn into_state(self, delivered_as: Option<TaskStatus>, now_unix_ms: u64) -> TaskState {
        let suppressed = self.notification == NotificationState::Suppressed;
        let (status, ended_at_unix_ms) = match delivered_as {
            Some(delivered) if !self.status.is_terminal() => {
                (delivered, self.ended_at_unix_ms.or(Some(now_unix_ms)))
            }
            _ => (self.status, self.ended_at_unix_ms),
        };
        let ended_at_unix_ms = match status.is_terminal() {
            true => ended_at_unix_ms.or(Some(now_unix_ms)),
            false => None,
        };
        TaskState {
            id: self.id,
            description: self.description,
            tool_use_id: self.tool_use_id,
            started_at_unix_ms: self.started_at_unix_ms,
            ended_at_unix_ms,
            paused_total: std::time::Duration::ZERO,
            output_path: self.output_path,
            output_read_offset_bytes: 0,
            progress: Progress::default(),
            parent: self.parent,
            background: self.background,
            continues: self.continues,
            status,
            notified: suppressed || delivered_as.is_some(),
            suppressed,
        }
    }
}

/// Where the registry writes task records. Called after every change of a task's
/// status or notification, with the registry's lock held, so records are written in
/// the order the changes happened.
pub trait TaskStore: Send + Sync + fmt::Debug {
    /// Makes `task`'s current record durable. A store that cannot reports it (to the
    /// journal); the registry goes on, since the change already happened in memory.
    fn save(&self, task: &TaskState);
}
