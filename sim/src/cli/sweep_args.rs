//! What `run` and `check-determinism` share: how seeds are run, seed ranges, and the
//! progress bar.

use clap::Args;
use coord_sim::run::RunOptions;
use coord_sim::scenario::WorldKind;
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
    /// The simulated world, over the scenario's `[settings] world`: `tokio` or
    /// `turmoil` (`docs/worlds.md`).
    #[arg(long, value_name = "WORLD", value_parser = parse_world)]
    pub world: Option<WorldKind>,
    /// The turmoil world's tick in ms, over the scenario's `[settings]
    /// turmoil_tick_ms`: a coarser tick costs fewer steps.
    #[arg(long, value_name = "MS")]
    pub turmoil_tick_ms: Option<NonZeroU64>,
    /// Threads that run seeds side by side (each seed stays on one thread). The
    /// report is the same whatever the count; only timings change.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_thread_count)]
    pub threads: NonZeroUsize,
}

impl SweepArgs {
    /// The sweep options these flags ask for, over `shard`.
    pub fn options(&self, shard: Shard) -> SweepOptions {
        let mut options = SweepOptions::default();
        options.run = run_options(self.swarm);
        options.run.world = self.world;
        options.run.turmoil_tick_ms = self.turmoil_tick_ms;
        options.threads = self.threads;
        options.shard = shard;
        options
    }
}

/// The run options for `--swarm`, every other option at its default.
#[allow(
    clippy::needless_update,
    reason = "RunOptions gains fields; they must keep their defaults here"
)]
pub fn run_options(swarm: bool) -> RunOptions {
    RunOptions {
        swarm,
        ..RunOptions::default()
    }
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
        return Err(format!("the range {text} holds no seed"));
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
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "scenario"), "1 scenario");
        assert_eq!(counted(0, "run"), "0 runs");
        assert_eq!(counted(38, "scenario"), "38 scenarios");
    }
}
