//! turmoil's simulated filesystem (its `unstable-fs` feature) as the run's disk:
//! [`TurmoilDisk`], the default disk of the turmoil world.
//!
//! turmoil keeps a filesystem per host, with POSIX durability: a write or a new name
//! is pending until `sync_all` of the file or a sync of its directory, and
//! [`turmoil::Sim::crash`] of the host drops everything pending. A run's disk must
//! outlive each boot's simulation (the next boot restarts from it) and be read by the
//! checkers once the run is over, so the filesystem belongs to a host of its own,
//! [`TurmoilFsHost`]: a simulation that holds the host and does nothing else. Every
//! operation reaches it through a [`FsHandle`], from inside a boot's simulation or
//! after it; a coordinator crash is turmoil's crash of that host.
//!
//! turmoil's filesystem is a model with gaps, which this adapter fills, so that the
//! runtime meets the same POSIX behaviour as on the other disks:
//!
//! - **Symlinks.** turmoil resolves no symlink in a directory component, and follows
//!   one in the last component whatever the open flags say. The adapter resolves
//!   directory components itself (at most [`SYMLINK_HOPS_MAX`] links), and refuses a
//!   final symlink with `ELOOP` as `O_NOFOLLOW` does, unless the scenario models a
//!   filesystem that follows it (`disk_honours_nofollow = false`).
//! - **Error kinds.** turmoil reports most failures as `Other`; the adapter checks
//!   first and answers `NotFound`, `AlreadyExists`, `EISDIR` or `ENOTDIR` as a
//!   kernel would.
//! - **Directory sync.** `Disk::sync_file` of a directory is turmoil's `sync_dir`.
//! - **Names taken again.** turmoil keeps unsynced writes by path, so a file
//!   created where one was removed would show the old one's bytes: the adapter
//!   truncates every file it creates.
//! - **The log of unsynced writes.** Every read scans it, and a lock file taken and
//!   released a thousand times would leave two thousand entries in it: the adapter
//!   writes a file's data back before removing its name, as a kernel may at any
//!   time. Only a crash that brings the name back can tell.
//!
//! What it still models differently from [`MemDisk`](super::MemDisk): file data
//! belongs to a path, not an inode (a hard link copies the data at the time of the
//! link, which is all the runtime's lock recovery needs: it links a file no one
//! writes); a renamed directory leaves its entries behind (the runtime renames only
//! files); and a crash drops every unsynced write whole, where `MemDisk` may keep a
//! prefix of an unsynced append.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use coord_runtime::world::{Disk, FileKind, FileMeta};
use turmoil::fs::shim::std::fs as tfs;
use turmoil::fs::FsHandle;

use super::backed_disk::{BackedDisk, Backing};
use super::disk_policy::errno;
use super::mem_disk::CrashReport;
use super::real_disk::path_error;

/// The name of the host that owns the filesystem.
const FS_HOST: &str = "disk";

/// How many symlinks one path resolution follows before failing with `ELOOP`, as
/// Linux's limit.
pub const SYMLINK_HOPS_MAX: usize = 40;

/// turmoil's filesystem, addressed by the run's absolute virtual paths.
pub type TurmoilDisk = BackedDisk<TurmoilFiles>;

/// The filesystem of [`TurmoilFsHost`]'s host, reached through a [`FsHandle`].
pub struct TurmoilFiles {
    handle: FsHandle,
    follow_final_symlinks: bool,
    /// Numbers the temp files of atomic replaces.
    temp_counter: AtomicU64,
}

impl fmt::Debug for TurmoilFiles {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TurmoilFiles")
            .field("follow_final_symlinks", &self.follow_final_symlinks)
            .finish_non_exhaustive()
    }
}

/// The simulation that owns the run's filesystem, and cuts its power.
pub struct TurmoilFsHost {
    sim: turmoil::Sim<'static>,
    disk: TurmoilDisk,
}

impl fmt::Debug for TurmoilFsHost {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TurmoilFsHost")
            .field("disk", &self.disk)
            .finish_non_exhaustive()
    }
}

impl TurmoilFsHost {
    /// A host with an empty filesystem (only `/`). With `follow_final_symlinks`, opens
    /// follow a symlink in the last component, as a filesystem ignoring `O_NOFOLLOW`
    /// would.
    ///
    /// # Errors
    /// When turmoil cannot start the host's simulation.
    pub fn new(follow_final_symlinks: bool) -> io::Result<Self> {
        let mut sim = turmoil::Builder::new().build();
        let captured: Rc<RefCell<Option<FsHandle>>> = Rc::default();
        let slot = captured.clone();
        sim.host(FS_HOST, move || {
            let slot = slot.clone();
            async move {
                *slot.borrow_mut() = Some(FsHandle::current());
                Ok(())
            }
        });
        sim.step()
            .map_err(|error| io::Error::other(error.to_string()))?;
        let handle = captured
            .take()
            .ok_or_else(|| io::Error::other("turmoil's disk host did not start"))?;
        let disk = BackedDisk::on(TurmoilFiles {
            handle,
            follow_final_symlinks,
            temp_counter: AtomicU64::new(0),
        });
        Ok(Self { sim, disk })
    }

    /// The disk on this host's filesystem; clones share it.
    pub fn disk(&self) -> &TurmoilDisk {
        &self.disk
    }

    /// Cuts the host's power: turmoil's crash drops every pending (unsynced) write
    /// and name. Returns what changed, as [`MemDisk::crash`](super::MemDisk::crash)
    /// does.
    pub fn crash(&mut self) -> CrashReport {
        let files = self.disk.backing();
        let before = files.namespace();
        self.sim.crash(FS_HOST);
        let after = files.namespace();
        CrashReport::between(&before, &after)
    }
}

/// What a path holds, for comparing a namespace before and after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Held {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
}

impl CrashReport {
    /// What changed from `before` to `after`, two namespaces of the same disk.
    pub(super) fn between(
        before: &BTreeMap<PathBuf, Held>,
        after: &BTreeMap<PathBuf, Held>,
    ) -> Self {
        let mut report = CrashReport::default();
        for (path, held) in before {
            match after.get(path) {
                None => report.lost.push(path.clone()),
                Some(now) if now != held => report.changed.push(path.clone()),
                Some(_) => {}
            }
        }
        report.reappeared = after
            .keys()
            .filter(|path| !before.contains_key(*path))
            .cloned()
            .collect();
        report
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no such file or directory: {}", path.display()),
    )
}

fn already_exists(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("file exists: {}", path.display()),
    )
}

fn eloop() -> io::Error {
    io::Error::from_raw_os_error(errno::ELOOP)
}

impl TurmoilFiles {
    /// What `path` names, not following a final symlink; `None` if nothing.
    fn kind(path: &Path) -> Option<FileKind> {
        let meta = tfs::symlink_metadata(path).ok()?;
        Some(if meta.is_symlink() {
            FileKind::Symlink
        } else if meta.is_dir() {
            FileKind::Dir
        } else {
            FileKind::File
        })
    }

    /// `path` with every symlink in a directory component resolved, and whether one
    /// was; with `follow_final`, a symlink in the last component too.
    fn resolve_path(path: &Path, follow_final: bool) -> io::Result<(PathBuf, bool)> {
        let mut pending: Vec<PathBuf> = path
            .components()
            .rev()
            .map(|component| PathBuf::from(component.as_os_str()))
            .collect();
        let mut resolved = PathBuf::from("/");
        let mut hops = 0;
        while let Some(component) = pending.pop() {
            match component.components().next() {
                Some(Component::RootDir) | Some(Component::CurDir) | None => continue,
                Some(Component::ParentDir) => {
                    resolved.pop();
                    continue;
                }
                Some(Component::Normal(_)) | Some(Component::Prefix(_)) => {}
            }
            let next = resolved.join(&component);
            let is_last = pending.is_empty();
            // turmoil answers `read_link` from its symlinks alone: the cheapest test.
            let link = if is_last && !follow_final {
                None
            } else {
                tfs::read_link(&next).ok()
            };
            let Some(target) = link else {
                resolved = next;
                continue;
            };
            hops += 1;
            if hops > SYMLINK_HOPS_MAX {
                return Err(eloop());
            }
            if target.is_absolute() {
                resolved = PathBuf::from("/");
            }
            pending.extend(
                target
                    .components()
                    .rev()
                    .map(|component| PathBuf::from(component.as_os_str())),
            );
        }
        Ok((resolved, hops > 0))
    }

    /// `path` ready for an open: directories resolved; a final symlink followed if
    /// this filesystem follows them, else refused with `ELOOP`.
    fn open_path(&self, path: &Path) -> io::Result<PathBuf> {
        let (resolved, _) = Self::resolve_path(path, self.follow_final_symlinks)?;
        if Self::kind(&resolved) == Some(FileKind::Symlink) {
            return Err(eloop());
        }
        Ok(resolved)
    }

    /// Every path of the namespace and what it holds.
    fn namespace(&self) -> BTreeMap<PathBuf, Held> {
        let _entered = self.handle.enter();
        let mut namespace = BTreeMap::new();
        let mut dirs = vec![PathBuf::from("/")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = tfs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let held = match Self::kind(&path) {
                    Some(FileKind::Dir) => {
                        dirs.push(path.clone());
                        Held::Dir
                    }
                    Some(FileKind::Symlink) => {
                        Held::Symlink(tfs::read_link(&path).unwrap_or_default())
                    }
                    _ => Held::File(tfs::read(&path).unwrap_or_default()),
                };
                namespace.insert(path, held);
            }
        }
        namespace
    }
}

impl Backing for TurmoilFiles {
    fn disk(&self) -> &dyn Disk {
        self
    }

    fn store_path(&self, path: &Path) -> io::Result<PathBuf> {
        if !path.is_absolute() {
            return Err(path_error("the turmoil disk needs absolute paths", path));
        }
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(path_error("the turmoil disk refuses `..` in paths", path));
        }
        Ok(path.to_owned())
    }

    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (link, _) = Self::resolve_path(&self.store_path(link)?, false)?;
        tfs::symlink(target, &link)?;
        // At once and durably, as an attacker's link on a disk that then loses power.
        match link.parent() {
            Some(dir) => tfs::sync_dir(dir),
            None => Ok(()),
        }
    }

    fn resolve(&self, path: &Path, _stored: &Path) -> (PathBuf, bool) {
        let _entered = self.handle.enter();
        Self::resolve_path(path, self.follow_final_symlinks).unwrap_or((path.to_owned(), false))
    }
}

/// Each operation enters the host's filesystem for its own duration: the same
/// handle serves a boot's simulation, the witnesses after it, and the next boot.
impl Disk for TurmoilFiles {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (path, _) = Self::resolve_path(path, true)?;
        let mut dir = PathBuf::from("/");
        for component in path.components().skip(1) {
            dir.push(component);
            match Self::kind(&dir) {
                Some(FileKind::Dir) => continue,
                Some(_) => return Err(already_exists(&dir)),
                None => {
                    tfs::create_dir(&dir)?;
                    // Durably, as the trait promises: the new entry in its parent.
                    tfs::sync_dir(dir.parent().unwrap_or(Path::new("/")))?;
                }
            }
        }
        Ok(())
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (path, _) = Self::resolve_path(path, false)?;
        if Self::kind(&path).is_some() {
            return Err(already_exists(&path));
        }
        // Truncated as well: turmoil keeps a file's unsynced writes by path, and a
        // name used before (a lock file taken again) would otherwise show them.
        let mut file = tfs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(contents)
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let _entered = self.handle.enter();
        let path = self.open_path(path)?;
        let mut file = tfs::OpenOptions::new().append(true).open(&path)?;
        file.write_all(bytes)?;
        Ok(file.metadata()?.len())
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        let bytes = self.read(path)?;
        let start = usize::try_from(offset_bytes)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = usize::try_from(offset_bytes.saturating_add(limit_bytes))
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let _entered = self.handle.enter();
        let path = self.open_path(path)?;
        match Self::kind(&path) {
            Some(FileKind::Dir) => Err(io::Error::from_raw_os_error(errno::EISDIR)),
            Some(_) => tfs::read(&path),
            None => Err(not_found(&path)),
        }
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let file_name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
        let counter = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp_path =
            path.with_file_name(format!(".{}.{counter}.tmp", file_name.to_string_lossy()));
        self.create_new(&temp_path, contents)?;
        let _entered = self.handle.enter();
        let (temp_path, _) = Self::resolve_path(&temp_path, false)?;
        let (target, _) = Self::resolve_path(path, false)?;
        let replaced = (|| {
            tfs::File::open(&temp_path)?.sync_all()?;
            if Self::kind(&target) == Some(FileKind::Dir) {
                return Err(io::Error::from_raw_os_error(errno::EISDIR));
            }
            tfs::rename(&temp_path, &target)
        })();
        if let Err(error) = replaced {
            let _ = tfs::remove_file(&temp_path);
            return Err(error);
        }
        tfs::sync_dir(target.parent().unwrap_or(Path::new("/")))
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let _entered = self.handle.enter();
        let path = self.open_path(path)?;
        let mut file = tfs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(contents)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (from, _) = Self::resolve_path(from, false)?;
        let (to, _) = Self::resolve_path(to, false)?;
        if Self::kind(&from).is_none() {
            return Err(not_found(&from));
        }
        tfs::rename(&from, &to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (from, _) = Self::resolve_path(from, false)?;
        let (to, _) = Self::resolve_path(to, false)?;
        match Self::kind(&from) {
            None => return Err(not_found(&from)),
            Some(FileKind::Dir) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "hard links to directories are not allowed",
                ))
            }
            Some(_) => {}
        }
        if Self::kind(&to).is_some() {
            return Err(already_exists(&to));
        }
        tfs::hard_link(&from, &to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let (path, _) = Self::resolve_path(path, false)?;
        match Self::kind(&path) {
            None => Err(not_found(&path)),
            Some(FileKind::Dir) => Err(io::Error::from_raw_os_error(errno::EISDIR)),
            Some(FileKind::File) => {
                // The kernel may write a file's data back at any time, and does here
                // before its name goes: turmoil keeps unsynced writes in one log that
                // every read scans, and a lock file taken and released a thousand
                // times would otherwise leave two thousand entries in it. Only a
                // crash that brings the name back can tell, and then with bytes the
                // file did hold.
                tfs::File::open(&path)?.sync_all()?;
                tfs::remove_file(&path)
            }
            Some(_) => tfs::remove_file(&path),
        }
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let _entered = self.handle.enter();
        let (path, _) = Self::resolve_path(path, true)?;
        match Self::kind(&path) {
            None => return Err(not_found(&path)),
            Some(FileKind::Dir) => {}
            Some(_) => return Err(io::Error::from_raw_os_error(errno::ENOTDIR)),
        }
        let mut entries = tfs::read_dir(&path)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<io::Result<Vec<_>>>()?;
        entries.sort();
        Ok(entries)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        let _entered = self.handle.enter();
        let (path, _) = Self::resolve_path(path, false)?;
        let kind = Self::kind(&path).ok_or_else(|| not_found(&path))?;
        let len_bytes = match kind {
            FileKind::File => tfs::symlink_metadata(&path)?.len(),
            _ => 0,
        };
        Ok(FileMeta {
            kind,
            len_bytes,
            modified_unix_ms: None,
        })
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let _entered = self.handle.enter();
        let path = self.open_path(path)?;
        match Self::kind(&path) {
            None => Err(not_found(&path)),
            Some(FileKind::Dir) => tfs::sync_dir(&path),
            Some(_) => tfs::File::open(&path)?.sync_all(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(follow_final_symlinks: bool) -> TurmoilFsHost {
        let host = TurmoilFsHost::new(follow_final_symlinks).unwrap();
        host.disk().create_dir_all(Path::new("/s/t")).unwrap();
        host
    }

    #[test]
    fn a_name_taken_again_holds_only_its_new_bytes() {
        let host = host(false);
        let disk = host.disk();
        let lock = Path::new("/s/t/m.json.lock");
        // Longer, then shorter: turmoil keeps unsynced writes by path.
        for owner in ["a long owner record", "short", "mid-sized"] {
            disk.create_new(lock, owner.as_bytes()).unwrap();
            let error = disk.create_new(lock, b"other").unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
            disk.replace_atomic(Path::new("/s/t/m.json"), owner.as_bytes())
                .unwrap();
            assert_eq!(disk.read(lock).unwrap(), owner.as_bytes());
            disk.remove_file(lock).unwrap();
            assert_eq!(disk.read(lock).unwrap_err().kind(), io::ErrorKind::NotFound);
        }
    }

    #[test]
    fn a_crash_keeps_what_was_synced_and_drops_the_rest() {
        let mut host = host(false);
        let disk = host.disk().clone();
        let (kept, appended, fresh, replaced) = (
            Path::new("/s/t/kept"),
            Path::new("/s/t/appended"),
            Path::new("/s/t/fresh"),
            Path::new("/s/t/replaced"),
        );
        disk.create_new(kept, b"kept").unwrap();
        disk.sync_file(kept).unwrap();
        disk.create_new(appended, b"head").unwrap();
        disk.sync_file(appended).unwrap();
        disk.sync_file(Path::new("/s/t")).unwrap();
        disk.append(appended, b" tail").unwrap();
        disk.replace_atomic(replaced, b"one").unwrap();
        disk.replace_atomic(replaced, b"two").unwrap();
        disk.create_new(fresh, b"never synced").unwrap();

        let report = host.crash();

        assert_eq!(disk.read(kept).unwrap(), b"kept");
        assert_eq!(disk.read(appended).unwrap(), b"head");
        assert_eq!(disk.read(replaced).unwrap(), b"two");
        assert_eq!(
            disk.read(fresh).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(report.lost, vec![fresh.to_owned()]);
        assert_eq!(report.changed, vec![appended.to_owned()]);
        assert!(report.reappeared.is_empty());
    }

    #[test]
    fn an_unsynced_removal_comes_back_after_a_crash() {
        let mut host = host(false);
        let disk = host.disk().clone();
        let lock = Path::new("/s/t/a.lock");
        disk.create_new(lock, b"holder").unwrap();
        disk.sync_file(lock).unwrap();
        disk.sync_file(Path::new("/s/t")).unwrap();
        disk.remove_file(lock).unwrap();

        let report = host.crash();

        assert_eq!(report.reappeared, vec![lock.to_owned()]);
        assert_eq!(disk.read(lock).unwrap(), b"holder");
    }

    #[test]
    fn a_final_symlink_is_refused_unless_the_disk_follows_them() {
        for follow in [false, true] {
            let host = host(follow);
            let disk = host.disk();
            disk.create_new(Path::new("/s/victim"), b"secret").unwrap();
            disk.plant_symlink(Path::new("/s/t/out"), Path::new("/s/victim"))
                .unwrap();
            let read = disk.read(Path::new("/s/t/out"));
            let appended = disk.append(Path::new("/s/t/out"), b"!");
            if follow {
                assert_eq!(read.unwrap(), b"secret");
                assert_eq!(appended.unwrap(), 7);
            } else {
                assert_eq!(read.unwrap_err().raw_os_error(), Some(errno::ELOOP));
                assert_eq!(appended.unwrap_err().raw_os_error(), Some(errno::ELOOP));
            }
            let error = disk.create_new(Path::new("/s/t/out"), b"x").unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
            let meta = disk.metadata(Path::new("/s/t/out")).unwrap();
            assert_eq!(meta.kind, FileKind::Symlink);
        }
    }

    #[test]
    fn a_symlinked_directory_is_followed_and_the_write_says_so() {
        let host = host(false);
        let disk = host.disk();
        disk.create_dir_all(Path::new("/outside")).unwrap();
        disk.plant_symlink(Path::new("/s/t/dir"), Path::new("/outside"))
            .unwrap();
        disk.create_new(Path::new("/s/t/dir/file"), b"escaped")
            .unwrap();
        assert_eq!(disk.read(Path::new("/outside/file")).unwrap(), b"escaped");
        let files = disk.backing();
        assert_eq!(
            files.resolve(Path::new("/s/t/dir/file"), Path::new("/s/t/dir/file")),
            (PathBuf::from("/outside/file"), true)
        );
        assert_eq!(
            disk.list_dir(Path::new("/s/t/dir")).unwrap(),
            vec![PathBuf::from("/s/t/dir/file")]
        );
    }

    #[test]
    fn paths_that_could_leave_the_root_are_refused() {
        let host = host(false);
        for path in ["relative", "/s/../etc/passwd"] {
            let error = host.disk().read(Path::new(path)).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{path}");
        }
    }
}
