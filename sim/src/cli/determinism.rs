//! `coordsim check-determinism`: every seed run twice, traces compared.

use anyhow::Result;
use clap::Args;
use coord_sim::sweep::{
    check_determinism_until, load_all, Divergence, SeedCheck, Shard, TraceDifference,
};
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;

use super::replay::entry_line;
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
}

/// The lines that show where a divergent seed's two traces part.
fn describe(divergence: &Divergence) -> String {
    let head = format!("DIVERGED {} seed {}", divergence.scenario, divergence.seed);
    let body = match &divergence.difference {
        TraceDifference::Entry {
            index,
            first,
            second,
        } => format!(
            "{head}: trace entry {index} differs\n  first run:  {}\n  second run: {}",
            entry_line(first),
            entry_line(second)
        ),
        TraceDifference::Prefix {
            index,
            first_is_longer,
            extra,
        } => {
            let (shorter, longer) = if *first_is_longer {
                ("second", "first")
            } else {
                ("first", "second")
            };
            format!(
                "{head}: the {shorter} run's trace ({index} entries) is a prefix of the \
                 {longer} run's, which goes on with entry {index}\n  {longer} run: {}",
                entry_line(extra)
            )
        }
        TraceDifference::HashOnly {
            first_hash,
            second_hash,
        } => format!(
            "{head}: the traces agree entry by entry, but their hashes differ \
             ({first_hash:016x} vs {second_hash:016x})"
        ),
    };
    format!("{body}\n  repro: {}", divergence.repro)
}

pub fn run(args: DeterminismArgs) -> Result<ExitCode> {
    let options = args.sweep.options(Shard::WHOLE);
    let (scenarios, skipped) = refuse_or_skip(load_all(&args.paths)?, &options.run, &args.paths)?;
    for refusal in &skipped {
        outln!("{}", skipped_line(refusal))?;
    }
    let seeds = args.seeds;
    let total = (scenarios.len() as u64).saturating_mul(options.shard.seed_count(seeds.clone()));
    let progress = progress_bar(total, true);
    let control = SweepControl::install()?;
    let report = check_determinism_until(
        &scenarios,
        seeds.clone(),
        &options,
        &|| control.should_stop(),
        |check| {
            progress.inc(1);
            match check {
                SeedCheck::Agreed => {}
                SeedCheck::Diverged(divergence) => control.print(&describe(divergence)),
                SeedCheck::Harness(failure) => control.print(&failure.to_string()),
            }
        },
    );
    progress.finish_and_clear();
    let end = control.finish(report.stopped_early)?;
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
    if let SweepEnd::Interrupted(signal) = end {
        return Ok(signal.exit_code());
    }
    Ok(if report.seeds_agreed == report.seeds_run {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
