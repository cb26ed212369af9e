//! `coordsim explore`: random but valid programs, one per seed, run in swarm mode.

use anyhow::{Context, Result};
use clap::Args;
use coord_runtime::defects::Defect;
use coord_runtime::probe::Probe;
use coord_runtime::profile::Profile;
use coord_sim::explore::{self, ExploreOptions, Program};
use coord_sim::run::run_seed;
use coord_sim::shrink::{scenario_file, shrink, ShrinkOptions};
use coord_sim::sweep::probes_reached;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::report::ReportDirArgs;
use super::stdout::outln;
use super::sweep_args::{counted, parse_seed, parse_seed_range, progress_bar};
use super::sweep_control::{SweepControl, SweepEnd};

/// Where failing programs and their shrunk forms are written.
const REPORT_DIR: &str = "reports/explore";

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// Seeds to explore, as `A..B` (B excluded): one program per seed.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, conflicts_with = "seed")]
    seeds: Option<Range<u64>>,
    /// One seed to explore.
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    seed: Option<u64>,
    /// The runtime profile of every program: hardened, claude-code or nexo.
    #[arg(long, value_name = "P", default_value = "hardened")]
    profile: Profile,
    /// A seeded defect to switch on in every program (runtime/src/defects.rs);
    /// may be given more than once.
    #[arg(long, value_name = "NAME", value_parser = parse_defect)]
    defect: Vec<Defect>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Count the seeds whose program has each feature and whose run reached each
    /// runtime probe (`coverage` in the JSON).
    #[arg(long)]
    coverage: bool,
    /// Threads that run seeds side by side. The report is the same whatever the
    /// count; only timings change.
    #[arg(long, value_name = "N", default_value = "1")]
    threads: NonZeroUsize,
    /// Most failures to shrink; the others are written unshrunk, with the command
    /// that shrinks them.
    #[arg(long, value_name = "N", default_value = "5")]
    shrink_max: usize,
    /// Most candidate runs per shrink.
    #[arg(long, value_name = "N", default_value = "200")]
    shrink_runs_max: u32,
    #[command(flatten)]
    report: ReportDirArgs,
}

fn parse_defect(text: &str) -> Result<Defect, String> {
    Defect::ALL
        .into_iter()
        .find(|defect| defect.as_str() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = Defect::ALL.iter().map(|defect| defect.as_str()).collect();
            format!("no defect {text:?}; expected one of {}", names.join(", "))
        })
}

/// One failing seed, as reported.
#[derive(Debug, Serialize)]
struct ExploreFailure {
    seed: u64,
    /// The broken invariant, or `harness` when the program could not be built or run.
    invariant: String,
    detail: String,
    /// The command that regenerates and reruns the program, from any directory.
    repro: String,
    /// The same command through `cargo run`, when explore ran inside the
    /// repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    repro_cargo: Option<String>,
    /// The generated program.
    file: Option<PathBuf>,
    /// The shrunk program, when the failure was shrunk.
    shrunk: Option<PathBuf>,
    /// The command that runs the shrunk program (or shrinks the generated one).
    next: Option<String>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    profile: &'static str,
    defects: Vec<&'static str>,
    seeds_run: u64,
    seeds_failed: u64,
    wall_seconds: f64,
    seeds_per_second: f64,
    sim_seconds: f64,
    /// Whether SIGINT or SIGTERM stopped the exploration before its last seed.
    interrupted: bool,
    failures: &'a [ExploreFailure],
    /// With `--coverage`: seeds per program feature and per probe reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    coverage: Option<&'a Coverage>,
}

/// Seeds whose program has each feature, and seeds whose run reached each probe.
#[derive(Debug, Default, Serialize)]
struct Coverage {
    features: BTreeMap<&'static str, u64>,
    probes: BTreeMap<&'static str, u64>,
}

impl Coverage {
    fn new() -> Self {
        Self {
            features: explore::FEATURES
                .iter()
                .map(|feature| (*feature, 0))
                .collect(),
            probes: Probe::ALL.iter().map(|probe| (probe.as_str(), 0)).collect(),
        }
    }

    fn add(&mut self, outcome: &SeedOutcome) {
        for feature in &outcome.features {
            *self.features.entry(feature).or_default() += 1;
        }
        for probe in &outcome.probes {
            *self.probes.entry(probe.as_str()).or_default() += 1;
        }
    }

    /// The text report: one line per feature and per probe, with its seed count.
    fn text(&self, seeds_run: u64) -> String {
        let width = self
            .features
            .keys()
            .chain(self.probes.keys())
            .map(|name| name.len())
            .max()
            .unwrap_or(0);
        let mut text = format!("program features (seeds of {seeds_run}):");
        for (feature, seeds) in &self.features {
            text += &format!("\n  {feature:<width$}  {seeds}");
        }
        let reached = self.probes.values().filter(|seeds| **seeds > 0).count();
        text += &format!(
            "\nprobes reached: {reached} of {} (seeds of {seeds_run}):",
            self.probes.len()
        );
        for (probe, seeds) in &self.probes {
            text += &format!("\n  {probe:<width$}  {seeds}");
        }
        text
    }
}

/// What one seed came to.
struct SeedOutcome {
    seed: u64,
    sim_seconds: f64,
    /// `(invariant, detail)` of each failure; empty when the seed passed.
    failures: Vec<(String, String)>,
    program: Option<Program>,
    /// What the program exercises.
    features: BTreeSet<&'static str>,
    /// The probes its run reached.
    probes: BTreeSet<Probe>,
}

fn explore_one(seed: u64, options: &ExploreOptions, dir: &Path) -> SeedOutcome {
    let harness = |error: explore::ExploreError| SeedOutcome {
        seed,
        sim_seconds: 0.0,
        failures: vec![("harness".to_owned(), error.to_string())],
        program: None,
        features: BTreeSet::new(),
        probes: BTreeSet::new(),
    };
    let program = match explore::program(seed, options, dir) {
        Ok(program) => program,
        Err(error) => return harness(error),
    };
    let features = explore::features(&program.loaded.scenario);
    match explore::explore_seed(&program) {
        Ok(run) => SeedOutcome {
            seed,
            features,
            probes: probes_reached(&run.trace).into_keys().collect(),
            sim_seconds: run.sim_duration.as_secs_f64(),
            failures: run
                .failures
                .iter()
                .map(|failure| (failure.invariant.to_owned(), failure.detail.clone()))
                .collect(),
            program: Some(program),
        },
        Err(error) => SeedOutcome {
            program: Some(program),
            features,
            ..harness(error)
        },
    }
}

/// Writes a failing program, shrinks it when `shrink_it`, and says what was written.
fn report_failure(outcome: &SeedOutcome, shrink_it: bool, runs_max: u32) -> Result<ExploreFailure> {
    let (invariant, detail) = outcome.failures[0].clone();
    // The seed and the flags are the whole program: no path to make absolute.
    let arguments = format!(
        "explore --seed {}{}",
        outcome.seed,
        outcome
            .program
            .as_ref()
            .map(|program| defect_flags(&program.loaded.scenario))
            .unwrap_or_default()
    );
    let mut failure = ExploreFailure {
        seed: outcome.seed,
        invariant,
        detail,
        repro: format!("coordsim {arguments}"),
        repro_cargo: coord_sim::run::inside_repository()
            .then(|| format!("cargo run --release --locked -p coord-sim -- {arguments}")),
        file: None,
        shrunk: None,
        next: None,
    };
    let Some(program) = &outcome.program else {
        return Ok(failure);
    };
    let file = program.loaded.path.clone();
    explore::write_new(&file, &program.text)?;
    failure.file = Some(file.clone());
    if failure.invariant == "harness" {
        return Ok(failure);
    }
    let shrink_line =
        coord_sim::shrink::shrink_command(&file, outcome.seed, &explore::run_options());
    if !shrink_it {
        failure.next = Some(shrink_line);
        return Ok(failure);
    }
    let options = ShrinkOptions {
        run: explore::run_options(),
        runs_max,
    };
    let shrunk = match shrink(
        &program.loaded,
        outcome.seed,
        Some(&failure.invariant),
        &options,
    ) {
        Ok(shrunk) => shrunk,
        // A failure that cannot be shrunk is still a failure: it is reported with
        // its program and the shrink line, and the other failures still get theirs.
        Err(error) => {
            failure.detail += &format!(" (not shrunk: {error})");
            failure.next = Some(shrink_line);
            return Ok(failure);
        }
    };
    let shrunk_file = file.with_file_name(format!(
        "{}-shrunk.toml",
        file.file_stem()
            .map_or_else(|| "explore".into(), |stem| stem.to_string_lossy())
    ));
    let text = scenario_file(
        &shrunk,
        &file,
        &program.text,
        &shrunk_file,
        &explore::run_options(),
    )
    .context("cannot write the shrunk program as TOML")?;
    explore::write_new(&shrunk_file, &text)?;
    // The shrunk schedule is explicit and swarm drawing is off in it; run it as
    // written to make sure the file on disk fails the same way.
    let written = coord_sim::scenario::LoadedScenario::load(&shrunk_file)?;
    let rerun = run_seed(&written, outcome.seed, &Default::default())?;
    if !rerun
        .failures
        .iter()
        .any(|violation| violation.invariant == shrunk.invariant)
    {
        failure.detail += &format!(
            " (the shrunk file {} no longer breaks it)",
            shrunk_file.display()
        );
    }
    failure.next = Some(format!(
        "coordsim run {} --seed {} --swarm",
        coord_sim::shell_word::quote_path(&shrunk_file),
        outcome.seed
    ));
    failure.shrunk = Some(shrunk_file);
    Ok(failure)
}

/// The `--defect` flags that regenerate `scenario`'s defects.
fn defect_flags(scenario: &coord_sim::scenario::Scenario) -> String {
    let mut flags: String = scenario
        .settings
        .defects
        .iter()
        .map(|defect| format!(" --defect {}", defect.as_str()))
        .collect();
    if scenario.profile != Profile::Hardened {
        flags += &format!(" --profile {}", scenario.profile.as_str());
    }
    flags
}

pub fn run(args: ExploreArgs) -> Result<ExitCode> {
    let seeds = match (args.seeds.clone(), args.seed) {
        (Some(range), _) => range,
        (None, Some(seed)) => seed..seed + 1,
        (None, None) => 0..1,
    };
    let mut options = ExploreOptions::default();
    options.profile = args.profile;
    options.defects = args.defect.clone();
    let dir = PathBuf::from(REPORT_DIR);
    let seed_count = seeds.end - seeds.start;
    let progress = progress_bar(seed_count, !args.json);
    let control = SweepControl::install()?;
    // A failure that cannot be written ends the exploration: it would be lost.
    let write_failed = AtomicBool::new(false);
    let mut write_error = None;
    let mut failures = Vec::new();
    let (mut seeds_run, mut sim_seconds) = (0_u64, 0.0_f64);
    let mut coverage = Coverage::new();
    let started = Instant::now();
    // Failures are written, shrunk and printed in seed order as they are found, so
    // an interrupted exploration keeps every one found so far.
    let ran = coord_sim::sweep::run_in_order(
        seed_count,
        args.threads,
        &|| control.should_stop() || write_failed.load(Ordering::SeqCst),
        |index| explore_one(seeds.start + index, &options, &dir),
        |outcome| {
            progress.inc(1);
            seeds_run += 1;
            sim_seconds += outcome.sim_seconds;
            coverage.add(&outcome);
            if outcome.failures.is_empty() || write_error.is_some() {
                return;
            }
            // Shrinking takes many runs: an interrupted exploration skips it.
            let shrink_it = failures.len() < args.shrink_max && !control.should_stop();
            match report_failure(&outcome, shrink_it, args.shrink_runs_max) {
                Ok(failure) => {
                    if !args.json {
                        control.print(&failure_text(&failure));
                    }
                    failures.push(failure);
                }
                Err(error) => {
                    write_error = Some(error);
                    write_failed.store(true, Ordering::SeqCst);
                }
            }
        },
    );
    progress.finish_and_clear();
    if let Some(error) = write_error {
        return Err(error);
    }
    let end = control.finish(ran < seed_count)?;
    let wall_seconds = started.elapsed().as_secs_f64();
    let seeds_per_second = if wall_seconds > 0.0 {
        seeds_run as f64 / wall_seconds
    } else {
        0.0
    };
    if args.report.wanted() {
        write_report(
            &args,
            &seeds,
            seeds_run,
            sim_seconds,
            &failures,
            wall_seconds,
            end.interrupted(),
        )?;
    }
    if args.json {
        let json = JsonReport {
            profile: args.profile.as_str(),
            defects: args.defect.iter().map(|defect| defect.as_str()).collect(),
            seeds_run,
            seeds_failed: failures.len() as u64,
            wall_seconds,
            seeds_per_second,
            sim_seconds,
            interrupted: end.interrupted(),
            failures: &failures,
            coverage: args.coverage.then_some(&coverage),
        };
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        let defects = match args.defect.as_slice() {
            [] => String::new(),
            defects => {
                let names: Vec<&str> = defects.iter().map(|defect| defect.as_str()).collect();
                format!(", defects {}", names.join(", "))
            }
        };
        outln!(
            "{} × seeds {}..{} ({}{defects}): {} failed, {:.2} s wall ({:.0} seeds/s), {:.1} s simulated{}",
            counted(seeds_run, "program"),
            seeds.start,
            seeds.end,
            args.profile.as_str(),
            failures.len(),
            wall_seconds,
            seeds_per_second,
            sim_seconds,
            end.note()
        )?;
        if args.coverage {
            outln!("{}", coverage.text(seeds_run))?;
        }
    }
    if let SweepEnd::Interrupted(signal) = end {
        return Ok(signal.exit_code());
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The scenario name an exploration's report gives its programs, one per seed.
const EXPLORE_SCENARIO: &str = "explore";

/// Writes the `--report` of an exploration: its failing programs' timelines are
/// rendered from the program files written for them.
fn write_report(
    args: &ExploreArgs,
    seeds: &Range<u64>,
    seeds_run: u64,
    sim_seconds: f64,
    failures: &[ExploreFailure],
    wall_seconds: f64,
    interrupted: bool,
) -> Result<()> {
    let scope = coord_sim::report::SweepScope {
        scenario_files: vec![EXPLORE_SCENARIO.to_owned()],
        seeds: seeds.clone(),
        shard: coord_sim::sweep::Shard::WHOLE,
        skipped: &[],
    };
    let as_failures = failures
        .iter()
        .map(|failure| coord_sim::sweep::Failure {
            scenario: EXPLORE_SCENARIO.to_owned(),
            seed: failure.seed,
            invariant: failure.invariant.clone(),
            detail: failure.detail.clone(),
            repro: failure.repro.clone(),
            repro_cargo: failure.repro_cargo.clone(),
            shrink: failure.next.clone(),
            shrink_cargo: None,
        })
        .collect();
    let mut summary = coord_sim::report::Summary::of_check(
        &scope,
        seeds_run,
        as_failures,
        wall_seconds,
        interrupted,
    );
    summary.sim_seconds = sim_seconds;
    let rerun = |failure: &coord_sim::sweep::Failure| {
        let file = failures
            .iter()
            .find(|explored| explored.seed == failure.seed)?
            .file
            .as_ref()?;
        let program = coord_sim::scenario::LoadedScenario::load(file).ok()?;
        run_seed(&program, failure.seed, &explore::run_options()).ok()
    };
    args.report.write(&summary, &[], &rerun)?;
    Ok(())
}

/// A failure as the text report prints it: what broke, then how to get at it.
fn failure_text(failure: &ExploreFailure) -> String {
    let mut text = format!(
        "FAIL explore seed {}: {}: {}\n  repro: {}",
        failure.seed, failure.invariant, failure.detail, failure.repro
    );
    if let Some(cargo) = &failure.repro_cargo {
        text += &format!("\n  or, in the repository: {cargo}");
    }
    if let Some(file) = &failure.file {
        text += &format!("\n  program: {}", file.display());
    }
    if let Some(shrunk) = &failure.shrunk {
        text += &format!("\n  shrunk: {}", shrunk.display());
    }
    if let Some(next) = &failure.next {
        text += &format!("\n  then: {next}");
    }
    text
}
