//! Seed runs: every scenario file runs as a test case, runs are functions of their
//! seed, and seed 0 of each scenario has a canonical trace summary.

use std::collections::BTreeMap;
use std::path::PathBuf;

use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{discover, LoadedScenario};
use coord_sim::trace::TraceEntry;

use crate::repo_root;

fn every_scenario() -> Vec<LoadedScenario> {
    let files = discover(&[repo_root().join("scenarios")]).unwrap();
    assert!(files.len() >= 8, "{files:?}");
    files
        .iter()
        .map(|file| LoadedScenario::load(file).unwrap())
        .collect()
}

fn relative(path: &std::path::Path) -> PathBuf {
    path.strip_prefix(repo_root()).unwrap_or(path).to_owned()
}

/// What a trace did, independent of timing noise: counts of each event kind, then
/// the sequence of non-disk events with their actors.
fn summary(trace: &[TraceEntry], violations: &[&str], hash: u64) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for entry in trace {
        let value: serde_json::Value = serde_json::from_str(&entry.event_json()).unwrap();
        *kinds
            .entry(value["event"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let mut text = format!("trace hash {hash:016x}\nviolations {violations:?}\n");
    for (kind, count) in kinds {
        text.push_str(&format!("{count:>5} {kind}\n"));
    }
    text
}

#[test]
fn every_scenario_passes_its_seeds_and_seed_0_matches_its_snapshot() {
    // Goal: each scenario file is a test case: experiments find their violation,
    // everything else finds none, and seed 0's trace summary is pinned.
    let mut failed = Vec::new();
    for scenario in every_scenario() {
        let name = relative(&scenario.path).display().to_string();
        for seed in 0..3 {
            for swarm in [false, true] {
                let run = run_seed(
                    &scenario,
                    seed,
                    &RunOptions {
                        swarm,
                        ..RunOptions::default()
                    },
                )
                .unwrap();
                if !run.failures.is_empty() {
                    failed.push(format!(
                        "{name} seed {seed} swarm {swarm}: {:?}",
                        run.failures
                    ));
                }
                if seed == 0 && !swarm {
                    let violations: Vec<&str> =
                        run.violations.iter().map(|v| v.invariant).collect();
                    insta::with_settings!({ snapshot_suffix => name.replace(['/', '.'], "-") }, {
                        insta::assert_snapshot!(summary(&run.trace, &violations, run.trace_hash()));
                    });
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    // Goal: a run is a function of its seed, with or without swarm faults.
    for scenario in every_scenario() {
        for seed in 0..4 {
            for swarm in [false, true] {
                let options = RunOptions {
                    swarm,
                    ..RunOptions::default()
                };
                let first = run_seed(&scenario, seed, &options).unwrap();
                let second = run_seed(&scenario, seed, &options).unwrap();
                assert_eq!(first.trace, second.trace, "{:?} seed {seed}", scenario.path);
                assert_eq!(first.trace_hash(), second.trace_hash());
            }
        }
    }
}

#[test]
fn seeds_change_the_run_and_swarm_logs_its_choice_first() {
    // Goal: the seed reaches latencies, ids and the swarm's choice, and the choice is
    // in the trace before anything runs.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/reference/four-phase.toml")).unwrap();
    let hashes: std::collections::BTreeSet<u64> = (0..10)
        .map(|seed| {
            run_seed(&scenario, seed, &RunOptions::default())
                .unwrap()
                .trace_hash()
        })
        .collect();
    assert_eq!(hashes.len(), 10);
    let run = run_seed(
        &scenario,
        5,
        &RunOptions {
            swarm: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(
        run.trace[1].event_json().contains("\"swarm_chose\""),
        "{}",
        run.trace[1].event_json()
    );
    assert!(
        run.trace[2].event_json().contains("\"faults_scheduled\""),
        "{}",
        run.trace[2].event_json()
    );
    assert!(
        run.schedule.len() > 1,
        "swarm drew faults beside the explicit one"
    );
}

#[test]
fn the_reference_scenario_carries_over_100_envelopes_and_messages() {
    // Goal: the reference run is the size the format promises.
    let scenario =
        LoadedScenario::load(&repo_root().join("scenarios/reference/four-phase.toml")).unwrap();
    let run = run_seed(&scenario, 0, &RunOptions::default()).unwrap();
    let count = |needle: &str| {
        run.trace
            .iter()
            .filter(|e| e.event_json().contains(needle))
            .count()
    };
    let envelopes: usize = run
        .trace
        .iter()
        .filter(|e| e.event_json().contains("\"envelopes_accepted\""))
        .map(|e| e.event_json().matches("\"completed\"").count())
        .sum();
    assert_eq!(
        envelopes, 9,
        "4 research, 3 implementation, 1 verification, 1 continuation"
    );
    assert!(envelopes + count("\"mailbox_acked\"") >= 100);
    assert!(run.failures.is_empty(), "{:?}", run.failures);
}

#[test]
fn reference_scenario_carries_its_promised_traffic_and_a_shortfall_fails() {
    // Goal: the reference keeps its 100 envelopes and messages per run, and a
    // scenario promising more than it carries fails under `traffic-min`.
    let path = repo_root().join("scenarios/reference/four-phase.toml");
    let mut reference = LoadedScenario::load(&path).unwrap();
    assert_eq!(reference.scenario.expect.traffic_min, 100);
    for seed in 0..3 {
        let run = run_seed(&reference, seed, &RunOptions::default()).unwrap();
        let carried = coord_sim::check::traffic(&run.trace);
        assert!(carried >= 100, "seed {seed} carried {carried}");
        assert!(run.failures.is_empty(), "{:?}", run.failures);
    }
    reference.scenario.expect.traffic_min = 10_000;
    let run = run_seed(&reference, 0, &RunOptions::default()).unwrap();
    let shortfall: Vec<&str> = run.failures.iter().map(|f| f.invariant).collect();
    assert_eq!(shortfall, vec![coord_sim::check::TRAFFIC_MIN]);
    // Swarm faults may cut a run short, so swarm runs are not held to it.
    let swarm = run_seed(
        &reference,
        0,
        &RunOptions {
            swarm: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(swarm
        .failures
        .iter()
        .all(|f| f.invariant != coord_sim::check::TRAFFIC_MIN));
}
