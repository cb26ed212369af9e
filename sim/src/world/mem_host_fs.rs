//! The in-memory disk as the host filesystem under the production disk's code:
//! [`MemHostFs`], and [`RealOnMemory`], `RealDisk` made of its calls.
//!
//! A scenario with `disk = "real-on-memory"` gives the runtime the production
//! [`RealDisk`], whose every open, write, fsync, rename and directory sync is a call
//! to [`MemHostFs`], which makes it on a [`MemDisk`]. The crash model is
//! [`MemDisk`]'s, so a power cut keeps only what the production code itself made
//! durable: a replace that renames a temp file it never synced comes back empty,
//! and one whose directory it never synced comes back as the old file. On the
//! `memory` disk those steps are the simulator's own, so a regression in them could
//! not show.
//!
//! Each call is one or two of [`MemDisk`]'s operations on paths:
//!
//! - an open that creates (`O_EXCL`, or `O_CREAT | O_TRUNC`) is
//!   [`Disk::create_new`] or [`Disk::overwrite_in_place`] with no bytes; any other
//!   open looks at the path without following it, and fails with `ELOOP` on a
//!   symlink when `O_NOFOLLOW` is asked for;
//! - a write appends (at the end, where every write of the production disk goes,
//!   unless it lost `O_APPEND`: then the file's bytes are spliced and written back in
//!   place);
//! - the calls on a file opened without `O_NOFOLLOW` go through a handle of the
//!   same disk that follows a final symlink, as the host's filesystem would.
//!
//! The disk's observer sees the production disk's own writes: the temp file of a
//! replace is created and written, then renamed over its target (renames are not
//! data writes, and are not observed).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use coord_runtime::world::{Clock, Disk, FileKind, FileMeta, HostFs, OpenHow, RealDisk};

use super::disk_policy::errno;
use super::{DiskFaultPolicy, DiskWrite, MemDisk};

/// The production disk's calls, made on a [`MemDisk`]. Cheap to clone; clones share
/// the disk and the temp-file counter.
#[derive(Debug, Clone)]
pub struct MemHostFs {
    /// The disk, refusing a symlink in the last component, unless the filesystem
    /// ignores `O_NOFOLLOW`.
    nofollow: MemDisk,
    /// Whether an open asking for `O_NOFOLLOW` gets it.
    honours_nofollow: bool,
    /// The same disk, following one: for opens without `O_NOFOLLOW`.
    following: MemDisk,
    /// Numbers temp files: per disk, not per process, so that a run's temp names
    /// are functions of its seed.
    temps: Arc<AtomicU64>,
}

/// An open file: its path, how it was opened, and where the next write goes.
#[derive(Debug)]
pub struct MemFile {
    path: PathBuf,
    follows: bool,
    append: bool,
    /// Opened for reading (`O_RDONLY` or `O_RDWR`): a read of a handle without it
    /// fails with `EBADF`, as the operating system's does.
    readable: bool,
    /// Opened for writing or appending: a write of a handle without it fails with
    /// `EBADF`.
    writable: bool,
    position_bytes: u64,
    /// Its length as this handle made it: known from an open that created or
    /// truncated it, so that writing it from the start needs no read.
    known_len_bytes: Option<u64>,
}

/// The production disk on a [`MemDisk`].
pub type RealOnMemory = RealDisk<MemHostFs>;

impl MemHostFs {
    /// Calls on `disk`, a filesystem that honours `O_NOFOLLOW` or, with
    /// `honours_nofollow` false, one that ignores it (as turmoil's does).
    pub fn new(disk: MemDisk, honours_nofollow: bool) -> Self {
        Self {
            following: disk.clone().follow_final_symlinks(true),
            nofollow: disk.follow_final_symlinks(!honours_nofollow),
            honours_nofollow,
            temps: Arc::default(),
        }
    }

    /// The disk the calls are made on.
    pub fn disk(&self) -> &MemDisk {
        &self.nofollow
    }

    /// These calls, each asking `policy` first.
    pub fn with_policy(&self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        Self {
            nofollow: self.nofollow.clone().with_policy(policy.clone()),
            following: self.following.clone().with_policy(policy),
            honours_nofollow: self.honours_nofollow,
            temps: self.temps.clone(),
        }
    }

    /// Stamps the disk's modifications with `clock`.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.nofollow.set_clock(clock);
    }

    /// Tells `observer` of every data write that lands on the disk.
    pub fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>) {
        self.nofollow.set_observer(observer);
    }

    fn handle(&self, follows: bool) -> &MemDisk {
        if follows {
            &self.following
        } else {
            &self.nofollow
        }
    }
}

/// `EBADF` unless the handle was opened for what is asked of it, as the operating
/// system answers a read of a write-only handle or the reverse.
fn opened_for(allowed: bool) -> io::Result<()> {
    if allowed {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(errno::EBADF))
    }
}

impl HostFs for MemHostFs {
    type File = MemFile;

    fn open(&self, path: &Path, how: &OpenHow) -> io::Result<MemFile> {
        // std's OpenOptions refuses an open that asks for no access mode.
        if !how.read && !how.write && !how.append {
            return Err(io::Error::from_raw_os_error(errno::EINVAL));
        }
        let follows = !how.nofollow;
        let disk = self.handle(follows);
        let mut known_len_bytes = None;
        if how.create_new {
            disk.create_new(path, b"")?;
            known_len_bytes = Some(0);
        } else if how.create && how.truncate {
            disk.overwrite_in_place(path, b"")?;
            known_len_bytes = Some(0);
        } else {
            let meta = match self.nofollow.metadata(path) {
                Err(missing) if missing.kind() == io::ErrorKind::NotFound && how.create => {
                    disk.create_new(path, b"")?;
                    self.nofollow.metadata(path)?
                }
                meta => meta?,
            };
            match meta.kind {
                FileKind::Symlink if how.nofollow && self.honours_nofollow => {
                    return Err(io::Error::from_raw_os_error(errno::ELOOP))
                }
                FileKind::Dir if how.write || how.append => {
                    return Err(io::Error::from_raw_os_error(errno::EISDIR))
                }
                _ => {}
            }
            if how.truncate {
                disk.overwrite_in_place(path, b"")?;
                known_len_bytes = Some(0);
            }
        }
        Ok(MemFile {
            path: path.to_owned(),
            follows,
            append: how.append,
            readable: how.read,
            writable: how.write || how.append,
            position_bytes: 0,
            known_len_bytes,
        })
    }

    fn write_all(&self, file: &mut MemFile, bytes: &[u8]) -> io::Result<()> {
        opened_for(file.writable)?;
        let disk = self.handle(file.follows);
        if file.append || file.known_len_bytes == Some(file.position_bytes) {
            disk.append(&file.path, bytes)?;
        } else {
            // A write into the file's bytes, which only a disk that lost `O_APPEND`
            // makes: spliced in and written back.
            let mut held = disk.read(&file.path)?;
            let start = usize::try_from(file.position_bytes).unwrap_or(usize::MAX);
            if start > held.len() {
                held.resize(start, 0);
            }
            let end = (start + bytes.len()).min(held.len());
            held.splice(start..end, bytes.iter().copied());
            disk.overwrite_in_place(&file.path, &held)?;
        }
        file.position_bytes += bytes.len() as u64;
        if let Some(len_bytes) = &mut file.known_len_bytes {
            *len_bytes = (*len_bytes).max(file.position_bytes);
        }
        Ok(())
    }

    fn read_at(
        &self,
        file: &mut MemFile,
        offset_bytes: u64,
        limit_bytes: u64,
    ) -> io::Result<Vec<u8>> {
        opened_for(file.readable)?;
        self.handle(file.follows)
            .read_at(&file.path, offset_bytes, limit_bytes)
    }

    fn read_to_end(&self, file: &mut MemFile) -> io::Result<Vec<u8>> {
        opened_for(file.readable)?;
        self.handle(file.follows).read(&file.path)
    }

    fn len_bytes(&self, file: &MemFile) -> io::Result<u64> {
        let meta = self.nofollow.metadata(&file.path)?;
        if meta.kind == FileKind::Symlink {
            // A file opened through a link: its length is the target's.
            return Ok(self.following.read(&file.path)?.len() as u64);
        }
        Ok(meta.len_bytes)
    }

    fn sync_all(&self, file: &MemFile) -> io::Result<()> {
        self.handle(file.follows).sync_file(&file.path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.nofollow.sync_file(dir)
    }

    // mkdir(2) is not durable until its parent is synced: RealDisk's syncs of the
    // parents, not this call, must keep new directories through a power cut.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.nofollow.create_dir_all_unsynced(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.nofollow.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.nofollow.hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.nofollow.remove_file(path)
    }

    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.nofollow.list_dir(dir)
    }

    fn symlink_metadata(&self, path: &Path) -> io::Result<FileMeta> {
        self.nofollow.metadata(path)
    }

    fn temp_path_beside(&self, path: &Path) -> io::Result<PathBuf> {
        let file_name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
        let counter = self.temps.fetch_add(1, Ordering::Relaxed);
        Ok(path.with_file_name(format!(".{}.{counter}.tmp", file_name.to_string_lossy())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn real_on(mem: &MemDisk) -> RealOnMemory {
        RealDisk::on(MemHostFs::new(mem.clone(), true))
    }

    #[test]
    fn a_replace_survives_a_power_cut_only_with_its_own_syncs() {
        // Goal: what a crash keeps of the production disk's replace is decided by
        // the calls that code made, not by the simulator's idea of a replace.
        let mem = MemDisk::new();
        let disk = real_on(&mem);
        disk.create_dir_all(Path::new("/session")).unwrap();
        let inbox = Path::new("/session/inbox.json");
        disk.replace_atomic(inbox, b"[1]").unwrap();
        disk.replace_atomic(inbox, b"[1,2]").unwrap();
        mem.crash(&mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(disk.read(inbox).unwrap(), b"[1,2]");

        // The same calls without the fsync before the rename: the name survives,
        // and the data keeps only what the crash happened to write back.
        let cut_short = (0..20).filter(|&seed| {
            let mem = MemDisk::new();
            let fs = MemHostFs::new(mem.clone(), true);
            // A directory is durable once its parent is synced, as RealDisk does.
            fs.create_dir_all(Path::new("/session")).unwrap();
            fs.sync_dir(Path::new("/")).unwrap();
            let temp = fs.temp_path_beside(inbox).unwrap();
            let how = OpenHow {
                write: true,
                create_new: true,
                nofollow: true,
                ..OpenHow::default()
            };
            let mut file = fs.open(&temp, &how).unwrap();
            fs.write_all(&mut file, b"[1,2]").unwrap();
            fs.rename(&temp, inbox).unwrap();
            fs.sync_dir(Path::new("/session")).unwrap();
            mem.crash(&mut ChaCha8Rng::seed_from_u64(seed));
            fs.disk().read(inbox).unwrap() != b"[1,2]"
        });
        assert!(cut_short.count() > 10);
    }

    #[test]
    fn a_handle_does_only_what_it_was_opened_for() {
        // Goal: the access modes of an open hold as the operating system holds them,
        // so the production disk cannot read through a handle it opened to write,
        // write through one it opened to read, or open asking for neither.
        let mem = MemDisk::new();
        mem.create_dir_all(Path::new("/session")).unwrap();
        mem.create_new(Path::new("/session/f"), b"held").unwrap();
        let fs = MemHostFs::new(mem.clone(), true);
        let open = |how: OpenHow| fs.open(Path::new("/session/f"), &how);
        let mut reader = open(OpenHow {
            read: true,
            ..OpenHow::default()
        })
        .unwrap();
        assert_eq!(fs.read_to_end(&mut reader).unwrap(), b"held");
        let refused = fs.write_all(&mut reader, b"x").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(errno::EBADF));
        let mut writer = open(OpenHow {
            append: true,
            ..OpenHow::default()
        })
        .unwrap();
        let refused = fs.read_to_end(&mut writer).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(errno::EBADF));
        let refused = fs.read_at(&mut writer, 0, 4).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(errno::EBADF));
        let refused = open(OpenHow::default()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(errno::EINVAL));
        assert_eq!(mem.read(Path::new("/session/f")).unwrap(), b"held");
    }

    #[test]
    fn an_open_without_nofollow_goes_through_a_final_symlink() {
        // Goal: the production disk's O_NOFOLLOW is what keeps a write out of a
        // link's target; without it the write lands there.
        let mem = MemDisk::new();
        mem.create_dir_all(Path::new("/session")).unwrap();
        mem.create_new(Path::new("/victim"), b"").unwrap();
        mem.plant_symlink(Path::new("/session/out"), Path::new("/victim"))
            .unwrap();
        let disk = real_on(&mem);
        let refused = disk.append(Path::new("/session/out"), b"x").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(errno::ELOOP));
        let fs = MemHostFs::new(mem.clone(), true);
        let how = OpenHow {
            append: true,
            ..OpenHow::default()
        };
        let mut file = fs.open(Path::new("/session/out"), &how).unwrap();
        fs.write_all(&mut file, b"x").unwrap();
        assert_eq!(mem.read(Path::new("/victim")).unwrap(), b"x");
    }
}
