//! Lock files: `<file>.lock`, created with `O_EXCL`, naming their owner and time.
//!
//! Acquisition retries with exponential backoff (5 ms doubling to 100 ms, each wait
//! jittered to between half and all of its nominal length from the injected entropy)
//! and gives up loudly after the retry budget: a caller that cannot get the lock gets
//! [`LockError::Contended`], never a silent skip.
//!
//! A writer that crashed leaves its lock behind. A lock older than the stale threshold
//! is broken, and a [`RuntimeEvent::StaleLockBroken`] is journaled. Breaking renames
//! the lock file aside and checks that what was renamed is the stale lock that was
//! read, not a fresh lock that replaced it in the meantime; a fresh lock taken by
//! mistake is linked back into place.

use crate::probe::Probe;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::event::RuntimeEvent;
use crate::world::{Reread, World};

/// How lock acquisition retries and when a lock counts as stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockPolicy {
    /// Retries after the first attempt. Default 10.
    pub retries_max: u32,
    /// The first backoff. Default 5 ms.
    pub backoff_min: Duration,
    /// The longest backoff. Default 100 ms.
    pub backoff_max: Duration,
    /// A lock older than this may be broken. Default 10 s.
    pub stale_after: Duration,
}

impl Default for LockPolicy {
    fn default() -> Self {
        Self {
            retries_max: 10,
            backoff_min: Duration::from_millis(5),
            backoff_max: Duration::from_millis(100),
            stale_after: Duration::from_secs(10),
        }
    }
}

impl LockPolicy {
    /// The nominal wait after failed attempt `attempt` (0-based), before jitter.
    pub fn backoff_nominal(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.backoff_min
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}

/// What a lock file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockOwner {
    /// Who holds the lock.
    pub owner: String,
    /// When it was taken, in ms since the Unix epoch.
    pub acquired_at_unix_ms: u64,
    /// A random token that tells this holder's lock from any later one.
    pub token: u64,
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Every attempt found the lock held.
    #[error("lock {path} still held after {attempts} attempts (last holder: {holder})")]
    Contended {
        /// The lock file.
        path: PathBuf,
        /// Attempts made: the first, one after each backoff, and one after each
        /// stale lock broken.
        attempts: u32,
        /// Who held it at the last attempt, as its file said.
        holder: String,
    },
    /// The lock file could not be created or read.
    #[error("lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// The lock file path for `path`: `<path>.lock`.
pub fn lock_path_for(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// A held lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct LockGuard {
    world: World,
    path: PathBuf,
    token: u64,
    /// The bytes this holder wrote: a lock file still holding them is ours without
    /// parsing it.
    contents: Vec<u8>,
    released: bool,
}

impl LockGuard {
    /// Takes the lock at `lock_path` for `owner`, retrying as `policy` says.
    pub async fn acquire(
        world: &World,
        lock_path: &Path,
        owner: &str,
        policy: &LockPolicy,
    ) -> Result<LockGuard, LockError> {
        let token = world.entropy.next_u64();
        let io_error = |source| LockError::Io {
            path: lock_path.to_owned(),
            source,
        };
        let mut attempt: u32 = 0;
        let mut breaks: u32 = 0;
        // The holder's record as the last attempt read it: a holder that keeps the
        // lock through many attempts is parsed once.
        let mut last_seen = None;
        let record = RecordText::new(owner, token);
        // One buffer for every attempt's record; the holder keeps the last one.
        let mut contents = Vec::new();
        loop {
            record.write_at(world.clock.unix_ms(), &mut contents);
            match world.disk.create_new(lock_path, &contents) {
                Ok(()) => {
                    return Ok(LockGuard {
                        world: world.clone(),
                        path: lock_path.to_owned(),
                        token,
                        contents,
                        released: false,
                    })
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io_error(error)),
            }
            // A broken stale lock earns an immediate retry, but only as many as the
            // retry budget, so a lock that keeps going stale cannot loop forever.
            if breaks < policy.retries_max
                && break_if_stale(world, lock_path, policy, &mut last_seen)?
            {
                breaks += 1;
                continue;
            }
            if attempt >= policy.retries_max {
                let holder = read_owner(world, lock_path)
                    .map(|record| record.owner)
                    .unwrap_or_else(|| "unknown".to_owned());
                Probe::LockContended.reach(&*world.journal);
                return Err(LockError::Contended {
                    path: lock_path.to_owned(),
                    // Every create made: the waits', and the retries after breaks.
                    attempts: attempt + 1 + breaks,
                    holder,
                });
            }
            world
                .clock
                .sleep(jittered(world, policy.backoff_nominal(attempt)))
                .await;
            attempt += 1;
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock now, reporting any error (dropping releases silently).
    pub fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        self.remove_if_ours()
    }

    /// Removes the lock file only if it still carries this holder's token: if the
    /// lock was broken as stale and someone else holds it now, it is theirs.
    fn remove_if_ours(&self) -> Result<(), LockError> {
        // The bytes written carry the token: still them, still ours.
        let ours = match self.world.disk.reread(&self.path, &self.contents) {
            Ok(Reread::Unchanged) => true,
            Ok(Reread::Changed(bytes)) => serde_json::from_slice::<LockOwner>(&bytes)
                .is_ok_and(|record| record.token == self.token),
            Err(_) => return Ok(()),
        };
        if !ours {
            return Ok(());
        }
        self.world
            .disk
            .remove_file(&self.path)
            .map_err(|source| LockError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            // Nobody can act on an error in drop; a lock left behind goes stale.
            let _ = self.remove_if_ours();
        }
    }
}

/// A [`LockOwner`]'s JSON for one owner and token, written for each attempt's time
/// without serializing the record again: a writer waiting out a busy lock makes a
/// dozen attempts, and the owner's name and the token do not change between them.
struct RecordText {
    /// `{"owner":"…","acquired_at_unix_ms":`
    head: Vec<u8>,
    /// `,"token":…}`
    tail: Vec<u8>,
}

/// The longest a `u64` is in decimal.
const U64_DIGITS_MAX: usize = 20;

// Numbers are written by serde_json, which does not go through `fmt`: a writer
// waiting out a busy lock writes one per attempt.
impl RecordText {
    fn new(owner: &str, token: u64) -> Self {
        let mut head = Vec::with_capacity(owner.len() + 48);
        head.extend_from_slice(br#"{"owner":"#);
        serde_json::to_writer(&mut head, owner).expect("a string serializes");
        head.extend_from_slice(br#","acquired_at_unix_ms":"#);
        let mut tail = Vec::with_capacity(U64_DIGITS_MAX + 11);
        tail.extend_from_slice(br#","token":"#);
        serde_json::to_writer(&mut tail, &token).expect("a number serializes");
        tail.push(b'}');
        Self { head, tail }
    }

    /// Puts in `out`, in place of what it held, the bytes `serde_json::to_vec`
    /// writes for the record taken at `unix_ms`.
    fn write_at(&self, unix_ms: u64, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.head.len() + U64_DIGITS_MAX + self.tail.len());
        out.extend_from_slice(&self.head);
        serde_json::to_writer(&mut *out, &unix_ms).expect("a number serializes");
        out.extend_from_slice(&self.tail);
    }
}

fn jittered(world: &World, nominal: Duration) -> Duration {
    let nominal_us = u64::try_from(nominal.as_micros()).unwrap_or(u64::MAX);
    let half_us = nominal_us / 2;
    Duration::from_micros(half_us + world.entropy.below(nominal_us - half_us + 1))
}

fn read_owner(world: &World, lock_path: &Path) -> Option<LockOwner> {
    let bytes = world.disk.read(lock_path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The bytes of a lock file as last read, and the record they parse to (`None`
/// when they do not).
type SeenLock = Option<(Vec<u8>, Option<LockOwner>)>;

/// A lock file's bytes and the record they parse to.
fn parsed(bytes: Vec<u8>) -> (Vec<u8>, Option<LockOwner>) {
    let record = serde_json::from_slice(&bytes).ok();
    (bytes, record)
}

/// Breaks the lock at `lock_path` if it is stale. Returns true if the caller should
/// retry at once (the lock was broken, or vanished while being looked at).
/// `last_seen` is the lock file as the caller's previous attempt read it; the same
/// bytes are not parsed again.
fn break_if_stale(
    world: &World,
    lock_path: &Path,
    policy: &LockPolicy,
    last_seen: &mut SeenLock,
) -> Result<bool, LockError> {
    let io_error = |source| LockError::Io {
        path: lock_path.to_owned(),
        source,
    };
    let read = match last_seen.take() {
        Some((bytes, record)) => match world.disk.reread(lock_path, &bytes) {
            Ok(Reread::Unchanged) => Ok((bytes, record)),
            Ok(Reread::Changed(bytes)) => Ok(parsed(bytes)),
            Err(error) => Err(error),
        },
        None => world.disk.read(lock_path).map(parsed),
    };
    let (seen, record) = match read {
        Ok(seen) => last_seen.insert(seen),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(error) => return Err(io_error(error)),
    };
    let now_ms = world.clock.unix_ms();
    // A lock file that does not parse (a writer crashed while writing it) is judged by
    // its modification time instead.
    let acquired_ms = match &record {
        Some(record) => Some(record.acquired_at_unix_ms),
        None => match world.disk.metadata(lock_path) {
            Ok(meta) => meta.modified_unix_ms,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(error) => return Err(io_error(error)),
        },
    };
    let Some(acquired_ms) = acquired_ms else {
        return Ok(false);
    };
    let age_ms = now_ms.saturating_sub(acquired_ms);
    let stale_after_ms = u64::try_from(policy.stale_after.as_millis()).unwrap_or(u64::MAX);
    if age_ms < stale_after_ms {
        return Ok(false);
    }

    let mut aside = lock_path.as_os_str().to_owned();
    aside.push(format!(".stale-{:016x}", world.entropy.next_u64()));
    let aside = PathBuf::from(aside);
    match world.disk.rename(lock_path, &aside) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(error) => return Err(io_error(error)),
    }
    let moved = match world.disk.read(&aside) {
        Ok(moved) => moved,
        Err(error) => {
            // Whose lock was moved cannot be told: put it back, as a live one is, so
            // that no lock is broken unseen.
            let _ = world.disk.hard_link(&aside, lock_path);
            let _ = world.disk.remove_file(&aside);
            return Err(io_error(error));
        }
    };
    if moved != *seen {
        // The stale lock was replaced by a live one between the read and the rename:
        // put the live one back. If yet another holder appeared meanwhile, the link
        // fails and that holder keeps the lock.
        Probe::LiveLockPutBack.reach(&*world.journal);
        let _ = world.disk.hard_link(&aside, lock_path);
        let _ = world.disk.remove_file(&aside);
        return Ok(true);
    }
    // The lock is broken from the rename on: it is logged even if the file moved
    // aside cannot be removed.
    Probe::StaleLockBroken.reach(&*world.journal);
    world.journal.record(match record {
        Some(record) => RuntimeEvent::StaleLockBroken {
            path: lock_path.to_owned(),
            owner: record.owner.clone(),
            age_ms,
        },
        None => RuntimeEvent::UnreadableLockBroken {
            path: lock_path.to_owned(),
        },
    });
    world.disk.remove_file(&aside).map_err(io_error)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The record is written without serializing it: the text must still be what
        /// serializing gives, escapes in the owner's name included.
        #[test]
        fn record_text_is_the_serialized_record(
            owner in any::<String>(),
            acquired_at_unix_ms in any::<u64>(),
            token in any::<u64>(),
        ) {
            // Written over a buffer that held something else, as a retry does.
            let mut text = b"an earlier attempt's record".to_vec();
            RecordText::new(&owner, token).write_at(acquired_at_unix_ms, &mut text);
            let record = LockOwner { owner, acquired_at_unix_ms, token };
            prop_assert_eq!(text, serde_json::to_vec(&record).unwrap());
        }
    }
}
