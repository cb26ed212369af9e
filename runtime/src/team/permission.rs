//! Permission forwarding: a member asks the lead before using a tool.
//!
//! The member writes a `permission_request` to the lead's mailbox (and the runtime
//! journals [`RuntimeEvent::PermissionForwarded`]); the lead writes a
//! `permission_response` with the same request id to the member's mailbox; the member
//! waits for the response *with its id, from the lead*, polling with
//! [`Clock::sleep`](crate::world::Clock::sleep) between polls. The wait takes only
//! that response out of the inbox, so other mail stays unread for the member's next
//! poll, and it is bounded: past its timeout it fails with
//! [`TeamError::PermissionTimeout`] instead of blocking the member forever.

use std::time::Duration;

use super::file::TeamError;
use super::handle::Team;
use super::inbox::take_unread_where;
use super::message::TeamMessage;
use crate::agent::PermissionMode;
use crate::event::RuntimeEvent;
use crate::route::{RequestId, RequestKind};
use crate::tools::ToolName;

/// Whether a teammate in permission `mode` must ask the lead before calling `tool`:
/// never when bypassing permissions, only for Bash when edits are accepted, and for
/// every destructive tool otherwise (in plan mode, where the answer is always no,
/// the caller refuses without asking).
pub fn needs_permission(mode: PermissionMode, tool: ToolName) -> bool {
    match mode {
        PermissionMode::BypassPermissions => false,
        PermissionMode::AcceptEdits => tool == ToolName::Bash,
        PermissionMode::Default | PermissionMode::Plan => tool.is_destructive(),
    }
}

/// The lead's answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAnswer {
    /// The request answered.
    pub request_id: RequestId,
    /// Whether the tool call may go ahead.
    pub approve: bool,
    /// Why not, or any condition.
    pub reason: Option<String>,
}

impl Team {
    /// Member `member` asks the lead to let it call `tool` with `input`: a
    /// `permission_request` with a fresh id `permission-<millis>@<memberId>` goes to
    /// the lead's mailbox. Returns the id to wait on.
    pub async fn request_permission(
        &self,
        member: &str,
        tool: &str,
        input: serde_json::Value,
        description: Option<String>,
    ) -> Result<RequestId, TeamError> {
        let member = self.member_name(member)?;
        let agent_id = &self.member(&member).expect("member_name found it").agent_id;
        let request_id =
            RequestId::generate(RequestKind::Permission, agent_id, self.world.clock.as_ref());
        let message = TeamMessage::PermissionRequest {
            request_id: request_id.clone(),
            tool: tool.to_owned(),
            input,
            description,
        };
        self.send(&member, &self.file.lead, &message).await?;
        self.world
            .journal
            .record(RuntimeEvent::PermissionForwarded {
                team: self.file.name.clone(),
                member,
                tool: tool.to_owned(),
            });
        Ok(request_id)
    }

    /// The lead answers `request_id` of member `member` in the member's mailbox. The
    /// request must be the member's own ([`TeamError::RequestNotFrom`] otherwise).
    pub async fn answer_permission(
        &self,
        member: &str,
        request_id: RequestId,
        approve: bool,
        reason: Option<String>,
    ) -> Result<(), TeamError> {
        let member = self.member_name(member)?;
        let agent_id = &self.member(&member).expect("member_name found it").agent_id;
        if request_id.kind() != RequestKind::Permission || request_id.agent() != agent_id {
            return Err(TeamError::RequestNotFrom { request_id, member });
        }
        let message = TeamMessage::PermissionResponse {
            request_id,
            approve,
            reason,
        };
        self.send(&self.file.lead, &member, &message).await
    }

    /// Member `member` waits for the lead's answer to `request_id`, polling its
    /// mailbox every `poll_interval` (on the world's clock) for at most `timeout`.
    ///
    /// # Panics
    /// If `poll_interval` is zero: the wait would spin without letting time pass.
    pub async fn wait_permission(
        &self,
        member: &str,
        request_id: &RequestId,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<PermissionAnswer, TeamError> {
        assert!(
            !poll_interval.is_zero(),
            "a permission wait needs a poll interval"
        );
        let member = self.member_name(member)?;
        let mailbox = self.mailbox(&member)?;
        let lead = self.file.lead.clone();
        let clock = self.world.clock.clone();
        let started = clock.monotonic();
        // One poll per interval, plus the first and a last one at the deadline.
        let polls_max = timeout.as_nanos() / poll_interval.as_nanos() + 2;
        for _ in 0..polls_max {
            let taken = take_unread_where(&mailbox, &member, |message| {
                message.from.eq_ignore_ascii_case(&lead)
                    && matches!(
                        TeamMessage::parse(&message.text),
                        Some(TeamMessage::PermissionResponse { request_id: id, .. })
                            if id == *request_id
                    )
            })
            .await?;
            if let Some(message) = taken.into_iter().next() {
                let Some(TeamMessage::PermissionResponse {
                    request_id,
                    approve,
                    reason,
                }) = TeamMessage::parse(&message.text)
                else {
                    unreachable!("the predicate took only permission responses");
                };
                return Ok(PermissionAnswer {
                    request_id,
                    approve,
                    reason,
                });
            }
            let waited = clock.monotonic().saturating_sub(started);
            if waited >= timeout {
                break;
            }
            clock.sleep(poll_interval.min(timeout - waited)).await;
        }
        let waited = clock.monotonic().saturating_sub(started);
        Err(TeamError::PermissionTimeout {
            request_id: request_id.clone(),
            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        })
    }
}
