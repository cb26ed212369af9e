//! Running one scenario under one seed: the boot loop.
//!
//! A run drives the real `coord-runtime` [`Session`]: its coordinator loop, its
//! workers, its tool gate, its mailboxes and its files. This module prepares the run
//! (the fault schedule, the scripts, the disk, the meter), boots the coordinator
//! host until the run is over, again after each crash, and checks and judges the
//! trace ([`crate::check`]). The parts live in their own modules:
//!
//! - `boot.rs`: one boot, the same on every world: the session (created, or
//!   resumed from what the disk kept after a crash: [`Session::resume`] fails the
//!   tasks that died with the process and the coordinator continues its durable
//!   conversation), its adversary, its crash timer, then the liveness phase.
//! - `tokio_world.rs` (default) and `turmoil_world.rs` (`[settings] world =
//!   "turmoil"` or [`RunOptions::world`]): the executor a boot runs on, and how the
//!   boot reaches the remote-worker host and the model API host. On the tokio world
//!   time is a paused current-thread tokio runtime kept on one time line across boots
//!   by a [`BootClock`]; on the turmoil world the three are turmoil hosts on
//!   turmoil's network and clock (`docs/worlds.md`). A seed runs on one thread, and
//!   every `select!` in the runtime is biased, so the interleaving is a function of
//!   the seed.
//! - `disk.rs`: the run's disk, the world's own unless the scenario or `--disk`
//!   chose another: the in-memory [`MemDisk`](crate::world::MemDisk) on the tokio
//!   world, turmoil's filesystem ([`TurmoilDisk`](crate::world::TurmoilDisk)) on
//!   the turmoil world, both with POSIX durability; or, with `disk = "real"`, the
//!   production disk on a temp directory, which refuses the faults that need lost
//!   writes ([`DiskRefusal`]). A coordinator crash keeps only what was synced.
//!   `lock_witness.rs`: every attempt on a lock file, and every lock moved aside,
//!   as the disk saw them.
//! - `scripts.rs`, `lead.rs`: the scenario's scripts with the fault book applied,
//!   and the team lead's scripted answers.
//! - `tap.rs`, `witness.rs`, `lead_mail.rs`: what each agent's model calls
//!   received ([`TappedModel`]), and the scripts' promises held against it and
//!   against the team leads' inboxes on the disk once the run is over. The cost
//!   meter ([`crate::economics`]) prices every call. A caller may wrap the model
//!   the runtime sees ([`run_seed_with_model_layer`]), as `coordsim record` does.
//!   `idle_witness.rs`: whether a teammate calling its model is marked busy in its
//!   team's file.
//!   `client_hold.rs`: over an HTTP transport, the client's side of the wire (the
//!   recorded hold of each request, the recorded compactions).
//! - `output_files.rs`, `worktrees_left.rs`, `corrupt_inboxes.rs`: the task output
//!   files, the worktrees and the inboxes a fault left corrupt as the disk holds
//!   them once the run is over.
//! - `options.rs`: [`RunOptions`] and the command that reruns a seed.
//!
//! Faults come from the fault engine ([`crate::fault`]): one book, swarm-drawn or
//! explicit, consulted by its disk, model, remote and outside-world adapters.
//! Randomness comes from [`Streams`], one ChaCha stream per purpose. The run has a
//! safety phase, where the fault schedule fires, and a liveness phase after it heals,
//! in which every task must reach a terminal state within the scenario's bound.
//!
//! [`Session`]: coord_runtime::session::Session
//! [`Session::resume`]: coord_runtime::session::Session::resume

mod boot;
mod client_hold;
mod compaction_witness;
mod corrupt_inboxes;
mod disk;
mod envelope_witness;
mod head_witness;
mod idle_witness;
mod lead;
mod lead_mail;
mod lock_witness;
mod mail_stamps;
mod options;
mod output_files;
mod output_reads;
mod panics;
mod progress_witness;
mod retry_witness;
mod scripts;
mod stop_witness;
mod surface_witness;
mod tap;
mod task_records;
mod tokio_world;
mod transcript_boundaries;
mod turmoil_world;
mod witness;
mod worktrees_left;

pub use boot::SimShell;
pub use disk::{disk_refusal, disk_setting, vcs_setting, DiskRefusal};
pub use options::{
    absolute, inside_repository, repro_cargo_command, repro_command, world_flags, RunOptions,
    VcsSetting,
};

pub use lead_mail::LeadMail;
pub use retry_witness::MODEL_RETRIES_MAX;
pub use scripts::{description_prompts, MALICIOUS_NAME, WORKSPACE_DIR};
pub use tap::{TapMemory, TappedModel};

use witness::ScriptPromises;

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::ipc::SessionLayout;
use coord_runtime::world::{Clock, Disk, Model};

use self::boot::BootEnd;
use self::lock_witness::LockWitness;
use crate::cassette::{CassetteError, CassettePolicy};
use crate::check::{
    check_all, judge, judge_calls, judge_compaction_timing, judge_model_retries, judge_panics,
    judge_prompt, judge_requests, judge_spawn_answers, judge_spawn_mode, judge_task_output,
    judge_task_progress, judge_traffic, Violation,
};
use crate::economics::{built_in_prices, CostMeter, RunCost};
use crate::fault::{choose_kinds, draw_faults, FaultBook, SymlinkPlanter};
use crate::model::{ModelPolicy, ScriptPolicy};
use crate::scenario::{Fault, LoadedScenario, Scenario, WorldKind};
use crate::trace::{path_text, trace_hash, Name, SimEvent, Trace, TraceEntry};
use crate::world::{BootClock, BootTimeline, Streams, TurmoilBootClock};

/// Where the session keeps its files.
pub const SESSION_DIR: &str = "/session";

/// Where a worker's transcript lives under the simulated session.
pub fn transcript_path(task_id: &str) -> String {
    format!("{SESSION_DIR}/transcripts/{task_id}.jsonl")
}
/// What an agent without a script left says.
const FALLBACK_TEXT: &str = "done";

/// What one seed of one scenario did.
#[derive(Debug, Clone)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Every step, in order.
    pub trace: Vec<TraceEntry>,
    /// Broken invariants (empty when every invariant held).
    pub violations: Vec<Violation>,
    /// What makes the seed fail, after the scenario's expectations: an unexpected
    /// violation, or an expected one that was not found. Empty when the seed passed.
    pub failures: Vec<Violation>,
    /// Virtual time the run covered.
    pub sim_duration: Duration,
    /// The fault schedule the run used (explicit and swarm-drawn).
    pub schedule: Vec<Fault>,
    /// What the run's model calls cost at the built-in prices: per agent, in
    /// total, the cache-hit ratio and every cache break.
    pub cost: RunCost,
}

impl SeedRun {
    /// The trace's fingerprint. Computed when asked: it writes every event's JSON,
    /// and a sweep that only checks invariants never asks.
    pub fn trace_hash(&self) -> u64 {
        trace_hash(&self.trace)
    }
}

/// A run that could not be carried out (as opposed to one that found a violation).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The tokio runtime could not be built.
    #[error("cannot build the run's executor: {0}")]
    Executor(std::io::Error),
    /// The simulated world could not be set up.
    #[error("cannot set up the simulated world: {0}")]
    Setup(String),
    /// The scenario's cassette could not be read.
    #[error(transparent)]
    Cassette(#[from] CassetteError),
    /// The scenario asks for something the chosen disk cannot do.
    #[error(transparent)]
    DiskRefused(#[from] DiskRefusal),
    /// The turmoil simulation of a boot failed: a host's software returned an error
    /// or panicked, or the boot outran the simulation's time limit.
    #[error("the turmoil world failed: {0}")]
    Turmoil(String),
}

/// Wraps the model the runtime sees, at every boot; it is given the run's clock.
/// The identity for a plain run; a recorder for `coordsim record`.
pub type ModelLayer<'l> = dyn Fn(Arc<dyn Model>, Arc<dyn Clock>) -> Arc<dyn Model> + 'l;

/// Everything the boots of one run share. It owns what it holds: on the turmoil
/// world a boot's software runs in turmoil hosts, which take only `'static` work.
struct RunContext {
    scenario: Arc<Scenario>,
    streams: Streams,
    clock: Arc<dyn BootTimeline>,
    trace: Trace,
    book: FaultBook,
    /// The runtime's disk, with the fault engine's hooks and the lock witness.
    disk: Arc<dyn Disk>,
    /// The same disk, for planting symlinks in worktrees as they are made.
    planter: Arc<dyn SymlinkPlanter>,
    /// The same disk without the fault hooks, for what the simulator reads of it.
    witness_disk: Arc<dyn Disk>,
    /// The production version control, on the real disk; else the simulated one.
    git: Option<Arc<crate::world::RootedGit>>,
    layout: SessionLayout,
    /// What answers the model calls: the scripts, or the scenario's cassette.
    answers: Arc<dyn ModelPolicy>,
    meter: Arc<Mutex<CostMeter>>,
    /// What the model tap has seen, across boots.
    tap: TapMemory,
    /// The gates the scripts' background shells finish at (none without any).
    shell_gates: Option<Arc<crate::model::ShellGates>>,
    /// What the simulated shell answers scripted commands with.
    shell_answers: Option<Arc<crate::model::ShellAnswers>>,
    /// Whether scripted timeouts run the production shell on a real process
    /// (`world::time_out_for_real`): on the tokio world on Linux, when some
    /// answer times out. The boot's executor then enables its I/O driver.
    real_timeouts: bool,
    /// The run's task id draws, when its schedule places a collision among them.
    id_draws: Option<Arc<crate::fault::IdDraws>>,
}

/// Runs `scenario` under `seed`.
pub fn run_seed(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
) -> Result<SeedRun, RunError> {
    run_seed_with_model_layer(scenario, seed, options, &|model, _| model)
}

/// Runs `scenario` under `seed`, with the model the runtime sees (after the tap and
/// the cost meter) wrapped by `model_layer` at every boot.
pub fn run_seed_with_model_layer(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
    model_layer: &ModelLayer<'_>,
) -> Result<SeedRun, RunError> {
    panics::install_hook();
    // Panics of an earlier run on this thread are that run's.
    panics::take();
    Name::forget_shared();
    if let Some(refusal) = disk_refusal(scenario, options) {
        return Err(RunError::DiskRefused(refusal));
    }
    let spec = &scenario.scenario;
    let cassette = CassettePolicy::for_scenario(scenario)?.map(Arc::new);
    let streams = Streams::new(seed);
    let world = options.world.unwrap_or(spec.settings.world);
    let tokio_clock = Arc::new(BootClock::frozen_at(Duration::ZERO));
    let clock: Arc<dyn BootTimeline> = match world {
        WorldKind::Tokio => tokio_clock.clone(),
        WorldKind::Turmoil => Arc::new(TurmoilBootClock::frozen_at(Duration::ZERO)),
    };
    let trace = Trace::new(clock.clone());
    trace.push(
        "sim",
        SimEvent::RunStarted {
            scenario: Name::new(&spec.name),
            profile: Name::new(spec.profile.as_str()),
            coordinator_mode: spec.settings.coordinator_mode,
            liveness_bound_ms: spec.settings.liveness_bound_ms,
            background_forced: spec.settings.fork_experiment
                || spec.settings.assistant_mode
                || spec.settings.proactive_mode,
            background_disabled: spec.settings.background_tasks_disabled,
            binding: spec
                .settings
                .binding
                .as_deref()
                .map(|binding| crate::scenario::binding_key(binding).to_string()),
        },
    );
    let mut schedule = spec.faults.clone();
    if options.swarm {
        let mut rng = streams.rng(Streams::FAULTS);
        let kinds = choose_kinds(spec, disk_setting(spec, options), &mut rng);
        trace.push(
            "sim",
            SimEvent::SwarmChose {
                kinds: kinds.clone(),
            },
        );
        schedule.extend(draw_faults(spec, &kinds, &mut rng));
    }
    trace.push(
        "sim",
        SimEvent::FaultsScheduled {
            faults: schedule.clone(),
        },
    );
    if let Some(spawn_deadline_ms) = spec.settings.spawn_deadline_ms {
        trace.push("sim", SimEvent::SpawnDeadlineSet { spawn_deadline_ms });
    }
    let mut description_prompts = scripts::description_prompts(spec);
    if let Some(cassette) = &cassette {
        description_prompts.extend(cassette.description_prompts());
    }
    let book = FaultBook::new(schedule.clone(), description_prompts, trace.clone());
    let (coordinator_script, worker_scripts) = scripts::apply(spec, &book);
    let promises = ScriptPromises::of(&coordinator_script, &worker_scripts);
    let disk = disk::build(
        spec,
        disk_setting(spec, options),
        vcs_setting(spec, options),
        &book,
        clock.clone(),
        &trace,
    )?;
    let tick_ms = match world {
        WorldKind::Tokio => 1,
        WorldKind::Turmoil => options
            .turmoil_tick_ms
            .map_or(spec.settings.turmoil_tick_ms, NonZeroU64::get),
    };
    let locks = LockWitness::new(
        disk.witness.clone(),
        clock.clone(),
        tick_ms.saturating_mul(1_000),
    );
    let meter = CostMeter::new(&spec.economics, !spec.settings.coordinator_mode)
        .with_recorded_scripts(&coordinator_script, &worker_scripts);
    // The cost meter bills every call's input, so the scripts need not size it.
    let scripts = Arc::new(
        ScriptPolicy::new(
            std::iter::once(coordinator_script).chain(worker_scripts),
            FALLBACK_TEXT,
        )
        .without_input_estimate(),
    );
    let shell_gates = cassette.is_none().then(|| scripts.shell_gates()).flatten();
    let shell_answers = cassette
        .is_none()
        .then(|| scripts.shell_answers())
        .flatten();
    // A gated shell plays its own timeouts; turmoil's hosts run without an I/O
    // driver, and `/proc` is Linux's.
    let real_timeouts = cfg!(target_os = "linux")
        && world == WorldKind::Tokio
        && shell_gates.is_none()
        && shell_answers
            .as_ref()
            .is_some_and(|answers| answers.kills_at_timeout());
    let context = Arc::new(RunContext {
        scenario: Arc::new(spec.clone()),
        streams,
        clock: clock.clone(),
        trace: trace.clone(),
        book: book.clone(),
        disk: locks.disk(disk.runtime),
        planter: disk.planter,
        witness_disk: disk.witness,
        git: disk.git,
        layout: SessionLayout::new(SESSION_DIR),
        answers: match &cassette {
            Some(cassette) => cassette.clone(),
            None => scripts.clone(),
        },
        shell_gates,
        shell_answers,
        real_timeouts,
        id_draws: crate::fault::IdDraws::of(&book),
        meter: Arc::new(Mutex::new(meter)),
        tap: {
            let tap = TapMemory::default();
            if promises.expects_answers() {
                tap.keep_answers();
            }
            if promises.asks_task_progress() {
                tap.keep_rounds();
            }
            tap
        },
    });
    let mut power = disk.power;
    let mut crash_rng = context.streams.rng("crash");
    let mut boot = 0;
    let mut booted_at = Duration::ZERO;
    loop {
        let end = match world {
            WorldKind::Tokio => {
                tokio_world::run_boot(&context, &tokio_clock, boot, booted_at, model_layer)?
            }
            WorldKind::Turmoil => {
                let tick = Duration::from_millis(tick_ms);
                turmoil_world::run_boot(&context, boot, booted_at, tick, model_layer)?
            }
        };
        match end {
            BootEnd::Over | BootEnd::Panicked => break,
            BootEnd::Crashed(at) => {
                // Only what the disk made durable is left.
                let report = power.cut(&mut crash_rng);
                context.book.restore_power();
                locks.power_cut();
                trace.push(
                    "sim",
                    SimEvent::HostCrashed {
                        lost: report.lost.iter().map(|p| path_text(p)).collect(),
                        changed: report.changed.iter().map(|p| path_text(p)).collect(),
                    },
                );
                boot += 1;
                booted_at = at;
            }
        }
    }
    output_files::witness(spec, context.witness_disk.as_ref(), &trace);
    context
        .tap
        .output_reads()
        .witness(context.witness_disk.as_ref(), boot > 0, &trace);
    task_records::witness(context.witness_disk.as_ref(), &trace);
    transcript_boundaries::witness(&context.tap, context.witness_disk.as_ref(), &trace);
    worktrees_left::witness(context.witness_disk.as_ref(), &trace);
    if let Some(git) = &context.git {
        worktrees_left::witness_branches(git, &trace);
    }
    corrupt_inboxes::witness(
        &context.book,
        &context.layout,
        context.witness_disk.as_ref(),
        &trace,
    );
    locks.record(&trace);
    let unanswered = context.tap.launches_unanswered();
    if !unanswered.is_empty() {
        trace.push(
            "coordinator",
            SimEvent::LaunchesUnanswered {
                task_ids: unanswered,
            },
        );
    }
    // A cassette answers in the scripts' place: there is no script to play out.
    if cassette.is_none() {
        // Read as a witness: no fault meets these reads, and they move no schedule.
        let lead_mail = lead_mail::lead_mail(&context.layout, context.witness_disk.as_ref());
        promises.record(&context.tap, &lead_mail, &trace);
        let stamped =
            mail_stamps::stamped_mail(&context.layout, context.witness_disk.as_ref(), |owner| {
                context.tap.sent_to(owner)
            });
        let mail = context.tap.mail_stamped_early(&stamped);
        if !mail.is_empty() {
            trace.push("sim", SimEvent::MailStampedEarly { mail });
        }
        if let Some(asked) = lead_mail::permissions_asked(&spec.lead, &lead_mail) {
            trace.push("sim", asked);
        }
        let shutdowns = lead_mail::shutdowns_witnessed(
            &spec.lead,
            &lead_mail,
            &context.layout,
            context.witness_disk.as_ref(),
        );
        if let Some(shutdowns) = shutdowns {
            trace.push("sim", shutdowns);
        }
        let marked = lead_mail::shutdowns_marked(
            &spec.lead,
            context.tap.lead_shutdown_requests(),
            &context.layout,
            context.witness_disk.as_ref(),
        );
        if let Some(marked) = marked {
            trace.push("sim", marked);
        }
    }
    for message in panics::take() {
        trace.push("sim", SimEvent::RuntimePanicked { message });
    }
    let entries = trace.take();
    let sim_duration = Duration::from_millis(entries.last().map_or(0, |e| e.time_ms));
    let violations = check_all(&entries);
    let mut failures = judge(spec, &violations);
    failures.extend(judge_panics(&entries));
    failures.extend(judge_prompt(&entries));
    failures.extend(judge_spawn_mode(&entries));
    failures.extend(judge_spawn_answers(&entries));
    failures.extend(judge_compaction_timing(&entries));
    failures.extend(judge_model_retries(&entries));
    failures.extend(judge_requests(&entries));
    failures.extend(judge_task_output(&entries));
    failures.extend(judge_task_progress(&entries));
    failures.extend(judge_traffic(spec, &entries));
    failures.extend(judge_calls(&entries, spec.faults.len()));
    if let Some(cassette) = &cassette {
        failures.extend(cassette.failures());
    }
    let cost = RunCost::of(&entries, built_in_prices());
    Ok(SeedRun {
        seed,
        cost,
        trace: entries,
        violations,
        failures,
        sim_duration,
        schedule,
    })
}
