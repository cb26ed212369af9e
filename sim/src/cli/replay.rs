//! `coordsim replay`: one seed of one scenario, event by event, or how faithfully
//! it reproduces its recorded session (`--fidelity`).

use anyhow::{bail, Result};
use clap::Args;
use coord_sim::check::Violation;
use coord_sim::fidelity::measure;
use coord_sim::run::run_seed;
use coord_sim::sweep::load_all;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::stdout::{errln, write_stdout};
use super::sweep_args::{run_options, WorldArgs};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The scenario file (or a folder holding exactly one scenario).
    scenario: PathBuf,
    /// The seed to run (with `--fidelity`, default 0).
    #[arg(long, value_name = "N", required_unless_present = "fidelity")]
    seed: Option<u64>,
    /// Swarm mode, as the seed was run in the sweep.
    #[arg(long, conflicts_with = "fidelity")]
    swarm: bool,
    #[command(flatten)]
    world: WorldArgs,
    /// Print only the trace, as JSON Lines: one trace entry per line.
    #[arg(long, conflicts_with = "fidelity")]
    trace: bool,
    /// Compare the replay with the recorded session the scenario's `[recording]`
    /// names: the order of spawns, tool calls and notifications per agent, and the
    /// simulated cache's predicted usage against the recorded usage.
    #[arg(long)]
    fidelity: bool,
    /// With `--fidelity`, print the report as JSON.
    #[arg(long, requires = "fidelity")]
    json: bool,
}

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let scenarios = load_all(std::slice::from_ref(&args.scenario))?;
    let [scenario] = scenarios.as_slice() else {
        bail!(
            "replay runs one scenario, but {} holds {}",
            args.scenario.display(),
            scenarios.len()
        );
    };
    let seed = args.seed.unwrap_or(0);
    if args.fidelity {
        let (report, run) = measure(scenario, seed)?;
        let text = if args.json {
            serde_json::to_string_pretty(&report)? + "\n"
        } else {
            report.to_text()
        };
        write_stdout(&text)?;
        return Ok(if run.failures.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let run = run_seed(scenario, seed, &run_options(args.swarm, &args.world))?;

    let mut out = String::new();
    if args.trace {
        for entry in &run.trace {
            out += &serde_json::to_string(entry)?;
            out.push('\n');
        }
    } else {
        for entry in &run.trace {
            out += &entry.line();
            out.push('\n');
        }
        if run.violations.is_empty() {
            out += "no violation\n";
        }
        for violation in &run.violations {
            out += &format!("violation {}: {}\n", violation.invariant, violation.detail);
        }
        out += &run.cost.to_text();
        out += &format!("trace hash {:016x}\n", run.trace_hash());
    }
    write_stdout(&out)?;
    // Failures go to stderr, so `--trace` output stays pure JSON Lines.
    Ok(report_failures(&scenario.path, seed, &run.failures))
}

/// Prints each failure of one seed to stderr; the exit code says whether there were any.
pub fn report_failures(scenario: &Path, seed: u64, failures: &[Violation]) -> ExitCode {
    for failure in failures {
        errln!(
            "FAIL {} seed {seed}: {}: {}",
            scenario.display(),
            failure.invariant,
            failure.detail
        );
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
