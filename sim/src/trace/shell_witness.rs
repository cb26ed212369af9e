//! The world's shell, witnessed: how every command it ran ended, as it answered
//! the runtime. A background shell's envelope is then judged against the ending
//! the shell gave, not the status the runtime chose to report.

use std::sync::Arc;

use coord_runtime::world::{Shell, ShellCommand, ShellOutput};
use futures_util::future::BoxFuture;

use super::{Name, SimEvent, Trace};

/// A shell whose every ending is recorded into the trace.
#[derive(Debug)]
pub struct WitnessedShell {
    inner: Arc<dyn Shell>,
    trace: Trace,
}

impl WitnessedShell {
    /// Witnesses the commands `inner` runs, into `trace`.
    pub fn new(inner: Arc<dyn Shell>, trace: Trace) -> Self {
        Self { inner, trace }
    }
}

impl Shell for WitnessedShell {
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>> {
        let line = Name::new(&command.command);
        let cwd = Name::from(super::path_text(&command.cwd));
        let ran = self.inner.run(command);
        let trace = self.trace.clone();
        Box::pin(async move {
            let output = ran.await?;
            trace.push(
                "shell",
                SimEvent::ShellEnded {
                    command: line,
                    cwd,
                    exit_code: output.exit_code,
                    timed_out: output.timed_out,
                },
            );
            Ok(output)
        })
    }
}
