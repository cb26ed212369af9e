//! The messages waiting for a running agent's next tool-round boundary
//! (PROTOCOL.md §5, invariant 4).
//!
//! A message sent to a running agent never reaches it mid-turn: it waits here, and
//! the agent's loop takes it at the boundary between a tool round and its next
//! request, in the order sent, exactly once. An idle teammate, which has no turn in
//! progress, takes what waits as soon as it wakes.
//!
//! A structured shutdown request waits in the same line as plain text, so it keeps
//! its place in the order, but it stays marked as a request ([`QueuedMessage::shutdown_request`]):
//! whoever takes it hands it over as the request it is, so the recipient's answer
//! can be matched to it, rather than as text nobody waits on an answer to.

use std::collections::VecDeque;

use super::request_id::RequestId;
#[cfg(feature = "defects")]
use crate::defects::{Defect, Defects};

/// One message waiting for its recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    /// What the recipient's model reads.
    pub text: String,
    /// For a structured shutdown request: the id its answer must name. `None` for
    /// plain text.
    pub shutdown_request: Option<RequestId>,
}

/// One agent's messages not yet handed over, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageQueue {
    pending: VecDeque<QueuedMessage>,
    /// Its agent has taken its last messages and is ending: nothing more may wait
    /// here, where nobody would take it.
    closed: bool,
    /// Defect `redelivered-messages`: messages handed over at a boundary stay queued.
    #[cfg(feature = "defects")]
    redeliver: bool,
}

impl MessageQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// The queue with `defects` switched on (for proving the simulator's checkers;
    /// never in production). Only `redelivered-messages` concerns it.
    #[cfg(feature = "defects")]
    pub fn with_defects(mut self, defects: &Defects) -> Self {
        self.redeliver = defects.has(Defect::RedeliveredMessages);
        self
    }

    /// Queues plain `text` behind the messages already waiting.
    pub fn push(&mut self, text: impl Into<String>) {
        self.pending.push_back(QueuedMessage {
            text: text.into(),
            shutdown_request: None,
        });
    }

    /// Queues the shutdown request `request_id`, whose delivered form is `text`,
    /// behind the messages already waiting.
    pub fn push_shutdown_request(&mut self, text: impl Into<String>, request_id: RequestId) {
        self.pending.push_back(QueuedMessage {
            text: text.into(),
            shutdown_request: Some(request_id),
        });
    }

    /// Closes the queue: its agent ends without another boundary. A message sent
    /// from now on must reach the agent some other way (a resume).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether the queue was closed: its agent is ending.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// How many messages wait.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no message waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// At a tool-round boundary: every waiting message, oldest first. They leave the
    /// queue, so the next boundary does not hand them over again.
    pub fn take_at_boundary(&mut self) -> Vec<QueuedMessage> {
        let taken: Vec<QueuedMessage> = self.pending.drain(..).collect();
        // Defect `redelivered-messages`: handed over, and queued again.
        #[cfg(feature = "defects")]
        if self.redeliver {
            self.pending.extend(taken.iter().cloned());
        }
        taken
    }

    /// When an idle agent wakes, or a worker's final turn ends: every waiting
    /// message, oldest first, taken out of the queue. Neither is a tool-round
    /// boundary, so the `redelivered-messages` defect leaves it alone.
    pub fn take_on_wake(&mut self) -> Vec<QueuedMessage> {
        self.pending.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::RequestKind;
    use crate::task::TaskId;

    fn texts(messages: &[QueuedMessage]) -> Vec<&str> {
        messages.iter().map(|m| m.text.as_str()).collect()
    }

    #[test]
    fn messages_are_handed_over_in_order_exactly_once() {
        // Goal: invariant 4's "in order, exactly once" at the queue itself.
        let mut queue = MessageQueue::new();
        queue.push("first");
        queue.push("second");
        assert_eq!(queue.len(), 2);
        assert_eq!(texts(&queue.take_at_boundary()), ["first", "second"]);
        assert!(queue.is_empty());
        assert!(queue.take_at_boundary().is_empty());
        queue.push("third");
        assert_eq!(texts(&queue.take_on_wake()), ["third"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_closed_queue_says_so() {
        // Goal: an ending agent's queue tells senders it takes no more, so they
        // resume the agent instead of queueing where nobody takes it.
        let mut queue = MessageQueue::new();
        assert!(!queue.is_closed());
        queue.push("late");
        assert_eq!(texts(&queue.take_at_boundary()), ["late"]);
        queue.close();
        assert!(queue.is_closed());
        assert!(queue.is_empty());
    }

    #[test]
    fn a_shutdown_request_keeps_its_place_and_its_id() {
        // Goal: a structured shutdown request waits in line with plain text and
        // comes out still marked as the request it is.
        let lead = TaskId::parse("t00000000").unwrap();
        let id = RequestId::from_parts(RequestKind::Shutdown, 1_767_225_600_123, lead);
        let mut queue = MessageQueue::new();
        queue.push("before");
        queue.push_shutdown_request("{\"type\":\"shutdown_request\"}", id.clone());
        queue.push("after");
        let taken = queue.take_at_boundary();
        assert_eq!(
            texts(&taken),
            ["before", "{\"type\":\"shutdown_request\"}", "after"]
        );
        let ids: Vec<Option<&RequestId>> =
            taken.iter().map(|m| m.shutdown_request.as_ref()).collect();
        assert_eq!(ids, [None, Some(&id), None]);
    }
}
