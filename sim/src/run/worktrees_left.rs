//! The worktrees left on the disk once the run is over: the witness that a
//! worktree holding a worker's changes was kept and a clean one removed
//! (PROTOCOL.md §2), read from the disk rather than from the runtime's account of
//! what it removed; and, on the production version control, the worktree branches
//! the repository still holds, read from the host's git.

use std::path::Path;

use coord_runtime::world::{Disk, FileKind};

use crate::trace::{path_text, SimEvent, Trace};
use crate::world::RootedGit;

/// The workspace's repository.
const REPOSITORY_DIR: &str = "/work";

/// Where the runtime makes worktrees, under the workspace's repository.
pub(super) const WORKTREES_DIR: &str = "/work/.claude/worktrees";

/// The most entries one worktree's walk visits: far above what a simulated
/// checkout holds, so that a walk is bounded.
const WALK_ENTRIES_MAX: usize = 100_000;

/// Records the worktrees that still hold a file, as `disk` holds them, if the
/// worktrees directory is there. A removed worktree may leave its empty
/// directories behind (the disk boundary removes files, not directories), so a
/// worktree counts as left only while it holds a file.
pub(super) fn witness(disk: &dyn Disk, trace: &Trace) {
    let Ok(mut entries) = disk.list_dir(Path::new(WORKTREES_DIR)) else {
        return;
    };
    entries.sort();
    let paths = entries
        .iter()
        .filter(|worktree| holds_a_file(disk, worktree))
        .map(|worktree| path_text(worktree))
        .collect();
    trace.push("sim", SimEvent::WorktreesLeft { paths });
}

/// Records the worktree branches the repository at `/work` still holds, as the
/// host's git lists them, on the production version control. Nothing is recorded
/// when git cannot list them: the run's own git failures are judged elsewhere.
pub(super) fn witness_branches(git: &RootedGit, trace: &Trace) {
    if let Ok(branches) = git.worktree_branches(Path::new(REPOSITORY_DIR)) {
        trace.push("sim", SimEvent::WorktreeBranchesLeft { branches });
    }
}

/// Whether any file (or symlink) lies under `root`.
fn holds_a_file(disk: &dyn Disk, root: &Path) -> bool {
    let mut pending = vec![root.to_owned()];
    let mut visited = 0;
    while let Some(dir) = pending.pop() {
        let Ok(children) = disk.list_dir(&dir) else {
            continue;
        };
        for child in children {
            visited += 1;
            if visited > WALK_ENTRIES_MAX {
                return true;
            }
            match disk.metadata(&child).map(|meta| meta.kind) {
                Ok(FileKind::Dir) => pending.push(child),
                Ok(_) => return true,
                Err(_) => {}
            }
        }
    }
    false
}
