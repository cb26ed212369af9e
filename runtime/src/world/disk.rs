//! Files, as the runtime sees them.
//!
//! The [`Disk`] trait is the narrow set of file operations the protocol needs. Each
//! operation states its durability: only [`Disk::replace_atomic`] (and an explicit
//! [`Disk::sync_file`]) promise that data survives a crash, which is exactly what the
//! simulator's crash faults test.
//!
//! Every open of a file refuses to follow a symlink in the last path component
//! (`O_NOFOLLOW`): a symlink planted at a task output path or an inbox is an error
//! (`ELOOP`), never a write through it.

use bytes::Bytes;
use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};

use super::host_fs::{HostFs, OpenHow, StdFs};

/// What a path names, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (socket, fifo, device).
    Other,
}

/// The metadata of a path, read without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// What the path names.
    pub kind: FileKind,
    /// Length in bytes.
    pub len_bytes: u64,
    /// Last modification as milliseconds since the Unix epoch, where the disk knows it.
    pub modified_unix_ms: Option<u64>,
}

/// What [`Disk::reread`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// The file holds exactly the bytes the caller knew.
    Unchanged,
    /// The file holds these bytes instead.
    Changed(Vec<u8>),
}

/// The runtime's only access to files.
pub trait Disk: Send + Sync + Debug {
    /// Creates `path` and its missing parents as directories, durably: the entry of
    /// every directory it creates is synced in its parent, so a crash cannot lose a
    /// directory that a later durable write relies on.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Creates `path` with `contents`, failing with `AlreadyExists` if anything is
    /// there, including a symlink (`O_CREAT | O_EXCL | O_NOFOLLOW`). Not synced.
    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()>;

    /// Appends `bytes` to the existing file `path` (`O_APPEND | O_NOFOLLOW`) and returns
    /// the file's length afterwards. Not synced.
    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64>;

    /// Reads at most `limit_bytes` from `path` starting at `offset_bytes`
    /// (`O_NOFOLLOW`). Returns fewer bytes only at end of file.
    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>>;

    /// Reads the whole of `path` (`O_NOFOLLOW`).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;

    /// Reads `path` again for a caller that kept what it read last time, `known`.
    /// Fails as [`read`](Self::read) does. A disk that can compare the file with
    /// `known` where it lies says [`Reread::Unchanged`] without copying the file out:
    /// a mailbox or a lock file polled under contention is mostly unchanged.
    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        let bytes = self.read(path)?;
        Ok(if bytes == known {
            Reread::Unchanged
        } else {
            Reread::Changed(bytes)
        })
    }

    /// Replaces `path` with `contents` atomically and durably: a temp file in the same
    /// directory, fsync, rename over `path`, fsync of the directory. After a crash
    /// `path` holds either the old or the new contents, never a mix.
    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()>;

    /// [`replace_atomic`](Self::replace_atomic) of bytes the caller keeps too. A disk
    /// that holds files in memory may keep `contents` itself instead of a copy, and
    /// then answer a [`reread`](Self::reread) of them without comparing: an inbox is
    /// rewritten whole for every message, and its writer keeps what it wrote.
    fn replace_atomic_shared(&self, path: &Path, contents: Bytes) -> io::Result<()> {
        self.replace_atomic(path, &contents)
    }

    /// Truncates `path` and writes `contents` in place, without any sync. A crash
    /// mid-write can leave the file empty or partial: this exists only to reproduce
    /// the legacy mailbox behaviour in experiments.
    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()>;

    /// Renames `from` to `to`, replacing `to` if it is a file.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes `to` a new name for the file `from`; fails with `AlreadyExists` if `to`
    /// exists. Used where a rename must not replace anything.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes the file (or symlink) `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// The entries of directory `path`, sorted by name so that callers iterate in a
    /// deterministic order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;

    /// The metadata of `path`, without following a symlink.
    fn metadata(&self, path: &Path) -> io::Result<FileMeta>;

    /// Flushes the data of file `path` to stable storage. On a directory it makes the
    /// directory's entries durable (a new file's name survives a crash only once its
    /// directory is synced).
    fn sync_file(&self, path: &Path) -> io::Result<()>;

    /// Syncs file `path`, then its directory, so that both its bytes and its name
    /// survive a crash.
    fn sync_file_and_parent(&self, path: &Path) -> io::Result<()> {
        self.sync_file(path)?;
        match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => self.sync_file(dir),
            _ => Ok(()),
        }
    }
}

/// The production disk: its steps made on a [`HostFs`], by default the host's
/// filesystem through `std::fs` ([`StdFs`]).
#[derive(Debug, Default, Clone)]
pub struct RealDisk<F = StdFs> {
    fs: F,
}

impl RealDisk {
    /// A handle to the host's filesystem.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<F: HostFs> RealDisk<F> {
    /// The production disk's steps made on `fs`.
    pub fn on(fs: F) -> Self {
        Self { fs }
    }

    /// The filesystem the steps are made on.
    pub fn fs(&self) -> &F {
        &self.fs
    }

    /// Opens `path` as `how` says, never through a symlink in its last component.
    fn open(&self, path: &Path, how: OpenHow) -> io::Result<F::File> {
        self.fs.open(
            path,
            &OpenHow {
                nofollow: true,
                ..how
            },
        )
    }

    /// Makes the name `path` durable: syncs the directory it is in.
    fn sync_parent_dir(&self, path: &Path) -> io::Result<()> {
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        self.fs.sync_dir(parent)
    }
}

impl<F: HostFs> Disk for RealDisk<F> {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        // The ancestors that do not exist yet, deepest first.
        let missing: Vec<&Path> = path
            .ancestors()
            .take_while(|dir| {
                !dir.as_os_str().is_empty()
                    && matches!(self.fs.symlink_metadata(dir), Err(e) if e.kind() == io::ErrorKind::NotFound)
            })
            .collect();
        self.fs.create_dir_all(path)?;
        for dir in missing.iter().rev() {
            self.sync_parent_dir(dir)?;
        }
        Ok(())
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let how = OpenHow {
            write: true,
            create_new: true,
            ..OpenHow::default()
        };
        let mut file = self.open(path, how)?;
        self.fs.write_all(&mut file, contents)
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let how = OpenHow {
            append: true,
            ..OpenHow::default()
        };
        let mut file = self.open(path, how)?;
        self.fs.write_all(&mut file, bytes)?;
        self.fs.len_bytes(&file)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        let how = OpenHow {
            read: true,
            ..OpenHow::default()
        };
        let mut file = self.open(path, how)?;
        self.fs.read_at(&mut file, offset_bytes, limit_bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let how = OpenHow {
            read: true,
            ..OpenHow::default()
        };
        let mut file = self.open(path, how)?;
        self.fs.read_to_end(&mut file)
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let temp_path = self.fs.temp_path_beside(path)?;
        // If the create fails, whatever sits at the temp path is not ours: never
        // remove it.
        let how = OpenHow {
            write: true,
            create_new: true,
            ..OpenHow::default()
        };
        let mut file = self.open(&temp_path, how)?;
        let written = (|| {
            self.fs.write_all(&mut file, contents)?;
            self.fs.sync_all(&file)?;
            self.fs.rename(&temp_path, path)
        })();
        if let Err(error) = written {
            // The temp file is ours alone; leaving it would only litter the directory.
            let _ = self.fs.remove_file(&temp_path);
            return Err(error);
        }
        self.sync_parent_dir(path)
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let how = OpenHow {
            write: true,
            create: true,
            truncate: true,
            ..OpenHow::default()
        };
        let mut file = self.open(path, how)?;
        self.fs.write_all(&mut file, contents)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.fs.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.fs.hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.fs.remove_file(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut entries = self.fs.read_dir(path)?;
        entries.sort();
        Ok(entries)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        self.fs.symlink_metadata(path)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let how = OpenHow {
            read: true,
            ..OpenHow::default()
        };
        let file = self.open(path, how)?;
        self.fs.sync_all(&file)
    }
}
