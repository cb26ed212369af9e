//! The runtime's model-call policies, judged from what the model API saw:
//!
//! - `compaction-timing`: an agent compacts before its next round exactly when the
//!   context its model last reported reached the threshold (Claude Code's
//!   auto-compact rule, or the scenario's own `compact_threshold_tokens`). The tap's
//!   compaction witness (`run/compaction_witness.rs`) logs every request that
//!   breaks the rule.
//! - `compaction-kept`: a compacted conversation goes on from its summary alone,
//!   and never sends the history the summary replaced again (as a resume from a
//!   transcript that kept the history would). The tap logs a request whose summary
//!   is not its first message (`summary_behind_history`).
//! - `model-retries`: a failed call is retried only after a transient error, after
//!   the wait the policy asks for, and at most 10 times (`run/retry_witness.rs`);
//!   and a call the runtime gave up on had used up its retries, or failed for good.
//!   A give-up is seen in the `failed` envelope the coordinator's model received
//!   for the worker, or claimed by the runtime (`model_call_failed`,
//!   `compaction_failed`).

use super::spawn_answers::is_remote_id;
use super::Violation;
use coord_runtime::envelope::EnvelopeStatus;
use coord_runtime::RuntimeEvent;

use crate::trace::{EventRef, SimEvent, TraceEntry, TraceEvent};

/// The compaction failure's name.
pub const COMPACTION_TIMING: &str = "compaction-timing";
/// The failure's name for a compaction undone.
pub const COMPACTION_KEPT: &str = "compaction-kept";
/// The retry failure's name.
pub const MODEL_RETRIES: &str = "model-retries";

/// A failure for each `compaction_mistimed` and `summary_behind_history` the tap
/// logged.
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
            TraceEvent::Sim(SimEvent::SummaryBehindHistory {
                agent,
                call,
                message_index,
            }) => Some(Violation {
                invariant: COMPACTION_KEPT,
                detail: format!(
                    "at {} ms {agent} sent call {call} with its compaction summary as message {message_index}, behind the history the summary replaced",
                    entry.time_ms
                ),
            }),
            _ => None,
        })
        .collect()
}

/// How long after the API failed an attempt the runtime's give-up claim may come:
/// the wire's delay, over a network transport.
const GIVE_UP_DELAY_MS_MAX: u64 = 1_000;

/// A failure for each `model_retry_wrong` the tap logged, and for each call the
/// runtime gave up on while the API's record shows retries to spare. The give-up
/// is seen either way:
///
/// - the coordinator's model received a `failed` envelope for the worker after the
///   API failed its call, with no crash in between (a restarted host fails the
///   tasks it finds running, retries or not);
/// - the runtime's claim, journaled as the abandoned attempt's error reaches it.
pub fn judge_model_retries(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut given_up: Vec<(u64, &String)> = Vec::new();
    let mut ended_failed: Vec<(u64, &str)> = Vec::new();
    let mut crashes_ms: Vec<u64> = Vec::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Sim(SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            }) => ended_failed.extend(
                task_ids
                    .iter()
                    .zip(statuses.iter())
                    .filter(|(_, status)| **status == EnvelopeStatus::Failed)
                    .map(|(task_id, _)| (entry.time_ms, task_id.as_str())),
            ),
            EventRef::Sim(SimEvent::HostCrashed { .. }) => crashes_ms.push(entry.time_ms),
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
                    // Judged only for an agent with one task (two workers given the
                    // same prompt share a label), run by this runtime: a remote
                    // worker's calls are its host's, which is the world's.
                    let seen_failed = match call.agent_ids.as_slice() {
                        [task_id] if !is_remote_id(task_id) => {
                            ended_failed.iter().any(|&(time, ended)| {
                                ended == task_id
                                    && time >= call.failed_at_ms
                                    && !crashes_ms
                                        .iter()
                                        .any(|crash| (call.failed_at_ms..=time).contains(crash))
                            })
                        }
                        _ => false,
                    };
                    if claimed || seen_failed {
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

    #[test]
    fn a_failed_envelope_after_an_abandoned_call_fails_unless_a_crash_fell_between() {
        // Goal: a runtime that gives up silently is seen by the failed envelope the
        // coordinator's model received; a crash in between (the restart fails the
        // task) explains it. Method: two abandoned calls, each followed by its
        // worker's failed envelope, with a crash before the second.
        let abandoned = |task_id: &str, failed_at_ms| AbandonedCall {
            agent: format!("prompt of {task_id}"),
            agent_ids: vec![task_id.to_owned()],
            attempts: 3,
            failed_at_ms,
            error: "model API overloaded".to_owned(),
        };
        let failed = |time_ms, task_id: &str| {
            at(
                time_ms,
                TraceEvent::Sim(SimEvent::EnvelopesAccepted {
                    task_ids: vec![task_id.to_owned()].into(),
                    statuses: vec![EnvelopeStatus::Failed].into(),
                    bodies: Box::default(),
                }),
            )
        };
        let trace = [
            failed(600, "a00000001"),
            at(
                700,
                TraceEvent::Sim(SimEvent::HostCrashed {
                    lost: Vec::new(),
                    changed: Vec::new(),
                }),
            ),
            failed(800, "a00000002"),
            at(
                900,
                TraceEvent::Sim(SimEvent::RetriesAbandoned {
                    calls: vec![abandoned("a00000001", 500), abandoned("a00000002", 650)],
                }),
            ),
        ];
        let violations = judge_model_retries(&trace);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0]
                .detail
                .contains("of prompt of a00000001 after 3 attempts"),
            "{}",
            violations[0].detail
        );
    }
}
