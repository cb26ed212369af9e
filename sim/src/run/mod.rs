//! Running one scenario under one seed: the boot loop.
//!
//! A run drives the real `coord-runtime` [`Session`]: its coordinator loop, its
//! workers, its tool gate, its mailboxes and its files. This module only wires the
//! parts together and boots the coordinator host, again after each crash; the parts
//! live in their own modules.
//!
//! The world around the session is the tokio world described here, or, with
//! `[settings] world = "turmoil"` or [`RunOptions::world`], the turmoil world
//! (`turmoil_world.rs`): the same boot, fault engine and checks, with the
//! coordinator, the remote-worker host and the model API host as turmoil hosts on
//! turmoil's network and clock (`docs/worlds.md`). On the tokio world:
//!
//! - **Time** is a paused current-thread tokio runtime
//!   ([`VirtualClock`](crate::world::VirtualClock)), kept on one timeline across
//!   boots by a [`BootClock`]: when every task waits, the clock jumps to the next
//!   timer, so a ten-minute model latency costs nothing. A seed runs on one thread,
//!   and every `select!` in the runtime is biased, so the interleaving is a function
//!   of the seed.
//! - **The disk** is a [`MemDisk`] with POSIX durability, or with `disk = "real"`
//!   the production disk on a temp directory ([`RootedRealDisk`](crate::world::RootedRealDisk)),
//!   which refuses the faults that need lost writes ([`DiskRefusal`]). A coordinator crash drops
//!   the tokio runtime (every task of the dead process with it), then keeps only what
//!   was synced, and the runtime restarts from that ([`Session::resume`]): tasks that
//!   died with the process end failed and are notified, and the coordinator continues
//!   its durable conversation ([`Session::resume_coordinator`]) before the liveness
//!   phase runs as on the first boot.
//! - **The model** plays the scenario's scripts, or replays its cassette
//!   ([`crate::cassette`]); a tap records what each agent saw ([`TappedModel`]) and
//!   the cost meter ([`crate::economics`]) prices every call. A caller may wrap the
//!   model the runtime sees ([`run_seed_with_model_layer`]), as `coordsim record`
//!   does.
//! - **Faults** come from the fault engine ([`crate::fault`]): one book, swarm-drawn
//!   or explicit, consulted by its disk, model, remote and outside-world adapters.
//! - **Randomness** comes from [`Streams`], one ChaCha stream per purpose.
//!
//! The run has a safety phase, where the fault schedule fires, and a liveness phase
//! after it heals, in which every task must reach a terminal state within the
//! scenario's bound. Its trace is then checked and judged ([`crate::check`]).

mod disk;
mod lead;
mod scripts;
mod tap;
mod turmoil_world;
mod witness;

pub use disk::{disk_refusal, disk_setting, DiskRefusal};

pub use scripts::{MALICIOUS_NAME, WORKSPACE_DIR};
pub use tap::{TapMemory, TappedModel};

use witness::ScriptPromises;

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use coord_runtime::ipc::{Scratchpad, SessionLayout};
use coord_runtime::prompt::PromptInputs;
use coord_runtime::session::{AgentRef, Effects, Session, SessionConfig, SpawnOutcome};
use coord_runtime::tools::StandardTools;
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, Clock, Disk, Entropy, Model, Remote, Shell, ShellCommand, ShellOutput,
};
use coord_runtime::World;

use crate::cassette::{CassetteError, CassettePolicy};
use crate::check::{check_all, judge, judge_calls, judge_traffic, Violation};
use crate::economics::{built_in_prices, CostMeter, RunCost};
use crate::fault::{
    adversary, choose_kinds, draw_faults, recover_mailboxes, FaultBook, FaultyPolicy,
    ScheduledPartitions, SimulatedCrash, API_TIMEOUT, SAFETY_PHASE,
};
use crate::model::{ModelPolicy, ScriptPolicy, SimulatedModel};
use crate::scenario::{
    binding_key, DiskSetting, EntropySource, Fault, LoadedScenario, ModelTransport, Scenario,
    WorldKind,
};
use crate::trace::{path_text, trace_hash, SimEvent, Trace, TraceEntry, WitnessedTools};
use crate::world::{
    over_http, start_remote_host, BootClock, BootTimeline, MemDisk, SimVcs, Streaming, Streams,
    TurmoilBootClock,
};

/// Where the session keeps its files.
pub const SESSION_DIR: &str = "/session";
/// What an agent without a script left says.
const FALLBACK_TEXT: &str = "done";

/// How a seed is run, besides the scenario and the seed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Swarm mode: the seed also chooses which fault kinds the scenario allows are
    /// on, and draws a fault schedule from them.
    pub swarm: bool,
    /// The disk, overriding the scenario's `disk` setting; `None` keeps the
    /// scenario's.
    pub disk: Option<DiskSetting>,
    /// The simulated world to run in, over the scenario's `[settings] world`
    /// (`--world`). `None` keeps the scenario's.
    pub world: Option<WorldKind>,
    /// The turmoil world's tick in ms, over the scenario's
    /// `[settings] turmoil_tick_ms` (`--turmoil-tick-ms`). `None` keeps the
    /// scenario's.
    pub turmoil_tick_ms: Option<NonZeroU64>,
}

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

/// The complete command that reruns one seed of one scenario the way it was run.
pub fn repro_command(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    let swarm = if options.swarm { " --swarm" } else { "" };
    let world = world_flags(options);
    format!(
        "cargo run --release --locked -p coord-sim -- run {} --seed {seed}{swarm}{world}",
        scenario_path.display()
    )
}

/// The command-line flags that choose the world `options` asks for, each with a
/// leading space: empty when the run keeps the scenario's world, tick and disk.
pub fn world_flags(options: &RunOptions) -> String {
    let mut flags = match options.world {
        Some(world) => format!(" --world {world}"),
        None => String::new(),
    };
    if let Some(tick_ms) = options.turmoil_tick_ms {
        flags += &format!(" --turmoil-tick-ms {tick_ms}");
    }
    if let Some(disk) = options.disk {
        flags += &format!(" --disk {disk}");
    }
    flags
}

/// A shell that runs nothing: background commands in scenarios succeed at once.
#[derive(Debug)]
pub struct SimShell;

impl Shell for SimShell {
    fn run(&self, _command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>> {
        Box::pin(std::future::ready(Ok(ShellOutput {
            exit_code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            timed_out: false,
        })))
    }
}

/// Keeps simulated process deaths off stderr; every other panic is reported as usual.
fn install_crash_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<SimulatedCrash>().is_none() {
                previous(info);
            }
        }));
    });
}

/// What one boot of the coordinator host ended in.
enum BootEnd {
    /// The host lost power at this virtual time.
    Crashed(Duration),
    /// The run is over.
    Over,
}

/// Everything the boots of one run share. It owns what it holds: on the turmoil
/// world a boot's software runs in turmoil hosts, which take only `'static` work.
struct RunContext {
    scenario: Arc<Scenario>,
    streams: Streams,
    clock: Arc<dyn BootTimeline>,
    trace: Trace,
    book: FaultBook,
    /// The in-memory disk, whose power a coordinator crash cuts; `None` on the real
    /// disk, which refuses coordinator crashes before the run.
    mem: Option<MemDisk>,
    /// The runtime's disk, with the fault engine's hooks.
    disk: Arc<dyn Disk>,
    layout: SessionLayout,
    /// What answers the model calls: the scripts, or the scenario's cassette.
    answers: Arc<dyn ModelPolicy>,
    meter: Arc<Mutex<CostMeter>>,
    /// What the model tap has seen, across boots.
    tap: TapMemory,
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
    install_crash_hook();
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
    let executor = || {
        let (parking, unparked) = (tokio_clock.clone(), tokio_clock.clone());
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .on_thread_park(move || parking.forget_reading())
            .on_thread_unpark(move || unparked.forget_reading())
            .build()
            .map_err(RunError::Executor)
    };
    let trace = Trace::new(clock.clone());
    trace.push(
        "sim",
        SimEvent::RunStarted {
            scenario: spec.name.clone(),
            profile: spec.profile.to_string(),
            coordinator_mode: spec.settings.coordinator_mode,
            liveness_bound_ms: spec.settings.liveness_bound_ms,
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
        &book,
        clock.clone(),
        &trace,
    )?;
    let meter = CostMeter::new(&spec.economics, !spec.settings.coordinator_mode)
        .with_recorded_scripts(&coordinator_script, &worker_scripts);
    let context = Arc::new(RunContext {
        scenario: Arc::new(spec.clone()),
        streams,
        clock: clock.clone(),
        trace: trace.clone(),
        book: book.clone(),
        disk: disk.runtime,
        mem: disk.mem,
        layout: SessionLayout::new(SESSION_DIR),
        answers: match &cassette {
            Some(cassette) => cassette.clone(),
            // The cost meter bills every call's input, so the scripts need not size it.
            None => Arc::new(
                ScriptPolicy::new(
                    std::iter::once(coordinator_script).chain(worker_scripts),
                    FALLBACK_TEXT,
                )
                .without_input_estimate(),
            ),
        },
        meter: Arc::new(Mutex::new(meter)),
        tap: {
            let tap = TapMemory::default();
            if promises.expects_answers() {
                tap.keep_answers();
            }
            tap
        },
    });
    let mut crash_rng = context.streams.rng("crash");
    let mut boot = 0;
    let mut booted_at = Duration::ZERO;
    loop {
        let end = match world {
            WorldKind::Tokio => {
                let runtime = executor()?;
                let end = runtime.block_on(async {
                    context.clock.reboot(booted_at);
                    let clock: Arc<dyn Clock> = context.clock.clone();
                    let model = boot_model(&context, boot, model_layer, &|model, streaming| {
                        over_http(model, clock.clone(), streaming, API_TIMEOUT)
                    });
                    let partitions = Arc::new(ScheduledPartitions::new(context.book.clone()));
                    let remote = start_remote_host(model.clone(), clock, partitions);
                    let end = run_boot(&context, boot, booted_at, model, Arc::new(remote)).await;
                    // Read the time while the executor's clock still runs.
                    context.clock.freeze();
                    end
                })?;
                // Dropping the executor drops every task of this boot: a dead process
                // does nothing more.
                drop(runtime);
                end
            }
            WorldKind::Turmoil => {
                let tick_ms = options
                    .turmoil_tick_ms
                    .map_or(spec.settings.turmoil_tick_ms, NonZeroU64::get);
                let tick = Duration::from_millis(tick_ms);
                turmoil_world::run_boot(&context, boot, booted_at, tick, model_layer)?
            }
        };
        match end {
            BootEnd::Over => break,
            BootEnd::Crashed(at) => {
                // Only what the disk made durable is left.
                let Some(mem) = &context.mem else {
                    unreachable!("the real disk refuses coordinator crashes before the run")
                };
                let report = mem.crash(&mut crash_rng);
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
    // A cassette answers in the scripts' place: there is no script to play out.
    if cassette.is_none() {
        promises.record(&context.tap, &trace);
    }
    let entries = trace.take();
    let sim_duration = Duration::from_millis(entries.last().map_or(0, |e| e.time_ms));
    let violations = check_all(&entries);
    let mut failures = judge(spec, &violations);
    if !options.swarm {
        failures.extend(judge_traffic(spec, &entries));
        failures.extend(judge_calls(&entries));
    }
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

fn session_config(scenario: &Scenario) -> SessionConfig {
    let settings = &scenario.settings;
    let mut config = SessionConfig::new(scenario.profile);
    config.coordinator_mode = settings.coordinator_mode;
    config.spawn_deadline = Duration::from_millis(settings.spawn_deadline_ms);
    config.idle_poll = Duration::from_millis(settings.idle_poll_ms);
    config.turns_max = settings.turns_max;
    config.cwd = PathBuf::from(WORKSPACE_DIR);
    config.repo = Some(PathBuf::from(WORKSPACE_DIR));
    config.defects = settings.defects.iter().copied().collect();
    config.binding = settings.binding.as_deref().map(binding_key);
    if let Some(size_bytes_max) = settings.output_bytes_max {
        config.output_limits.size_bytes_max = size_bytes_max;
    }
    config.eviction_grace = Duration::from_millis(settings.eviction_grace_ms);
    config
}

/// The model the runtime sees in boot number `boot`: the scenario's answers with
/// the fault engine's model faults, latency on the run's clock, the tap and the cost
/// meter; then, for an HTTP transport, `over_network` of that (the world's provider
/// and API host); then `model_layer`.
fn boot_model(
    context: &RunContext,
    boot: u32,
    model_layer: &ModelLayer<'_>,
    over_network: &dyn Fn(Arc<dyn Model>, Streaming) -> Arc<dyn Model>,
) -> Arc<dyn Model> {
    let clock: Arc<dyn Clock> = context.clock.clone();
    let coordinator_prompt = context.scenario.coordinator.prompt.clone();
    let policy = FaultyPolicy::new(
        context.answers.clone(),
        context.book.clone(),
        coordinator_prompt.clone(),
    );
    let model = SimulatedModel::new(
        Arc::new(policy),
        clock.clone(),
        context
            .streams
            .rng(&format!("{}/boot-{boot}", Streams::LATENCY)),
    );
    context.meter.lock().expect("meter poisoned").begin_boot();
    let model: Arc<dyn Model> = Arc::new(
        TappedModel::new(
            Arc::new(model),
            context.book.clone(),
            context.trace.clone(),
            coordinator_prompt.clone(),
            context.meter.clone(),
        )
        .remembering(context.tap.clone()),
    );
    let model = match context.scenario.settings.model_transport {
        ModelTransport::Direct => model,
        ModelTransport::Http => over_network(model, Streaming::Off),
        ModelTransport::HttpStreaming => over_network(model, Streaming::On),
    };
    model_layer(model, clock)
}

/// One boot of the coordinator host: the session runs until the run ends or the
/// host crashes.
///
/// `model` is the model the runtime sees and `remote` its way to the remote-worker
/// host, both made for this boot by the world it runs in; the boot's clock is
/// already started.
async fn run_boot(
    context: &RunContext,
    boot: u32,
    booted_at: Duration,
    model: Arc<dyn Model>,
    remote: Arc<dyn Remote>,
) -> Result<BootEnd, RunError> {
    let scenario = &*context.scenario;
    let entropy: Arc<dyn Entropy> = match scenario.settings.entropy {
        EntropySource::Seed => Arc::new(
            context
                .streams
                .entropy(&crate::world::host_entropy_stream("coordinator", boot)),
        ),
        EntropySource::Os => Arc::new(ChaChaEntropy::from_os()),
    };
    let clock: Arc<dyn Clock> = context.clock.clone();
    let disk = context.disk.clone();
    let world = World {
        clock: clock.clone(),
        entropy,
        disk: disk.clone(),
        journal: Arc::new(context.trace.clone()),
    };
    let scratchpad = Arc::new(Scratchpad::new(&world, context.layout.scratch_dir()));
    let shell: Arc<dyn Shell> = Arc::new(SimShell);
    let coordinator_prompt = scenario.coordinator.prompt.clone();
    let effects = Effects {
        model,
        tools: Arc::new(WitnessedTools::new(
            Arc::new(StandardTools::new(world.clone(), shell.clone(), scratchpad)),
            context.trace.clone(),
        )),
        vcs: Some(Arc::new(SimVcs::new(disk))),
        remote: Some(remote),
        shell: Some(shell),
    };
    let config = session_config(scenario);
    let session = if boot > 0 {
        context.trace.push("sim", SimEvent::HostRestarted { boot });
        // The runtime restarts from what the disk kept: the session file, the task
        // records and the coordinator's conversation. Tasks that were running died
        // with the old process; resuming fails them and notifies the coordinator.
        match Session::resume(world.clone(), effects, config, context.layout.clone()) {
            Ok(session) => session,
            Err(error) => {
                context.trace.push(
                    "sim",
                    SimEvent::RunEnded {
                        open_tasks: Vec::new(),
                        coordinator: format!("restart failed: {error}"),
                    },
                );
                return Ok(BootEnd::Over);
            }
        }
    } else {
        match Session::create(world.clone(), effects, config, context.layout.clone()) {
            Ok(session) => session,
            // A disk fault can fail the session file's first write: the runtime
            // refuses to start with a typed error, which is the right answer, not a
            // harness fault. With no fault fired, a failed start is the harness's own.
            Err(error) if !context.book.fired_any() => {
                return Err(RunError::Setup(error.to_string()))
            }
            Err(error) => {
                context.book.heal();
                context.trace.push(
                    "sim",
                    SimEvent::RunEnded {
                        open_tasks: Vec::new(),
                        coordinator: format!("could not start: {error}"),
                    },
                );
                return Ok(BootEnd::Over);
            }
        }
    };
    let adversary = if boot > 0 {
        // Read back what the mailboxes kept. The outside world's one-shot faults
        // (producers, stale locks) acted on the first boot; only the end of the
        // safety phase still lies ahead.
        recover_mailboxes(
            &world,
            &context.layout,
            &context.book,
            &context.trace,
            scenario.profile,
        )
        .await;
        let book = context.book.clone();
        let clock = world.clock.clone();
        tokio::spawn(async move {
            clock.sleep(SAFETY_PHASE.saturating_sub(booted_at)).await;
            book.heal();
        })
    } else {
        tokio::spawn(adversary(
            session.clone(),
            world.clone(),
            context.layout.clone(),
            context.book.clone(),
            context.trace.clone(),
            scenario.profile,
        ))
    };
    let crash_at = context
        .book
        .schedule()
        .iter()
        .filter_map(|fault| match fault {
            Fault::CoordinatorCrash { at_ms } => Some(Duration::from_millis(*at_ms)),
            _ => None,
        })
        .filter(|at| *at > booted_at)
        .min();
    // The run limit is on the run's whole timeline, across boots.
    let run_limit = Duration::from_millis(scenario.settings.run_limit_ms).saturating_sub(booted_at);
    if boot == 0 {
        launch_for_coordinator(context, &session).await;
        if !scenario.lead.is_empty() {
            tokio::spawn(lead::lead(
                session.clone(),
                scenario.lead.clone(),
                context.book.clone(),
                Duration::from_millis(scenario.settings.idle_poll_ms),
            ));
        }
    }
    let mut inputs = PromptInputs::default();
    if let Some(text) = &scenario.settings.system_prompt {
        let mut sources = coord_runtime::prompt::PromptSources::default();
        sources.default_prompt = vec![text.clone()];
        inputs = inputs.with_sources(sources);
    }
    let system = session.main_system_prompt(&inputs);
    // A restarted coordinator continues its durable conversation.
    let coordinator = async {
        match boot {
            0 => session.run_coordinator(&coordinator_prompt, system).await,
            _ => {
                session
                    .resume_coordinator(&coordinator_prompt, system)
                    .await
            }
        }
    };
    let crash = async {
        match crash_at {
            Some(at) => tokio::time::sleep(at - booted_at).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        biased;
        result = coordinator => match result {
            Ok(report) => format!("finished after {} turns", report.turns),
            Err(error) => format!("failed: {error}"),
        },
        () = crash => {
            let fired = context.book.fire(
                |fault| format!("power cut: {fault:?}"),
                |fault| matches!(fault, Fault::CoordinatorCrash { at_ms } if crash_at == Some(Duration::from_millis(*at_ms))),
            );
            if fired.is_some() {
                return Ok(BootEnd::Crashed(context.clock.monotonic()));
            }
            "crash not fired".to_owned()
        },
        () = tokio::time::sleep(run_limit) => "cut off at the run limit".to_owned(),
    };
    context.book.heal();
    // Liveness phase: faults have stopped; every task must end within the bound.
    let bound = Duration::from_millis(scenario.settings.liveness_bound_ms);
    let liveness_end = context.clock.monotonic() + bound;
    loop {
        let change = session.next_change();
        let now = context.clock.monotonic();
        if session.outstanding() == 0 || now >= liveness_end {
            break;
        }
        session.wait_for_change(change, liveness_end - now).await;
    }
    adversary.abort();
    let open_tasks = session
        .tasks()
        .into_iter()
        .filter(|task| !task.status().is_terminal())
        .map(|task| task.id.to_string())
        .collect();
    context.trace.push(
        "sim",
        SimEvent::RunEnded {
            open_tasks,
            coordinator: outcome,
        },
    );
    session.abort_all();
    Ok(BootEnd::Over)
}

/// Who spawns the scenario's `launches` in the trace.
const HARNESS_LABEL: &str = "harness";

/// Spawns the scenario's `launches` as the embedding harness does, before the
/// coordinator's first turn: each is the coordinator's task and belongs to the
/// binding the session serves. A launch the runtime refuses is in the trace as its
/// spawn failure, never a harness error.
async fn launch_for_coordinator(context: &RunContext, session: &Session) {
    for launch in &context.scenario.launches {
        let input = serde_json::json!({
            "description": launch.description,
            "prompt": launch.prompt,
        });
        let Ok(input) = coord_runtime::agent::AgentInput::parse(&input) else {
            continue;
        };
        match session.spawn(&AgentRef::Main, input, None).await {
            Ok(SpawnOutcome::Async(launched)) => {
                context
                    .book
                    .learn_launch(&launched.agent_id, &launch.description);
            }
            Ok(SpawnOutcome::Sync { task_id, .. }) => {
                context
                    .book
                    .learn_launch(task_id.as_str(), &launch.description);
            }
            Err(error) => context.trace.push(
                HARNESS_LABEL,
                SimEvent::ToolFailed {
                    role: HARNESS_LABEL.to_owned(),
                    tool: "Agent".to_owned(),
                    error: error.to_string(),
                },
            ),
        }
    }
}
