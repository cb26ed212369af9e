//! The summary of a sweep: the object `coordsim run --json` prints and a report's
//! `summary.json` holds.
//!
//! Besides the figures, it names what the sweep covered (the scenario files, the
//! seed range and the shard), so that a summary alone is enough to write the
//! report's JUnit file and index, and so that `coordsim merge` can check that a set
//! of shard summaries is disjoint and complete.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;

use super::counts::RunCounts;
use crate::sweep::{Failure, Shard, SweepReport};

/// A seed range `start..end` (end excluded), as it is written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRange {
    /// The first seed.
    pub start: u64,
    /// One past the last seed.
    pub end: u64,
}

impl From<Range<u64>> for SeedRange {
    fn from(range: Range<u64>) -> SeedRange {
        SeedRange {
            start: range.start,
            end: range.end,
        }
    }
}

impl SeedRange {
    /// As a `Range`.
    pub fn range(&self) -> Range<u64> {
        self.start..self.end
    }
}

/// One sweep's results: see the module header. The key order is the `--json`
/// key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `summary` in `--jsonl` output, where it tells the last line from the others.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub line_type: Option<String>,
    /// Scenario files run.
    pub scenarios: usize,
    /// Those files, as the failures name them, in the order they ran.
    pub scenario_files: Vec<String>,
    /// The seed range asked for.
    pub seeds: SeedRange,
    /// The part of the range this sweep ran, `K/N` (`1/1` for all of it).
    pub shard: String,
    /// Scenarios the chosen disk cannot run, with the reason, that were not run.
    pub skipped: Vec<String>,
    /// Seeds run, over all scenarios.
    pub seeds_run: u64,
    /// Seeds with at least one failure.
    pub seeds_failed: u64,
    /// Wall-clock time of the sweep.
    pub wall_seconds: f64,
    /// Seeds run per wall-clock second.
    pub seeds_per_second: f64,
    /// Virtual time covered by all runs.
    pub sim_seconds: f64,
    /// Virtual seconds per wall-clock second.
    pub sim_seconds_per_wall_second: f64,
    /// Whether SIGINT or SIGTERM stopped the sweep before its last seed.
    pub interrupted: bool,
    /// Every failure; left out of the `--jsonl` summary, whose earlier lines hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<Vec<Failure>>,
    /// What every run's model calls cost at the built-in prices, in US dollars.
    pub cost_usd: f64,
    /// Prompt tokens of every run.
    pub prompt_tokens: u64,
    /// Of those, tokens read from the simulated cache.
    pub cache_read_tokens: u64,
    /// Cache reads over prompt tokens.
    pub cache_hit_ratio: f64,
    /// Hits per probe, every probe listed.
    pub coverage: BTreeMap<String, u64>,
    /// What the runs survived: faults fired by kind, tasks killed, messages lost
    /// loudly, cache breaks.
    pub counts: RunCounts,
}

/// What a sweep ran, besides what it found.
#[derive(Debug, Clone)]
pub struct SweepScope<'a> {
    /// The scenario files run, in order.
    pub scenario_files: Vec<String>,
    /// The seed range asked for.
    pub seeds: Range<u64>,
    /// The part of the range run.
    pub shard: Shard,
    /// Scenarios skipped, with the reason.
    pub skipped: &'a [String],
}

impl Summary {
    /// The summary of `report`, a sweep over `scope` that took `wall_seconds`.
    pub fn of_sweep(
        report: &SweepReport,
        scope: &SweepScope<'_>,
        wall_seconds: f64,
        interrupted: bool,
    ) -> Summary {
        let per_wall = |amount: f64| {
            if wall_seconds > 0.0 {
                amount / wall_seconds
            } else {
                0.0
            }
        };
        Summary {
            line_type: None,
            scenarios: report.scenarios,
            scenario_files: scope.scenario_files.clone(),
            seeds: scope.seeds.clone().into(),
            shard: scope.shard.to_string(),
            skipped: scope.skipped.to_vec(),
            seeds_run: report.seeds_run,
            seeds_failed: report.seeds_failed,
            wall_seconds,
            seeds_per_second: per_wall(report.seeds_run as f64),
            sim_seconds: report.sim_seconds,
            sim_seconds_per_wall_second: per_wall(report.sim_seconds),
            interrupted,
            failures: Some(report.failures.clone()),
            cost_usd: report.cost_usd,
            prompt_tokens: report.prompt_tokens,
            cache_read_tokens: report.cache_read_tokens,
            cache_hit_ratio: report.cache_hit_ratio(),
            coverage: report
                .coverage
                .iter()
                .map(|(probe, hits)| ((*probe).to_owned(), *hits))
                .collect(),
            counts: report.counts.clone(),
        }
    }

    /// The summary of a sweep that checked something else than invariants
    /// (`check-determinism`): `seeds_run` seeds over `scope`, and the seeds that
    /// failed the check as `failures`; no costs, coverage or counts.
    pub fn of_check(
        scope: &SweepScope<'_>,
        seeds_run: u64,
        failures: Vec<Failure>,
        wall_seconds: f64,
        interrupted: bool,
    ) -> Summary {
        let report = SweepReport {
            scenarios: scope.scenario_files.len(),
            seeds_run,
            seeds_failed: failures
                .iter()
                .map(|failure| (&failure.scenario, failure.seed))
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64,
            failures,
            ..SweepReport::default()
        };
        Summary::of_sweep(&report, scope, wall_seconds, interrupted)
    }

    /// The failures, none when the summary left them out (`--jsonl`).
    pub fn failures(&self) -> &[Failure] {
        self.failures.as_deref().unwrap_or_default()
    }

    /// The shard, parsed back; `None` when the text is not `K/N`.
    pub fn shard(&self) -> Option<Shard> {
        self.shard.parse().ok()
    }

    /// The seeds each scenario ran, in order: the shard's seeds of the range, all
    /// of them unless the sweep was stopped early, when the seeds run are the first
    /// `seeds_run` in scenario-then-seed order. Computed, never listed, so a summary
    /// of a huge range costs nothing here.
    pub fn seeds_per_scenario(&self) -> Vec<ScenarioSeeds<'_>> {
        let shard = self.shard().unwrap_or(Shard::WHOLE);
        let range = self.seeds.range();
        let per_scenario = shard.seed_count(range.clone());
        let mut left = self.seeds_run;
        self.scenario_files
            .iter()
            .map(|file| {
                let seeds_run = left.min(per_scenario);
                left -= seeds_run;
                let seeds = (seeds_run > 0).then(|| {
                    (
                        shard.nth_seed(&range, 0),
                        shard.nth_seed(&range, seeds_run - 1),
                    )
                });
                ScenarioSeeds {
                    scenario: file,
                    seeds_run,
                    first_and_last: seeds,
                }
            })
            .collect()
    }
}

/// The seeds one scenario of a sweep ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScenarioSeeds<'a> {
    /// The scenario file.
    pub scenario: &'a str,
    /// How many seeds it ran.
    pub seeds_run: u64,
    /// Its first and last seed, when it ran any.
    pub first_and_last: Option<(u64, u64)>,
}
