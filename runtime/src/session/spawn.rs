//! Spawning: the Agent tool's spawn, forks, resumes, and the registration every
//! task goes through.

use crate::agent::{is_async, AgentInput, AsyncInputs, AsyncLaunch, IsolationKind};
#[cfg(feature = "defects")]
use crate::defects::Defect;
use crate::event::RuntimeEvent;
use crate::fork::{is_fork_type, ForkSource, FORK_AGENT_TYPE};
use crate::ipc::OutputWriter;
use crate::isolation::WorktreeSlug;
use crate::probe::Probe;
use crate::task::{TaskId, TaskKind, TaskState, TaskStatus};
use crate::tools::{Role, ToolName, ToolSurface};
use crate::world::{ContentBlock, Message, Role as MessageRole, SystemBlock};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::*;

impl Session {
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
        let coordinator_mode = config.coordinator_mode;
        // Defect `foreground-spawns`: coordinator mode gives way to an explicit
        // `run_in_background: false`.
        #[cfg(feature = "defects")]
        let coordinator_mode = coordinator_mode
            && !(config.defects.has(Defect::ForegroundSpawns)
                && input.run_in_background == Some(false));
        if coordinator_mode && input.run_in_background == Some(false) {
            Probe::SpawnForcedBackground.reach(&*self.inner.world.journal);
        }
        let async_inputs = AsyncInputs {
            run_in_background: input.run_in_background.unwrap_or(false),
            definition_background: definition.background,
            coordinator_mode,
            fork_experiment: config.fork_experiment,
            assistant_mode: config.assistant_mode,
            proactive_mode: config.proactive_mode,
            background_tasks_disabled: config.background_tasks_disabled,
        };
        let run_async = is_async(async_inputs);
        if config.background_tasks_disabled
            && is_async(AsyncInputs {
                background_tasks_disabled: false,
                ..async_inputs
            })
        {
            Probe::SpawnForcedForeground.reach(&*self.inner.world.journal);
        }
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
                WorktreeSlug::parse(slug).map_err(|e| {
                    Probe::WorktreeSlugRefused.reach(&*self.inner.world.journal);
                    SpawnError::Isolation(format!("worktree slug: {e}"))
                })?;
            }
        }

        // Who the name pointed at before this spawn: a teammate that cannot join its
        // team never starts, and its name goes back to that agent.
        let name_held_by = input
            .name
            .as_ref()
            .and_then(|name| self.state().names.resolve(name).cloned());
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
                summary_style: if is_fork_type(definition.agent_type)
                    && config.profile.summarizes_fork_by_first_line()
                {
                    SummaryStyle::FirstLine
                } else {
                    SummaryStyle::Agent
                },
                sync: !run_async,
                continues: None,
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
                // Unless another launch took the name while this one waited on the
                // team's file.
                if state.names.resolve(name) == Some(&id) {
                    match &name_held_by {
                        Some(earlier) => state.point_name(name, earlier),
                        None => {
                            state.names.unregister(name);
                        }
                    }
                }
                drop(state);
                // One task fewer outstanding: an idle coordinator may be done.
                self.inner.changed.notify_waiters();
                return Err(SpawnError::Team(error.to_string()));
            }
        }
        self.announce(caller, &id, run_async);

        let teammate = input.team_name.is_some() && input.name.is_some();
        let role = if is_fork_type(definition.agent_type) {
            Role::UnsupervisedFork
        } else if teammate {
            Role::Teammate
        } else {
            Role::Worker
        };
        let surface = definition
            .surface(config.profile)
            .restricted_to(&role_tools(role, config.profile));
        let surface = match teammate {
            true => with_team_messaging(surface),
            false => surface,
        };
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
                (Some(team), Some(member)) => Some(team::TeammateSetup::new(
                    team.clone(),
                    member.clone(),
                    input.mode.unwrap_or(crate::agent::PermissionMode::Default),
                )),
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
                Probe::SpawnNameTaken.reach(&*self.inner.world.journal);
                return Err(SpawnError::NameTaken(name.clone()));
            }
        }
        let id = state.registry.allocate_id(
            new.kind,
            &*self.inner.world.entropy,
            &*self.inner.world.journal,
        );
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
        task.parent = Some(caller.to_string());
        task.background = !new.sync;
        if let Some(continued) = &new.continues {
            state.continued_as.insert(continued.clone(), id.clone());
        }
        task.continues = new.continues;
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
        if let (Some(binding), true) = (state.binding.clone(), new.kind != TaskKind::LocalBash) {
            state.bindings.bind(binding.clone(), id.clone());
            self.inner.world.journal.record(RuntimeEvent::WorkerBound {
                binding: binding.to_string(),
                worker: id.clone(),
            });
        }
        let queued = MessageQueue::new();
        #[cfg(feature = "defects")]
        let queued = queued.with_defects(&self.inner.config.defects);
        state.workers.insert(
            id.clone(),
            WorkerHandle {
                token: token.clone(),
                done: CancellationToken::new(),
                queued,
                sync_waiter,
                name: new.name,
                worktree: None,
                summary_style: new.summary_style,
                team: new.team,
                turn_token: CancellationToken::new(),
                shutdown: crate::team::ShutdownHandshake::new(),
                fork: None,
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
            // biased: a worker that ends at its deadline's instant has ended; the
            // tie is resolved the same way on every run.
            tokio::select! {
                biased;
                _ = done.cancelled() => {}
                _ = sleep => session.expire(&id),
            }
        });
    }

    /// Resumes ended (or evicted) worker `id` from the transcript of its latest
    /// continuation (its own, if it was never resumed) with `message` as its new
    /// prompt. Unresolved tool uses in the transcript are dropped, and so
    /// are results whose call never reached it (a failed append). The
    /// continuation is a new task; its id is returned. It runs where the worker ran:
    /// a teammate comes back to its team, a remote worker to the remote-worker host
    /// (its task id says it was one, even once it is evicted), which is handed the
    /// whole conversation and reports back over the network as at its launch.
    pub fn resume_worker(
        &self,
        caller: &AgentRef,
        id: &TaskId,
        message: &str,
    ) -> Result<TaskId, SpawnError> {
        let remote = id.kind() == TaskKind::RemoteAgent;
        if remote && self.inner.effects.remote.is_none() {
            return Err(SpawnError::Isolation("no remote host is configured".into()));
        }
        let id = &self.state().latest_continuation(id);
        let transcript = Transcript::read(&self.inner.world, &self.inner.layout.transcript(id))
            .map_err(|e| SpawnError::Files(e.to_string()))?;
        let mut messages = transcript.messages;
        drop_orphaned_tool_results(&mut messages);
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
        // A teammate comes back as the same member of the same team, in the same
        // permission mode: a plan-mode teammate must not resume free of its plan.
        let teammate = transcript.header.teammate.as_ref().map(|teammate| {
            team::TeammateSetup::new(
                teammate.team.clone(),
                teammate.member.clone(),
                teammate.mode,
            )
        });
        let Registered {
            id: new_id, token, ..
        } = self.register_task(
            caller,
            NewTask {
                kind: if remote {
                    TaskKind::RemoteAgent
                } else if teammate.is_some() {
                    TaskKind::InProcessTeammate
                } else {
                    TaskKind::LocalAgent
                },
                description: transcript.header.description.clone(),
                tool_use_id: None,
                name,
                team: teammate.as_ref().map(|teammate| teammate.team.clone()),
                summary_style: SummaryStyle::Agent,
                sync: false,
                continues: Some(id.clone()),
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
        if remote {
            Probe::RemoteWorkerResumed.reach(&*self.inner.world.journal);
        }
        self.announce(caller, &new_id, true);
        let surface = match teammate {
            Some(_) => with_team_messaging(definition.surface(config.profile)),
            None => definition.surface(config.profile),
        };
        let fork = self.fork_identity_of(id, &transcript.header.agent_type, &surface);
        let (shape, surface, fork_depth) = match fork.clone() {
            Some(fork) => (fork.shape, fork.surface, fork.depth),
            None => (
                self.worker_shape(definition.system_prompt, &surface),
                surface,
                0,
            ),
        };
        if let Some(fork) = fork {
            self.keep_fork_identity(&new_id, fork);
        }
        let setup = worker::WorkerSetup {
            id: new_id.clone(),
            description: transcript.header.description.clone(),
            agent_type: definition.agent_type.to_owned(),
            shape,
            cache_parent: None,
            fork_depth,
            messages,
            surface,
            isolation: remote.then_some(IsolationKind::Remote),
            slug: new_id.to_string(),
            resumed_from: Some(id.to_string()),
            teammate,
            token,
        };
        let session = self.clone();
        tokio::spawn(async move { session.run_worker(setup).await });
        Ok(new_id)
    }

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
            system: Arc::new(system),
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
        context: &ForkSource,
        input: AgentInput,
        tool_use_id: Option<String>,
    ) -> Result<SpawnOutcome, SpawnError> {
        let config = &self.inner.config;
        let (params, fork) =
            context.fork(&input.prompt, config.profile, config.coordinator_mode)?;
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
                continues: None,
            },
        )?;
        self.announce(caller, &id, true);
        let request = fork.request;
        let setup = worker::WorkerSetup {
            id: id.clone(),
            description: input.description.clone(),
            agent_type: FORK_AGENT_TYPE.to_owned(),
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
        self.keep_fork_identity(
            &id,
            ForkIdentity {
                shape: setup.shape.clone(),
                surface: setup.surface.clone(),
                depth: setup.fork_depth,
            },
        );
        let session = self.clone();
        tokio::spawn(async move { session.run_worker(setup).await });
        Ok(SpawnOutcome::Async(AsyncLaunch::new(
            id.as_str(),
            &input.description,
            &output_path.display().to_string(),
        )))
    }

    /// Remembers that the worker `id` is the fork `identity`, for its resumes.
    fn keep_fork_identity(&self, id: &TaskId, identity: ForkIdentity) {
        if let Some(worker) = self.state().workers.get_mut(id) {
            worker.fork = Some(identity);
        }
    }

    /// What the worker `id`, resumed from a transcript of `agent_type`, comes back
    /// as if it is a fork: the identity it ran with, or, when this process never
    /// ran it (a restart came between), an unsupervised fork's surface over
    /// `surface`'s tools at depth 1. The parent's prefix is then lost, but not the
    /// fork's limits, and the marker in its history still refuses a fork from it.
    fn fork_identity_of(
        &self,
        id: &TaskId,
        agent_type: &str,
        surface: &ToolSurface,
    ) -> Option<ForkIdentity> {
        if !is_fork_type(agent_type) {
            return None;
        }
        if let Some(identity) = self
            .state()
            .workers
            .get(id)
            .and_then(|worker| worker.fork.clone())
        {
            return Some(identity);
        }
        let (_, surface) = crate::fork::fork_tool_surface(
            self.inner.config.profile,
            crate::fork::ForkConfig::default().supervision,
            &tool_definitions(surface),
        );
        Some(ForkIdentity {
            shape: self.worker_shape("", &surface),
            surface,
            depth: 1,
        })
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
}

/// `surface` with SendMessage, whatever the agent definition grants: a teammate
/// answers its lead and writes to its team with it (PROTOCOL.md §5), as
/// [`Role::Teammate`]'s surface has it.
fn with_team_messaging(surface: ToolSurface) -> ToolSurface {
    ToolSurface::of(surface.tools().chain([ToolName::SendMessage]))
}

/// The names of the tools `role` may use, for narrowing a definition's surface.
fn role_tools(role: Role, profile: crate::profile::Profile) -> Vec<String> {
    ToolSurface::for_role(role, profile)
        .tools()
        .map(|tool| tool.as_str().to_owned())
        .collect()
}
