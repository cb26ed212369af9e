//! Background shell tasks: `Bash` with `run_in_background`.
//!
//! The command runs through the session's [`Shell`](crate::world::Shell), its output
//! goes to the task's output file, and it ends with a `Background command … (exit
//! code N)` envelope. TaskStop marks it notified before stopping it, so a stopped
//! shell sends no envelope at all.

use std::collections::VecDeque;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::{AgentRef, Session, SpawnError, SummaryStyle, WorkerEnd, WorkerHandle};
use crate::event::RuntimeEvent;
use crate::ipc::OutputWriter;
use crate::task::{TaskId, TaskKind, TaskState, TaskStatus};
use crate::world::ShellCommand;

impl Session {
    /// Starts `command` in the background as a `local_bash` task and returns its id.
    pub fn spawn_shell(
        &self,
        caller: &AgentRef,
        command: &str,
        description: &str,
        cwd: PathBuf,
    ) -> Result<TaskId, SpawnError> {
        let Some(shell) = self.inner.effects.shell.clone() else {
            return Err(SpawnError::Isolation("no shell is configured".into()));
        };
        let config = &self.inner.config;
        let token = self.token_of(caller).child_token();
        let id = {
            let mut state = self.state();
            let id = state
                .registry
                .allocate_id(TaskKind::LocalBash, &*self.inner.world.entropy);
            let output_path = self.inner.layout.task_output(&id);
            OutputWriter::create(&self.inner.world, &output_path, config.output_limits)
                .map_err(|e| SpawnError::Files(e.to_string()))?;
            state.registry.insert(TaskState::new(
                id.clone(),
                description,
                output_path,
                self.inner.world.clock.unix_ms(),
            ));
            state.workers.insert(
                id.clone(),
                WorkerHandle {
                    token: token.clone(),
                    done: CancellationToken::new(),
                    queued: VecDeque::new(),
                    sync_waiter: None,
                    name: None,
                    worktree: None,
                    summary_style: SummaryStyle::Shell,
                    team: None,
                    turn_token: CancellationToken::new(),
                },
            );
            id
        };
        self.inner.world.journal.record(RuntimeEvent::TaskSpawned {
            task_id: id.clone(),
            parent: caller.to_string(),
            run_in_background: true,
        });
        self.watch_deadline(&id);
        let session = self.clone();
        let shell_command = ShellCommand {
            command: command.to_owned(),
            cwd,
            timeout: config.spawn_deadline,
        };
        let task_id = id.clone();
        tokio::spawn(async move {
            let now_ms = session.inner.world.clock.unix_ms();
            if session
                .state()
                .registry
                .transition(&task_id, TaskStatus::Running, now_ms)
                .is_err()
            {
                return;
            }
            let end = tokio::select! {
                biased;
                _ = token.cancelled() => WorkerEnd::Killed,
                ran = shell.run(shell_command) => match ran {
                    Ok(output) => {
                        session.append_output(&task_id, &format!("{}{}", output.stdout, output.stderr));
                        match output.exit_code {
                            Some(0) => WorkerEnd::Completed("exit code 0".into()),
                            Some(code) => WorkerEnd::Failed(format!("exit code {code}")),
                            None => WorkerEnd::Failed("killed by a signal or timeout".into()),
                        }
                    }
                    Err(error) => WorkerEnd::Failed(format!("could not start: {error}")),
                },
            };
            session.finish(&task_id, end);
        });
        Ok(id)
    }
}
