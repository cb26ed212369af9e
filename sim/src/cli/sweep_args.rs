//! What `run` and `check-determinism` share: how seeds are run, seed ranges, and the
//! progress bar.

use anyhow::bail;
use clap::Args;
use coord_sim::run::{disk_refusal, DiskRefusal, RunOptions, VcsSetting};
use coord_sim::scenario::{DiskSetting, LoadedScenario, WorldKind};
use coord_sim::sweep::{Shard, SweepOptions};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::num::{NonZeroU64, NonZeroUsize};
use std::ops::Range;

/// How the seeds of a sweep are run.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Swarm mode: each seed also chooses which of the scenario's fault kinds are on,
    /// and draws a fault schedule from them.
    #[arg(long)]
    pub swarm: bool,
    /// Threads that run seeds side by side (each seed stays on one thread). The
    /// report is the same whatever the count; only timings change.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_thread_count)]
    pub threads: NonZeroUsize,
    #[command(flatten)]
    pub world: WorldArgs,
}

/// The world a seed runs in: `--world`, `--turmoil-tick-ms` and `--disk`, each
/// overriding the scenario's setting.
#[derive(Debug, Args)]
pub struct WorldArgs {
    /// The simulated world, over the scenario's `[settings] world`: `tokio` or
    /// `turmoil` (`docs/worlds.md`).
    #[arg(long, value_name = "WORLD", value_parser = parse_world)]
    pub world: Option<WorldKind>,
    /// The turmoil world's tick in ms, over the scenario's `[settings]
    /// turmoil_tick_ms`: a coarser tick costs fewer steps.
    #[arg(long, value_name = "MS")]
    pub turmoil_tick_ms: Option<NonZeroU64>,
    /// The runtime's disk, overriding each scenario's `disk` setting: `memory` (the
    /// in-memory disk, every fault kind; the tokio world's own), `turmoil`
    /// (turmoil's simulated filesystem, every fault kind; the turmoil world's own)
    /// `real` (the production disk on a temp directory; refuses
    /// `coordinator-crash` and `disk_honours_nofollow = false`) or `real-on-memory`
    /// (the production disk's calls made on the in-memory disk, every fault kind).
    #[arg(long, value_name = "DISK")]
    pub disk: Option<DiskSetting>,
    /// The version control the runtime's worktrees are made with: `git` (the
    /// production `GitVcs` on a real repository; the real disk's own, and only
    /// there) or `sim` (the simulated copy-on-write checkout; every other disk's).
    #[arg(long, value_name = "VCS")]
    pub vcs: Option<VcsSetting>,
}

impl SweepArgs {
    /// The sweep options these flags ask for, over `shard`.
    pub fn options(&self, shard: Shard) -> SweepOptions {
        let mut options = SweepOptions::default();
        options.run = run_options(self.swarm, &self.world);
        options.threads = self.threads;
        options.shard = shard;
        options
    }
}

/// The run options for `--swarm` and the world flags, every other option at its
/// default.
#[allow(
    clippy::needless_update,
    reason = "RunOptions gains fields; they must keep their defaults here"
)]
pub fn run_options(swarm: bool, world: &WorldArgs) -> RunOptions {
    RunOptions {
        swarm,
        disk: world.disk,
        world: world.world,
        turmoil_tick_ms: world.turmoil_tick_ms,
        vcs: world.vcs,
        ..RunOptions::default()
    }
}

/// Sets aside the scenarios the chosen disk cannot run, before any seed runs. A
/// scenario file named on the command line is an error (the caller asked for that
/// very run); one found by searching a folder is skipped, and comes back with its
/// reason for the report, so a folder sweep on the real disk runs what it can.
pub fn refuse_or_skip(
    scenarios: Vec<LoadedScenario>,
    options: &RunOptions,
    named: &[std::path::PathBuf],
) -> anyhow::Result<(Vec<LoadedScenario>, Vec<DiskRefusal>)> {
    let mut runnable = Vec::with_capacity(scenarios.len());
    let mut skipped = Vec::new();
    for scenario in scenarios {
        match disk_refusal(&scenario, options) {
            None => runnable.push(scenario),
            Some(refusal) if named.contains(&scenario.path) => bail!(refusal),
            Some(refusal) => skipped.push(refusal),
        }
    }
    Ok((runnable, skipped))
}

/// The line that reports a skipped scenario.
pub fn skipped_line(refusal: &DiskRefusal) -> String {
    format!("SKIPPED {refusal}")
}

/// Parses a `--world` name.
pub fn parse_world(text: &str) -> Result<WorldKind, String> {
    match text {
        "tokio" => Ok(WorldKind::Tokio),
        "turmoil" => Ok(WorldKind::Turmoil),
        _ => Err(format!("expected tokio or turmoil, got {text:?}")),
    }
}

fn parse_thread_count(text: &str) -> Result<NonZeroUsize, String> {
    text.parse()
        .map_err(|_| format!("expected a thread count of at least 1, got {text:?}"))
}

/// Parses the seed of `--seed N`. A sweep's seeds are a range `N..N + 1` with its
/// end excluded, so the last `u64` cannot be one: it is refused by name rather than
/// overflowing into a range that holds no seed.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let seed: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a seed number (0 to {})", u64::MAX - 1))?;
    if seed == u64::MAX {
        return Err(format!(
            "seed {seed} is past the last seed a sweep can run ({}): seed ranges end \
             before their last number",
            u64::MAX - 1
        ));
    }
    Ok(seed)
}

/// Parses `A..B` (B excluded) into a non-empty seed range.
pub fn parse_seed_range(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text
        .split_once("..")
        .ok_or_else(|| format!("expected A..B, got {text:?}"))?;
    let start: u64 = start
        .parse()
        .map_err(|_| format!("{start:?} is not a seed number"))?;
    let end: u64 = end
        .parse()
        .map_err(|_| format!("{end:?} is not a seed number"))?;
    if start >= end {
        return Err(format!(
            "the range {text} holds no seed: expected A..B with A below B (B excluded)"
        ));
    }
    Ok(start..end)
}

/// A progress bar over `total` seeds on stderr, drawn only when `shown` and stderr is
/// a terminal, so logs and pipes never receive its escape codes.
pub fn progress_bar(total: u64, shown: bool) -> ProgressBar {
    if !shown || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}")
            .expect("the progress template is valid"),
    );
    bar
}

/// `count` and `noun`, plural unless `count` is 1: `1 scenario`, `38 scenarios`.
pub fn counted(count: u64, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        count => format!("{count} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::{counted, parse_seed, parse_seed_range};

    #[test]
    fn the_last_u64_is_no_sweep_seed_and_empty_ranges_are_refused() {
        assert_eq!(parse_seed("18446744073709551614"), Ok(u64::MAX - 1));
        assert!(parse_seed("18446744073709551615")
            .unwrap_err()
            .contains("past the last seed"));
        assert!(parse_seed("-1").is_err());
        assert!(parse_seed_range("5..5")
            .unwrap_err()
            .contains("holds no seed"));
        assert!(parse_seed_range("6..5").is_err());
        assert_eq!(parse_seed_range("0..18446744073709551615"), Ok(0..u64::MAX));
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "scenario"), "1 scenario");
        assert_eq!(counted(0, "run"), "0 runs");
        assert_eq!(counted(38, "scenario"), "38 scenarios");
    }
}
