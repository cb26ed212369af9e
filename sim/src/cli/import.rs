//! `coordsim import`: turn recorded sessions into scenarios that replay them.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use coord_sim::import::{import_claude_code, import_claude_code_to};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Import a Claude Code session transcript (`<session>.jsonl`; subagents are
    /// read from `<session>/subagents/` beside it).
    ClaudeCode(ClaudeCodeArgs),
}

#[derive(Debug, Args)]
pub struct ClaudeCodeArgs {
    /// The session transcript.
    #[arg(value_name = "SESSION.jsonl")]
    session: PathBuf,
    /// Where to write the scenario (default: standard output).
    #[arg(short, long, value_name = "SCENARIO.toml")]
    output: Option<PathBuf>,
}

pub fn run(command: ImportCommand) -> Result<ExitCode> {
    let ImportCommand::ClaudeCode(args) = command;
    // Written to a file, the scenario names its session relative to itself.
    let imported = match &args.output {
        Some(path) => import_claude_code_to(&args.session, path)?,
        None => import_claude_code(&args.session)?,
    };
    match &args.output {
        Some(path) => std::fs::write(path, &imported.toml)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(imported.toml.as_bytes())
                .and_then(|()| stdout.flush())
            {
                // A reader that stops early (`| head`) is not an error.
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {}
                written => written?,
            }
        }
    }
    // The summary goes to stderr so that stdout stays a loadable scenario.
    eprintln!("coordsim: {}", imported.summary.describe());
    Ok(ExitCode::SUCCESS)
}
