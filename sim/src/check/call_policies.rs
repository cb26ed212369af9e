//! The runtime's model-call policies, judged from what the model API saw:
//!
//! - `compaction-timing`: an agent compacts before its next round exactly when the
//!   context its model last reported reached the threshold (Claude Code's
//!   auto-compact rule, or the scenario's own `compact_threshold_tokens`). The tap's
//!   compaction witness (`run/compaction_witness.rs`) logs every request that
//!   breaks the rule.
//! - `model-retries`: a failed call is retried only after a transient error, after
//!   the wait the policy asks for, and at most 10 times (`run/retry_witness.rs`).

use super::Violation;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The compaction failure's name.
pub const COMPACTION_TIMING: &str = "compaction-timing";
/// The retry failure's name.
pub const MODEL_RETRIES: &str = "model-retries";

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

/// A failure for each `model_retry_wrong` the tap logged.
pub fn judge_model_retries(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::ModelRetryWrong { detail, .. }) => Some(Violation {
                invariant: MODEL_RETRIES,
                detail: format!("at {} ms {detail}", entry.time_ms),
            }),
            _ => None,
        })
        .collect()
}
