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
    /// A tool call was refused before it had any effect.
    ToolCallRefused {
        /// The calling agent (`coordinator` or a task id).
        agent: String,
        /// The tool's name as called.
        tool: String,
        /// Why (not on the caller's surface, bad input, modified since read, …).
        reason: String,
    },
    /// A Write or Edit targeted a file that changed since the writer last read it
    /// (or that it never read while it existed): a potential lost update.
    WriteModifiedSinceRead {
        /// The writing agent.
        agent: String,
        /// The file.
        path: PathBuf,
        /// Whether the profile refused the write (otherwise it went through).
        refused: bool,
    },
    /// A fork's request prefix differed from its parent's: the prompt cache breaks.
    CacheBreak {
        /// The forking agent.
        agent: String,
        /// The cache-key part that changed (`tools`, `system`, `model`, `thinking`,
        /// `max_tokens`, `messages`).
        part: String,
        /// Index of the first differing block within that part, if it is a list.
        block_index: Option<usize>,
        /// Byte offset in the serialized request prefix where the two first differ.
        byte_offset: u64,
    },
    /// A worker was spawned.
    TaskSpawned {
        /// The task.
        task_id: TaskId,
        /// The spawning agent.
        parent: String,
        /// Whether it runs in the background.
        run_in_background: bool,
    },
    /// A spawn's deadline expired before its worker notified; the runtime ended it.
    DeadlineExpired {
        /// The task.
        task_id: TaskId,
    },
    /// A message for a running agent was queued until its next tool-round boundary.
    MessageQueued {
        /// The recipient.
        to: String,
        /// The sender.
        from: String,
    },
    /// Queued messages were handed to an agent at a tool-round boundary.
    MessagesDelivered {
        /// The recipient.
        to: String,
        /// How many.
        count: usize,
    },
    /// A stopped or evicted worker was resumed from its transcript with a new message.
    WorkerResumed {
        /// The task that had ended.
        task_id: TaskId,
        /// The new task that continues its transcript.
        resumed_as: TaskId,
        /// Unresolved tool uses dropped from the transcript.
        dropped_tool_uses: usize,
    },
    /// A worker's worktree was removed because it had no changes.
    WorktreeRemoved {
        /// The worktree's directory.
        path: PathBuf,
    },
    /// A worker's worktree was kept because it has changes.
    WorktreeKept {
        /// The worktree's directory.
        path: PathBuf,
        /// Its branch.
        branch: String,
    },
    /// A team member went idle (its turn ended with nothing queued).
    MemberIdle {
        /// The team.
        team: String,
        /// The member.
        member: String,
    },
    /// A permission request was forwarded to the team lead's mailbox.
    PermissionForwarded {
        /// The team.
        team: String,
        /// The requesting member.
        member: String,
        /// The tool it asked to use.
        tool: String,
    },
    /// Notifications were injected into the coordinator's conversation as one
    /// user-role message at a turn boundary.
    NotificationsDelivered {
        /// The tasks whose envelopes were delivered, in order.
        task_ids: Vec<String>,
    },
    /// A model call failed with a transient error and will be retried after
    /// `delay_ms`.
    ModelCallRetried {
        /// The agent (task id, or `coordinator`).
        agent: String,
        /// The attempt that failed (from 1).
        attempt: u32,
        /// How long the runtime waits before the next attempt.
        delay_ms: u64,
        /// The error.
        error: String,
    },
    /// A worker was recorded as spawned under a binding (nexo): only that binding's
    /// SendMessageToWorker calls may reach it.
    WorkerBound {
        /// The binding key, `<channel>:<account|default>`.
        binding: String,
        /// The worker.
        worker: TaskId,
    },
    /// A SendMessageToWorker call looked a worker up under the caller's binding.
    WorkerLookedUp {
        /// The caller's binding key.
        binding: String,
        /// The worker id asked for, as given.
        worker_id: String,
        /// Whether the answer showed the worker exists (continued, or still
        /// running) rather than answering `UnknownWorker`.
        found: bool,
    },
    /// A coordinator or worker model call failed.
    ModelCallFailed {
        /// The calling agent.
        agent: String,
        /// The error.
        error: String,
    },
    /// An agent's conversation was compacted: a summary of it replaced it before
    /// the agent's next request.
    Compacted {
        /// The agent (task id, or `coordinator`).
        agent: String,
        /// What started it: `auto` (the context passed the threshold).
        trigger: String,
        /// The context size, in tokens, that passed the threshold.
        pre_tokens: u64,
        /// The summary's size.
        summary_bytes: u64,
    },
    /// An agent's compaction call failed (after its retries): the agent goes on
    /// with its conversation uncompacted, and tries again before its next request.
    CompactionFailed {
        /// The agent (task id, or `coordinator`).
        agent: String,
        /// The model's error.
        error: String,
    },
    /// A task's durable record could not be written: until a later write of it
    /// succeeds, a crash of the host loses what the record would have said.
    TaskRecordUnsaved {
        /// The task.
        task_id: TaskId,
        /// The disk's error.
        error: String,
    },
    /// A task record on disk could not be read back after a restart; the task it
    /// names (when its file name is a task id) is recovered as failed.
    TaskRecordUnreadable {
        /// The record file.
        path: PathBuf,
        /// Why it could not be read.
        detail: String,
    },
    /// A guard fired (see [`crate::probe`]).
    ProbeReached {
        /// Which guard.
        probe: crate::probe::Probe,
    },
    /// A restarted runtime reloaded its tasks from disk: tasks that were still
    /// running died with the previous process and were failed; terminal tasks whose
    /// notification never reached the coordinator's durable conversation were
    /// notified again.
    SessionRestored {
        /// Tasks reloaded from their records.
        tasks: usize,
        /// Tasks failed because they were running when the host went down.
        died: Vec<TaskId>,
        /// Terminal tasks notified again because no delivery was durable.
        renotified: Vec<TaskId>,
    },
}
