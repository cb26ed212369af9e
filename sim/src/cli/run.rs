//! `coordsim run`: the seed sweep.

use anyhow::{bail, Result};
use clap::Args;
use coord_sim::sweep::{load_all, sweep};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files, or folders searched recursively for `*.toml`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Seeds to run, as `A..B` (B excluded).
    #[arg(long, value_parser = parse_seed_range, conflicts_with = "seed")]
    seeds: Option<Range<u64>>,
    /// One seed to run.
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_seed_range(text: &str) -> Result<Range<u64>, String> {
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

#[derive(Serialize)]
struct JsonReport<'a> {
    scenarios: usize,
    seeds_run: u64,
    seeds_failed: u64,
    wall_seconds: f64,
    seeds_per_second: f64,
    sim_seconds: f64,
    sim_seconds_per_wall_second: f64,
    failures: &'a [coord_sim::sweep::Failure],
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let seeds = match (args.seeds, args.seed) {
        (Some(range), _) => range,
        (None, Some(seed)) => seed..seed + 1,
        (None, None) => 0..1,
    };
    let scenarios = load_all(&args.paths)?;
    if scenarios.is_empty() {
        bail!("no scenarios to run");
    }
    let total = scenarios.len() as u64 * (seeds.end - seeds.start);
    let progress = if !args.json && std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}")
                .expect("the progress template is valid"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let started = Instant::now();
    let report = sweep(&scenarios, seeds.clone(), || progress.inc(1));
    progress.finish_and_clear();
    let wall_seconds = started.elapsed().as_secs_f64();
    let per_wall = |amount: f64| {
        if wall_seconds > 0.0 {
            amount / wall_seconds
        } else {
            0.0
        }
    };

    if args.json {
        let json = JsonReport {
            scenarios: report.scenarios,
            seeds_run: report.seeds_run,
            seeds_failed: report.seeds_failed,
            wall_seconds,
            seeds_per_second: per_wall(report.seeds_run as f64),
            sim_seconds: report.sim_seconds,
            sim_seconds_per_wall_second: per_wall(report.sim_seconds),
            failures: &report.failures,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for failure in &report.failures {
            println!(
                "FAIL {} seed {}: {}: {}\n  repro: {}",
                failure.scenario, failure.seed, failure.invariant, failure.detail, failure.repro
            );
        }
        println!(
            "{} scenarios × seeds {}..{}: {} runs, {} failed, {:.2} s wall ({:.0} seeds/s), {:.1} s simulated",
            report.scenarios,
            seeds.start,
            seeds.end,
            report.seeds_run,
            report.seeds_failed,
            wall_seconds,
            per_wall(report.seeds_run as f64),
            report.sim_seconds
        );
    }
    Ok(if report.seeds_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
