//! Runtime events: what the runtime reports about itself.
//!
//! Events go to the injected [`Journal`](crate::Journal). In production they become log
//! lines; under simulation they become trace entries that the invariant checkers read,
//! so every event carries what a checker needs and nothing from the wall clock.

use serde::Serialize;
use std::path::PathBuf;

use crate::task::{TaskId, TaskStatus};

/// Something the runtime did or saw that an operator or a checker may care about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuntimeEvent {
    /// A task changed status.
    TaskTransitioned {
        /// The task.
        task_id: TaskId,
        /// Status before.
        from: TaskStatus,
        /// Status after.
        to: TaskStatus,
    },
    /// A task's completion notification was enqueued (at most once per task).
    NotificationEnqueued {
        /// The task.
        task_id: TaskId,
        /// The status the envelope carries.
        status: TaskStatus,
    },
    /// A task was marked notified without any notification (a stopped background shell).
    NotificationSuppressed {
        /// The task.
        task_id: TaskId,
    },
    /// A terminal, notified task was dropped from memory; it can be resumed from disk.
    TaskEvicted {
        /// The task.
        task_id: TaskId,
    },
    /// A task output file reached its size cap; later output was discarded.
    OutputTruncated {
        /// The output file.
        path: PathBuf,
        /// The cap that was reached.
        size_bytes_max: u64,
    },
    /// A lock file older than the stale threshold was broken.
    StaleLockBroken {
        /// The lock file.
        path: PathBuf,
        /// Who the lock file said held it.
        owner: String,
        /// How old the lock was when broken.
        age_ms: u64,
    },
    /// A lock file could not be parsed and was older than the stale threshold, so it
    /// was broken without knowing its owner.
    UnreadableLockBroken {
        /// The lock file.
        path: PathBuf,
    },
    /// A mailbox write succeeded (the message is durable in atomic mode).
    MailboxWritten {
        /// The inbox file.
        path: PathBuf,
        /// Who sent it.
        from: String,
        /// Messages in the inbox after the write.
        messages_count: usize,
    },
    /// A mailbox write gave up; the error was returned to the sender.
    MailboxWriteFailed {
        /// The inbox file.
        path: PathBuf,
        /// Who tried to send.
        from: String,
        /// Why it failed.
        reason: String,
    },
    /// A scratchpad key was written over by a writer that had not read the latest value.
    ScratchOverwritten {
        /// The key.
        key: String,
        /// The writer that overwrote it.
        writer: String,
        /// The writer of the value that was lost.
        previous_writer: String,
    },
}
