//! A coordinator crash placed at the coordinator's nth model call: where it may be
//! written, that the host dies as that call arrives (before it is answered) and
//! restarts from its disk, and that the run stays a function of its seed.

use std::path::Path;

use coord_sim::fault::FaultKind;
use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{LoadedScenario, ScenarioError, WorldKind};
use coord_sim::trace::{SimEvent, TraceEntry, TraceEvent};

use crate::repo_root;

/// A coordinator that launches one background worker and waits for its
/// notification: its 1st call launches, its 2nd waits, its 3rd carries the
/// notification. `{fault}` is the body of the one `[[faults]]` table.
const SCENARIO: &str = r#"name = "coordinator-crash-at-a-call"
profile = "claude-code"

[coordinator]
prompt = "go"

[[coordinator.turns]]
tool_calls = [{ name = "Agent", input = { description = "w", prompt = "work", run_in_background = true } }]

[[coordinator.turns]]
text = "all done"
when = { kind = "notifications_at_least", count = 1 }

[[workers]]
prompt = "work"
[[workers.turns]]
text = "done"

[[faults]]
kind = "coordinator-crash"
{fault}
"#;

fn with_fault(fault: &str) -> String {
    SCENARIO.replace("{fault}", fault)
}

fn loaded(text: &str) -> Result<LoadedScenario, ScenarioError> {
    LoadedScenario::parse(Path::new("crash.toml"), text)
}

fn error_of(text: &str) -> String {
    match loaded(text) {
        Err(error @ ScenarioError::Invalid { .. }) => error.to_string(),
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

/// `file:line:column` of the first occurrence of `needle` in `text` (1-based).
fn position_of(text: &str, needle: &str) -> String {
    let offset = text.find(needle).expect("the needle is in the text");
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("crash.toml:{line}:{column}")
}

fn sim_events(trace: &[TraceEntry]) -> impl Iterator<Item = (usize, &SimEvent)> {
    trace
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| match &entry.typed {
            TraceEvent::Sim(event) => Some((index, event)),
            _ => None,
        })
}

#[test]
fn a_coordinator_crash_is_placed_by_exactly_one_of_at_ms_and_a_model_call() {
    // Goal: `at_ms` and `at = { point = "model-call", call = N }` each load, and a
    // fault with both, with neither, with call 0 or with another point is refused
    // at its `file:line:column`. Method: one edit of the fault per case.
    loaded(&with_fault("at_ms = 5000")).unwrap();
    loaded(&with_fault("at = { point = \"model-call\", call = 3 }")).unwrap();

    let both = with_fault("at_ms = 5000\nat = { point = \"model-call\", call = 3 }");
    let error = error_of(&both);
    assert!(error.contains("not both"), "{error}");
    assert!(
        error.contains(&position_of(&both, "{ point")),
        "points at the `at` value: {error}"
    );

    let neither = with_fault("");
    let error = error_of(&neither);
    assert!(
        error.contains("`at_ms = N`") && error.contains("model-call"),
        "{error}"
    );
    assert!(
        error.contains(&position_of(&neither, "\"coordinator-crash\"")),
        "points at the fault's kind: {error}"
    );

    let zero = with_fault("at = { point = \"model-call\", call = 0 }");
    let error = error_of(&zero);
    assert!(
        error.contains("`call` = 0 is out of range: expected 1 to 1000000"),
        "{error}"
    );
    assert!(error.contains(&position_of(&zero, "0 }")), "{error}");

    // A worker's crash point that a coordinator has no use for is not a placement.
    let after_output = with_fault("at = { point = \"after-output\" }");
    let error = error_of(&after_output);
    assert!(error.contains("after-output"), "{error}");
    assert!(error.contains("crash.toml:"), "{error}");
}

#[test]
fn the_host_dies_as_the_coordinators_nth_call_arrives_and_restarts_from_its_disk() {
    // Goal: the crash fires at the coordinator's nth call, not another agent's and
    // not another call of its own; that call is never answered (no bill for it
    // before the crash); the host crashes and restarts, and the run passes. Method:
    // for each n of the three calls, find the fault's record in the trace and look
    // at the coordinator's calls around it.
    for call in 1..=3u32 {
        let text = with_fault(&format!("at = {{ point = \"model-call\", call = {call} }}"));
        let scenario = loaded(&text).unwrap();
        let run = run_seed(&scenario, 0, &RunOptions::default()).unwrap();
        assert!(run.failures.is_empty(), "call {call}: {:?}", run.failures);
        let events: Vec<(usize, &SimEvent)> = sim_events(&run.trace).collect();
        let fired = events
            .iter()
            .position(|(_, event)| {
                matches!(
                    event,
                    SimEvent::FaultFired {
                        kind: FaultKind::CoordinatorCrash,
                        ..
                    }
                )
            })
            .unwrap_or_else(|| panic!("call {call}: the crash never fired"));
        let before = &events[..fired];
        let coordinator_calls = before
            .iter()
            .filter(|(_, event)| {
                matches!(event, SimEvent::ModelCalled { agent, .. } if agent == "coordinator")
            })
            .count();
        assert_eq!(coordinator_calls, call as usize, "call {call}");
        // The last model event before the cut is the nth call arriving, unanswered:
        // no bill for it, nor any other call after it.
        let last_model_event = before.iter().rev().find(|(_, event)| {
            matches!(
                event,
                SimEvent::ModelCalled { .. } | SimEvent::ModelBilled { .. }
            )
        });
        assert!(
            matches!(
                last_model_event,
                Some((_, SimEvent::ModelCalled { agent, call: nth, .. }))
                    if agent == "coordinator" && *nth == call
            ),
            "call {call}: {last_model_event:?}"
        );
        let billed_nth = before.iter().any(|(_, event)| {
            matches!(event, SimEvent::ModelBilled { agent, call: nth, .. }
                if agent == "coordinator" && *nth == call)
        });
        assert!(!billed_nth, "call {call} was answered before the cut");
        let after: Vec<&SimEvent> = events[fired + 1..].iter().map(|(_, e)| *e).collect();
        assert!(
            matches!(
                after[..],
                [
                    SimEvent::HostCrashed { .. },
                    SimEvent::HostRestarted { boot: 1 },
                    ..
                ]
            ),
            "call {call}: {:?}",
            &after[..after.len().min(2)]
        );
        let fired_count = events
            .iter()
            .filter(|(_, event)| matches!(event, SimEvent::FaultFired { .. }))
            .count();
        assert_eq!(fired_count, 1, "call {call}: the crash fires once");
    }
}

#[test]
fn a_crash_at_a_call_the_coordinator_never_makes_does_not_fire() {
    // Goal: a placement past the coordinator's last call is a fault that never
    // fires, not a crash at some other moment. Method: the scenario's coordinator
    // makes 3 calls; place the crash at the 9th.
    let scenario = loaded(&with_fault("at = { point = \"model-call\", call = 9 }")).unwrap();
    let run = run_seed(&scenario, 0, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert!(!run.trace.iter().any(|entry| matches!(
        entry.typed,
        TraceEvent::Sim(SimEvent::FaultFired { .. } | SimEvent::HostCrashed { .. })
    )));
}

#[test]
fn a_crash_at_a_model_call_gives_the_same_trace_for_the_same_seed_on_both_worlds() {
    // Goal: determinism: the cut at a call, its restart and what the disk lost are
    // a function of the seed, on the tokio and the turmoil world, with and without
    // swarm faults. Method: run the claude-code scenario twice per seed.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/claude-code/coordinator-crash.toml"))
            .unwrap();
    for world in [WorldKind::Tokio, WorldKind::Turmoil] {
        for swarm in [false, true] {
            for seed in 0..4 {
                let options = RunOptions {
                    swarm,
                    world: Some(world),
                    ..RunOptions::default()
                };
                let first = run_seed(&scenario, seed, &options).unwrap();
                let second = run_seed(&scenario, seed, &options).unwrap();
                assert!(
                    first.failures.is_empty(),
                    "{world} {swarm} {seed}: {:?}",
                    first.failures
                );
                assert_eq!(
                    first.trace, second.trace,
                    "{world} swarm {swarm} seed {seed}"
                );
                assert_eq!(first.trace_hash(), second.trace_hash());
            }
        }
    }
}
