//! `coordsim economics`: a scenario's cost comparison, as a table.

use anyhow::{bail, Result};
use clap::Args;
use coord_sim::cost::PriceTable;
use coord_sim::economics::compare;
use coord_sim::sweep::load_all;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct EconomicsArgs {
    /// The scenario file; its `[economics] compare` names the two variants.
    scenario: PathBuf,
    /// The seed both variants run under.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
    /// Print the report as JSON: {"scenario", "compare", "seed", "pricing", "variants": [...]}.
    #[arg(long)]
    json: bool,
    /// Price table to use instead of the built-in `pricing/anthropic.toml`.
    #[arg(long, value_name = "FILE")]
    pricing: Option<PathBuf>,
}

pub fn run(args: EconomicsArgs) -> Result<ExitCode> {
    let prices = match &args.pricing {
        Some(path) => PriceTable::load(path)?,
        None => PriceTable::built_in(),
    };
    let scenarios = load_all(std::slice::from_ref(&args.scenario))?;
    let [scenario] = scenarios.as_slice() else {
        bail!(
            "economics compares one scenario, but {} holds {}",
            args.scenario.display(),
            scenarios.len()
        );
    };
    let report = compare(scenario, args.seed, &prices)?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&report)?;
        json.push('\n');
        json
    } else {
        report.to_text()
    };
    super::stdout::write_stdout(&text)?;
    let failed = report.variants.iter().any(|v| !v.failures.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
