//! Files as the bus: task output files, mailboxes, lock files and the scratchpad.

mod layout;
mod lock;
mod mailbox;
mod name;
mod output;
mod scratch;

pub use layout::SessionLayout;
pub use lock::{lock_path_for, LockError, LockGuard, LockOwner, LockPolicy};
pub use mailbox::{
    broadcast, parse_inbox, BroadcastError, Mailbox, MailboxConfig, MailboxError, MailboxMessage,
    WriteMode,
};
pub use name::{validate_segment, NameError, SEGMENT_BYTES_MAX};
pub use output::{
    read_output, truncation_marker, AppendOutcome, OutputChunk, OutputError, OutputLimits,
    OutputWriter, OUTPUT_READ_BYTES_MAX_DEFAULT, OUTPUT_SIZE_BYTES_MAX_DEFAULT,
};
pub use scratch::{ScratchError, ScratchKey, ScratchKeyError, Scratchpad, WriteOutcome};
