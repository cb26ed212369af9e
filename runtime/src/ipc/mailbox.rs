//! Mailboxes: `teams/<team>/inboxes/<agent>.json`, a JSON array of messages.
//!
//! Every write takes the inbox's lock file (see [`lock`](super::lock)), reads the array,
//! appends, and writes it back. How it writes back is the [`WriteMode`]:
//!
//! - [`WriteMode::Atomic`] (profiles `nexo`, `hardened`; the default): temp file,
//!   fsync, rename, fsync of the directory. Reads also take the lock. A crash at any
//!   point leaves the old or the new array, so an acknowledged write is never lost.
//! - [`WriteMode::LegacyInPlace`] (what Claude Code does): truncate and rewrite in
//!   place, no fsync, reads without the lock. A crash mid-write loses every message in
//!   the inbox. It is kept so that fault experiments can show that loss.
//!
//! An inbox that does not parse is reported as [`MailboxError::Corrupt`] with the
//! position of the problem and is never written over: the bytes stay for a human.
//!
//! A [`Mailbox`] and its clones remember the inbox as they last read or wrote it,
//! bytes and messages. When the file still holds exactly those bytes, the messages
//! are not parsed again, and an append writes the old bytes with the new message
//! spliced in before the closing bracket (byte for byte what serializing the whole
//! array gives) instead of serializing every message again. Many producers sharing
//! one `Mailbox` then append in time linear in the file, not in its messages. The
//! file is always read and compared first, so a change made by anyone else is seen.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use super::lock::{lock_path_for, LockError, LockGuard, LockPolicy};
use crate::event::RuntimeEvent;
use crate::world::{Reread, World};

/// One message in an inbox, in Claude Code's JSON shape. Fields this runtime does not
/// know are kept in `extra` and written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailboxMessage {
    /// The sender's name.
    pub from: String,
    /// The message text (plain text, or a structured message as JSON).
    pub text: String,
    /// When it was sent, RFC 3339 with milliseconds.
    pub timestamp: String,
    /// Whether the recipient has read it.
    #[serde(default)]
    pub read: bool,
    /// The sender's UI colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// A one-line preview.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Fields written by other implementations, preserved verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl MailboxMessage {
    /// A new unread message from `from`, stamped with the world's clock.
    pub fn new(world: &World, from: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            from: from.into(),
            text: text.into(),
            timestamp: rfc3339_ms(world.clock.unix_ms()),
            read: false,
            color: None,
            summary: None,
            extra: BTreeMap::new(),
        }
    }
}

/// `unix_ms` as an RFC 3339 UTC timestamp with milliseconds.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    thread_local! {
        /// The last timestamp this thread wrote: the messages of a burst (a
        /// broadcast, many producers at once) share their millisecond, and copying
        /// its text costs a tenth of working out the date again.
        static LAST_WRITTEN: RefCell<Option<(u64, String)>> = const { RefCell::new(None) };
    }
    LAST_WRITTEN.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((last_ms, text)) if *last_ms == unix_ms => text.clone(),
            _ => {
                let time = UNIX_EPOCH + Duration::from_millis(unix_ms);
                let text = humantime::format_rfc3339_millis(time).to_string();
                *last = Some((unix_ms, text.clone()));
                text
            }
        }
    })
}

/// How writes reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Temp file, fsync, rename, fsync dir; reads under the lock.
    #[default]
    Atomic,
    /// Truncate and rewrite in place, unsynced; reads without the lock.
    LegacyInPlace,
}

/// Mailbox settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MailboxConfig {
    /// How writes reach the disk.
    pub write_mode: WriteMode,
    /// Lock retries and staleness.
    pub lock: LockPolicy,
}

impl MailboxConfig {
    /// The default config with `write_mode`.
    pub fn with_write_mode(write_mode: WriteMode) -> Self {
        Self {
            write_mode,
            ..Self::default()
        }
    }
}

/// Why a mailbox operation failed. Nothing was written when this is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MailboxError {
    /// The lock could not be taken within the retry budget.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The inbox is not a JSON array of messages. It was left untouched.
    #[error("inbox {path} is corrupt at line {line}, column {column}: {detail}")]
    Corrupt {
        /// The inbox file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What the JSON parser said.
        detail: String,
    },
    /// Reading or writing the inbox failed.
    #[error("inbox {path}: {source}")]
    Io {
        /// The inbox file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Parses the bytes of the inbox at `path`: a JSON array of messages. Anything else is
/// [`MailboxError::Corrupt`] with the line and column of the problem; the caller then
/// leaves the file as it is.
pub fn parse_inbox(path: &Path, bytes: &[u8]) -> Result<Vec<MailboxMessage>, MailboxError> {
    serde_json::from_slice(bytes).map_err(|error| {
        // The position is in its own fields; serde_json's message repeats it.
        let suffix = format!(" at line {} column {}", error.line(), error.column());
        let detail = error.to_string();
        let detail = detail.strip_suffix(&suffix).unwrap_or(&detail).to_owned();
        MailboxError::Corrupt {
            path: path.to_owned(),
            line: error.line().max(1),
            // serde_json says column 0 for an error found before the line's first
            // character was consumed (`{` where an array was expected); the field is
            // 1-based, and that character is column 1.
            column: error.column().max(1),
            detail,
        }
    })
}

/// One agent's inbox. Clones share what the inbox was last seen to hold.
#[derive(Debug, Clone)]
pub struct Mailbox {
    world: World,
    path: PathBuf,
    /// The inbox's directory, created before the first lock, and again whenever
    /// taking the lock finds it gone; found once, since splitting a path costs more
    /// than checking the directory.
    dir: Option<PathBuf>,
    /// Whether `dir` was created or found by this mailbox or a clone of it.
    dir_made: Arc<AtomicBool>,
    lock_path: PathBuf,
    config: MailboxConfig,
    last_seen: Arc<Mutex<Option<Snapshot>>>,
}

/// An inbox's bytes and the messages they parse to.
#[derive(Debug)]
struct Snapshot {
    /// Shared with the disk when this mailbox wrote them, which then tells a reread
    /// of them without comparing.
    bytes: Bytes,
    messages: Vec<MailboxMessage>,
    /// Whether `bytes` are exactly the messages pretty-printed, as this runtime
    /// writes them (another writer may format them differently).
    canonical: bool,
}

/// What [`Mailbox::load`] found.
struct Loaded {
    /// The file's bytes (empty when it does not exist).
    bytes: Bytes,
    messages: Vec<MailboxMessage>,
    /// See [`Snapshot::canonical`]; false whenever the bytes had to be parsed.
    canonical: bool,
}

impl Mailbox {
    /// The inbox file at `path`.
    pub fn new(world: &World, path: impl Into<PathBuf>, config: MailboxConfig) -> Self {
        let path = path.into();
        Self {
            world: world.clone(),
            lock_path: lock_path_for(&path),
            dir: path.parent().map(Path::to_path_buf),
            dir_made: Arc::new(AtomicBool::new(false)),
            path,
            config,
            last_seen: Arc::new(Mutex::new(None)),
        }
    }

    /// The inbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `message` and returns how many messages the inbox holds afterwards.
    /// `Ok` means the write is acknowledged: in atomic mode it is durable.
    pub async fn append(&self, message: MailboxMessage) -> Result<usize, MailboxError> {
        let from = message.from.clone();
        let appended = self.append_locked(&from, message).await;
        match &appended {
            Ok(messages_count) => self.world.journal.record(RuntimeEvent::MailboxWritten {
                path: self.path.clone(),
                from,
                messages_count: *messages_count,
            }),
            Err(error) => self.world.journal.record(RuntimeEvent::MailboxWriteFailed {
                path: self.path.clone(),
                from,
                reason: error.to_string(),
            }),
        }
        appended
    }

    /// Every message, oldest first. Takes the lock in atomic mode.
    pub async fn read_all(&self) -> Result<Vec<MailboxMessage>, MailboxError> {
        match self.config.write_mode {
            WriteMode::Atomic => {
                let guard = self.lock("reader").await?;
                let loaded = self.load();
                guard.release()?;
                Ok(self.remember(loaded?))
            }
            WriteMode::LegacyInPlace => Ok(self.remember(self.load()?)),
        }
    }

    /// Unread messages with their indices in the inbox.
    pub async fn read_unread(&self) -> Result<Vec<(usize, MailboxMessage)>, MailboxError> {
        Ok(self
            .read_all()
            .await?
            .into_iter()
            .enumerate()
            .filter(|(_, message)| !message.read)
            .collect())
    }

    /// Marks read every message for which `predicate(index, message)` holds, as
    /// `reader`. Returns how many changed from unread to read.
    pub async fn mark_read_where(
        &self,
        reader: &str,
        predicate: impl Fn(usize, &MailboxMessage) -> bool,
    ) -> Result<usize, MailboxError> {
        self.update(reader, |messages| {
            let mut changed = 0;
            for (index, message) in messages.iter_mut().enumerate() {
                if !message.read && predicate(index, message) {
                    message.read = true;
                    changed += 1;
                }
            }
            changed
        })
        .await
    }

    /// Marks read the messages at `indices`, as `reader`. Indices past the end are
    /// ignored. Returns how many changed.
    pub async fn mark_read_indices(
        &self,
        reader: &str,
        indices: &[usize],
    ) -> Result<usize, MailboxError> {
        self.mark_read_where(reader, |index, _| indices.contains(&index))
            .await
    }

    async fn lock(&self, owner: &str) -> Result<LockGuard, MailboxError> {
        if !self.dir_made.load(Ordering::Relaxed) {
            self.make_dir()?;
        }
        match LockGuard::acquire(&self.world, &self.lock_path, owner, &self.config.lock).await {
            // Removed since it was made: made again, and the lock taken afresh. The
            // failed attempt was the first, so the retry budget is whole.
            Err(LockError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.make_dir()?;
                Ok(
                    LockGuard::acquire(&self.world, &self.lock_path, owner, &self.config.lock)
                        .await?,
                )
            }
            locked => Ok(locked?),
        }
    }

    /// Creates the inbox's directory if it is missing. Checking it before every lock
    /// would cost each write a directory walk for a directory that almost never goes.
    fn make_dir(&self) -> Result<(), MailboxError> {
        if let Some(dir) = &self.dir {
            self.world
                .disk
                .create_dir_all(dir)
                .map_err(|source| self.io_error(source))?;
        }
        self.dir_made.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Read-modify-write under the lock. Nothing is written if the inbox is corrupt.
    async fn update<T>(
        &self,
        owner: &str,
        change: impl FnOnce(&mut Vec<MailboxMessage>) -> T,
    ) -> Result<T, MailboxError> {
        let guard = self.lock(owner).await?;
        let Loaded { mut messages, .. } = self.load()?;
        let outcome = change(&mut messages);
        let bytes =
            Bytes::from(serde_json::to_vec_pretty(&messages).expect("mailbox messages serialize"));
        self.write(&bytes)?;
        guard.release()?;
        self.keep(bytes, messages, true);
        Ok(outcome)
    }

    /// [`update`](Self::update) pushing `message`, without serializing the messages
    /// already there when the inbox is a non-empty array this mailbox wrote or read.
    async fn append_locked(
        &self,
        owner: &str,
        message: MailboxMessage,
    ) -> Result<usize, MailboxError> {
        let guard = self.lock(owner).await?;
        let Loaded {
            bytes: old,
            mut messages,
            canonical,
        } = self.load()?;
        let bytes = match old.strip_suffix(b"\n]").map(<[u8]>::len) {
            Some(head_len) if canonical && !messages.is_empty() => {
                // `[message]` pretty-printed is `[\n  {..}\n]`: its element sits at
                // the indentation the whole array gives it.
                let alone = serde_json::to_vec_pretty(std::slice::from_ref(&message))
                    .expect("a mailbox message serializes");
                let element = &alone[2..alone.len() - 2];
                // A new buffer: the disk may hold the old one.
                let mut bytes = Vec::with_capacity(head_len + element.len() + 4);
                bytes.extend_from_slice(&old[..head_len]);
                bytes.extend_from_slice(b",\n");
                bytes.extend_from_slice(element);
                bytes.extend_from_slice(b"\n]");
                messages.push(message);
                Bytes::from(bytes)
            }
            _ => {
                messages.push(message);
                Bytes::from(
                    serde_json::to_vec_pretty(&messages).expect("mailbox messages serialize"),
                )
            }
        };
        // Debug builds only: checking costs the full serialization the splice saves.
        debug_assert_eq!(
            bytes,
            serde_json::to_vec_pretty(&messages).expect("mailbox messages serialize"),
            "a spliced append writes what serializing the whole inbox writes"
        );
        self.write(&bytes)?;
        guard.release()?;
        let messages_count = messages.len();
        self.keep(bytes, messages, true);
        Ok(messages_count)
    }

    fn write(&self, bytes: &Bytes) -> Result<(), MailboxError> {
        let written = match self.config.write_mode {
            WriteMode::Atomic => self
                .world
                .disk
                .replace_atomic_shared(&self.path, bytes.clone()),
            WriteMode::LegacyInPlace => self.world.disk.overwrite_in_place(&self.path, bytes),
        };
        written.map_err(|source| self.io_error(source))
    }

    /// Remembers that the inbox holds `bytes`, which parse to `messages`.
    fn keep(&self, bytes: Bytes, messages: Vec<MailboxMessage>, canonical: bool) {
        *self.last_seen.lock().expect("mailbox snapshot poisoned") = Some(Snapshot {
            bytes,
            messages,
            canonical,
        });
    }

    /// Remembers `loaded` and returns its messages.
    fn remember(&self, loaded: Loaded) -> Vec<MailboxMessage> {
        self.keep(loaded.bytes, loaded.messages.clone(), loaded.canonical);
        loaded.messages
    }

    /// Reads the inbox. The messages are parsed only if the bytes differ from the
    /// ones last seen; those are taken out of the snapshot, and the caller keeps
    /// what it writes or reads.
    fn load(&self) -> Result<Loaded, MailboxError> {
        let last_seen = self
            .last_seen
            .lock()
            .expect("mailbox snapshot poisoned")
            .take();
        let read = match last_seen {
            Some(snapshot) => match self.world.disk.reread(&self.path, &snapshot.bytes) {
                Ok(Reread::Unchanged) => {
                    return Ok(Loaded {
                        bytes: snapshot.bytes,
                        messages: snapshot.messages,
                        canonical: snapshot.canonical,
                    })
                }
                Ok(Reread::Changed(bytes)) => Ok(Bytes::from(bytes)),
                Err(error) => Err(error),
            },
            None => self.world.disk.read(&self.path).map(Bytes::from),
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(Loaded {
                    bytes: Bytes::new(),
                    messages: Vec::new(),
                    canonical: false,
                })
            }
            Err(error) => return Err(self.io_error(error)),
        };
        // A legacy in-place writer truncates before it writes, so an unlocked reader
        // can see an empty file mid-write: that is an empty inbox, not corruption.
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Loaded {
                bytes,
                messages: Vec::new(),
                canonical: false,
            });
        }
        let messages = parse_inbox(&self.path, &bytes)?;
        Ok(Loaded {
            bytes,
            messages,
            canonical: false,
        })
    }

    fn io_error(&self, source: io::Error) -> MailboxError {
        MailboxError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

/// Sends `text` from `from` to every member of a team except the sender, matching
/// the sender's name case-insensitively. `inbox_of` maps a member to its mailbox.
/// Returns the members written to, in the order given. Stops at the first failure,
/// which names the member it failed for.
pub async fn broadcast(
    world: &World,
    from: &str,
    text: &str,
    members: &[String],
    inbox_of: impl Fn(&str) -> Mailbox,
) -> Result<Vec<String>, BroadcastError> {
    let mut delivered = Vec::new();
    for member in members {
        if member.eq_ignore_ascii_case(from) {
            continue;
        }
        let message = MailboxMessage::new(world, from, text);
        inbox_of(member)
            .append(message)
            .await
            .map_err(|source| BroadcastError {
                member: member.clone(),
                delivered: delivered.clone(),
                source,
            })?;
        delivered.push(member.clone());
    }
    Ok(delivered)
}

/// A broadcast that failed part-way.
#[derive(Debug, thiserror::Error)]
#[error("broadcast to {member} failed after {} deliveries: {source}", delivered.len())]
pub struct BroadcastError {
    /// The member whose write failed.
    pub member: String,
    /// Members that did get the message.
    pub delivered: Vec<String>,
    /// Why it failed.
    pub source: MailboxError,
}

#[cfg(test)]
mod tests {
    use super::{parse_inbox, rfc3339_ms};
    use proptest::prelude::*;
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    /// The last millisecond of year 9999, the last RFC 3339 writes.
    const YEAR_9999_END_MS: u64 = 253_402_300_799_999;

    proptest! {
        /// A run of timestamps with repeats, as a burst writes them, each as humantime
        /// writes it alone: the remembered text is never another millisecond's.
        #[test]
        fn a_timestamp_is_written_as_humantime_writes_it(
            steps in prop::collection::vec((0u64..3, 0u64..YEAR_9999_END_MS), 1..24),
        ) {
            for (repeat, unix_ms) in steps {
                for _ in 0..=repeat {
                    let expected = humantime::format_rfc3339_millis(
                        UNIX_EPOCH + Duration::from_millis(unix_ms),
                    )
                    .to_string();
                    prop_assert_eq!(rfc3339_ms(unix_ms), expected);
                }
            }
        }
    }

    #[test]
    fn a_corrupt_inbox_names_its_position_once_and_a_valid_one_keeps_unknown_fields() {
        // Goal: Corrupt says where, once (the message repeated serde_json's position), and
        // parsing loses nothing of a valid inbox. Method: parse_inbox on both.
        let path = Path::new("teams/t/inboxes/bob.json");
        let error = parse_inbox(path, b"[{\"from\": \"a\", \"text\": 7}]").unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("inbox teams/t/inboxes/bob.json is corrupt at line 1, column 24: "),
            "{message}"
        );
        assert_eq!(message.matches("line 1").count(), 1, "{message}");

        let valid = br#"[{"from":"a","text":"t","timestamp":"x","read":true,"v2":{"k":[1]}}]"#;
        let messages = parse_inbox(path, valid).unwrap();
        assert_eq!(messages[0].extra["v2"], serde_json::json!({"k": [1]}));
        assert_eq!(
            serde_json::to_value(&messages).unwrap(),
            serde_json::from_slice::<serde_json::Value>(valid).unwrap()
        );
    }

    #[test]
    fn regression_a_number_in_an_unknown_field_survives_a_rewrite() {
        // Goal: the parser fuzz target found that 118446744073709551615 in an unknown
        // field read back as another f64 once the inbox was rewritten; a rewrite must
        // not move it. Method: parse, serialize, parse again.
        let path = Path::new("teams/t/inboxes/bob.json");
        let text = br#"[{"from":"a","text":"t","timestamp":"x","n":118446744073709551615}]"#;
        let first = parse_inbox(path, text).unwrap();
        let again = parse_inbox(path, &serde_json::to_vec_pretty(&first).unwrap()).unwrap();
        assert_eq!(again, first);
    }
}
