//! Files as the bus: task output files, mailboxes, lock files and the scratchpad.

pub mod layout;
pub mod lock;
pub mod mailbox;
pub mod name;
pub mod output;
pub mod scratch;

pub use layout::SessionLayout;
pub use lock::{LockError, LockGuard, LockOwner, LockPolicy};
pub use mailbox::{
    broadcast, parse_inbox, BroadcastError, Mailbox, MailboxConfig, MailboxError, MailboxMessage,
    WriteMode,
};
pub use name::{validate_segment, NameError};
pub use output::{
    read_output, AppendOutcome, OutputChunk, OutputError, OutputLimits, OutputWriter,
};
pub use scratch::{ScratchError, ScratchKey, ScratchKeyError, Scratchpad, WriteOutcome};
