//! The `coordsim` command line: argument parsing, dispatch, and how a command's end
//! becomes an exit status ([`error_report`] lists them).
//!
//! Output goes through [`stdout`], so a reader that closes the pipe ends the command
//! quietly; `-o` files through [`output_file`], so none is lost; sweeps stop on
//! SIGINT and SIGTERM through [`interrupt`], printing what ran.

mod cost;
mod determinism;
mod economics;
mod envelope;
mod error_report;
mod explore;
mod import;
mod interrupt;
mod merge;
mod output_file;
mod record;
mod replay;
mod report;
mod run;
mod shrink;
pub(crate) mod stdout;
mod sweep_args;
mod sweep_control;
mod target;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Deterministic simulation of coordinator/worker agent systems.
#[derive(Debug, Parser)]
#[command(name = "coordsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios over seeds and check the protocol's invariants.
    Run(run::RunArgs),
    /// Run one seed of one scenario and print its trace, violations and trace hash.
    Replay(replay::ReplayArgs),
    /// Render one run's timeline as a self-contained HTML page, from a trace file
    /// (`replay --trace`) or a scenario and seed.
    Report(report::ReportArgs),
    /// Put the summaries (or report folders) of a sweep's shards back together,
    /// checking that they are disjoint and complete; prints the merged summary.
    Merge(merge::MergeArgs),
    /// Run one seed of one scenario and record its model exchanges into a cassette.
    Record(record::RecordArgs),
    /// Run every seed twice and check that both runs leave the same trace.
    CheckDeterminism(determinism::DeterminismArgs),
    /// Reduce a failing seed's fault schedule to a minimal explicit scenario that
    /// fails the same way.
    Shrink(shrink::ShrinkArgs),
    /// Generate a random but valid program per seed, run it in swarm mode, and
    /// write and shrink every failing one.
    Explore(explore::ExploreArgs),
    /// Parse or render `<task-notification>` envelopes.
    #[command(subcommand)]
    Envelope(envelope::EnvelopeCommand),
    /// Print the JSON Schema of scenario files (docs/scenario.schema.json).
    Schema,
    /// Token totals and cost of Claude Code session transcripts.
    Cost(cost::CostArgs),
    /// Turn a recorded session into a scenario that replays it.
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Runs the two variants a scenario's `[economics] compare` names and prints a
    /// table of their cost and cache-hit ratio.
    Economics(economics::EconomicsArgs),
}

/// Parses the arguments, runs the command, and maps its outcome to an exit status:
/// 0 on success, 1 when a check failed, 2 when the command could not run, 70 on a
/// panic, 130 or 143 when a sweep was interrupted, 141 when stdout was closed.
pub fn main() -> ExitCode {
    // Known before the arguments parse, so even a usage error can answer in JSON.
    let json = std::env::args_os().skip(1).any(|arg| arg == "--json");
    error_report::install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return error_report::report_usage(&error, json),
    };
    match std::panic::catch_unwind(|| dispatch(cli.command)) {
        Ok(Ok(code)) => code,
        Ok(Err(error)) => error_report::report_error(&error, json),
        Err(payload) => error_report::report_panic(payload.as_ref(), json),
    }
}

/// Set, it makes every command panic at once: the one way to prove, from outside,
/// that a panic is reported as status 70 and, with `--json`, as a JSON error.
const PANIC_VARIABLE: &str = "COORDSIM_TEST_PANIC";

/// Runs one command.
fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    if std::env::var_os(PANIC_VARIABLE).is_some() {
        panic!("{PANIC_VARIABLE} is set");
    }
    match command {
        Command::Run(args) => run::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Report(args) => report::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Record(args) => record::run(args),
        Command::CheckDeterminism(args) => determinism::run(args),
        Command::Shrink(args) => shrink::run(args),
        Command::Explore(args) => explore::run(args),
        Command::Envelope(command) => envelope::run(command),
        Command::Cost(args) => cost::run(args),
        Command::Import(command) => import::run(command),
        Command::Economics(args) => economics::run(args),
        Command::Schema => {
            stdout::write_stdout(&coord_sim::scenario::json_schema())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
