//! Task ids: a kind prefix and random characters.
//!
//! Canonical ids, the ones this runtime generates, are the prefix and 8 characters
//! from `0-9a-z` (36^8 ≈ 2.8e12 ids per kind). Parsing also accepts the forms real
//! Claude Code sessions contain, so that recorded envelopes and transcripts can be
//! read: agent ids `a[label-]<hex>` (16 hex digits in current releases, 6 or 7 in the
//! 2.1.3x transcripts under `fixtures/`), and 7-character ids such as `b0be39e`.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::TaskKind;
use crate::world::Entropy;

/// Characters of a canonical id body.
const ID_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// Length of a canonical id body.
pub const ID_BODY_LEN: usize = 8;
/// Shortest body accepted when parsing ids that other runtimes made.
const ID_BODY_LEN_MIN: usize = 6;
/// Longest body accepted when parsing (the 16-hex agent form).
const ID_BODY_LEN_MAX: usize = 16;
/// Longest `label-` accepted in an agent id.
const LABEL_LEN_MAX: usize = 32;

/// A validated task id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

/// Why a string is not a task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskIdError {
    /// The string is empty.
    #[error("task id is empty")]
    Empty,
    /// The first character is not one of `a b d m r t w`.
    #[error("task id {id:?} starts with {prefix:?}, which is no task type's prefix")]
    UnknownPrefix {
        /// The offending id.
        id: String,
        /// Its first character.
        prefix: char,
    },
    /// The characters after the prefix do not form an id body.
    #[error(
        "task id {id:?} needs {ID_BODY_LEN_MIN} to {ID_BODY_LEN_MAX} characters from 0-9a-z \
         after its prefix (agent ids may have a `label-` first)"
    )]
    BadBody {
        /// The offending id.
        id: String,
    },
}

impl TaskId {
    /// Draws a fresh canonical id of `kind` from `entropy`. Uniqueness is the
    /// registry's job: see [`TaskRegistry::allocate_id`](super::TaskRegistry::allocate_id).
    pub fn generate(kind: TaskKind, entropy: &dyn Entropy) -> TaskId {
        let mut id = String::with_capacity(1 + ID_BODY_LEN);
        id.push(kind.id_prefix());
        for _ in 0..ID_BODY_LEN {
            let index = entropy.below(ID_ALPHABET.len() as u64) as usize;
            id.push(char::from(ID_ALPHABET[index]));
        }
        TaskId(id)
    }

    /// Parses and validates an id in any accepted form.
    pub fn parse(text: &str) -> Result<TaskId, TaskIdError> {
        let mut chars = text.chars();
        let prefix = chars.next().ok_or(TaskIdError::Empty)?;
        let kind = TaskKind::from_id_prefix(prefix).ok_or_else(|| TaskIdError::UnknownPrefix {
            id: text.to_owned(),
            prefix,
        })?;
        let rest = chars.as_str();
        let body = match (kind, rest.split_once('-')) {
            (TaskKind::LocalAgent, Some((label, body))) if is_label(label) => body,
            _ => rest,
        };
        let body_ok = (ID_BODY_LEN_MIN..=ID_BODY_LEN_MAX).contains(&body.len())
            && body.bytes().all(|byte| ID_ALPHABET.contains(&byte));
        if !body_ok {
            return Err(TaskIdError::BadBody {
                id: text.to_owned(),
            });
        }
        Ok(TaskId(text.to_owned()))
    }

    /// The task kind the prefix names.
    pub fn kind(&self) -> TaskKind {
        let prefix = self.0.chars().next().expect("a TaskId is never empty");
        TaskKind::from_id_prefix(prefix).expect("a TaskId's prefix was validated")
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_label(label: &str) -> bool {
    (1..=LABEL_LEN_MAX).contains(&label.len())
        && label
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TaskId {
    type Error = TaskIdError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        TaskId::parse(&text)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

impl std::str::FromStr for TaskId {
    type Err = TaskIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TaskId::parse(text)
    }
}
