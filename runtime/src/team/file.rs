//! The team file, `<root>/teams/<team>/team.json`: who is in a team.
//!
//! It lists the lead and every member (the lead is a member too, the first to join)
//! with their agent id, colour, join time and per-member flags. It is the team's
//! durable state: it is replaced atomically (temp file, fsync, rename, fsync of the
//! directory), so after a crash it holds the state before or after a change, never a
//! mix; and a file that does not parse or breaks the team's invariants is reported
//! with its location and never written over, so no one's membership is lost to a
//! repair nobody asked for.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;

use crate::ipc::{validate_segment, BroadcastError, LockError, MailboxError, NameError};
use crate::route::{RequestId, StructuredError};
use crate::task::TaskId;

/// One member of a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The member's name (a path segment: it names the mailbox).
    pub name: String,
    /// The member's agent id.
    pub agent_id: TaskId,
    /// Its UI colour, from the palette in join order.
    pub color: String,
    /// When it joined, in ms since the Unix epoch (from the injected clock).
    pub joined_at_unix_ms: u64,
    /// Whether its last turn ended with nothing to do.
    #[serde(default)]
    pub is_idle: bool,
    /// Whether it has seen a shutdown request from the lead.
    #[serde(default)]
    pub shutdown_requested: bool,
}

/// The contents of a team file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamFile {
    /// The team's name (its directory name).
    pub name: String,
    /// The lead's name; always one of `members`.
    pub lead: String,
    /// When the team was created, in ms since the Unix epoch.
    pub created_at_unix_ms: u64,
    /// How many members ever joined, the lead included: the next join's palette index.
    pub joins_total: u64,
    /// Every member, in join order.
    pub members: Vec<Member>,
}

impl TeamFile {
    /// The member called `name`, ignoring ASCII case.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|member| member.name.eq_ignore_ascii_case(name))
    }

    /// The member called `name`, ignoring ASCII case, for changes.
    pub fn member_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.members
            .iter_mut()
            .find(|member| member.name.eq_ignore_ascii_case(name))
    }

    /// The lead's entry.
    ///
    /// # Panics
    /// If the lead is not a member, which [`TeamFile::check`] rules out for every file
    /// this runtime loads or writes.
    pub fn lead_member(&self) -> &Member {
        self.member(&self.lead)
            .expect("a checked team file lists its lead as a member")
    }

    /// Whether `name` is the lead's name, ignoring ASCII case.
    pub fn is_lead(&self, name: &str) -> bool {
        self.lead.eq_ignore_ascii_case(name)
    }

    /// Every member's name, in join order.
    pub fn member_names(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.name.clone())
            .collect()
    }

    /// Checks the invariants a parsed file must hold, and says which one fails: the
    /// names are valid segments, unique ignoring case, the lead is a member, agent ids
    /// are unique, and the join counter covers every member.
    pub fn check(&self) -> Result<(), String> {
        validate_segment("team name", &self.name).map_err(|error| error.to_string())?;
        let mut names = std::collections::BTreeSet::new();
        let mut agent_ids = std::collections::BTreeSet::new();
        for member in &self.members {
            validate_segment("member name", &member.name).map_err(|error| error.to_string())?;
            if !names.insert(member.name.to_ascii_lowercase()) {
                return Err(format!("member {:?} is listed twice", member.name));
            }
            if !agent_ids.insert(member.agent_id.clone()) {
                return Err(format!("agent id {} is listed twice", member.agent_id));
            }
        }
        if self.member(&self.lead).is_none() {
            return Err(format!("lead {:?} is not a member", self.lead));
        }
        if self.joins_total < self.members.len() as u64 {
            return Err(format!(
                "joins_total {} is below the {} members listed",
                self.joins_total,
                self.members.len()
            ));
        }
        Ok(())
    }
}

/// Why a team operation failed. When this is returned, the team file was not changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    /// A team or member name that cannot be a path segment.
    #[error(transparent)]
    Name(#[from] NameError),
    /// Creating a team whose file already exists.
    #[error("team file {path} already exists")]
    AlreadyExists {
        /// The team file.
        path: PathBuf,
    },
    /// Loading a team that has no file.
    #[error("team file {path} does not exist")]
    NotFound {
        /// The team file.
        path: PathBuf,
    },
    /// The file is not JSON of a team. It was left untouched.
    #[error("team file {path} is corrupt at line {line}, column {column}: {detail}")]
    Corrupt {
        /// The team file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What the JSON parser said.
        detail: String,
    },
    /// The file parses but breaks an invariant (see [`TeamFile::check`]). It was left
    /// untouched.
    #[error("team file {path} is inconsistent: {reason}")]
    Inconsistent {
        /// The team file.
        path: PathBuf,
        /// The broken invariant.
        reason: String,
    },
    /// Reading or writing the file failed.
    #[error("team file {path}: {source}")]
    Io {
        /// The team file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The team file's lock could not be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A mailbox read or write failed.
    #[error(transparent)]
    Mailbox(#[from] MailboxError),
    /// A broadcast stopped at a member whose mailbox write failed; the members
    /// before it have the message.
    #[error(transparent)]
    Broadcast(#[from] BroadcastError),
    /// Adding a member whose name is taken (ignoring case).
    #[error("team {team} already has a member called {name:?}")]
    DuplicateMember {
        /// The team.
        team: String,
        /// The name.
        name: String,
    },
    /// Adding a member whose agent id is already in the team.
    #[error("team {team} already has agent {agent_id}")]
    DuplicateAgent {
        /// The team.
        team: String,
        /// The agent id.
        agent_id: TaskId,
    },
    /// Naming a member the team does not have.
    #[error("team {team} has no member called {name:?}")]
    UnknownMember {
        /// The team.
        team: String,
        /// The name.
        name: String,
    },
    /// Removing the lead: a team always has one.
    #[error("team {team}: the lead {name:?} cannot be removed")]
    RemoveLead {
        /// The team.
        team: String,
        /// The lead's name.
        name: String,
    },
    /// A structured message that breaks its rules (a rejection without a reason).
    #[error(transparent)]
    Structured(#[from] StructuredError),
    /// Answering a request on behalf of someone it does not name: the request id's
    /// agent is not the member's agent id.
    #[error("request {request_id} was not made by {member:?}")]
    RequestNotFrom {
        /// The request.
        request_id: RequestId,
        /// The member named as its maker.
        member: String,
    },
    /// No answer to a permission request arrived in time.
    #[error("no answer to permission request {request_id} after {waited_ms} ms")]
    PermissionTimeout {
        /// The request.
        request_id: RequestId,
        /// How long the member waited.
        waited_ms: u64,
    },
}
