//! Sweeps: every scenario under a set of paths, over a range of seeds.

use serde::Serialize;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use crate::run::{repro_command, run_seed, RunError, RunOptions};
use crate::scenario::{LoadedScenario, ScenarioError};

/// One failed seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The scenario file.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The broken invariant, or `harness` when the run itself could not be carried out.
    pub invariant: String,
    /// What went wrong.
    pub detail: String,
    /// The command that reproduces it.
    pub repro: String,
}

/// What a sweep found. `wall_seconds` and rates are filled in by the caller, which
/// owns the wall clock.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    /// Scenario files run.
    pub scenarios: usize,
    /// Seeds run, over all scenarios.
    pub seeds_run: u64,
    /// Seeds with at least one failure.
    pub seeds_failed: u64,
    /// Virtual time covered by all runs.
    pub sim_seconds: f64,
    /// Every failure, in scenario then seed order.
    pub failures: Vec<Failure>,
}

/// Why a sweep could not start.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A path could not be listed.
    #[error("cannot list scenarios under {path}: {source}")]
    Discover {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A scenario file is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// No scenario file was found.
    #[error("no scenario (*.toml) files under {0}")]
    Empty(String),
}

/// Loads every scenario under `paths`, failing on the first invalid one.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<LoadedScenario>, SweepError> {
    let files = crate::scenario::discover(paths).map_err(|source| SweepError::Discover {
        path: paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
        source,
    })?;
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(SweepError::Empty(shown.join(" ")));
    }
    files
        .iter()
        .map(|file| LoadedScenario::load(file).map_err(SweepError::from))
        .collect()
}

/// Runs every scenario over `seeds`, calling `on_seed` after each seed (for progress).
pub fn sweep(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    mut on_seed: impl FnMut(),
) -> SweepReport {
    let mut report = SweepReport {
        scenarios: scenarios.len(),
        ..SweepReport::default()
    };
    let mut sim_time = Duration::ZERO;
    for scenario in scenarios {
        for seed in seeds.clone() {
            report.seeds_run += 1;
            let scenario_name = scenario.path.display().to_string();
            let failures: Vec<Failure> = match run_seed(scenario, seed, &RunOptions::default()) {
                Ok(run) => {
                    sim_time += run.sim_duration;
                    run.violations
                        .into_iter()
                        .map(|violation| Failure {
                            scenario: scenario_name.clone(),
                            seed,
                            invariant: violation.invariant.to_owned(),
                            detail: violation.detail,
                            repro: repro_command(&scenario.path, seed, &RunOptions::default()),
                        })
                        .collect()
                }
                Err(error @ (RunError::TempDir(_) | RunError::Runtime(_))) => vec![Failure {
                    scenario: scenario_name.clone(),
                    seed,
                    invariant: "harness".to_owned(),
                    detail: error.to_string(),
                    repro: repro_command(&scenario.path, seed, &RunOptions::default()),
                }],
            };
            if !failures.is_empty() {
                report.seeds_failed += 1;
            }
            report.failures.extend(failures);
            on_seed();
        }
    }
    report.sim_seconds = sim_time.as_secs_f64();
    report
}
