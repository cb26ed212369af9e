//! The host filesystem calls the production disk is made of.
//!
//! [`RealDisk`](super::RealDisk) does its work (exclusive creates, appends, the
//! temp-file-fsync-rename replace, directory syncs) in calls to a [`HostFs`]. In
//! production that is [`StdFs`], `std::fs` on the host with `O_NOFOLLOW` and
//! `O_CLOEXEC` on every open that asks for them. A simulator gives the same disk
//! code a filesystem of its own, one that can lose power, so that the order of the
//! disk's writes, syncs and renames is judged by what survives a crash rather than
//! by what the disk says it did.

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};

use super::disk::{FileKind, FileMeta};

/// How a file is opened: `open(2)`'s flags, as far as the disk uses them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenHow {
    /// `O_RDONLY` (or `O_RDWR` with `write`).
    pub read: bool,
    /// `O_WRONLY`.
    pub write: bool,
    /// `O_APPEND`: every write goes to the end.
    pub append: bool,
    /// `O_CREAT`.
    pub create: bool,
    /// `O_CREAT | O_EXCL`: fails if anything, a symlink included, is at the path.
    pub create_new: bool,
    /// `O_TRUNC`.
    pub truncate: bool,
    /// `O_NOFOLLOW`: a symlink in the last component fails the open (`ELOOP`).
    pub nofollow: bool,
}

/// The filesystem calls [`RealDisk`](super::RealDisk) makes. Each is one system
/// call (or, for [`HostFs::create_dir_all`] and [`HostFs::read_dir`], the few a
/// `std::fs` function makes), so a filesystem standing in for the host's sees the
/// disk's own sequence of them.
pub trait HostFs: Send + Sync + Debug {
    /// An open file.
    type File: Send;

    /// Opens `path` as `how` says.
    fn open(&self, path: &Path, how: &OpenHow) -> io::Result<Self::File>;

    /// Writes all of `bytes` at the file's position (its end, when opened to append).
    fn write_all(&self, file: &mut Self::File, bytes: &[u8]) -> io::Result<()>;

    /// Up to `limit_bytes` from `offset_bytes` on.
    fn read_at(
        &self,
        file: &mut Self::File,
        offset_bytes: u64,
        limit_bytes: u64,
    ) -> io::Result<Vec<u8>>;

    /// Everything from the file's position to its end.
    fn read_to_end(&self, file: &mut Self::File) -> io::Result<Vec<u8>>;

    /// The file's length (`fstat`).
    fn len_bytes(&self, file: &Self::File) -> io::Result<u64>;

    /// `fsync`: the file's data and metadata reach stable storage.
    fn sync_all(&self, file: &Self::File) -> io::Result<()>;

    /// `fsync` of the directory `dir`: the names in it reach stable storage.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Creates `dir` and every missing ancestor.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// `rename(2)`: replaces `to` (a symlink there is replaced, not followed).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// `link(2)`.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// `unlink(2)`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// The entries of `dir`, in no particular order.
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;

    /// `lstat(2)`: the path itself, a symlink not followed.
    fn symlink_metadata(&self, path: &Path) -> io::Result<FileMeta>;

    /// A path beside `path` for a temp file that no other writer picks.
    fn temp_path_beside(&self, path: &Path) -> io::Result<PathBuf>;
}

/// The host's filesystem, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

/// Numbers temp files. Process-wide, not per [`StdFs`]: two disks in one process
/// (two worlds) replacing the same file must not pick the same temp name.
static TEMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl HostFs for StdFs {
    type File = std::fs::File;

    fn open(&self, path: &Path, how: &OpenHow) -> io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut flags = libc::O_CLOEXEC;
        if how.nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        std::fs::OpenOptions::new()
            .read(how.read)
            .write(how.write)
            .append(how.append)
            .create(how.create)
            .create_new(how.create_new)
            .truncate(how.truncate)
            .custom_flags(flags)
            .open(path)
    }

    fn write_all(&self, file: &mut std::fs::File, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(file, bytes)
    }

    fn read_at(
        &self,
        file: &mut std::fs::File,
        offset_bytes: u64,
        limit_bytes: u64,
    ) -> io::Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        file.seek(SeekFrom::Start(offset_bytes))?;
        let mut bytes = Vec::new();
        file.take(limit_bytes).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn read_to_end(&self, file: &mut std::fs::File) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        io::Read::read_to_end(file, &mut bytes)?;
        Ok(bytes)
    }

    fn len_bytes(&self, file: &std::fs::File) -> io::Result<u64> {
        Ok(file.metadata()?.len())
    }

    fn sync_all(&self, file: &std::fs::File) -> io::Result<()> {
        file.sync_all()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect()
    }

    fn symlink_metadata(&self, path: &Path) -> io::Result<FileMeta> {
        let meta = std::fs::symlink_metadata(path)?;
        let file_type = meta.file_type();
        let kind = if file_type.is_symlink() {
            FileKind::Symlink
        } else if file_type.is_dir() {
            FileKind::Dir
        } else if file_type.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        };
        let modified_unix_ms = meta
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|since_epoch| u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX));
        Ok(FileMeta {
            kind,
            len_bytes: meta.len(),
            modified_unix_ms,
        })
    }

    fn temp_path_beside(&self, path: &Path) -> io::Result<PathBuf> {
        let file_name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
        let counter = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // pid + a process-wide counter keeps temp names unique across threads and
        // processes that replace the same file at once.
        let temp_name = format!(
            ".{}.{}.{}.tmp",
            file_name.to_string_lossy(),
            std::process::id(),
            counter
        );
        Ok(path.with_file_name(temp_name))
    }
}
