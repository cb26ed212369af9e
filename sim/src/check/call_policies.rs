//! The runtime's model-call policies, judged from what the model API saw:
//!
//! - `compaction-timing`: an agent compacts before its next round exactly when the
//!   context its model last reported reached the threshold (Claude Code's
//!   auto-compact rule, or the scenario's own `compact_threshold_tokens`). The tap's
//!   compaction witness (`run/compaction_witness.rs`) logs every request that
//!   breaks the rule.
//! - `model-retries`: a failed call is retried only after a transient error, after
//!   the wait the policy asks for, and at most 10 times (`run/retry_witness.rs`);
//!   and a call the runtime gave up on (its `model_call_failed` or
//!   `compaction_failed` claim) had used up its retries, or failed for good.

use super::Violation;
use coord_runtime::RuntimeEvent;

use crate::trace::{EventRef, SimEvent, TraceEntry, TraceEvent};

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

/// How long after the API failed an attempt the runtime's give-up claim may come:
/// the wire's delay, over a network transport.
const GIVE_UP_DELAY_MS_MAX: u64 = 1_000;

/// A failure for each `model_retry_wrong` the tap logged, and for each call the
/// runtime gave up on while the API's record shows retries to spare: the agent's
/// give-up claim is journaled as the abandoned attempt's error reaches it.
pub fn judge_model_retries(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut given_up: Vec<(u64, &String)> = Vec::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Sim(SimEvent::ModelRetryWrong { detail, .. }) => {
                violations.push(Violation {
                    invariant: MODEL_RETRIES,
                    detail: format!("at {} ms {detail}", entry.time_ms),
                });
            }
            EventRef::Runtime(
                RuntimeEvent::ModelCallFailed { agent, .. }
                | RuntimeEvent::CompactionFailed { agent, .. },
            ) => given_up.push((entry.time_ms, agent)),
            EventRef::Sim(SimEvent::RetriesAbandoned { calls }) => {
                for call in calls {
                    // The error reaches the runtime at `failed_at_ms` (later over a
                    // network, by the wire's delay), and the runtime gives up then.
                    let claimed = given_up.iter().any(|(time, agent)| {
                        (call.failed_at_ms..=call.failed_at_ms + GIVE_UP_DELAY_MS_MAX)
                            .contains(time)
                            && call.agent_ids.iter().any(|id| id == *agent)
                    });
                    if claimed {
                        violations.push(Violation {
                            invariant: MODEL_RETRIES,
                            detail: format!(
                                "at {} ms the runtime gave up on a call of {} after {} attempts, on {}, an error the policy retries {} times",
                                call.failed_at_ms,
                                call.agent,
                                call.attempts,
                                call.error,
                                crate::run::MODEL_RETRIES_MAX
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::AbandonedCall;

    fn at(time_ms: u64, typed: TraceEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "sim".into(),
            typed,
        }
    }

    #[test]
    fn a_give_up_on_an_abandoned_call_fails_and_a_stop_in_its_wait_does_not() {
        // Goal: the runtime giving up (its claim, journaled as the error arrives)
        // on a call the API saw fail with retries to spare is a failure; the same
        // record with no claim (the agent was stopped in its wait) is not.
        let abandoned = |agent: &str, failed_at_ms| AbandonedCall {
            agent: agent.to_owned(),
            agent_ids: vec![format!("id of {agent}")],
            attempts: 10,
            failed_at_ms,
            error: "model API overloaded".to_owned(),
        };
        let trace = [
            at(
                500,
                TraceEvent::runtime(RuntimeEvent::ModelCallFailed {
                    agent: "id of Audit.".to_owned(),
                    error: "model API overloaded".to_owned(),
                }),
            ),
            at(
                900,
                TraceEvent::Sim(SimEvent::RetriesAbandoned {
                    calls: vec![abandoned("Audit.", 500), abandoned("Survey.", 700)],
                }),
            ),
        ];
        let violations = judge_model_retries(&trace);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].detail.contains("of Audit. after 10 attempts"),
            "{}",
            violations[0].detail
        );
    }
}
