//! The production version control under a run's virtual paths: [`RootedGit`].
//!
//! On the real disk (`disk = "real"`) the runtime's worktrees are made by
//! [`GitVcs`], the code that ships: `git worktree add` on a new branch, `git status`
//! and the recorded base for "has changes", `git worktree remove` and `git branch
//! -D`. The runtime still names its paths virtually (`/work/.claude/worktrees/…`);
//! this adapter maps them into the temp directory the real disk roots them in, and
//! maps the worktree git made back, so the trace and the checkers see the same paths
//! as on the simulated version control.
//!
//! The workspace becomes a real repository before the run starts
//! ([`init_repository`]): its files in one commit, made with a fixed identity and
//! date and without the host's git configuration, so the host cannot change what
//! the run does.
//!
//! What differs from [`SimVcs`](super::SimVcs): git's checkout writes the worktree's
//! files itself, outside the disk boundary, so the trace has no disk writes for a
//! checkout; and a worktree is a directory git knows about, with a `.git` file in it
//! and its branch in the repository, until it is removed.

use std::io;
use std::path::Path;
use std::process::Command;

use coord_runtime::world::{GitVcs, Vcs, Worktree};

use super::RootedRealDisk;

/// [`GitVcs`] on the real disk's temp directory, addressed by virtual paths.
#[derive(Debug)]
pub struct RootedGit {
    disk: RootedRealDisk,
    git: GitVcs,
}

impl RootedGit {
    /// The host's `git` on the directory `disk` roots the run's paths in.
    pub fn on(disk: RootedRealDisk) -> Self {
        Self {
            disk,
            git: GitVcs::new(),
        }
    }

    /// The real disk the repository is on.
    pub fn disk(&self) -> &RootedRealDisk {
        &self.disk
    }

    /// The worktree branches (`worktree-*`) of the repository at virtual path
    /// `repo`, sorted, as the host's git lists them.
    ///
    /// # Errors
    /// When `git` cannot be run or fails; the message holds git's own.
    pub fn worktree_branches(&self, repo: &Path) -> io::Result<Vec<String>> {
        let stdout = run_git(
            &self.disk.host_path(repo)?,
            &[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads/worktree-*",
            ],
        )?;
        let mut branches: Vec<String> = String::from_utf8_lossy(&stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        branches.sort();
        Ok(branches)
    }

    /// `worktree` with its path on the host.
    fn on_host(&self, worktree: &Worktree) -> io::Result<Worktree> {
        Ok(Worktree {
            path: self.disk.host_path(&worktree.path)?,
            branch: worktree.branch.clone(),
        })
    }
}

impl Vcs for RootedGit {
    fn create_worktree(&self, repo: &Path, slug: &str) -> io::Result<Worktree> {
        let made = self
            .git
            .create_worktree(&self.disk.host_path(repo)?, slug)?;
        Ok(Worktree {
            path: self.disk.virtual_path(&made.path),
            branch: made.branch,
        })
    }

    fn has_changes(&self, worktree: &Worktree) -> io::Result<bool> {
        self.git.has_changes(&self.on_host(worktree)?)
    }

    fn remove_worktree(&self, repo: &Path, worktree: &Worktree) -> io::Result<()> {
        self.git
            .remove_worktree(&self.disk.host_path(repo)?, &self.on_host(worktree)?)
    }
}

/// Makes the virtual directory `repo` on `disk` a git repository whose one commit
/// holds every file in it, as a checkout the workers start from.
///
/// # Errors
/// When `git` cannot be run or a command fails; the message names the command and
/// holds git's own.
pub fn init_repository(disk: &RootedRealDisk, repo: &Path) -> io::Result<()> {
    let host = disk.host_path(repo)?;
    run_git(&host, &["init", "--quiet", "--initial-branch=main"])?;
    run_git(&host, &["add", "--all"])?;
    run_git(&host, &["commit", "--quiet", "--message", "workspace"])?;
    Ok(())
}

/// Runs `git -C <dir> <args>`, as [`git_command`] sets it up, and returns what it
/// printed on its standard output.
fn run_git(dir: &Path, args: &[&str]) -> io::Result<Vec<u8>> {
    let output = git_command(dir)
        .args(args)
        .output()
        .map_err(|error| io::Error::new(error.kind(), format!("cannot run git: {error}")))?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(io::Error::other(format!(
        "git {} failed with {}: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// `git -C <dir>` with a fixed identity and date, without the host's system and
/// global configuration, and with nothing to ask: no terminal prompt, an editor
/// that leaves a message as it is, and no standard input. A run's commits are the
/// same on every host and every run.
pub(super) fn git_command(dir: &Path) -> Command {
    const DATE: &str = "2026-01-01T00:00:00Z";
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "coordsim")
        .env("GIT_AUTHOR_EMAIL", "coordsim@localhost")
        .env("GIT_AUTHOR_DATE", DATE)
        .env("GIT_COMMITTER_NAME", "coordsim")
        .env("GIT_COMMITTER_EMAIL", "coordsim@localhost")
        .env("GIT_COMMITTER_DATE", DATE)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .stdin(std::process::Stdio::null());
    command
}
