//! The production disk under a run's virtual paths: [`RootedRealDisk`].
//!
//! A scenario with `disk = "real"` runs the runtime on
//! [`RealDisk`](coord_runtime::world::RealDisk), the code that ships, so that its
//! `O_NOFOLLOW` opens and its temp-file-fsync-rename replace meet the same scenarios
//! and checkers as the in-memory disk. The runtime keeps its absolute paths
//! (`/session/…`, `/work/…`); this disk roots them under a fresh temp directory
//! (`tempfile`, removed when the last clone is dropped) and refuses a path that is
//! relative or names `..`, as [`MemDisk`](super::MemDisk) does, so nothing the
//! runtime asks for can land outside the root by its spelling alone.
//!
//! What the rest of the run sees stays in virtual paths, so traces on the two disks
//! can be compared: the observer's [`DiskWrite`] records, [`Disk::list_dir`]'s
//! entries, and modification times, which come from the run's clock (a stamp per
//! path this disk wrote), never from the host's: a real mtime would put the wall
//! clock into lock staleness and the trace.
//!
//! Disk faults come from the same [`DiskFaultPolicy`] the in-memory disk asks, before
//! every operation, with the same verdicts: a failure is returned before anything is
//! touched; a torn write lands its kept prefix and then fails with `EIO` (a torn
//! `replace_atomic` changes nothing, as its temp file never replaces the target).
//!
//! What it cannot do: lose unsynced data. A real filesystem keeps every write, and
//! the host does not lose power under a run, so faults that need a power cut are
//! refused before a run starts (see
//! [`FaultKind::real_disk_refusal`](crate::fault::FaultKind::real_disk_refusal)).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use coord_runtime::world::{Clock, Disk, FileMeta, RealDisk, Reread};

use super::disk_policy::{consult, landed, DiskFault, DiskFaultPolicy, DiskOp, Verdict};
use super::mem_disk::DiskWrite;

/// The observer of landed writes, see [`RootedRealDisk::set_observer`].
type Observer = Arc<dyn Fn(DiskWrite) + Send + Sync>;

/// How many paths keep a modification stamp before the oldest-named are dropped: a
/// bound on the memory of runs that name files without end. A path without a stamp
/// reports no modification time, as a disk without a clock does.
const STAMPED_PATHS_MAX: usize = 1 << 16;

/// [`RealDisk`] on a temp directory, addressed by the run's absolute virtual paths.
///
/// Cheap to clone; clones share the directory, the clock, the stamps and the
/// observer. The fault policy belongs to the handle and is copied into clones made
/// afterwards, as [`MemDisk`](super::MemDisk)'s is.
#[derive(Clone)]
pub struct RootedRealDisk {
    shared: Arc<Shared>,
    policy: Option<Arc<Mutex<dyn DiskFaultPolicy>>>,
}

/// What the clones of one [`RootedRealDisk`] share.
struct Shared {
    /// The temp directory's canonical path: symlinks in the system's temp path (as
    /// on macOS) are resolved once, so a resolved write path under it is recognised.
    root: PathBuf,
    /// Removes the directory when the last clone goes.
    _dir: tempfile::TempDir,
    real: RealDisk,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    clock: Option<Arc<dyn Clock>>,
    observer: Option<Observer>,
    /// Virtual modification times by virtual path, in the run clock's Unix ms.
    stamps_ms: BTreeMap<PathBuf, u64>,
}

impl fmt::Debug for RootedRealDisk {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RootedRealDisk")
            .field("root", &self.shared.root)
            .field("has_policy", &self.policy.is_some())
            .finish()
    }
}

impl RootedRealDisk {
    /// A disk on a new, empty temp directory, without faults, clock or observer.
    ///
    /// # Errors
    /// When the temp directory cannot be created or resolved.
    pub fn new() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("coordsim-disk-")
            .tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        Ok(Self {
            shared: Arc::new(Shared {
                root,
                _dir: dir,
                real: RealDisk::new(),
                state: Mutex::new(State::default()),
            }),
            policy: None,
        })
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

    /// The host path of the temp directory the virtual `/` maps to.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// The host path of the virtual absolute `path`.
    ///
    /// # Errors
    /// `InvalidInput` for a relative path or one that names `..`: either could
    /// reach outside the root.
    pub fn host_path(&self, path: &Path) -> io::Result<PathBuf> {
        if !path.is_absolute() {
            return Err(path_error("the real disk needs absolute paths", path));
        }
        let mut host = self.shared.root.clone();
        for component in path.components() {
            match component {
                Component::Normal(name) => host.push(name),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(path_error("the real disk refuses `..` in paths", path))
                }
            }
        }
        Ok(host)
    }

    /// The virtual path of the host path `host`; a path outside the root is returned
    /// as it is, so that an escape shows as the host path it reached.
    pub fn virtual_path(&self, host: &Path) -> PathBuf {
        match host.strip_prefix(&self.shared.root) {
            Ok(inside) => Path::new("/").join(inside),
            Err(_) => host.to_owned(),
        }
    }

    /// Creates the symlink `link` pointing at `target`, both virtual: an absolute
    /// target is rooted too, so a followed link stays inside the temp directory.
    /// Asks no fault policy and calls no observer, as an attacker's action.
    ///
    /// # Errors
    /// As [`std::os::unix::fs::symlink`], and for paths [`Self::host_path`] refuses.
    pub fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        let host_target = if target.is_absolute() {
            self.host_path(target)?
        } else {
            target.to_owned()
        };
        std::os::unix::fs::symlink(host_target, self.host_path(link)?)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .expect("RootedRealDisk state poisoned")
    }

    /// Maps `path` and asks the policy about `op`: a failure is returned as the
    /// error, a torn write comes back as the verdict for the caller to carry out.
    fn consult(&self, op: DiskOp, path: &Path, len_bytes: u64) -> io::Result<(PathBuf, Verdict)> {
        let host = self.host_path(path)?;
        let verdict = consult(self.policy.as_deref(), op, path, len_bytes)?;
        Ok((host, verdict))
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

    /// Tells the observer about a write of `len_bytes` to `path` (host path `host`),
    /// then returns `value`, or `EIO` for a torn write.
    fn finish_write<T>(
        &self,
        op: DiskOp,
        path: &Path,
        host: &Path,
        len_bytes: usize,
        torn: bool,
        value: T,
    ) -> io::Result<T> {
        self.touch(path);
        let observer = self.lock().observer.clone();
        if let Some(observer) = observer {
            let (resolved_path, through_symlink) = self.resolve(path, host);
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

    /// Where a write to `path` landed, as a virtual path, and whether a symlink was
    /// followed on the way. `O_NOFOLLOW` keeps the last component as named; the
    /// directories above it are resolved on the host.
    fn resolve(&self, path: &Path, host: &Path) -> (PathBuf, bool) {
        let (Some(dir), Some(name)) = (host.parent(), host.file_name()) else {
            return (path.to_owned(), false);
        };
        match std::fs::canonicalize(dir) {
            // The host path is built from the canonical root and plain names, so it
            // differs from its canonical form only where a symlink was followed.
            Ok(resolved_dir) if resolved_dir != dir => {
                (self.virtual_path(&resolved_dir.join(name)), true)
            }
            _ => (path.to_owned(), false),
        }
    }
}

fn path_error(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}: {}", path.display()),
    )
}

impl Disk for RootedRealDisk {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let (host, _) = self.consult(DiskOp::CreateDirAll, path, 0)?;
        self.shared.real.create_dir_all(&host)?;
        self.touch(path);
        Ok(())
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (host, verdict) = self.consult(DiskOp::CreateNew, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        self.shared.real.create_new(&host, kept)?;
        self.finish_write(DiskOp::CreateNew, path, &host, kept.len(), torn, ())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let (host, verdict) = self.consult(DiskOp::Append, path, bytes.len() as u64)?;
        let (kept, torn) = landed(bytes, verdict);
        let len_bytes = self.shared.real.append(&host, kept)?;
        self.finish_write(DiskOp::Append, path, &host, kept.len(), torn, len_bytes)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        let (host, _) = self.consult(DiskOp::ReadAt, path, 0)?;
        self.shared.real.read_at(&host, offset_bytes, limit_bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let (host, _) = self.consult(DiskOp::Read, path, 0)?;
        self.shared.real.read(&host)
    }

    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        // A read, as the fault policy sees it.
        let (host, _) = self.consult(DiskOp::Read, path, 0)?;
        self.shared.real.reread(&host, known)
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (host, verdict) = self.consult(DiskOp::ReplaceAtomic, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        if torn {
            // The temp file took the torn write and is removed: the target keeps
            // its old contents. Its directory must exist, as for the real steps.
            if let Some(dir) = host.parent() {
                std::fs::metadata(dir)?;
            }
        } else {
            self.shared.real.replace_atomic(&host, contents)?;
        }
        self.finish_write(DiskOp::ReplaceAtomic, path, &host, kept.len(), torn, ())
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let (host, verdict) =
            self.consult(DiskOp::OverwriteInPlace, path, contents.len() as u64)?;
        let (kept, torn) = landed(contents, verdict);
        self.shared.real.overwrite_in_place(&host, kept)?;
        self.finish_write(DiskOp::OverwriteInPlace, path, &host, kept.len(), torn, ())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (host_from, _) = self.consult(DiskOp::Rename, from, 0)?;
        let host_to = self.host_path(to)?;
        self.shared.real.rename(&host_from, &host_to)?;
        // The file keeps its own stamp under its new name; both directories change.
        let mut state = self.lock();
        let stamp_ms = state.stamps_ms.remove(from);
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
        let (host_from, _) = self.consult(DiskOp::HardLink, from, 0)?;
        let host_to = self.host_path(to)?;
        self.shared.real.hard_link(&host_from, &host_to)?;
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
        let (host, _) = self.consult(DiskOp::RemoveFile, path, 0)?;
        self.shared.real.remove_file(&host)?;
        self.lock().stamps_ms.remove(path);
        if let Some(dir) = path.parent() {
            self.touch(dir);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let (host, _) = self.consult(DiskOp::ListDir, path, 0)?;
        let entries = self.shared.real.list_dir(&host)?;
        // Each entry under the virtual name the caller listed, not a resolved one:
        // listing through a symlinked directory names entries as the caller does.
        Ok(entries
            .iter()
            .filter_map(|entry| entry.file_name())
            .map(|name| path.join(name))
            .collect())
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        let (host, _) = self.consult(DiskOp::Metadata, path, 0)?;
        let mut meta = self.shared.real.metadata(&host)?;
        meta.modified_unix_ms = self.lock().stamps_ms.get(path).copied();
        Ok(meta)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let (host, _) = self.consult(DiskOp::SyncFile, path, 0)?;
        self.shared.real.sync_file(&host)
    }
}
