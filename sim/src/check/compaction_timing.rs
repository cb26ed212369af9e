//! `compaction-timing`: an agent compacts before its next round exactly when the
//! context its model last reported reached the threshold (Claude Code's auto-compact
//! rule, or the scenario's own `compact_threshold_tokens`). The tap's compaction
//! witness (`run/compaction_witness.rs`) logs every request that breaks the rule.

use super::Violation;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The failure's name.
pub const COMPACTION_TIMING: &str = "compaction-timing";

/// A failure for each `compaction_mistimed` the tap logged.
pub fn judge_compaction_timing(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::CompactionMistimed {
                agent,
                call,
                compaction,
                context_tokens,
                threshold_tokens,
            }) => {
                let reported = context_tokens.map_or_else(
                    || "no context reported yet".to_owned(),
                    |tokens| format!("a reported context of {tokens} tokens"),
                );
                let detail = if *compaction {
                    format!(
                        "at {} ms {agent} asked for a compaction (call {call}) with {reported}, below the threshold of {threshold_tokens}",
                        entry.time_ms
                    )
                } else {
                    format!(
                        "at {} ms {agent} sent its next round (call {call}) uncompacted after {reported}, at or past the threshold of {threshold_tokens}",
                        entry.time_ms
                    )
                };
                Some(Violation {
                    invariant: COMPACTION_TIMING,
                    detail,
                })
            }
            _ => None,
        })
        .collect()
}
