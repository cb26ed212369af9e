//! What the disk saw of lock files: every attempt to take one, by whom and when.
//!
//! PROTOCOL.md §4 gives a mailbox lock's rules: up to 10 retries, with exponential
//! backoff from 5 to 100 ms, and past that budget the write fails loudly. The
//! runtime's account of a contended lock is one event at the end; the disk sees
//! each attempt. [`LockWitness`] wraps the runtime's disk and notes every
//! `create_new` of a `*.lock` file, keyed by the token its record carries (one per
//! taking of the lock), every lock file moved aside (a stale lock broken) and every
//! read that found one gone. When the run is over, each taking that needed more
//! than one attempt becomes a [`SimEvent::LockAcquisition`], and each lock moved
//! aside a [`SimEvent::LockBroken`] with the age it had, which the
//! `mailbox-durability` checker holds to the budget and to the runtime's log.
//!
//! A lock's age is the disk's: the time since the witness saw its holder's create
//! succeed, not the time its record names, which is the runtime's word. Only a lock
//! the witness never saw taken (a leftover of a crash, written outside the
//! runtime) is aged by its record. And each record the witness sees taken must
//! name the time it was taken (PROTOCOL.md §4: wall-clock milliseconds): one
//! stamped more than [`STAMP_SLACK_MS`] away from the run's clock becomes a
//! [`SimEvent::LockMisstamped`], since a reader of the record would break the lock
//! too early or never.
//!
//! A holder gives its lock back by removing the file, after reading it again to
//! see that the record is still its own: a lock broken as stale and taken by
//! another writer is theirs. The remove follows its holder's reread with no await
//! between them, so the witness pairs them: a lock file removed by a writer whose
//! reread did not find its own record becomes a [`SimEvent::LockMisreleased`].
//! Lock files still on the disk when the run is over are listed
//! ([`SimEvent::LocksLeft`]): a writer that did not crash takes its lock away
//! whether its write succeeded or failed.
//!
//! Every inbox is written under its lock, and one written atomically is read under
//! it too (PROTOCOL.md §4): the first write and the first read of each inbox that
//! the witness saw made while no one held its lock become a
//! [`SimEvent::InboxWrittenUnlocked`] and a [`SimEvent::InboxReadUnlocked`], which
//! the checker holds against the profile (Claude Code's in-place inboxes are read
//! without it).
//!
//! A lock is taken by an exclusive create, which must fail while the file exists.
//! The witness knows who holds each lock it saw taken, until the file is removed,
//! moved aside, found gone or lost with the power: a create that succeeds while
//! it knows a holder becomes a [`SimEvent::LockOverlapped`], two writers inside
//! one lock at once, whatever the runtime's disk code says the create did.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use coord_runtime::ipc::LockOwner;
use coord_runtime::world::{Clock, Disk, FileMeta, Reread};

use crate::trace::{path_text, LockAttempt, LockAttemptOutcome, Name, SimEvent, Trace};

/// How far a lock record's time may stand from the run's clock when it is taken:
/// the record is written just before the create, on the same clock.
pub const STAMP_SLACK_MS: u64 = 1_000;

/// The lock attempts of a run, shared by its boots.
#[derive(Debug, Clone)]
pub struct LockWitness {
    seen: Arc<Mutex<Seen>>,
    /// The disk without the runtime's hooks: the witness reads a lock record before
    /// it is moved aside, and its reads must neither meet a fault nor count as one
    /// of the runtime's operations.
    unhooked: Arc<dyn Disk>,
    clock: Arc<dyn Clock>,
    /// How finely `clock` moves, in µs.
    clock_step_us: u64,
}

#[derive(Debug, Default)]
struct Seen {
    /// Every taking of a lock that did not succeed at once, in the order of its
    /// first attempt.
    takings: Vec<Taking>,
    /// Every lock file moved aside and not put back, in order.
    breaks: Vec<Break>,
    /// Each lock file met: a run has a handful, so they are searched in order.
    locks: Vec<LockSeen>,
    /// The last lock file reread and the record its reader expected there (its
    /// own): the writer about to remove it, if it does. Buffers kept from one
    /// reread to the next, since a writer waiting out a busy lock rereads it at
    /// every attempt.
    reread_lock: Vec<u8>,
    reread_known: Vec<u8>,
    /// Whether the buffers hold a reread no removal has followed yet.
    reread_pending: bool,
    /// Every lock file removed by a writer whose record it did not hold.
    misreleases: Vec<Misrelease>,
    /// Every lock taken while the witness knew another holder of it.
    overlaps: Vec<Overlap>,
    /// The first taking of each lock whose record named another time than the
    /// clock's.
    misstamps: Vec<Misstamp>,
    /// The first read and the first write of each inbox made while no one held its
    /// lock, with when, in the order they were made.
    unlocked: Vec<(PathBuf, InboxAccess, u64)>,
}

/// What was done to an inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InboxAccess {
    Read,
    Write,
}

impl Seen {
    /// Whether the witness knows a holder of `inbox`'s lock, `<inbox>.lock`.
    fn inbox_locked(&self, inbox: &Path) -> bool {
        let inbox = inbox.as_os_str().as_encoded_bytes();
        self.locks.iter().any(|seen| {
            seen.holder_token.is_some()
                && seen
                    .path
                    .as_os_str()
                    .as_encoded_bytes()
                    .strip_suffix(b".lock")
                    == Some(inbox)
        })
    }
}

/// A lock taken while another writer held it.
#[derive(Debug)]
struct Overlap {
    lock: PathBuf,
    at_us: u64,
    holder: String,
    taker: String,
}

/// A lock taken with a record that named another time than the clock's.
#[derive(Debug)]
struct Misstamp {
    lock: PathBuf,
    at_us: u64,
    /// The time the record named, and the clock's, in ms since the Unix epoch.
    stamped_unix_ms: u64,
    clock_unix_ms: u64,
}

/// A lock file removed by a writer other than the one its record names.
#[derive(Debug)]
struct Misrelease {
    lock: PathBuf,
    at_us: u64,
    holder: String,
    remover: String,
}

/// A lock file moved aside, with what its record said.
#[derive(Debug)]
struct Break {
    lock: PathBuf,
    at_us: u64,
    /// The owner and the age in ms of the record moved aside, when it parsed.
    record: Option<(String, u64)>,
}

/// What the witness knows of one lock file.
#[derive(Debug)]
struct LockSeen {
    path: PathBuf,
    /// How often it was moved aside or found gone so far.
    breaks: u64,
    /// Index into [`Seen::takings`] of each taking of it, by token.
    takings: HashMap<u64, usize>,
    /// The taking whose attempt on it came last: a break follows its breaker's
    /// failed attempt with no await between them, so it is that taking's.
    last_taking: Option<usize>,
    /// The token of the writer holding it, as far as the witness knows, and the
    /// record that writer wrote (a buffer kept from one holder to the next).
    holder_token: Option<u64>,
    holder_record: Vec<u8>,
    /// When the witness saw that holder's create succeed, in ms since the Unix
    /// epoch by the run's clock; none for a lock it did not see taken.
    holder_taken_unix_ms: Option<u64>,
}

impl LockSeen {
    /// Notes that the writer whose `record` carries `token` took the lock; returns
    /// the owner of the holder it took it from, if the witness knew one.
    fn take(&mut self, token: u64, record: &[u8], taken_unix_ms: Option<u64>) -> Option<String> {
        let displaced = match self.holder_token {
            Some(holder) if holder != token => Some(
                owner(&self.holder_record).unwrap_or_else(|| "an unreadable record".to_owned()),
            ),
            _ => None,
        };
        self.holder_token = Some(token);
        self.holder_taken_unix_ms = taken_unix_ms;
        self.holder_record.clear();
        self.holder_record.extend_from_slice(record);
        displaced
    }
}

impl Seen {
    fn lock(&mut self, path: &Path) -> &mut LockSeen {
        let index = match self.locks.iter().position(|lock| lock.path == path) {
            Some(index) => index,
            None => {
                self.locks.push(LockSeen {
                    path: path.to_owned(),
                    breaks: 0,
                    takings: HashMap::new(),
                    last_taking: None,
                    holder_token: None,
                    holder_record: Vec::new(),
                    holder_taken_unix_ms: None,
                });
                self.locks.len() - 1
            }
        };
        &mut self.locks[index]
    }
}

#[derive(Debug)]
struct Taking {
    lock: PathBuf,
    owner: String,
    attempts: Vec<LockAttempt>,
    /// `Seen::breaks` of the lock at this taking's last attempt.
    breaks_seen: u64,
    /// Stale locks this taking moved aside.
    breaks_made: u32,
}

impl LockWitness {
    /// A witness reading the time from `clock`, which moves in steps of
    /// `clock_step_us`.
    pub fn new(unhooked: Arc<dyn Disk>, clock: Arc<dyn Clock>, clock_step_us: u64) -> Self {
        Self {
            seen: Arc::default(),
            unhooked,
            clock,
            clock_step_us,
        }
    }

    /// `inner`, with its lock files witnessed.
    pub fn disk(&self, inner: Arc<dyn Disk>) -> Arc<dyn Disk> {
        Arc::new(WitnessedDisk {
            inner,
            witness: self.clone(),
        })
    }

    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().expect("lock witness poisoned")
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.clock.monotonic().as_micros()).unwrap_or(u64::MAX)
    }

    fn attempt(&self, lock: &Path, record: &[u8], outcome: LockAttemptOutcome) {
        let Some(token) = token(record) else {
            return;
        };
        let at_us = self.now_us();
        let now_unix_ms = self.clock.unix_ms();
        let mut seen = self.seen();
        if outcome == LockAttemptOutcome::Taken {
            let stamped_ms = stamped_unix_ms(record);
            let misstamped =
                stamped_ms.filter(|stamped| stamped.abs_diff(now_unix_ms) > STAMP_SLACK_MS);
            if let Some(stamped_ms) = misstamped {
                if !seen.misstamps.iter().any(|misstamp| misstamp.lock == lock) {
                    seen.misstamps.push(Misstamp {
                        lock: lock.to_owned(),
                        at_us,
                        stamped_unix_ms: stamped_ms,
                        clock_unix_ms: now_unix_ms,
                    });
                }
            }
        }
        let next_index = seen.takings.len();
        let lock_seen = seen.lock(lock);
        let displaced = match outcome {
            LockAttemptOutcome::Taken => lock_seen.take(token, record, Some(now_unix_ms)),
            _ => None,
        };
        let lock_seen = match displaced {
            None => lock_seen,
            Some(holder) => {
                seen.overlaps.push(Overlap {
                    lock: lock.to_owned(),
                    at_us,
                    holder,
                    taker: owner(record).unwrap_or_default(),
                });
                seen.lock(lock)
            }
        };
        let breaks = lock_seen.breaks;
        let index = match lock_seen.takings.get(&token) {
            Some(&index) => index,
            // Taken at the first attempt, as most locks are: nothing to judge.
            None if outcome == LockAttemptOutcome::Taken => {
                lock_seen.last_taking = None;
                return;
            }
            None => {
                lock_seen.takings.insert(token, next_index);
                let owner = owner(record).unwrap_or_default();
                seen.takings.push(Taking {
                    lock: lock.to_owned(),
                    owner,
                    attempts: Vec::new(),
                    breaks_seen: breaks,
                    breaks_made: 0,
                });
                next_index
            }
        };
        seen.lock(lock).last_taking = Some(index);
        let taking = &mut seen.takings[index];
        let after_break = !taking.attempts.is_empty() && taking.breaks_seen != breaks;
        taking.breaks_seen = breaks;
        taking.attempts.push(LockAttempt {
            at_us,
            outcome,
            after_break,
        });
    }

    /// Notes that `lock` was found gone.
    fn gone(&self, lock: &Path) {
        let mut seen = self.seen();
        let lock_seen = seen.lock(lock);
        lock_seen.breaks += 1;
        lock_seen.holder_token = None;
    }

    /// Notes a read or a write of the inbox `inbox`: made while its lock is free,
    /// it is kept (the first of each kind an inbox).
    fn inbox_access(&self, inbox: &Path, access: InboxAccess) {
        let mut seen = self.seen();
        let known =
            |(path, kind, _): &(PathBuf, InboxAccess, u64)| *kind == access && path == inbox;
        if seen.inbox_locked(inbox) || seen.unlocked.iter().any(known) {
            return;
        }
        let at_us = self.now_us();
        seen.unlocked.push((inbox.to_owned(), access, at_us));
    }

    /// Before an exclusive create of `lock`: a holder the witness knows whose lock
    /// file is no longer on the disk gave it back where the witness could not see
    /// (a writer outside the runtime, as a racing writer is), and holds nothing.
    /// A file still there keeps its holder, so a create that succeeds over it is
    /// an overlap.
    fn before_create(&self, lock: &Path) {
        let mut seen = self.seen();
        let lock_seen = seen.lock(lock);
        if lock_seen.holder_token.is_some()
            && self
                .unhooked
                .metadata(lock)
                .is_err_and(|error| error.kind() == io::ErrorKind::NotFound)
        {
            lock_seen.holder_token = None;
        }
    }

    /// Notes that `lock` was removed: no one holds it.
    fn released(&self, lock: &Path) {
        self.seen().lock(lock).holder_token = None;
    }

    /// Forgets every holder: the power was cut, and a lock file never synced may
    /// be gone with its holder.
    pub fn power_cut(&self) {
        for lock in &mut self.seen().locks {
            lock.holder_token = None;
        }
    }

    /// The record of `lock` as the disk holds it, before it is moved aside: its
    /// owner, and its age: since the witness saw its holder take it, or by the time
    /// the record names for a lock the witness did not see taken.
    fn record_before_break(&self, lock: &Path) -> Option<(String, u64)> {
        let bytes = self.unhooked.read(lock).ok()?;
        let record: LockOwner = serde_json::from_slice(&bytes).ok()?;
        let now_unix_ms = self.clock.unix_ms();
        let taken_unix_ms = self
            .seen()
            .locks
            .iter()
            .find(|seen| seen.path == lock && seen.holder_token == Some(record.token))
            .and_then(|seen| seen.holder_taken_unix_ms);
        let age_ms =
            now_unix_ms.saturating_sub(taken_unix_ms.unwrap_or(record.acquired_at_unix_ms));
        Some((record.owner, age_ms))
    }

    /// Notes that `lock` was moved aside, its record having been `record`.
    fn broken(&self, lock: &Path, record: Option<(String, u64)>) {
        let at_us = self.now_us();
        let mut seen = self.seen();
        let lock_seen = seen.lock(lock);
        lock_seen.breaks += 1;
        lock_seen.holder_token = None;
        if let Some(index) = lock_seen.last_taking {
            seen.takings[index].breaks_made += 1;
        }
        seen.breaks.push(Break {
            lock: lock.to_owned(),
            at_us,
            record,
        });
    }

    /// Notes that a lock moved aside was linked back to `lock`: a live lock that
    /// replaced a stale one was put back, and nothing was broken.
    fn put_back(&self, lock: &Path) {
        let record = self.unhooked.read(lock).unwrap_or_default();
        let mut seen = self.seen();
        if let Some(token) = token(&record) {
            seen.lock(lock).take(token, &record, None);
        }
        if let Some(last) = seen.breaks.iter().rposition(|b| b.lock == lock) {
            seen.breaks.remove(last);
        }
    }

    /// Notes that a writer reread `lock` expecting `known`, its own record.
    fn reread(&self, lock: &Path, known: &[u8]) {
        let mut seen = self.seen();
        let seen = &mut *seen;
        seen.reread_lock.clear();
        seen.reread_lock
            .extend_from_slice(lock.as_os_str().as_encoded_bytes());
        seen.reread_known.clear();
        seen.reread_known.extend_from_slice(known);
        seen.reread_pending = true;
    }

    /// Notes that `lock` is about to be removed: by the writer whose reread came
    /// just before, which must have found its own record there.
    fn removing(&self, lock: &Path) {
        let mut seen = self.seen();
        if !std::mem::take(&mut seen.reread_pending)
            || seen.reread_lock != lock.as_os_str().as_encoded_bytes()
        {
            return;
        }
        let bytes = match self.unhooked.reread(lock, &seen.reread_known) {
            Ok(Reread::Changed(bytes)) => bytes,
            // Its own record, or nothing left to take.
            Ok(Reread::Unchanged) | Err(_) => return,
        };
        if token(&bytes) == token(&seen.reread_known) {
            return;
        }
        let at_us = self.now_us();
        let unreadable = || "an unreadable record".to_owned();
        let remover = owner(&seen.reread_known).unwrap_or_else(unreadable);
        seen.misreleases.push(Misrelease {
            lock: lock.to_owned(),
            at_us,
            holder: owner(&bytes).unwrap_or_else(unreadable),
            remover,
        });
    }

    /// Logs every lock moved aside, every taking that needed more than one
    /// attempt or never succeeded (in the order of their first attempts), every
    /// lock removed by a writer that did not hold it, and the lock files left.
    pub fn record(&self, trace: &Trace) {
        let breaks = std::mem::take(&mut self.seen().breaks);
        for broken in breaks {
            let (owner, age_ms) = broken.record.unzip();
            trace.push(
                "disk",
                SimEvent::LockBroken {
                    lock: Name::from(path_text(&broken.lock)),
                    at_ms: broken.at_us / 1_000,
                    owner: owner.map(Name::from),
                    age_ms,
                },
            );
        }
        let takings = std::mem::take(&mut self.seen().takings);
        for taking in takings {
            trace.push(
                "disk",
                SimEvent::LockAcquisition {
                    lock: Name::from(path_text(&taking.lock)),
                    owner: Name::from(taking.owner),
                    clock_step_us: self.clock_step_us,
                    attempts: taking.attempts.into(),
                    breaks: taking.breaks_made,
                },
            );
        }
        let misreleases = std::mem::take(&mut self.seen().misreleases);
        for misrelease in misreleases {
            trace.push(
                "disk",
                SimEvent::LockMisreleased {
                    lock: Name::from(path_text(&misrelease.lock)),
                    at_ms: misrelease.at_us / 1_000,
                    holder: Name::from(misrelease.holder),
                    remover: Name::from(misrelease.remover),
                },
            );
        }
        let overlaps = std::mem::take(&mut self.seen().overlaps);
        for overlap in overlaps {
            trace.push(
                "disk",
                SimEvent::LockOverlapped {
                    lock: Name::from(path_text(&overlap.lock)),
                    at_ms: overlap.at_us / 1_000,
                    holder: Name::from(overlap.holder),
                    taker: Name::from(overlap.taker),
                },
            );
        }
        let misstamps = std::mem::take(&mut self.seen().misstamps);
        for misstamp in misstamps {
            trace.push(
                "disk",
                SimEvent::LockMisstamped {
                    lock: Name::from(path_text(&misstamp.lock)),
                    at_ms: misstamp.at_us / 1_000,
                    stamped_unix_ms: misstamp.stamped_unix_ms,
                    clock_unix_ms: misstamp.clock_unix_ms,
                },
            );
        }
        let unlocked = std::mem::take(&mut self.seen().unlocked);
        for (inbox, access, at_us) in unlocked {
            let inbox = Name::from(path_text(&inbox));
            let at_ms = at_us / 1_000;
            let event = match access {
                InboxAccess::Read => SimEvent::InboxReadUnlocked { inbox, at_ms },
                InboxAccess::Write => SimEvent::InboxWrittenUnlocked { inbox, at_ms },
            };
            trace.push("disk", event);
        }
        let paths: Vec<PathBuf> = self.seen().locks.iter().map(|l| l.path.clone()).collect();
        let locks: Vec<(Name, Option<Name>)> = paths
            .iter()
            .filter_map(|path| {
                let bytes = self.unhooked.read(path).ok()?;
                Some((Name::from(path_text(path)), owner(&bytes).map(Name::from)))
            })
            .collect();
        if !locks.is_empty() {
            trace.push("disk", SimEvent::LocksLeft { locks });
        }
    }
}

/// Whether `path` names a lock file.
fn is_lock(path: &Path) -> bool {
    path.as_os_str().as_encoded_bytes().ends_with(b".lock")
}

/// Whether `path` names an inbox (`…/inboxes/<agent>.json`).
fn is_inbox(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    bytes.ends_with(b".json") && memchr::memmem::find(bytes, b"/inboxes/").is_some()
}

/// The token of a lock record. The runtime writes the record the same way every
/// time (`{"owner":"…","acquired_at_unix_ms":N,"token":T}`) at every attempt, so the
/// token is read from the record's end before the record is parsed whole.
fn token(record: &[u8]) -> Option<u64> {
    const TOKEN_OPEN: &[u8] = br#","token":"#;
    let fast = record
        .strip_suffix(b"}")
        .and_then(|rest| {
            let colon = memchr::memrchr(b':', rest)?;
            rest[..=colon]
                .ends_with(TOKEN_OPEN)
                .then(|| &rest[colon + 1..])
        })
        .and_then(decimal_u64);
    fast.or_else(|| Some(serde_json::from_slice::<LockOwner>(record).ok()?.token))
}

/// `digits` as a decimal number: one or more ASCII digits that fit in a `u64`.
/// Tokens are random 64-bit numbers, some twenty digits read at every lock
/// attempt; going through `str` checks them as UTF-8 first, for nothing.
fn decimal_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.checked_sub(b'0').filter(|digit| *digit <= 9)?;
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The time a lock record names (`acquired_at_unix_ms`), read as [`token`] reads
/// its token.
fn stamped_unix_ms(record: &[u8]) -> Option<u64> {
    const STAMP_OPEN: &[u8] = br#""acquired_at_unix_ms":"#;
    let fast = memchr::memmem::find(record, STAMP_OPEN).and_then(|at| {
        let rest = &record[at + STAMP_OPEN.len()..];
        let end = memchr::memchr(b',', rest)?;
        decimal_u64(&rest[..end])
    });
    fast.or_else(|| {
        Some(
            serde_json::from_slice::<LockOwner>(record)
                .ok()?
                .acquired_at_unix_ms,
        )
    })
}

/// The owner a lock record names, read as [`token`] reads its token.
fn owner(record: &[u8]) -> Option<String> {
    const OWNER_OPEN: &[u8] = br#"{"owner":""#;
    const OWNER_CLOSE: &[u8] = br#"","acquired_at_unix_ms":"#;
    let fast = record.strip_prefix(OWNER_OPEN).and_then(|rest| {
        let quote = memchr::memchr(b'"', rest)?;
        let owner = std::str::from_utf8(&rest[..quote]).ok()?;
        (rest[quote..].starts_with(OWNER_CLOSE) && !owner.contains('\\')).then_some(owner)
    });
    match fast {
        Some(owner) => Some(owner.to_owned()),
        None => Some(serde_json::from_slice::<LockOwner>(record).ok()?.owner),
    }
}

/// A disk whose lock files the witness watches.
#[derive(Debug)]
struct WitnessedDisk {
    inner: Arc<dyn Disk>,
    witness: LockWitness,
}

impl WitnessedDisk {
    /// Notes a read of `path` that found nothing there, if it is a lock file.
    fn read_result<T>(&self, path: &Path, result: io::Result<T>) -> io::Result<T> {
        if let Err(error) = &result {
            if error.kind() == io::ErrorKind::NotFound && is_lock(path) {
                self.witness.gone(path);
            }
        }
        result
    }
}

impl Disk for WitnessedDisk {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        if is_lock(path) {
            self.witness.before_create(path);
        }
        let created = self.inner.create_new(path, contents);
        if is_lock(path) {
            let outcome = match &created {
                Ok(()) => LockAttemptOutcome::Taken,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                    LockAttemptOutcome::Held
                }
                Err(_) => LockAttemptOutcome::Failed,
            };
            self.witness.attempt(path, contents, outcome);
        }
        created
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
        self.inner.append(path, bytes)
    }

    fn read_at(&self, path: &Path, offset_bytes: u64, limit_bytes: u64) -> io::Result<Vec<u8>> {
        self.inner.read_at(path, offset_bytes, limit_bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if is_inbox(path) {
            self.witness.inbox_access(path, InboxAccess::Read);
        }
        self.read_result(path, self.inner.read(path))
    }

    fn reread(&self, path: &Path, known: &[u8]) -> io::Result<Reread> {
        if is_lock(path) {
            self.witness.reread(path, known);
        } else if is_inbox(path) {
            self.witness.inbox_access(path, InboxAccess::Read);
        }
        self.read_result(path, self.inner.reread(path, known))
    }

    fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        if is_inbox(path) {
            self.witness.inbox_access(path, InboxAccess::Write);
        }
        self.inner.replace_atomic(path, contents)
    }

    fn replace_atomic_shared(&self, path: &Path, contents: Bytes) -> io::Result<()> {
        if is_inbox(path) {
            self.witness.inbox_access(path, InboxAccess::Write);
        }
        self.inner.replace_atomic_shared(path, contents)
    }

    fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        if is_inbox(path) {
            self.witness.inbox_access(path, InboxAccess::Write);
        }
        self.inner.overwrite_in_place(path, contents)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if !is_lock(from) {
            return self.inner.rename(from, to);
        }
        let record = self.witness.record_before_break(from);
        let renamed = self.inner.rename(from, to);
        match &renamed {
            Ok(()) => self.witness.broken(from, record),
            // Gone before it could be moved aside: as good as a read that found it
            // gone, after which a writer tries again at once.
            Err(error) if error.kind() == io::ErrorKind::NotFound => self.witness.gone(from),
            Err(_) => {}
        }
        renamed
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let linked = self.inner.hard_link(from, to);
        if linked.is_ok() && is_lock(to) {
            self.witness.put_back(to);
        }
        linked
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        if !is_lock(path) {
            return self.inner.remove_file(path);
        }
        self.witness.removing(path);
        let removed = self.inner.remove_file(path);
        if removed.is_ok() {
            self.witness.released(path);
        }
        removed
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(path)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
        self.read_result(path, self.inner.metadata(path))
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;
    use crate::world::{MemDisk, VirtualClock};
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        /// The record's token read from its end is the token serde reads, for any
        /// owner, time and token the runtime can write.
        #[test]
        fn token_agrees_with_serde(owner in ".{0,12}", at_ms: u64, token: u64) {
            let record = serde_json::to_vec(&LockOwner {
                owner,
                acquired_at_unix_ms: at_ms,
                token,
            })
            .unwrap();
            prop_assert_eq!(super::token(&record), Some(token));
        }

        /// Only digits that fit in a `u64` are a number.
        #[test]
        fn decimal_u64_agrees_with_str_parse(text in "[0-9+a ]{0,22}") {
            // `str::parse` also takes a leading `+`, which a record never holds.
            let parsed = text.parse::<u64>().ok().filter(|_| !text.starts_with('+'));
            prop_assert_eq!(decimal_u64(text.as_bytes()), parsed);
        }
    }

    /// A disk whose "exclusive" create replaces whatever is there, as one that lost
    /// `O_EXCL` would.
    #[derive(Debug)]
    struct CreateAlwaysDisk(MemDisk);

    impl Disk for CreateAlwaysDisk {
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            self.0.create_dir_all(path)
        }
        fn create_new(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
            self.0.overwrite_in_place(path, contents)
        }
        fn append(&self, path: &Path, bytes: &[u8]) -> io::Result<u64> {
            self.0.append(path, bytes)
        }
        fn read_at(&self, path: &Path, offset: u64, limit: u64) -> io::Result<Vec<u8>> {
            self.0.read_at(path, offset, limit)
        }
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.0.read(path)
        }
        fn replace_atomic(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
            self.0.replace_atomic(path, contents)
        }
        fn overwrite_in_place(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
            self.0.overwrite_in_place(path, contents)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.0.rename(from, to)
        }
        fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.0.hard_link(from, to)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            self.0.remove_file(path)
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
            self.0.list_dir(path)
        }
        fn metadata(&self, path: &Path) -> io::Result<FileMeta> {
            self.0.metadata(path)
        }
        fn sync_file(&self, path: &Path) -> io::Result<()> {
            self.0.sync_file(path)
        }
    }

    fn record(owner: &str, token: u64) -> Vec<u8> {
        format!(r#"{{"owner":"{owner}","acquired_at_unix_ms":1,"token":{token}}}"#).into_bytes()
    }

    fn overlaps(disk: Arc<dyn Disk>, unhooked: Arc<dyn Disk>) -> Vec<SimEvent> {
        let clock: Arc<dyn Clock> = Arc::new(VirtualClock::frozen(Duration::ZERO));
        let witness = LockWitness::new(unhooked, clock.clone(), 1_000);
        let witnessed = witness.disk(disk);
        let lock = Path::new("/session/inbox.json.lock");
        witnessed.create_dir_all(Path::new("/session")).unwrap();
        assert!(witnessed.create_new(lock, &record("first", 1)).is_ok());
        // Whether the second create succeeds is the disk's answer; the witness
        // judges it by the holder it knows.
        let _ = witnessed.create_new(lock, &record("second", 2));
        let trace = Trace::new(clock);
        witness.record(&trace);
        trace
            .entries()
            .into_iter()
            .filter_map(|entry| match entry.typed {
                TraceEvent::Sim(event @ SimEvent::LockOverlapped { .. }) => Some(event),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_inbox_read_while_its_lock_is_free_is_noted_once() {
        // Goal: the witness tells a read under the lock from one without it by
        // the lock's holder as the disk saw it.
        let mem = MemDisk::new();
        let clock: Arc<dyn Clock> = Arc::new(VirtualClock::frozen(Duration::ZERO));
        let witness = LockWitness::new(Arc::new(mem.clone()), clock.clone(), 1_000);
        let disk = witness.disk(Arc::new(mem));
        let inbox = Path::new("/teams/t/inboxes/lead.json");
        let lock = Path::new("/teams/t/inboxes/lead.json.lock");
        disk.create_dir_all(Path::new("/teams/t/inboxes")).unwrap();
        disk.replace_atomic(inbox, b"[]").unwrap();
        disk.create_new(lock, &record("reader", 1)).unwrap();
        disk.read(inbox).unwrap();
        disk.remove_file(lock).unwrap();
        disk.read(inbox).unwrap();
        disk.read(inbox).unwrap();
        let trace = Trace::new(clock);
        witness.record(&trace);
        let unlocked: Vec<_> = trace
            .entries()
            .into_iter()
            .filter(|entry| {
                matches!(
                    entry.typed,
                    TraceEvent::Sim(SimEvent::InboxReadUnlocked { .. })
                )
            })
            .collect();
        assert_eq!(unlocked.len(), 1);
    }

    #[test]
    fn a_lock_created_over_its_holders_file_is_an_overlap_and_an_exclusive_create_is_not() {
        // Goal: the witness judges the create by the holder it saw, not by what the
        // disk answered: a disk without O_EXCL lets the second writer in.
        let mem = MemDisk::new();
        let found = overlaps(Arc::new(CreateAlwaysDisk(mem.clone())), Arc::new(mem));
        assert_eq!(found.len(), 1, "{found:?}");
        let SimEvent::LockOverlapped { holder, taker, .. } = &found[0] else {
            unreachable!()
        };
        assert_eq!((&**holder, &**taker), ("first", "second"));
        let mem = MemDisk::new();
        assert!(overlaps(Arc::new(mem.clone()), Arc::new(mem)).is_empty());
    }

    #[test]
    fn owner_and_token_read_the_runtimes_record_and_any_other_json_record() {
        // Goal: the record the runtime writes is read without parsing it, and a
        // record written otherwise (escaped owner, other field order) still is.
        let runtime = br#"{"owner":"producer-7","acquired_at_unix_ms":1700000002000,"token":42}"#;
        assert_eq!(owner(runtime).as_deref(), Some("producer-7"));
        assert_eq!(token(runtime), Some(42));
        let escaped = br#"{"owner":"a\"b","acquired_at_unix_ms":1,"token":7}"#;
        assert_eq!(owner(escaped).as_deref(), Some("a\"b"));
        assert_eq!(token(escaped), Some(7));
        let reordered = br#"{"token":9,"owner":"x","acquired_at_unix_ms":1}"#;
        assert_eq!(owner(reordered).as_deref(), Some("x"));
        assert_eq!(token(reordered), Some(9));
        assert_eq!(token(b"garbage"), None);
        assert_eq!(owner(b"garbage"), None);
    }
}
