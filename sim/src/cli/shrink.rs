//! `coordsim shrink`: a failing seed reduced to a minimal explicit scenario.

use anyhow::{bail, Context, Result};
use clap::Args;
use coord_sim::run::run_seed;
use coord_sim::shrink::{scenario_file, shrink, ShrinkOptions};
use coord_sim::sweep::load_all;
use std::path::PathBuf;
use std::process::ExitCode;

use super::output_file::{scenario_inputs, OutputFile};
use super::stdout::outln;
use super::sweep_args::{run_options, WorldArgs};

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    /// The scenario file (or a folder holding exactly one scenario).
    scenario: PathBuf,
    /// The failing seed.
    #[arg(long, value_name = "N")]
    seed: u64,
    /// Swarm mode, as the seed was run in the sweep.
    #[arg(long)]
    swarm: bool,
    #[command(flatten)]
    world: WorldArgs,
    /// Where to write the shrunk scenario.
    #[arg(short, long, value_name = "OUT.toml")]
    output: PathBuf,
    /// Replace the `-o` file if it exists (never the scenario itself, never through
    /// a symbolic link).
    #[arg(long)]
    force: bool,
    /// The invariant to keep broken, when the seed breaks several. Default: the
    /// first one reported. A name no checker reports is refused.
    #[arg(long, value_name = "NAME")]
    invariant: Option<String>,
    /// Most candidate runs before the shrinker settles for what it has: at least 1.
    #[arg(long, value_name = "N", default_value = "500", value_parser = clap::value_parser!(u32).range(1..))]
    runs_max: u32,
}

pub fn run(args: ShrinkArgs) -> Result<ExitCode> {
    let scenarios = load_all(std::slice::from_ref(&args.scenario))?;
    let [scenario] = scenarios.as_slice() else {
        bail!(
            "shrink takes one scenario, but {} holds {}",
            args.scenario.display(),
            scenarios.len()
        );
    };
    let output = OutputFile::new(&args.output, &[&args.scenario], args.force)
        .and_inputs(scenario_inputs(scenario));
    output.check()?;
    let options = ShrinkOptions {
        run: run_options(args.swarm, &args.world),
        runs_max: args.runs_max,
    };
    let shrunk = shrink(scenario, args.seed, args.invariant.as_deref(), &options)?;
    let source_text = std::fs::read_to_string(&scenario.path)
        .with_context(|| format!("cannot read {}", scenario.path.display()))?;
    let text = scenario_file(
        &shrunk,
        &scenario.path,
        &source_text,
        &args.output,
        &options.run,
    )
    .context("cannot write the shrunk scenario as TOML")?;
    output.write(text.as_bytes())?;

    // Prove the file on disk, not the value in memory, fails the same way.
    let written = load_all(std::slice::from_ref(&args.output))?;
    let rerun = run_seed(&written[0], args.seed, &run_options(false, &args.world))?;
    let still_fails = rerun
        .failures
        .iter()
        .any(|failure| failure.invariant == shrunk.invariant);
    outln!(
        "shrunk {} seed {}: {} of {} faults remain after {} runs{}; breaks {}: {}",
        scenario.path.display(),
        args.seed,
        shrunk.scenario.faults.len(),
        shrunk.faults_before,
        shrunk.runs,
        if shrunk.budget_exhausted {
            " (run budget spent: the schedule may not be minimal)"
        } else {
            ""
        },
        shrunk.invariant,
        shrunk.detail
    )?;
    outln!("wrote {}", args.output.display())?;
    if !still_fails {
        bail!(
            "{} does not fail with {} when run again",
            args.output.display(),
            shrunk.invariant
        );
    }
    let rerun_options = run_options(false, &args.world);
    outln!(
        "repro: {}",
        coord_sim::run::repro_command(&args.output, args.seed, &rerun_options)
    )?;
    if let Some(cargo) =
        coord_sim::run::repro_cargo_command(&args.output, args.seed, &rerun_options)
    {
        outln!("or, in the repository: {cargo}")?;
    }
    Ok(ExitCode::SUCCESS)
}
