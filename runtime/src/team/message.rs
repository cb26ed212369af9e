//! What teammates put in each other's mailboxes besides plain text.
//!
//! A mailbox message's `text` is either free text or one of these JSON objects, tagged
//! by `type`. They carry a [`RequestId`] so that an answer can be matched to its
//! request: the shutdown handshake and permission forwarding both depend on it. The
//! SendMessage input form of the first three is [`StructuredMessage`]; this is the
//! delivered form, where a shutdown request has been given its id.

use serde::{Deserialize, Serialize};

use crate::route::{RequestId, RequestKind, StructuredMessage};
use crate::task::TaskId;
use crate::world::Clock;

/// A structured message as it sits in a mailbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TeamMessage {
    /// The lead asks a member to finish and exit.
    ShutdownRequest {
        /// Minted by the lead: `shutdown-<millis>@<leadId>`.
        request_id: RequestId,
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A member's answer to a shutdown request.
    ShutdownResponse {
        /// The request answered.
        request_id: RequestId,
        /// Whether the member exits.
        approve: bool,
        /// Why not (required when rejecting).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The lead's answer to a member's plan.
    PlanApprovalResponse {
        /// The request answered.
        request_id: RequestId,
        /// Whether the plan is approved.
        approve: bool,
        /// What to change.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// A member asks the lead to let it use a tool.
    PermissionRequest {
        /// Minted by the member: `permission-<millis>@<memberId>`.
        request_id: RequestId,
        /// The tool's name.
        tool: String,
        /// The tool call's input, for the lead to judge.
        input: serde_json::Value,
        /// What the member means to do, in its words.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// The lead's answer to a permission request.
    PermissionResponse {
        /// The request answered.
        request_id: RequestId,
        /// Whether the tool call may go ahead.
        approve: bool,
        /// Why not, or any condition.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl TeamMessage {
    /// The delivered form of a SendMessage structured message from `sender`. A
    /// shutdown request gets a fresh id `shutdown-<clock millis>@<sender>`; responses
    /// keep the id they answer.
    pub fn from_structured(
        message: StructuredMessage,
        sender: &TaskId,
        clock: &dyn Clock,
    ) -> TeamMessage {
        match message {
            StructuredMessage::ShutdownRequest { reason } => TeamMessage::ShutdownRequest {
                request_id: RequestId::generate(RequestKind::Shutdown, sender, clock),
                reason,
            },
            StructuredMessage::ShutdownResponse {
                request_id,
                approve,
                reason,
            } => TeamMessage::ShutdownResponse {
                request_id,
                approve,
                reason,
            },
            StructuredMessage::PlanApprovalResponse {
                request_id,
                approve,
                feedback,
            } => TeamMessage::PlanApprovalResponse {
                request_id,
                approve,
                feedback,
            },
        }
    }

    /// The message's request id.
    pub fn request_id(&self) -> &RequestId {
        match self {
            TeamMessage::ShutdownRequest { request_id, .. }
            | TeamMessage::ShutdownResponse { request_id, .. }
            | TeamMessage::PlanApprovalResponse { request_id, .. }
            | TeamMessage::PermissionRequest { request_id, .. }
            | TeamMessage::PermissionResponse { request_id, .. } => request_id,
        }
    }

    /// The mailbox `text` of this message: compact JSON.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("team messages serialize")
    }

    /// The structured message in a mailbox `text`, or `None` for plain text (any
    /// text that is not exactly one of these objects).
    pub fn parse(text: &str) -> Option<TeamMessage> {
        if !text.trim_start().starts_with('{') {
            return None;
        }
        serde_json::from_str(text).ok()
    }
}
