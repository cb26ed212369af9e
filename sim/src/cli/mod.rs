//! The `coordsim` command line: argument parsing and dispatch.

mod envelope;
mod run;

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
    /// Parse or render `<task-notification>` envelopes.
    #[command(subcommand)]
    Envelope(envelope::EnvelopeCommand),
}

/// Parses the arguments, runs the command, and maps its outcome to an exit code:
/// 0 on success, 1 when a check failed, 2 when the command could not run.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Envelope(command) => envelope::run(command),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("coordsim: error: {error:#}");
            ExitCode::from(2)
        }
    }
}
