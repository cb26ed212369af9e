//! SendMessage: parsing its input, validating it, and resolving `to` into a [`Route`].
//!
//! Three pure steps, so the session layer can act on a typed result and tests can
//! check every rule without a session:
//!
//! 1. [`SendMessageInput::from_json`] parses strictly: unknown fields are refused,
//!    `message` is a string or a structured object.
//! 2. [`validate`] checks the input on its own and parses `to` into an [`Address`].
//!    Rules, in order: `to` not blank; no `@` in `to`; `*` is a broadcast; `uds:`
//!    needs a socket; `bridge:` needs a session and then the caller's explicit
//!    consent (it reaches another machine); an id-shaped `to` is an agent id; any
//!    other `to` must be a valid name; a plain-text message needs a non-blank
//!    summary; a structured message must be valid on its own and is never broadcast.
//! 3. [`resolve`] maps the address to a [`Route`] with the name registry, the team
//!    and the profile, and applies the lead-only rules of structured messages.
//!
//! Resolution order for a name or id: the name registry first (so a name that looks
//! like an id still reaches the agent that chose it), then the team's members (a
//! member with no live task gets mail), then an id that the session knows as a task or
//! that a registered agent has. Anything else is unresolved: `hardened` refuses it;
//! the other profiles write it to a mailbox of that name in the sender's team, as
//! Claude Code does, and refuse only without a team.
//!
//! The lead-only rules of structured messages are checked in two halves: the
//! sender's side (a plan approval comes from the lead; lead rules need a team) before
//! resolution, the recipient's side (a shutdown response goes to the lead) after.
//!
//! What to do with an [`Route::Agent`] (queue while running, resume when stopped or
//! evicted) is the session's decision: it knows the task's status.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use super::names::NameRegistry;
use super::structured::{StructuredError, StructuredKind, StructuredMessage};
use crate::ipc::{validate_segment, NameError};
use crate::profile::Profile;
use crate::task::TaskId;

/// The `to` of a broadcast.
pub const BROADCAST_ADDRESS: &str = "*";
/// The prefix of a Unix-domain-socket address.
pub const UDS_PREFIX: &str = "uds:";
/// The prefix of a remote-session address.
pub const BRIDGE_PREFIX: &str = "bridge:";

/// A SendMessage call's input: `{to, summary?, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendMessageInput {
    /// The recipient: a name, an agent id, `*`, `uds:<socket>` or `bridge:<session>`.
    pub to: String,
    /// A one-line preview; required for plain-text messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The message.
    pub message: MessageBody,
}

impl SendMessageInput {
    /// Parses a tool call's input strictly.
    pub fn from_json(value: serde_json::Value) -> Result<SendMessageInput, RouteError> {
        serde_json::from_value(value).map_err(|error| RouteError::Input {
            detail: error.to_string(),
        })
    }
}

/// A SendMessage `message`: plain text or a structured object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MessageBody {
    /// Plain text.
    Text(String),
    /// A structured message (`{"type": …}`).
    Structured(StructuredMessage),
}

impl<'de> Deserialize<'de> for MessageBody {
    /// A string is text; an object is a structured message and its own error is kept
    /// (serde's untagged enums would only say "did not match any variant").
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        match value {
            serde_json::Value::String(text) => Ok(MessageBody::Text(text)),
            object @ serde_json::Value::Object(_) => serde_json::from_value(object)
                .map(MessageBody::Structured)
                .map_err(|error| D::Error::custom(format!("structured message: {error}"))),
            _ => Err(D::Error::custom(
                "message must be a string or a structured message object",
            )),
        }
    }
}

/// What `to` names, before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// An agent name (a valid path segment, not shaped like a task id).
    Name(String),
    /// Text shaped like a task id. The name registry is still asked first.
    Id(TaskId),
    /// `*`: every team member except the sender.
    Broadcast,
    /// `uds:<socket>`: another process on this machine.
    Uds(String),
    /// `bridge:<session>`: another machine (consent given).
    Bridge(String),
}

/// Where a message goes: the session acts on this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A live or known task: queue it (running) or resume it (stopped, evicted).
    Agent(TaskId),
    /// Every team member except the sender, in team order.
    Broadcast {
        /// The member names to write to.
        recipients: Vec<String>,
    },
    /// Another process on this machine, through this socket path.
    Uds(String),
    /// Another machine's session.
    Bridge(String),
    /// A team mailbox: a member with no live task (or, outside `hardened`, an
    /// unresolved name in the sender's team).
    Mailbox {
        /// The team.
        team: String,
        /// The mailbox owner.
        agent: String,
    },
}

/// Why a SendMessage was refused. Nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The input does not parse (unknown field, wrong type, missing field).
    #[error("invalid SendMessage input: {detail}")]
    Input {
        /// What the parser said.
        detail: String,
    },
    /// `to` is empty or blank.
    #[error("`to` is empty")]
    EmptyRecipient,
    /// `to` contains `@`.
    #[error("`to` {to:?} contains '@'; address agents by name or id")]
    RecipientHasAt {
        /// The `to` given.
        to: String,
    },
    /// `to` is neither a valid name nor any other address form.
    #[error("`to` is not an address: {0}")]
    InvalidRecipient(NameError),
    /// `uds:` with nothing after it.
    #[error("`uds:` needs a socket path")]
    EmptyUdsSocket,
    /// `bridge:` with nothing after it.
    #[error("`bridge:` needs a session")]
    EmptyBridgeSession,
    /// `bridge:` without the caller's explicit consent.
    #[error(
        "sending to bridge session {session:?} reaches another machine and needs explicit consent"
    )]
    BridgeNeedsConsent {
        /// The session named.
        session: String,
    },
    /// A plain-text message without a (non-blank) summary.
    #[error("a plain-text message needs a summary")]
    SummaryRequired,
    /// A structured message sent to `*`.
    #[error("{kind} cannot be broadcast; send it to one agent")]
    StructuredBroadcast {
        /// The message type.
        kind: StructuredKind,
    },
    /// A structured message that breaks its own rules.
    #[error(transparent)]
    Structured(#[from] StructuredError),
    /// `*` from a sender in no team.
    #[error("broadcast needs a team, and the sender is in none")]
    BroadcastWithoutTeam,
    /// Nobody answers to `to` (always refused in `hardened`; elsewhere only outside
    /// a team).
    #[error("no agent or team member answers to {to:?}")]
    UnknownRecipient {
        /// The `to` given.
        to: String,
    },
}

/// Checks `input` on its own and parses its `to` (see the module docs for the rule
/// order). `bridge_consent` is the caller's explicit consent to reach another machine.
pub fn validate(input: &SendMessageInput, bridge_consent: bool) -> Result<Address, RouteError> {
    let address = parse_address(&input.to, bridge_consent)?;
    match &input.message {
        MessageBody::Text(_) => {
            let has_summary = input
                .summary
                .as_deref()
                .is_some_and(|summary| !summary.trim().is_empty());
            if !has_summary {
                return Err(RouteError::SummaryRequired);
            }
        }
        MessageBody::Structured(message) => {
            message.validate()?;
            if address == Address::Broadcast {
                return Err(RouteError::StructuredBroadcast {
                    kind: message.kind(),
                });
            }
        }
    }
    Ok(address)
}

/// Parses `to` into an [`Address`]; `bridge_consent` gates `bridge:`.
pub fn parse_address(to: &str, bridge_consent: bool) -> Result<Address, RouteError> {
    if to.trim().is_empty() {
        return Err(RouteError::EmptyRecipient);
    }
    if to.contains('@') {
        return Err(RouteError::RecipientHasAt { to: to.to_owned() });
    }
    if to == BROADCAST_ADDRESS {
        return Ok(Address::Broadcast);
    }
    if let Some(socket) = to.strip_prefix(UDS_PREFIX) {
        if socket.trim().is_empty() {
            return Err(RouteError::EmptyUdsSocket);
        }
        return Ok(Address::Uds(socket.to_owned()));
    }
    if let Some(session) = to.strip_prefix(BRIDGE_PREFIX) {
        if session.trim().is_empty() {
            return Err(RouteError::EmptyBridgeSession);
        }
        if !bridge_consent {
            return Err(RouteError::BridgeNeedsConsent {
                session: session.to_owned(),
            });
        }
        return Ok(Address::Bridge(session.to_owned()));
    }
    if let Ok(id) = TaskId::parse(to) {
        return Ok(Address::Id(id));
    }
    validate_segment("recipient name", to).map_err(RouteError::InvalidRecipient)?;
    Ok(Address::Name(to.to_owned()))
}

/// Who is in the sender's team, as routing needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamRoster {
    /// The team's name.
    pub team: String,
    /// The lead's name.
    pub lead: String,
    /// The lead's agent id.
    pub lead_agent_id: TaskId,
    /// Every member's name, the lead included, in join order.
    pub members: Vec<String>,
}

impl TeamRoster {
    /// Whether `who` (a name, ignoring ASCII case, or an agent id) is the lead.
    pub fn is_lead(&self, who: &str) -> bool {
        who.eq_ignore_ascii_case(&self.lead) || who == self.lead_agent_id.as_str()
    }

    /// The member called `name` ignoring ASCII case, as the team spells it.
    pub fn member(&self, name: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|member| member.eq_ignore_ascii_case(name))
            .map(String::as_str)
    }
}

/// What [`resolve`] consults.
pub struct RouteContext<'a> {
    /// The sender's name (or agent id, outside a team).
    pub sender: &'a str,
    /// The profile: decides what happens to an unknown recipient.
    pub profile: Profile,
    /// Agent names.
    pub names: &'a NameRegistry,
    /// The sender's team, if any.
    pub team: Option<&'a TeamRoster>,
    /// The caller's explicit consent to reach another machine.
    pub bridge_consent: bool,
    /// Whether the session knows a task with this id (live or evicted).
    pub task_known: &'a dyn Fn(&TaskId) -> bool,
}

/// Validates `input` and resolves its recipient (see the module docs).
pub fn resolve(input: &SendMessageInput, context: &RouteContext<'_>) -> Result<Route, RouteError> {
    let address = validate(input, context.bridge_consent)?;
    let structured = match &input.message {
        MessageBody::Structured(message) => Some(message),
        MessageBody::Text(_) => None,
    };
    let in_team = context.team.is_some();
    let sender_is_lead = context
        .team
        .is_some_and(|team| team.is_lead(context.sender));
    if let Some(message) = structured {
        // The sender-side rules first: they do not depend on who the recipient is,
        // and a message nobody may send should not be reported as mis-addressed.
        message.authorize(in_team, sender_is_lead, true)?;
    }
    let route = match address {
        Address::Broadcast => {
            let team = context.team.ok_or(RouteError::BroadcastWithoutTeam)?;
            let recipients = team
                .members
                .iter()
                .filter(|member| !member.eq_ignore_ascii_case(context.sender))
                .cloned()
                .collect();
            Route::Broadcast { recipients }
        }
        Address::Uds(socket) => Route::Uds(socket),
        Address::Bridge(session) => Route::Bridge(session),
        Address::Name(name) => resolve_agent(&name, None, context)?,
        Address::Id(id) => resolve_agent(id.as_str(), Some(&id), context)?,
    };
    if let Some(message) = structured {
        let recipient_is_lead = context.team.is_some_and(|team| match &route {
            Route::Agent(id) => team.is_lead(&input.to) || *id == team.lead_agent_id,
            Route::Mailbox { agent, .. } => team.is_lead(agent),
            Route::Broadcast { .. } | Route::Uds(_) | Route::Bridge(_) => false,
        });
        message.authorize(in_team, sender_is_lead, recipient_is_lead)?;
    }
    Ok(route)
}

/// Resolves a name or id: registry, team member, known task id, then unresolved.
fn resolve_agent(
    to: &str,
    id: Option<&TaskId>,
    context: &RouteContext<'_>,
) -> Result<Route, RouteError> {
    if let Some(id) = context.names.resolve(to) {
        return Ok(Route::Agent(id.clone()));
    }
    if let Some(team) = context.team {
        if let Some(member) = team.member(to) {
            return Ok(Route::Mailbox {
                team: team.team.clone(),
                agent: member.to_owned(),
            });
        }
    }
    let id_known = |id: &&TaskId| (context.task_known)(id) || context.names.name_of(id).is_some();
    if let Some(id) = id.filter(id_known) {
        return Ok(Route::Agent(id.clone()));
    }
    let unknown = || RouteError::UnknownRecipient { to: to.to_owned() };
    if context.profile.refuses_unknown_recipient() {
        return Err(unknown());
    }
    let team = context.team.ok_or_else(unknown)?;
    // `to` was validated as a segment (names) or is a task id, whose characters are
    // all segment characters; checked again because it becomes a file name.
    validate_segment("recipient name", to).map_err(RouteError::InvalidRecipient)?;
    Ok(Route::Mailbox {
        team: team.team.clone(),
        agent: to.to_owned(),
    })
}
