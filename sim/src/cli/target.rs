//! `coordsim run --target claude-code`: the scenarios run against the real Claude
//! Code CLI instead of the simulated runtime (`docs/claude-code.md`).

use anyhow::{bail, Result};
use clap::Args;
use coord_sim::sweep::{load_all, Failure};
use coord_sim::target::{run_claude_code, ClaudeCodeOptions, Verdict, CLAUDE_CODE};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use coord_sim::report::Summary;
use coord_sim::run::SeedRun;

use super::report::ReportDirArgs;

use super::stdout::outln;

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// What the scenarios run against: `sim` (the simulated runtime, default) or
    /// `claude-code` (the real Claude Code CLI, through the simulated API host).
    #[arg(long, value_name = "TARGET", default_value = "sim", value_parser = ["sim", CLAUDE_CODE])]
    pub target: String,
    /// The Claude Code CLI binary (`scripts/install-claude-code` prints it); with
    /// `--target claude-code`, required.
    #[arg(long, value_name = "PATH")]
    pub claude_bin: Option<PathBuf>,
    /// With `--target claude-code`: how many times each scenario runs (runs use real
    /// time, so they are numbered, not seeded).
    #[arg(long, value_name = "N", default_value = "1")]
    pub runs: u32,
}

/// What `--json` prints: the simulator's summary keys, with runs where seeds would
/// be, plus the target and its conformance counts.
#[derive(Serialize)]
struct JsonReport<'a> {
    target: &'static str,
    #[serde(flatten)]
    summary: &'a Summary,
    /// Per invariant: how many runs upheld it, broke it, could not observe it.
    conformance: &'a BTreeMap<&'static str, BTreeMap<Verdict, u64>>,
}

/// Runs the scenarios under `paths` on the target `args` names; `None` for the
/// simulator, which `coordsim run` runs itself.
pub fn run(
    paths: &[PathBuf],
    args: &TargetArgs,
    json: bool,
    report: &ReportDirArgs,
) -> Result<Option<ExitCode>> {
    if args.target != CLAUDE_CODE {
        if args.claude_bin.is_some() || args.runs != 1 {
            bail!("--claude-bin and --runs apply only with --target claude-code");
        }
        return Ok(None);
    }
    let scenarios = load_all(paths)?;
    let Some(claude_bin) = &args.claude_bin else {
        bail!(
            "--target claude-code needs --claude-bin PATH (scripts/install-claude-code prints it)"
        );
    };
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let options = ClaudeCodeOptions::from_env(claude_bin.clone());
    // Refuse before any process starts: a folder's unsupported scenario is a usage
    // error, found in a second rather than after every other run.
    for scenario in &scenarios {
        coord_sim::target::check_supported(scenario, CLAUDE_CODE)?;
    }
    let started = Instant::now();
    let mut failures: Vec<Failure> = Vec::new();
    let mut runs_failed = 0u64;
    let mut runs_total = 0u64;
    let mut process_seconds = 0.0;
    let mut conformance: BTreeMap<&'static str, BTreeMap<Verdict, u64>> = BTreeMap::new();
    // A failing run's witness trace, kept for its timeline in a report: a run of the
    // real CLI cannot be run again to the same end.
    let mut failed_runs: BTreeMap<(String, u64), SeedRun> = BTreeMap::new();
    for scenario in &scenarios {
        for run in 1..=args.runs {
            let outcome = run_claude_code(scenario, run, &options)?;
            runs_total += 1;
            process_seconds += outcome.observation.process.wall_ms as f64 / 1000.0;
            for verdict in &outcome.judgment.verdicts {
                *conformance
                    .entry(verdict.invariant)
                    .or_default()
                    .entry(verdict.verdict)
                    .or_default() += 1;
            }
            if !outcome.judgment.failures.is_empty() {
                runs_failed += 1;
                if report.wanted() {
                    failed_runs.insert(
                        (scenario.path.display().to_string(), u64::from(run)),
                        SeedRun {
                            seed: u64::from(run),
                            trace: outcome.trace.clone(),
                            violations: outcome.judgment.violations.clone(),
                            failures: outcome.judgment.failures.clone(),
                            sim_duration: std::time::Duration::from_millis(
                                outcome.observation.process.wall_ms,
                            ),
                            schedule: Vec::new(),
                            cost: Default::default(),
                        },
                    );
                }
            }
            for violation in &outcome.judgment.failures {
                failures.push(Failure {
                    scenario: scenario.path.display().to_string(),
                    seed: u64::from(run),
                    invariant: violation.invariant.to_owned(),
                    detail: format!(
                        "{} (cassette {})",
                        violation.detail,
                        outcome.files.cassette.display()
                    ),
                    repro: outcome.files.replay_command(),
                    repro_cargo: None,
                    shrink: None,
                    shrink_cargo: None,
                });
            }
            if !json {
                let mark = if outcome.judgment.failures.is_empty() {
                    "ok  "
                } else {
                    "FAIL"
                };
                outln!(
                    "{mark} {} run {run}: exit {:?}, {} requests, {} ms",
                    scenario.path.display(),
                    outcome.observation.process.exit_code,
                    outcome.observation.cassette.exchanges.len(),
                    outcome.observation.process.wall_ms
                )?;
            }
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let per_wall = |amount: f64| {
        if wall_seconds > 0.0 {
            amount / wall_seconds
        } else {
            0.0
        }
    };
    let summary = Summary {
        line_type: None,
        scenarios: scenarios.len(),
        scenario_files: scenarios
            .iter()
            .map(|scenario| scenario.path.display().to_string())
            .collect(),
        seeds: (1..u64::from(args.runs) + 1).into(),
        shard: "1/1".to_owned(),
        skipped: Vec::new(),
        seeds_run: runs_total,
        seeds_failed: runs_failed,
        wall_seconds,
        seeds_per_second: per_wall(runs_total as f64),
        sim_seconds: process_seconds,
        sim_seconds_per_wall_second: per_wall(process_seconds),
        interrupted: false,
        failures: Some(failures.clone()),
        cost_usd: 0.0,
        prompt_tokens: 0,
        cache_read_tokens: 0,
        cache_hit_ratio: 0.0,
        coverage: BTreeMap::new(),
        counts: Default::default(),
    };
    report.write(&summary, &scenarios, &|failure: &Failure| {
        failed_runs
            .get(&(failure.scenario.clone(), failure.seed))
            .cloned()
    })?;
    if json {
        let report = JsonReport {
            target: CLAUDE_CODE,
            summary: &summary,
            conformance: &conformance,
        };
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        for failure in &failures {
            // Runs stand where seeds would: say "run", not "seed".
            outln!(
                "FAIL {} run {}: {}: {}\n  replay on the simulator: {}",
                failure.scenario,
                failure.seed,
                failure.invariant,
                failure.detail,
                failure.repro
            )?;
        }
        outln!("conformance ({} runs):", runs_total)?;
        for (invariant, counts) in &conformance {
            let counts: Vec<String> = counts
                .iter()
                .map(|(verdict, count)| format!("{verdict} ×{count}"))
                .collect();
            outln!("  {invariant:<20} {}", counts.join(", "))?;
        }
        outln!(
            "{} scenario(s) × {} run(s) on {CLAUDE_CODE}: {runs_total} runs, {runs_failed} failed, {wall_seconds:.1} s wall",
            scenarios.len(),
            args.runs
        )?;
    }
    Ok(Some(if runs_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }))
}
