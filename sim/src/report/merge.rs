//! Shard summaries put back together (`coordsim merge`).
//!
//! The shards `1/N` … `N/N` of one sweep partition its seeds, so their summaries
//! add up to the whole sweep's: counts, tokens, costs, coverage and what the runs
//! survived are summed, and the failures are put back in scenario then seed order.
//! Before that the shards are checked: one sweep (the same scenario files, seed
//! range and shard count), disjoint (no shard twice) and complete (every shard
//! present, none interrupted). The wall-clock figures are the slowest shard's, as
//! if the shards ran side by side.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::summary::Summary;
use crate::sweep::Shard;

/// Why shard summaries cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no summary to merge")]
    Empty,
    /// A summary's shard is not `K/N`.
    #[error("{}: shard {shard:?} is not K/N", file.display())]
    BadShard {
        /// The summary's file.
        file: PathBuf,
        /// Its shard.
        shard: String,
    },
    /// A summary is of another sweep than the first one.
    #[error("{}: another sweep than {}: its {what} differ", file.display(), first.display())]
    OtherSweep {
        /// The summary's file.
        file: PathBuf,
        /// The first summary's file.
        first: PathBuf,
        /// `scenario files`, `seed range` or `shard count`.
        what: &'static str,
    },
    /// Two summaries are of the same shard.
    #[error("{}: shard {shard} is also {}: shards must be disjoint", file.display(), other.display())]
    Overlap {
        /// The summary's file.
        file: PathBuf,
        /// The file of the same shard.
        other: PathBuf,
        /// The shard.
        shard: String,
    },
    /// A shard's summary is missing.
    #[error("incomplete: no summary of shard{} {}", if missing.len() == 1 { "" } else { "s" }, missing.join(", "))]
    Missing {
        /// The shards missing, `K/N`.
        missing: Vec<String>,
    },
    /// A shard was stopped before its last seed.
    #[error("{}: the shard was interrupted, so its seeds are incomplete", file.display())]
    Interrupted {
        /// The summary's file.
        file: PathBuf,
    },
    /// A summary left its failures out (`--jsonl`).
    #[error("{}: holds no failures list (a --jsonl summary); use run --json or --report", file.display())]
    NoFailures {
        /// The summary's file.
        file: PathBuf,
    },
}

/// The summary of the whole sweep whose shards `summaries` (with their files) are.
pub fn merge(summaries: &[(PathBuf, Summary)]) -> Result<Summary, MergeError> {
    let (first_file, first) = summaries.first().ok_or(MergeError::Empty)?;
    let shard_of = |file: &PathBuf, summary: &Summary| {
        summary.shard().ok_or_else(|| MergeError::BadShard {
            file: file.clone(),
            shard: summary.shard.clone(),
        })
    };
    let count = shard_of(first_file, first)?.count();
    let mut seen: Vec<(Shard, &PathBuf)> = Vec::new();
    for (file, summary) in summaries {
        let shard = shard_of(file, summary)?;
        let other_sweep = |what| MergeError::OtherSweep {
            file: file.clone(),
            first: first_file.clone(),
            what,
        };
        if summary.scenario_files != first.scenario_files {
            return Err(other_sweep("scenario files"));
        }
        if summary.seeds != first.seeds {
            return Err(other_sweep("seed ranges"));
        }
        if shard.count() != count {
            return Err(other_sweep("shard counts"));
        }
        if let Some((_, other)) = seen.iter().find(|(known, _)| *known == shard) {
            return Err(MergeError::Overlap {
                file: file.clone(),
                other: (*other).clone(),
                shard: shard.to_string(),
            });
        }
        if summary.interrupted {
            return Err(MergeError::Interrupted { file: file.clone() });
        }
        if summary.failures.is_none() {
            return Err(MergeError::NoFailures { file: file.clone() });
        }
        seen.push((shard, file));
    }
    let present: BTreeSet<u64> = seen.iter().map(|(shard, _)| shard.index()).collect();
    let missing: Vec<String> = (1..=count)
        .filter(|index| !present.contains(index))
        .map(|index| format!("{index}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing });
    }

    let mut merged = first.clone();
    merged.line_type = None;
    merged.shard = Shard::WHOLE.to_string();
    let mut failures = Vec::new();
    let mut sim_time = Duration::ZERO;
    merged.seeds_run = 0;
    merged.seeds_failed = 0;
    merged.cost_usd = 0.0;
    merged.prompt_tokens = 0;
    merged.cache_read_tokens = 0;
    merged.wall_seconds = 0.0;
    merged.coverage.values_mut().for_each(|hits| *hits = 0);
    merged.counts = Default::default();
    for (_, summary) in summaries {
        merged.seeds_run += summary.seeds_run;
        merged.seeds_failed += summary.seeds_failed;
        // Virtual time is a whole number of nanoseconds: summed as such, the total
        // is the unsharded sweep's to the last bit.
        sim_time += Duration::from_nanos((summary.sim_seconds.max(0.0) * 1e9).round() as u64);
        merged.cost_usd += summary.cost_usd;
        merged.prompt_tokens += summary.prompt_tokens;
        merged.cache_read_tokens += summary.cache_read_tokens;
        merged.wall_seconds = merged.wall_seconds.max(summary.wall_seconds);
        for (probe, hits) in &summary.coverage {
            *merged.coverage.entry(probe.clone()).or_default() += hits;
        }
        merged.counts.add(&summary.counts);
        failures.extend(summary.failures().iter().cloned());
    }
    // Scenario then seed order, as the unsharded sweep reports them; a seed's own
    // failures keep their order (the sort is stable).
    let scenario_index = |scenario: &str| {
        first
            .scenario_files
            .iter()
            .position(|file| file == scenario)
            .unwrap_or(usize::MAX)
    };
    failures.sort_by_key(|failure| (scenario_index(&failure.scenario), failure.seed));
    merged.failures = Some(failures);
    merged.sim_seconds = sim_time.as_secs_f64();
    let per_wall = |amount: f64| {
        if merged.wall_seconds > 0.0 {
            amount / merged.wall_seconds
        } else {
            0.0
        }
    };
    merged.seeds_per_second = per_wall(merged.seeds_run as f64);
    merged.sim_seconds_per_wall_second = per_wall(merged.sim_seconds);
    merged.cache_hit_ratio = if merged.prompt_tokens == 0 {
        0.0
    } else {
        merged.cache_read_tokens as f64 / merged.prompt_tokens as f64
    };
    Ok(merged)
}
