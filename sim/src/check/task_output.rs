//! TaskOutput's incremental reads (PROTOCOL.md §4), judged from the output file's
//! bytes on the disk: the run's output-read witness (`run/output_reads.rs`) logs
//! every task whose TaskOutput answers did not give the file's bytes one after
//! another from its start.

use super::Violation;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The name a wrong TaskOutput answer fails under.
pub const TASK_OUTPUT: &str = "task-output";

/// A failure for each `task_output_wrong` the witness logged.
pub fn judge_task_output(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::TaskOutputWrong { task_id, detail }) => Some(Violation {
                invariant: TASK_OUTPUT,
                detail: format!("task {task_id}: {detail}"),
            }),
            _ => None,
        })
        .collect()
}
