//! Background shell tasks: `Bash` with `run_in_background`.
//!
//! The command runs through the session's [`Shell`](crate::world::Shell), its output
//! goes to the task's output file, and it ends with a `Background command … (exit
//! code N)` envelope. TaskStop marks it notified before stopping it, so a stopped
//! shell sends no envelope at all.

use std::path::PathBuf;

use super::{AgentRef, NewTask, Registered, Session, SpawnError, SummaryStyle, WorkerEnd};
use crate::task::{TaskId, TaskKind};
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
        let Registered { id, token, .. } = self.register_task(
            caller,
            NewTask {
                kind: TaskKind::LocalBash,
                description: description.to_owned(),
                tool_use_id: None,
                name: None,
                team: None,
                summary_style: SummaryStyle::Shell,
                sync: false,
                continues: None,
            },
        )?;
        self.announce(caller, &id, true);
        let session = self.clone();
        let shell_command = ShellCommand {
            command: command.to_owned(),
            cwd,
            timeout: config.spawn_deadline,
        };
        let task_id = id.clone();
        tokio::spawn(async move {
            let now_ms = session.inner.world.clock.unix_ms();
            let started = session.state().registry.start(&task_id, now_ms);
            if !matches!(started, Ok(true)) {
                return;
            }
            let end = tokio::select! {
                biased;
                _ = token.cancelled() => WorkerEnd::Killed,
                ran = shell.run(shell_command) => match ran {
                    Ok(output) => {
                        let written = session
                            .append_output(&task_id, &format!("{}{}", output.stdout, output.stderr));
                        match output.exit_code {
                            _ if written.is_err() => {
                                WorkerEnd::Failed(written.err().unwrap_or_default())
                            }
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
