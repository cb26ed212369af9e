//! The scratchpad: `scratch/<key>`, shared by all workers, with no lock by design.
//!
//! Keys are relative paths of safe segments; by convention a worker writes under its
//! own id (`<agentId>/<key>`, see [`ScratchKey::for_agent`]). Because nothing locks a
//! key, two workers can overwrite each other. The scratchpad does not prevent that;
//! it makes it visible: it remembers which version of each key every writer last saw,
//! and a write over a version the writer never saw is reported as
//! [`WriteOutcome::Overwrote`] and journaled as [`RuntimeEvent::ScratchOverwritten`].

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

use super::name::{validate_segment, NameError};
use crate::digest::Fnv1a64;
use crate::event::RuntimeEvent;
use crate::world::World;

/// Most segments a key may have.
const KEY_SEGMENTS_MAX: usize = 8;

/// A validated scratchpad key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScratchKey(String);

/// Why a string is not a scratch key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScratchKeyError {
    /// The key starts with `/`.
    #[error("scratch key {0:?} is absolute")]
    Absolute(String),
    /// The key has an empty segment (`a//b`, a trailing `/`, or is empty).
    #[error("scratch key {0:?} has an empty segment")]
    EmptySegment(String),
    /// The key has more than 8 segments.
    #[error("scratch key {0:?} has more than {KEY_SEGMENTS_MAX} segments")]
    TooDeep(String),
    /// A segment is `.`, `..`, too long, or has a forbidden character.
    #[error("scratch key {key:?}: {source}")]
    BadSegment {
        /// The key.
        key: String,
        /// What is wrong with the segment.
        source: NameError,
    },
}

impl ScratchKey {
    /// Validates `key`: `/`-separated segments of `[A-Za-z0-9._-]`, none empty, none
    /// `.` or `..`, not absolute, at most 8 deep.
    pub fn parse(key: &str) -> Result<ScratchKey, ScratchKeyError> {
        if key.starts_with('/') {
            return Err(ScratchKeyError::Absolute(key.to_owned()));
        }
        let segments: Vec<&str> = key.split('/').collect();
        if segments.iter().any(|segment| segment.is_empty()) {
            return Err(ScratchKeyError::EmptySegment(key.to_owned()));
        }
        if segments.len() > KEY_SEGMENTS_MAX {
            return Err(ScratchKeyError::TooDeep(key.to_owned()));
        }
        for segment in segments {
            validate_segment("scratch key segment", segment).map_err(|source| {
                ScratchKeyError::BadSegment {
                    key: key.to_owned(),
                    source,
                }
            })?;
        }
        Ok(ScratchKey(key.to_owned()))
    }

    /// The conventional key `<agent_id>/<key>`.
    pub fn for_agent(agent_id: &str, key: &str) -> Result<ScratchKey, ScratchKeyError> {
        ScratchKey::parse(&format!("{agent_id}/{key}"))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ScratchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a [`Scratchpad::write`] replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The key was absent, or held the version this writer last saw.
    Fresh,
    /// The key held a version this writer never saw: someone's update was lost.
    Overwrote {
        /// Who wrote the lost version (`unknown` if not written through this scratchpad).
        previous_writer: String,
    },
}

/// Why a scratchpad operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScratchError {
    /// Reading or writing the key failed.
    #[error("scratch key {key}: {source}")]
    Io {
        /// The key.
        key: ScratchKey,
        /// The underlying error.
        source: io::Error,
    },
}

/// A content fingerprint: FNV-1a over the bytes, with the length. Deterministic and
/// cheap; a collision would only hide one overwrite report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    len_bytes: usize,
    hash: u64,
}

impl Version {
    fn of(bytes: &[u8]) -> Version {
        Version {
            len_bytes: bytes.len(),
            hash: Fnv1a64::digest(bytes),
        }
    }
}

#[derive(Debug, Default)]
struct Versions {
    /// (writer, key) → the version of the key that writer last read or wrote
    /// (`None`: it saw the key absent).
    seen: BTreeMap<(String, ScratchKey), Option<Version>>,
    /// key → who last wrote it through this scratchpad, and the version they wrote.
    /// The writer is the current version's only if the file still holds that version:
    /// another process may have written it since.
    writer_of: BTreeMap<ScratchKey, (String, Version)>,
}

/// The scratchpad of one session.
#[derive(Debug)]
pub struct Scratchpad {
    world: World,
    root: PathBuf,
    versions: Mutex<Versions>,
}

impl Scratchpad {
    /// A scratchpad rooted at `root` (usually [`SessionLayout::scratch_dir`]).
    ///
    /// [`SessionLayout::scratch_dir`]: super::SessionLayout::scratch_dir
    pub fn new(world: &World, root: impl Into<PathBuf>) -> Self {
        Self {
            world: world.clone(),
            root: root.into(),
            versions: Mutex::new(Versions::default()),
        }
    }

    /// The file behind `key`.
    pub fn path_of(&self, key: &ScratchKey) -> PathBuf {
        self.root.join(key.as_str())
    }

    /// Reads `key` as `reader`, who from now on has seen this version.
    /// `Ok(None)` if the key is absent.
    pub fn read(&self, reader: &str, key: &ScratchKey) -> Result<Option<Vec<u8>>, ScratchError> {
        let current = self.load(key)?;
        let version = current.as_deref().map(Version::of);
        self.versions
            .lock()
            .expect("scratch versions poisoned")
            .seen
            .insert((reader.to_owned(), key.clone()), version);
        Ok(current)
    }

    /// Writes `value` to `key` as `writer`. The write always happens; the outcome says
    /// whether it overwrote a version `writer` had not seen.
    pub fn write(
        &self,
        writer: &str,
        key: &ScratchKey,
        value: &[u8],
    ) -> Result<WriteOutcome, ScratchError> {
        let current = self.load(key)?.as_deref().map(Version::of);
        let path = self.path_of(key);
        let io_error = |source| ScratchError::Io {
            key: key.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            self.world.disk.create_dir_all(dir).map_err(io_error)?;
        }
        self.world
            .disk
            .replace_atomic(&path, value)
            .map_err(io_error)?;

        let mut versions = self.versions.lock().expect("scratch versions poisoned");
        let seen_key = (writer.to_owned(), key.clone());
        let seen = versions.seen.get(&seen_key).copied();
        let last_write = versions
            .writer_of
            .insert(key.clone(), (writer.to_owned(), Version::of(value)));
        versions.seen.insert(seen_key, Some(Version::of(value)));
        let lost_update = match (current, seen) {
            (None, _) => false,
            (Some(current), Some(seen)) => seen != Some(current),
            (Some(_), None) => true,
        };
        if !lost_update {
            return Ok(WriteOutcome::Fresh);
        }
        // Name the lost version's writer only if this scratchpad wrote that very
        // version; otherwise someone outside it did (possibly over this writer's own
        // earlier value, which is still a lost update).
        let previous_writer = match last_write {
            Some((last_writer, version)) if Some(version) == current => last_writer,
            _ => "unknown".to_owned(),
        };
        self.world.journal.record(RuntimeEvent::ScratchOverwritten {
            key: key.to_string(),
            writer: writer.to_owned(),
            previous_writer: previous_writer.clone(),
        });
        Ok(WriteOutcome::Overwrote { previous_writer })
    }

    fn load(&self, key: &ScratchKey) -> Result<Option<Vec<u8>>, ScratchError> {
        match self.world.disk.read(&self.path_of(key)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ScratchError::Io {
                key: key.clone(),
                source,
            }),
        }
    }
}
