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
//! can be compared: the observer's [`DiskWrite`](super::DiskWrite) records, [`Disk::list_dir`]'s
//! entries, and modification times, which come from the run's clock (a stamp per
//! path this disk wrote), never from the host's: a real mtime would put the wall
//! clock into lock staleness and the trace.
//!
//! Disk faults, the observer and the clock's stamps are [`BackedDisk`]'s, shared with
//! the turmoil world's disk.
//!
//! What it cannot do: lose unsynced data. A real filesystem keeps every write, and
//! the host does not lose power under a run, so faults that need a power cut are
//! refused before a run starts (see
//! [`FaultKind::real_disk_refusal`](crate::fault::FaultKind::real_disk_refusal)).

use std::io;
use std::path::{Component, Path, PathBuf};

use coord_runtime::world::{Disk, RealDisk};

use super::backed_disk::{BackedDisk, Backing};

/// [`RealDisk`] on a temp directory, addressed by the run's absolute virtual paths.
pub type RootedRealDisk = BackedDisk<TempDirFiles>;

/// A fresh temp directory the virtual `/` maps to, with the production disk on it.
#[derive(Debug)]
pub struct TempDirFiles {
    /// The temp directory's canonical path: symlinks in the system's temp path (as
    /// on macOS) are resolved once, so a resolved write path under it is recognised.
    root: PathBuf,
    /// Removes the directory when the last clone goes.
    _dir: tempfile::TempDir,
    real: RealDisk,
}

impl BackedDisk<TempDirFiles> {
    /// A disk on a new, empty temp directory, without faults, clock or observer.
    ///
    /// # Errors
    /// When the temp directory cannot be created or resolved.
    pub fn new() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("coordsim-disk-")
            .tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        Ok(Self::on(TempDirFiles {
            root,
            _dir: dir,
            real: RealDisk::new(),
        }))
    }

    /// The host path of the temp directory the virtual `/` maps to.
    pub fn root(&self) -> &Path {
        &self.backing().root
    }

    /// The host path of the virtual absolute `path`.
    ///
    /// # Errors
    /// `InvalidInput` for a relative path or one that names `..`: either could
    /// reach outside the root.
    pub fn host_path(&self, path: &Path) -> io::Result<PathBuf> {
        self.backing().store_path(path)
    }

    /// The virtual path of the host path `host`; a path outside the root is returned
    /// as it is, so that an escape shows as the host path it reached.
    pub fn virtual_path(&self, host: &Path) -> PathBuf {
        self.backing().virtual_path(host)
    }
}

impl TempDirFiles {
    fn virtual_path(&self, host: &Path) -> PathBuf {
        match host.strip_prefix(&self.root) {
            Ok(inside) => Path::new("/").join(inside),
            Err(_) => host.to_owned(),
        }
    }
}

impl Backing for TempDirFiles {
    fn disk(&self) -> &dyn Disk {
        &self.real
    }

    fn store_path(&self, path: &Path) -> io::Result<PathBuf> {
        if !path.is_absolute() {
            return Err(path_error("the real disk needs absolute paths", path));
        }
        let mut host = self.root.clone();
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

    /// An absolute target is rooted too, so a followed link stays inside the temp
    /// directory.
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        let host_target = if target.is_absolute() {
            self.store_path(target)?
        } else {
            target.to_owned()
        };
        std::os::unix::fs::symlink(host_target, self.store_path(link)?)
    }

    /// The directories above the last component are resolved on the host. The last
    /// component is judged by what the disk holds after the write, not by the open
    /// flags the production disk says it passes: a write that landed at a name that
    /// is still a symlink went through it (a replace or a rename swaps the link for
    /// a file, and an exclusive create fails on one), so a disk that lost its
    /// `O_NOFOLLOW` is seen writing into the link's target.
    fn resolve(&self, path: &Path, host: &Path) -> (PathBuf, bool) {
        let (Some(dir), Some(name)) = (host.parent(), host.file_name()) else {
            return (path.to_owned(), false);
        };
        if let Ok(target) = std::fs::read_link(host) {
            return (self.virtual_path(&dir.join(target)), true);
        }
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

pub(super) fn path_error(what: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}: {}", path.display()),
    )
}
