//! Running one scenario under one seed.
//!
//! The run drives the real `coord-runtime` (task registry, output files, envelope
//! codec, mailbox) over real files in a temporary directory. Time is a
//! [`ManualClock`] that only the run advances, and every random choice comes from a
//! ChaCha stream derived from the seed, one stream per purpose, so enabling a new
//! kind of choice never shifts the draws of another. The same seed gives the same
//! trace, byte for byte.
//!
//! Per seed, workers' steps (output appends, mailbox messages, the ending with its
//! notification) interleave in a seed-chosen order, and the coordinator takes turns
//! at seed-chosen points: at each turn it receives the pending notifications as one
//! rendered text and parses the envelopes back out of it, as a model's harness would.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::envelope::{
    parse_block, render, summary_completed, summary_failed, summary_stopped, Envelope,
    EnvelopeStatus, EnvelopeUsage,
};
use coord_runtime::ipc::{
    read_output, Mailbox, MailboxConfig, MailboxMessage, OutputLimits, OutputWriter, SessionLayout,
};
use coord_runtime::task::{NotifyOutcome, TaskId, TaskKind, TaskRegistry, TaskState};
use coord_runtime::world::{ChaChaEntropy, Clock, Entropy, ManualClock, RealDisk};
use coord_runtime::World;

use crate::check::{check_all, Violation};
use crate::scenario::{LoadedScenario, WorkerScript};
use crate::trace::{digest_hex, SimEvent, Trace, TraceEntry};
use crate::world::Streams;

/// The wall clock every run starts at (2026-01-01T00:00:00Z), so timestamps in the
/// files a run writes are the same on every machine.
const RUN_EPOCH_UNIX_MS: u64 = 1_767_225_600_000;
/// The longest virtual step between two scheduled actions.
const STEP_MS_MAX: u64 = 50;
/// Chance, in 1/N, that the coordinator takes a turn after a step.
const COORDINATOR_TURN_ONE_IN: u64 = 4;

/// What one seed of one scenario did.
#[derive(Debug, Clone)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Every step, in order.
    pub trace: Vec<TraceEntry>,
    /// The trace's fingerprint.
    pub trace_hash: u64,
    /// Broken invariants (empty when the seed passed).
    pub violations: Vec<Violation>,
    /// What makes the seed fail, after the scenario's expectations: an unexpected
    /// violation, or an expected one that was not found. Empty when the seed passed.
    pub failures: Vec<Violation>,
    /// Virtual time the run covered.
    pub sim_duration: Duration,
}

/// A run that could not be carried out (as opposed to one that found a violation).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The temporary directory could not be made.
    #[error("cannot create the run directory: {0}")]
    TempDir(std::io::Error),
    /// The runtime refused an operation the harness needed.
    #[error("runtime error: {0}")]
    Runtime(String),
}

fn runtime_error(error: impl std::fmt::Display) -> RunError {
    RunError::Runtime(error.to_string())
}

/// One step of one worker's script.
#[derive(Debug, Clone, Copy)]
enum Step {
    Append(usize),
    Message(u32),
    End,
}

struct WorkerRun<'s> {
    id: TaskId,
    script: &'s WorkerScript,
    output: OutputWriter,
    chunks: Vec<String>,
    steps: Vec<Step>,
    next_step: usize,
}

/// Splits `text` into `count` pieces of about equal length, on character boundaries.
fn split_chunks(text: &str, count: u32) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let count = count.max(1) as usize;
    let per_chunk = chars.len().div_ceil(count).max(1);
    let mut chunks: Vec<String> = chars
        .chunks(per_chunk)
        .map(|piece| piece.iter().collect())
        .collect();
    chunks.resize(count, String::new());
    chunks
}

struct Run<'s> {
    scenario: &'s LoadedScenario,
    world: World,
    clock: Arc<ManualClock>,
    trace: Trace,
    schedule: ChaChaEntropy,
    registry: TaskRegistry,
    inbox: Mailbox,
    executor: tokio::runtime::Runtime,
    workers: Vec<WorkerRun<'s>>,
}

/// How a seed is run, besides the scenario and the seed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Swarm mode: the seed also chooses which fault kinds the scenario allows are
    /// on, and at what rates.
    pub swarm: bool,
}

/// Runs `scenario` under `seed`.
pub fn run_seed(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
) -> Result<SeedRun, RunError> {
    let _ = options;
    let dir = tempfile::tempdir().map_err(RunError::TempDir)?;
    let mut run = Run::start(scenario, seed, dir.path())?;
    run.drive()?;
    let entries = run.trace.entries();
    Ok(SeedRun {
        seed,
        trace_hash: run.trace.hash(),
        failures: check_all(&entries),
        violations: check_all(&entries),
        trace: entries,
        sim_duration: run.clock.monotonic(),
    })
}

impl<'s> Run<'s> {
    fn start(scenario: &'s LoadedScenario, seed: u64, root: &Path) -> Result<Self, RunError> {
        let clock = Arc::new(ManualClock::new(RUN_EPOCH_UNIX_MS));
        let trace = Trace::new(clock.clone(), root.to_owned());
        let world = World {
            clock: clock.clone(),
            entropy: Arc::new(Streams::new(seed).entropy(Streams::ENTROPY)),
            disk: Arc::new(RealDisk::new()),
            journal: Arc::new(trace.clone()),
        };
        let layout = SessionLayout::new(root);
        let inbox_path = layout
            .inbox("session", "coordinator")
            .map_err(runtime_error)?;
        let executor = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(RunError::TempDir)?;
        let mut run = Run {
            scenario,
            inbox: Mailbox::new(&world, inbox_path, MailboxConfig::default()),
            registry: TaskRegistry::new(world.journal.clone()),
            schedule: Streams::new(seed).entropy(Streams::SCHEDULE),
            world,
            clock,
            trace,
            executor,
            workers: Vec::new(),
        };
        for script in &scenario.scenario.workers {
            run.spawn(&layout, script)?;
        }
        Ok(run)
    }

    fn spawn(&mut self, layout: &SessionLayout, script: &'s WorkerScript) -> Result<(), RunError> {
        let id = self
            .registry
            .allocate_id(TaskKind::LocalAgent, &*self.world.entropy);
        let path = layout.task_output(&id);
        let output = OutputWriter::create(&self.world, &path, OutputLimits::default())
            .map_err(runtime_error)?;
        let state = TaskState::new(
            id.clone(),
            &script.description,
            path,
            self.world.clock.unix_ms(),
        );
        self.registry.insert(state);
        self.registry
            .transition(
                &id,
                coord_runtime::task::TaskStatus::Running,
                self.world.clock.unix_ms(),
            )
            .map_err(runtime_error)?;
        let dialect = self.scenario.scenario.dialect;
        self.trace.push(
            id.as_str(),
            &SimEvent::Spawned {
                task_id: id.to_string(),
                expected_status: dialect.wire_status(script.end),
                expected_result_digest: digest_hex(&script.result),
            },
        );
        let chunks = split_chunks(&script.result, script.output_chunks);
        let mut steps: Vec<Step> = (0..chunks.len()).map(Step::Append).collect();
        steps.extend((0..script.messages).map(Step::Message));
        steps.push(Step::End);
        self.workers.push(WorkerRun {
            id,
            script,
            output,
            chunks,
            steps,
            next_step: 0,
        });
        Ok(())
    }

    fn drive(&mut self) -> Result<(), RunError> {
        loop {
            let ready: Vec<usize> = (0..self.workers.len())
                .filter(|&index| self.workers[index].next_step < self.workers[index].steps.len())
                .collect();
            if ready.is_empty() {
                break;
            }
            let pick = ready[self.schedule.below(ready.len() as u64) as usize];
            self.clock
                .advance(Duration::from_millis(1 + self.schedule.below(STEP_MS_MAX)));
            self.step_worker(pick)?;
            if self.schedule.below(COORDINATOR_TURN_ONE_IN) == 0 {
                self.coordinator_turn();
            }
        }
        self.coordinator_turn();
        let final_inbox = self
            .executor
            .block_on(self.inbox.read_all())
            .map_err(runtime_error)?;
        self.trace.push(
            "coordinator",
            &SimEvent::InboxFinal {
                message_digests: final_inbox.iter().map(|m| digest_hex(&m.text)).collect(),
            },
        );
        Ok(())
    }

    fn step_worker(&mut self, index: usize) -> Result<(), RunError> {
        let worker = &mut self.workers[index];
        let step = worker.steps[worker.next_step];
        worker.next_step += 1;
        let actor = worker.id.to_string();
        match step {
            Step::Append(chunk) => {
                let bytes = worker.chunks[chunk].as_bytes();
                worker.output.append(bytes).map_err(runtime_error)?;
                if let Some(task) = self.registry.get_mut(&worker.id) {
                    task.progress
                        .record_activity(format!("wrote {} bytes", bytes.len()));
                }
                self.trace.push(
                    &actor,
                    &SimEvent::OutputAppended {
                        task_id: actor.clone(),
                        bytes: bytes.len(),
                    },
                );
            }
            Step::Message(number) => {
                let text = format!("{}: progress note {number}", worker.script.description);
                let message = MailboxMessage::new(&self.world, actor.clone(), text.clone());
                let event = match self.executor.block_on(self.inbox.append(message)) {
                    Ok(_) => SimEvent::MailboxAcked {
                        from: actor.clone(),
                        message_digest: digest_hex(&text),
                    },
                    Err(error) => SimEvent::MailboxRejected {
                        from: actor.clone(),
                        reason: error.to_string(),
                    },
                };
                self.trace.push(&actor, &event);
            }
            Step::End => self.end_worker(index)?,
        }
        Ok(())
    }

    /// Ends worker `index`: its status, then its notification, built from task state
    /// and from what its output file holds, never from anything the worker says.
    fn end_worker(&mut self, index: usize) -> Result<(), RunError> {
        let worker = &self.workers[index];
        let id = worker.id.clone();
        let end = worker.script.end;
        let description = worker.script.description.clone();
        let duplicate_notify = worker.script.duplicate_notify;
        let result = self.read_whole_output(worker.output.path())?;
        let now_ms = self.world.clock.unix_ms();
        self.registry
            .transition(&id, end.task_status(), now_ms)
            .map_err(runtime_error)?;
        let build = |task: &TaskState| Envelope {
            task_id: task.id.to_string(),
            tool_use_id: task.tool_use_id.clone(),
            output_file: Some(task.output_path.display().to_string()),
            status: end,
            summary: match end {
                EnvelopeStatus::Completed => summary_completed(&description),
                EnvelopeStatus::Failed => summary_failed(&description, "scripted failure"),
                EnvelopeStatus::Killed | EnvelopeStatus::Timeout => summary_stopped(&description),
            },
            result: Some(result.clone()),
            usage: Some(EnvelopeUsage {
                total_tokens: task.progress.total_tokens(),
                tool_uses: task.progress.tool_uses,
                duration_ms: u64::try_from(task.active_duration(now_ms).as_millis())
                    .unwrap_or(u64::MAX),
            }),
            worktree: None,
        };
        self.registry.notify(&id, build).map_err(runtime_error)?;
        if duplicate_notify {
            let outcome = self.registry.notify(&id, build).map_err(runtime_error)?;
            self.trace.push(
                id.as_str(),
                &SimEvent::NotifyRepeated {
                    task_id: id.to_string(),
                    enqueued: outcome == NotifyOutcome::Enqueued,
                },
            );
        }
        Ok(())
    }

    fn read_whole_output(&self, path: &Path) -> Result<String, RunError> {
        let mut bytes = Vec::new();
        let mut offset = 0;
        loop {
            let chunk = read_output(&self.world, path, offset, OutputLimits::default())
                .map_err(runtime_error)?;
            if chunk.bytes.is_empty() {
                break;
            }
            bytes.extend_from_slice(&chunk.bytes);
            offset = chunk.next_offset_bytes;
        }
        String::from_utf8(bytes).map_err(runtime_error)
    }

    /// The coordinator's turn: pending notifications arrive as one user-role text, and
    /// the coordinator accepts whatever envelopes it can parse out of that text.
    fn coordinator_turn(&mut self) {
        let envelopes = self.registry.take_notifications();
        if envelopes.is_empty() {
            return;
        }
        let dialect = self.scenario.scenario.dialect;
        let text = envelopes
            .iter()
            .map(|envelope| render(envelope, dialect))
            .collect::<Vec<_>>()
            .join("\n");
        for envelope in parse_block(&text) {
            self.trace.push(
                "coordinator",
                &SimEvent::Delivered {
                    task_id: envelope.task_id.clone(),
                    status: envelope.status,
                    result_digest: envelope.result.as_deref().map(digest_hex),
                },
            );
        }
    }
}

/// The complete command that reruns one seed of one scenario the way it was run.
pub fn repro_command(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    let swarm = if options.swarm { " --swarm" } else { "" };
    format!(
        "cargo run --release --locked -p coord-sim -- run {} --seed {seed}{swarm}",
        scenario_path.display()
    )
}
