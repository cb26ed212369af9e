//! A disk whose files live in a store of their own, addressed by the run's virtual
//! paths: [`BackedDisk`].
//!
//! Two stores exist. The production [`RealDisk`](coord_runtime::world::RealDisk) on
//! a temp directory ([`RootedRealDisk`](super::RootedRealDisk)), so the code that
//! ships meets the scenarios; and turmoil's simulated filesystem
//! ([`TurmoilDisk`](super::TurmoilDisk)), so the turmoil world's disk is turmoil's.
//! What both need around the store is written once, here: the fault policy asked
//! before every operation, the observer of landed writes, and modification times
//! from the run's clock.
//!
//! Fault verdicts are those of [`MemDisk`](super::MemDisk): a failure is returned
//! before anything is touched; a torn write lands its kept prefix and then fails
//! with `EIO` (a torn `replace_atomic` changes nothing, as its temp file never
//! replaces the target).
//!
//! Modification times come from the run's clock (a stamp per path this disk wrote),
//! never from the store's: a host's mtime would put the wall clock into lock
//! staleness and the trace, and turmoil's fixes the time of its handle. A stamp
//! outlives its file's removal, so that a crash that brings an unsynced removal back
//! also brings back the time of the file's last write.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use coord_runtime::world::{Clock, Disk, FileMeta, Reread};

use super::disk_policy::{consult, landed, DiskFault, DiskFaultPolicy, DiskOp, Verdict};
use super::mem_disk::DiskWrite;

/// The observer of landed writes, see [`BackedDisk::set_observer`].
type Observer = Arc<dyn Fn(DiskWrite) + Send + Sync>;

/// How many paths keep a modification stamp before the oldest-named are dropped: a
/// bound on the memory of runs that name files without end. A path without a stamp
/// reports no modification time, as a disk without a clock does.
const STAMPED_PATHS_MAX: usize = 1 << 16;

/// Where a [`BackedDisk`] keeps its files, and how its paths map to the run's.
pub trait Backing: Send + Sync + 'static {
    /// The store's own disk, on store paths.
    fn disk(&self) -> &dyn Disk;

    /// The store path of the virtual absolute `path`.
    ///
    /// # Errors
    /// `InvalidInput` for a path the store refuses (relative, or naming `..`).
    fn store_path(&self, path: &Path) -> io::Result<PathBuf>;

    /// Creates the symlink `link` pointing at `target`, both virtual, at once and
    /// durably.
    ///
    /// # Errors
    /// As the store's symlink call, and for paths [`Self::store_path`] refuses.
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()>;

    /// Where a write to `path` (store path `stored`) landed, as a virtual path, and
    /// whether a symlink was followed on the way.
    fn resolve(&self, path: &Path, stored: &Path) -> (PathBuf, bool);
}

/// A disk on a [`Backing`] store, addressed by the run's absolute virtual paths.
///
/// Cheap to clone; clones share the store, the clock, the stamps and the observer.
/// The fault policy belongs to the handle and is copied into clones made
/// afterwards, as [`MemDisk`](super::MemDisk)'s is.
pub struct BackedDisk<B> {
    shared: Arc<Shared<B>>,
    policy: Option<Arc<Mutex<dyn DiskFaultPolicy>>>,
}

impl<B> Clone for BackedDisk<B> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            policy: self.policy.clone(),
        }
    }
}

/// What the clones of one [`BackedDisk`] share.
struct Shared<B> {
    backing: B,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    clock: Option<Arc<dyn Clock>>,
    observer: Option<Observer>,
    /// Virtual modification times by virtual path, in the run clock's Unix ms.
    stamps_ms: BTreeMap<PathBuf, u64>,
}

impl<B: Backing + fmt::Debug> fmt::Debug for BackedDisk<B> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("BackedDisk")
            .field("backing", &self.shared.backing)
            .field("has_policy", &self.policy.is_some())
            .finish()
    }
}

impl<B: Backing> BackedDisk<B> {
    /// A disk on `backing`, without faults, clock or observer.
    pub fn on(backing: B) -> Self {
        Self {
            shared: Arc::new(Shared {
                backing,
                state: Mutex::new(State::default()),
            }),
            policy: None,
        }
    }

    /// The store.
    pub fn backing(&self) -> &B {
        &self.shared.backing
    }

    /// This disk, asking `policy` about every operation from now on.
    pub fn with_policy(mut self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Stamps modifications from now on with `clock`'s [`Clock::unix_ms`].
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.lock().clock = Some(clock);
    }

    /// Calls `observer` after every data write that landed (torn ones included), with
    /// virtual paths. Replaces any earlier observer.
    pub fn set_observer(&self, observer: Observer) {
        self.lock().observer = Some(observer);
    }

    /// Creates the symlink `link` pointing at `target`, both virtual. Asks no fault
    /// policy and calls no observer, as an attacker's action.
    ///
    /// # Errors
    /// As the store's symlink call, and for paths the store refuses.
    pub fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        self.shared.backing.plant_symlink(link, target)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().expect("BackedDisk state poisoned")
    }

    fn store(&self) -> &dyn Disk {
        self.shared.backing.disk()
    }

    /// Maps `path` and asks the policy about `op`: a failure is returned as the
    /// error, a torn write comes back as the verdict for the caller to carry out.
    fn consult(&self, op: DiskOp, path: &Path, len_bytes: u64) -> io::Result<(PathBuf, Verdict)> {
        let stored = self.shared.backing.store_path(path)?;
        let verdict = consult(self.policy.as_deref(), op, path, len_bytes)?;
        Ok((stored, verdict))
    }

    /// Stamps `path` and its directory with the clock's time.
    fn touch(&self, path: &Path) {
        let mut state = self.lock();
        let Some(now_ms) = state.clock.as_ref().map(|clock| clock.unix_ms()) else {
            return;
        };
        if state.stamps_ms.len() >= STAMPED_PATHS_MAX {
            state.stamps_ms.clear();
        }
        for stamped in [Some(path), path.parent()].into_iter().flatten() {
            state.stamps_ms.insert(stamped.to_owned(), now_ms);
        }
    }

    /// Tells the observer about a write of `len_bytes` to `path` (store path
    /// `stored`), then returns `value`, or `EIO` for a torn write.
    fn finish_write<T>(
        &self,
        op: DiskOp,
        path: &Path,
        stored: &Path,
        len_bytes: usize,
        torn: bool,
        value: T,
    ) -> io::Result<T> {
        self.touch(path);
        let observer = self.lock().observer.clone();
        if let Some(observer) = observer {
            let (resolved_path, through_symlink) = self.shared.backing.resolve(path, stored);
            observer(DiskWrite {
                op,
                path: path.to_owned(),
                resolved_path,
                through_symlink,
                len_bytes: len_bytes as u64,
                torn,
            });
        }
        if torn {
            Err(DiskFault::Eio.to_io_error())
        } else {
            Ok(value)
        }
    }
}

impl<B: Backing + fmt::Debug> Disk for BackedDisk<B> {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let (stored, _) = self.consult(DiskOp::CreateDirAll, path, 0)?;
        self.store().create_dir_all(&stored)?;
        self.touch(path);
        Ok(())
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (stored, verdict) = self.consult(DiskOp::CreateNew, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        self.store().create_new(&stored, kept)?;
        self.finish_write(DiskOp::CreateNew, path, &stored, kept.len(), torn, ())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let (stored, verdict) = self.consult(DiskOp::Append, path, bytes.len() as u64)?;
        let (kept, torn) = landed(bytes, verdict);
        let len_bytes = self.store().append(&stored, kept)?;
        self.finish_write(DiskOp::Append, path, &stored, kept.len(), torn, len_bytes)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        let (stored, _) = self.consult(DiskOp::ReadAt, path, 0)?;
        self.store().read_at(&stored, offset_bytes, limit_bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let (stored, _) = self.consult(DiskOp::Read, path, 0)?;
        self.store().read(&stored)
    }

    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        // A read, as the fault policy sees it.
        let (stored, _) = self.consult(DiskOp::Read, path, 0)?;
        self.store().reread(&stored, known)
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (stored, verdict) = self.consult(DiskOp::ReplaceAtomic, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        if torn {
            // The temp file took the torn write and is removed: the target keeps
            // its old contents. Its directory must exist, as for the real steps.
            if let Some(dir) = stored.parent() {
                self.store().metadata(dir)?;
            }
        } else {
            self.store().replace_atomic(&stored, contents)?;
        }
        self.finish_write(DiskOp::ReplaceAtomic, path, &stored, kept.len(), torn, ())
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (stored, verdict) =
            self.consult(DiskOp::OverwriteInPlace, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        self.store().overwrite_in_place(&stored, kept)?;
        self.finish_write(
            DiskOp::OverwriteInPlace,
            path,
            &stored,
            kept.len(),
            torn,
            (),
        )
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (stored_from, _) = self.consult(DiskOp::Rename, from, 0)?;
        let stored_to = self.shared.backing.store_path(to)?;
        self.store().rename(&stored_from, &stored_to)?;
        // The file keeps its own stamp under its new name; both directories change.
        // The old name keeps it too, for a crash that brings the old name back.
        let mut state = self.lock();
        let stamp_ms = state.stamps_ms.get(from).copied();
        if let Some(stamp_ms) = stamp_ms {
            state.stamps_ms.insert(to.to_owned(), stamp_ms);
        }
        drop(state);
        for dir in [from.parent(), to.parent()].into_iter().flatten() {
            self.touch(dir);
        }
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (stored_from, _) = self.consult(DiskOp::HardLink, from, 0)?;
        let stored_to = self.shared.backing.store_path(to)?;
        self.store().hard_link(&stored_from, &stored_to)?;
        let mut state = self.lock();
        let stamp_ms = state.stamps_ms.get(from).copied();
        if let Some(stamp_ms) = stamp_ms {
            state.stamps_ms.insert(to.to_owned(), stamp_ms);
        }
        drop(state);
        if let Some(dir) = to.parent() {
            self.touch(dir);
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let (stored, _) = self.consult(DiskOp::RemoveFile, path, 0)?;
        self.store().remove_file(&stored)?;
        // The stamp stays: a crash may bring back a name whose removal was never
        // synced, with the time of its last write; a new file there is stamped anew.
        if let Some(dir) = path.parent() {
            self.touch(dir);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let (stored, _) = self.consult(DiskOp::ListDir, path, 0)?;
        let entries = self.store().list_dir(&stored)?;
        // Each entry under the virtual name the caller listed, not a resolved one:
        // listing through a symlinked directory names entries as the caller does.
        Ok(entries
            .iter()
            .filter_map(|entry| entry.file_name())
            .map(|name| path.join(name))
            .collect())
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        let (stored, _) = self.consult(DiskOp::Metadata, path, 0)?;
        let mut meta = self.store().metadata(&stored)?;
        meta.modified_unix_ms = self.lock().stamps_ms.get(path).copied();
        Ok(meta)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let (stored, _) = self.consult(DiskOp::SyncFile, path, 0)?;
        self.store().sync_file(&stored)
    }
}
