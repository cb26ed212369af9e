//! Cooperative shutdown: the lead asks, the member answers, approval removes it.
//!
//! ```text
//! lead ── shutdown_request {request_id} ──▶ member's mailbox, or its message queue
//!                                           member: shutdown_requested = true
//! lead's mailbox ◀── shutdown_response {request_id, approve, reason?} ── member
//! lead polls: approved → member removed from the team file
//! ```
//!
//! Nothing is killed: a member that rejects (with a reason, which is required) keeps
//! working, and the lead decides what to do next. See [`Team::poll`] for the
//! receiving side.
//!
//! A request reaches a member one of two ways. Through its mailbox, read while it
//! idles: an idle member has no turn to finish, so it agrees at once. Or through
//! SendMessage while it runs: the request waits for its next tool-round boundary
//! and is handed to its model there, and the model answers with a SendMessage
//! `shutdown_response` to the lead. [`ShutdownHandshake`] is the member's side of
//! that second way: which requests its model was handed and has not answered, so
//! an answer is matched to a request that was made, and whether it approved one,
//! which ends it at the end of that tool round. A member that goes idle with a
//! request still unanswered agrees to it then, as an idle member does.

use super::file::TeamError;
use super::handle::Team;
use super::message::TeamMessage;
use crate::ipc::MailboxMessage;
use crate::route::{RequestId, RequestKind, StructuredMessage};

/// Why a shutdown message sent with SendMessage was refused. Nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownError {
    /// A `shutdown_request` to an agent that is not a running teammate: nothing
    /// would ever answer it (a plain worker has no team to answer to; an ended one
    /// is not resumed just to be told to stop).
    #[error("shutdown_request goes to a running teammate, and agent {agent} {state}")]
    NotARunningTeammate {
        /// The agent addressed.
        agent: String,
        /// What it is instead, as a predicate ("has ended (completed)").
        state: String,
    },
    /// A `shutdown_response` naming no request that waits for its sender's answer:
    /// never made, made to someone else, or answered already.
    #[error("no shutdown request {request_id} is waiting for an answer from {sender}")]
    NotPending {
        /// The request id the response named.
        request_id: RequestId,
        /// Who answered.
        sender: String,
    },
}

/// A running member's side of the handshake: the shutdown requests its model was
/// handed and has not answered, oldest first (by the millis in their ids), and the
/// one it approved.
///
/// Requests enter when they are handed over (at a tool-round boundary), not when
/// they are queued: a model can only answer what it has read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownHandshake {
    unanswered: Vec<RequestId>,
    approved: Option<RequestId>,
}

impl ShutdownHandshake {
    /// An empty handshake: nothing asked, nothing approved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Request `request_id` was handed to the member's model. Handing one over twice
    /// keeps it once.
    pub fn handed_over(&mut self, request_id: RequestId) {
        self.wait_for_answer(request_id);
    }

    /// The member answers `request_id`: it leaves the unanswered requests. Refused
    /// with [`ShutdownError::NotPending`] when no such request waits; `sender` names
    /// the member in that error.
    pub fn answer(&mut self, request_id: &RequestId, sender: &str) -> Result<(), ShutdownError> {
        let Some(at) = self.unanswered.iter().position(|id| id == request_id) else {
            return Err(ShutdownError::NotPending {
                request_id: request_id.clone(),
                sender: sender.to_owned(),
            });
        };
        self.unanswered.remove(at);
        Ok(())
    }

    /// The answer to `request_id` could not be sent: the request waits again.
    pub fn unanswer(&mut self, request_id: RequestId) {
        self.wait_for_answer(request_id);
    }

    /// Puts `request_id` among the unanswered requests, once, in its place by age.
    fn wait_for_answer(&mut self, request_id: RequestId) {
        if self.unanswered.contains(&request_id) {
            return;
        }
        let at = self
            .unanswered
            .iter()
            .position(|id| id.unix_ms() > request_id.unix_ms())
            .unwrap_or(self.unanswered.len());
        self.unanswered.insert(at, request_id);
    }

    /// The member's approval of `request_id` reached the lead: it ends at the end of
    /// this tool round.
    pub fn approve(&mut self, request_id: RequestId) {
        self.approved.get_or_insert(request_id);
    }

    /// The request the member approved, if it approved one.
    pub fn approved(&self) -> Option<&RequestId> {
        self.approved.as_ref()
    }

    /// The oldest request handed over and not answered.
    pub fn oldest_unanswered(&self) -> Option<&RequestId> {
        self.unanswered.first()
    }

    /// Every request handed over and not answered, oldest first, for the member to
    /// answer now: they are no longer waiting.
    pub fn take_unanswered(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.unanswered)
    }
}

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

    /// Notes in the team file that the lead asked member `member` to shut down, if
    /// one of `requests` is the lead's (its id names the lead's agent): the lead's
    /// poll takes a member off the team on its approval only if it was asked. A
    /// request that reached the member through its mailbox is noted when the member
    /// polls ([`Team::poll`]); this is for one handed to it from its message queue.
    /// Another member's request marks nothing, as in the mailbox.
    pub async fn note_shutdown_requested<'a>(
        &mut self,
        member: &str,
        requests: impl IntoIterator<Item = &'a RequestId>,
    ) -> Result<(), TeamError> {
        let member = self.member_name(member)?;
        let lead = &self.file.lead_member().agent_id;
        if !requests.into_iter().any(|request| request.agent() == lead) {
            return Ok(());
        }
        self.update(|file| {
            if let Some(entry) = file.member_mut(&member) {
                entry.shutdown_requested = true;
            }
            Ok(())
        })
        .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;
    use proptest::prelude::*;

    fn request(unix_ms: u64) -> RequestId {
        RequestId::from_parts(
            RequestKind::Shutdown,
            unix_ms,
            TaskId::parse("t00000000").unwrap(),
        )
    }

    #[test]
    fn only_a_request_handed_over_and_unanswered_can_be_answered() {
        // Goal: an answer is matched to a request the member's model read, once; a
        // request never handed over, or answered already, is refused by name.
        let mut handshake = ShutdownHandshake::new();
        let first = request(1_000);
        let second = request(2_000);
        assert_eq!(
            handshake.answer(&first, "indexer"),
            Err(ShutdownError::NotPending {
                request_id: first.clone(),
                sender: "indexer".into(),
            })
        );
        handshake.handed_over(first.clone());
        handshake.handed_over(second.clone());
        handshake.handed_over(first.clone());
        assert_eq!(handshake.oldest_unanswered(), Some(&first));
        assert_eq!(handshake.answer(&first, "indexer"), Ok(()));
        assert!(handshake.answer(&first, "indexer").is_err());
        assert_eq!(handshake.oldest_unanswered(), Some(&second));
        assert_eq!(handshake.approved(), None);
        // A failed send puts the answered request back in its place by age.
        handshake.unanswer(first.clone());
        assert_eq!(handshake.take_unanswered(), [first.clone(), second.clone()]);
        assert_eq!(handshake.oldest_unanswered(), None);
        handshake.approve(second.clone());
        handshake.approve(first);
        assert_eq!(handshake.approved(), Some(&second));
    }

    #[derive(Debug, Clone)]
    enum Step {
        HandOver(u64),
        Answer(u64),
        Unanswer(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..4u64).prop_map(Step::HandOver),
            (0..4u64).prop_map(Step::Answer),
            (0..4u64).prop_map(Step::Unanswer),
        ]
    }

    proptest! {
        /// Goal: against a model (the set of requests waiting), every step agrees:
        /// an answer succeeds exactly when its request waits, and what waits comes
        /// out oldest first, each request once. Method: random steps over four ids.
        #[test]
        fn the_handshake_agrees_with_a_set_of_waiting_requests(
            steps in proptest::collection::vec(step(), 0..40)
        ) {
            let mut handshake = ShutdownHandshake::new();
            let mut waiting = std::collections::BTreeSet::new();
            for step in steps {
                match step {
                    Step::HandOver(ms) => {
                        handshake.handed_over(request(ms));
                        waiting.insert(ms);
                    }
                    Step::Answer(ms) => {
                        let answered = handshake.answer(&request(ms), "member").is_ok();
                        prop_assert_eq!(answered, waiting.remove(&ms));
                    }
                    Step::Unanswer(ms) => {
                        handshake.unanswer(request(ms));
                        waiting.insert(ms);
                    }
                }
                let oldest = waiting.first().map(|ms| request(*ms));
                prop_assert_eq!(handshake.oldest_unanswered(), oldest.as_ref());
            }
            let expected: Vec<RequestId> = waiting.iter().map(|ms| request(*ms)).collect();
            prop_assert_eq!(handshake.take_unanswered(), expected);
        }
    }
}
