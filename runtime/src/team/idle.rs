//! Idle state and on-idle callbacks.
//!
//! A member is idle when its turn ended with nothing left to do. The flag lives in the
//! team file, so whether a change is a *transition* is decided against the durable
//! state: marking an already-idle member idle again (another poll, a restarted lead)
//! does nothing, and callbacks and the [`RuntimeEvent::MemberIdle`] event fire once per
//! busy → idle transition. Marking the member busy resets it for the next one.
//!
//! An idle member waits on its mailbox ([`Team::poll_idle`]): a shutdown request is
//! agreed to at once when nothing else waits for it, since an idle member has no turn
//! to finish; any other mail becomes its next turn. A shutdown request that arrives
//! beside other mail (or while other work is queued) is handed over with it for the
//! member's model to answer, never answered in place of reading that mail: the
//! mailbox marks what it hands out as read, so mail skipped then is mail lost.

use super::file::TeamError;
use super::handle::{IdleCallback, Team};
use super::message::TeamMessage;
use crate::event::RuntimeEvent;

/// What an idle member found in its mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdleMail {
    /// The texts of its next turn, oldest first (none when the mailbox was empty).
    Messages(Vec<String>),
    /// The lead asked it to shut down, nothing else was waiting, and it agreed.
    Shutdown,
    /// Mail and shutdown requests together: the texts of its next turn, the
    /// requests' own included (oldest first), and the requests, which its model
    /// must now answer. None of them has been answered.
    MessagesWithShutdown {
        /// Every text, the requests' included.
        texts: Vec<String>,
        /// The shutdown requests among them.
        requests: Vec<crate::route::RequestId>,
    },
}

impl Team {
    /// Registers `callback`, run with the member's name on every transition to idle,
    /// in registration order.
    pub fn on_idle(&mut self, callback: IdleCallback) {
        self.idle_callbacks.push(callback);
    }

    /// Marks member `member` idle. Returns whether it was a transition (it was busy);
    /// only then is [`RuntimeEvent::MemberIdle`] journaled and the callbacks run,
    /// after the file is written.
    pub async fn mark_idle(&mut self, member: &str) -> Result<bool, TeamError> {
        let name = self.member_name(member)?;
        let became_idle = self.set_idle(&name, true).await?;
        if became_idle {
            self.world.journal.record(RuntimeEvent::MemberIdle {
                team: self.file.name.clone(),
                member: name.clone(),
            });
            for callback in &self.idle_callbacks {
                callback(&name);
            }
        }
        Ok(became_idle)
    }

    /// As idle member `member`: takes its unread mail, and agrees to the shutdown
    /// requests among it when they are all it holds and `other_work` (messages
    /// queued for the member outside its mailbox) is false. Otherwise every text,
    /// the requests' too, is handed over unanswered.
    pub async fn poll_idle(
        &mut self,
        member: &str,
        other_work: bool,
    ) -> Result<IdleMail, TeamError> {
        let mut texts = Vec::new();
        let mut requests = Vec::new();
        let mut plain_mail = false;
        for delivery in self.poll(member).await? {
            match delivery.team_message {
                Some(TeamMessage::ShutdownRequest { request_id, .. }) => requests.push(request_id),
                _ => plain_mail = true,
            }
            texts.push(delivery.message.text);
        }
        if requests.is_empty() {
            return Ok(IdleMail::Messages(texts));
        }
        if plain_mail || other_work {
            return Ok(IdleMail::MessagesWithShutdown { texts, requests });
        }
        // A request that arrived twice (a writer retried an append that had
        // landed) is still one request, answered once.
        let mut answered = std::collections::BTreeSet::new();
        for request_id in requests {
            if !answered.insert(request_id.clone()) {
                continue;
            }
            // The member ends whether or not its answer reaches the lead: it was
            // asked to go, and the lead sees it leave either way.
            let _ = self.respond_shutdown(member, request_id, true, None).await;
        }
        Ok(IdleMail::Shutdown)
    }

    /// Marks member `member` busy (it has work again). Returns whether it was idle.
    pub async fn mark_busy(&mut self, member: &str) -> Result<bool, TeamError> {
        let name = self.member_name(member)?;
        self.set_idle(&name, false).await
    }

    /// Sets the flag under the file lock; returns whether it changed.
    async fn set_idle(&mut self, name: &str, idle: bool) -> Result<bool, TeamError> {
        let unknown = self.unknown_member(name);
        self.update(|file| {
            let entry = file.member_mut(name).ok_or(unknown)?;
            let changed = entry.is_idle != idle;
            entry.is_idle = idle;
            Ok(changed)
        })
        .await
    }
}
