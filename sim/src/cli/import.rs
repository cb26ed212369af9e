//! `coordsim import`: turn recorded sessions into scenarios that replay them.

use anyhow::Result;
use clap::{Args, Subcommand};
use coord_sim::import::{import_claude_code, import_claude_code_to};
use std::path::PathBuf;
use std::process::ExitCode;

use super::output_file::OutputFile;
use super::stdout::{errln, write_stdout};

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
    /// Replace the `-o` file if it exists (never the session itself, never through
    /// a symbolic link).
    #[arg(long, requires = "output")]
    force: bool,
}

pub fn run(command: ImportCommand) -> Result<ExitCode> {
    let ImportCommand::ClaudeCode(args) = command;
    let output = args
        .output
        .as_deref()
        .map(|path| OutputFile::new(path, &[&args.session], args.force));
    if let Some(output) = &output {
        output.check()?;
    }
    // Written to a file, the scenario names its session relative to itself.
    let imported = match &output {
        Some(output) => import_claude_code_to(&args.session, output.path())?,
        None => import_claude_code(&args.session)?,
    };
    match &output {
        Some(output) => output.write(imported.toml.as_bytes())?,
        None => write_stdout(&imported.toml)?,
    }
    // The summary goes to stderr so that stdout stays a loadable scenario.
    for line in imported.summary.report().lines() {
        errln!("coordsim: {line}");
    }
    Ok(ExitCode::SUCCESS)
}
