//! The disk side of a run: disk faults from the schedule, and the crash points and
//! planted symlinks that need to see the runtime's operations as they happen.

use std::borrow::Cow;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use coord_runtime::ipc::LockOwner;
use coord_runtime::world::{Clock, Disk, FileKind, FileMeta, Reread};

use super::book::FaultBook;
use super::catalogue::{CoordinatorCrashPoint, DiskEffect, DiskOpClass, Fault};
use crate::model::wildcard_match;
use crate::world::{
    BackedDisk, Backing, DiskFault, DiskFaultPolicy, DiskOp, DiskRequest, MemDisk, RealOnMemory,
    Verdict,
};

/// Where a planted symlink points: outside the session and the workspace. A virtual
/// path: on the real disk it lies inside the run's temp directory, so a write that
/// followed the link would still never touch the host's `/etc`.
pub const SYMLINK_TARGET: &str = "/etc/coordsim-victim";

/// Where a symlinked directory planted in a worktree points when it points outside
/// the session and the workspace: a directory, virtual as [`SYMLINK_TARGET`] is.
pub const SYMLINK_DIR_TARGET: &str = "/etc/coordsim-victim.d";

/// The panic payload of a simulated process death. The run's panic hook keeps it
/// off stderr; tokio catches it at the task boundary, as an OS would end a process.
#[derive(Debug)]
pub struct SimulatedCrash;

fn op_matches(class: DiskOpClass, op: DiskOp) -> bool {
    match class {
        DiskOpClass::Write => op.writes_data(),
        DiskOpClass::Append => op == DiskOp::Append,
        DiskOpClass::Replace => op == DiskOp::ReplaceAtomic,
        DiskOpClass::Create => op == DiskOp::CreateNew,
        DiskOpClass::Read => op.reads_data(),
        DiskOpClass::Sync => op == DiskOp::SyncFile,
    }
}

/// Disk faults of the schedule, as a [`DiskFaultPolicy`].
#[derive(Debug)]
pub struct ScheduledDiskFaults {
    book: FaultBook,
    /// The book's schedule, which is fixed for a run.
    schedule: Arc<Vec<Fault>>,
    /// The disk faults that can still fire, in schedule order. This policy is asked
    /// about every disk operation of every seed: most schedules hold no disk fault,
    /// and a fault leaves once it has met its nth operation, fired or not.
    pending: Vec<PendingDiskFault>,
}

/// A disk fault of the schedule and how many operations it has matched.
#[derive(Debug)]
struct PendingDiskFault {
    index: usize,
    matched: u64,
}

impl ScheduledDiskFaults {
    /// Faults from `book`.
    pub fn new(book: FaultBook) -> Self {
        let schedule = book.schedule();
        let pending = schedule
            .iter()
            .enumerate()
            .filter(|(_, fault)| {
                matches!(
                    fault,
                    Fault::Disk { .. }
                        | Fault::CoordinatorCrash {
                            at: Some(CoordinatorCrashPoint::DiskWrite { .. }),
                            ..
                        }
                )
            })
            .map(|(index, _)| PendingDiskFault { index, matched: 0 })
            .collect();
        Self {
            book,
            schedule,
            pending,
        }
    }
}

impl DiskFaultPolicy for ScheduledDiskFaults {
    fn decide(&mut self, request: &DiskRequest<'_>) -> Verdict {
        if self.book.power_is_out() {
            return Verdict::Fail(DiskFault::Eio);
        }
        // Decoded once, and only if some disk fault is still pending.
        let mut path = None;
        let mut position = 0;
        while let Some(pending) = self.pending.get_mut(position) {
            let fault = &self.schedule[pending.index];
            let (op_matches, pattern, nth, effect) = match fault {
                Fault::Disk {
                    op,
                    path: pattern,
                    nth,
                    effect,
                } => (op_matches(*op, request.op), pattern, nth, Some(effect)),
                Fault::CoordinatorCrash {
                    at:
                        Some(CoordinatorCrashPoint::DiskWrite {
                            op,
                            path: pattern,
                            nth,
                        }),
                    ..
                } => (
                    op_matches(*op, request.op) && request.op.writes_data(),
                    pattern,
                    nth,
                    None,
                ),
                _ => unreachable!("pending holds the indices of disk faults and crash points only"),
            };
            // `to_str` first: `to_string_lossy` walks the path in UTF-8 chunks even
            // when it has nothing to replace.
            let matches = op_matches
                && wildcard_match(
                    pattern,
                    path.get_or_insert_with(|| match request.path.to_str() {
                        Some(text) => Cow::Borrowed(text),
                        None => request.path.to_string_lossy(),
                    }),
                );
            if !matches {
                position += 1;
                continue;
            }
            pending.matched += 1;
            if pending.matched < *nth {
                position += 1;
                continue;
            }
            // Its count only grows from here: it fires now or never.
            let PendingDiskFault { index, matched } = self.pending.remove(position);
            let path = path.as_deref().expect("a matched path was decoded");
            let detail = match effect {
                Some(effect) => format!("{} {path}: {effect:?}", request.op),
                None => format!("coordinator host loses power in {} {path}", request.op),
            };
            if matched != *nth || !self.book.fire_index(index, detail) {
                continue;
            }
            return match effect {
                Some(DiskEffect::Eio) => Verdict::Fail(DiskFault::Eio),
                Some(DiskEffect::Enospc) => Verdict::Fail(DiskFault::Enospc),
                Some(DiskEffect::Torn) if request.op.writes_data() => Verdict::Torn {
                    kept_bytes: request.len_bytes / 2,
                },
                Some(DiskEffect::Torn) => Verdict::Fail(DiskFault::Eio),
                None => {
                    // Half the bytes reach the disk, unsynced, and the call fails:
                    // the host is down before it could return.
                    self.book.cut_power_mid_write();
                    Verdict::Torn {
                        kept_bytes: request.len_bytes / 2,
                    }
                }
            };
        }
        Verdict::Pass
    }
}

/// A disk the fault engine can plant a symlink on, as an attacker who can write the
/// session's directories would.
pub trait PlantableDisk: Disk + Clone {
    /// Creates the symlink `link` pointing at `target`, at once and durably, asking
    /// no fault policy.
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()>;
}

impl PlantableDisk for MemDisk {
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        MemDisk::plant_symlink(self, link, target)
    }
}

impl PlantableDisk for RealOnMemory {
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        self.fs().disk().plant_symlink(link, target)
    }
}

impl<B: Backing + std::fmt::Debug> PlantableDisk for BackedDisk<B> {
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        BackedDisk::plant_symlink(self, link, target)
    }
}

/// Plants a symlink as an attacker would: a [`PlantableDisk`] behind a trait object,
/// for the adapters that plant at points other than the disk's own operations (a
/// worktree just made).
pub trait SymlinkPlanter: Send + Sync + std::fmt::Debug {
    /// Creates the symlink `link` pointing at `target`, at once and durably, asking
    /// no fault policy.
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()>;
}

impl<D: PlantableDisk> SymlinkPlanter for RuntimeDisk<D> {
    fn plant_symlink(&self, link: &Path, target: &Path) -> io::Result<()> {
        self.inner.plant_symlink(link, target)
    }
}

/// The runtime's disk: a [`MemDisk`] (or the production disk on a temp directory)
/// plus the faults that act at a point in the runtime's own sequence of operations
/// (a worker dying right after its output write; a symlink swapped in right after
/// an output file is created; a stale lock taken by a racing writer right after a
/// contender read it).
#[derive(Debug, Clone)]
pub struct RuntimeDisk<D = MemDisk> {
    inner: D,
    book: FaultBook,
    /// The run's clock, for the time in a racing writer's lock record.
    clock: Arc<dyn Clock>,
    /// Whether the schedule races the runtime's look at an output file: without
    /// such a fault, a look costs nothing more.
    output_races: bool,
    /// Whether the schedule races a contender's break of a stale lock: without such
    /// a fault, a read of a lock file costs nothing more.
    lock_races: bool,
    /// The locks racing writers hold, and how often a contender found each held.
    racers: Arc<Mutex<Vec<Racer>>>,
}

/// A racing writer holding a lock it took from under a contender's break.
#[derive(Debug)]
struct Racer {
    lock: PathBuf,
    record: Vec<u8>,
    /// The contender's reads of the lock that found this writer's record.
    seen_held: u32,
}

/// Who a racing writer's lock record names.
pub(crate) const RACING_WRITER_OWNER: &str = "racing-writer";

/// How many reads by a contender find a racing writer's lock held before the
/// writer gives it back: the contender must wait it out, then take it.
const RACER_HELD_READS: u32 = 2;

impl<D: PlantableDisk> RuntimeDisk<D> {
    /// Wraps `inner`; `clock` is the run's.
    pub fn new(inner: D, book: FaultBook, clock: Arc<dyn Clock>) -> Self {
        let schedule = book.schedule();
        let output_races = schedule.iter().any(|fault| {
            matches!(
                fault,
                Fault::SymlinkAtOutput {
                    after_check: true,
                    ..
                }
            )
        });
        let lock_races = schedule
            .iter()
            .any(|fault| matches!(fault, Fault::StaleLock { raced: true, .. }));
        Self {
            inner,
            book,
            clock,
            output_races,
            lock_races,
            racers: Arc::default(),
        }
    }

    /// Before a contender's read of lock file `path`: a racing writer that has been
    /// found holding the lock often enough gives it back now.
    fn before_lock_read(&self, path: &Path) {
        let mut racers = self.racers.lock().expect("racers poisoned");
        let Some(at) = racers.iter().position(|racer| racer.lock == path) else {
            return;
        };
        let racer = &mut racers[at];
        // Its record is still there: it holds the lock.
        let holds = self
            .inner
            .read(path)
            .is_ok_and(|bytes| bytes == racer.record);
        if !holds {
            racers.remove(at);
            return;
        }
        racer.seen_held += 1;
        if racer.seen_held > RACER_HELD_READS {
            racers.remove(at);
            // Best effort, as a writer's release is.
            let _ = self.inner.remove_file(path);
        }
    }

    /// After a contender read the stale lock file `path`: if the schedule races its
    /// break, another writer breaks the stale lock and takes it now, before the
    /// contender moves the lock aside. Only while the stale record is still there:
    /// a power cut may have taken it, and then the lock a contender reads is a live
    /// one (perhaps its own), which no writer may break.
    fn after_lock_read(&self, path: &Path) {
        let stale = self.inner.read(path).is_ok_and(|bytes| {
            serde_json::from_slice::<LockOwner>(&bytes)
                .is_ok_and(|record| record.owner == super::CRASHED_WRITER_OWNER)
        });
        if !stale || !self.book.take_lock_race(path) {
            return;
        }
        let record = LockOwner {
            owner: RACING_WRITER_OWNER.to_owned(),
            acquired_at_unix_ms: self.clock.unix_ms(),
            token: 11,
        };
        let record = serde_json::to_vec(&record).expect("a lock owner serializes");
        if self.inner.remove_file(path).is_ok() && self.inner.create_new(path, &record).is_ok() {
            self.racers.lock().expect("racers poisoned").push(Racer {
                lock: path.to_owned(),
                record,
                seen_held: 0,
            });
        }
    }

    /// Reads `path` with `read`; a lock file a racing writer may act on is given
    /// back before the read, or taken after it.
    fn lock_read<T>(&self, path: &Path, read: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        if !(self.lock_races && path.as_os_str().as_bytes().ends_with(b".lock")) {
            return read();
        }
        self.before_lock_read(path);
        let read = read();
        if read.is_ok() {
            self.after_lock_read(path);
        }
        read
    }

    /// Swaps the output file at `path` for a symlink out of the session, if fault
    /// `pick` fires; best effort, as an attacker's would be: the run goes on either
    /// way.
    fn plant_at_output(&self, path: &Path, pick: impl FnMut(&Fault) -> bool) {
        let planted = self.book.fire(
            |_| {
                format!(
                    "{} is swapped for a symlink to {SYMLINK_TARGET}",
                    path.display()
                )
            },
            pick,
        );
        if planted.is_some() {
            let _ = self.inner.remove_file(path);
            let _ = self.inner.plant_symlink(path, Path::new(SYMLINK_TARGET));
        }
    }
}

/// The lock file a stale lock moved aside came from: `<lock>.stale-<hex>` names
/// `<lock>`, which ends in `.lock`.
fn broken_lock(path: &Path) -> Option<&Path> {
    const ASIDE: &[u8] = b".lock.stale-";
    let bytes = path.as_os_str().as_bytes();
    let at = memchr::memmem::rfind(bytes, ASIDE)?;
    let lock = &bytes[..at + b".lock".len()];
    Some(Path::new(std::ffi::OsStr::from_bytes(lock)))
}

/// The task id of an output file path (`…/tasks/<id>.output`).
fn output_task_id(path: &Path) -> Option<String> {
    // The suffix first, as bytes: every create and append of the run passes here,
    // and splitting a path into components costs more than the rest of the check.
    if !path.as_os_str().as_bytes().ends_with(b".output") || path.extension()? != "output" {
        return None;
    }
    Some(path.file_stem()?.to_string_lossy().into_owned())
}

impl<D: PlantableDisk> Disk for RuntimeDisk<D> {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.inner.create_new(path, contents)?;
        if output_task_id(path).is_some() {
            let nth = self.book.count_output();
            self.plant_at_output(path, |fault| {
                matches!(fault, Fault::SymlinkAtOutput { spawn, after_check: false } if *spawn == nth)
            });
            if self.output_races {
                self.book.arm_output_race(path, nth);
            }
        }
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        let length = self.inner.append(path, bytes)?;
        if let Some(task_id) = output_task_id(path) {
            if self.book.take_armed_crash(&task_id) {
                std::panic::panic_any(SimulatedCrash);
            }
        }
        Ok(length)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        self.inner.read_at(path, offset_bytes, limit_bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.lock_read(path, || self.inner.read(path))
    }

    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        self.lock_read(path, || self.inner.reread(path, known))
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.inner.replace_atomic(path, contents)
    }

    fn replace_atomic_shared(&self, path: &Path, contents: Bytes) -> io::Result<()> {
        self.inner.replace_atomic_shared(path, contents)
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.inner.overwrite_in_place(path, contents)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)?;
        // The runtime removes a stale lock it moved aside once it has checked it: a
        // `stale-lock` fault with `returns` has a writer whose clock is stuck at the
        // Unix epoch take the lock again right then, before the breaker retries,
        // and crash holding it.
        if let Some(lock) = broken_lock(path) {
            if self.book.take_lock_return(lock) {
                let returned = LockOwner {
                    owner: super::CRASHED_WRITER_OWNER.to_owned(),
                    acquired_at_unix_ms: 0,
                    token: 7,
                };
                let bytes = serde_json::to_vec(&returned).expect("a lock owner serializes");
                // Best effort, as a racing writer's would be.
                let _ = self.inner.create_new(lock, &bytes);
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(path)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        let meta = self.inner.metadata(path)?;
        // The runtime has just seen a regular file: the race's link goes in now,
        // between its look and its write.
        if self.output_races && meta.kind == FileKind::File && output_task_id(path).is_some() {
            if let Some(nth) = self.book.take_output_race(path) {
                self.plant_at_output(path, |fault| {
                    matches!(fault, Fault::SymlinkAtOutput { spawn, after_check: true } if *spawn == nth)
                });
            }
        }
        Ok(meta)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_file(path)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::trace::Trace;
    use crate::world::VirtualClock;

    #[test]
    fn a_raced_stale_lock_is_taken_after_the_read_and_given_back_at_the_third() {
        // Goal: a live lock read first is left alone (a power cut may have taken
        // the stale one); then the contender's read returns the stale record it
        // read, the disk holds a live one from then on, and the racer gives it
        // back only after the contender found it held twice; the race fires once.
        let clock: Arc<dyn Clock> = Arc::new(VirtualClock::frozen(Duration::from_secs(100)));
        let lock = Path::new("/teams/t/inboxes/lead.json.lock");
        let schedule = vec![Fault::StaleLock {
            inbox: "lead".to_owned(),
            returns: 0,
            raced: true,
        }];
        let book = FaultBook::new(schedule, BTreeMap::new(), Trace::new(clock.clone()));
        let mem = MemDisk::new();
        mem.create_dir_all(Path::new("/teams/t/inboxes")).unwrap();
        let record_of = |owner: &str| {
            serde_json::to_vec(&LockOwner {
                owner: owner.to_owned(),
                acquired_at_unix_ms: 0,
                token: 7,
            })
            .unwrap()
        };
        let (held, stale) = (
            record_of("reader"),
            record_of(super::super::CRASHED_WRITER_OWNER),
        );
        mem.create_new(lock, &held).unwrap();
        book.arm_lock_race(lock, 0);
        let disk = RuntimeDisk::new(mem.clone(), book, clock.clone());
        assert_eq!(disk.read(lock).unwrap(), held);
        assert_eq!(mem.read(lock).unwrap(), held, "a live lock is not raced");
        mem.remove_file(lock).unwrap();
        mem.create_new(lock, &stale).unwrap();

        assert_eq!(disk.read(lock).unwrap(), stale);
        let live = mem.read(lock).unwrap();
        let record: LockOwner = serde_json::from_slice(&live).unwrap();
        assert_eq!(record.owner, RACING_WRITER_OWNER);
        assert_eq!(record.acquired_at_unix_ms, clock.unix_ms());

        assert!(matches!(
            disk.reread(lock, &stale).unwrap(),
            Reread::Changed(bytes) if bytes == live
        ));
        assert!(matches!(
            disk.reread(lock, &live).unwrap(),
            Reread::Unchanged
        ));
        assert_eq!(disk.read(lock).unwrap_err().kind(), io::ErrorKind::NotFound);

        mem.create_new(lock, &stale).unwrap();
        assert_eq!(disk.read(lock).unwrap(), stale);
        assert_eq!(mem.read(lock).unwrap(), stale, "the race fires once");
    }

    #[test]
    fn a_power_cut_mid_write_tears_that_write_and_fails_all_after_it_until_restored() {
        // Goal: the nth matching data write (reads and other files uncounted)
        // lands half its bytes and cuts the power; every operation after it fails
        // until the host is up again, and the crash point fires once.
        let clock: Arc<dyn Clock> = Arc::new(VirtualClock::frozen(Duration::from_secs(100)));
        let schedule = vec![Fault::CoordinatorCrash {
            at_ms: None,
            at: Some(CoordinatorCrashPoint::DiskWrite {
                op: DiskOpClass::Write,
                path: "/session/coordinator.jsonl".to_owned(),
                nth: 2,
            }),
        }];
        let book = FaultBook::new(schedule, BTreeMap::new(), Trace::new(clock));
        let mut policy = ScheduledDiskFaults::new(book.clone());
        let request = |op, path: &'static str| DiskRequest {
            op,
            path: Path::new(path),
            len_bytes: if op.writes_data() { 10 } else { 0 },
        };
        let log = "/session/coordinator.jsonl";
        let pass = |verdict: Verdict| matches!(verdict, Verdict::Pass);
        assert!(pass(policy.decide(&request(DiskOp::ReplaceAtomic, log))));
        assert!(pass(policy.decide(&request(DiskOp::Read, log))));
        assert!(pass(
            policy.decide(&request(DiskOp::Append, "/session/other.jsonl"))
        ));
        assert!(!book.power_is_out());
        assert!(matches!(
            policy.decide(&request(DiskOp::Append, log)),
            Verdict::Torn { kept_bytes: 5 }
        ));
        assert!(book.power_is_out());
        assert!(matches!(
            policy.decide(&request(DiskOp::Read, "/session/other.jsonl")),
            Verdict::Fail(DiskFault::Eio)
        ));
        book.restore_power();
        assert!(pass(policy.decide(&request(DiskOp::Append, log))));
    }
}
