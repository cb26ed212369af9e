//! The worktree side of a run: symlinked directories planted in worktrees as soon
//! as they are made.
//!
//! A worker in a worktree is confined to it (invariant 7), but a directory inside
//! the worktree that is really a symlink would carry a write under it anywhere: out
//! of the session and the workspace, or into another worker's worktree. The
//! `symlinked-worktree-dir` fault plants one right after the nth worktree's
//! checkout, before its worker runs, through the [`Vcs`] the runtime makes
//! worktrees with; the disk's write witness then shows where a write under it
//! landed, whatever the runtime reports.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coord_runtime::world::{Vcs, Worktree};

use super::book::FaultBook;
use super::catalogue::{Fault, LinkTarget};
use super::disk::{SymlinkPlanter, SYMLINK_DIR_TARGET};

/// A [`Vcs`] whose new worktrees get the symlinked directories the schedule plants.
#[derive(Debug)]
pub struct LinkedWorktrees {
    inner: Arc<dyn Vcs>,
    book: FaultBook,
    planter: Arc<dyn SymlinkPlanter>,
}

impl LinkedWorktrees {
    /// Worktrees of `inner`, planted in through `planter` as `book` schedules.
    pub fn new(inner: Arc<dyn Vcs>, book: FaultBook, planter: Arc<dyn SymlinkPlanter>) -> Self {
        Self {
            inner,
            book,
            planter,
        }
    }

    /// Plants every `symlinked-worktree-dir` fault of worktree number `nth` (made at
    /// `worktree`). A fault fires only if its link was planted: a name the checkout
    /// already holds, or a target that is not there, leaves the worktree as it is.
    fn plant(&self, nth: u32, worktree: &Path) {
        for (index, fault) in self.book.schedule().iter().enumerate() {
            let Fault::SymlinkedWorktreeDir {
                worktree: wanted,
                dir,
                target,
            } = fault
            else {
                continue;
            };
            if *wanted != nth || !self.book.can_fire(index) {
                continue;
            }
            let Some(target_path) = self.target_path(nth, *target) else {
                continue;
            };
            let link = worktree.join(dir);
            if self.planter.plant_symlink(&link, &target_path).is_ok() {
                self.book.fire_index(
                    index,
                    format!(
                        "{} is planted as a symlink to {}",
                        link.display(),
                        target_path.display()
                    ),
                );
            }
        }
    }

    /// The directory a link in worktree number `nth` points at.
    fn target_path(&self, nth: u32, target: LinkTarget) -> Option<PathBuf> {
        match target {
            LinkTarget::Outside => Some(PathBuf::from(SYMLINK_DIR_TARGET)),
            LinkTarget::OtherWorktree => self.book.worktree_made(nth.checked_sub(1)?),
        }
    }
}

impl Vcs for LinkedWorktrees {
    fn create_worktree(&self, repo: &Path, slug: &str) -> io::Result<Worktree> {
        let worktree = self.inner.create_worktree(repo, slug)?;
        let nth = self.book.count_worktree(&worktree.path);
        self.plant(nth, &worktree.path);
        Ok(worktree)
    }

    fn has_changes(&self, worktree: &Worktree) -> io::Result<bool> {
        self.inner.has_changes(worktree)
    }

    fn remove_worktree(&self, repo: &Path, worktree: &Worktree) -> io::Result<()> {
        self.inner.remove_worktree(repo, worktree)
    }
}
