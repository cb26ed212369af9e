//! `coordsim explore`: generated programs are deterministic and valid, the hardened
//! runtime passes them, seeded defects are found, and the CLI writes what it found.

use coord_runtime::defects::Defect;
use coord_sim::explore::{explore_seed, generate, program, render, ExploreOptions};
use std::path::Path;
use std::process::Command;

fn with_defect(defect: Defect) -> ExploreOptions {
    let mut options = ExploreOptions::default();
    options.defects = vec![defect];
    options
}

#[test]
fn generation_is_deterministic_and_every_program_loads() {
    // Goal: the seed alone fixes the program, and every program passes the loader's
    // validation. Method: generate seeds 0..200 twice each, compare the TOML text,
    // and load it.
    let options = ExploreOptions::default();
    for seed in 0..200 {
        let first = render(seed, &generate(seed, &options)).unwrap();
        let second = render(seed, &generate(seed, &options)).unwrap();
        assert_eq!(first, second, "seed {seed} drew two different programs");
        let loaded = program(seed, &options, Path::new("reports/explore"))
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        assert_eq!(loaded.text, first);
    }
}

#[test]
fn a_seed_replays_its_run_to_the_same_trace() {
    // Goal: the seed reproduces the run, not only the program. Method: run a few
    // seeds twice and compare their trace hashes.
    let options = ExploreOptions::default();
    for seed in [0, 7, 42] {
        let program = program(seed, &options, Path::new(".")).unwrap();
        let first = explore_seed(&program).unwrap();
        let second = explore_seed(&program).unwrap();
        assert_eq!(first.trace_hash(), second.trace_hash(), "seed {seed}");
    }
}

#[test]
fn the_hardened_runtime_passes_seeds_0_to_100() {
    // Goal: generated programs are playable to their end and the shipped runtime
    // keeps every invariant on them. Method: run seeds 0..100 in swarm mode.
    let options = ExploreOptions::default();
    for seed in 0..100 {
        let program = program(seed, &options, Path::new(".")).unwrap();
        let run = explore_seed(&program).unwrap();
        assert!(
            run.failures.is_empty(),
            "seed {seed} failed: {:?}\nrepro: cargo run -p coord-sim -- explore --seed {seed}",
            run.failures
        );
    }
}

/// The first seed of `seeds` whose program, with `defect` on, breaks `invariant`.
fn finds(defect: Defect, invariant: &str, seeds: std::ops::Range<u64>) -> Option<u64> {
    let options = with_defect(defect);
    seeds.into_iter().find(|&seed| {
        let program = program(seed, &options, Path::new(".")).unwrap();
        explore_seed(&program)
            .unwrap()
            .failures
            .iter()
            .any(|failure| failure.invariant == invariant)
    })
}

#[test]
fn explore_finds_seeded_defects_without_a_hand_written_scenario() {
    // Goal: each defect swarm can trigger in a generated program is found within a
    // few seeds. Method: switch it on in every program of seeds 0..40 and look for
    // its invariant's violation.
    let cases = [
        (Defect::DuplicateNotification, "notify-once"),
        (Defect::RawEnvelopeResult, "no-forgery"),
        (Defect::RedeliveredMessages, "message-delivery"),
        (Defect::UncheckedToolSurface, "tool-surface"),
        (Defect::ForegroundSpawns, "never-blocks"),
    ];
    for (defect, invariant) in cases {
        assert!(
            finds(defect, invariant, 0..40).is_some(),
            "no seed of 0..40 breaks {invariant} with {defect} on"
        );
    }
}

#[test]
fn the_cli_writes_the_generated_and_the_shrunk_program_on_a_failure() {
    // Goal: a failing seed leaves its program and its shrunk form under
    // reports/explore/, and `coordsim shrink` accepts the generated file. Method:
    // seed 1 with unchecked-tool-surface on breaks tool-surface; run the CLI in a
    // temp dir and read what it wrote.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "1",
            "--defect",
            "unchecked-tool-surface",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL explore seed 1: tool-surface"),
        "{stdout}"
    );
    assert!(
        stdout.contains("explore --seed 1 --defect unchecked-tool-surface"),
        "{stdout}"
    );
    let generated = dir
        .path()
        .join("reports/explore/explore-1-unchecked-tool-surface.toml");
    let shrunk = dir
        .path()
        .join("reports/explore/explore-1-unchecked-tool-surface-shrunk.toml");
    assert!(generated.is_file(), "{stdout}");
    assert!(shrunk.is_file(), "{stdout}");
    assert!(stdout.contains("--seed 1 --swarm"), "{stdout}");

    // Running again finds the same files with the same text: nothing is replaced.
    let again = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "1",
            "--defect",
            "unchecked-tool-surface",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));

    let shrink = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["shrink", "--seed", "1", "--swarm", "-o", "again.toml"])
        .arg(&generated)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        shrink.status.success(),
        "{}",
        String::from_utf8_lossy(&shrink.stderr)
    );
}

#[test]
fn the_cli_refuses_to_replace_a_different_report() {
    // Goal: an existing report with other text is never overwritten silently.
    // Method: plant a different file under the generated name and run the seed.
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports/explore");
    std::fs::create_dir_all(&reports).unwrap();
    let planted = reports.join("explore-1-unchecked-tool-surface.toml");
    std::fs::write(&planted, "# someone else's file\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "1",
            "--defect",
            "unchecked-tool-surface",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&planted).unwrap(),
        "# someone else's file\n"
    );
}
