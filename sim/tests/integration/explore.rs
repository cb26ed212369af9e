//! `coordsim explore`: generated programs are deterministic and valid in every
//! profile, the hardened runtime passes them, the published dialects fail only on
//! their known weaknesses, every seeded defect is found, and the CLI writes what it
//! found and counts what the programs reached.

use coord_runtime::defects::Defect;
use coord_runtime::profile::Profile;
use coord_sim::explore::{
    explore_seed, features, generate, program, render, ExploreOptions, FEATURES,
};
use coord_sim::scenario::LoadedScenario;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every profile explore draws programs for.
const PROFILES: [Profile; 3] = [Profile::Hardened, Profile::ClaudeCode, Profile::Nexo];
/// The seeds within which explore finds every seeded defect (docs/explore.md lists
/// the first seed of each). Chosen to keep the test to seconds in a debug build:
/// the search stops at the first finding seed.
const DEFECT_SEEDS: std::ops::Range<u64> = 0..60;

fn options(profile: Profile, defects: Vec<Defect>) -> ExploreOptions {
    let mut options = ExploreOptions::default();
    options.profile = profile;
    options.defects = defects;
    options
}

/// The seed's program rendered, loaded back, rendered again: the same bytes each
/// time, and a scenario the loader (validation and bounds) accepts.
fn check_program(seed: u64, options: &ExploreOptions) -> Result<(), String> {
    let first = render(seed, &generate(seed, options)).map_err(|e| e.to_string())?;
    let second = render(seed, &generate(seed, options)).map_err(|e| e.to_string())?;
    if first != second {
        return Err(format!("seed {seed} drew two different programs"));
    }
    let loaded = program(seed, options, Path::new("reports/explore"))
        .map_err(|error| format!("seed {seed}: {error}"))?;
    if loaded.text != first {
        return Err(format!("seed {seed}: the loaded text differs"));
    }
    // What was loaded renders back to the same bytes: nothing the file says is lost.
    let again = render(seed, &loaded.loaded.scenario).map_err(|e| e.to_string())?;
    if again != first {
        return Err(format!("seed {seed}: the program does not round-trip"));
    }
    Ok(())
}

#[test]
fn generation_is_deterministic_and_every_program_loads() {
    // Goal: the seed alone fixes the program, and every program passes the loader's
    // validation and bounds. Method: for each profile, generate seeds 0..200 twice
    // each, compare the TOML bytes, load them and render the loaded scenario again.
    for profile in PROFILES {
        let options = options(profile, Vec::new());
        for seed in 0..200 {
            check_program(seed, &options).unwrap_or_else(|error| panic!("{profile}: {error}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_seed_draws_one_valid_program(seed in any::<u64>(), profile in 0..3_usize) {
        // Goal: determinism and validity hold for seeds far from the small ones the
        // loop above covers. Method: arbitrary 64-bit seeds, each profile.
        let options = options(PROFILES[profile], Vec::new());
        prop_assert_eq!(check_program(seed, &options), Ok(()));
    }
}

#[test]
fn a_seed_replays_its_run_to_the_same_trace() {
    // Goal: the seed reproduces the run, not only the program. Method: run a few
    // seeds of each profile twice and compare their trace hashes.
    for profile in PROFILES {
        let options = options(profile, Vec::new());
        for seed in [0, 7, 42] {
            let program = program(seed, &options, Path::new(".")).unwrap();
            let first = explore_seed(&program).unwrap();
            let second = explore_seed(&program).unwrap();
            assert_eq!(
                first.trace_hash(),
                second.trace_hash(),
                "{profile} seed {seed}"
            );
        }
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

#[test]
fn the_published_dialects_fail_only_on_their_known_weaknesses() {
    // Goal: claude-code and nexo programs are playable too; what they break is only
    // what those dialects are known to lose (docs/profiles.md): an acknowledged
    // mailbox write in a power cut (claude-code), a write over an unseen version.
    // Method: seeds 0..60 of each, every failure's invariant.
    for profile in [Profile::ClaudeCode, Profile::Nexo] {
        let options = options(profile, Vec::new());
        for seed in 0..60 {
            let program = program(seed, &options, Path::new(".")).unwrap();
            let run = explore_seed(&program).unwrap();
            let unknown: Vec<_> = run
                .failures
                .iter()
                .filter(|failure| {
                    !matches!(failure.invariant, "no-lost-update" | "mailbox-durability")
                })
                .collect();
            assert!(
                unknown.is_empty(),
                "{profile} seed {seed}: {unknown:?}\nrepro: cargo run -p coord-sim -- explore --seed {seed} --profile {profile}"
            );
        }
    }
}

/// The experiment under `scenarios/experiments/` that switches `defect` on.
fn experiment_of(defect: Defect) -> Option<LoadedScenario> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| LoadedScenario::load(&path).unwrap())
        .find(|loaded| loaded.scenario.settings.defects.contains(&defect))
}

/// The first seed of `seeds` whose program, under `options`, breaks `invariant`.
fn first_finding(
    options: &ExploreOptions,
    invariant: &str,
    seeds: std::ops::Range<u64>,
) -> Option<u64> {
    seeds.into_iter().find(|&seed| {
        let program = program(seed, options, Path::new(".")).unwrap();
        explore_seed(&program)
            .unwrap()
            .failures
            .iter()
            .any(|failure| failure.invariant == invariant)
    })
}

#[test]
fn explore_finds_every_seeded_defect_without_a_hand_written_scenario() {
    // Goal: with any seeded defect switched on, explore's programs break the
    // invariant that defect's experiment expects, within DEFECT_SEEDS. Method: for
    // every defect, its experiment gives the profile and the violation; explore
    // runs that profile with the defect on until a seed breaks it. A new defect
    // without an experiment fails here, so none is left out.
    let mut missed = Vec::new();
    for defect in Defect::ALL {
        let experiment = experiment_of(defect).unwrap_or_else(|| {
            panic!("no scenario in scenarios/experiments/ switches {defect} on")
        });
        let invariant = experiment
            .scenario
            .expect
            .violation
            .unwrap_or_else(|| panic!("{} expects no violation", experiment.path.display()))
            .as_str();
        let options = options(experiment.scenario.profile, vec![defect]);
        if first_finding(&options, invariant, DEFECT_SEEDS.clone()).is_none() {
            missed.push(format!(
                "{defect} ({}): no seed of {DEFECT_SEEDS:?} breaks {invariant}",
                experiment.scenario.profile
            ));
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
}

#[test]
fn the_cli_counts_features_and_probes_with_coverage() {
    // Goal: --coverage reports, per program feature and per runtime probe, how many
    // seeds reached it. Method: seeds 0..12 with --json --coverage; every listed
    // feature is a key, and the counts never exceed the seeds run.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["explore", "--seeds", "0..12", "--json", "--coverage"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let coverage = &report["coverage"];
    for feature in FEATURES {
        let seeds = coverage["features"][feature]
            .as_u64()
            .unwrap_or_else(|| panic!("{feature}"));
        assert!(seeds <= 12);
    }
    // Seed 0's own features are counted.
    let own = features(&generate(0, &ExploreOptions::default()));
    for feature in own {
        assert!(
            coverage["features"][feature].as_u64().unwrap() >= 1,
            "{feature}"
        );
    }
    let probes = coverage["probes"].as_object().unwrap();
    assert_eq!(probes.len(), coord_runtime::probe::Probe::ALL.len());
    assert!(probes.values().any(|seeds| seeds.as_u64().unwrap() > 0));
}

#[test]
fn the_cli_writes_the_generated_and_the_shrunk_program_on_a_failure() {
    // Goal: a failing seed leaves its program and its shrunk form under
    // reports/explore/, and `coordsim shrink` accepts the generated file. Method:
    // seed 2 with unchecked-tool-surface on breaks tool-surface; run the CLI in a
    // temp dir and read what it wrote.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "2",
            "--defect",
            "unchecked-tool-surface",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL explore seed 2: tool-surface"),
        "{stdout}"
    );
    assert!(
        stdout.contains("explore --seed 2 --defect unchecked-tool-surface"),
        "{stdout}"
    );
    let generated = dir
        .path()
        .join("reports/explore/explore-2-unchecked-tool-surface.toml");
    let shrunk = dir
        .path()
        .join("reports/explore/explore-2-unchecked-tool-surface-shrunk.toml");
    assert!(generated.is_file(), "{stdout}");
    assert!(shrunk.is_file(), "{stdout}");
    assert!(stdout.contains("--seed 2 --swarm"), "{stdout}");

    // Running again finds the same files with the same text: nothing is replaced.
    let again = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "2",
            "--defect",
            "unchecked-tool-surface",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));

    let shrink = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["shrink", "--seed", "2", "--swarm", "-o", "again.toml"])
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
    let planted = reports.join("explore-2-unchecked-tool-surface.toml");
    std::fs::write(&planted, "# someone else's file\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seed",
            "2",
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
