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

mod config;
mod coordinator;
mod shell_task;
mod team;
mod tooling;
mod transcript;
mod worker;

pub use config::{
    coordinator_mode_requested, Effects, SessionConfig, SessionMeta, COORDINATOR_MODE_ENV,
};
pub use coordinator::CoordinatorReport;
pub use team::TEAM_LEAD_NAME;
pub use tooling::tool_definitions;
pub use transcript::{
    drop_unresolved_tool_uses, Transcript, TranscriptError, TranscriptHeader, TranscriptWriter,
};

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use crate::agent::{is_async, AgentInput, AgentRegistry, AsyncInputs, AsyncLaunch, IsolationKind};
use crate::envelope::{
    summary_completed, summary_failed, summary_first_line, summary_stopped, Envelope,
    EnvelopeStatus, EnvelopeUsage, EnvelopeWorktree,
};
use crate::event::RuntimeEvent;
use crate::fork::{build_fork, CacheSafeParams, ForkConfig, ForkOrigin};
use crate::ipc::{read_output, OutputWriter, Scratchpad, SessionLayout};
use crate::isolation::WorktreeSlug;
use crate::route::{NameRegistry, WorkerBindings};
use crate::task::{Lookup, TaskId, TaskKind, TaskRegistry, TaskState, TaskStatus};
use crate::tools::{Role, ToolGate, ToolSurface};
use crate::world::{ContentBlock, Message, Role as MessageRole, SystemBlock, World};

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
    #[error("fork refused: {0}")]
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
    pub(crate) queued: VecDeque<String>,
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
    pub(crate) workers: BTreeMap<TaskId, WorkerHandle>,
    /// Agent names (matched ignoring ASCII case) → task ids.
    pub(crate) names: NameRegistry,
    /// Which binding spawned which worker (nexo's SendMessageToWorker isolation).
    pub(crate) bindings: WorkerBindings,
}

impl State {
    /// Points agent `name` at task `id`, replacing whatever it pointed at: a name
    /// follows its agent through resumes. Spawn refuses a name a live agent holds.
    pub(crate) fn point_name(&mut self, name: &str, id: &TaskId) {
        self.names.unregister(name);
        self.names
            .register(name, id.clone())
            .expect("agent names are validated when the Agent input is parsed");
    }
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
        let bytes = serde_json::to_vec_pretty(&meta).expect("session meta serializes");
        world
            .disk
            .replace_atomic(&path, &bytes)
            .map_err(|e| file_error(e.to_string()))?;
        Ok(Self::assemble(world, effects, config, layout, main_id))
    }

    /// Resumes the session stored under `layout`: its stored coordinator mode and
    /// profile win over whatever `config` says.
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
        Ok(Self::assemble(world, effects, config, layout, main_id))
    }

    fn assemble(
        world: World,
        effects: Effects,
        config: SessionConfig,
        layout: SessionLayout,
        main_id: TaskId,
    ) -> Session {
        let registry = TaskRegistry::new(world.journal.clone());
        let scratchpad = Arc::new(Scratchpad::new(&world, layout.scratch_dir()));
        let gate = ToolGate::new(world.clone(), config.profile, effects.tools.clone())
            .with_scratchpad(scratchpad);
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
                    workers: BTreeMap::new(),
                    names: NameRegistry::new(),
                    bindings: WorkerBindings::default(),
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

    /// Waits until a task ends or a notification is enqueued, or `timeout` passes.
    pub async fn wait_for_change(&self, timeout: Duration) {
        let changed = self.inner.changed.notified();
        tokio::select! {
            _ = changed => {}
            _ = self.inner.world.clock.sleep(timeout) => {}
        }
    }

    /// Drops terminal, notified tasks older than the eviction grace from memory.
    pub fn evict_expired(&self) -> Vec<TaskId> {
        let now_ms = self.inner.world.clock.unix_ms();
        let grace = self.inner.config.eviction_grace;
        self.state().registry.evict_expired(now_ms, grace)
    }

    /// Aborts every worker of the session.
    pub fn abort_all(&self) {
        self.inner.root_token.cancel();
    }

    /// The token a child of `caller` derives its own from.
    fn token_of(&self, caller: &AgentRef) -> CancellationToken {
        match caller {
            AgentRef::Main => self.inner.root_token.clone(),
            AgentRef::Task(id) => self
                .state()
                .workers
                .get(id)
                .map(|worker| worker.token.clone())
                .unwrap_or_else(|| self.inner.root_token.clone()),
        }
    }

    /// Spawns a worker as the Agent tool does. Async spawns return at once with
    /// [`SpawnOutcome::Async`]; sync spawns run the worker to its end first.
    pub async fn spawn(
        &self,
        caller: &AgentRef,
        input: AgentInput,
        tool_use_id: Option<String>,
    ) -> Result<SpawnOutcome, SpawnError> {
        let config = &self.inner.config;
        let agent_type = input
            .subagent_type
            .clone()
            .unwrap_or_else(|| "general-purpose".to_owned());
        let definition = self.inner.agents.get(&agent_type).cloned().ok_or_else(|| {
            SpawnError::UnknownAgentType {
                name: agent_type.clone(),
                known: self.inner.agents.names().join(", "),
            }
        })?;
        let run_async = is_async(AsyncInputs {
            run_in_background: input.run_in_background.unwrap_or(false),
            definition_background: definition.background,
            coordinator_mode: config.coordinator_mode,
            fork_experiment: config.fork_experiment,
            assistant_mode: config.assistant_mode,
            proactive_mode: config.proactive_mode,
            background_tasks_disabled: config.background_tasks_disabled,
        });
        let kind = match (input.isolation, &input.team_name) {
            (Some(IsolationKind::Remote), _) => TaskKind::RemoteAgent,
            (_, Some(_)) => TaskKind::InProcessTeammate,
            _ => TaskKind::LocalAgent,
        };
        if input.isolation == Some(IsolationKind::Remote) && self.inner.effects.remote.is_none() {
            return Err(SpawnError::Isolation("no remote host is configured".into()));
        }
        let slug = input.name.clone();
        if input.isolation == Some(IsolationKind::Worktree) {
            if self.inner.effects.vcs.is_none() || config.repo.is_none() {
                return Err(SpawnError::Isolation(
                    "worktree isolation needs a repository and version control".into(),
                ));
            }
            // A slug that could climb out of .claude/worktrees is refused before
            // anything is created.
            if let Some(slug) = &slug {
                WorktreeSlug::parse(slug)
                    .map_err(|e| SpawnError::Isolation(format!("worktree slug: {e}")))?;
            }
        }

        let Registered {
            id,
            output_path,
            token,
            sync_rx,
        } = self.register_task(
            caller,
            NewTask {
                kind,
                description: input.description.clone(),
                tool_use_id,
                name: input.name.clone(),
                team: input.team_name.clone(),
                summary_style: if definition.agent_type == "fork"
                    && config.profile.summarizes_fork_by_first_line()
                {
                    SummaryStyle::FirstLine
                } else {
                    SummaryStyle::Agent
                },
                sync: !run_async,
            },
        )?;
        if let (Some(team), Some(name)) = (&input.team_name, &input.name) {
            if let Err(error) = self.join_team(team, name, &id).await {
                // The teammate never starts: it fails quietly, since the spawn itself
                // reports the error to its caller.
                let mut state = self.state();
                let now_ms = self.inner.world.clock.unix_ms();
                let _ = state.registry.suppress_notification(&id);
                let _ = state.registry.transition(&id, TaskStatus::Failed, now_ms);
                return Err(SpawnError::Team(error.to_string()));
            }
        }
        self.announce(caller, &id, run_async);

        let role = if definition.agent_type == "fork" {
            Role::UnsupervisedFork
        } else {
            Role::Worker
        };
        let surface = definition
            .surface(config.profile)
            .restricted_to(&role_tools(role, config.profile));
        let setup = worker::WorkerSetup {
            id: id.clone(),
            description: input.description.clone(),
            agent_type: definition.agent_type.to_owned(),
            shape: self.worker_shape(definition.system_prompt, &surface),
            cache_parent: None,
            fork_depth: 0,
            messages: vec![Message {
                role: MessageRole::User,
                content: vec![ContentBlock::text(input.prompt.clone())],
            }],
            surface,
            isolation: input.isolation,
            slug: slug.unwrap_or_else(|| id.to_string()),
            resumed_from: None,
            teammate: match (&input.team_name, &input.name) {
                (Some(team), Some(member)) => Some(team::TeammateSetup {
                    team: team.clone(),
                    member: member.clone(),
                    mode: input.mode.unwrap_or(crate::agent::PermissionMode::Default),
                }),
                _ => None,
            },
            token,
        };
        let session = self.clone();
        tokio::spawn(async move { session.run_worker(setup).await });

        match sync_rx {
            None => Ok(SpawnOutcome::Async(AsyncLaunch::new(
                id.as_str(),
                &input.description,
                &output_path.display().to_string(),
            ))),
            Some(rx) => {
                let (status, result) = rx.await.unwrap_or((
                    TaskStatus::Killed,
                    "the worker ended without a result".to_owned(),
                ));
                Ok(SpawnOutcome::Sync {
                    task_id: id,
                    status,
                    result,
                    continuable: !definition.one_shot,
                })
            }
        }
    }

    /// Registers a new task: a fresh id, its output file, its registry entry and
    /// handle (with a token derived from the caller's, so aborts cascade), its name and
    /// its binding. Nothing runs yet.
    pub(crate) fn register_task(
        &self,
        caller: &AgentRef,
        new: NewTask,
    ) -> Result<Registered, SpawnError> {
        let config = &self.inner.config;
        let token = self.token_of(caller).child_token();
        let mut state = self.state();
        if let Some(name) = &new.name {
            let live = state
                .names
                .resolve(name)
                .and_then(|id| state.registry.get(id))
                .is_some_and(|task| !task.status().is_terminal());
            if live {
                return Err(SpawnError::NameTaken(name.clone()));
            }
        }
        let id = state
            .registry
            .allocate_id(new.kind, &*self.inner.world.entropy);
        let output_path = self.inner.layout.task_output(&id);
        OutputWriter::create(&self.inner.world, &output_path, config.output_limits)
            .map_err(|e| SpawnError::Files(e.to_string()))?;
        let mut task = TaskState::new(
            id.clone(),
            &new.description,
            output_path.clone(),
            self.inner.world.clock.unix_ms(),
        );
        task.tool_use_id = new.tool_use_id;
        state.registry.insert(task);
        let (sync_waiter, sync_rx) = if new.sync {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        if let Some(name) = &new.name {
            state.point_name(name, &id);
        }
        if let (Some(binding), true) = (&config.binding, new.kind != TaskKind::LocalBash) {
            state.bindings.bind(binding.clone(), id.clone());
        }
        state.workers.insert(
            id.clone(),
            WorkerHandle {
                token: token.clone(),
                done: CancellationToken::new(),
                queued: VecDeque::new(),
                sync_waiter,
                name: new.name,
                worktree: None,
                summary_style: new.summary_style,
                team: new.team,
                turn_token: CancellationToken::new(),
            },
        );
        Ok(Registered {
            id,
            output_path,
            token,
            sync_rx,
        })
    }

    /// Journals that task `id` was spawned and arms its deadline.
    pub(crate) fn announce(&self, caller: &AgentRef, id: &TaskId, run_in_background: bool) {
        self.inner.world.journal.record(RuntimeEvent::TaskSpawned {
            task_id: id.clone(),
            parent: caller.to_string(),
            run_in_background,
        });
        self.watch_deadline(id);
    }

    /// Starts the watcher that ends task `id` at its deadline if it has not ended.
    fn watch_deadline(&self, id: &TaskId) {
        let Some(done) = self.state().workers.get(id).map(|w| w.done.clone()) else {
            return;
        };
        let session = self.clone();
        let id = id.clone();
        let deadline = self.inner.config.spawn_deadline;
        let sleep = self.inner.world.clock.sleep(deadline);
        tokio::spawn(async move {
            tokio::select! {
                _ = sleep => session.expire(&id),
                _ = done.cancelled() => {}
            }
        });
    }

    /// The deadline of task `id` has passed: a worker still running is killed and
    /// a `timeout` envelope synthesized; a worker that ended but never notified
    /// (it died between its last write and its notification) is notified now.
    pub fn expire(&self, id: &TaskId) {
        let mut state = self.state();
        let Some(task) = state.registry.get(id) else {
            return;
        };
        if task.notified() {
            return;
        }
        let envelope_status = if task.status().is_terminal() {
            envelope_status_of(task.status())
        } else {
            let now_ms = self.inner.world.clock.unix_ms();
            state
                .registry
                .transition(id, TaskStatus::Killed, now_ms)
                .expect("a live task can be killed");
            self.inner
                .world
                .journal
                .record(RuntimeEvent::DeadlineExpired {
                    task_id: id.clone(),
                });
            EnvelopeStatus::Timeout
        };
        if let Some(worker) = state.workers.get(id) {
            worker.token.cancel();
            worker.done.cancel();
        }
        let partial = self.output_text(id, &state);
        self.deliver(&mut state, id, envelope_status, partial);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// Ends worker `id` as its loop saw it. A task already ended (by its deadline or
    /// a stop) is left as it is: it ends exactly once.
    pub(crate) fn finish(&self, id: &TaskId, end: WorkerEnd) {
        let mut state = self.state();
        let Some(task) = state.registry.get(id) else {
            return;
        };
        if let Some(worker) = state.workers.get(id) {
            worker.done.cancel();
        }
        if task.status().is_terminal() {
            return;
        }
        let (status, envelope_status, text) = match end {
            WorkerEnd::Completed(text) => (TaskStatus::Completed, EnvelopeStatus::Completed, text),
            WorkerEnd::Failed(error) => (TaskStatus::Failed, EnvelopeStatus::Failed, error),
            WorkerEnd::Killed => {
                let partial = self.output_text(id, &state);
                (TaskStatus::Killed, EnvelopeStatus::Killed, partial)
            }
        };
        let now_ms = self.inner.world.clock.unix_ms();
        state
            .registry
            .transition(id, status, now_ms)
            .expect("a live task can end");
        self.deliver(&mut state, id, envelope_status, text);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// Hands a terminal task's result to whoever waits for it: the sync spawner, or
    /// the coordinator through an envelope built from task state.
    fn deliver(&self, state: &mut State, id: &TaskId, status: EnvelopeStatus, text: String) {
        let (waiter, worktree, style) = match state.workers.get_mut(id) {
            Some(worker) => (
                worker.sync_waiter.take(),
                worker.worktree.clone(),
                worker.summary_style,
            ),
            None => (None, None, SummaryStyle::Agent),
        };
        if let Some(waiter) = waiter {
            // A sync spawn returns the result inline; no envelope follows it.
            let _ = state.registry.suppress_notification(id);
            let task_status = state
                .registry
                .get(id)
                .map_or(TaskStatus::Killed, TaskState::status);
            let _ = waiter.send((task_status, text));
            return;
        }
        let now_ms = self.inner.world.clock.unix_ms();
        let build = |task: &TaskState| {
            let description = &task.description;
            let summary = match (style, status) {
                (SummaryStyle::Shell, EnvelopeStatus::Completed | EnvelopeStatus::Failed) => {
                    format!("Background command \"{description}\" {status} ({text})")
                }
                (SummaryStyle::Shell, _) => {
                    format!("Background command \"{description}\" was stopped")
                }
                (SummaryStyle::FirstLine, EnvelopeStatus::Completed) => summary_first_line(&text),
                (_, EnvelopeStatus::Completed) => summary_completed(description),
                (_, EnvelopeStatus::Failed) => summary_failed(description, &text),
                (_, EnvelopeStatus::Killed | EnvelopeStatus::Timeout) => {
                    summary_stopped(description)
                }
            };
            // A shell's result is its output file, which the envelope names.
            let result = (style != SummaryStyle::Shell).then(|| text.clone());
            Envelope {
                task_id: task.id.to_string(),
                tool_use_id: task.tool_use_id.clone(),
                output_file: Some(task.output_path.display().to_string()),
                status,
                summary,
                result,
                usage: Some(EnvelopeUsage {
                    total_tokens: task.progress.total_tokens(),
                    tool_uses: task.progress.tool_uses,
                    duration_ms: u64::try_from(task.active_duration(now_ms).as_millis())
                        .unwrap_or(u64::MAX),
                }),
                worktree: worktree.clone(),
            }
        };
        state
            .registry
            .notify(id, build)
            .expect("a terminal task can be notified");
    }

    /// The whole output of task `id`, decoded lossily (the partial result of a
    /// stopped worker).
    fn output_text(&self, id: &TaskId, state: &State) -> String {
        let Some(task) = state.registry.get(id) else {
            return String::new();
        };
        let limits = self.inner.config.output_limits;
        let mut bytes = Vec::new();
        let mut offset = 0;
        while let Ok(chunk) = read_output(&self.inner.world, &task.output_path, offset, limits) {
            if chunk.bytes.is_empty() {
                break;
            }
            bytes.extend_from_slice(&chunk.bytes);
            offset = chunk.next_offset_bytes;
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// TaskStop: stops running task `id`. An agent ends `killed` with its partial
    /// result in its envelope; a background shell is marked notified first, so it
    /// sends none.
    pub fn stop(&self, id: &str) -> Result<(), StopError> {
        let not_found = || StopError::NotFound(id.to_owned());
        let id = TaskId::parse(id).map_err(|_| not_found())?;
        let mut state = self.state();
        let status = match state.registry.lookup(&id) {
            Lookup::Live(task) => task.status(),
            Lookup::Evicted => TaskStatus::Completed,
            Lookup::Unknown => return Err(not_found()),
        };
        if status.is_terminal() {
            return Err(StopError::NotRunning {
                id: id.to_string(),
                status: status.to_string(),
            });
        }
        if id.kind() == TaskKind::LocalBash {
            state
                .registry
                .suppress_notification(&id)
                .expect("a live task can be suppressed");
        }
        if let Some(worker) = state.workers.get(&id) {
            worker.token.cancel();
        }
        Ok(())
    }

    /// TaskOutput: the output of task `id` not read before. With `block`, waits until
    /// the task ends or `timeout` passes.
    pub async fn task_output(
        &self,
        id: &str,
        block: bool,
        timeout: Duration,
    ) -> Result<TaskOutputReport, StopError> {
        let id = TaskId::parse(id).map_err(|_| StopError::NotFound(id.to_owned()))?;
        let clock = &self.inner.world.clock;
        let deadline = clock.monotonic() + timeout;
        let mut timed_out = false;
        loop {
            let status = self
                .task(&id)
                .map(|task| task.status())
                .ok_or_else(|| StopError::NotFound(id.to_string()))?;
            if !block || status.is_terminal() {
                break;
            }
            let now = clock.monotonic();
            if now >= deadline {
                timed_out = true;
                break;
            }
            self.wait_for_change(deadline - now).await;
        }
        let mut state = self.state();
        let task = state
            .registry
            .get_mut(&id)
            .ok_or_else(|| StopError::NotFound(id.to_string()))?;
        let status = task.status();
        let chunk = read_output(
            &self.inner.world,
            &task.output_path,
            task.output_read_offset_bytes,
            self.inner.config.output_limits,
        )
        .map(|chunk| {
            task.output_read_offset_bytes = chunk.next_offset_bytes;
            String::from_utf8_lossy(&chunk.bytes).into_owned()
        })
        .unwrap_or_default();
        Ok(TaskOutputReport {
            status,
            timed_out,
            output: chunk,
        })
    }

    /// Queues `text` for running worker `id`, to be delivered at its next tool-round
    /// boundary. Returns false if the worker is not running.
    pub fn queue_message(&self, from: &AgentRef, id: &TaskId, text: &str) -> bool {
        let mut state = self.state();
        let running = state
            .registry
            .get(id)
            .is_some_and(|task| !task.status().is_terminal());
        let Some(worker) = state.workers.get_mut(id) else {
            return false;
        };
        if !running {
            return false;
        }
        worker.queued.push_back(text.to_owned());
        self.inner
            .world
            .journal
            .record(RuntimeEvent::MessageQueued {
                to: id.to_string(),
                from: from.to_string(),
            });
        true
    }

    /// Resumes ended (or evicted) worker `id` from its transcript with `message` as
    /// its new prompt. Unresolved tool uses in the transcript are dropped. The
    /// continuation is a new task; its id is returned.
    pub fn resume_worker(
        &self,
        caller: &AgentRef,
        id: &TaskId,
        message: &str,
    ) -> Result<TaskId, SpawnError> {
        let transcript = Transcript::read(&self.inner.world, &self.inner.layout.transcript(id))
            .map_err(|e| SpawnError::Files(e.to_string()))?;
        let mut messages = transcript.messages;
        let dropped = drop_unresolved_tool_uses(&mut messages);
        // The API needs alternating roles: a trailing user message takes the new
        // prompt as another block.
        match messages.last_mut() {
            Some(last) if last.role == MessageRole::User => {
                last.content.push(ContentBlock::text(message))
            }
            _ => messages.push(Message {
                role: MessageRole::User,
                content: vec![ContentBlock::text(message)],
            }),
        }
        let definition = self
            .inner
            .agents
            .get(&transcript.header.agent_type)
            .cloned()
            .unwrap_or_else(|| {
                self.inner
                    .agents
                    .get("general-purpose")
                    .cloned()
                    .expect("built in")
            });
        let config = &self.inner.config;
        let name = self
            .state()
            .workers
            .get(id)
            .and_then(|worker| worker.name.clone());
        let Registered {
            id: new_id, token, ..
        } = self.register_task(
            caller,
            NewTask {
                kind: TaskKind::LocalAgent,
                description: transcript.header.description.clone(),
                tool_use_id: None,
                name,
                team: None,
                summary_style: SummaryStyle::Agent,
                sync: false,
            },
        )?;
        self.inner
            .world
            .journal
            .record(RuntimeEvent::WorkerResumed {
                task_id: id.clone(),
                resumed_as: new_id.clone(),
                dropped_tool_uses: dropped,
            });
        self.announce(caller, &new_id, true);
        let setup = worker::WorkerSetup {
            id: new_id.clone(),
            description: transcript.header.description.clone(),
            agent_type: definition.agent_type.to_owned(),
            shape: self.worker_shape(
                definition.system_prompt,
                &definition.surface(config.profile),
            ),
            cache_parent: None,
            fork_depth: 0,
            messages,
            surface: definition.surface(config.profile),
            isolation: None,
            slug: new_id.to_string(),
            resumed_from: Some(id.to_string()),
            teammate: None,
            token,
        };
        let session = self.clone();
        tokio::spawn(async move { session.run_worker(setup).await });
        Ok(new_id)
    }
}

impl Session {
    /// The request shape of a non-fork worker: its definition's prompt, the tools of
    /// its surface, the session's model.
    fn worker_shape(&self, system_prompt: &str, surface: &ToolSurface) -> worker::RequestShape {
        let system = if system_prompt.is_empty() {
            Vec::new()
        } else {
            vec![SystemBlock::text(system_prompt)]
        };
        worker::RequestShape {
            model: self.inner.config.model.clone(),
            max_tokens: self.inner.config.max_tokens,
            tools: tool_definitions(surface),
            system,
            thinking: None,
        }
    }

    /// Spawns a fork of the conversation in `context`: its first request repeats the
    /// parent's prefix byte for byte, then the placeholder tool results and the
    /// directive (`input.prompt`). Forks always run in the background; an
    /// unsupervised fork cannot use destructive tools.
    pub(crate) fn spawn_fork(
        &self,
        caller: &AgentRef,
        context: &tooling::ForkContext,
        input: AgentInput,
        tool_use_id: Option<String>,
    ) -> Result<SpawnOutcome, SpawnError> {
        let config = &self.inner.config;
        let params = CacheSafeParams::from_request(&context.request);
        let origin = ForkOrigin::main_thread(config.profile)
            .with_coordinator_mode(config.coordinator_mode)
            .with_depth(context.depth);
        let fork = build_fork(
            &params,
            &context.assistant,
            &input.prompt,
            &origin,
            &ForkConfig::default(),
        )?;
        let Registered {
            id,
            output_path,
            token,
            ..
        } = self.register_task(
            caller,
            NewTask {
                kind: TaskKind::LocalAgent,
                description: input.description.clone(),
                tool_use_id,
                name: input.name.clone(),
                team: None,
                summary_style: if config.profile.summarizes_fork_by_first_line() {
                    SummaryStyle::FirstLine
                } else {
                    SummaryStyle::Agent
                },
                sync: false,
            },
        )?;
        self.announce(caller, &id, true);
        let request = fork.request;
        let setup = worker::WorkerSetup {
            id: id.clone(),
            description: input.description.clone(),
            agent_type: "fork".to_owned(),
            shape: worker::RequestShape {
                model: request.model.clone(),
                max_tokens: request.max_tokens,
                tools: request.tools.clone(),
                system: request.system.clone(),
                thinking: request.thinking,
            },
            cache_parent: Some(params),
            fork_depth: fork.depth,
            messages: request.messages,
            surface: fork.surface,
            isolation: None,
            slug: id.to_string(),
            resumed_from: None,
            teammate: None,
            token,
        };
        let session = self.clone();
        tokio::spawn(async move { session.run_worker(setup).await });
        Ok(SpawnOutcome::Async(AsyncLaunch::new(
            id.as_str(),
            &input.description,
            &output_path.display().to_string(),
        )))
    }
}

/// The envelope status that reports a terminal task status.
fn envelope_status_of(status: TaskStatus) -> EnvelopeStatus {
    match status {
        TaskStatus::Completed => EnvelopeStatus::Completed,
        TaskStatus::Failed => EnvelopeStatus::Failed,
        _ => EnvelopeStatus::Killed,
    }
}

/// The names of the tools `role` may use, for narrowing a definition's surface.
fn role_tools(role: Role, profile: crate::profile::Profile) -> Vec<String> {
    ToolSurface::for_role(role, profile)
        .tools()
        .map(|tool| tool.as_str().to_owned())
        .collect()
}
