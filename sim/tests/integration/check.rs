//! Checkers: each experiment's checker finds its bug, the hardened twin of the same
//! fault passes, and the determinism checker names the first differing entry.

use coord_runtime::RuntimeEvent;
use coord_sim::check::{check_all, determinism, Invariant};
use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::LoadedScenario;
use coord_sim::trace::{EventRef, SimEvent, TraceEntry, TraceEvent};

use crate::repo_root;

fn violations_of(relative: &str, seeds: std::ops::Range<u64>) -> Vec<Vec<&'static str>> {
    let scenario = LoadedScenario::load(&repo_root().join(relative)).unwrap();
    seeds
        .map(|seed| {
            let run = run_seed(&scenario, seed, &RunOptions::default()).unwrap();
            run.violations.iter().map(|v| v.invariant).collect()
        })
        .collect()
}

#[test]
fn each_experiment_finds_exactly_its_violation_and_its_twin_finds_none() {
    // Goal: a checker is only trusted once it has caught its bug. Method: run each
    // experiment and the same fault under the hardened profile over a few seeds.
    let pairs = [
        (
            "scenarios/experiments/legacy-mailbox-crash.toml",
            "scenarios/faults/atomic-mailbox-crash.toml",
            Invariant::MailboxDurability,
        ),
        (
            "scenarios/experiments/claude-code-clobbered-scratch.toml",
            "scenarios/faults/hardened-clobbered-scratch.toml",
            Invariant::NoLostUpdate,
        ),
        (
            "scenarios/experiments/binding-isolation.toml",
            "scenarios/faults/scoped-worker-lookup.toml",
            Invariant::BindingIsolation,
        ),
        (
            "scenarios/experiments/no-deadline-hang.toml",
            "scenarios/core/notify-once.toml",
            Invariant::Liveness,
        ),
    ];
    for (experiment, twin, invariant) in pairs {
        for found in violations_of(experiment, 0..4) {
            assert!(!found.is_empty(), "{experiment} found nothing");
            assert!(
                found.iter().all(|name| *name == invariant.as_str()),
                "{experiment}: {found:?}"
            );
        }
        for found in violations_of(twin, 0..4) {
            assert!(found.is_empty(), "{twin}: {found:?}");
        }
    }
}

#[test]
fn the_determinism_checker_names_the_first_differing_entry() {
    // Goal: a divergence is reported where it starts. Method: run one seed, change
    // one entry of a copy, compare.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/core/notify-once.toml")).unwrap();
    let run = run_seed(&scenario, 3, &RunOptions::default()).unwrap();
    assert!(determinism(&run.trace, &run.trace).is_none());
    let mut changed = run.trace.clone();
    changed[7].typed = TraceEvent::Sim(SimEvent::Healed);
    assert_ne!(
        changed[7], run.trace[7],
        "entry 7 is an event other than the one put there"
    );
    let violation = determinism(&run.trace, &changed).expect("a divergence");
    assert_eq!(violation.invariant, "determinism");
    assert!(violation.detail.contains("entry 7"), "{}", violation.detail);
    let shorter = &run.trace[..5];
    let violation = determinism(&run.trace, shorter).expect("a divergence");
    assert!(
        violation.detail.contains("the end of the trace"),
        "{}",
        violation.detail
    );
}

#[test]
fn a_launch_the_coordinator_never_heard_back_from_breaks_notify_once() {
    // Goal: invariant 1 is judged on what the coordinator's model received, not only
    // on the runtime's journal: a launch it saw with no envelope after it fails the
    // run once the coordinator finished, whatever the journal says.
    // Method: a passing seed's trace, plus the witness of one unanswered launch.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/core/notify-once.toml")).unwrap();
    let run = run_seed(&scenario, 3, &RunOptions::default()).unwrap();
    assert!(check_all(&run.trace).is_empty());
    let mut trace = run.trace.clone();
    let last = trace.last().unwrap().time_ms;
    trace.push(TraceEntry {
        time_ms: last,
        actor: "coordinator".into(),
        typed: TraceEvent::Sim(SimEvent::LaunchesUnanswered {
            task_ids: vec!["a0000000".into()],
        }),
    });
    let violations = check_all(&trace);
    let broken: Vec<&str> = violations.iter().map(|v| v.invariant).collect();
    // The runtime never reported that task at all: liveness learns of it from the
    // launch the model saw, and it never ended.
    assert_eq!(
        broken,
        [Invariant::NotifyOnce.as_str(), Invariant::Liveness.as_str()],
        "{violations:?}"
    );
    assert!(
        violations.iter().all(|v| v.detail.contains("a0000000")),
        "{violations:?}"
    );
}

#[test]
fn an_envelope_the_coordinator_accepted_ends_its_task_for_liveness() {
    // Goal: liveness judges a task ended when the world saw it end (its envelope
    // reached the coordinator's model), not only when the runtime says so. Method: a
    // passing seed's trace with every terminal transition the runtime reported
    // removed still upholds liveness; with the envelopes removed too, it breaks.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/core/notify-once.toml")).unwrap();
    let run = run_seed(&scenario, 3, &RunOptions::default()).unwrap();
    let silent: Vec<TraceEntry> = run
        .trace
        .iter()
        .filter(|entry| {
            !matches!(
                entry.typed.as_ref(),
                EventRef::Runtime(RuntimeEvent::TaskTransitioned { to, .. }) if to.is_terminal()
            )
        })
        .cloned()
        .collect();
    let liveness = |trace: &[TraceEntry]| -> Vec<String> {
        check_all(trace)
            .into_iter()
            .filter(|v| v.invariant == Invariant::Liveness.as_str())
            .map(|v| v.detail)
            .collect()
    };
    assert!(liveness(&silent).is_empty(), "{:?}", liveness(&silent));
    let unseen: Vec<TraceEntry> = silent
        .into_iter()
        .filter(|entry| {
            !matches!(
                &entry.typed,
                TraceEvent::Sim(SimEvent::EnvelopesAccepted { .. })
            )
        })
        .collect();
    let violations = liveness(&unseen);
    assert!(!violations.is_empty());
    assert!(
        violations.iter().all(|v| v.contains("never ended")),
        "{violations:?}"
    );
}
