//! Ending: how a task ends exactly once, by its worker, its deadline or a stop, and
//! how its result reaches whoever waits for it.

#[cfg(feature = "defects")]
use crate::defects::Defect;
use crate::envelope::{
    summary_completed, summary_failed, summary_first_line, summary_stopped, Envelope,
    EnvelopeStatus, EnvelopeUsage,
};
use crate::event::RuntimeEvent;
use crate::ipc::read_output;
use crate::probe::Probe;
use crate::task::{TaskId, TaskState, TaskStatus};

use super::*;

impl Session {
    /// The deadline of task `id` has passed: a worker still running is killed and
    /// a `timeout` envelope synthesized; a worker that ended but never notified
    /// (it died between its last write and its notification) is notified now.
    pub fn expire(&self, id: &TaskId) {
        let mut state = self.state();
        let Some(task) = state.registry.get(id) else {
            return;
        };
        let already_notified = task.notified();
        // Defect `duplicate-notification`: an ended, notified task is ended again.
        #[cfg(feature = "defects")]
        let already_notified =
            already_notified && !self.inner.config.defects.has(Defect::DuplicateNotification);
        if already_notified {
            Probe::SecondEndingIgnored.reach(&*self.inner.world.journal);
            return;
        }
        let envelope_status = if task.status().is_terminal() {
            envelope_status_of(task.status())
        } else {
            let now_ms = self.inner.world.clock.unix_ms();
            state
                .registry
                .transition(id, TaskStatus::Killed, now_ms)
                .expect("a live task can be killed");
            self.inner
                .world
                .journal
                .record(RuntimeEvent::DeadlineExpired {
                    task_id: id.clone(),
                });
            Probe::DeadlineExpired.reach(&*self.inner.world.journal);
            EnvelopeStatus::Timeout
        };
        if let Some(worker) = state.workers.get(id) {
            worker.token.cancel();
            worker.done.cancel();
        }
        let partial = self.output_text(id, &state);
        self.deliver(&mut state, id, envelope_status, partial);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// Ends worker `id` as its loop saw it. A task already ended (by its deadline or
    /// a stop) is left as it is: it ends exactly once.
    pub(crate) fn finish(&self, id: &TaskId, end: WorkerEnd) {
        let mut state = self.state();
        let Some(task) = state.registry.get(id) else {
            return;
        };
        if let Some(worker) = state.workers.get(id) {
            worker.done.cancel();
        }
        if task.status().is_terminal() {
            Probe::SecondEndingIgnored.reach(&*self.inner.world.journal);
            return;
        }
        // A completed result must survive a crash once its envelope is out
        // (invariant 13): the output file and its directory entry are synced first.
        let end = match end {
            WorkerEnd::Completed(text) => match self.sync_output(id, &state) {
                Ok(()) => {
                    Probe::OutputSynced.reach(&*self.inner.world.journal);
                    WorkerEnd::Completed(text)
                }
                Err(error) => {
                    Probe::OutputSyncFailed.reach(&*self.inner.world.journal);
                    WorkerEnd::Failed(format!(
                        "the task's output file could not be made durable: {error}"
                    ))
                }
            },
            end => end,
        };
        let (status, envelope_status, text) = match end {
            WorkerEnd::Completed(text) => (TaskStatus::Completed, EnvelopeStatus::Completed, text),
            WorkerEnd::Failed(error) => (TaskStatus::Failed, EnvelopeStatus::Failed, error),
            WorkerEnd::Killed => {
                let partial = self.output_text(id, &state);
                (TaskStatus::Killed, EnvelopeStatus::Killed, partial)
            }
        };
        let now_ms = self.inner.world.clock.unix_ms();
        state
            .registry
            .transition(id, status, now_ms)
            .expect("a live task can end");
        self.deliver(&mut state, id, envelope_status, text);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// Makes task `id`'s output file durable: its data, then its directory entry.
    fn sync_output(&self, id: &TaskId, state: &State) -> std::io::Result<()> {
        let Some(task) = state.registry.get(id) else {
            return Ok(());
        };
        self.inner
            .world
            .disk
            .sync_file_and_parent(&task.output_path)
    }

    /// Hands a terminal task's result to whoever waits for it: the sync spawner, or
    /// the coordinator through an envelope built from task state.
    fn deliver(&self, state: &mut State, id: &TaskId, status: EnvelopeStatus, text: String) {
        // An ended agent writes nothing more: the versions it saw would only grow
        // the gate's table for the rest of the session.
        self.inner.gate.forget_agent(id.as_str());
        let (waiter, worktree, style) = match state.workers.get_mut(id) {
            Some(worker) => (
                worker.sync_waiter.take(),
                worker.worktree.clone(),
                worker.summary_style,
            ),
            None => (None, None, SummaryStyle::Agent),
        };
        if let Some(waiter) = waiter {
            // A sync spawn returns the result inline; no envelope follows it.
            let _ = state.registry.suppress_notification(id);
            let task_status = state
                .registry
                .get(id)
                .map_or(TaskStatus::Killed, TaskState::status);
            let _ = waiter.send((task_status, text));
            return;
        }
        let finished = FinishedTask {
            status,
            summary_style: style,
            text,
            usage_at_unix_ms: Some(self.inner.world.clock.unix_ms()),
            worktree,
        };
        state
            .registry
            .notify(id, |task| finished.envelope(task))
            .expect("a terminal task can be notified");
    }

    /// The whole output of task `id`, decoded lossily (the partial result of a
    /// stopped worker). A read that fails part way ends the text with
    /// [`output_unreadable_notice`], so that the coordinator is told the result is
    /// cut short rather than handed a shorter one as if it were whole.
    pub(super) fn output_text(&self, id: &TaskId, state: &State) -> String {
        let Some(task) = state.registry.get(id) else {
            return String::new();
        };
        let limits = self.inner.config.output_limits;
        let mut bytes = Vec::new();
        let mut offset = 0;
        let failure = loop {
            match read_output(&self.inner.world, &task.output_path, offset, limits) {
                Ok(chunk) if chunk.bytes.is_empty() => break None,
                Ok(chunk) => {
                    bytes.extend_from_slice(&chunk.bytes);
                    offset = chunk.next_offset_bytes;
                }
                Err(error) => break Some(error),
            }
        };
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some(error) = failure {
            Probe::OutputUnreadable.reach(&*self.inner.world.journal);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&output_unreadable_notice(offset, &error.to_string()));
        }
        text
    }
}

/// How a stopped task's result that could not be read whole ends: after the
/// bytes read, on a line of its own.
pub const OUTPUT_UNREADABLE_OPEN: &str = "[output file unreadable after ";

/// The line that ends the result of a task whose output file failed to read
/// after `offset_bytes` bytes, with `error`.
pub fn output_unreadable_notice(offset_bytes: u64, error: &str) -> String {
    format!("{OUTPUT_UNREADABLE_OPEN}{offset_bytes} bytes: {error}]")
}

/// What a finished task's `<task-notification>` says beyond the task's own state.
/// Every envelope the session sends is built here, from task state and never from
/// worker output (PROTOCOL.md §3): at the end of a task, and for a task a restarted
/// runtime reloads.
pub(super) struct FinishedTask {
    /// How the task ended.
    pub(super) status: EnvelopeStatus,
    /// How the summary is worded; a shell's envelope carries no result body.
    pub(super) summary_style: SummaryStyle,
    /// The worker's final text, its error or its partial output; a shell's exit.
    pub(super) text: String,
    /// When the task's usage is measured, in Unix milliseconds. `None` leaves the
    /// `<usage>` element out: a restarted runtime no longer knows the usage.
    pub(super) usage_at_unix_ms: Option<u64>,
    /// The worktree kept because it holds changes.
    pub(super) worktree: Option<EnvelopeWorktree>,
}

impl FinishedTask {
    /// The envelope reporting `task`.
    pub(super) fn envelope(self, task: &TaskState) -> Envelope {
        let summary = envelope_summary(
            self.summary_style,
            self.status,
            &task.description,
            &self.text,
        );
        // A shell's result is its output file, which the envelope names.
        let result = (self.summary_style != SummaryStyle::Shell).then_some(self.text);
        Envelope {
            task_id: task.id.to_string(),
            tool_use_id: task.tool_use_id.clone(),
            output_file: Some(task.output_path.display().to_string()),
            status: self.status,
            summary,
            result,
            usage: self.usage_at_unix_ms.map(|now_ms| EnvelopeUsage {
                total_tokens: task.progress.total_tokens(),
                tool_uses: task.progress.tool_uses,
                duration_ms: u64::try_from(task.active_duration(now_ms).as_millis())
                    .unwrap_or(u64::MAX),
            }),
            worktree: self.worktree,
            note: None,
            extra: Default::default(),
        }
    }
}

/// The envelope status that reports a terminal task status.
pub(super) fn envelope_status_of(status: TaskStatus) -> EnvelopeStatus {
    match status {
        TaskStatus::Completed => EnvelopeStatus::Completed,
        TaskStatus::Failed => EnvelopeStatus::Failed,
        _ => EnvelopeStatus::Killed,
    }
}

/// An envelope's `<summary>` for a task of `style` that ended `status` with `text`.
fn envelope_summary(
    style: SummaryStyle,
    status: EnvelopeStatus,
    description: &str,
    text: &str,
) -> String {
    match (style, status) {
        (SummaryStyle::Shell, EnvelopeStatus::Completed | EnvelopeStatus::Failed) => {
            format!("Background command \"{description}\" {status} ({text})")
        }
        (SummaryStyle::Shell, _) => format!("Background command \"{description}\" was stopped"),
        (SummaryStyle::FirstLine, EnvelopeStatus::Completed) => summary_first_line(text),
        (_, EnvelopeStatus::Completed) => summary_completed(description),
        (_, EnvelopeStatus::Failed) => summary_failed(description, text),
        (_, EnvelopeStatus::Killed | EnvelopeStatus::Timeout) => summary_stopped(description),
    }
}
