//! The compaction boundaries in the workers' transcripts as the disk holds them once
//! the run is over, against the compactions the workers' requests went on from.
//!
//! A finished worker is resumed from its transcript (PROTOCOL.md §1), which must
//! start it from its last compaction's summary, not from the history the summary
//! replaced. The tap saw each worker's requests start from a summary; this witness
//! reads the transcripts' `compact_boundary` lines for each of them, so a runtime
//! that leaves the boundary out cannot pass because it never says it did.

use std::path::Path;

use coord_runtime::world::{ContentBlock, Disk, Message};
use serde::Deserialize;

use super::tap::{summary_digest, TapMemory};
use super::transcript_path;
use crate::trace::{Name, SimEvent, SummaryContinued, Trace};

/// The one transcript line the witness reads; every other line is skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BoundaryLine {
    CompactBoundary { message: Message },
}

/// The digests of the summaries `bytes` (a transcript) holds boundaries for, in
/// order. Lines that are not boundaries, or do not parse, are skipped: a torn last
/// line is what a crash leaves.
fn boundary_digests(bytes: &[u8]) -> Vec<u64> {
    bytes
        .split(|byte| *byte == b'\n')
        .filter(|line| {
            // Only boundary lines are parsed: message lines can be megabytes.
            line.windows(BOUNDARY_TAG.len())
                .take(64)
                .any(|w| w == BOUNDARY_TAG)
        })
        .filter_map(|line| serde_json::from_slice::<BoundaryLine>(line).ok())
        .filter_map(
            |BoundaryLine::CompactBoundary { message }| match message.content.first()? {
                ContentBlock::Text { text, .. } => Some(summary_digest(text)),
                _ => None,
            },
        )
        .collect()
}

/// How a boundary line starts, as the runtime's writer serializes it: its type tag
/// first.
const BOUNDARY_TAG: &[u8] = br#""type":"compact_boundary""#;

/// Records, for every summary a worker's requests went on from, whether one of the
/// transcripts of the tasks launched with its prompt holds a boundary for it.
pub(super) fn witness(tap: &TapMemory, disk: &dyn Disk, trace: &Trace) {
    let continued = tap.summaries_continued_from();
    if continued.is_empty() {
        return;
    }
    let mut summaries = Vec::new();
    for (agent, task_ids, digests) in continued {
        let in_transcripts: Vec<u64> = task_ids
            .iter()
            .filter_map(|task_id| disk.read(Path::new(&transcript_path(task_id))).ok())
            .flat_map(|bytes| boundary_digests(&bytes))
            .collect();
        for digest in digests {
            summaries.push(SummaryContinued {
                agent: Name::new(&agent),
                task_ids: task_ids.clone(),
                summary_digest: format!("{digest:016x}"),
                in_transcript: in_transcripts.contains(&digest),
            });
        }
    }
    trace.push("disk", SimEvent::SummariesContinued { summaries });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary_of_each_boundary_and_skips_other_lines() {
        let text = "This session is being continued. Summary: one.";
        let bytes = format!(
            concat!(
                r#"{{"type":"header","task_id":"a1","description":"d","agent_type":"worker","resumed_from":null}}"#,
                "\n",
                r#"{{"type":"message","message":{{"role":"user","content":[{{"type":"text","text":"go"}}]}}}}"#,
                "\n",
                r#"{{"type":"compact_boundary","trigger":"auto","pre_tokens":9,"message":{{"role":"user","content":[{{"type":"text","text":"{}"}}]}}}}"#,
                "\n",
                r#"{{"type":"compact_boundary","trigger":"auto","pre_tokens":9,"mess"#,
            ),
            text
        );
        assert_eq!(
            boundary_digests(bytes.as_bytes()),
            vec![summary_digest(text)]
        );
    }

    #[test]
    fn a_transcript_without_boundaries_holds_none() {
        let bytes = br#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"the type was \"type\":\"compact_boundary\""}]}}"#;
        assert!(boundary_digests(bytes).is_empty());
    }
}
