//! `coordsim record`: one seed of one scenario, its model exchanges recorded into
//! a cassette.

use anyhow::Result;
use clap::Args;
use coord_sim::cassette::{record_seed, Outcome, Recording, Secrets};
use coord_sim::scenario::LoadedScenario;
use std::path::PathBuf;
use std::process::ExitCode;

use super::output_file::{scenario_inputs, OutputFile};
use super::stdout::outln;
use super::sweep_args::{run_options, WorldArgs};

/// The environment variable whose value is scrubbed from recordings.
const API_KEY_VARIABLE: &str = "ANTHROPIC_API_KEY";

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The scenario file.
    scenario: PathBuf,
    /// The seed to run.
    #[arg(long, value_name = "N", default_value = "0")]
    seed: u64,
    /// Swarm mode, as the seed was run in the sweep.
    #[arg(long)]
    swarm: bool,
    #[command(flatten)]
    world: WorldArgs,
    /// Where to write the cassette (e.g. `fixtures/cassettes/NAME.json`).
    #[arg(short = 'o', long = "output", value_name = "CASSETTE.json")]
    output: PathBuf,
    /// Replace the `-o` file if it exists (never the scenario itself, never through
    /// a symbolic link).
    #[arg(long)]
    force: bool,
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let scenario = LoadedScenario::load(&args.scenario)?;
    let output = OutputFile::new(&args.output, &[&args.scenario], args.force)
        .and_inputs(scenario_inputs(&scenario));
    output.check()?;
    let mut secrets = Secrets::new();
    if let Ok(key) = std::env::var(API_KEY_VARIABLE) {
        secrets = secrets.with_literal(key);
    }
    // Kept in memory, then written by the one `-o` writer.
    let recording = Recording::in_memory().scrubbing(secrets);
    let run = record_seed(
        &scenario,
        args.seed,
        &run_options(args.swarm, &args.world),
        &recording,
    )?;
    let cassette = recording.finish()?;
    output.write(cassette.to_json().as_bytes())?;
    let count = |wanted: fn(&Outcome) -> bool| {
        cassette
            .exchanges
            .iter()
            .filter(|exchange| wanted(&exchange.outcome))
            .count()
    };
    outln!(
        "recorded {} exchanges ({} responses, {} errors, {} without response) of {} seed {} into {}",
        cassette.exchanges.len(),
        count(|o| matches!(o, Outcome::Response(_))),
        count(|o| matches!(o, Outcome::Error(_))),
        count(|o| matches!(o, Outcome::NoResponse)),
        scenario.path.display(),
        args.seed,
        args.output.display()
    )?;
    outln!("trace hash {:016x}", run.trace_hash())?;
    Ok(super::replay::report_failures(
        &scenario.path,
        args.seed,
        &run.failures,
    ))
}
