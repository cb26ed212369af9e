//! `coordsim replay`: one seed of one scenario, event by event.

use anyhow::{bail, Result};
use clap::Args;
use coord_sim::run::run_seed;
use coord_sim::sweep::load_all;
use coord_sim::trace::TraceEntry;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::sweep_args::run_options;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The scenario file (or a folder holding exactly one scenario).
    scenario: PathBuf,
    /// The seed to run.
    #[arg(long, value_name = "N")]
    seed: u64,
    /// Swarm mode, as the seed was run in the sweep.
    #[arg(long)]
    swarm: bool,
    /// Print only the trace, as JSON Lines: one trace entry per line.
    #[arg(long)]
    trace: bool,
}

/// One trace entry as a human line: `  12.345s  actor  event-json`.
pub fn entry_line(entry: &TraceEntry) -> String {
    let time = format!("{}.{:03}s", entry.time_ms / 1000, entry.time_ms % 1000);
    format!("{time:>9}  {}  {}", entry.actor, entry.event)
}

/// Writes `text` to stdout. A reader that stops early (`| head`) is not an error.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
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
    let run = run_seed(scenario, args.seed, &run_options(args.swarm))?;

    let mut out = String::new();
    if args.trace {
        for entry in &run.trace {
            out += &serde_json::to_string(entry)?;
            out.push('\n');
        }
    } else {
        for entry in &run.trace {
            out += &entry_line(entry);
            out.push('\n');
        }
        if run.violations.is_empty() {
            out += "no violation\n";
        }
        for violation in &run.violations {
            out += &format!("violation {}: {}\n", violation.invariant, violation.detail);
        }
        out += &run.cost.to_text();
        out += &format!("trace hash {:016x}\n", run.trace_hash);
    }
    write_stdout(&out)?;
    // Failures go to stderr, so `--trace` output stays pure JSON Lines.
    for failure in &run.failures {
        eprintln!(
            "FAIL {} seed {}: {}: {}",
            scenario.path.display(),
            args.seed,
            failure.invariant,
            failure.detail
        );
    }
    Ok(if run.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
