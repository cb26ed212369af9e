//! The version-control boundary: isolated worktrees for workers.

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};

/// A worktree made for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// Where it is checked out (`.claude/worktrees/<slug>`).
    pub path: PathBuf,
    /// Its branch (`worktree-<slug>`).
    pub branch: String,
}

/// Version control: `git worktree` in production, a copy-on-write overlay in simulation.
pub trait Vcs: Send + Sync + Debug {
    /// Creates a worktree of `repo` for `slug` on a new branch.
    fn create_worktree(&self, repo: &Path, slug: &str) -> io::Result<Worktree>;

    /// Whether the worktree has changes (uncommitted, or commits beyond its base).
    fn has_changes(&self, worktree: &Worktree) -> io::Result<bool>;

    /// Removes the worktree and its branch.
    fn remove_worktree(&self, repo: &Path, worktree: &Worktree) -> io::Result<()>;
}
