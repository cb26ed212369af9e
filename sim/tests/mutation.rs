//! The sweep as a test, for the mutation run (`scripts/mutants`).
//!
//! A test target of its own: each mutant rebuilds the test it is judged by, and
//! this one links in moments where the whole integration suite takes most of a
//! minute.
//!
//! cargo-mutants judges a mutant by `cargo test`; this test is the sweep users run,
//! so a mutant of a runtime guard counts as caught only when the sweep catches it,
//! never because a unit test knew the guard's internals. It is ignored in the
//! ordinary test run (the `run` module already sweeps every scenario over a few
//! seeds); `scripts/mutants` runs it with `--ignored`.

use coord_sim::run::RunOptions;
use coord_sim::sweep::{load_all, sweep, SweepOptions};

use std::path::PathBuf;

/// The repository's root: the scenarios are under it.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Seeds of the mutation sweep, with and without swarm faults.
const MUTATION_SEEDS: std::ops::Range<u64> = 0..20;

#[test]
#[ignore = "the mutation run's test: scripts/mutants runs it with --ignored"]
fn the_standard_sweep_finds_no_failure() {
    // Goal: every scenario passes over the mutation seeds, with and without swarm
    // faults. Method: the library sweep over `scenarios/`, as `coordsim run` runs it.
    let scenarios = load_all(&[repo_root().join("scenarios")]).unwrap();
    let mut failures = Vec::new();
    for swarm in [false, true] {
        let mut options = SweepOptions::default();
        options.run = RunOptions {
            swarm,
            ..RunOptions::default()
        };
        // Every core: a mutant is judged by the whole sweep, and the mutation run's
        // hour is mostly this test. The report does not depend on the count.
        options.threads =
            std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN);
        let report = sweep(&scenarios, MUTATION_SEEDS, &options, || {});
        failures.extend(report.failures.iter().map(ToString::to_string));
        // As CI's main job runs it, with `--require-coverage`: a guard that never
        // fires any more (a compaction never made, a refusal never given) fails it.
        if !swarm {
            failures.extend(
                report
                    .coverage
                    .iter()
                    .filter(|(_, hits)| **hits == 0)
                    .map(|(probe, _)| format!("probe {probe} never reached")),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
