//! Request ids: `<type>-<millis>@<agentId>`, which tie a structured response to the
//! request it answers.
//!
//! The millis come from the injected clock, never the wall clock, so a simulated run
//! mints the same ids from the same seed. The agent id names whoever *asked*: a
//! response is matched to its request by the whole id, and the asker can check that a
//! response names it. Two requests of one kind from one agent in the same millisecond
//! get the same id; every flow here has at most one request of a kind outstanding per
//! agent, so that is not a collision that matters.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::task::{TaskId, TaskIdError};
use crate::world::Clock;

/// What a request asks for: the `<type>` part of its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    /// A cooperative shutdown (`shutdown`).
    Shutdown,
    /// Approval of a plan (`plan_approval`).
    PlanApproval,
    /// Permission to use a tool (`permission`).
    Permission,
}

impl RequestKind {
    /// Every kind.
    pub const ALL: [RequestKind; 3] = [
        RequestKind::Shutdown,
        RequestKind::PlanApproval,
        RequestKind::Permission,
    ];

    /// The `<type>` text in an id.
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestKind::Shutdown => "shutdown",
            RequestKind::PlanApproval => "plan_approval",
            RequestKind::Permission => "permission",
        }
    }

    /// The kind whose `<type>` text is `text` (exact, lower case).
    pub fn parse(text: &str) -> Option<RequestKind> {
        RequestKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a string is not a request id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestIdError {
    /// No `@` separating the agent id.
    #[error("request id {id:?} has no '@<agentId>'")]
    MissingAgent {
        /// The offending text.
        id: String,
    },
    /// No `-` separating `<type>` from the millis.
    #[error("request id {id:?} is not '<type>-<millis>@<agentId>'")]
    MissingMillis {
        /// The offending text.
        id: String,
    },
    /// `<type>` is not a known request kind.
    #[error("request id {id:?} has unknown type {kind:?}; expected shutdown, plan_approval or permission")]
    UnknownKind {
        /// The offending text.
        id: String,
        /// The `<type>` part.
        kind: String,
    },
    /// The millis are not a decimal number without leading zeros.
    #[error("request id {id:?} has millis {millis:?}, which is not a canonical decimal number")]
    BadMillis {
        /// The offending text.
        id: String,
        /// The millis part.
        millis: String,
    },
    /// The agent part is not a task id.
    #[error("request id {id:?}: {source}")]
    BadAgent {
        /// The offending text.
        id: String,
        /// Why the agent part is not a task id.
        source: TaskIdError,
    },
}

/// A validated request id, `<type>-<millis>@<agentId>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RequestId {
    kind: RequestKind,
    unix_ms: u64,
    agent: TaskId,
}

impl RequestId {
    /// A new id for a request of `kind` made by `agent`, stamped with `clock.unix_ms()`.
    pub fn generate(kind: RequestKind, agent: &TaskId, clock: &dyn Clock) -> RequestId {
        RequestId::from_parts(kind, clock.unix_ms(), agent.clone())
    }

    /// The id with exactly these parts.
    pub fn from_parts(kind: RequestKind, unix_ms: u64, agent: TaskId) -> RequestId {
        RequestId {
            kind,
            unix_ms,
            agent,
        }
    }

    /// Parses and validates `text`.
    pub fn parse(text: &str) -> Result<RequestId, RequestIdError> {
        // The agent id never holds '@' or '-' after its label, the type never holds
        // '-', and the millis are digits: splitting at the last '@', then the last '-'
        // before it, is unambiguous.
        let (head, agent) = text
            .rsplit_once('@')
            .ok_or_else(|| RequestIdError::MissingAgent {
                id: text.to_owned(),
            })?;
        let (kind, millis) =
            head.rsplit_once('-')
                .ok_or_else(|| RequestIdError::MissingMillis {
                    id: text.to_owned(),
                })?;
        let kind = RequestKind::parse(kind).ok_or_else(|| RequestIdError::UnknownKind {
            id: text.to_owned(),
            kind: kind.to_owned(),
        })?;
        // Leading zeros are refused so that parsing then printing gives back the same
        // bytes: ids are compared as text by other implementations.
        let canonical_digits = !millis.is_empty()
            && millis.bytes().all(|byte| byte.is_ascii_digit())
            && (millis == "0" || !millis.starts_with('0'));
        let unix_ms = millis
            .parse::<u64>()
            .ok()
            .filter(|_| canonical_digits)
            .ok_or_else(|| RequestIdError::BadMillis {
                id: text.to_owned(),
                millis: millis.to_owned(),
            })?;
        let agent = TaskId::parse(agent).map_err(|source| RequestIdError::BadAgent {
            id: text.to_owned(),
            source,
        })?;
        Ok(RequestId {
            kind,
            unix_ms,
            agent,
        })
    }

    /// What the request asks for.
    pub fn kind(&self) -> RequestKind {
        self.kind
    }

    /// When it was made, in ms since the Unix epoch (from the injected clock).
    pub fn unix_ms(&self) -> u64 {
        self.unix_ms
    }

    /// The agent that made the request.
    pub fn agent(&self) -> &TaskId {
        &self.agent
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}@{}", self.kind, self.unix_ms, self.agent)
    }
}

impl TryFrom<String> for RequestId {
    type Error = RequestIdError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        RequestId::parse(&text)
    }
}

impl From<RequestId> for String {
    fn from(id: RequestId) -> String {
        id.to_string()
    }
}

impl std::str::FromStr for RequestId {
    type Err = RequestIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        RequestId::parse(text)
    }
}
