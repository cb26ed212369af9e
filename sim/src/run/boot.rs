//! One boot of the coordinator host, the same on every world: the real session
//! on the run's disk, clock and model, its adversary, its crash timer, then the
//! liveness phase.
//!
//! The world ([`tokio_world`](super::tokio_world) or
//! [`turmoil_world`](super::turmoil_world)) makes the boot's model and remote and
//! runs [`run_boot`] on its own executor.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::ipc::Scratchpad;
use coord_runtime::prompt::{PersonaInputs, PromptInputs, PromptSources};
use coord_runtime::session::{AgentRef, Effects, Session, SessionConfig, SpawnOutcome};
use coord_runtime::tools::StandardTools;
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, Clock, Entropy, Model, Remote, Shell, ShellCommand, ShellOutput, Vcs,
};
use coord_runtime::World;

use super::client_hold::ClientHold;
use super::compaction_witness::compaction_threshold_tokens;
use super::{lead, panics, ModelLayer, RunContext, RunError, TappedModel, WORKSPACE_DIR};
use crate::check::SystemRule;
use crate::fault::{
    adversary, recover_mailboxes, CollidingEntropy, FaultyPolicy, LinkedWorktrees, SAFETY_PHASE,
};
use crate::model::{ShellAnswer, ShellAnswers, SimulatedModel};
use crate::scenario::{binding_key, EntropySource, Fault, ModelTransport, Scenario, Settings};
use crate::trace::{
    current_tool_writer, path_text, Name, SimEvent, Trace, WitnessedShell, WitnessedTools,
    CLOCK_STOOD_STILL, COORDINATOR_CUT_OFF, RESTART_FAILED,
};
use crate::world::{
    time_out_for_real, GitObserver, GitRun, GitShell, SimVcs, Streaming, Streams, TimeoutSeen,
};
use futures_util::FutureExt;

/// A shell that runs nothing: a command ends at once with its scripted answer
/// (`model::shell_answer`), or succeeds printing nothing; one scripted to time out
/// ends at its timeout on the virtual clock. With [`SimShell::timing_out_for_real`]
/// that timeout is the production shell's own, on a real process
/// (`world::time_out_for_real`), and a process it leaves running is traced.
#[derive(Debug)]
pub struct SimShell {
    answers: Option<Arc<ShellAnswers>>,
    clock: Arc<dyn Clock>,
    /// Where a real timeout's leftover processes are traced, when timeouts are
    /// run for real.
    real_timeouts: Option<Trace>,
}

impl SimShell {
    /// A shell answering with `answers` (none: every command succeeds), timing
    /// commands on `clock`.
    pub fn new(answers: Option<Arc<ShellAnswers>>, clock: Arc<dyn Clock>) -> Self {
        Self {
            answers,
            clock,
            real_timeouts: None,
        }
    }

    /// This shell, playing each scripted timeout with the production shell on a
    /// real process, and tracing into `trace` a process it leaves running. The
    /// executor must have its I/O driver enabled.
    pub fn timing_out_for_real(self, trace: Trace) -> Self {
        Self {
            real_timeouts: Some(trace),
            ..self
        }
    }
}

impl Shell for SimShell {
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>> {
        let answer = self
            .answers
            .as_ref()
            .and_then(|answers| answers.next(&command.command));
        let Some(answer) = answer else {
            return Box::pin(std::future::ready(Ok(ShellAnswer::success())));
        };
        let output = answer.output();
        if !output.timed_out {
            return Box::pin(std::future::ready(Ok(output)));
        }
        let timeout = self.clock.sleep(command.timeout);
        let Some(trace) = self.real_timeouts.clone() else {
            return Box::pin(async move {
                timeout.await;
                Ok(output)
            });
        };
        Box::pin(async move {
            let seen = time_out_for_real(command.timeout).await;
            if let TimeoutSeen::LeftRunning { pids } = seen {
                trace.push(
                    "shell",
                    SimEvent::ShellLeftRunning {
                        command: Name::new(&command.command),
                        timeout_ms: u64::try_from(command.timeout.as_millis()).unwrap_or(u64::MAX),
                        processes_count: pids.len() as u64,
                    },
                );
            }
            // Ends where a simulated timeout ends, also when the real one could
            // not run.
            timeout.await;
            Ok(output)
        })
    }
}

/// Pushes every git command the real disk's shell ran into the trace, with the
/// agent whose Bash call it was.
fn git_observer(trace: &Trace) -> GitObserver {
    let trace = trace.clone();
    Arc::new(move |run: GitRun| {
        let agent = current_tool_writer().map(|writer| Name::new(&writer.agent));
        trace.push(
            "git",
            SimEvent::GitRan {
                agent,
                cwd: Name::from(path_text(&run.cwd)),
                subcommand: Name::new(&run.subcommand),
                exit_code: run.exit_code,
            },
        );
    })
}

/// What cut the coordinator host's power.
enum PowerCut {
    /// A coordinator crash placed at `at_ms` came due.
    Timed,
    /// A coordinator crash placed at a model call or a disk write fired there.
    AtEvent,
}

/// What one boot of the coordinator host ended in.
pub(super) enum BootEnd {
    /// The host lost power at this virtual time.
    Crashed(Duration),
    /// The run is over.
    Over,
    /// The code under test panicked out of the boot (the panic is noted for the
    /// verdict): the run is over there.
    Panicked,
}

fn session_config(scenario: &Scenario) -> SessionConfig {
    let settings = &scenario.settings;
    let mut config = SessionConfig::new(scenario.profile);
    config.coordinator_mode = match &settings.coordinator_mode_switch {
        // The runtime reads the switch as a production session would.
        Some(switch) => coord_runtime::session::coordinator_mode_requested(Some(switch)),
        None => settings.coordinator_mode,
    };
    config.fork_experiment = settings.fork_experiment;
    config.assistant_mode = settings.assistant_mode;
    config.proactive_mode = settings.proactive_mode;
    config.background_tasks_disabled = settings.background_tasks_disabled;
    // A setting the scenario leaves unset keeps the runtime's default: the
    // defaults are what production runs with, so the sweep must run them too.
    if let Some(deadline_ms) = settings.spawn_deadline_ms {
        config.spawn_deadline = Duration::from_millis(deadline_ms);
    }
    if let Some(poll_ms) = settings.idle_poll_ms {
        config.idle_poll = Duration::from_millis(poll_ms);
    }
    if let Some(turns_max) = settings.turns_max {
        config.turns_max = turns_max;
    }
    config.cwd = PathBuf::from(WORKSPACE_DIR);
    config.repo = settings.repository.then(|| PathBuf::from(WORKSPACE_DIR));
    config.defects = settings.defects.iter().copied().collect();
    config.binding = settings.binding.as_deref().map(binding_key);
    if let Some(size_bytes_max) = settings.output_bytes_max {
        config.output_limits.size_bytes_max = size_bytes_max;
    }
    if let Some(read_bytes_max) = settings.output_read_bytes_max {
        config.output_limits.read_bytes_max = read_bytes_max;
    }
    if let Some(grace_ms) = settings.eviction_grace_ms {
        config.eviction_grace = Duration::from_millis(grace_ms);
    }
    config.compact_threshold_tokens = settings.compact_threshold_tokens;
    config
}

/// How long the run's client waits for a model call's answer.
pub(super) fn api_timeout(scenario: &Scenario) -> Duration {
    Duration::from_millis(scenario.settings.api_timeout_ms)
}

/// The model the runtime sees in boot number `boot`: the scenario's answers with
/// the fault engine's model faults, latency on the run's clock, the tap and the cost
/// meter; then, for an HTTP transport, `over_network` of that (the world's provider
/// and API host) behind the client's hold of each request ([`ClientHold`]); then
/// `model_layer`.
pub(super) fn boot_model(
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
    )
    .with_api_timeout(api_timeout(&context.scenario));
    let model = SimulatedModel::new(
        Arc::new(policy),
        clock.clone(),
        context
            .streams
            .rng(&format!("{}/boot-{boot}", Streams::LATENCY)),
    );
    context.meter.lock().expect("meter poisoned").begin_boot();
    let tap = TappedModel::new(
        Arc::new(model),
        context.book.clone(),
        context.trace.clone(),
        coordinator_prompt.clone(),
        context.meter.clone(),
        context.witness_disk.clone(),
    )
    .remembering(context.tap.clone())
    .judging_compactions(compaction_threshold_tokens(&context.scenario))
    .judging_tool_surfaces(
        context.scenario.profile,
        context.scenario.settings.coordinator_mode,
    );
    // The first boot's first request is the one made from the scenario's sources;
    // a restarted coordinator continues its durable conversation.
    let tap = if boot == 0 {
        tap.judging_system_prompt(SystemRule::of(
            context.scenario.profile,
            &context.scenario.settings,
        ))
    } else {
        tap.restarted()
    };
    let streaming = match context.scenario.settings.model_transport {
        ModelTransport::Direct => return model_layer(Arc::new(tap), clock),
        ModelTransport::Http => Streaming::Off,
        ModelTransport::HttpStreaming => Streaming::On,
    };
    let tap = Arc::new(tap.held_by_client());
    let transport = over_network(tap.clone(), streaming);
    let model = Arc::new(ClientHold::new(tap, transport, clock.clone()));
    model_layer(model, clock)
}

/// One boot of the coordinator host: the session runs until the run ends, the
/// host crashes, or the code under test panics out of it.
///
/// `model` is the model the runtime sees and `remote` its way to the remote-worker
/// host, both made for this boot by the world it runs in; the boot's clock is
/// already started.
pub(super) async fn run_boot(
    context: &RunContext,
    boot: u32,
    booted_at: Duration,
    model: Arc<dyn Model>,
    remote: Arc<dyn Remote>,
) -> Result<BootEnd, RunError> {
    let booted = std::panic::AssertUnwindSafe(run_session(context, boot, booted_at, model, remote))
        .catch_unwind()
        .await;
    panics::contained(booted).unwrap_or(Ok(BootEnd::Panicked))
}

/// [`run_boot`], without the containment of a panic.
async fn run_session(
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
    let entropy: Arc<dyn Entropy> = match &context.id_draws {
        Some(draws) => Arc::new(CollidingEntropy::new(entropy, draws.clone())),
        None => entropy,
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
    let shell: Arc<dyn Shell> = match &context.shell_gates {
        Some(gates) => Arc::new(crate::model::GatedShell::new(
            gates.clone(),
            context.shell_answers.clone(),
            clock.clone(),
            Duration::from_millis(scenario.settings.run_limit_ms),
        )),
        None => {
            let shell = SimShell::new(context.shell_answers.clone(), clock.clone());
            Arc::new(match context.real_timeouts {
                true => shell.timing_out_for_real(context.trace.clone()),
                false => shell,
            })
        }
    };
    // On the real disk a worker's plain `git` command in its worktree runs the
    // host's git: a commit there is one "has changes" must see.
    let shell: Arc<dyn Shell> = match &context.git {
        Some(git) => Arc::new(GitShell::new(
            shell,
            git.disk().clone(),
            PathBuf::from(super::worktrees_left::WORKTREES_DIR),
            git_observer(&context.trace),
        )),
        None => shell,
    };
    let shell: Arc<dyn Shell> = Arc::new(WitnessedShell::new(shell, context.trace.clone()));
    let coordinator_prompt = scenario.coordinator.prompt.clone();
    let effects = Effects {
        model,
        tools: Arc::new(WitnessedTools::new(
            Arc::new(StandardTools::new(world.clone(), shell.clone(), scratchpad)),
            context.trace.clone(),
        )),
        vcs: Some(Arc::new(LinkedWorktrees::new(
            match &context.git {
                Some(git) => git.clone() as Arc<dyn Vcs>,
                None => Arc::new(SimVcs::new(disk)),
            },
            context.book.clone(),
            context.planter.clone(),
        ))),
        remote: scenario.settings.remote_host.then_some(remote),
        shell: Some(shell),
    };
    let mut config = session_config(scenario);
    if boot > 0 {
        // The restarted host asks for the other mode, as a user who resumes the
        // session from a shell with another environment does: the mode the
        // session was created in must win (PROTOCOL.md §7, activation), so a
        // runtime that does right behaves the same either way.
        config.coordinator_mode = !config.coordinator_mode;
    }
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
                        coordinator: format!("{RESTART_FAILED}{error}"),
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
            context.witness_disk.clone(),
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
            Fault::CoordinatorCrash {
                at_ms: Some(at_ms), ..
            } => Some(Duration::from_millis(*at_ms)),
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
                Duration::from_millis(scenario.settings.idle_poll_ms_or_default()),
                context.trace.clone(),
                context.tap.clone(),
            ));
        }
    }
    let system = session.main_system_prompt(&prompt_inputs(&scenario.settings));
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
    // The host dies at the earliest timed crash still ahead, or when the model
    // adapter cuts the power as a coordinator call it was placed at arrives.
    let crash = async {
        let timed = async {
            match crash_at {
                Some(at) => tokio::time::sleep(at - booted_at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = context.book.power_cut() => PowerCut::AtEvent,
            () = timed => PowerCut::Timed,
        }
    };
    let outcome = tokio::select! {
        biased;
        // A power cut in the middle of the coordinator's own write fails that
        // write, and the coordinator may return before the cut is seen: the host
        // is down all the same.
        result = coordinator => match result {
            _ if context.book.power_is_out() => {
                return Ok(BootEnd::Crashed(context.clock.monotonic()));
            }
            Ok(report) => format!("finished after {} turns", report.turns),
            Err(error) => format!("failed: {error}"),
        },
        cut = crash => {
            // A cut at a model call or a write fired there; a timed one fires now,
            // unless the book healed first.
            let fired = match cut {
                PowerCut::AtEvent => true,
                PowerCut::Timed => context
                    .book
                    .fire(
                        |fault| match fault {
                            // Written as the fault read before it could be placed at
                            // a model call, so that traces keep their hashes.
                            Fault::CoordinatorCrash {
                                at_ms: Some(at_ms), ..
                            } => format!("power cut: CoordinatorCrash {{ at_ms: {at_ms} }}"),
                            other => format!("power cut: {other:?}"),
                        },
                        |fault| matches!(fault, Fault::CoordinatorCrash { at_ms: Some(at_ms), .. } if crash_at == Some(Duration::from_millis(*at_ms))),
                    )
                    .is_some(),
            };
            if fired {
                return Ok(BootEnd::Crashed(context.clock.monotonic()));
            }
            "crash not fired".to_owned()
        },
        () = tokio::time::sleep(run_limit) => COORDINATOR_CUT_OFF.to_owned(),
        // A busy loop, in the coordinator or in any task it waits on, holds
        // virtual time still: no limit above could ever fire.
        at = context.clock.standstill().stood_still() => stood_still(at),
    };
    context.book.heal();
    // Liveness phase: faults have stopped; every task must end within the bound.
    let bound = Duration::from_millis(scenario.settings.liveness_bound_ms);
    let liveness_end = context.clock.monotonic() + bound;
    let settled = async {
        loop {
            let change = session.next_change();
            let now = context.clock.monotonic();
            if session.outstanding() == 0 || now >= liveness_end {
                break;
            }
            session.wait_for_change(change, liveness_end - now).await;
        }
    };
    let outcome = match outcome.starts_with(CLOCK_STOOD_STILL) {
        // The loop still runs: the bound would never come.
        true => outcome,
        false => tokio::select! {
            biased;
            () = settled => outcome,
            at = context.clock.standstill().stood_still() => stood_still(at),
        },
    };
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

/// `run_ended`'s `coordinator` for a clock that stood still at `at`.
fn stood_still(at: Duration) -> String {
    format!("{CLOCK_STOOD_STILL}{} ms", at.as_millis())
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
        let task_id = match session.spawn(&AgentRef::Main, input, None).await {
            Ok(SpawnOutcome::Async(launched)) => launched.agent_id,
            Ok(SpawnOutcome::Sync { task_id, .. }) => task_id.as_str().to_owned(),
            Err(error) => {
                context.trace.push(
                    HARNESS_LABEL,
                    SimEvent::ToolFailed {
                        role: HARNESS_LABEL.into(),
                        tool: "Agent".into(),
                        error: error.to_string(),
                    },
                );
                continue;
            }
        };
        context.book.learn_launch(&task_id, &launch.description);
        context.tap.harness_launched(&task_id, &launch.prompt);
        context
            .trace
            .push(HARNESS_LABEL, SimEvent::HarnessLaunched { task_id });
    }
}

/// The main thread's prompt inputs, from the scenario's `system_prompt` and
/// `[settings.prompt]`.
fn prompt_inputs(settings: &Settings) -> PromptInputs {
    let prompt = &settings.prompt;
    let mut sources = PromptSources::default();
    sources.override_prompt = prompt.override_prompt.clone();
    sources.coordinator_prompt = prompt.coordinator_prompt.clone();
    sources.agent_prompt = prompt.agent_prompt.clone();
    sources.custom_prompt = prompt.custom_prompt.clone();
    sources.append_prompt = prompt.append_prompt.clone();
    sources.default_prompt = settings
        .system_prompt
        .iter()
        .chain(&prompt.default_sections)
        .cloned()
        .collect();
    let mut inputs = PromptInputs::default().with_sources(sources);
    if let Some(tools) = &prompt.persona_tools {
        inputs = inputs.with_persona(PersonaInputs::default().with_allowed_tools(tools.clone()));
    }
    if let Some(addendum) = &prompt.channel_addendum {
        inputs = inputs.with_channel_addendum(addendum.clone());
    }
    inputs
}
