//! `coordsim record`: one seed of one scenario, its model exchanges recorded into
//! a cassette.

use anyhow::{Context, Result};
use clap::Args;
use coord_sim::cassette::{record_seed, Outcome, Recording, Secrets};
use coord_sim::scenario::LoadedScenario;
use std::path::PathBuf;
use std::process::ExitCode;

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
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let scenario = LoadedScenario::load(&args.scenario)?;
    let mut secrets = Secrets::new();
    if let Ok(key) = std::env::var(API_KEY_VARIABLE) {
        secrets = secrets.with_literal(key);
    }
    let recording = Recording::to_file(&args.output).scrubbing(secrets);
    let run = record_seed(
        &scenario,
        args.seed,
        &run_options(args.swarm, &args.world),
        &recording,
    )?;
    let cassette = recording
        .finish()
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let count = |wanted: fn(&Outcome) -> bool| {
        cassette
            .exchanges
            .iter()
            .filter(|exchange| wanted(&exchange.outcome))
            .count()
    };
    println!(
        "recorded {} exchanges ({} responses, {} errors, {} without response) of {} seed {} into {}",
        cassette.exchanges.len(),
        count(|o| matches!(o, Outcome::Response(_))),
        count(|o| matches!(o, Outcome::Error(_))),
        count(|o| matches!(o, Outcome::NoResponse)),
        scenario.path.display(),
        args.seed,
        args.output.display()
    );
    println!("trace hash {:016x}", run.trace_hash());
    Ok(super::replay::report_failures(
        &scenario.path,
        args.seed,
        &run.failures,
    ))
}
