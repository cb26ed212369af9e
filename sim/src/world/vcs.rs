//! The simulated version control: [`SimVcs`], a copy-on-write overlay per worktree
//! with a 3-way merge that conflicts loudly.
//!
//! The runtime isolates a writer in a worktree (PROTOCOL.md §2) through the
//! [`Vcs`] boundary; in production that is `git worktree`
//! ([`GitVcs`](coord_runtime::world::GitVcs)). Here it is a model small enough to run
//! on [`MemDisk`](super::MemDisk), or on
//! [`RealDisk`](coord_runtime::world::RealDisk) in a temp directory, because every
//! file operation goes through the [`Disk`] it is given, never `std::fs`.
//!
//! The model, and the merge rules that make invariant 6 checkable, are documented on
//! [`SimVcs`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use coord_runtime::isolation::WorktreeSlug;
use coord_runtime::world::{Disk, FileKind, Vcs, Worktree};

/// The top-level directory names under a repository or worktree that are not tracked.
pub const UNTRACKED_TOP_DIRS: [&str; 2] = [".claude", ".git"];

/// Most files (tracked or, for removal, any) one walk of a tree visits: a bound on the
/// walk, far above what a simulated repository holds.
pub const TREE_FILES_MAX: usize = 100_000;

/// The tracked files of a tree: path relative to the tree's root → bytes.
type Snapshot = BTreeMap<PathBuf, Vec<u8>>;

/// Why two versions of a file could not be merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ConflictKind {
    /// Both sides edited the same lines of the file differently.
    Content,
    /// Both sides added the file (absent from the base) with different contents.
    AddAdd,
    /// The repository (ours) modified the file; the worktree (theirs) deleted it.
    ModifyDelete,
    /// The repository (ours) deleted the file; the worktree (theirs) modified it.
    DeleteModify,
    /// The merged tree would have this path as a file and, beneath it, another file.
    PathClash,
}

/// A file the merge could not merge, with all three versions (`None` where the file
/// is absent from that version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictedFile {
    /// The file's path relative to the repository (and the worktree).
    pub path: PathBuf,
    /// Why it conflicts.
    pub kind: ConflictKind,
    /// The file when the worktree was made.
    pub base: Option<Vec<u8>>,
    /// The file in the repository now.
    pub ours: Option<Vec<u8>>,
    /// The file in the worktree now.
    pub theirs: Option<Vec<u8>>,
    /// For a [`ConflictKind::Content`] conflict, the diff3-style text with conflict
    /// markers (`<<<<<<< ours`, `||||||| original`, `=======`, `>>>>>>> theirs`) that
    /// a person resolving it would start from. Never written to the repository.
    pub marked: Option<Vec<u8>>,
}

/// What a clean merge did to one file of the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ChangeKind {
    /// The worktree added the file; it was written to the repository.
    Added,
    /// Only the worktree changed the file; its version was written.
    Modified,
    /// Both sides changed the file on different lines; the line merge was written.
    LineMerged,
    /// The worktree deleted the file, which the repository had not changed.
    Deleted,
}

/// One change a clean merge made to the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedChange {
    /// The file's path relative to the repository.
    pub path: PathBuf,
    /// What was done to it.
    pub kind: ChangeKind,
}

/// The result of [`SimVcs::merge`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Every file merged; the repository now holds the result.
    Merged {
        /// The changes made to the repository, in path order (empty when the
        /// repository already had everything).
        changes: Vec<AppliedChange>,
    },
    /// At least one file conflicts; nothing was written to the repository.
    Conflicted {
        /// Every conflicted file, in path order.
        files: Vec<ConflictedFile>,
    },
}

/// Why [`SimVcs::merge`] could not run or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// The worktree was not made by this `SimVcs`, or was removed.
    #[error("no worktree at {path} (branch {branch}) made by this SimVcs")]
    UnknownWorktree {
        /// The worktree's path.
        path: PathBuf,
        /// The worktree's branch.
        branch: String,
    },
    /// The worktree belongs to another repository.
    #[error("worktree {worktree} belongs to {owner}, not {repo}")]
    WrongRepo {
        /// The worktree's path.
        worktree: PathBuf,
        /// The repository it was made from.
        owner: PathBuf,
        /// The repository it was to be merged into.
        repo: PathBuf,
    },
    /// A disk operation failed. While reading, nothing was written; while writing,
    /// the changes before the failing one are already applied (removals first, then
    /// writes, each in path order).
    #[error("merge failed: {0}")]
    Io(#[from] io::Error),
}

/// What is remembered about one live worktree.
#[derive(Debug)]
struct WorktreeRecord {
    repo: PathBuf,
    branch: String,
    base: Snapshot,
}

/// The simulated [`Vcs`]: copy-on-write worktrees over a [`Disk`], with a loud 3-way
/// merge.
///
/// # The model
///
/// - **Layout** mirrors [`GitVcs`](coord_runtime::world::GitVcs): slug `s` is validated
///   by [`WorktreeSlug::parse`] (a bad slug is `InvalidInput`), the worktree lives at
///   `<repo>/`[`WorktreeSlug::relative_path`] on the branch
///   [`WorktreeSlug::branch_name`].
/// - **Tracked files** are the regular files under a root, except the top-level
///   `.claude/` (where worktrees live) and `.git/`. Empty directories are not tracked,
///   as in git. A symlink or special file among them is refused with `Unsupported`:
///   the model has no way to copy or merge one, and guessing could lose work.
/// - **Copy-on-write**, in its simplest correct form: at creation the repository's
///   tracked files are copied into the worktree (each file and directory synced, so a
///   crash keeps the checkout), and their bytes are remembered in memory as the
///   worktree's *base snapshot*. A worker then edits its copy freely; the repository
///   is untouched until [`SimVcs::merge`]. Copying eagerly costs memory twice per
///   file but needs no read-through layer in the [`Disk`] the worker uses, which is
///   what lets the unchanged runtime work in the worktree.
/// - **The branch** is the worktree's current files: there are no commits, so "has
///   changes" ([`Vcs::has_changes`]) means some tracked file differs from the base
///   snapshot, or was added or deleted.
/// - **Removal** ([`Vcs::remove_worktree`]) removes every file under the worktree (any
///   kind, untracked ones included, like `git worktree remove --force`) and forgets
///   the branch and snapshot. The [`Disk`] boundary has no way to remove a directory,
///   so empty directories stay behind; they hold no file, are not tracked, and do not
///   stop the same slug from being made again.
/// - **State** (snapshots, branches) is in memory, per `SimVcs`: keep one per
///   simulated repository host for the whole run, outside the host's boots, as a
///   git repository's refs would outlive a process crash.
///
/// # Merge
///
/// [`SimVcs::merge`] merges a worktree into its repository: base = the snapshot,
/// ours = the repository now, theirs = the worktree now. Per tracked file, in path
/// order:
///
/// | base / ours / theirs | result |
/// | --- | --- |
/// | ours = theirs | nothing to do (both unchanged, or the same change) |
/// | ours = base | take theirs (write it, add it, or delete it) |
/// | theirs = base | keep ours |
/// | all present, all differ | line-based 3-way merge (diff3, [`diffy`]): hunks with an unchanged line between them merge; overlapping or adjacent ones are a [`ConflictKind::Content`] conflict, as in git |
/// | no base, both added differently | [`ConflictKind::AddAdd`] |
/// | ours modified, theirs deleted | [`ConflictKind::ModifyDelete`] |
/// | ours deleted, theirs modified | [`ConflictKind::DeleteModify`] |
///
/// A merged result in which one path is both a file and a directory is a
/// [`ConflictKind::PathClash`].
///
/// **A conflict is loud and writes nothing.** If any file conflicts, the merge returns
/// [`MergeOutcome::Conflicted`] with every conflicted file's base, ours and theirs
/// bytes, and leaves the repository exactly as it was, the files that would have
/// merged cleanly included. All-or-nothing keeps invariant 6 ("two writers of one file
/// either serialize, conflict loudly, or are flagged") checkable from the outcome
/// alone: after a merge the repository holds either the whole of the worker's change
/// set or none of it, never a half-applied set or a file with conflict markers that
/// a later step could mistake for content. A clean merge returns
/// [`MergeOutcome::Merged`] with every change it made, writes each file with
/// [`Disk::replace_atomic`] and syncs the directories of removed files.
///
/// A merge leaves the worktree and its snapshot as they are: merging again is a no-op
/// (ours now equals theirs), and the caller removes the worktree when it is done.
/// Calls on one `SimVcs` are serialized by a lock; inside a turmoil host (one thread,
/// no `await` in a merge) a merge is also atomic against every other write on the
/// host. Off turmoil, a writer that bypasses this `SimVcs` between the merge's read of
/// the repository and its writes would be overwritten: do not do that in tests.
#[derive(Debug)]
pub struct SimVcs {
    disk: Arc<dyn Disk>,
    /// Live worktrees by path (paths include the repository, so they are unique).
    worktrees: Mutex<BTreeMap<PathBuf, WorktreeRecord>>,
}

impl SimVcs {
    /// A version control with no worktrees, working on `disk`.
    pub fn new(disk: Arc<dyn Disk>) -> Self {
        Self {
            disk,
            worktrees: Mutex::new(BTreeMap::new()),
        }
    }

    /// The live worktree branches (`worktree-*`) of `repo`, in order.
    pub fn branches(&self, repo: &Path) -> Vec<String> {
        let mut branches: Vec<String> = self
            .records()
            .values()
            .filter(|record| record.repo == repo)
            .map(|record| record.branch.clone())
            .collect();
        branches.sort();
        branches
    }

    /// Merges `worktree`'s changes into `repo` (base = the worktree's snapshot, ours =
    /// `repo` now, theirs = the worktree now): either all of them, or, if any file
    /// conflicts, none, with every conflict reported. See [`SimVcs`] for the rules.
    pub fn merge(&self, repo: &Path, worktree: &Worktree) -> Result<MergeOutcome, MergeError> {
        let records = self.records();
        let record = records
            .get(&worktree.path)
            .filter(|record| record.branch == worktree.branch)
            .ok_or_else(|| MergeError::UnknownWorktree {
                path: worktree.path.clone(),
                branch: worktree.branch.clone(),
            })?;
        if record.repo != repo {
            return Err(MergeError::WrongRepo {
                worktree: worktree.path.clone(),
                owner: record.repo.clone(),
                repo: repo.to_owned(),
            });
        }
        let ours = tracked_files(self.disk.as_ref(), repo)?;
        let theirs = tracked_files(self.disk.as_ref(), &worktree.path)?;
        let plan = plan_merge(&record.base, &ours, &theirs);
        if !plan.conflicts.is_empty() {
            return Ok(MergeOutcome::Conflicted {
                files: plan.conflicts,
            });
        }
        let mut changes = self.apply(repo, &plan.actions)?;
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(MergeOutcome::Merged { changes })
    }

    /// Carries out a conflict-free plan on `repo`, in path order.
    fn apply(
        &self,
        repo: &Path,
        actions: &BTreeMap<PathBuf, Action>,
    ) -> io::Result<Vec<AppliedChange>> {
        let mut dirs_with_removals = BTreeSet::new();
        let mut changes = Vec::with_capacity(actions.len());
        // Removals first, so that a file the worktree moved into a removed file's
        // directory path finds that path free of files.
        let removals_then_writes = actions
            .iter()
            .filter(|(_, action)| matches!(action, Action::Delete))
            .chain(
                actions
                    .iter()
                    .filter(|(_, action)| !matches!(action, Action::Delete)),
            );
        for (relative, action) in removals_then_writes {
            let path = repo.join(relative);
            match action {
                Action::Write { bytes, kind } => {
                    if let Some(parent) = path.parent() {
                        self.disk.create_dir_all(parent)?;
                    }
                    self.disk.replace_atomic(&path, bytes)?;
                    changes.push(AppliedChange {
                        path: relative.clone(),
                        kind: *kind,
                    });
                }
                Action::Delete => {
                    self.disk.remove_file(&path)?;
                    if let Some(parent) = path.parent() {
                        dirs_with_removals.insert(parent.to_owned());
                    }
                    changes.push(AppliedChange {
                        path: relative.clone(),
                        kind: ChangeKind::Deleted,
                    });
                }
            }
        }
        // A removal is durable only once its directory is synced.
        for dir in &dirs_with_removals {
            self.disk.sync_file(dir)?;
        }
        Ok(changes)
    }

    fn records(&self) -> MutexGuard<'_, BTreeMap<PathBuf, WorktreeRecord>> {
        self.worktrees.lock().expect("SimVcs state poisoned")
    }

    /// Copies `base` into `path`, syncing every file and every directory that
    /// received one.
    fn check_out(&self, path: &Path, base: &Snapshot) -> io::Result<()> {
        self.disk.create_dir_all(path)?;
        let mut dirs = BTreeSet::new();
        for (relative, bytes) in base {
            let file = path.join(relative);
            let parent = file.parent().expect("a joined file path has a parent");
            self.disk.create_dir_all(parent)?;
            self.disk.create_new(&file, bytes)?;
            self.disk.sync_file(&file)?;
            dirs.insert(parent.to_owned());
        }
        for dir in &dirs {
            self.disk.sync_file(dir)?;
        }
        Ok(())
    }

    /// Removes every non-directory entry under `path`; a missing `path` has none.
    fn remove_files_under(&self, path: &Path) -> io::Result<()> {
        let files = match all_files(self.disk.as_ref(), path) {
            Ok(files) => files,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error),
        };
        let mut dirs = BTreeSet::new();
        for file in &files {
            self.disk.remove_file(file)?;
            if let Some(parent) = file.parent() {
                dirs.insert(parent.to_owned());
            }
        }
        for dir in &dirs {
            self.disk.sync_file(dir)?;
        }
        Ok(())
    }
}

impl Vcs for SimVcs {
    fn create_worktree(&self, repo: &Path, slug: &str) -> io::Result<Worktree> {
        let slug = WorktreeSlug::parse(slug)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        let path = repo.join(slug.relative_path());
        let branch = slug.branch_name();
        let mut records = self.records();
        if records.contains_key(&path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "branch {branch} already has a worktree at {}",
                    path.display()
                ),
            ));
        }
        if self.disk.metadata(repo)?.kind != FileKind::Dir {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("repository is not a directory: {}", repo.display()),
            ));
        }
        // git refuses to check out over existing files; empty directories left by an
        // earlier removal are fine.
        match all_files(self.disk.as_ref(), &path) {
            Ok(files) if !files.is_empty() => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("worktree path already holds files: {}", path.display()),
                ))
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let base = tracked_files(self.disk.as_ref(), repo)?;
        if let Err(error) = self.check_out(&path, &base) {
            // A half checkout would read as changes; undo it, best effort.
            let _ = self.remove_files_under(&path);
            return Err(error);
        }
        records.insert(
            path.clone(),
            WorktreeRecord {
                repo: repo.to_owned(),
                branch: branch.clone(),
                base,
            },
        );
        Ok(Worktree { path, branch })
    }

    fn has_changes(&self, worktree: &Worktree) -> io::Result<bool> {
        let records = self.records();
        let record = records
            .get(&worktree.path)
            .filter(|record| record.branch == worktree.branch)
            .ok_or_else(|| unknown_worktree(worktree))?;
        let now = tracked_files(self.disk.as_ref(), &worktree.path)?;
        Ok(now != record.base)
    }

    fn remove_worktree(&self, repo: &Path, worktree: &Worktree) -> io::Result<()> {
        let mut records = self.records();
        let record = records
            .get(&worktree.path)
            .filter(|record| record.branch == worktree.branch)
            .ok_or_else(|| unknown_worktree(worktree))?;
        if record.repo != repo {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "worktree {} belongs to {}, not {}",
                    worktree.path.display(),
                    record.repo.display(),
                    repo.display()
                ),
            ));
        }
        self.remove_files_under(&worktree.path)?;
        records.remove(&worktree.path);
        Ok(())
    }
}

fn unknown_worktree(worktree: &Worktree) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no worktree at {} (branch {}) made by this SimVcs",
            worktree.path.display(),
            worktree.branch
        ),
    )
}

/// Every non-directory entry under `root` (symlinks and special files included),
/// absolute, in path order.
fn all_files(disk: &dyn Disk, root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    walk(disk, root, false, &mut |path, _kind| {
        files.push(path.to_owned());
        Ok(())
    })?;
    files.sort();
    Ok(files)
}

/// The tracked files under `root` (see [`SimVcs`]), relative to it, with their
/// bytes. A symlink or special file among them is `Unsupported`.
fn tracked_files(disk: &dyn Disk, root: &Path) -> io::Result<Snapshot> {
    let mut snapshot = Snapshot::new();
    walk(disk, root, true, &mut |path, kind| {
        if kind != FileKind::File {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "SimVcs tracks only regular files; found a {kind:?} at {}",
                    path.display()
                ),
            ));
        }
        let relative = path
            .strip_prefix(root)
            .expect("walk yields paths under its root")
            .to_owned();
        snapshot.insert(relative, disk.read(path)?);
        Ok(())
    })?;
    Ok(snapshot)
}

/// Calls `visit` with every non-directory entry under `root` and its kind, skipping
/// [`UNTRACKED_TOP_DIRS`] when `tracked_only`. At most [`TREE_FILES_MAX`] entries.
fn walk(
    disk: &dyn Disk,
    root: &Path,
    tracked_only: bool,
    visit: &mut dyn FnMut(&Path, FileKind) -> io::Result<()>,
) -> io::Result<()> {
    let mut files_count: usize = 0;
    let mut pending_dirs = vec![root.to_owned()];
    while let Some(dir) = pending_dirs.pop() {
        for entry in disk.list_dir(&dir)? {
            if tracked_only && dir == root {
                let name = entry.file_name().and_then(|name| name.to_str());
                if name.is_some_and(|name| UNTRACKED_TOP_DIRS.contains(&name)) {
                    continue;
                }
            }
            let kind = disk.metadata(&entry)?.kind;
            if kind == FileKind::Dir {
                pending_dirs.push(entry);
                continue;
            }
            files_count += 1;
            if files_count > TREE_FILES_MAX {
                return Err(io::Error::other(format!(
                    "more than {TREE_FILES_MAX} files under {}",
                    root.display()
                )));
            }
            visit(&entry, kind)?;
        }
    }
    Ok(())
}

/// What a conflict-free merge writes to one repository file.
#[derive(Debug)]
enum Action {
    Write { bytes: Vec<u8>, kind: ChangeKind },
    Delete,
}

/// The merge decided per file, before anything is written.
#[derive(Debug, Default)]
struct MergePlan {
    actions: BTreeMap<PathBuf, Action>,
    conflicts: Vec<ConflictedFile>,
}

/// Decides every file's merge (see the table on [`SimVcs`]), in path order.
fn plan_merge(base: &Snapshot, ours: &Snapshot, theirs: &Snapshot) -> MergePlan {
    let paths: BTreeSet<&PathBuf> = base
        .keys()
        .chain(ours.keys())
        .chain(theirs.keys())
        .collect();
    let mut plan = MergePlan::default();
    for path in paths {
        let (b, o, t) = (base.get(path), ours.get(path), theirs.get(path));
        if o == t || t == b {
            continue;
        }
        let conflict = |kind, marked| ConflictedFile {
            path: path.clone(),
            kind,
            base: b.cloned(),
            ours: o.cloned(),
            theirs: t.cloned(),
            marked,
        };
        let action = match (b, o, t) {
            // Only the worktree changed the file.
            (_, _, None) if o == b => Action::Delete,
            (_, _, Some(t)) if o == b => Action::Write {
                bytes: t.clone(),
                kind: if o.is_none() {
                    ChangeKind::Added
                } else {
                    ChangeKind::Modified
                },
            },
            // Both changed it, differently.
            (Some(b), Some(o), Some(t)) => match diffy::merge_bytes(b, o, t) {
                Ok(merged) => Action::Write {
                    bytes: merged,
                    kind: ChangeKind::LineMerged,
                },
                Err(marked) => {
                    plan.conflicts
                        .push(conflict(ConflictKind::Content, Some(marked)));
                    continue;
                }
            },
            (None, Some(_), Some(_)) => {
                plan.conflicts.push(conflict(ConflictKind::AddAdd, None));
                continue;
            }
            (Some(_), Some(_), None) => {
                plan.conflicts
                    .push(conflict(ConflictKind::ModifyDelete, None));
                continue;
            }
            (Some(_), None, Some(_)) => {
                plan.conflicts
                    .push(conflict(ConflictKind::DeleteModify, None));
                continue;
            }
            _ => unreachable!("ours = theirs, theirs = base and ours = base are handled above"),
        };
        plan.actions.insert(path.clone(), action);
    }
    if plan.conflicts.is_empty() {
        plan.conflicts = path_clashes(ours, &plan.actions, base, theirs);
    }
    plan
}

/// The files of the merged tree that have another merged file beneath them (a path
/// that would have to be both a file and a directory), as conflicts.
fn path_clashes(
    ours: &Snapshot,
    actions: &BTreeMap<PathBuf, Action>,
    base: &Snapshot,
    theirs: &Snapshot,
) -> Vec<ConflictedFile> {
    let mut merged: BTreeSet<&PathBuf> = ours.keys().collect();
    for (path, action) in actions {
        match action {
            Action::Write { .. } => merged.insert(path),
            Action::Delete => merged.remove(path),
        };
    }
    let mut clashing = BTreeSet::new();
    for path in &merged {
        for ancestor in path.ancestors().skip(1) {
            if merged.contains(&ancestor.to_path_buf()) {
                clashing.insert(ancestor.to_path_buf());
            }
        }
    }
    clashing
        .into_iter()
        .map(|path| ConflictedFile {
            kind: ConflictKind::PathClash,
            base: base.get(&path).cloned(),
            ours: ours.get(&path).cloned(),
            theirs: theirs.get(&path).cloned(),
            marked: None,
            path,
        })
        .collect()
}
