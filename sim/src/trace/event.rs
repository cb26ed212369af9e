//! What the simulator itself records in the trace, beside the runtime's events.

use coord_runtime::envelope::EnvelopeStatus;
use serde::{Deserialize, Serialize};

/// A step the simulator observed. Digests are FNV-1a of the text, as 16 hex digits,
/// so the trace stays small and its hash does not depend on the text's size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SimEvent {
    /// A worker was spawned and what it is scripted to end with.
    Spawned {
        /// Its task id.
        task_id: String,
        /// The status its envelope must carry, in the run's dialect.
        expected_status: EnvelopeStatus,
        /// Digest of the result its envelope must carry.
        expected_result_digest: String,
    },
    /// A worker's output was appended.
    OutputAppended {
        /// The task.
        task_id: String,
        /// Bytes appended.
        bytes: usize,
    },
    /// A worker's runner asked to notify again after its first notification.
    NotifyRepeated {
        /// The task.
        task_id: String,
        /// Whether the registry enqueued anything (it must not).
        enqueued: bool,
    },
    /// The coordinator parsed an envelope out of the notification text of its turn.
    Delivered {
        /// The envelope's task id.
        task_id: String,
        /// The envelope's status.
        status: EnvelopeStatus,
        /// Digest of the envelope's result, if it had one.
        result_digest: Option<String>,
    },
    /// A mailbox write was acknowledged to its sender.
    MailboxAcked {
        /// The sender.
        from: String,
        /// Digest of the message text.
        message_digest: String,
    },
    /// A mailbox write failed and the sender was told.
    MailboxRejected {
        /// The sender.
        from: String,
        /// Why.
        reason: String,
    },
    /// The coordinator's inbox at the end of the run.
    InboxFinal {
        /// Digests of every message text, in inbox order.
        message_digests: Vec<String>,
    },
}

/// `text`'s digest as the trace writes it.
pub fn digest_hex(text: &str) -> String {
    format!(
        "{:016x}",
        coord_runtime::digest::Fnv1a64::digest(text.as_bytes())
    )
}
