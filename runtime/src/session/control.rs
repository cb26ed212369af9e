//! Control of running tasks: TaskStop, TaskOutput, and messages queued for the
//! next tool-round boundary.

use crate::event::RuntimeEvent;
use crate::ipc::read_output;
use crate::task::{Lookup, TaskId, TaskKind, TaskStatus};
use std::time::Duration;

use super::*;

impl Session {
    /// TaskStop: stops running task `id`. An agent ends `killed` with its partial
    /// result in its envelope; a background shell is marked notified first, so it
    /// sends none.
    pub fn stop(&self, id: &str) -> Result<(), StopError> {
        let not_found = || StopError::NotFound(id.to_owned());
        let id = TaskId::parse(id).map_err(|_| not_found())?;
        let mut state = self.state();
        let status = match state.registry.lookup(&id) {
            Lookup::Live(task) => task.status(),
            Lookup::Evicted => TaskStatus::Completed,
            Lookup::Unknown => return Err(not_found()),
        };
        if status.is_terminal() {
            return Err(StopError::NotRunning {
                id: id.to_string(),
                status: status.to_string(),
            });
        }
        if id.kind() == TaskKind::LocalBash {
            state
                .registry
                .suppress_notification(&id)
                .expect("a live task can be suppressed");
        }
        if let Some(worker) = state.workers.get(&id) {
            worker.token.cancel();
        }
        Ok(())
    }

    /// TaskOutput: the output of task `id` not read before. With `block`, waits until
    /// the task ends or `timeout` passes.
    pub async fn task_output(
        &self,
        id: &str,
        block: bool,
        timeout: Duration,
    ) -> Result<TaskOutputReport, StopError> {
        let id = TaskId::parse(id).map_err(|_| StopError::NotFound(id.to_owned()))?;
        let clock = &self.inner.world.clock;
        let deadline = clock.monotonic() + timeout;
        let mut timed_out = false;
        loop {
            let change = self.next_change();
            let status = self
                .task(&id)
                .map(|task| task.status())
                .ok_or_else(|| StopError::NotFound(id.to_string()))?;
            if !block || status.is_terminal() {
                break;
            }
            let now = clock.monotonic();
            if now >= deadline {
                timed_out = true;
                break;
            }
            self.wait_for_change(change, deadline - now).await;
        }
        let mut state = self.state();
        let task = state
            .registry
            .get_mut(&id)
            .ok_or_else(|| StopError::NotFound(id.to_string()))?;
        let status = task.status();
        let chunk = read_output(
            &self.inner.world,
            &task.output_path,
            task.output_read_offset_bytes,
            self.inner.config.output_limits,
        )
        .map(|chunk| {
            task.output_read_offset_bytes = chunk.next_offset_bytes;
            String::from_utf8_lossy(&chunk.bytes).into_owned()
        })
        // Said, never an empty answer that reads as "nothing new"; the offset stays
        // where it was, so the next call reads the same bytes again.
        .unwrap_or_else(|error| {
            output_unreadable_notice(task.output_read_offset_bytes, &error.to_string())
        });
        Ok(TaskOutputReport {
            status,
            timed_out,
            output: chunk,
        })
    }

    /// Queues `text` for running worker `id`, to be delivered at its next tool-round
    /// boundary. Returns false if the worker is not running, or is ending and will
    /// take no more messages (the caller resumes it instead).
    pub fn queue_message(&self, from: &AgentRef, id: &TaskId, text: &str) -> bool {
        let mut state = self.state();
        let running = state
            .registry
            .get(id)
            .is_some_and(|task| !task.status().is_terminal());
        let Some(worker) = state.workers.get_mut(id) else {
            return false;
        };
        if !running || worker.queued.is_closed() {
            return false;
        }
        worker.queued.push(text);
        self.inner
            .world
            .journal
            .record(RuntimeEvent::MessageQueued {
                to: id.to_string(),
                from: from.to_string(),
            });
        true
    }
}
