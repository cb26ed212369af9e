//! The worktree lifecycle: made before a worker starts, removed or kept when it ends.
//!
//! PROTOCOL.md §2: on finish, a worktree with no changes is removed together with its
//! branch; one with changes (uncommitted edits, untracked files, or commits beyond
//! its base) is kept, and the notification reports its path and branch so the
//! coordinator can merge or inspect it. Both outcomes are journaled.

use std::io;
use std::path::{Path, PathBuf};

use super::slug::WorktreeSlug;
use crate::event::RuntimeEvent;
use crate::world::{Journal, Vcs, Worktree};

/// What [`finish`] did with a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeOutcome {
    /// It had no changes: the worktree and its branch are gone.
    Removed,
    /// It has changes: both are kept, for the notification to report.
    Kept {
        /// Where the worktree is checked out.
        path: PathBuf,
        /// Its branch.
        branch: String,
    },
}

/// Creates the worktree for `slug` in `repo` on its own new branch. Backends place it
/// at [`WorktreeSlug::relative_path`] on [`WorktreeSlug::branch_name`].
pub fn prepare(vcs: &dyn Vcs, repo: &Path, slug: &WorktreeSlug) -> io::Result<Worktree> {
    vcs.create_worktree(repo, slug.as_str())
}

/// Ends a worker's worktree: removes it and its branch if it has no changes
/// (journaling [`RuntimeEvent::WorktreeRemoved`]), otherwise keeps both (journaling
/// [`RuntimeEvent::WorktreeKept`]). If the changes cannot be determined, the error is
/// returned and nothing is removed: work is never discarded on a guess.
pub fn finish(
    vcs: &dyn Vcs,
    repo: &Path,
    worktree: &Worktree,
    journal: &dyn Journal,
) -> io::Result<WorktreeOutcome> {
    if vcs.has_changes(worktree)? {
        journal.record(RuntimeEvent::WorktreeKept {
            path: worktree.path.clone(),
            branch: worktree.branch.clone(),
        });
        return Ok(WorktreeOutcome::Kept {
            path: worktree.path.clone(),
            branch: worktree.branch.clone(),
        });
    }
    vcs.remove_worktree(repo, worktree)?;
    journal.record(RuntimeEvent::WorktreeRemoved {
        path: worktree.path.clone(),
    });
    Ok(WorktreeOutcome::Removed)
}
