//! The `coordsim` command line: argument parsing and dispatch.

mod cost;
mod determinism;
mod economics;
mod envelope;
mod explore;
mod import;
mod record;
mod replay;
mod run;
mod shrink;
mod sweep_args;
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

/// Parses the arguments, runs the command, and maps its outcome to an exit code:
/// 0 on success, 1 when a check failed, 2 when the command could not run.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Record(args) => record::run(args),
        Command::CheckDeterminism(args) => determinism::run(args),
        Command::Shrink(args) => shrink::run(args),
        Command::Explore(args) => explore::run(args),
        Command::Envelope(command) => envelope::run(command),
        Command::Cost(args) => cost::run(args),
        Command::Import(command) => import::run(command),
        Command::Economics(args) => economics::run(args),
        Command::Schema => {
            print!("{}", coord_sim::scenario::json_schema());
            Ok(ExitCode::SUCCESS)
        }
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("coordsim: error: {error:#}");
            ExitCode::from(2)
        }
    }
}
