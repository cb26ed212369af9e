//! Mailbox polling: each unread message is handed to its reader exactly once.
//!
//! Reading the unread messages and marking them read are one locked
//! read-modify-write of the inbox ([`Mailbox::mark_read_where`]), not a read followed
//! by a separate mark: two polls, even racing ones, can never both return a message.
//! If the write of the read marks fails, nothing is returned and the messages stay
//! unread, so a failed poll loses nothing (it is retried, not skipped).
//!
//! [`Team::poll`] also applies what the messages mean for the team file: a member
//! that receives a shutdown request gets `shutdown_requested`; a lead that receives an
//! approved shutdown from a member removes that member.

use std::sync::Mutex;

use super::file::TeamError;
use super::handle::Team;
use super::message::TeamMessage;
use crate::ipc::{Mailbox, MailboxError, MailboxMessage};

/// Takes every unread message of `mailbox`, oldest first, marking them read as
/// `reader` in the same locked write.
pub async fn take_unread(
    mailbox: &Mailbox,
    reader: &str,
) -> Result<Vec<MailboxMessage>, MailboxError> {
    take_unread_where(mailbox, reader, |_| true).await
}

/// Like [`take_unread`], but only the unread messages for which `wanted` holds;
/// the others stay unread for a later poll.
pub async fn take_unread_where(
    mailbox: &Mailbox,
    reader: &str,
    wanted: impl Fn(&MailboxMessage) -> bool,
) -> Result<Vec<MailboxMessage>, MailboxError> {
    // The predicate runs inside the mailbox's locked update, once per unread message
    // in inbox order; it collects exactly the messages it marks.
    let taken = Mutex::new(Vec::new());
    mailbox
        .mark_read_where(reader, |_, message| {
            if !wanted(message) {
                return false;
            }
            let mut read = message.clone();
            read.read = true;
            taken.lock().expect("poll collector poisoned").push(read);
            true
        })
        .await?;
    Ok(taken.into_inner().expect("poll collector poisoned"))
}

/// One polled message, with its structured meaning if it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The message as it was in the inbox (now marked read).
    pub message: MailboxMessage,
    /// The structured message in its text, if it is one.
    pub team_message: Option<TeamMessage>,
}

impl Team {
    /// Takes member `member`'s unread messages, oldest first, exactly once, and applies
    /// them to the team file: a shutdown request from the lead sets the member's
    /// `shutdown_requested`; an approved shutdown response to the lead, for a request
    /// the lead made, removes the responding member.
    pub async fn poll(&mut self, member: &str) -> Result<Vec<Delivery>, TeamError> {
        let member = self.member_name(member)?;
        let messages = take_unread(&self.mailbox(&member)?, &member).await?;
        let deliveries: Vec<Delivery> = messages
            .into_iter()
            .map(|message| Delivery {
                team_message: TeamMessage::parse(&message.text),
                message,
            })
            .collect();
        for delivery in &deliveries {
            self.apply(&member, delivery).await?;
        }
        Ok(deliveries)
    }

    /// What one delivered message changes in the team file.
    async fn apply(&mut self, reader: &str, delivery: &Delivery) -> Result<(), TeamError> {
        let Some(team_message) = &delivery.team_message else {
            return Ok(());
        };
        let from_lead = self.file.is_lead(&delivery.message.from);
        match team_message {
            TeamMessage::ShutdownRequest { .. } if from_lead => {
                self.update(|file| {
                    if let Some(entry) = file.member_mut(reader) {
                        entry.shutdown_requested = true;
                    }
                    Ok(())
                })
                .await
            }
            TeamMessage::ShutdownResponse {
                request_id,
                approve: true,
                ..
            } if self.file.is_lead(reader)
                && *request_id.agent() == self.file.lead_member().agent_id =>
            {
                let responder = delivery.message.from.clone();
                self.update(|file| {
                    // Only a member the lead asked to shut down can leave this way,
                    // and never the lead itself.
                    let asked = file
                        .member(&responder)
                        .is_some_and(|entry| entry.shutdown_requested && !file.is_lead(&responder));
                    if asked {
                        file.members
                            .retain(|entry| !entry.name.eq_ignore_ascii_case(&responder));
                    }
                    Ok(())
                })
                .await
            }
            _ => Ok(()),
        }
    }
}
