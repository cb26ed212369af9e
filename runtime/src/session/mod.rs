//! Sessions: the coordinator loop, the worker loop, transcripts, deadlines, TaskStop
//! and TaskOutput.
//!
//! A [`Session`] owns the task registry and every running worker. Workers run as
//! tokio tasks; everything they share sits behind one mutex that is never held
//! across an `.await`, so the registry's exactly-once notification holds no matter
//! how workers, deadlines and stops interleave.
//!
//! - A spawn gets a task id, an output file, a transcript, a cancellation token
//!   (a child of its parent's, so aborts cascade) and a deadline watcher.
//! - A worker ends exactly once: completed, failed (model error, turn limit) or
//!   killed (TaskStop, abort, deadline). Whichever comes first sets the terminal
//!   state and enqueues the envelope; later attempts find the task terminal.
//! - The coordinator receives envelopes as one user-role message at its next turn
//!   boundary, and never blocks on a worker in coordinator mode.

mod compaction;
mod config;
mod control;
mod coordinator;
mod durable;
mod ending;
mod retry;
mod shell_task;
mod spawn;
mod team;
mod tooling;
mod transcript;
mod worker;

pub use crate::team::TEAM_LEAD_NAME;
pub use compaction::{
    compaction_messages, continuation_message, AUTO_TRIGGER, COMPACT_INSTRUCTION,
    CONTINUATION_PREAMBLE,
};
pub use config::{
    coordinator_mode_requested, Effects, SessionConfig, SessionMeta, COORDINATOR_MODE_ENV,
};
pub use coordinator::CoordinatorReport;
pub use durable::{coordinator_log_path, CALL_LOST_ON_RESTART, HOST_RESTARTED};
pub use ending::{output_unreadable_notice, OUTPUT_UNREADABLE_OPEN};
pub use tooling::tool_definitions;
pub use transcript::{
    drop_orphaned_tool_results, drop_unresolved_tool_uses, Transcript, TranscriptError,
    TranscriptHeader, TranscriptTeammate, TranscriptWriter,
};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRegistry, AsyncLaunch};
use crate::envelope::{Envelope, EnvelopeWorktree};
use crate::ipc::{Scratchpad, SessionLayout};
use crate::route::{MessageQueue, NameRegistry, WorkerBindings};
use crate::task::{TaskId, TaskKind, TaskRegistry, TaskState, TaskStatus};
use crate::tools::ToolGate;
use crate::world::World;

/// Who is acting: the coordinator (main thread) or a worker task.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum AgentRef {
    /// The session's main thread.
    Main,
    /// A worker.
    Task(TaskId),
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentRef::Main => f.write_str("coordinator"),
            AgentRef::Task(id) => write!(f, "{id}"),
        }
    }
}

/// Why a session could not be created or resumed, or its coordinator failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Coordinator mode needs background tasks: a coordinator that blocks on its
    /// workers is not coordinating.
    #[error("coordinator mode cannot run with background tasks disabled")]
    CoordinatorNeedsBackground,
    /// The session file could not be written or read.
    #[error("session file {path}: {detail}")]
    SessionFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The coordinator's model call failed.
    #[error("coordinator model call failed: {0}")]
    Model(String),
    /// The coordinator hit its turn limit.
    #[error("coordinator exceeded {0} turns")]
    TurnLimit(u32),
    /// The coordinator's durable conversation could not be written or read back.
    #[error("coordinator conversation {path}: {detail}")]
    Conversation {
        /// The log file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The task records could not be read back on resume.
    #[error("task records {path}: {detail}")]
    TaskRecords {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

/// Why a spawn was refused. Nothing was started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The input failed validation.
    #[error(transparent)]
    Input(#[from] crate::agent::AgentInputError),
    /// No agent definition has that name.
    #[error("unknown subagent_type {name:?}; known types: {known}")]
    UnknownAgentType {
        /// The name asked for.
        name: String,
        /// The known names.
        known: String,
    },
    /// Another live agent already has that name.
    #[error("an agent named {0:?} already exists")]
    NameTaken(String),
    /// The teammate could not join its team.
    #[error("cannot join the team: {0}")]
    Team(String),
    /// The fork guards refused (a fork of a fork, or a fork in coordinator mode).
    /// Its text is the guard's, which already says `fork refused`.
    #[error(transparent)]
    Fork(#[from] crate::fork::ForkError),
    /// The isolation asked for cannot be provided.
    #[error("isolation unavailable: {0}")]
    Isolation(String),
    /// The output file or transcript could not be created.
    #[error("cannot set up the worker's files: {0}")]
    Files(String),
}

/// What a spawn returned to its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnOutcome {
    /// The worker runs in the background; its envelope arrives later.
    Async(AsyncLaunch),
    /// The worker ran to its end before the spawn returned.
    Sync {
        /// The worker's task id.
        task_id: TaskId,
        /// How it ended.
        status: TaskStatus,
        /// Its final text (or partial output / error).
        result: String,
        /// Whether it can be continued (one-shot types cannot).
        continuable: bool,
    },
}

/// Why TaskStop was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    /// No task has that id in this session.
    #[error("no task {0}")]
    NotFound(String),
    /// The task is not running.
    #[error("task {id} is not running (it is {status})")]
    NotRunning {
        /// The task.
        id: String,
        /// Its status.
        status: String,
    },
}

/// What TaskOutput returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutputReport {
    /// The task's status when TaskOutput returned.
    pub status: TaskStatus,
    /// Whether the wait ended by timeout rather than by the task ending.
    pub timed_out: bool,
    /// Output not read before, from the task's read offset.
    pub output: String,
}

/// How a worker's run ended, as the worker loop saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkerEnd {
    Completed(String),
    Failed(String),
    Killed,
}

/// The runtime's handle on one worker.
#[derive(Debug)]
pub(crate) struct WorkerHandle {
    /// Cancelled to abort the worker (and, through child tokens, its children).
    pub(crate) token: CancellationToken,
    /// Cancelled once the worker has ended, to release its deadline watcher.
    pub(crate) done: CancellationToken,
    /// Messages waiting for the worker's next tool-round boundary.
    pub(crate) queued: MessageQueue,
    /// Set when the spawn waits for the result instead of a notification.
    pub(crate) sync_waiter: Option<oneshot::Sender<(TaskStatus, String)>>,
    /// Its name, if addressable.
    pub(crate) name: Option<String>,
    /// The worktree it runs in.
    pub(crate) worktree: Option<EnvelopeWorktree>,
    /// How its envelope's summary is written.
    pub(crate) summary_style: SummaryStyle,
    /// The team it belongs to, if it is a teammate.
    pub(crate) team: Option<String>,
    /// Cancelled to abandon only the current turn (a teammate's redirect).
    pub(crate) turn_token: CancellationToken,
    /// A teammate's shutdown requests handed to its model and not yet answered, and
    /// whether it approved one.
    pub(crate) shutdown: crate::team::ShutdownHandshake,
    /// For a fork: what a resume of it must keep.
    pub(crate) fork: Option<ForkIdentity>,
}

/// What makes a worker a fork, kept so that a resume of it is the same fork: its
/// parent's request shape (the cached prefix its requests share), its tool surface
/// (an unsupervised fork has no destructive tool) and its fork depth. A fork
/// resumed as its agent type alone came back with the fork type's empty system
/// prompt, every tool, and depth 0.
#[derive(Debug, Clone)]
pub(crate) struct ForkIdentity {
    pub(crate) shape: worker::RequestShape,
    pub(crate) surface: crate::tools::ToolSurface,
    pub(crate) depth: u32,
}

/// How a task's envelope summary is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SummaryStyle {
    /// `Agent "<description>" completed` and its variants.
    Agent,
    /// The result's first line, cut at 80 characters (nexo forks).
    FirstLine,
    /// `Background command "<description>" completed (exit code N)`; no result body.
    Shell,
}

/// What a new task starts with, besides its id.
pub(crate) struct NewTask {
    pub(crate) kind: TaskKind,
    pub(crate) description: String,
    pub(crate) tool_use_id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) team: Option<String>,
    pub(crate) summary_style: SummaryStyle,
    /// Whether the spawner waits for the result instead of a notification.
    pub(crate) sync: bool,
    /// The task it continues, for a resumed worker.
    pub(crate) continues: Option<TaskId>,
}

/// A registered task, ready to run.
pub(crate) struct Registered {
    pub(crate) id: TaskId,
    pub(crate) output_path: PathBuf,
    pub(crate) token: CancellationToken,
    pub(crate) sync_rx: Option<oneshot::Receiver<(TaskStatus, String)>>,
}

pub(crate) struct State {
    pub(crate) registry: TaskRegistry,
    /// Looked up on every turn of every worker and never iterated: hashed, so a
    /// session of a thousand workers compares an id with one other, not ten.
    pub(crate) workers: HashMap<TaskId, WorkerHandle, foldhash::fast::FixedState>,
    /// Agent names (matched ignoring ASCII case) → task ids.
    pub(crate) names: NameRegistry,
    /// Which binding spawned which worker (nexo's SendMessageToWorker isolation).
    pub(crate) bindings: WorkerBindings,
    /// The binding the session serves now: spawns and SendMessageToWorker calls are
    /// scoped to it. Starts as [`SessionConfig::binding`].
    pub(crate) binding: Option<crate::route::BindingKey>,
    /// Blocks added to the main thread's system prompt mid-session.
    pub(crate) system_amendments: Vec<crate::world::SystemBlock>,
    /// Each resumed worker's continuation, by the task it continued: a message to
    /// a worker goes to the latest of its continuations, whose transcript holds
    /// the whole conversation (PROTOCOL.md §5).
    pub(crate) continued_as: HashMap<TaskId, TaskId, foldhash::fast::FixedState>,
}

impl State {
    /// The latest continuation of worker `id`, or `id` itself if it was never
    /// resumed.
    pub(crate) fn latest_continuation(&self, id: &TaskId) -> TaskId {
        latest_continuation(&self.continued_as, id).clone()
    }

    /// Points agent `name` at task `id`, replacing whatever it pointed at: a name
    /// follows its agent through resumes. Spawn refuses a name a live agent holds.
    pub(crate) fn point_name(&mut self, name: &str, id: &TaskId) {
        self.names.unregister(name);
        self.names
            .register(name, id.clone())
            .expect("agent names are validated when the Agent input is parsed");
    }
}

/// The latest continuation of worker `id` in `continued_as` ([`State::continued_as`]),
/// or `id` itself if it was never resumed.
pub(crate) fn latest_continuation<'a>(
    continued_as: &'a HashMap<TaskId, TaskId, foldhash::fast::FixedState>,
    id: &'a TaskId,
) -> &'a TaskId {
    let mut latest = id;
    while let Some(next) = continued_as.get(latest) {
        latest = next;
    }
    latest
}

pub(crate) struct Inner {
    pub(crate) world: World,
    pub(crate) effects: Effects,
    pub(crate) config: SessionConfig,
    pub(crate) layout: SessionLayout,
    pub(crate) agents: AgentRegistry,
    /// Every non-session tool call passes this gate before it reaches the tools.
    pub(crate) gate: ToolGate,
    pub(crate) state: Mutex<State>,
    /// Woken whenever a task ends or a notification is enqueued.
    pub(crate) changed: Notify,
    pub(crate) root_token: CancellationToken,
    /// The teams the main thread leads, by name.
    pub(crate) teams: tokio::sync::Mutex<BTreeMap<String, crate::team::Team>>,
    /// The main thread's agent id (its id as a team lead).
    pub(crate) main_id: TaskId,
}

/// A coordinator session. Cheap to clone; clones share the session.
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.inner.config.session_id)
            .field("profile", &self.inner.config.profile)
            .field("coordinator_mode", &self.inner.config.coordinator_mode)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Creates a session under `layout`, storing its mode and profile there.
    pub fn create(
        world: World,
        effects: Effects,
        config: SessionConfig,
        layout: SessionLayout,
    ) -> Result<Session, SessionError> {
        if config.coordinator_mode && config.background_tasks_disabled {
            return Err(SessionError::CoordinatorNeedsBackground);
        }
        let main_id = TaskId::generate(TaskKind::InProcessTeammate, &*world.entropy);
        let meta = SessionMeta {
            session_id: config.session_id.clone(),
            profile: config.profile,
            coordinator_mode: config.coordinator_mode,
            main_agent_id: Some(main_id.clone()),
        };
        let path = layout.session_file();
        let file_error = |detail: String| SessionError::SessionFile {
            path: path.clone(),
            detail,
        };
        world
            .disk
            .create_dir_all(layout.root())
            .map_err(|e| file_error(e.to_string()))?;
        world
            .disk
            .create_dir_all(&durable::records_dir(&layout))
            .map_err(|e| file_error(e.to_string()))?;
        let bytes = serde_json::to_vec_pretty(&meta).expect("session meta serializes");
        world
            .disk
            .replace_atomic(&path, &bytes)
            .map_err(|e| file_error(e.to_string()))?;
        Ok(Self::assemble(world, effects, config, layout, main_id))
    }

    /// Resumes the session stored under `layout`: its stored coordinator mode and
    /// profile win over whatever `config` says. Every task record is reloaded: tasks
    /// that were running died with the previous process and end `failed`, and tasks
    /// whose notification never reached the coordinator's durable conversation get
    /// one now (see [`Session::resume_coordinator`] and the durability notes there).
    pub fn resume(
        world: World,
        effects: Effects,
        mut config: SessionConfig,
        layout: SessionLayout,
    ) -> Result<Session, SessionError> {
        let path = layout.session_file();
        let file_error = |detail: String| SessionError::SessionFile {
            path: path.clone(),
            detail,
        };
        let bytes = world
            .disk
            .read(&path)
            .map_err(|e| file_error(e.to_string()))?;
        let meta: SessionMeta =
            serde_json::from_slice(&bytes).map_err(|e| file_error(e.to_string()))?;
        config.session_id = meta.session_id;
        config.profile = meta.profile;
        config.coordinator_mode = meta.coordinator_mode;
        if config.coordinator_mode && config.background_tasks_disabled {
            return Err(SessionError::CoordinatorNeedsBackground);
        }
        let main_id = meta
            .main_agent_id
            .unwrap_or_else(|| TaskId::generate(TaskKind::InProcessTeammate, &*world.entropy));
        let conversation = durable::CoordinatorLog::read(&world, &layout)?;
        world
            .disk
            .create_dir_all(&durable::records_dir(&layout))
            .map_err(|e| file_error(e.to_string()))?;
        let session = Self::assemble(world, effects, config, layout, main_id);
        session.restore_tasks(&conversation.delivered)?;
        Ok(session)
    }

    fn assemble(
        world: World,
        effects: Effects,
        config: SessionConfig,
        layout: SessionLayout,
        main_id: TaskId,
    ) -> Session {
        let store = durable::DiskTaskStore::new(&world, durable::records_dir(&layout));
        let registry = TaskRegistry::new(world.journal.clone()).with_store(Arc::new(store));
        let scratchpad = Arc::new(Scratchpad::new(&world, layout.scratch_dir()));
        // Invariant 7: an agent without a worktree writes inside the session root
        // and the workspace (its working directory and the repository) only.
        let writable_roots = [
            Some(layout.root().to_path_buf()),
            Some(config.cwd.clone()),
            config.repo.clone(),
        ]
        .into_iter()
        .flatten();
        let gate = ToolGate::new(world.clone(), config.profile, effects.tools.clone())
            .with_scratchpad(scratchpad)
            .with_writable_roots(writable_roots);
        let bindings = WorkerBindings::default();
        #[cfg(feature = "defects")]
        let (registry, gate, bindings) = (
            registry.with_defects(config.defects.clone()),
            gate.with_defects(&config.defects),
            bindings.with_defects(&config.defects),
        );
        let binding = config.binding.clone();
        Session {
            inner: Arc::new(Inner {
                gate,
                world,
                effects,
                config,
                layout,
                agents: AgentRegistry::default(),
                state: Mutex::new(State {
                    registry,
                    workers: HashMap::default(),
                    names: NameRegistry::new(),
                    bindings,
                    binding,
                    system_amendments: Vec::new(),
                    continued_as: HashMap::default(),
                }),
                changed: Notify::new(),
                root_token: CancellationToken::new(),
                teams: tokio::sync::Mutex::new(BTreeMap::new()),
                main_id,
            }),
        }
    }

    /// The session's configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.inner.config
    }

    /// The session's file layout.
    pub fn layout(&self) -> &SessionLayout {
        &self.inner.layout
    }

    /// The world the session runs in.
    pub fn world(&self) -> &World {
        &self.inner.world
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().expect("session state poisoned")
    }

    /// A snapshot of every live task, in id order.
    pub fn tasks(&self) -> Vec<TaskState> {
        self.state().registry.iter().cloned().collect()
    }

    /// A snapshot of task `id`, if it is live.
    pub fn task(&self, id: &TaskId) -> Option<TaskState> {
        self.state().registry.get(id).cloned()
    }

    /// The task an agent name points to (names are matched ignoring ASCII case).
    pub fn resolve_name(&self, name: &str) -> Option<TaskId> {
        self.state().names.resolve(name).cloned()
    }

    /// Takes every enqueued notification, oldest first.
    pub fn take_notifications(&self) -> Vec<Envelope> {
        self.state().registry.take_notifications()
    }

    /// Tasks that have not yet been notified (their envelope is still to come).
    pub fn outstanding(&self) -> usize {
        self.state()
            .registry
            .iter()
            .filter(|task| !task.notified())
            .count()
    }

    /// The next change: a task ending or a notification being enqueued. Take it
    /// *before* looking at the state it is about, then wait for it with
    /// [`wait_for_change`](Self::wait_for_change): a change that lands between the
    /// look and the wait still wakes the waiter, since the signal counts from the
    /// moment it is taken.
    pub fn next_change(&self) -> Notified<'_> {
        self.inner.changed.notified()
    }

    /// Waits until `change` (from [`next_change`](Self::next_change)) happens, or
    /// `timeout` passes.
    pub async fn wait_for_change(&self, change: Notified<'_>, timeout: Duration) {
        // biased: a tie between the two is resolved the same way on every run.
        tokio::select! {
            biased;
            _ = change => {}
            _ = self.inner.world.clock.sleep(timeout) => {}
        }
    }

    /// Drops terminal, notified tasks older than the eviction grace from memory.
    pub fn evict_expired(&self) -> Vec<TaskId> {
        let now_ms = self.inner.world.clock.unix_ms();
        let grace = self.inner.config.eviction_grace;
        self.state().registry.evict_expired(now_ms, grace)
    }

    /// Serves `binding` from now on: the spawns and SendMessageToWorker calls that
    /// follow are scoped to it. A nexo coordinator process serves many channels and
    /// resolves the binding of each inbound message; workers spawned earlier stay
    /// with the binding that spawned them.
    pub fn serve_binding(&self, binding: Option<crate::route::BindingKey>) {
        self.state().binding = binding;
    }

    /// Aborts every worker of the session.
    pub fn abort_all(&self) {
        self.inner.root_token.cancel();
    }
}
