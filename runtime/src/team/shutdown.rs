//! Cooperative shutdown: the lead asks, the member answers, approval removes it.
//!
//! ```text
//! lead ── shutdown_request {request_id} ──▶ member's mailbox
//!                                           member polls: shutdown_requested = true
//! lead's mailbox ◀── shutdown_response {request_id, approve, reason?} ── member
//! lead polls: approved → member removed from the team file
//! ```
//!
//! Nothing is killed: a member that rejects (with a reason, which is required) keeps
//! working, and the lead decides what to do next. See [`Team::poll`] for the
//! receiving side.

use super::file::TeamError;
use super::handle::Team;
use super::message::TeamMessage;
use crate::ipc::MailboxMessage;
use crate::route::{RequestId, RequestKind, StructuredMessage};

impl Team {
    /// The lead asks member `member` to shut down: a `shutdown_request` with a fresh
    /// id `shutdown-<millis>@<leadId>` goes to the member's mailbox. Returns the id.
    pub async fn request_shutdown(
        &self,
        member: &str,
        reason: Option<String>,
    ) -> Result<RequestId, TeamError> {
        let member = self.member_name(member)?;
        let lead = self.file.lead_member();
        let request_id = RequestId::generate(
            RequestKind::Shutdown,
            &lead.agent_id,
            self.world.clock.as_ref(),
        );
        let message = TeamMessage::ShutdownRequest {
            request_id: request_id.clone(),
            reason,
        };
        self.send(&lead.name, &member, &message).await?;
        Ok(request_id)
    }

    /// Member `member` answers shutdown request `request_id` to the lead's mailbox.
    /// A rejection needs a non-blank reason ([`TeamError::Structured`] otherwise).
    pub async fn respond_shutdown(
        &self,
        member: &str,
        request_id: RequestId,
        approve: bool,
        reason: Option<String>,
    ) -> Result<(), TeamError> {
        let member = self.member_name(member)?;
        let response = StructuredMessage::ShutdownResponse {
            request_id,
            approve,
            reason,
        };
        response.validate()?;
        // Addressed to the lead by construction, so the lead-only rule holds.
        response.authorize(true, self.file.is_lead(&member), true)?;
        let sender = &self.member(&member).expect("member_name found it").agent_id;
        let message = TeamMessage::from_structured(response, sender, self.world.clock.as_ref());
        self.send(&member, &self.file.lead, &message).await
    }

    /// Appends `message` from `from` to `to`'s mailbox, with `from`'s colour.
    pub(super) async fn send(
        &self,
        from: &str,
        to: &str,
        message: &TeamMessage,
    ) -> Result<(), TeamError> {
        let mut mail = MailboxMessage::new(&self.world, from, message.to_text());
        mail.color = self.member(from).map(|entry| entry.color.clone());
        self.mailbox(to)?.append(mail).await?;
        Ok(())
    }
}
