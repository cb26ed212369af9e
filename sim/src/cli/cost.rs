//! `coordsim cost`: token totals and cost of Claude Code session transcripts.

use anyhow::Result;
use clap::Args;
use coord_sim::cost::{account, default_threads, PriceTable};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;

use super::stdout::{errln, write_stdout};

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Transcripts: `.jsonl` files, or directories searched recursively for them.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Print the report as JSON: {"sessions": [...], "totals": {...}, ...}.
    #[arg(long)]
    json: bool,
    /// Price table to use instead of the built-in `pricing/anthropic.toml`.
    #[arg(long, value_name = "FILE")]
    pricing: Option<PathBuf>,
    /// Threads that read transcript files side by side (default: one per core). The
    /// report is the same whatever the count; only the time changes.
    #[arg(long, value_name = "N", value_parser = parse_thread_count)]
    threads: Option<NonZeroUsize>,
}

fn parse_thread_count(text: &str) -> Result<NonZeroUsize, String> {
    text.parse()
        .map_err(|_| format!("expected a thread count of at least 1, got {text:?}"))
}

pub fn run(args: CostArgs) -> Result<ExitCode> {
    let prices = match &args.pricing {
        Some(path) => PriceTable::load(path)?,
        None => PriceTable::built_in(),
    };
    let threads = args.threads.unwrap_or_else(default_threads);
    let report = account(&args.paths, &prices, threads)?;
    // Malformed lines are not fatal, but each is named so that none goes unnoticed.
    for bad in &report.malformed {
        errln!(
            "coordsim: warning: {}:{}: skipped malformed line: {}",
            bad.path,
            bad.line,
            bad.error
        );
    }
    // So are figures that are less than exact.
    for warning in &report.warnings {
        eprintln!("coordsim: warning: {warning}");
    }
    let text = if args.json {
        report.to_json()
    } else {
        report.to_text()
    };
    write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}
