//! `coordsim run`: the seed sweep.

use anyhow::Result;
use clap::Args;
use coord_sim::report::{rerun_in, Summary, SweepScope};
use coord_sim::sweep::{load_all, sweep_until, Failure, Shard};
use serde::Serialize;
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use super::report::ReportDirArgs;
use super::stdout::{errln, outln};
use super::sweep_args::{
    counted, parse_seed, parse_seed_range, progress_bar, refuse_or_skip, skipped_line, SweepArgs,
};
use super::sweep_control::{SweepControl, SweepEnd};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files, or folders searched recursively for `*.toml`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Seeds to run, as `A..B` (B excluded).
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, conflicts_with = "seed")]
    seeds: Option<Range<u64>>,
    /// One seed to run.
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    seed: Option<u64>,
    #[command(flatten)]
    sweep: SweepArgs,
    /// Run only shard K of N: the seeds s with (s - A) % N == K - 1. The N shards
    /// together run exactly the seeds of the whole range.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Print one JSON object instead of text.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// Print JSON Lines instead of text: one object per failure as it is found,
    /// then one summary object (the `--json` keys but `failures`).
    #[arg(long)]
    jsonl: bool,
    /// Print how often each of the runtime's guards (probes) fired over the sweep.
    #[arg(long)]
    coverage: bool,
    /// Fail when a probe was never reached: a guard no run exercised is a guard
    /// whose regression the sweep cannot catch. Implies `--coverage`.
    #[arg(long)]
    require_coverage: bool,
    #[command(flatten)]
    target: super::target::TargetArgs,
    #[command(flatten)]
    report: ReportDirArgs,
}

/// One `--jsonl` line for a failure found.
#[derive(Serialize)]
struct JsonlFailure<'a> {
    #[serde(rename = "type")]
    line_type: &'static str,
    #[serde(flatten)]
    failure: &'a Failure,
}

/// How a failure found is printed, as it is found.
fn failure_line(failure: &Failure, jsonl: bool) -> String {
    if jsonl {
        let line = JsonlFailure {
            line_type: "failure",
            failure,
        };
        serde_json::to_string(&line).expect("a failure is strings and numbers")
    } else {
        failure.to_string()
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    if let Some(code) = super::target::run(&args.paths, &args.target, args.json, &args.report)? {
        return Ok(code);
    }
    let seeds = match (args.seeds, args.seed) {
        (Some(range), _) => range,
        (None, Some(seed)) => seed..seed + 1,
        (None, None) => 0..1,
    };
    let shard = args.shard.unwrap_or(Shard::WHOLE);
    let options = args.sweep.options(shard);
    let (scenarios, skipped) = refuse_or_skip(load_all(&args.paths)?, &options.run, &args.paths)?;
    let text = !args.json && !args.jsonl;
    if text {
        for refusal in &skipped {
            outln!("{}", skipped_line(refusal))?;
        }
    }
    let total = (scenarios.len() as u64).saturating_mul(options.shard.seed_count(seeds.clone()));
    let progress = progress_bar(total, text);
    let control = SweepControl::install()?;
    let started = Instant::now();
    let report = sweep_until(
        &scenarios,
        seeds.clone(),
        &options,
        &|| control.should_stop(),
        |failures| {
            progress.inc(1);
            if args.json {
                return;
            }
            for failure in failures {
                control.print(&failure_line(failure, args.jsonl));
            }
        },
    );
    progress.finish_and_clear();
    let end = control.finish(report.stopped_early)?;
    let wall_seconds = started.elapsed().as_secs_f64();
    let per_wall = |amount: f64| {
        if wall_seconds > 0.0 {
            amount / wall_seconds
        } else {
            0.0
        }
    };

    let skipped: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    let scope = SweepScope {
        scenario_files: scenarios
            .iter()
            .map(|scenario| scenario.path.display().to_string())
            .collect(),
        seeds: seeds.clone(),
        shard,
        skipped: &skipped,
    };
    let summary = Summary::of_sweep(&report, &scope, wall_seconds, end.interrupted());
    let report_seconds = args
        .report
        .write(&summary, &scenarios, &rerun_in(&scenarios, &options.run))?
        .as_secs_f64();
    if args.json || args.jsonl {
        let mut json = summary.clone();
        if args.jsonl {
            json.line_type = Some("summary".to_owned());
            json.failures = None;
        }
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        } else {
            outln!("{}", serde_json::to_string(&json)?)?;
        }
    } else {
        let skipped_note = match skipped.len() {
            0 => String::new(),
            count => format!(" ({} skipped)", counted(count as u64, "scenario")),
        };
        let shard = match args.shard {
            Some(shard) => format!(" shard {shard}"),
            None => String::new(),
        };
        if args.coverage || args.require_coverage {
            let reached = report.coverage.values().filter(|hits| **hits > 0).count();
            outln!("probes reached: {reached} of {}", report.coverage.len())?;
            for (probe, hits) in &report.coverage {
                let mark = if *hits == 0 { "  NEVER REACHED" } else { "" };
                outln!("  {probe:<26} {hits:>8}{mark}")?;
            }
        }
        let ran_of = match end {
            SweepEnd::Complete => String::new(),
            SweepEnd::Interrupted(_) => format!(" (of {total})"),
        };
        outln!(
            "{}{skipped_note} × seeds {}..{}{shard}: {}{ran_of}, {} failed, {:.2} s wall ({:.0} seeds/s), {:.1} s simulated{}",
            counted(report.scenarios as u64, "scenario"),
            seeds.start,
            seeds.end,
            counted(report.seeds_run, "run"),
            report.seeds_failed,
            wall_seconds,
            per_wall(report.seeds_run as f64),
            report.sim_seconds,
            end.note()
        )?;
        if args.report.wanted() {
            outln!(
                "report written in {report_seconds:.2} s ({:.1}% of the sweep's wall time)",
                100.0 * report_seconds / wall_seconds.max(f64::EPSILON)
            )?;
        }
    }
    if let SweepEnd::Interrupted(signal) = end {
        return Ok(signal.exit_code());
    }
    let unreached: Vec<&str> = report
        .coverage
        .iter()
        .filter(|(_, hits)| **hits == 0)
        .map(|(probe, _)| *probe)
        .collect();
    if args.require_coverage && !unreached.is_empty() {
        errln!(
            "error: {} never reached: {}",
            counted(unreached.len() as u64, "probe"),
            unreached.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(if report.seeds_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
