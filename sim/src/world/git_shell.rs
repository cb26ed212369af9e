//! Real `git` for the Bash tool on the real disk: [`GitShell`].
//!
//! On the real disk the workspace is a git repository and the runtime's worktrees
//! are git's own ([`RootedGit`](super::RootedGit)). A worker that commits its work
//! in its worktree (`git commit -am …`) changes what the runtime's "has changes"
//! sees: the files are clean again, and the branch is ahead of its base. The
//! scripted shell runs nothing, so a commit it answered would leave the repository
//! as it was. [`GitShell`] runs a command that is one plain `git` invocation with the
//! host's git instead, in the worker's directory as the host names it, with a fixed
//! identity and date and without the host's configuration; every other command goes
//! to the shell it wraps.
//!
//! Only in a worktree the runtime made: a command in any other directory keeps its
//! scripted answer, as on every other disk, so that a scenario plays the same on
//! the real disk. And only a plain invocation: `git` then its subcommand, with no
//! option between them (`-C`, `-c`, `--git-dir`, `--work-tree` could point git at
//! another directory or configuration) and no shell syntax anywhere (`&&`, `;`,
//! pipes, redirections, substitutions), which would need a shell to mean what it
//! says. A command git runs is not held to the Bash call's timeout: the local
//! commands a worker runs end in milliseconds.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coord_runtime::world::{BoxFuture, Shell, ShellCommand, ShellOutput};

use super::git_worktrees::git_command;
use super::RootedRealDisk;

/// One `git` command [`GitShell`] ran, as its observer is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRun {
    /// The directory it ran in, as the run names it.
    pub cwd: PathBuf,
    /// Its subcommand (`commit`, `add`, `config`, …).
    pub subcommand: String,
    /// Its exit code; `None` when git could not be started or was killed.
    pub exit_code: Option<i32>,
}

/// Told of every command [`GitShell`] ran with git.
pub type GitObserver = Arc<dyn Fn(GitRun) + Send + Sync>;

/// A shell whose plain `git` commands in the runtime's worktrees run the host's
/// git on the real disk.
pub struct GitShell {
    inner: Arc<dyn Shell>,
    disk: RootedRealDisk,
    /// Where the runtime makes worktrees, as the run names it.
    worktrees_dir: PathBuf,
    observer: GitObserver,
}

impl fmt::Debug for GitShell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitShell")
            .field("inner", &self.inner)
            .field("root", &self.disk.root())
            .field("worktrees_dir", &self.worktrees_dir)
            .finish_non_exhaustive()
    }
}

impl GitShell {
    /// Runs plain `git` commands under `worktrees_dir` on `disk` (telling
    /// `observer` of each), and hands every other command to `inner`.
    pub fn new(
        inner: Arc<dyn Shell>,
        disk: RootedRealDisk,
        worktrees_dir: PathBuf,
        observer: GitObserver,
    ) -> Self {
        Self {
            inner,
            disk,
            worktrees_dir,
            observer,
        }
    }

    /// Runs git with `args` in the run's directory `cwd`. A directory outside the
    /// disk's root, or git that cannot start, is an answer with exit code 127, as a
    /// shell gives for a command it cannot run.
    fn run_git(&self, cwd: &Path, args: &[String]) -> ShellOutput {
        let ran = self
            .disk
            .host_path(cwd)
            .and_then(|host| git_command(&host).args(args).output());
        let output = match ran {
            Ok(output) => ShellOutput {
                exit_code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                timed_out: false,
            },
            Err(error) => ShellOutput {
                exit_code: Some(127),
                stdout: String::new(),
                stderr: format!("git: {error}\n"),
                timed_out: false,
            },
        };
        (self.observer)(GitRun {
            cwd: cwd.to_owned(),
            subcommand: args[0].clone(),
            exit_code: output.exit_code,
        });
        output
    }
}

impl Shell for GitShell {
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, io::Result<ShellOutput>> {
        let in_a_worktree = command.cwd.starts_with(&self.worktrees_dir);
        match plain_git_args(&command.command).filter(|_| in_a_worktree) {
            Some(args) => {
                let output = self.run_git(&command.cwd, &args);
                Box::pin(std::future::ready(Ok(output)))
            }
            None => self.inner.run(command),
        }
    }
}

/// The characters that make a command line more than one plain command for a
/// shell: operators, redirections, substitutions, globs and line breaks.
const SHELL_SYNTAX: &[char] = &[
    '&', '|', ';', '<', '>', '$', '`', '(', ')', '*', '?', '[', '\n', '\r',
];

/// The arguments after `git` when `command` is one plain git invocation (see the
/// module docs), else `None`.
fn plain_git_args(command: &str) -> Option<Vec<String>> {
    if command.contains(SHELL_SYNTAX) {
        return None;
    }
    let mut words = shlex::split(command)?;
    if words.first().map(String::as_str) != Some("git") {
        return None;
    }
    words.remove(0);
    let subcommand = words.first()?;
    (!subcommand.starts_with('-')).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_git_invocation_runs_git() {
        // Goal: what runs the host's git is exactly one git command whose options
        // cannot point it elsewhere. Method: split lines of each shape.
        let args = |line: &str| plain_git_args(line);
        assert_eq!(
            args("git commit -am 'Tune the notes'"),
            Some(vec![
                "commit".to_owned(),
                "-am".to_owned(),
                "Tune the notes".to_owned()
            ])
        );
        assert_eq!(
            args("git config --remove-section branch.worktree-notes"),
            Some(vec![
                "config".to_owned(),
                "--remove-section".to_owned(),
                "branch.worktree-notes".to_owned()
            ])
        );
        for line in [
            "cargo test",
            "git",
            "git -C /etc status",
            "git --git-dir=/tmp/x log",
            "git add -A && git commit -m x",
            "git log | head",
            "git commit -m \"$(date)\"",
            "git add *.rs",
            "git status\nrm -rf /",
            "git commit -m 'unterminated",
        ] {
            assert_eq!(args(line), None, "{line:?}");
        }
    }
}
