//! `coordsim check-determinism`: every seed run twice, traces compared.

use anyhow::Result;
use clap::Args;
use coord_sim::report::{rerun_in, Summary, SweepScope};
use coord_sim::sweep::{check_determinism_until, load_all, Divergence, Failure, SeedCheck, Shard};
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use super::report::ReportDirArgs;
use super::stdout::outln;
use super::sweep_args::{
    counted, parse_seed_range, progress_bar, refuse_or_skip, skipped_line, SweepArgs,
};
use super::sweep_control::{SweepControl, SweepEnd};

#[derive(Debug, Args)]
pub struct DeterminismArgs {
    /// Scenario files, or folders searched recursively for `*.toml`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Seeds to check, as `A..B` (B excluded).
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range)]
    seeds: Range<u64>,
    #[command(flatten)]
    sweep: SweepArgs,
    /// Print the check's report as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    report: ReportDirArgs,
}

/// A divergent seed as a report's failure: invariant `determinism`.
fn divergence_failure(divergence: &Divergence) -> Failure {
    let head = format!("DIVERGED {} seed {}", divergence.scenario, divergence.seed);
    let described = describe(divergence);
    let detail = described
        .strip_prefix(&head)
        .unwrap_or(&described)
        .trim_start_matches(": ");
    let detail = detail.split("\n  repro:").next().unwrap_or(detail);
    Failure {
        scenario: divergence.scenario.clone(),
        seed: divergence.seed,
        invariant: "determinism".to_owned(),
        detail: detail.to_owned(),
        repro: divergence.repro.clone(),
        repro_cargo: None,
        shrink: None,
        shrink_cargo: None,
    }
}

/// The lines that show where a divergent seed's two traces part.
fn describe(divergence: &Divergence) -> String {
    format!(
        "DIVERGED {} seed {}: {}\n  repro: {}",
        divergence.scenario,
        divergence.seed,
        divergence.difference.describe(),
        divergence.repro
    )
}

pub fn run(args: DeterminismArgs) -> Result<ExitCode> {
    let options = args.sweep.options(Shard::WHOLE);
    let (scenarios, skipped) = refuse_or_skip(load_all(&args.paths)?, &options.run, &args.paths)?;
    if !args.json {
        for refusal in &skipped {
            outln!("{}", skipped_line(refusal))?;
        }
    }
    let seeds = args.seeds;
    let total = (scenarios.len() as u64).saturating_mul(options.shard.seed_count(seeds.clone()));
    let progress = progress_bar(total, !args.json);
    let control = SweepControl::install()?;
    let started = Instant::now();
    let report = check_determinism_until(
        &scenarios,
        seeds.clone(),
        &options,
        &|| control.should_stop(),
        |check| {
            progress.inc(1);
            if args.json {
                return;
            }
            match check {
                SeedCheck::Agreed => {}
                SeedCheck::Diverged(divergence) => control.print(&describe(divergence)),
                SeedCheck::Harness(failure) => control.print(&failure.to_string()),
            }
        },
    );
    progress.finish_and_clear();
    let end = control.finish(report.stopped_early)?;
    let wall_seconds = started.elapsed().as_secs_f64();
    if args.report.wanted() {
        let skipped: Vec<String> = skipped.iter().map(ToString::to_string).collect();
        let scope = SweepScope {
            scenario_files: scenarios
                .iter()
                .map(|scenario| scenario.path.display().to_string())
                .collect(),
            seeds: seeds.clone(),
            shard: Shard::WHOLE,
            skipped: &skipped,
        };
        let failures: Vec<Failure> = report
            .divergences
            .iter()
            .map(divergence_failure)
            .chain(report.harness_failures.iter().cloned())
            .collect();
        let summary = Summary::of_check(
            &scope,
            report.seeds_run,
            failures,
            wall_seconds,
            end.interrupted(),
        );
        args.report
            .write(&summary, &scenarios, &rerun_in(&scenarios, &options.run))?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
        "{} × seeds {}..{}, each run twice: {} of {} seeds agreed, {} diverged, {} could not run{}",
        counted(report.scenarios as u64, "scenario"),
        seeds.start,
        seeds.end,
        report.seeds_agreed,
        report.seeds_run,
        report.divergences.len(),
        report.harness_failures.len(),
            end.note()
        )?;
    }
    if let SweepEnd::Interrupted(signal) = end {
        return Ok(signal.exit_code());
    }
    Ok(if report.seeds_agreed == report.seeds_run {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
