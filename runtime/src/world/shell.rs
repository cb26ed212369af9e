//! The shell boundary: what the Bash tool runs.

use std::fmt::Debug;
use std::path::PathBuf;
use std::time::Duration;

use super::BoxFuture;

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    /// The command line, run by `sh -c`.
    pub command: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// How long it may run before it is killed.
    pub timeout: Duration,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    /// Exit code; `None` if it was killed (timeout or signal).
    pub exit_code: Option<i32>,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
    /// Whether the timeout killed it.
    pub timed_out: bool,
}

/// Runs shell commands: real processes in production, scripted effects in simulation.
pub trait Shell: Send + Sync + Debug {
    /// Runs `command` to completion or timeout. An `Err` means it could not start.
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>>;
}

/// The production shell: `sh -c` through tokio, killed at its timeout.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealShell;

impl Shell for RealShell {
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>> {
        Box::pin(async move {
            let child = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(&command.command)
                .current_dir(&command.cwd)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()?;
            match tokio::time::timeout(command.timeout, child.wait_with_output()).await {
                Ok(output) => {
                    let output = output?;
                    Ok(ShellOutput {
                        exit_code: output.status.code(),
                        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                        timed_out: false,
                    })
                }
                // Dropping the future drops the child, and kill_on_drop kills it.
                Err(_) => Ok(ShellOutput {
                    exit_code: None,
                    stdout: String::new(),
                    stderr: format!("command timed out after {:?}", command.timeout),
                    timed_out: true,
                }),
            }
        })
    }
}
