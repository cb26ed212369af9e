//! The in-memory disk: [`Disk`] over an inode model with POSIX crash semantics, the
//! run's disk on both worlds.
//!
//! [`MemDisk`] needs nothing around it: it is a table of inodes behind one mutex, usable from any thread or runtime
//! (a plain tokio current-thread runtime with paused time included), with no syscalls
//! and no serialization, so that a run costs microseconds of disk work. Clones share
//! the same disk; a process "restarted" after [`MemDisk::crash`] keeps using it.
//!
//! # What it models
//!
//! - Inodes and names. A directory maps names to inode numbers; a file's bytes belong
//!   to its inode, so hard links share later writes, a renamed file keeps its pending
//!   data, and a file replaced or removed under one name lives on under another.
//! - Durability the way ext4 (`data=ordered`) gives it at the minimum POSIX promises.
//!   Every file keeps its current bytes and the bytes of its last sync; every directory
//!   keeps its current entries and the entries of its last sync. [`Disk::sync_file`]
//!   makes a file's bytes, or a directory's whole entry table, durable.
//!   [`Disk::create_dir_all`] syncs the parent of every directory it creates and
//!   [`Disk::replace_atomic`] syncs the new file and then its directory, both as
//!   [`RealDisk`](coord_runtime::world::RealDisk) does; nothing else syncs.
//! - Crashes. [`MemDisk::crash`] is a power cut between two operations: each directory
//!   falls back to its durable entries (a directory no longer durably reachable from
//!   `/` vanishes with everything under it), and each surviving file falls back to its
//!   synced bytes, except that bytes appended since the last sync may survive as a
//!   prefix of any length, and a file truncated and rewritten in place since its last
//!   sync ([`Disk::overwrite_in_place`]) comes back empty or as a strict prefix of its
//!   new bytes, never whole. Every draw comes from the generator the caller passes in,
//!   in inode order: the same operations and the same generator give the same crash.
//! - `O_NOFOLLOW`. Symlinks in directory components are followed, as the kernel
//!   does; a symlink as the last component is never written or read through: such
//!   opens fail with `ELOOP`, `create_new` with `AlreadyExists`, and `metadata`,
//!   `remove_file`, `rename`, `hard_link` and `replace_atomic` act on the link itself,
//!   as `rename(2)`, `link(2)` and `unlink(2)` do. `list_dir` and `create_dir_all` follow
//!   a final symlink to a directory, as `opendir(3)` and `std::fs::create_dir_all` do.
//!   [`MemDisk::follow_final_symlinks`] models a filesystem that ignores `O_NOFOLLOW`
//!   (as turmoil's does). [`MemDisk::plant_symlink`] plants a link for a scenario.
//! - Faults. Before touching anything, every operation asks the installed
//!   [`DiskFaultPolicy`]: a failure returns its
//!   error with nothing changed; a torn write lands a prefix of its bytes, unsynced,
//!   and returns `EIO`.
//! - Errors with the kinds `std::fs` gives on Linux: `NotFound`, `AlreadyExists`,
//!   `NotADirectory`, `IsADirectory`, `DirectoryNotEmpty`, `PermissionDenied` (a hard
//!   link to a directory), `InvalidInput` (`EINVAL`: a directory moved into itself),
//!   `ResourceBusy` (renaming `/`), and `ELOOP` as a raw OS error.
//!
//! # What it does not
//!
//! - ext4's journal and heuristics. On real ext4 one `fsync` commits every pending
//!   metadata change of the filesystem, and `auto_da_alloc` flushes a file's data when
//!   it is replaced by rename or truncated and closed. This disk keeps every directory
//!   and every file apart and never flushes on its own: it shows the worst outcome
//!   POSIX allows, which real ext4 shows rarely. Because directories become durable
//!   one at a time, a crash after renaming a directory between two directories that
//!   were synced separately can leave it durably reachable under both names; the crash
//!   then keeps only the name a breadth-first walk from `/` meets first (the shallowest,
//!   then the first by name), as `fsck` would keep one.
//! - Crashes during an operation: every operation is atomic with respect to
//!   [`MemDisk::crash`]. The temp file of [`Disk::replace_atomic`] is therefore never
//!   materialized: a replace either completes (new bytes and entry both durable) or
//!   fails leaving the target untouched, which is every outcome `RealDisk` allows.
//! - Capacity (`ENOSPC` and `EIO` come only from the fault policy), permissions,
//!   ownership, `flock`, directory removal (the [`Disk`] trait has none), timestamps
//!   across crashes (a file keeps its last modification time), and latency.
//! - Paths are taken as given: relative paths and `..` components are refused with
//!   `InvalidInput`; `.` components and repeated or trailing slashes are dropped, as
//!   [`Path::components`] drops them, so `/a/file/` names `/a/file`. Directories
//!   report a length of 0.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::iter;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use coord_runtime::world::{Clock, Disk, FileKind, FileMeta, Reread};
use rand_chacha::rand_core::RngCore;
use xxhash_rust::xxh3::xxh3_64;

use super::disk_policy::{errno, landed, DiskFault, DiskFaultPolicy, DiskOp, Verdict};

/// An inode number: the inode's index in [`State::inodes`].
type Ino = usize;

/// The inode number of `/`, which always exists and is always durable.
const ROOT_INO: Ino = 0;

/// How many symlinks one path resolution follows before failing with `ELOOP`
/// (Linux's `MAXSYMLINKS`).
const SYMLINK_FOLLOWS_MAX: u32 = 40;

/// Below this many inodes unreachable ones are not collected: a small disk is cheaper
/// to keep than to walk.
const GC_INODES_MIN: usize = 64;

/// How many directory paths [`State::dir_paths`] remembers before starting over: a
/// bound on its memory for runs that name directories without end.
const DIR_PATHS_MAX: usize = 4096;

/// The observer of landed writes, see [`MemDisk::set_observer`].
type Observer = Arc<dyn Fn(DiskWrite) + Send + Sync>;

/// Whether a directory made by [`MemDisk`] is synced in its parent as it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParentSync {
    /// Each new directory's entry is made durable at once: the simulator's own disk,
    /// whose `create_dir_all` stands for RealDisk's create-then-sync.
    Each,
    /// None is: a host filesystem's `mkdir`, made durable by a later sync of the
    /// parent.
    None,
}

/// A data write that landed on a [`MemDisk`], as its observer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskWrite {
    /// The operation: one of the [`DiskOp::writes_data`] operations.
    pub op: DiskOp,
    /// The path the caller passed.
    pub path: PathBuf,
    /// The path written, with every followed symlink resolved. For `replace_atomic`
    /// the target's path (its temp file is never named).
    pub resolved_path: PathBuf,
    /// Whether a symlink was followed on the way: in a directory component, or the
    /// last component under [`MemDisk::follow_final_symlinks`].
    pub through_symlink: bool,
    /// Bytes that landed: the whole write, or the kept prefix of a torn one.
    pub len_bytes: u64,
    /// Whether the write was torn by the fault policy (the call returned `EIO`).
    pub torn: bool,
}

/// What a [`MemDisk::crash`] changed, as paths of the namespace before and after it.
/// Every list is sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Paths that existed before the crash and do not after it (with everything under
    /// a lost directory).
    pub lost: Vec<PathBuf>,
    /// Paths that exist before and after, whose contents differ: a file's bytes, a
    /// symlink's target, or what kind of thing the path names.
    pub changed: Vec<PathBuf>,
    /// Paths that did not exist before the crash and do after it: names removed or
    /// renamed away without a sync of their directory.
    pub reappeared: Vec<PathBuf>,
}

impl CrashReport {
    /// Whether the crash changed nothing visible.
    pub fn is_empty(&self) -> bool {
        self.lost.is_empty() && self.changed.is_empty() && self.reappeared.is_empty()
    }
}

/// [`Disk`] in memory, with POSIX crash semantics and fault hooks, for simulations
/// without turmoil.
///
/// A file's bytes belong to its inode (hard links share them); a write is durable
/// once [`Disk::sync_file`] synced the file, a name once its directory was synced
/// (which [`Disk::create_dir_all`] and [`Disk::replace_atomic`] do, as `RealDisk`
/// does). [`MemDisk::crash`] keeps only what is durable, except that unsynced appends
/// may survive as a prefix and a file overwritten in place since its last sync comes
/// back empty or torn. A symlink in the last component is never read or written
/// through (`ELOOP`), one in a directory component is followed. Every operation asks
/// the fault policy first. The source of this module (`world/mem_disk.rs`) says in
/// full what the disk models and what it does not.
///
/// Cheap to clone; clones share the files, the clock and the observer. The fault
/// policy and [`MemDisk::follow_final_symlinks`] belong to the handle and are copied
/// into clones made afterwards.
///
/// # Panics
/// Methods panic when the fault policy breaks its contract (a torn verdict for an
/// operation that writes no data, or one longer than the write), and on a broken
/// internal invariant.
#[derive(Clone, Default)]
pub struct MemDisk {
    state: Arc<Mutex<State>>,
    policy: Option<Arc<Mutex<dyn DiskFaultPolicy>>>,
    follow_final_symlinks: bool,
}

impl fmt::Debug for MemDisk {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = formatter.debug_struct("MemDisk");
        // try_lock: Debug may run while another thread holds the state.
        match self.state.try_lock() {
            Ok(state) => debug.field("inodes_count", &state.inodes.len()),
            Err(_) => debug.field("inodes_count", &"<locked>"),
        };
        debug
            .field("has_policy", &self.policy.is_some())
            .field("follow_final_symlinks", &self.follow_final_symlinks)
            .finish()
    }
}

impl MemDisk {
    /// An empty disk holding only `/`, without faults, clock or observer, refusing to
    /// follow final symlinks.
    pub fn new() -> Self {
        Self::default()
    }

    /// This disk, asking `policy` about every operation from now on. Keep a clone of
    /// the `Arc` to read the policy's log or change its rules during the run.
    pub fn with_policy(mut self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// This disk, following (`yes`) or refusing (`false`, the default) a symlink in
    /// the last component of `read`, `read_at`, `append`, `overwrite_in_place` and
    /// `sync_file`: a filesystem that ignores `O_NOFOLLOW`, as turmoil's does. The
    /// other operations behave the same either way: `create_new` refuses a symlink
    /// (`O_EXCL`), `list_dir` and `create_dir_all` always follow one to a directory,
    /// and `metadata`, `remove_file`, `rename`, `hard_link` and `replace_atomic` act
    /// on the link itself.
    pub fn follow_final_symlinks(mut self, yes: bool) -> Self {
        self.follow_final_symlinks = yes;
        self
    }

    /// Stamps modifications from now on with `clock`'s [`Clock::unix_ms`]. Without a
    /// clock, [`Disk::metadata`] reports no modification time. The clock is read under
    /// the disk's lock (an operation takes it once): it must not use the disk.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.lock().clock = Some(clock);
    }

    /// Calls `observer` after every data write that landed (`create_new`, `append`,
    /// `replace_atomic`, `overwrite_in_place`, torn ones included), outside the
    /// disk's lock, so the observer may use the disk. Replaces any earlier observer.
    /// The observer owns the record, so it can keep its paths without copying them.
    pub fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>) {
        self.lock().observer = Some(observer);
    }

    /// Creates the symlink `link` pointing at `target` (absolute, or relative to the
    /// link's directory), durably at once, like an attacker's completed action. Asks
    /// no fault policy and calls no observer.
    ///
    /// # Errors
    /// `InvalidInput` for a bad `link` path or an empty `target`, `AlreadyExists` if
    /// anything is at `link`, and the path errors of resolving its directory.
    pub fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        check_path(link)?;
        if target.as_os_str().is_empty() {
            return Err(invalid_input("a symlink needs a non-empty target"));
        }
        let mut state = self.lock();
        let located = state.locate(link, false)?;
        let Some(name) = located.leaf.as_deref() else {
            return Err(already_exists(link));
        };
        if located.ino.is_some() {
            return Err(already_exists(link));
        }
        state.forget_dir_paths();
        let now_ms = state.now_ms();
        let ino = state.allocate(Inode::Symlink(SymlinkNode {
            target: target.to_owned(),
            modified_unix_ms: now_ms,
        }));
        let dir = state.dir_mut(located.dir);
        dir.entries.insert(name.to_owned(), ino);
        dir.durable_entries.insert(name.to_owned(), ino);
        dir.modified_unix_ms = now_ms;
        Ok(())
    }

    /// `mkdir -p` as a host filesystem does it: the missing directories of `path`
    /// are created, but their entries are durable only once their parents are
    /// synced. The production disk over an in-memory host (`MemHostFs`) creates
    /// directories this way, so that the parent syncs it makes after them are what
    /// keeps them through a power cut.
    ///
    /// # Errors
    /// As [`Disk::create_dir_all`].
    pub fn create_dir_all_unsynced(&self, path: &Path) -> io::Result<()> {
        self.make_dirs(path, ParentSync::None)
    }

    /// Creates the missing directories of `path`, syncing each new entry in its
    /// parent or not, as `parent_sync` says.
    fn make_dirs(&self, path: &Path, parent_sync: ParentSync) -> io::Result<()> {
        self.consult(DiskOp::CreateDirAll, path, 0)?;
        let mut state = self.lock();
        // Already a directory, the common case: one walk instead of one per component.
        // The walk succeeding means every component is a directory, or a symlink to
        // one, so the loop below would create nothing and refuse nothing.
        if let Ok(located) = state.locate(path, false) {
            if let Some(Inode::Dir(_)) = located.ino.map(|ino| state.inode(ino)) {
                return Ok(());
            }
        }
        let now_ms = state.now_ms();
        // consult() checked the path.
        let mut names = path_names(path).peekable();
        let mut prefix = PathBuf::with_capacity(path.as_os_str().len() + 1);
        prefix.push("/");
        while let Some(name) = names.next() {
            prefix.push(name);
            let is_final = names.peek().is_none();
            let located = state.locate(&prefix, false)?;
            let Some(ino) = located.ino else {
                // Created; under `ParentSync::Each` its entry is synced in its
                // parent too (the whole parent directory, as RealDisk's fsync of it).
                state.forget_dir_paths();
                let ino = state.allocate(Inode::Dir(DirNode::new(now_ms)));
                let parent = state.dir_mut(located.dir);
                parent.link(name, ino);
                if parent_sync == ParentSync::Each {
                    parent.sync();
                }
                parent.modified_unix_ms = now_ms;
                continue;
            };
            match state.inode(ino) {
                Inode::Dir(_) => {}
                Inode::File(_) if is_final => return Err(already_exists(path)),
                Inode::File(_) => return Err(not_a_directory(path)),
                // mkdir(2) refuses any existing name; std's create_dir_all then accepts
                // it if it is a directory through the link.
                Inode::Symlink(_) => {
                    let through = state
                        .locate(&prefix, true)
                        .ok()
                        .and_then(|located| located.ino)
                        .map(|ino| state.inode(ino).kind());
                    match through {
                        Some(FileKind::Dir) => {}
                        Some(FileKind::File) if !is_final => return Err(not_a_directory(path)),
                        _ => return Err(already_exists(path)),
                    }
                }
            }
        }
        Ok(())
    }

    /// A power cut between two operations; returns what it changed.
    ///
    /// Every directory falls back to the entries of its last sync, and what is no
    /// longer durably reachable from `/` disappears. Every surviving file falls back
    /// to the bytes of its last sync plus a prefix, of a length drawn from `rng`, of
    /// the bytes appended since; a file overwritten in place since its last sync
    /// comes back empty (drawn half the time) or as a strict prefix of its new bytes,
    /// never whole. Draws are made in inode order: the same operations and the same
    /// generator give the same crash.
    ///
    /// The disk keeps working afterwards, as a restarted process sees it. Asks no
    /// fault policy and calls no observer.
    pub fn crash(&self, rng: &mut dyn RngCore) -> CrashReport {
        self.lock().crash(rng)
    }

    /// The current bytes of the regular file at `path`, without fault policy or
    /// observer, not following a final symlink; `None` if no regular file is there.
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.lock();
        let located = state.locate(path, false).ok()?;
        match state.inode(located.ino?) {
            Inode::File(file) => Some(file.data.to_vec()),
            Inode::Dir(_) | Inode::Symlink(_) => None,
        }
    }

    /// Whether anything (file, directory or symlink, dangling or not) is at `path`,
    /// without fault policy, not following a final symlink.
    pub fn exists(&self, path: &Path) -> bool {
        let state = self.lock();
        state
            .locate(path, false)
            .ok()
            .is_some_and(|located| located.ino.is_some())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("MemDisk state poisoned")
    }

    /// Checks `path` and asks the policy about `op`: a failure is returned as the
    /// error, a torn write comes back as the verdict for the caller to carry out.
    fn consult(&self, op: DiskOp, path: &Path, len_bytes: u64) -> io::Result<Verdict> {
        check_path(path)?;
        super::disk_policy::consult(self.policy.as_deref(), op, path, len_bytes)
    }

    /// [`Disk::replace_atomic`] of `contents`, which the new file holds as `data()`
    /// gives them (called only if the write lands whole).
    fn replace(
        &self,
        path: &Path,
        contents: &[u8],
        data: impl FnOnce() -> FileData,
    ) -> io::Result<()> {
        let verdict = self.consult(DiskOp::ReplaceAtomic, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        let mut state = self.lock();
        // RealDisk's steps: a temp file created beside the target (its directory must
        // exist), the data written (a torn write stops here and the temp file is
        // removed), synced, renamed over the target (a directory refuses), the
        // directory synced. The rename replaces a symlink rather than following it.
        let located = state.locate(path, false)?;
        let Some(name) = located.leaf.as_deref() else {
            return Err(invalid_input("path has no file name"));
        };
        if torn {
            let write = write_record(DiskOp::ReplaceAtomic, path, &located, kept.len(), true);
            return self.finish_write(state, write, ());
        }
        if let Some(ino) = located.ino {
            match state.inode(ino) {
                Inode::Dir(_) => return Err(is_a_directory(path)),
                Inode::Symlink(_) => state.forget_dir_paths(),
                Inode::File(_) => {}
            }
        }
        let now_ms = state.now_ms();
        // Not torn: every byte of `contents` landed.
        let mut file = FileNode::new(data(), now_ms);
        file.synced_len_bytes = file.data.len();
        let ino = state.allocate(Inode::File(file));
        let dir = state.dir_mut(located.dir);
        dir.link(name, ino);
        dir.sync();
        dir.modified_unix_ms = now_ms;
        state.collect_garbage();
        let write = write_record(DiskOp::ReplaceAtomic, path, &located, kept.len(), false);
        self.finish_write(state, write, ())
    }

    /// Releases the state, tells the observer about `write`, and returns `value`, or
    /// `EIO` for a torn write.
    fn finish_write<T>(
        &self,
        state: MutexGuard<'_, State>,
        write: DiskWrite,
        value: T,
    ) -> io::Result<T> {
        let observer = state.observer.clone();
        drop(state);
        let torn = write.torn;
        if let Some(observer) = observer {
            observer(write);
        }
        if torn {
            Err(DiskFault::Eio.to_io_error())
        } else {
            Ok(value)
        }
    }
}

fn write_record(
    op: DiskOp,
    path: &Path,
    located: &Located<'_>,
    len_bytes: usize,
    torn: bool,
) -> DiskWrite {
    DiskWrite {
        op,
        path: path.to_owned(),
        resolved_path: located.resolved_path(path),
        through_symlink: located.through_symlink,
        len_bytes: len_bytes as u64,
        torn,
    }
}

impl Disk for MemDisk {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.make_dirs(path, ParentSync::Each)
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let verdict = self.consult(DiskOp::CreateNew, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        let mut state = self.lock();
        let located = state.locate(path, false)?;
        let Some(name) = located.leaf.as_deref() else {
            return Err(already_exists(path));
        };
        // O_CREAT | O_EXCL: anything at the path, a symlink included, is EEXIST.
        if located.ino.is_some() {
            return Err(already_exists(path));
        }
        let now_ms = state.now_ms();
        let ino = state.allocate(Inode::File(FileNode::new(
            FileData::Own(kept.to_vec()),
            now_ms,
        )));
        let dir = state.dir_mut(located.dir);
        dir.link(name, ino);
        dir.modified_unix_ms = now_ms;
        let write = write_record(DiskOp::CreateNew, path, &located, kept.len(), torn);
        self.finish_write(state, write, ())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let verdict = self.consult(DiskOp::Append, path, bytes.len() as u64)?;
        let (kept, torn) = landed(bytes, verdict);
        let mut state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        let ino = state.regular_file(&located, path)?;
        let now_ms = state.now_ms();
        let file = state.file_mut(ino);
        file.data.to_mut().extend_from_slice(kept);
        file.modified_unix_ms = now_ms;
        let len_bytes = file.data.len() as u64;
        let write = write_record(DiskOp::Append, path, &located, kept.len(), torn);
        self.finish_write(state, write, len_bytes)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        self.consult(DiskOp::ReadAt, path, 0)?;
        let state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        let data = &state.file(state.regular_file(&located, path)?).data;
        let start = usize::try_from(offset_bytes)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let len = usize::try_from(limit_bytes)
            .unwrap_or(usize::MAX)
            .min(data.len() - start);
        Ok(data[start..start + len].to_vec())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.consult(DiskOp::Read, path, 0)?;
        let state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        Ok(state
            .file(state.regular_file(&located, path)?)
            .data
            .to_vec())
    }

    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        // A read, as the fault policy sees it.
        self.consult(DiskOp::Read, path, 0)?;
        let state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        let data = &state.file(state.regular_file(&located, path)?).data;
        // The very bytes the caller kept (shared with it by `replace_atomic_shared`)
        // are unchanged without a look at them.
        let same_bytes = data.as_ptr() == known.as_ptr() && data.len() == known.len();
        Ok(if same_bytes || data[..] == *known {
            Reread::Unchanged
        } else {
            Reread::Changed(data.to_vec())
        })
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.replace(path, contents, || FileData::Own(contents.to_vec()))
    }

    fn replace_atomic_shared(&self, path: &Path, contents: Bytes) -> io::Result<()> {
        self.replace(path, &contents, || FileData::Shared(contents.clone()))
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let verdict = self.consult(DiskOp::OverwriteInPlace, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        let mut state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        let Some(name) = located.leaf.as_deref() else {
            return Err(is_a_directory(path));
        };
        let now_ms = state.now_ms();
        match located.ino {
            // O_CREAT: a missing file is created, like create_new.
            None => {
                let ino = state.allocate(Inode::File(FileNode::new(
                    FileData::Own(kept.to_vec()),
                    now_ms,
                )));
                let dir = state.dir_mut(located.dir);
                dir.link(name, ino);
                dir.modified_unix_ms = now_ms;
            }
            Some(_) => {
                let ino = state.regular_file(&located, path)?;
                let file = state.file_mut(ino);
                file.data = FileData::Own(kept.to_vec());
                file.truncated_unsynced = true;
                file.modified_unix_ms = now_ms;
            }
        }
        let write = write_record(DiskOp::OverwriteInPlace, path, &located, kept.len(), torn);
        self.finish_write(state, write, ())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        check_path(to)?;
        self.consult(DiskOp::Rename, from, 0)?;
        let mut state = self.lock();
        let source = state.locate(from, false)?;
        let target = state.locate(to, false)?;
        let (Some(source_name), Some(target_name)) =
            (source.leaf.as_deref(), target.leaf.as_deref())
        else {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                "cannot rename the root directory",
            ));
        };
        let source_ino = source.ino.ok_or_else(|| not_found(from))?;
        let target_ino = target.ino;
        // Two names of one inode: rename(2) does nothing and succeeds.
        if target_ino == Some(source_ino) {
            return Ok(());
        }
        let source_is_dir = matches!(state.inode(source_ino), Inode::Dir(_));
        match target_ino.map(|ino| state.inode(ino)) {
            Some(Inode::Dir(dir)) if source_is_dir && !dir.entries.is_empty() => {
                return Err(path_error(
                    io::ErrorKind::DirectoryNotEmpty,
                    "directory not empty",
                    to,
                ))
            }
            Some(Inode::Dir(_)) if !source_is_dir => return Err(is_a_directory(to)),
            Some(Inode::File(_) | Inode::Symlink(_)) if source_is_dir => {
                return Err(not_a_directory(to))
            }
            _ => {}
        }
        // The directories above the target, wanted only here: resolved again in full.
        if source_is_dir && state.resolve(to, false)?.dirs.contains(&source_ino) {
            return Err(invalid_input("cannot move a directory into itself"));
        }
        state.forget_dir_paths();
        let now_ms = state.now_ms();
        let source_dir = state.dir_mut(source.dir);
        source_dir.unlink(source_name);
        source_dir.modified_unix_ms = now_ms;
        let target_dir = state.dir_mut(target.dir);
        target_dir.link(target_name, source_ino);
        target_dir.modified_unix_ms = now_ms;
        state.collect_garbage();
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        check_path(to)?;
        self.consult(DiskOp::HardLink, from, 0)?;
        let mut state = self.lock();
        let source = state.locate(from, false)?;
        let source_ino = source.ino.ok_or_else(|| not_found(from))?;
        let target = state.locate(to, false)?;
        let Some(target_name) = target.leaf.as_deref() else {
            return Err(already_exists(to));
        };
        if target.ino.is_some() {
            return Err(already_exists(to));
        }
        // link(2) does not follow a symlink: the new name is the link itself.
        if let Inode::Dir(_) = state.inode(source_ino) {
            return Err(path_error(
                io::ErrorKind::PermissionDenied,
                "hard link to a directory",
                from,
            ));
        }
        state.forget_dir_paths();
        let now_ms = state.now_ms();
        let dir = state.dir_mut(target.dir);
        dir.link(target_name, source_ino);
        dir.modified_unix_ms = now_ms;
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.consult(DiskOp::RemoveFile, path, 0)?;
        let mut state = self.lock();
        let located = state.locate(path, false)?;
        let Some(name) = located.leaf.as_deref() else {
            return Err(is_a_directory(path));
        };
        let ino = located.ino.ok_or_else(|| not_found(path))?;
        match state.inode(ino) {
            Inode::Dir(_) => return Err(is_a_directory(path)),
            Inode::Symlink(_) => state.forget_dir_paths(),
            Inode::File(_) => {}
        }
        let now_ms = state.now_ms();
        let dir = state.dir_mut(located.dir);
        dir.unlink(name);
        dir.modified_unix_ms = now_ms;
        state.collect_garbage();
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.consult(DiskOp::ListDir, path, 0)?;
        let state = self.lock();
        // opendir(3) follows a final symlink; RealDisk joins names to the path given.
        let located = state.locate(path, true)?;
        let ino = located.ino.ok_or_else(|| not_found(path))?;
        match state.inode(ino) {
            Inode::Dir(dir) => Ok(dir.entries.keys().map(|name| path.join(name)).collect()),
            Inode::File(_) | Inode::Symlink(_) => Err(not_a_directory(path)),
        }
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        self.consult(DiskOp::Metadata, path, 0)?;
        let state = self.lock();
        let located = state.locate(path, false)?;
        let ino = located.ino.ok_or_else(|| not_found(path))?;
        let inode = state.inode(ino);
        let (len_bytes, modified_unix_ms) = match inode {
            Inode::File(file) => (file.data.len() as u64, file.modified_unix_ms),
            Inode::Dir(dir) => (0, dir.modified_unix_ms),
            // lstat(2) gives a symlink's length as its target's.
            Inode::Symlink(link) => (link.target.as_os_str().len() as u64, link.modified_unix_ms),
        };
        Ok(FileMeta {
            kind: inode.kind(),
            len_bytes,
            modified_unix_ms,
        })
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.consult(DiskOp::SyncFile, path, 0)?;
        let mut state = self.lock();
        let located = state.locate(path, self.follow_final_symlinks)?;
        let ino = located.ino.ok_or_else(|| not_found(path))?;
        match state.inode_mut(ino) {
            Inode::File(file) => {
                file.synced_len_bytes = file.data.len();
                file.truncated_unsynced = false;
            }
            // RealDisk opens the path and fsyncs it, which for a directory syncs its
            // entries.
            Inode::Dir(dir) => dir.sync(),
            Inode::Symlink(_) => return Err(eloop()),
        }
        // A directory sync may have dropped the last durable name of a removed file.
        state.collect_garbage();
        Ok(())
    }
}

/// Directory paths by their xxh3 hash: each path's bytes and the directory inode it
/// resolved to. See [`State::dir_paths`].
type DirPaths = HashMap<u64, (Box<[u8]>, Ino), BuildHasherDefault<HashIsKey>>;

/// Hashes a `u64` that already is a hash to itself.
#[derive(Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// Everything behind a [`MemDisk`]'s lock.
struct State {
    /// Every inode some current or durable entry may reach, indexed by number. A
    /// vector rather than a map: every path component looks an inode up. Collecting
    /// garbage renumbers the survivors in order (see [`State::keep_only`]), so numbers
    /// stay indices and the vector stays as long as the disk's inodes.
    inodes: Vec<Inode>,
    /// Collect unreachable inodes once there are more than this many.
    gc_inodes_threshold: usize,
    /// The directory inode each directory path (the bytes of a located path before
    /// its last `/`) resolved to, for [`State::locate`] to skip the walk: most paths
    /// have four or five components, each a map lookup comparing names.
    ///
    /// Holds only walks that succeeded through directories alone, no symlink. Such a
    /// walk changes outcome only when an entry naming a directory is removed or
    /// pointed elsewhere, which only [`Disk::rename`] and [`State::crash`] do, or when
    /// inodes are renumbered ([`State::keep_only`]); each of those forgets every path
    /// (see [`State::forget_dir_paths`]), as do the rarer operations that change
    /// entries in other ways, to be safe. A `RefCell` because `locate` only reads
    /// the disk, under the disk's lock.
    ///
    /// Keyed by the path's xxh3 hash, computed in one call rather than fed to a
    /// `Hasher` piece by piece (which costs about twice as much for a short path);
    /// the path's bytes are kept to tell two paths of one hash apart.
    dir_paths: RefCell<DirPaths>,
    clock: Option<Arc<dyn Clock>>,
    observer: Option<Observer>,
}

impl Default for State {
    fn default() -> Self {
        let mut root = DirNode::new(None);
        root.durable_entries = root.entries.clone();
        Self {
            inodes: vec![Inode::Dir(root)],
            gc_inodes_threshold: GC_INODES_MIN,
            dir_paths: RefCell::default(),
            clock: None,
            observer: None,
        }
    }
}

enum Inode {
    File(FileNode),
    Dir(DirNode),
    Symlink(SymlinkNode),
}

impl Inode {
    fn kind(&self) -> FileKind {
        match self {
            Inode::File(_) => FileKind::File,
            Inode::Dir(_) => FileKind::Dir,
            Inode::Symlink(_) => FileKind::Symlink,
        }
    }
}

/// A file's bytes: its own, or bytes a writer shares with it
/// ([`Disk::replace_atomic_shared`]), copied only when the file is written again in
/// place.
enum FileData {
    Own(Vec<u8>),
    Shared(Bytes),
}

impl FileData {
    /// The bytes, to change in place: shared bytes are copied first.
    fn to_mut(&mut self) -> &mut Vec<u8> {
        if let FileData::Shared(shared) = self {
            *self = FileData::Own(shared.to_vec());
        }
        match self {
            FileData::Own(bytes) => bytes,
            FileData::Shared(_) => unreachable!("shared bytes were just copied"),
        }
    }
}

impl std::ops::Deref for FileData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileData::Own(bytes) => bytes,
            FileData::Shared(bytes) => bytes,
        }
    }
}

struct FileNode {
    /// What reads see.
    data: FileData,
    /// How many bytes of `data`, from its start, the last sync made durable. A
    /// length, not a copy: until an overwrite in place, bytes only get appended, so
    /// what the last sync made durable is a prefix of `data`.
    synced_len_bytes: usize,
    /// Whether an overwrite in place truncated the file since its last sync. When
    /// true, what the last sync made durable is no longer a prefix of `data`, and
    /// a crash does not need it (see [`FileNode::after_crash`]).
    truncated_unsynced: bool,
    modified_unix_ms: Option<u64>,
}

impl FileNode {
    fn new(data: FileData, modified_unix_ms: Option<u64>) -> Self {
        Self {
            data,
            synced_len_bytes: 0,
            truncated_unsynced: false,
            modified_unix_ms,
        }
    }

    /// The bytes this file holds after a crash, drawn from `rng`; `None` if nothing
    /// is pending (no draw).
    fn after_crash(&self, rng: &mut dyn RngCore) -> Option<Vec<u8>> {
        if self.truncated_unsynced {
            // The truncation reached the journal with the metadata; the new blocks,
            // delayed-allocated, may not have: empty half the time, else torn.
            let len = self.data.len() as u64;
            let kept = if len == 0 || below(rng, 2) == 0 {
                0
            } else {
                below(rng, len)
            };
            return Some(self.data[..to_usize(kept)].to_vec());
        }
        assert!(
            self.synced_len_bytes <= self.data.len(),
            "a file not truncated since its sync only grows"
        );
        let pending_len = (self.data.len() - self.synced_len_bytes) as u64;
        if pending_len == 0 {
            return None;
        }
        let kept = below(rng, pending_len + 1);
        Some(self.data[..self.synced_len_bytes + to_usize(kept)].to_vec())
    }
}

struct DirNode {
    /// The entries operations see. Changed only through [`DirNode::link`] and
    /// [`DirNode::unlink`], which note the names they change in `unsynced`.
    entries: BTreeMap<OsString, Ino>,
    /// The entries as of the directory's last sync.
    durable_entries: BTreeMap<OsString, Ino>,
    /// The names linked or unlinked since the last sync: the only ones where
    /// `entries` and `durable_entries` may differ.
    unsynced: BTreeSet<OsString>,
    modified_unix_ms: Option<u64>,
}

impl DirNode {
    fn new(modified_unix_ms: Option<u64>) -> Self {
        Self {
            entries: BTreeMap::new(),
            durable_entries: BTreeMap::new(),
            unsynced: BTreeSet::new(),
            modified_unix_ms,
        }
    }

    /// Points the entry `name` at `ino`, copying the name only when it is new: most
    /// writes replace an existing name.
    fn link(&mut self, name: &OsStr, ino: Ino) {
        match self.entries.get_mut(name) {
            Some(entry) => *entry = ino,
            None => {
                self.entries.insert(name.to_owned(), ino);
            }
        }
        self.note_unsynced(name);
    }

    /// Removes the entry `name`, if there is one.
    fn unlink(&mut self, name: &OsStr) {
        if self.entries.remove(name).is_some() {
            self.note_unsynced(name);
        }
    }

    fn note_unsynced(&mut self, name: &OsStr) {
        if !self.unsynced.contains(name) {
            self.unsynced.insert(name.to_owned());
        }
    }

    /// Makes the current entries durable, as an `fsync` of the directory does.
    ///
    /// Visits only the names changed since the last sync: a directory of n files
    /// synced after each of n writes would otherwise cost n² name comparisons.
    fn sync(&mut self) {
        for name in std::mem::take(&mut self.unsynced) {
            match self.entries.get(&name) {
                Some(&ino) => {
                    self.durable_entries.insert(name, ino);
                }
                None => {
                    self.durable_entries.remove(&name);
                }
            }
        }
    }

    /// Sets the current and the durable entries both to `entries`, as after a
    /// crash: nothing is left to sync.
    fn reset_durable(&mut self, entries: BTreeMap<OsString, Ino>) {
        self.entries = entries.clone();
        self.durable_entries = entries;
        self.unsynced.clear();
    }
}

struct SymlinkNode {
    target: PathBuf,
    modified_unix_ms: Option<u64>,
}

/// Where a path leads, as [`State::resolve`] finds it: the directories from `/` down
/// to the one holding the last component, and that component's name, all owned.
struct Resolved {
    /// Directory inodes from the root (first) to the one holding `leaf`.
    dirs: Vec<Ino>,
    /// The names of `dirs[1..]`.
    names: Vec<OsString>,
    /// The last component; `None` when the path resolves to `/` itself.
    leaf: Option<OsString>,
    /// Whether a symlink was followed.
    through_symlink: bool,
}

/// Where a path leads, as [`State::locate`] finds it: the directory holding the last
/// component, and that component's name.
///
/// Borrows the caller's path rather than copying its names: every operation locates
/// its path, and almost none goes through a symlink, so the path written is almost
/// always the path given.
struct Located<'p> {
    /// The directory inode holding `leaf` (the root for `/` itself).
    dir: Ino,
    /// The last component; `None` when the path resolves to `/` itself. Borrowed
    /// from the caller's path unless a symlink was followed.
    leaf: Option<Cow<'p, OsStr>>,
    /// The names of the directories from `/` down to `dir` when a symlink was
    /// followed; `None` when the caller's path names them itself.
    followed_names: Option<Vec<OsString>>,
    /// Whether a symlink was followed.
    through_symlink: bool,
    /// The inode `leaf` names (the root for `/` itself), if any: found on the way,
    /// and every operation wants it.
    ino: Option<Ino>,
}

impl Located<'_> {
    /// The path written or read, with every followed symlink resolved; `path` is the
    /// path this was located from.
    ///
    /// Joins the names as bytes: [`PathBuf::push`] would check each for a root first.
    fn resolved_path(&self, path: &Path) -> PathBuf {
        let mut resolved = Vec::with_capacity(path.as_os_str().len() + 1);
        let mut push = |name: &OsStr| {
            resolved.push(b'/');
            resolved.extend_from_slice(name.as_bytes());
        };
        match &self.followed_names {
            // The caller's own names, without its `.` components and extra slashes.
            None => path_names(path).for_each(&mut push),
            Some(names) => names
                .iter()
                .map(OsString::as_os_str)
                .chain(self.leaf.as_deref())
                .for_each(&mut push),
        }
        if resolved.is_empty() {
            resolved.push(b'/');
        }
        PathBuf::from(OsString::from_vec(resolved))
    }
}

/// Refuses relative paths and `..`, as every operation does before anything else,
/// without allocating.
///
/// Looks only at the dots rather than at every name: in an absolute path a `..` name
/// is two dots after a `/` and before a `/` or the end, and most paths hold a dot or
/// two.
fn check_path(path: &Path) -> io::Result<()> {
    let bytes = path.as_os_str().as_bytes();
    if !is_absolute(bytes) {
        return Err(relative_path(path));
    }
    for dot in memchr::memchr_iter(b'.', bytes) {
        // The path starts with `/`: a dot has a byte before it.
        let is_parent = bytes[dot - 1] == b'/'
            && bytes.get(dot + 1) == Some(&b'.')
            && matches!(bytes.get(dot + 2), None | Some(b'/'));
        if is_parent {
            return Err(parent_in_path(path));
        }
    }
    Ok(())
}

/// Whether a path's bytes are absolute, as [`Path::is_absolute`] says on Unix.
fn is_absolute(path: &[u8]) -> bool {
    path.first() == Some(&b'/')
}

/// The next name of the absolute path `path`, whose bytes from `rest` on are still
/// unread, as [`Path::components`] gives it on Unix: `/` and `.` skipped, `..`
/// refused.
///
/// Splits the bytes on `/` itself: every operation goes through its path two or
/// three times, and [`Path::components`] spends several times as long per name.
fn next_name<'p>(rest: &mut &'p [u8], path: &Path) -> io::Result<Option<&'p OsStr>> {
    // Each round consumes at least one byte or returns, so the loop ends.
    loop {
        let name_start = rest
            .iter()
            .position(|&byte| byte != b'/')
            .unwrap_or(rest.len());
        let unread = &rest[name_start..];
        // Not memchr: names are short, and a call to it costs more than the loop.
        let name_len = unread
            .iter()
            .position(|&byte| byte == b'/')
            .unwrap_or(unread.len());
        let (name, after) = unread.split_at(name_len);
        *rest = after;
        match name {
            b"" => return Ok(None),
            b"." => {}
            b".." => return Err(parent_in_path(path)),
            _ => return Ok(Some(OsStr::from_bytes(name))),
        }
    }
}

/// The names of a path [`check_path`] accepted, in order.
fn path_names(path: &Path) -> impl Iterator<Item = &OsStr> {
    let mut rest = path.as_os_str().as_bytes();
    // A checked path has no `..`: no error to lose.
    iter::from_fn(move || next_name(&mut rest, path).ok().flatten())
}

/// One component still to resolve.
enum Part {
    Name(OsString),
    /// `..`, only from a symlink's target.
    Parent,
}

/// The components of a caller's path, refusing relative paths and `..`.
fn path_parts(path: &Path) -> io::Result<VecDeque<Part>> {
    check_path(path)?;
    Ok(path_names(path)
        .map(|name| Part::Name(name.to_owned()))
        .collect())
}

fn relative_path(path: &Path) -> io::Error {
    path_error(
        io::ErrorKind::InvalidInput,
        "MemDisk needs absolute paths",
        path,
    )
}

fn parent_in_path(path: &Path) -> io::Error {
    path_error(
        io::ErrorKind::InvalidInput,
        "MemDisk refuses `..` in paths",
        path,
    )
}

impl State {
    /// The modification time to stamp now, read from the clock if there is one.
    fn now_ms(&self) -> Option<u64> {
        self.clock.as_ref().map(|clock| clock.unix_ms())
    }

    fn inode(&self, ino: Ino) -> &Inode {
        &self.inodes[ino]
    }

    fn inode_mut(&mut self, ino: Ino) -> &mut Inode {
        &mut self.inodes[ino]
    }

    fn dir(&self, ino: Ino) -> &DirNode {
        match self.inode(ino) {
            Inode::Dir(dir) => dir,
            _ => panic!("inode {ino} is not a directory"),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> &mut DirNode {
        match self.inode_mut(ino) {
            Inode::Dir(dir) => dir,
            _ => panic!("inode {ino} is not a directory"),
        }
    }

    fn file(&self, ino: Ino) -> &FileNode {
        match self.inode(ino) {
            Inode::File(file) => file,
            _ => panic!("inode {ino} is not a file"),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> &mut FileNode {
        match self.inode_mut(ino) {
            Inode::File(file) => file,
            _ => panic!("inode {ino} is not a file"),
        }
    }

    /// Adds `inode` with the next number, above every number in use.
    fn allocate(&mut self, inode: Inode) -> Ino {
        self.inodes.push(inode);
        self.inodes.len() - 1
    }

    /// Empties [`State::dir_paths`]: what a directory path resolves to may have
    /// changed.
    fn forget_dir_paths(&mut self) {
        self.dir_paths.get_mut().clear();
    }

    /// Resolves `path` down to its last component, following symlinks in directory
    /// components, and in the last one too if `follow_final`.
    ///
    /// Looks the directory part up in [`State::dir_paths`] first, and walks the
    /// caller's names in place when it is not there; a symlink to follow hands the
    /// whole path over to [`State::resolve`], which gives the same result for a path
    /// that follows none, at the price of owning every name.
    fn locate<'p>(&self, path: &'p Path, follow_final: bool) -> io::Result<Located<'p>> {
        let mut rest = path.as_os_str().as_bytes();
        if !is_absolute(rest) {
            return Err(relative_path(path));
        }
        // The path is absolute: it has a last `/`.
        let last_slash = memchr::memrchr(b'/', rest).expect("an absolute path has a `/`");
        let (dir_path, leaf) = (&rest[..last_slash], &rest[last_slash + 1..]);
        // A last name that is a name: the walk would end on it, in the directory the
        // part before it resolves to, and refuse nothing after that part.
        let cacheable = !dir_path.is_empty() && !matches!(leaf, b"" | b"." | b"..");
        let dir_path_hash = if cacheable { xxh3_64(dir_path) } else { 0 };
        if cacheable {
            let cached = match self.dir_paths.borrow().get(&dir_path_hash) {
                Some((bytes, dir)) if **bytes == *dir_path => Some(*dir),
                _ => None,
            };
            if let Some(dir) = cached {
                let leaf = OsStr::from_bytes(leaf);
                let child = self.dir(dir).entries.get(leaf).copied();
                let follows = follow_final
                    && matches!(child.map(|ino| self.inode(ino)), Some(Inode::Symlink(_)));
                if !follows {
                    return Ok(Located {
                        dir,
                        leaf: Some(Cow::Borrowed(leaf)),
                        followed_names: None,
                        through_symlink: false,
                        ino: child,
                    });
                }
            }
        }
        let mut dir = ROOT_INO;
        let mut next = next_name(&mut rest, path)?;
        // Each round consumes a name of the caller's path, so the loop ends.
        while let Some(name) = next {
            // One name ahead: whether this one is the last, and `..` refused before
            // anything is looked up.
            next = next_name(&mut rest, path)?;
            let is_final = next.is_none();
            let child = self.dir(dir).entries.get(name).copied();
            let error = match child.map(|ino| (ino, self.inode(ino))) {
                Some((ino, Inode::Dir(_))) if !is_final => {
                    dir = ino;
                    continue;
                }
                Some((_, Inode::Symlink(_))) if !is_final || follow_final => {
                    let resolved = self.resolve(path, follow_final)?;
                    let dir = *resolved.dirs.last().expect("the root is always first");
                    let ino = match &resolved.leaf {
                        None => Some(ROOT_INO),
                        Some(name) => self.dir(dir).entries.get(name).copied(),
                    };
                    return Ok(Located {
                        dir,
                        leaf: resolved.leaf.map(Cow::Owned),
                        followed_names: Some(resolved.names),
                        through_symlink: resolved.through_symlink,
                        ino,
                    });
                }
                Some((_, Inode::File(_))) if !is_final => not_a_directory(path),
                None if !is_final => not_found(path),
                // The last name, reached through directories alone.
                _ => {
                    if cacheable {
                        let mut dir_paths = self.dir_paths.borrow_mut();
                        if dir_paths.len() >= DIR_PATHS_MAX {
                            dir_paths.clear();
                        }
                        // A path of the same hash, if any, is forgotten.
                        dir_paths.insert(dir_path_hash, (dir_path.into(), dir));
                    }
                    return Ok(Located {
                        dir,
                        leaf: Some(Cow::Borrowed(name)),
                        followed_names: None,
                        through_symlink: false,
                        ino: child,
                    });
                }
            };
            // A `..` further on is refused first, as before any lookup.
            check_path(path)?;
            return Err(error);
        }
        Ok(Located {
            dir,
            leaf: None,
            followed_names: None,
            through_symlink: false,
            ino: Some(ROOT_INO),
        })
    }

    /// [`State::locate`] with every name owned and every directory on the way kept,
    /// following symlinks in directory components, and in the last one too if
    /// `follow_final`.
    fn resolve(&self, path: &Path, follow_final: bool) -> io::Result<Resolved> {
        let mut pending = path_parts(path)?;
        let mut dirs = vec![ROOT_INO];
        let mut names: Vec<OsString> = Vec::new();
        let mut through_symlink = false;
        let mut follows_count = 0u32;
        // Each round consumes a part; symlinks add parts, at most
        // SYMLINK_FOLLOWS_MAX times, so the loop ends.
        while let Some(part) = pending.pop_front() {
            let name = match part {
                Part::Parent => {
                    if names.pop().is_some() {
                        dirs.pop();
                    }
                    continue;
                }
                Part::Name(name) => name,
            };
            let is_final = pending.is_empty();
            let dir = *dirs.last().expect("the root is always first");
            let child = self.dir(dir).entries.get(&name).copied();
            match child.map(|ino| (ino, self.inode(ino))) {
                Some((ino, Inode::Dir(_))) if !is_final => {
                    dirs.push(ino);
                    names.push(name);
                }
                Some((_, Inode::Symlink(link))) if !is_final || follow_final => {
                    follows_count += 1;
                    if follows_count > SYMLINK_FOLLOWS_MAX {
                        return Err(eloop());
                    }
                    through_symlink = true;
                    if link.target.is_absolute() {
                        dirs.truncate(1);
                        names.clear();
                    }
                    for component in link.target.components().rev() {
                        match component {
                            Component::Normal(name) => {
                                pending.push_front(Part::Name(name.to_owned()))
                            }
                            Component::ParentDir => pending.push_front(Part::Parent),
                            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                        }
                    }
                }
                Some((_, Inode::File(_))) if !is_final => return Err(not_a_directory(path)),
                None if !is_final => return Err(not_found(path)),
                _ => {
                    return Ok(Resolved {
                        dirs,
                        names,
                        leaf: Some(name),
                        through_symlink,
                    })
                }
            }
        }
        // The path ended on a directory reached through `..` or a symlink (or is `/`).
        let leaf = names.pop();
        if leaf.is_some() {
            dirs.pop();
        }
        Ok(Resolved {
            dirs,
            names,
            leaf,
            through_symlink,
        })
    }

    /// The regular file `located` names, or the error opening it would give.
    fn regular_file(&self, located: &Located<'_>, path: &Path) -> io::Result<Ino> {
        let ino = located.ino.ok_or_else(|| not_found(path))?;
        match self.inode(ino) {
            Inode::File(_) => Ok(ino),
            Inode::Dir(_) => Err(is_a_directory(path)),
            // Only reached when the final symlink was not followed: O_NOFOLLOW.
            Inode::Symlink(_) => Err(eloop()),
        }
    }

    /// Every path of the current namespace, with its inode.
    fn namespace(&self) -> BTreeMap<PathBuf, Ino> {
        let mut paths = BTreeMap::new();
        let mut pending = vec![(ROOT_INO, PathBuf::from("/"))];
        // Each directory has one name, so each is pushed once: the loop is bounded by
        // the number of inodes.
        while let Some((dir, dir_path)) = pending.pop() {
            for (name, &ino) in &self.dir(dir).entries {
                let path = dir_path.join(name);
                if let Inode::Dir(_) = self.inode(ino) {
                    pending.push((ino, path.clone()));
                }
                let previous = paths.insert(path, ino);
                assert!(previous.is_none(), "a directory has one name");
            }
        }
        paths
    }

    /// Drops inodes no current or durable entry reaches, once there are enough.
    fn collect_garbage(&mut self) {
        if self.inodes.len() <= self.gc_inodes_threshold {
            return;
        }
        let mut live = vec![false; self.inodes.len()];
        live[ROOT_INO] = true;
        let mut pending = vec![ROOT_INO];
        while let Some(dir) = pending.pop() {
            let dir = self.dir(dir);
            for &ino in dir.entries.values().chain(dir.durable_entries.values()) {
                if !live[ino] {
                    live[ino] = true;
                    if let Inode::Dir(_) = self.inode(ino) {
                        pending.push(ino);
                    }
                }
            }
        }
        self.keep_only(&live);
        self.gc_inodes_threshold = (2 * self.inodes.len()).max(GC_INODES_MIN);
    }

    /// Drops every inode `live` does not mark, and renumbers the others in their
    /// order, so that numbers stay indices into `inodes` and whatever is done in inode
    /// order (crash draws) keeps its order. The entries of the kept directories must
    /// name kept inodes only.
    fn keep_only(&mut self, live: &[bool]) {
        let mut renumbered = Vec::with_capacity(live.len());
        let mut kept_count = 0;
        for &is_live in live {
            renumbered.push(kept_count);
            kept_count += usize::from(is_live);
        }
        if kept_count == self.inodes.len() {
            return;
        }
        self.forget_dir_paths();
        let mut ino = 0;
        self.inodes.retain(|_| {
            ino += 1;
            live[ino - 1]
        });
        for inode in &mut self.inodes {
            if let Inode::Dir(dir) = inode {
                let entries = dir.entries.values_mut();
                for entry in entries.chain(dir.durable_entries.values_mut()) {
                    *entry = renumbered[*entry];
                }
            }
        }
    }

    fn crash(&mut self, rng: &mut dyn RngCore) -> CrashReport {
        self.forget_dir_paths();
        let before = self.namespace();

        // What names survive: the durable entries of every directory durably
        // reachable from the root, walked breadth first in name order. A directory
        // reached a second time keeps only its first name (see the module docs), so
        // each is walked once.
        let mut surviving_entries: BTreeMap<Ino, BTreeMap<OsString, Ino>> = BTreeMap::new();
        let mut reachable = vec![false; self.inodes.len()];
        reachable[ROOT_INO] = true;
        let mut after: BTreeMap<PathBuf, Ino> = BTreeMap::new();
        let mut pending = VecDeque::from([(ROOT_INO, PathBuf::from("/"))]);
        while let Some((dir, dir_path)) = pending.pop_front() {
            let mut kept = BTreeMap::new();
            for (name, &ino) in &self.dir(dir).durable_entries {
                let first_visit = !reachable[ino];
                reachable[ino] = true;
                let path = dir_path.join(name);
                if let Inode::Dir(_) = self.inode(ino) {
                    if !first_visit {
                        continue;
                    }
                    pending.push_back((ino, path.clone()));
                }
                kept.insert(name.clone(), ino);
                after.insert(path, ino);
            }
            surviving_entries.insert(dir, kept);
        }

        // What the surviving files hold, drawn in inode order for determinism.
        let mut crashed_data: BTreeMap<Ino, Vec<u8>> = BTreeMap::new();
        for ino in (0..reachable.len()).filter(|&ino| reachable[ino]) {
            if let Inode::File(file) = self.inode(ino) {
                if let Some(data) = file.after_crash(rng) {
                    crashed_data.insert(ino, data);
                }
            }
        }

        let mut report = CrashReport::default();
        for (path, &ino) in &before {
            match after.get(path) {
                None => report.lost.push(path.clone()),
                Some(&after_ino) => {
                    let old = self.shape(ino, None);
                    let new = self.shape(after_ino, crashed_data.get(&after_ino));
                    if old != new {
                        report.changed.push(path.clone());
                    }
                }
            }
        }
        report.reappeared = after
            .keys()
            .filter(|path| !before.contains_key(*path))
            .cloned()
            .collect();

        let survivors = self
            .inodes
            .iter_mut()
            .enumerate()
            .filter(|&(ino, _)| reachable[ino]);
        for (ino, inode) in survivors {
            match inode {
                Inode::Dir(dir) => {
                    let entries = surviving_entries
                        .remove(&ino)
                        .expect("every reachable directory was walked");
                    dir.reset_durable(entries);
                }
                Inode::File(file) => {
                    if let Some(data) = crashed_data.remove(&ino) {
                        file.synced_len_bytes = data.len();
                        file.data = FileData::Own(data);
                    }
                    file.truncated_unsynced = false;
                    assert_eq!(
                        file.data.len(),
                        file.synced_len_bytes,
                        "a crash leaves only durable data"
                    );
                }
                Inode::Symlink(_) => {}
            }
        }
        self.keep_only(&reachable);
        self.gc_inodes_threshold = (2 * self.inodes.len()).max(GC_INODES_MIN);
        report
    }

    /// What `ino` holds, for comparing before and after a crash; `data` overrides a
    /// file's bytes.
    fn shape<'a>(&'a self, ino: Ino, data: Option<&'a Vec<u8>>) -> Shape<'a> {
        match self.inode(ino) {
            Inode::File(file) => Shape::File(data.map_or(&file.data, Vec::as_slice)),
            Inode::Dir(_) => Shape::Dir,
            Inode::Symlink(link) => Shape::Symlink(&link.target),
        }
    }
}

#[derive(PartialEq, Eq)]
enum Shape<'a> {
    File(&'a [u8]),
    Dir,
    Symlink(&'a Path),
}

use super::disk_policy::below;

fn to_usize(len: u64) -> usize {
    usize::try_from(len).expect("a length within a slice fits usize")
}

fn eloop() -> io::Error {
    io::Error::from_raw_os_error(errno::ELOOP)
}

fn invalid_input(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.into())
}

/// An error of `kind` about `path`, reading "`what`: `path`".
fn path_error(kind: io::ErrorKind, what: &'static str, path: &Path) -> io::Error {
    io::Error::new(
        kind,
        PathError {
            what,
            path: path.to_owned(),
        },
    )
}

/// The message of a [`path_error`], written only when displayed: many errors are
/// expected and never read (every `create_new` of a lock file someone holds fails),
/// and formatting one costs more than the operation that failed.
struct PathError {
    what: &'static str,
    path: PathBuf,
}

impl fmt::Display for PathError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.what, self.path.display())
    }
}

/// As the message's `String` shows it, which is how the error showed when it held
/// one: `{:?}` of the `io::Error` reads the same.
impl fmt::Debug for PathError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), formatter)
    }
}

impl std::error::Error for PathError {}

fn not_found(path: &Path) -> io::Error {
    path_error(io::ErrorKind::NotFound, "no such file or directory", path)
}

fn already_exists(path: &Path) -> io::Error {
    path_error(io::ErrorKind::AlreadyExists, "file exists", path)
}

fn not_a_directory(path: &Path) -> io::Error {
    path_error(io::ErrorKind::NotADirectory, "not a directory", path)
}

fn is_a_directory(path: &Path) -> io::Error {
    path_error(io::ErrorKind::IsADirectory, "is a directory", path)
}

/// [`MemDisk`] is shared across threads and tasks: keep it `Send + Sync`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MemDisk>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// How paths were split before [`next_name`]: through [`Path::components`].
    fn names_by_components(path: &Path) -> io::Result<Vec<&OsStr>> {
        if !path.is_absolute() {
            return Err(relative_path(path));
        }
        let mut names = Vec::new();
        for component in path.components() {
            match component {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => names.push(name),
                Component::ParentDir | Component::Prefix(_) => return Err(parent_in_path(path)),
            }
        }
        Ok(names)
    }

    fn same_outcome<T: PartialEq + fmt::Debug>(left: &io::Result<T>, right: &io::Result<T>) {
        match (left, right) {
            (Ok(left), Ok(right)) => assert_eq!(left, right),
            (Err(left), Err(right)) => {
                assert_eq!(left.kind(), right.kind());
                assert_eq!(left.raw_os_error(), right.raw_os_error());
                assert_eq!(left.to_string(), right.to_string());
            }
            _ => panic!("{left:?} != {right:?}"),
        }
    }

    #[test]
    fn names_split_as_path_components_does() {
        let paths = [
            "",
            "/",
            "//",
            "///",
            "/.",
            "/./",
            "/a",
            "a",
            "./a",
            "a/b",
            "/a/",
            "/a//b",
            "//a///b//",
            "/./a/./b/.",
            "/a/.hidden",
            "/a/..b",
            "/a/b..",
            "/...",
            "/a/...",
            "/..",
            "/../a",
            "/a/..",
            "/a/../b",
            "/a/b/..",
            "/a/./..",
            "/a\\b",
            "/ /a",
        ];
        for path in paths.map(Path::new) {
            let names = check_path(path).map(|()| path_names(path).collect::<Vec<_>>());
            same_outcome(&names, &names_by_components(path));
        }
    }

    proptest::proptest! {
        /// Paths of slashes, dots and one letter reach every case of `.` and `..`
        /// at the start, middle and end of a path.
        #[test]
        fn any_path_is_checked_and_split_as_path_components_does(path in "[/.a]{0,12}") {
            let path = Path::new(&path);
            let names = check_path(path).map(|()| path_names(path).collect::<Vec<_>>());
            same_outcome(&names, &names_by_components(path));
        }
    }

    /// [`PathError`]s show exactly as the formatted messages they stand for.
    #[test]
    fn path_errors_show_as_their_messages() {
        let path = Path::new("/a/b \"c\"\n");
        let cases = [
            (not_found(path), "no such file or directory"),
            (already_exists(path), "file exists"),
            (not_a_directory(path), "not a directory"),
            (is_a_directory(path), "is a directory"),
            (relative_path(path), "MemDisk needs absolute paths"),
            (parent_in_path(path), "MemDisk refuses `..` in paths"),
        ];
        for (error, what) in cases {
            let message = io::Error::new(error.kind(), format!("{what}: {}", path.display()));
            assert_eq!(error.to_string(), message.to_string());
            assert_eq!(format!("{error:?}"), format!("{message:?}"));
            assert_eq!(error.raw_os_error(), None);
        }
    }

    #[test]
    fn sync_leaves_the_entries_a_clone_would() {
        // Goal: a sync that visits only the changed names leaves the durable
        // entries equal to the current ones, whatever changed. Method: from each
        // durable state, the links and unlinks that reach each current state.
        let name = |text: &str| OsString::from(text);
        let cases = [
            (vec![("a", 2), ("b", 3)], vec![("a", 2), ("b", 3)]),
            (vec![("a", 2), ("b", 4)], vec![("a", 2), ("b", 3)]),
            (vec![("a", 2), ("b", 3), ("c", 5)], vec![("a", 2), ("b", 3)]),
            (vec![("b", 3)], vec![("a", 2), ("b", 3), ("c", 4)]),
            (vec![("a", 2), ("d", 7)], vec![("b", 3), ("c", 4)]),
            (vec![], vec![("a", 2)]),
            (vec![("a", 2)], vec![]),
        ];
        for (entries, durable_entries) in cases {
            let mut dir = DirNode::new(None);
            dir.reset_durable(
                durable_entries
                    .iter()
                    .map(|&(key, ino)| (name(key), ino))
                    .collect(),
            );
            for (key, _) in &durable_entries {
                dir.unlink(&name(key));
            }
            for &(key, ino) in &entries {
                dir.link(&name(key), ino);
            }
            dir.sync();
            assert_eq!(dir.durable_entries, dir.entries);
            assert!(dir.unsynced.is_empty());
        }
    }

    /// [`State::locate`] and the location [`State::resolve`] finds: the same
    /// directory, leaf, resolved path and errors, whatever symlinks are on the way.
    #[test]
    fn locate_agrees_with_resolve() {
        let disk = MemDisk::new();
        for dir in ["/a/b/c", "/d", "/e/f"] {
            disk.create_dir_all(Path::new(dir)).unwrap();
        }
        for file in ["/a/file", "/a/b/file", "/e/f/file"] {
            disk.create_new(Path::new(file), b"bytes").unwrap();
        }
        for (link, target) in [
            ("/a/to-b", "b"),
            ("/a/to-file", "file"),
            ("/a/b/up", ".."),
            ("/a/b/up-twice", "../.."),
            ("/d/to-abs", "/a/b"),
            ("/d/to-chain", "to-abs"),
            ("/d/dangling", "missing"),
            ("/d/loop", "loop"),
            ("/d/to-root", "/"),
            ("/d/via-file", "/a/file/x"),
            ("/e/to-f-up", "f/.."),
        ] {
            disk.plant_symlink(Path::new(link), Path::new(target))
                .unwrap();
        }
        let paths = [
            "/",
            "//",
            "/a",
            "/a/",
            "/a/b",
            "/a/b/c",
            "/a/b/c/",
            "/a/./b",
            "/a/file",
            "/a/file/x",
            "/a/missing",
            "/a/missing/x",
            "/x/y",
            "/a/to-b",
            "/a/to-b/c",
            "/a/to-b/file",
            "/a/to-file",
            "/a/to-file/x",
            "/a/b/up",
            "/a/b/up/file",
            "/a/b/up-twice",
            "/a/b/up-twice/d",
            "/d/to-abs",
            "/d/to-abs/c",
            "/d/to-chain",
            "/d/to-chain/file",
            "/d/dangling",
            "/d/dangling/x",
            "/d/loop",
            "/d/loop/x",
            "/d/to-root",
            "/d/to-root/a",
            "/d/via-file",
            "/d/via-file/x",
            "/e/to-f-up",
            "/e/to-f-up/f/file",
            "relative",
            "/a/../b",
            "/missing/../b",
            "/a/file/x/..",
        ];
        let state = disk.lock();
        // Twice: the second round finds the directory paths the first remembered.
        for path in paths.map(Path::new).into_iter().chain(paths.map(Path::new)) {
            for follow_final in [false, true] {
                let located = state.locate(path, follow_final).map(|located| {
                    let ino = located.ino;
                    let leaf = located.leaf.as_deref().map(OsStr::to_owned);
                    let resolved_path = located.resolved_path(path);
                    (
                        located.dir,
                        leaf,
                        resolved_path,
                        located.through_symlink,
                        ino,
                    )
                });
                let resolved = state.resolve(path, follow_final).map(|resolved| {
                    let dir = *resolved.dirs.last().unwrap();
                    let mut resolved_path = PathBuf::from("/");
                    resolved_path.extend(&resolved.names);
                    resolved_path.extend(&resolved.leaf);
                    let ino = match &resolved.leaf {
                        None => Some(ROOT_INO),
                        Some(name) => state.dir(dir).entries.get(name).copied(),
                    };
                    (
                        dir,
                        resolved.leaf,
                        resolved_path,
                        resolved.through_symlink,
                        ino,
                    )
                });
                same_outcome(&located, &resolved);
            }
        }
    }

    /// A directory path remembered by `locate` resolves anew once a rename or a
    /// crash moved what it names.
    #[test]
    fn remembered_directory_paths_follow_renames_and_crashes() {
        let disk = MemDisk::new();
        disk.create_dir_all(Path::new("/a/b")).unwrap();
        disk.create_new(Path::new("/a/b/file"), b"old").unwrap();
        assert_eq!(disk.read(Path::new("/a/b/file")).unwrap(), b"old");
        disk.rename(Path::new("/a/b"), Path::new("/a/c")).unwrap();
        let error = disk.read(Path::new("/a/b/file")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert_eq!(disk.read(Path::new("/a/c/file")).unwrap(), b"old");
        disk.create_dir_all(Path::new("/a/b")).unwrap();
        disk.create_new(Path::new("/a/b/file"), b"new").unwrap();
        assert_eq!(disk.read(Path::new("/a/b/file")).unwrap(), b"new");
        // Neither file was synced into its directory: the crash drops both, and with
        // them the inode numbers `/a/b` and `/a/c` resolved to before it.
        let mut rng =
            <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(7);
        disk.crash(&mut rng);
        for (path, exists) in [
            ("/a/b", true),
            ("/a/c", true),
            ("/a/b/file", false),
            ("/a/c/file", false),
        ] {
            assert_eq!(disk.exists(Path::new(path)), exists, "{path}");
        }
        disk.create_new(Path::new("/a/c/file"), b"after").unwrap();
        assert_eq!(disk.read(Path::new("/a/c/file")).unwrap(), b"after");
        assert!(!disk.exists(Path::new("/a/b/file")));
    }
}
