//! The simulated disk: [`Disk`] over turmoil's per-host filesystem (`unstable-fs`).
//!
//! Every operation runs against `turmoil::fs::shim::std::fs` of the turmoil host whose
//! software is running, after asking the installed [`DiskFaultPolicy`] for a verdict
//! (see [`faults`](super::DiskFaults)). It must be called from inside a turmoil host;
//! elsewhere turmoil panics, as there is no host filesystem to act on.
//!
//! # What turmoil models
//!
//! - Durability the POSIX way. Creates, writes, truncates, renames and removals are
//!   pending until synced: `File::sync_all` makes a file's data durable,
//!   `fs::sync_dir` makes a directory's entries durable. `sim.crash(host)` drops
//!   everything pending: a file whose entry was never synced disappears, unsynced
//!   writes to a durable file are lost. With `Builder::fs().block_size(n)` a pending
//!   write may instead survive the crash torn at a block boundary; with
//!   `sync_probability(p)` pending data is sometimes flushed early.
//! - `ENOSPC` from `Builder::fs().capacity(bytes)`, `EIO` from
//!   `io_error_probability`, silent read corruption from `corruption_probability`, all
//!   drawn from turmoil's generator (seed it with [`sim_builder`](super::sim_builder)).
//!   turmoil reports most errors as `ErrorKind::Other` with a message; this disk maps
//!   them to what `std::fs` reports (`ENOSPC` and `EIO` as raw OS errors, the others
//!   to their `ErrorKind`).
//! - Symlinks as objects: `fs::symlink`, `read_link`, `symlink_metadata`. A scenario
//!   can plant one at a runtime path with `turmoil::fs::shim::std::fs::symlink`.
//!
//! # What it does not, and what this disk does about it
//!
//! - `O_NOFOLLOW`: turmoil ignores `custom_flags` and its `open` follows a symlink in
//!   the last component. This disk checks `symlink_metadata` first and refuses a
//!   symlink with `ELOOP` (or `EEXIST` for `create_new`), as `RealDisk` does.
//! - Symlinks in directory components: turmoil keys every entry by its full path and
//!   never resolves an intermediate component, so a symlinked *directory* is not a way
//!   into another directory here. Scenarios about symlinked directories use
//!   [`RealDisk`](coord_runtime::world::RealDisk) on a `tempfile` directory instead;
//!   listing a directory through a symlink returns `Unsupported`.
//! - Hard links: turmoil keeps a file's data per path and, when a directory sync
//!   makes a link durable, copies only the original's *synced* data (a link to a
//!   file whose data was never synced reads empty, or vanishes with its directory entry).
//!   [`SimDisk::hard_link`] therefore emulates a link
//!   as an exclusive-create copy of the original's current bytes: the new name
//!   exists exactly when a link would and reads the same bytes, but the two names do
//!   not share later writes, and the copy is unsynced like any new file. The runtime
//!   links only to put a lock file back and removes the other name at once.
//! - Renames of directories: turmoil moves the directory entry but not the entries
//!   beneath it, so renaming a directory returns `Unsupported`.
//! - Files are keyed by path, not by inode: pending writes, and the data a file sync
//!   makes durable, belong to a name. turmoil would strand a renamed file's unsynced
//!   writes on the old name, replay a removed file's pending writes through the next
//!   file created at that name, and let a later directory sync move or delete data
//!   a file sync had just made durable for the *new* file under that name. This disk
//!   keeps the two apart: before a file leaves a name (rename, replace, remove) its
//!   pending data is flushed, as ext4's `auto_da_alloc` does on replace-by-rename;
//!   and before a file is created at, or has its data flushed under, a name whose
//!   entry changed since its directory was last synced, that directory is synced.
//!   Both only make something durable earlier than strictly required: a legal crash
//!   outcome, if not the worst case. The bookkeeping is per `SimDisk` (shared by
//!   clones): use one per host boot. (turmoil's `sync_probability` flushes data on
//!   its own, outside this bookkeeping.)
//! - Directory creation is durable only once the parent is synced, and turmoil does
//!   not hide a durable file whose ancestors vanished. [`SimDisk::replace_atomic`]
//!   therefore syncs every ancestor directory, not only the parent, so that its
//!   promise (old or new contents after a crash) holds for a file in a directory the
//!   run just created. `RealDisk` syncs only the parent: on a strictly POSIX
//!   filesystem a crash could lose a freshly created directory chain.
//! - Relative paths: the simulated host has no working directory; they are refused
//!   with `InvalidInput`. Permissions are stored, never enforced; there is no `flock`.
//! - Latency: the `std` shim completes at once; virtual time passes only in sleeps.

use std::collections::BTreeSet;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use coord_runtime::world::{Disk, FileKind, FileMeta};
use turmoil::fs::shim::std::fs as sim_fs;

use super::clock::SIM_EPOCH_UNIX_MS;
use super::faults::{errno, DiskFault, DiskFaultPolicy, DiskOp, Verdict};

/// How many temp names [`SimDisk::replace_atomic`] tries before giving up: names only
/// collide with leftovers of an earlier boot or another `SimDisk` on the same host.
const TEMP_NAME_ATTEMPTS_MAX: u32 = 64;

/// [`Disk`] over the running turmoil host's simulated filesystem, with fault hooks.
///
/// Cheap to clone; clones share the fault policy and the temp-file counter.
///
/// # Panics
/// Every method panics when called outside a turmoil host's software, and when the
/// fault policy breaks its contract (a torn verdict for an operation that writes no
/// data, or one longer than the write).
#[derive(Debug, Clone, Default)]
pub struct SimDisk {
    policy: Option<Arc<Mutex<dyn DiskFaultPolicy>>>,
    temp_counter: Arc<AtomicU64>,
    /// Paths whose directory entry changed (a file removed, renamed away or renamed
    /// in) since their directory was last synced through this disk: see the module
    /// docs on files keyed by path.
    entries_changed_unsynced: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl SimDisk {
    /// A disk without faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// A disk that asks `policy` about every operation. Keep a clone of the `Arc` to
    /// read the policy's log or change its rules during the run.
    pub fn with_policy(policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        Self {
            policy: Some(policy),
            ..Self::default()
        }
    }

    /// Asks the policy about `op`: a failure is returned as the error, a torn write
    /// comes back as the verdict for the caller to carry out.
    fn consult(&self, op: DiskOp, path: &Path, len_bytes: u64) -> io::Result<Verdict> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SimDisk needs absolute paths: {}", path.display()),
            ));
        }
        super::faults::consult(self.policy.as_deref(), op, path, len_bytes)
    }

    /// Remembers that the entry at `path` changed without a directory sync.
    fn note_entry_changed(&self, path: &Path) {
        self.changed_entries().insert(path.to_owned());
    }

    fn changed_entries(&self) -> std::sync::MutexGuard<'_, BTreeSet<PathBuf>> {
        self.entries_changed_unsynced
            .lock()
            .expect("changed entries poisoned")
    }

    /// Readies `path` for a new file or a data flush: if its entry changed since its
    /// directory was last synced, sync the directory first, so that turmoil, which
    /// keys file data by path, never mixes the data of two files under one name.
    fn settle_entry(&self, path: &Path) -> io::Result<()> {
        if !self.changed_entries().remove(path) {
            return Ok(());
        }
        let parent = path
            .parent()
            .expect("a changed entry had a file name, so it has a parent");
        self.sync_dir(parent)
    }

    /// Syncs the entries of `directory` and records it.
    fn sync_dir(&self, directory: &Path) -> io::Result<()> {
        sim_fs::sync_dir(directory).map_err(translate)?;
        self.changed_entries()
            .retain(|path| path.parent() != Some(directory));
        Ok(())
    }

    /// Creates the file at `path` (`O_CREAT | O_EXCL`), empty.
    ///
    /// The create is followed by a pending truncation to zero: should a removed
    /// file's pending writes still be keyed to this path (a name changed through
    /// another `SimDisk`), they are ordered out, as reads, syncs and crashes apply
    /// pending operations in order.
    fn create_exclusive(&self, path: &Path) -> io::Result<sim_fs::File> {
        self.settle_entry(path)?;
        let file = sim_fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(translate)?;
        file.set_len(0).map_err(translate)?;
        Ok(file)
    }

    /// Makes the pending data of the file at `path` durable, if a file is there: see
    /// the module docs on files keyed by path.
    fn flush_if_file(&self, path: &Path) -> io::Result<()> {
        if entry_kind(path)? == Some(FileKind::File) {
            self.settle_entry(path)?;
            sim_fs::File::open(path)
                .and_then(|file| file.sync_all())
                .map_err(translate)?;
        }
        Ok(())
    }

    /// A name beside `path` for a temp file, created exclusively; returns it open.
    fn create_temp_beside(&self, path: &Path) -> io::Result<(PathBuf, sim_fs::File)> {
        let file_name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
        for _ in 0..TEMP_NAME_ATTEMPTS_MAX {
            let counter = self.temp_counter.fetch_add(1, Ordering::Relaxed);
            let temp_name = format!(".{}.sim.{counter}.tmp", file_name.to_string_lossy());
            let temp_path = path.with_file_name(temp_name);
            if entry_kind(&temp_path)?.is_some() {
                continue;
            }
            let file = self.create_exclusive(&temp_path)?;
            return Ok((temp_path, file));
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{TEMP_NAME_ATTEMPTS_MAX} temp names beside {} taken",
                path.display()
            ),
        ))
    }
}

/// What sits at `path`, without following a symlink; `None` if nothing.
fn entry_kind(path: &Path) -> io::Result<Option<FileKind>> {
    match sim_fs::symlink_metadata(path) {
        Ok(meta) if meta.is_symlink() => Ok(Some(FileKind::Symlink)),
        Ok(meta) if meta.is_dir() => Ok(Some(FileKind::Dir)),
        Ok(_) => Ok(Some(FileKind::File)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(translate(error)),
    }
}

/// turmoil reports most failures as `ErrorKind::Other` carrying the `strerror` text;
/// give them the kind (or, for the disk faults, the raw OS error) `std::fs` would.
fn translate(error: io::Error) -> io::Error {
    if error.kind() != io::ErrorKind::Other || error.raw_os_error().is_some() {
        return error;
    }
    let message = error.to_string();
    let kind = match message.as_str() {
        "I/O error" => return DiskFault::Eio.to_io_error(),
        "No space left on device" => return DiskFault::Enospc.to_io_error(),
        "No such file or directory" => io::ErrorKind::NotFound,
        "File exists" => io::ErrorKind::AlreadyExists,
        "Directory not empty" => io::ErrorKind::DirectoryNotEmpty,
        "Is a directory" => io::ErrorKind::IsADirectory,
        "Not a directory" => io::ErrorKind::NotADirectory,
        _ => return error,
    };
    io::Error::new(kind, message)
}

fn eloop() -> io::Error {
    io::Error::from_raw_os_error(errno::ELOOP)
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no such file: {}", path.display()),
    )
}

/// Opens the regular file at `path` with `options`, refusing a symlink (`ELOOP`, as
/// `O_NOFOLLOW`) and a directory.
fn open_nofollow(path: &Path, options: &sim_fs::OpenOptions) -> io::Result<sim_fs::File> {
    match entry_kind(path)? {
        Some(FileKind::Symlink) => Err(eloop()),
        Some(FileKind::Dir) => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("is a directory: {}", path.display()),
        )),
        _ => options.open(path).map_err(translate),
    }
}

/// Writes `bytes` at the file's cursor as `verdict` says: all of them, or for a torn
/// write only the kept prefix followed by `EIO`.
fn write_as(file: &mut sim_fs::File, bytes: &[u8], verdict: Verdict) -> io::Result<()> {
    match verdict {
        Verdict::Pass => file.write_all(bytes).map_err(translate),
        Verdict::Torn { kept_bytes } => {
            let kept = usize::try_from(kept_bytes).expect("kept_bytes <= a slice length");
            file.write_all(&bytes[..kept]).map_err(translate)?;
            Err(DiskFault::Eio.to_io_error())
        }
        Verdict::Fail(fault) => unreachable!("consult() returns {fault} as an error"),
    }
}

/// turmoil stamps files with its own time line (`Builder::epoch`, the wall clock by
/// default, plus virtual time); put the stamp on [`SimClock`](super::SimClock)'s.
fn rebased_unix_ms(time: SystemTime) -> Option<u64> {
    let stamp = time.duration_since(UNIX_EPOCH).ok()?;
    let origin = turmoil::since_epoch()?.checked_sub(turmoil::sim_elapsed()?)?;
    let since_start_ms = u64::try_from(stamp.saturating_sub(origin).as_millis()).ok()?;
    Some(SIM_EPOCH_UNIX_MS.saturating_add(since_start_ms))
}

impl Disk for SimDisk {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.consult(DiskOp::CreateDirAll, path, 0)?;
        // The ancestors that do not exist yet, deepest first: their entries are synced
        // in their parents, as the trait promises.
        let mut missing = Vec::new();
        for dir in path.ancestors() {
            if dir.as_os_str().is_empty() || entry_kind(dir)?.is_some() {
                break;
            }
            missing.push(dir.to_owned());
        }
        sim_fs::create_dir_all(path).map_err(translate)?;
        match entry_kind(path)? {
            Some(FileKind::Dir) => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("not a directory: {}", path.display()),
                ))
            }
        }
        for dir in missing.iter().rev() {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                self.sync_dir(parent)?;
            }
        }
        Ok(())
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let verdict = self.consult(DiskOp::CreateNew, path, contents.len() as u64)?;
        // O_CREAT | O_EXCL: anything at the path, a symlink included, is EEXIST.
        if entry_kind(path)?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("file exists: {}", path.display()),
            ));
        }
        let mut file = self.create_exclusive(path)?;
        write_as(&mut file, contents, verdict)
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let verdict = self.consult(DiskOp::Append, path, bytes.len() as u64)?;
        let mut file = open_nofollow(path, sim_fs::OpenOptions::new().append(true))?;
        write_as(&mut file, bytes, verdict)?;
        Ok(file.metadata().map_err(translate)?.len())
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        self.consult(DiskOp::ReadAt, path, 0)?;
        let mut file = open_nofollow(path, sim_fs::OpenOptions::new().read(true))?;
        file.seek(SeekFrom::Start(offset_bytes))
            .map_err(translate)?;
        let mut bytes = Vec::new();
        file.take(limit_bytes)
            .read_to_end(&mut bytes)
            .map_err(translate)?;
        Ok(bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.consult(DiskOp::Read, path, 0)?;
        let mut file = open_nofollow(path, sim_fs::OpenOptions::new().read(true))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(translate)?;
        Ok(bytes)
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let verdict = self.consult(DiskOp::ReplaceAtomic, path, contents.len() as u64)?;
        if entry_kind(path)? == Some(FileKind::Dir) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("is a directory: {}", path.display()),
            ));
        }
        let parent = path
            .parent()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
        let (temp_path, mut file) = self.create_temp_beside(path)?;
        let written = (|| {
            write_as(&mut file, contents, verdict)?;
            file.sync_all().map_err(translate)?;
            drop(file);
            self.flush_if_file(path)?;
            // rename(2) replaces a symlink rather than writing through it; turmoil's
            // rename would leave the symlink shadowing the new file, so remove it.
            if entry_kind(path)? == Some(FileKind::Symlink) {
                sim_fs::remove_file(path).map_err(translate)?;
            }
            sim_fs::rename(&temp_path, path).map_err(translate)
        })();
        if let Err(error) = written {
            // The temp file is ours alone; leaving it would only litter the directory.
            let _ = sim_fs::remove_file(&temp_path);
            return Err(error);
        }
        for directory in parent.ancestors() {
            self.sync_dir(directory)?;
        }
        Ok(())
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let verdict = self.consult(DiskOp::OverwriteInPlace, path, contents.len() as u64)?;
        self.settle_entry(path)?;
        let mut file = open_nofollow(
            path,
            sim_fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )?;
        write_as(&mut file, contents, verdict)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.consult(DiskOp::Rename, from, 0)?;
        if !to.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SimDisk needs absolute paths: {}", to.display()),
            ));
        }
        match entry_kind(from)? {
            None => return Err(not_found(from)),
            Some(FileKind::Dir) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "SimDisk does not model renaming a directory",
                ))
            }
            Some(_) => {}
        }
        self.flush_if_file(from)?;
        match entry_kind(to)? {
            Some(FileKind::Symlink) => sim_fs::remove_file(to).map_err(translate)?,
            Some(FileKind::File) => self.flush_if_file(to)?,
            _ => {}
        }
        sim_fs::rename(from, to).map_err(translate)?;
        self.note_entry_changed(from);
        self.note_entry_changed(to);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.consult(DiskOp::HardLink, from, 0)?;
        if !to.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SimDisk needs absolute paths: {}", to.display()),
            ));
        }
        if entry_kind(to)?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("file exists: {}", to.display()),
            ));
        }
        match entry_kind(from)? {
            None => Err(not_found(from)),
            Some(FileKind::Dir) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "hard links to directories are not allowed",
            )),
            // link(2) does not follow a symlink: the new name is the same symlink.
            Some(FileKind::Symlink) => {
                let target = sim_fs::read_link(from).map_err(translate)?;
                sim_fs::symlink(target, to).map_err(translate)
            }
            Some(_) => {
                let mut bytes = Vec::new();
                sim_fs::File::open(from)
                    .and_then(|mut file| file.read_to_end(&mut bytes))
                    .map_err(translate)?;
                let mut file = self.create_exclusive(to)?;
                file.write_all(&bytes).map_err(translate)
            }
        }
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.consult(DiskOp::RemoveFile, path, 0)?;
        match entry_kind(path)? {
            None => Err(not_found(path)),
            Some(FileKind::Dir) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("is a directory: {}", path.display()),
            )),
            Some(kind) => {
                if kind == FileKind::File {
                    self.flush_if_file(path)?;
                }
                sim_fs::remove_file(path).map_err(translate)?;
                self.note_entry_changed(path);
                Ok(())
            }
        }
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.consult(DiskOp::ListDir, path, 0)?;
        match entry_kind(path)? {
            None => return Err(not_found(path)),
            Some(FileKind::Symlink) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "SimDisk does not model listing a directory through a symlink",
                ))
            }
            Some(FileKind::File | FileKind::Other) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("not a directory: {}", path.display()),
                ))
            }
            Some(FileKind::Dir) => {}
        }
        let mut entries = sim_fs::read_dir(path)
            .map_err(translate)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(translate)?;
        // turmoil collects entries through a HashSet: sorting is what makes them
        // deterministic, not just what the contract asks.
        entries.sort();
        Ok(entries)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        self.consult(DiskOp::Metadata, path, 0)?;
        let meta = sim_fs::symlink_metadata(path).map_err(translate)?;
        let kind = if meta.is_symlink() {
            FileKind::Symlink
        } else if meta.is_dir() {
            FileKind::Dir
        } else {
            FileKind::File
        };
        Ok(FileMeta {
            kind,
            len_bytes: meta.len(),
            modified_unix_ms: meta.modified().ok().and_then(rebased_unix_ms),
        })
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.consult(DiskOp::SyncFile, path, 0)?;
        match entry_kind(path)? {
            None => Err(not_found(path)),
            Some(FileKind::Symlink) => Err(eloop()),
            // RealDisk opens the path and fsyncs it, which for a directory syncs its
            // entries.
            Some(FileKind::Dir) => self.sync_dir(path),
            Some(_) => {
                self.settle_entry(path)?;
                sim_fs::File::open(path)
                    .and_then(|file| file.sync_all())
                    .map_err(translate)
            }
        }
    }
}
