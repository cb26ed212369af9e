//! Structured messages: the protocol's typed SendMessage payloads (PROTOCOL.md §5).
//!
//! A SendMessage `message` is either plain text or one of these objects, told apart by
//! a `type` tag. They drive cooperative shutdown and plan approval, so who may send
//! them matters: a `shutdown_response` goes only to the team lead (the lead asked),
//! and a `plan_approval_response` comes only from the team lead (only the lead
//! approves plans). A rejection must say why, or the other side cannot act on it.
//!
//! Unknown fields are refused, like every tool input: a misspelt `reasn` would
//! otherwise be dropped silently and the rejection would look reasonless.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::request_id::{RequestId, RequestKind};

/// The wire names of the structured message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StructuredKind {
    /// `shutdown_request`.
    ShutdownRequest,
    /// `shutdown_response`.
    ShutdownResponse,
    /// `plan_approval_response`.
    PlanApprovalResponse,
}

impl StructuredKind {
    /// The `type` tag.
    pub const fn as_str(self) -> &'static str {
        match self {
            StructuredKind::ShutdownRequest => "shutdown_request",
            StructuredKind::ShutdownResponse => "shutdown_response",
            StructuredKind::PlanApprovalResponse => "plan_approval_response",
        }
    }
}

impl fmt::Display for StructuredKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A structured SendMessage payload, as the model writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StructuredMessage {
    /// Asks a teammate to finish and exit. The runtime mints the request id when it
    /// delivers the request (see [`RequestId::generate`]).
    ShutdownRequest {
        /// Why, for the teammate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A teammate's answer to a shutdown request. Only to the team lead.
    ShutdownResponse {
        /// The request answered.
        request_id: RequestId,
        /// Whether the teammate agrees to exit.
        approve: bool,
        /// Why; required when `approve` is false.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The lead's answer to a teammate's plan. Only from the team lead.
    PlanApprovalResponse {
        /// The request answered.
        request_id: RequestId,
        /// Whether the plan is approved.
        approve: bool,
        /// What to change, for a rejected plan.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
}

/// Why a structured message may not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructuredError {
    /// A `shutdown_response` with `approve: false` and no (or a blank) reason.
    #[error("a rejected shutdown_response needs a reason (request {request_id})")]
    RejectionWithoutReason {
        /// The request that was rejected.
        request_id: RequestId,
    },
    /// A response whose request id is of another kind (a shutdown answered with a
    /// plan-approval id, say).
    #[error(
        "{kind} answers a {expected} request, but request id {request_id} is a {actual} request"
    )]
    RequestKindMismatch {
        /// The message type.
        kind: StructuredKind,
        /// The request kind the message answers.
        expected: RequestKind,
        /// The request kind the id names.
        actual: RequestKind,
        /// The request id given.
        request_id: RequestId,
    },
    /// A `shutdown_response` addressed to someone other than the team lead.
    #[error("shutdown_response may only be sent to the team lead")]
    ShutdownResponseNotToLead,
    /// A `plan_approval_response` from someone other than the team lead.
    #[error("plan_approval_response may only be sent by the team lead")]
    PlanApprovalNotFromLead,
    /// A lead-only message outside any team: there is no lead.
    #[error("{kind} needs a team, and the sender is in none")]
    NoTeam {
        /// The message type.
        kind: StructuredKind,
    },
}

impl StructuredMessage {
    /// The message's `type`.
    pub fn kind(&self) -> StructuredKind {
        match self {
            StructuredMessage::ShutdownRequest { .. } => StructuredKind::ShutdownRequest,
            StructuredMessage::ShutdownResponse { .. } => StructuredKind::ShutdownResponse,
            StructuredMessage::PlanApprovalResponse { .. } => StructuredKind::PlanApprovalResponse,
        }
    }

    /// The request this message answers, for responses.
    pub fn request_id(&self) -> Option<&RequestId> {
        match self {
            StructuredMessage::ShutdownRequest { .. } => None,
            StructuredMessage::ShutdownResponse { request_id, .. }
            | StructuredMessage::PlanApprovalResponse { request_id, .. } => Some(request_id),
        }
    }

    /// Checks the message on its own: a rejected shutdown needs a non-blank reason,
    /// and a response's request id must be of the kind it answers.
    pub fn validate(&self) -> Result<(), StructuredError> {
        let expected = match self {
            StructuredMessage::ShutdownRequest { .. } => return Ok(()),
            StructuredMessage::ShutdownResponse { .. } => RequestKind::Shutdown,
            StructuredMessage::PlanApprovalResponse { .. } => RequestKind::PlanApproval,
        };
        let request_id = self
            .request_id()
            .expect("every response carries a request id");
        if request_id.kind() != expected {
            return Err(StructuredError::RequestKindMismatch {
                kind: self.kind(),
                expected,
                actual: request_id.kind(),
                request_id: request_id.clone(),
            });
        }
        if let StructuredMessage::ShutdownResponse {
            approve: false,
            reason,
            request_id,
        } = self
        {
            let has_reason = reason
                .as_deref()
                .is_some_and(|text| !text.trim().is_empty());
            if !has_reason {
                return Err(StructuredError::RejectionWithoutReason {
                    request_id: request_id.clone(),
                });
            }
        }
        Ok(())
    }

    /// Checks who sends to whom. `in_team` says whether the sender is in a team;
    /// `sender_is_lead` and `recipient_is_lead` whether either end is its lead.
    pub fn authorize(
        &self,
        in_team: bool,
        sender_is_lead: bool,
        recipient_is_lead: bool,
    ) -> Result<(), StructuredError> {
        match self {
            StructuredMessage::ShutdownRequest { .. } => Ok(()),
            StructuredMessage::ShutdownResponse { .. } if !in_team => {
                Err(StructuredError::NoTeam { kind: self.kind() })
            }
            StructuredMessage::ShutdownResponse { .. } if !recipient_is_lead => {
                Err(StructuredError::ShutdownResponseNotToLead)
            }
            StructuredMessage::PlanApprovalResponse { .. } if !in_team => {
                Err(StructuredError::NoTeam { kind: self.kind() })
            }
            StructuredMessage::PlanApprovalResponse { .. } if !sender_is_lead => {
                Err(StructuredError::PlanApprovalNotFromLead)
            }
            StructuredMessage::ShutdownResponse { .. }
            | StructuredMessage::PlanApprovalResponse { .. } => Ok(()),
        }
    }
}
