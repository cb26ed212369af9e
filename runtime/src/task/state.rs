//! The state every task has, whatever its kind.

use std::path::PathBuf;
use std::time::Duration;

use super::{Progress, TaskId, TaskKind, TaskStatus};

/// The base state of a task (PROTOCOL.md §1).
///
/// `status` and `notified` are private: they change only through the
/// [`TaskRegistry`](super::TaskRegistry), which keeps their invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    /// The task's id.
    pub id: TaskId,
    /// What the task is for, as the spawner described it.
    pub description: String,
    /// The `tool_use` id of the call that spawned it, if any.
    pub tool_use_id: Option<String>,
    /// When it was created, in ms since the Unix epoch (from the injected clock).
    pub started_at_unix_ms: u64,
    /// When it reached a terminal state.
    pub ended_at_unix_ms: Option<u64>,
    /// Time spent paused (e.g. waiting for a permission answer).
    pub paused_total: Duration,
    /// Where its output goes.
    pub output_path: PathBuf,
    /// How far the coordinator has read its output.
    pub output_read_offset_bytes: u64,
    /// Tokens, tool calls, recent activities.
    pub progress: Progress,
    /// Who spawned it (`coordinator` or a task id), if known.
    pub parent: Option<String>,
    /// Whether it runs in the background (its spawner does not wait for it).
    pub background: bool,
    /// The task this one continues, for a resumed worker: a message to any task of
    /// the chain goes to its latest continuation, even after a restart.
    pub continues: Option<TaskId>,
    pub(super) status: TaskStatus,
    pub(super) notified: bool,
    /// Whether `notified` was set without a notification (TaskStop of a shell, a
    /// sync spawn's inline result).
    pub(super) suppressed: bool,
}

impl TaskState {
    /// A new pending task.
    pub fn new(
        id: TaskId,
        description: impl Into<String>,
        output_path: PathBuf,
        started_at_unix_ms: u64,
    ) -> Self {
        Self {
            id,
            description: description.into(),
            tool_use_id: None,
            started_at_unix_ms,
            ended_at_unix_ms: None,
            paused_total: Duration::ZERO,
            output_path,
            output_read_offset_bytes: 0,
            progress: Progress::default(),
            parent: None,
            background: true,
            continues: None,
            status: TaskStatus::Pending,
            notified: false,
            suppressed: false,
        }
    }

    /// The task's kind, from its id.
    pub fn kind(&self) -> TaskKind {
        self.id.kind()
    }

    /// The task's status.
    pub fn status(&self) -> TaskStatus {
        self.status
    }

    /// Whether its notification was enqueued (or deliberately suppressed).
    pub fn notified(&self) -> bool {
        self.notified
    }

    /// Whether it was marked notified without any notification being sent.
    pub fn notification_suppressed(&self) -> bool {
        self.suppressed
    }

    /// Wall time from start to end (or to `now_unix_ms` while running), minus pauses.
    pub fn active_duration(&self, now_unix_ms: u64) -> Duration {
        let end_ms = self.ended_at_unix_ms.unwrap_or(now_unix_ms);
        let total = Duration::from_millis(end_ms.saturating_sub(self.started_at_unix_ms));
        total.saturating_sub(self.paused_total)
    }
}
