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

/// When the first fault swarm mode drew on top of the scenario's own fired, if one
/// did. The schedule holds the scenario's `faults` first (`written_faults` of them),
/// then the drawn ones.
///
/// A scenario's expectations are written against its own faults; a drawn fault may
/// rightly fail a call or cut a run short, but only from the moment it fires. A
/// kind that no careful runtime lets change an answer
/// ([`FaultKind::changes_answers`](crate::fault::FaultKind::changes_answers))
/// excuses nothing.
pub fn first_drawn_fault_ms(trace: &[TraceEntry], written_faults: usize) -> Option<u64> {
    trace.iter().find_map(|entry| match entry.typed.as_ref() {
        EventRef::Sim(SimEvent::FaultFired { fault, kind, .. })
            if *fault >= written_faults && kind.changes_answers() =>
        {
            Some(entry.time_ms)
        }
        _ => None,
    })
}

/// A failure when the run carried less traffic than the scenario promises
/// (`expect.traffic_min`). Not judged once a fault swarm mode drew has fired: it
/// may rightly cut the run short.
pub fn judge_traffic(scenario: &Scenario, trace: &[TraceEntry]) -> Option<Violation> {
    if first_drawn_fault_ms(trace, scenario.faults.len()).is_some() {
        return None;
    }
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
/// (`expect = "ok"` or `"error"` on the call), lacked the text its `expect_text`
/// names, or held the one its `expect_no_text` names. Under swarm faults, a call
/// is judged if its answer reached the model before the first drawn fault fired
/// (`written_faults` as in `first_drawn_fault_ms`): a drawn fault may rightly
/// fail a call, but not one answered before it.
pub fn judge_calls(trace: &[TraceEntry], written_faults: usize) -> Vec<Violation> {
    let Some(calls) = trace.iter().find_map(|entry| match &entry.typed {
        TraceEvent::Sim(SimEvent::CallsAnswered { calls }) => Some(calls),
        _ => None,
    }) else {
        return Vec::new();
    };
    let drawn_fault_ms = first_drawn_fault_ms(trace, written_faults);
    let mut details = Vec::new();
    for call in calls {
        if drawn_fault_ms.is_some_and(|fault_ms| call.received_ms >= fault_ms) {
            continue;
        }
        let at = format!(
            "{}'s call {} of step {} ({})",
            call.agent, call.index, call.step, call.tool
        );
        if let Some(expected) = call.expected.filter(|expected| *expected != call.got) {
            details.push(format!(
                "{at} was answered {:?}, but the scenario expects {expected:?}",
                call.got
            ));
        }
        let texts = [
            (call.text_missing, &call.expected_text, "without", "to hold"),
            (
                call.text_present,
                &call.unexpected_text,
                "with",
                "not to hold",
            ),
        ];
        for (wrong, text, holding, expectation) in texts {
            if let (true, Some(text)) = (wrong, text) {
                details.push(format!(
                    "{at} was answered ({:?}) {holding} {text:?}, which the scenario expects \
                     the answer {expectation}",
                    call.got
                ));
            }
        }
    }
    details
        .into_iter()
        .map(|detail| Violation {
            invariant: EXPECTED_OUTCOME,
            detail,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CallOutcome;
    use crate::trace::{CallAnswered, Name};

    fn answered(call: CallAnswered) -> Vec<TraceEntry> {
        vec![TraceEntry {
            time_ms: 10,
            actor: Name::new("sim"),
            typed: TraceEvent::Sim(SimEvent::CallsAnswered { calls: vec![call] }),
        }]
    }

    fn glob_call() -> CallAnswered {
        CallAnswered {
            agent: "Audit the tree.".to_owned(),
            step: 1,
            index: 0,
            tool: "Glob".to_owned(),
            expected: None,
            got: CallOutcome::Ok,
            received_ms: 10,
            expected_text: None,
            text_missing: false,
            unexpected_text: None,
            text_present: false,
        }
    }

    #[test]
    fn an_answer_is_held_to_its_outcome_and_to_the_texts_it_must_and_must_not_hold() {
        // Goal: each expectation a scenario writes on a call fails the run on its
        // own, naming the call. Method: one answered Glob, judged with each
        // expectation met and unmet.
        assert!(judge_calls(&answered(glob_call()), 0).is_empty());
        let refused = judge_calls(
            &answered(CallAnswered {
                expected: Some(CallOutcome::Error),
                ..glob_call()
            }),
            0,
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0]
            .detail
            .contains("answered Ok, but the scenario expects Error"));
        let listed = CallAnswered {
            expected_text: Some("src/limit.rs".to_owned()),
            unexpected_text: Some("target/".to_owned()),
            ..glob_call()
        };
        assert!(judge_calls(&answered(listed.clone()), 0).is_empty());
        let both = judge_calls(
            &answered(CallAnswered {
                text_missing: true,
                text_present: true,
                ..listed
            }),
            0,
        );
        assert_eq!(both.len(), 2, "{both:?}");
        assert!(both[0].detail.contains("without \"src/limit.rs\""));
        assert!(both[1].detail.contains("with \"target/\""));
        assert!(both
            .iter()
            .all(|violation| violation.detail.contains("call 0 of step 1 (Glob)")));
    }

    /// A trace in which fault `fault` of the schedule fired at `fired_ms`, then
    /// `call` was answered.
    fn fired_then_answered(fault: usize, fired_ms: u64, call: CallAnswered) -> Vec<TraceEntry> {
        let mut trace = vec![TraceEntry {
            time_ms: fired_ms,
            actor: Name::new("sim"),
            typed: TraceEvent::Sim(SimEvent::FaultFired {
                fault,
                kind: crate::fault::FaultKind::WorkerCrash,
                detail: "a worker crashes".to_owned(),
                agent: None,
            }),
        }];
        trace.extend(answered(call));
        trace
    }

    #[test]
    fn a_drawn_fault_excuses_only_the_answers_after_it() {
        // Goal: under swarm faults, a call's expectation still holds when its answer
        // reached the model before any drawn fault fired, and not after; a fault the
        // scenario wrote itself excuses nothing. Method: one wrong answer at 10 ms,
        // with a fault fired at 5, 10 and 20 ms, drawn (index 1 of a schedule whose
        // scenario wrote one) or written (index 0).
        let wrong = CallAnswered {
            expected: Some(CallOutcome::Error),
            ..glob_call()
        };
        let judged = |fault: usize, fired_ms: u64| {
            judge_calls(&fired_then_answered(fault, fired_ms, wrong.clone()), 1).len()
        };
        assert_eq!(judged(1, 20), 1, "answered before the drawn fault fired");
        assert_eq!(judged(1, 10), 0, "answered as the drawn fault fired");
        assert_eq!(judged(1, 5), 0, "answered after the drawn fault fired");
        assert_eq!(judged(0, 5), 1, "the scenario's own fault excuses nothing");
        assert_eq!(
            first_drawn_fault_ms(&fired_then_answered(1, 5, wrong.clone()), 1),
            Some(5)
        );
        assert_eq!(
            first_drawn_fault_ms(&fired_then_answered(0, 5, wrong), 1),
            None
        );
    }
}
