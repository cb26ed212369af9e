//! The messages waiting for a running agent's next tool-round boundary
//! (PROTOCOL.md §5, invariant 4).
//!
//! A message sent to a running agent never reaches it mid-turn: it waits here, and
//! the agent's loop takes it at the boundary between a tool round and its next
//! request, in the order sent, exactly once. An idle teammate, which has no turn in
//! progress, takes what waits as soon as it wakes.

use std::collections::VecDeque;

#[cfg(feature = "defects")]
use crate::defects::{Defect, Defects};

/// One agent's messages not yet handed over, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageQueue {
    pending: VecDeque<String>,
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

    /// Queues `text` behind the messages already waiting.
    pub fn push(&mut self, text: impl Into<String>) {
        self.pending.push_back(text.into());
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
    pub fn take_at_boundary(&mut self) -> Vec<String> {
        let taken: Vec<String> = self.pending.drain(..).collect();
        // Defect `redelivered-messages`: handed over, and queued again.
        #[cfg(feature = "defects")]
        if self.redeliver {
            self.pending.extend(taken.iter().cloned());
        }
        taken
    }

    /// When an idle agent wakes: every waiting message, oldest first, taken out of
    /// the queue.
    pub fn take_on_wake(&mut self) -> Vec<String> {
        self.pending.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_handed_over_in_order_exactly_once() {
        // Goal: invariant 4's "in order, exactly once" at the queue itself.
        let mut queue = MessageQueue::new();
        queue.push("first");
        queue.push("second");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.take_at_boundary(), ["first", "second"]);
        assert!(queue.is_empty());
        assert!(queue.take_at_boundary().is_empty());
        queue.push("third");
        assert_eq!(queue.take_on_wake(), ["third"]);
        assert!(queue.is_empty());
    }
}
