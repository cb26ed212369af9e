//! The verdict of one seed: which of its violations make it fail, given the
//! scenario's expectations, and whether it carried the traffic it promised.

use coord_runtime::RuntimeEvent;

use super::Violation;
use crate::scenario::Scenario;
use crate::trace::{EventRef, SimEvent, TraceEntry, TraceEvent};

/// What makes a seed fail: with no expectation, any violation; in an experiment,
/// any violation of another invariant, or the expected one missing.
pub fn judge(scenario: &Scenario, violations: &[Violation]) -> Vec<Violation> {
    match scenario.expect.violation {
        None => violations.to_vec(),
        Some(expected) => {
            let mut failures: Vec<Violation> = violations
                .iter()
                .filter(|v| v.invariant != expected.as_str())
                .cloned()
                .collect();
            if !violations.iter().any(|v| v.invariant == expected.as_str()) {
                failures.push(Violation {
                    invariant: expected.as_str(),
                    detail: format!(
                        "the experiment expects a {expected} violation and the checkers found none"
                    ),
                });
            }
            failures
        }
    }
}

/// The name a traffic shortfall fails under.
pub const TRAFFIC_MIN: &str = "traffic-min";

/// Envelopes and messages in a run: envelopes the coordinator accepted (one per
/// task id), mailbox writes that landed, and messages queued for running agents.
pub fn traffic(trace: &[TraceEntry]) -> u64 {
    trace
        .iter()
        .map(|entry| match entry.typed.as_ref() {
            EventRef::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => task_ids.len() as u64,
            EventRef::Runtime(
                RuntimeEvent::MailboxWritten { .. } | RuntimeEvent::MessageQueued { .. },
            ) => 1,
            _ => 0,
        })
        .sum()
}

/// A failure when the run carried less traffic than the scenario promises
/// (`expect.traffic_min`). Judged on runs without swarm faults only: a drawn fault
/// may rightly cut a run short.
pub fn judge_traffic(scenario: &Scenario, trace: &[TraceEntry]) -> Option<Violation> {
    let carried = traffic(trace);
    (carried < scenario.expect.traffic_min).then(|| Violation {
        invariant: TRAFFIC_MIN,
        detail: format!(
            "the run carried {carried} envelopes and messages, fewer than the scenario's \
             traffic_min of {}",
            scenario.expect.traffic_min
        ),
    })
}

/// The name a call answered against the scenario's `expect` fails under.
pub const EXPECTED_OUTCOME: &str = "expected-outcome";

/// Failures where a scripted call's answer was not the one the scenario expects
/// (`expect = "ok"` or `"error"` on the call). Judged on runs without swarm faults
/// only, as the traffic is: a drawn fault may rightly fail a call.
pub fn judge_calls(trace: &[TraceEntry]) -> Vec<Violation> {
    let Some(calls) = trace.iter().find_map(|entry| match &entry.typed {
        TraceEvent::Sim(SimEvent::CallsAnswered { calls }) => Some(calls),
        _ => None,
    }) else {
        return Vec::new();
    };
    calls
        .iter()
        .filter(|call| call.got != call.expected)
        .map(|call| Violation {
            invariant: EXPECTED_OUTCOME,
            detail: format!(
                "{}'s call {} of step {} ({}) was answered {:?}, but the scenario expects {:?}",
                call.agent, call.index, call.step, call.tool, call.got, call.expected
            ),
        })
        .collect()
}

/// The name a panic during the run fails under.
pub const RUNTIME_PANIC: &str = "runtime-panic";

/// A failure for every panic during the run (`runtime_panicked`): a panic is a
/// broken invariant of the code under test, whatever the checkers make of the
/// run it left behind.
pub fn judge_panics(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::RuntimePanicked { message }) => Some(Violation {
                invariant: RUNTIME_PANIC,
                detail: format!("the code under test panicked: {message}"),
            }),
            _ => None,
        })
        .collect()
}
