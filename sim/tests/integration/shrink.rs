//! Shrinking: a failing seed becomes a minimal explicit scenario that fails the
//! same way, through the library and through the `coordsim shrink` command.

use std::path::Path;
use std::process::Command;

use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{Fault, FaultKind, LoadedScenario};
use coord_sim::shrink::{scenario_file, shrink, ShrinkError, ShrinkOptions};

/// Claude Code's in-place mailbox loses acknowledged writes when the host crashes.
/// Only the producers and the crash are needed for that; the other faults are noise
/// the shrinker must remove.
const NOISY: &str = r#"
name = "noisy-legacy-mailbox"
description = "A mailbox-durability failure buried in unrelated faults."
profile = "claude-code"

# Swarm draws nothing: the schedule below is the whole story.
[swarm]
kinds = []

[coordinator]
prompt = "Collect the teammates' status reports."

[[coordinator.turns]]
tool_calls = [{ name = "Agent", input = { description = "survey", prompt = "Survey the repository." } }]
latency = { kind = "fixed", ms = 500 }

[[coordinator.turns]]
text = "Survey done."
when = { kind = "notifications_at_least", count = 1 }

[[workers]]
prompt = "Survey the repository."
[[workers.turns]]
text = "Two crates, one binary."
latency = { kind = "uniform", min_ms = 20000, max_ms = 40000 }

[[faults]]
kind = "model-api"
agent = "coordinator"
call = 1
error = "rate-limited"

[[faults]]
kind = "mailbox-producers"
inbox = "team-lead"
producers = 12

[[faults]]
kind = "delayed-notification"
worker = "Survey*"
delay_ms = 5000

[[faults]]
kind = "duplicate-notify"
worker = "Survey*"

[[faults]]
kind = "coordinator-crash"
at_ms = 10000

[[faults]]
kind = "forged-envelope"
worker = "Survey*"
"#;

fn load(dir: &Path, name: &str, text: &str) -> LoadedScenario {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    LoadedScenario::load(&path).unwrap()
}

fn breaks(scenario: &LoadedScenario, seed: u64, invariant: &str, options: &RunOptions) -> bool {
    run_seed(scenario, seed, options)
        .unwrap()
        .failures
        .iter()
        .any(|failure| failure.invariant == invariant)
}

#[test]
fn noisy_schedule_shrinks_to_the_two_faults_the_failure_needs() {
    // Goal: ddmin plus parameter shrinking leave a 1-minimal schedule: every fault
    // left is needed, and the written file fails the same way.
    let dir = tempfile::tempdir().unwrap();
    let scenario = load(dir.path(), "noisy.toml", NOISY);
    assert!(breaks(
        &scenario,
        3,
        "mailbox-durability",
        &RunOptions::default()
    ));

    let shrunk = shrink(&scenario, 3, None, &ShrinkOptions::default()).unwrap();
    assert_eq!(shrunk.invariant, "mailbox-durability");
    assert_eq!(shrunk.faults_before, 6);
    assert!(!shrunk.budget_exhausted);
    let kinds: Vec<FaultKind> = shrunk.scenario.faults.iter().map(Fault::kind).collect();
    assert_eq!(
        kinds,
        vec![FaultKind::MailboxProducers, FaultKind::CoordinatorCrash]
    );
    // Parameters shrank too: one producer is enough, and the crash comes earlier.
    match &shrunk.scenario.faults[..] {
        [Fault::MailboxProducers { producers, .. }, Fault::CoordinatorCrash {
            at_ms: Some(at_ms),
            at: None,
        }] => {
            assert_eq!(*producers, 1);
            assert!(*at_ms < 10_000, "crash at {at_ms} ms");
        }
        other => panic!("unexpected schedule {other:?}"),
    }

    let out = dir.path().join("shrunk.toml");
    let text = scenario_file(&shrunk, &scenario.path, NOISY, &out, &RunOptions::default()).unwrap();
    assert!(
        !text.contains("# Swarm draws nothing"),
        "the dropped table's comment went with it"
    );
    assert!(
        text.contains("[[workers.turns]]\ntext = \"Two crates, one binary.\""),
        "the original layout is kept"
    );
    let written = load(dir.path(), "shrunk.toml", &text);
    assert_eq!(written.scenario, shrunk.scenario);
    assert!(breaks(
        &written,
        3,
        "mailbox-durability",
        &RunOptions::default()
    ));
    // Even in swarm mode the shrunk file draws nothing, so it fails the same way.
    assert!(breaks(
        &written,
        3,
        "mailbox-durability",
        &RunOptions {
            swarm: true,
            ..RunOptions::default()
        }
    ));
    for index in 0..written.scenario.faults.len() {
        let mut without = written.clone();
        without.scenario.faults.remove(index);
        assert!(
            !breaks(&without, 3, "mailbox-durability", &RunOptions::default()),
            "fault {index} is not needed"
        );
    }
}

#[test]
fn a_passing_seed_has_nothing_to_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let calm = NOISY.split("[[faults]]").next().unwrap();
    let scenario = load(dir.path(), "calm.toml", calm);
    let error = shrink(&scenario, 0, None, &ShrinkOptions::default()).unwrap_err();
    assert!(
        matches!(error, ShrinkError::Passes { seed: 0, .. }),
        "{error}"
    );
}

#[test]
fn shrink_command_round_trips_a_swarm_failure() {
    // Goal: a seed that fails in a swarm sweep is shrunk by the CLI to an explicit
    // scenario, and `coordsim run` on that file with the same seed fails the same way.
    let dir = tempfile::tempdir().unwrap();
    let swarm_text = NOISY
        .split("[[faults]]")
        .next()
        .unwrap()
        .replace("[swarm]\nkinds = []\n", "");
    let scenario = load(dir.path(), "swarm.toml", &swarm_text);
    let swarm = RunOptions {
        swarm: true,
        ..RunOptions::default()
    };
    let seed = (0..500)
        .find(|&seed| breaks(&scenario, seed, "mailbox-durability", &swarm))
        .expect("some swarm seed crashes the host after acknowledged writes");
    let drawn = run_seed(&scenario, seed, &swarm).unwrap().schedule.len();

    let out = dir.path().join("shrunk.toml");
    let coordsim = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_coordsim"))
            .args(args)
            .output()
            .unwrap()
    };
    let seed_text = seed.to_string();
    let shrink = coordsim(&[
        "shrink",
        scenario.path.to_str().unwrap(),
        "--seed",
        &seed_text,
        "--swarm",
        "-o",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&shrink.stdout);
    assert!(
        shrink.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&shrink.stderr)
    );
    assert!(stdout.contains("breaks mailbox-durability"), "{stdout}");
    assert!(
        stdout.contains(&format!("run {} --seed {seed}\n", out.display())),
        "{stdout}"
    );

    let shrunk = LoadedScenario::load(&out).unwrap();
    assert!(shrunk.scenario.swarm.kinds.is_empty());
    assert!(!shrunk.scenario.faults.is_empty() && shrunk.scenario.faults.len() <= drawn);
    let rerun = coordsim(&["run", out.to_str().unwrap(), "--seed", &seed_text]);
    assert_eq!(rerun.status.code(), Some(1));
    let report = String::from_utf8_lossy(&rerun.stdout);
    assert!(report.contains("mailbox-durability"), "{report}");
}
