//! The inboxes a `corrupt-inbox` fault left cut off, as the disk holds them once
//! the run is over: the witness that a mailbox it could not read lost nothing
//! (PROTOCOL.md §4, invariant 5). A write must be refused loudly, or land with the
//! bytes it could not read kept; an inbox read as empty and written over loses the
//! message a writer had finished before it died.

use std::path::Path;

use coord_runtime::ipc::SessionLayout;
use coord_runtime::world::Disk;

use crate::fault::{producer_inbox, Fault, FaultBook, CORRUPT_INBOX_BYTES};
use crate::trace::{message_digest_hex, path_text, SimEvent, Trace};

/// Records, for every `corrupt-inbox` fault of the schedule, whether some file of
/// its inbox's directory still holds the bytes the fault left, and the messages
/// the inbox holds as JSON, read here rather than by the runtime's mailbox.
pub(super) fn witness(book: &FaultBook, layout: &SessionLayout, disk: &dyn Disk, trace: &Trace) {
    for fault in book.schedule().iter() {
        let Fault::CorruptInbox { inbox } = fault else {
            continue;
        };
        let Some(path) = producer_inbox(layout, inbox) else {
            continue;
        };
        trace.push(
            "sim",
            SimEvent::CorruptInboxWitnessed {
                path: path_text(&path),
                kept: kept_beside(disk, &path),
                message_digests: messages_in(disk, &path),
            },
        );
    }
}

/// Whether the inbox at `path`, or a file beside it (a runtime may move an inbox
/// it cannot read aside), starts with the bytes the fault left.
fn kept_beside(disk: &dyn Disk, path: &Path) -> bool {
    let holds = |file: &Path| {
        disk.read(file)
            .is_ok_and(|bytes| bytes.starts_with(CORRUPT_INBOX_BYTES))
    };
    if holds(path) {
        return true;
    }
    let Some(dir) = path.parent() else {
        return false;
    };
    disk.list_dir(dir)
        .is_ok_and(|files| files.iter().any(|file| holds(file)))
}

/// The digests of the messages the inbox at `path` holds, if it is a JSON array of
/// objects with a string `from` and `text`; none if it is missing or not one.
fn messages_in(disk: &dyn Disk, path: &Path) -> Vec<String> {
    let Ok(bytes) = disk.read(path) else {
        return Vec::new();
    };
    let Ok(messages) = serde_json::from_slice::<Vec<serde_json::Value>>(&bytes) else {
        return Vec::new();
    };
    messages
        .iter()
        .filter_map(|message| {
            let from = message.get("from")?.as_str()?;
            let text = message.get("text")?.as_str()?;
            Some(message_digest_hex(from, text))
        })
        .collect()
}
