//! Real coordinators under test: the Claude Code CLI driven as a black box through
//! the simulated API host, judged by the same checkers as the simulator.
//!
//! `coordsim run PATH... --target claude-code --claude-bin PATH --runs N` runs each
//! scenario `N` times against the real process ([`run_claude_code`]). One run:
//!
//! 1. refuses a scenario that asks for what the target cannot do ([`support`]);
//! 2. makes a fresh scratch home, workspace and temp directory ([`process`]);
//! 3. starts the API host on `127.0.0.1:0`, answering from the scenario's scripts
//!    with its model faults, recording every exchange ([`loopback`], with the CLI's
//!    request dialect read by [`dialect`]);
//! 4. runs the CLI with the coordinator's prompt, under a wall-clock timeout; a
//!    `worker-crash` or a `coordinator-crash` at a model call SIGKILLs it when
//!    that agent's call arrives, and the session is restarted with `--resume`;
//! 5. observes what it did: its requests (which hold every envelope and message each
//!    agent was handed), its exit status and stream-json output, the files it left
//!    ([`observation`]), and writes them with a replay scenario ([`recording`]);
//! 6. builds the witness trace and judges it: a verdict per invariant of PROTOCOL.md
//!    §8, "not observable on this target" where the process shows no evidence
//!    ([`conformance`]).
//!
//! Runs use real time: they are numbered, not seeded, and a failure names the run's
//! cassette and the command that replays it on the simulator.

pub mod conformance;
pub mod dialect;
pub mod loopback;
pub mod observation;
pub mod plant;
pub mod process;
pub mod recording;
pub mod support;

pub use conformance::{judge_witness, InvariantVerdict, Judgment, Verdict, OBSERVABLE};
pub use observation::{witness_trace, Observation, ObservedFile, ProcessReport};
pub use recording::{ObservationError, RunFiles};
pub use support::{check_supported, TargetRefusal, SUPPORTED_FAULT_KINDS};

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{Clock, SystemClock};

use crate::cassette::{Recording, Secrets};
use crate::fault::FaultKind;
use crate::scenario::LoadedScenario;
use crate::trace::{SimEvent, Trace, TraceEntry, TraceEvent};

/// What the restarted CLI is told after `--resume`: the coordinator's script goes
/// on from where its conversation is.
pub const RESUME_PROMPT: &str = "The previous session ended. Continue.";

/// The target's name, as `--target` spells it.
pub const CLAUDE_CODE: &str = "claude-code";

/// How long one run of the CLI may take before it is killed, unless
/// `COORDSIM_RUN_TIMEOUT_MS` says otherwise.
pub const RUN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(120);

/// How to run the Claude Code target.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaudeCodeOptions {
    /// The CLI binary (`scripts/install-claude-code` prints its path).
    pub claude_bin: PathBuf,
    /// How long one run may take.
    pub run_timeout: Duration,
    /// Where run files go ([`recording`]).
    pub runs_dir: PathBuf,
    /// Whether a passed run's files are kept.
    pub keep_passed: bool,
}

impl ClaudeCodeOptions {
    /// Options for `claude_bin`, the rest from the environment: `COORDSIM_RUNS_DIR`
    /// (default `target/claude-code-runs`), `COORDSIM_KEEP_RUNS=1`,
    /// `COORDSIM_RUN_TIMEOUT_MS` (default 120000).
    pub fn from_env(claude_bin: PathBuf) -> Self {
        let run_timeout = std::env::var("COORDSIM_RUN_TIMEOUT_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(RUN_TIMEOUT_DEFAULT, Duration::from_millis);
        let runs_dir = std::env::var_os(recording::RUNS_DIR_VARIABLE)
            .map_or_else(|| PathBuf::from(recording::RUNS_DIR_DEFAULT), PathBuf::from);
        Self {
            claude_bin,
            run_timeout,
            runs_dir,
            keep_passed: std::env::var(recording::KEEP_RUNS_VARIABLE).is_ok_and(|v| v == "1"),
        }
    }
}

/// A run that could not be carried out (as opposed to one that found a violation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The scenario asks for something the target cannot do.
    #[error(transparent)]
    Refused(#[from] TargetRefusal),
    /// The CLI binary does not exist or cannot be run.
    #[error("cannot run the Claude Code CLI {}: {source} (install it with scripts/install-claude-code)", path.display())]
    Binary {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The scratch directories, the API host or the run files failed.
    #[error("cannot set up run {run} of {scenario}: {source}")]
    Setup {
        /// The scenario file.
        scenario: String,
        /// The run number.
        run: u32,
        /// Why.
        source: io::Error,
    },
}

/// What one run of the CLI did and what the checkers made of it.
#[derive(Debug, Clone)]
pub struct TargetRun {
    /// The run's number, from 1: it stands where a seed would.
    pub run: u32,
    /// What the process showed.
    pub observation: Observation,
    /// The witness trace built from it.
    pub trace: Vec<TraceEntry>,
    /// The verdicts and failures.
    pub judgment: Judgment,
    /// The run's files (removed if it passed, unless kept).
    pub files: RunFiles,
}

/// Runs `scenario` once on the Claude Code CLI: run number `run` (see the module
/// docs for the steps).
pub fn run_claude_code(
    scenario: &LoadedScenario,
    run: u32,
    options: &ClaudeCodeOptions,
) -> Result<TargetRun, TargetError> {
    check_supported(scenario, CLAUDE_CODE)?;
    let spec = &scenario.scenario;
    let setup = |source: io::Error| TargetError::Setup {
        scenario: scenario.path.display().to_string(),
        run,
        source,
    };
    let files = RunFiles::new(&options.runs_dir, &spec.name, run);
    if let Some(folder) = files.cassette.parent() {
        std::fs::create_dir_all(folder).map_err(setup)?;
    }
    let scratch = process::Scratch::new().map_err(setup)?;
    let wall: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let fault_trace = Trace::new(wall);
    let book = loopback::fault_book(spec, fault_trace.clone());
    let recording = Recording::to_file(&files.cassette)
        .scrubbing(Secrets::new().with_literal(process::DUMMY_API_KEY));
    let plant = plant::TaskDirPlant::for_faults(
        &spec.faults,
        &scratch.tmp(),
        &scratch.workspace(),
        &scratch.outside(),
    );
    let api = loopback::LoopbackApi::start(spec, book, recording.clone(), plant).map_err(setup)?;
    // A worker crash, or a coordinator crash at a model call, is the whole process
    // killed when that agent's call arrives (the host then holds the call
    // unanswered), and the session resumed.
    let crashes_fired = || {
        fault_trace
            .entries()
            .iter()
            .filter(|entry| {
                matches!(
                    &entry.typed,
                    TraceEvent::Sim(SimEvent::FaultFired { kind, .. })
                        if matches!(kind, FaultKind::WorkerCrash | FaultKind::CoordinatorCrash)
                )
            })
            .count()
    };
    let start = |resume: Option<&str>, kills_before: usize| {
        let prompt = match resume {
            None => spec.coordinator.prompt.as_str(),
            Some(_) => RESUME_PROMPT,
        };
        process::run_cli(
            &options.claude_bin,
            prompt,
            resume,
            &scratch,
            &api.base_url(),
            options.run_timeout,
            &|| crashes_fired() > kills_before,
        )
        .map_err(|source| TargetError::Binary {
            path: options.claude_bin.clone(),
            source,
        })
    };
    let mut ended = start(None, 0)?;
    let mut restarts: u32 = 0;
    let mut kills = u32::from(ended.killed_by_fault);
    let mut unresumable = None;
    let mut wall = ended.wall;
    let mut stdout = ended.stdout.clone();
    // Bounded: each round needs a fault that has not fired before, and each fires once.
    while ended.killed_by_fault && (restarts as usize) < spec.faults.len() {
        let Some(session) = scratch.session_id() else {
            unresumable = Some(wall);
            break;
        };
        restarts += 1;
        ended = start(Some(&session), restarts as usize)?;
        kills += u32::from(ended.killed_by_fault);
        wall += ended.wall;
        stdout.push_str(&ended.stdout);
    }
    let request_paths = api.received().into_iter().map(|r| r.path).collect();
    drop(api);
    let cassette = recording
        .finish()
        .map_err(|error| setup(io::Error::other(error)))?;
    let (stream_json_result, stream_json_events) = observation::stream_json(&stdout);
    let process = ProcessReport {
        exit_code: ended.exit_code,
        timed_out: ended.timed_out,
        kills,
        restarts,
        wall_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
        stream_json_result,
        stream_json_events,
        files: observation::observed_files(scratch.root()),
        request_paths,
    };
    files.write(scenario, &process).map_err(setup)?;
    let observation = Observation { cassette, process };
    let mut trace = witness_trace(spec, &observation);
    // The faults the host fired, stamped at the start: they explain what follows.
    // A crash is the process's kill, which the witness trace records itself.
    let fired = fault_trace.take().into_iter().filter(|entry| {
        matches!(
            &entry.typed,
            TraceEvent::Sim(SimEvent::FaultFired { kind, .. })
                if !matches!(kind, FaultKind::WorkerCrash | FaultKind::CoordinatorCrash)
        )
    });
    let at = trace.len().min(2);
    let fired: Vec<TraceEntry> = fired
        .map(|entry| TraceEntry {
            time_ms: 0,
            ..entry
        })
        .collect();
    trace.splice(at..at, fired);
    let mut judgment = judge_witness(spec, &trace);
    if let Some(failure) = stderr_failure(&ended) {
        judgment.failures.push(failure);
    }
    if let Some(killed_after) = unresumable {
        judgment.failures.push(crate::check::Violation {
            invariant: "target-resume",
            detail: format!(
                "SIGKILLed at a crash fault {} ms into the run, the CLI had saved no \
                 session under its home: there was nothing to --resume",
                killed_after.as_millis()
            ),
        });
    }
    if judgment.failures.is_empty() && !options.keep_passed {
        files.remove();
    }
    Ok(TargetRun {
        run,
        observation,
        trace,
        judgment,
        files,
    })
}

/// A process that timed out is a failure of its own, with its last words.
fn stderr_failure(ended: &process::ProcessEnd) -> Option<crate::check::Violation> {
    if !ended.timed_out {
        return None;
    }
    let tail: String = ended
        .stderr
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .join(" / ");
    Some(crate::check::Violation {
        invariant: "target-timeout",
        detail: format!(
            "the CLI was still running after {} ms and was killed; stderr ends: {tail}",
            ended.wall.as_millis()
        ),
    })
}
