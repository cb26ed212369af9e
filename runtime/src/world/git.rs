//! The production version control: `git worktree`, driven through the `git` binary.
//!
//! A worktree for slug `s` lives at `<repo>/.claude/worktrees/<s>` on a new branch
//! `worktree-<s>` made from the repository's `HEAD` (with `/` in the slug mapped to
//! `+`, see [`WorktreeSlug`]). Its *base* — the commit `HEAD` pointed to at creation —
//! is recorded in the repository's config as `branch.<branch>.coordsimBase`, so that
//! "has changes" survives a restart of the runtime; `git branch -D` deletes that
//! config section together with the branch.
//!
//! Every git failure becomes an [`io::Error`] whose message holds the command and
//! git's stderr. Identity-dependent operations (commits) are never made here.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::vcs::{Vcs, Worktree};
use crate::isolation::WorktreeSlug;

/// The config key, under `branch.<name>`, that holds a worktree branch's base commit.
const BASE_CONFIG_KEY: &str = "coordsimBase";

/// The production [`Vcs`]: the `git` binary on the `PATH`.
#[derive(Debug, Default, Clone, Copy)]
pub struct GitVcs {
    _private: (),
}

impl GitVcs {
    /// A handle to the host's `git`.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Runs `git -C <dir> <args>` and returns its stdout; a non-zero exit is an error
/// naming the command and carrying git's stderr.
fn git(dir: &Path, args: &[&str]) -> io::Result<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // Never stop to ask for credentials or an editor.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| io::Error::new(error.kind(), format!("cannot run git: {error}")))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(io::Error::other(format!(
        "git {} (in {}) failed with {}: {}",
        args.join(" "),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

fn base_config_name(branch: &str) -> String {
    format!("branch.{branch}.{BASE_CONFIG_KEY}")
}

fn parse_slug(slug: &str) -> io::Result<WorktreeSlug> {
    WorktreeSlug::parse(slug).map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))
}

impl Vcs for GitVcs {
    fn create_worktree(&self, repo: &Path, slug: &str) -> io::Result<Worktree> {
        let slug = parse_slug(slug)?;
        let path: PathBuf = repo.join(slug.relative_path());
        let branch = slug.branch_name();
        let base = git(repo, &["rev-parse", "--verify", "HEAD^{commit}"])?;
        let base = base.trim();
        let path_text = path.to_str().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "repository path is not UTF-8")
        })?;
        // `worktree add` creates `.claude/worktrees/` as needed.
        git(repo, &["worktree", "add", "-b", &branch, path_text, base])?;
        if let Err(error) = git(repo, &["config", &base_config_name(&branch), base]) {
            // A worktree whose base is unknown would always look changed; undo it.
            let _ = self.remove_worktree(
                repo,
                &Worktree {
                    path: path.clone(),
                    branch: branch.clone(),
                },
            );
            return Err(error);
        }
        Ok(Worktree { path, branch })
    }

    fn has_changes(&self, worktree: &Worktree) -> io::Result<bool> {
        let status = git(
            &worktree.path,
            &["status", "--porcelain", "--untracked-files=all"],
        )?;
        if !status.trim().is_empty() {
            return Ok(true);
        }
        let head = git(
            &worktree.path,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/{}^{{commit}}", worktree.branch),
            ],
        )?;
        let base = match git(
            &worktree.path,
            &["config", "--get", &base_config_name(&worktree.branch)],
        ) {
            Ok(base) => base,
            // No recorded base: this worktree was not made by us. Keeping it is the
            // only answer that cannot lose work.
            Err(_) => return Ok(true),
        };
        Ok(head.trim() != base.trim())
    }

    fn remove_worktree(&self, repo: &Path, worktree: &Worktree) -> io::Result<()> {
        let path_text = worktree.path.to_str().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "worktree path is not UTF-8")
        })?;
        git(repo, &["worktree", "remove", "--force", path_text])?;
        // Deleting the branch also deletes its config section, base included.
        git(repo, &["branch", "-D", &worktree.branch])?;
        Ok(())
    }
}
