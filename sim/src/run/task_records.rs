//! The task records as the disk holds them once the run is over: the witness of
//! invariant 1's "one terminal state", read as bytes rather than taken from what
//! the runtime says. A record is what a restarted runtime reloads, so a record
//! that ends a task otherwise than the envelope the coordinator was handed gives
//! the task a second ending.

use std::path::Path;

use coord_runtime::task::TaskStatus;
use coord_runtime::world::Disk;
use serde::Deserialize;

use crate::trace::{SimEvent, Trace};

/// The directory of the session's task records.
const RECORDS_DIR: &str = "/session/records";
/// The file name ending of a task record.
const RECORD_SUFFIX: &str = ".json";

/// The two fields of a record the witness reads; the rest are ignored.
#[derive(Deserialize)]
struct RecordStatus {
    id: String,
    status: TaskStatus,
}

/// Reads every task record on `disk` and records the tasks they end, with the
/// status each gives. A record that is not terminal, or that the disk cannot read
/// or parse, is left out: a record lagging behind its task is no second ending.
pub(super) fn witness(disk: &dyn Disk, trace: &Trace) {
    let Ok(mut paths) = disk.list_dir(Path::new(RECORDS_DIR)) else {
        return;
    };
    paths.sort();
    let ended: Vec<(String, TaskStatus)> = paths
        .iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with(RECORD_SUFFIX))
        })
        .filter_map(|path| disk.read(path).ok())
        .filter_map(|bytes| serde_json::from_slice::<RecordStatus>(&bytes).ok())
        .filter(|record| record.status.is_terminal())
        .map(|record| (record.id, record.status))
        .collect();
    if !ended.is_empty() {
        trace.push("disk", SimEvent::TaskRecordsWitnessed { ended });
    }
}
