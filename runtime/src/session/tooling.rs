//! Tool calls: what each tool looks like to the model, and where each call goes.
//!
//! Session tools (Agent, SendMessage, TaskStop, TaskOutput, TaskList, TaskGet,
//! SyntheticOutput, SendMessageToWorker) act on the session itself. Every other tool
//! goes to the session's [`Tools`](crate::world::Tools). A call to a tool that is
//! not on the caller's surface never reaches either (invariant 9).

use crate::probe::Probe;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::team::TeammateSetup;
use super::{AgentRef, Session, SpawnOutcome, State};
use crate::agent::AgentInput;
#[cfg(feature = "defects")]
use crate::defects::Defect;
use crate::event::RuntimeEvent;
use crate::fork::{spawns_fork, ForkSource};
use crate::route::{
    resolve, MessageBody, Route, RouteContext, SendMessageInput, TeamRoster, WorkerCaller,
    WorkerSendError, WorkerStatusSource,
};
use crate::task::{Lookup, TaskId};
use crate::team::TeamMessage;
use crate::tools::{ToolCallContext, ToolName, ToolSurface};
use crate::world::{ToolCall, ToolDefinition, ToolOutput, Worktree};

/// The tool definitions a model is offered for `surface`, in name order, so the
/// request bytes (and the prompt cache key) are the same every time.
///
/// Built once per distinct surface per process and shared: every request of every
/// agent with one surface carries the same list, so copying a request copies no
/// definition and comparing two requests' tools compares pointers. A process sees
/// a handful of surfaces (one per role and profile, one per agent definition's
/// tool list).
pub fn tool_definitions(surface: &ToolSurface) -> Arc<Vec<ToolDefinition>> {
    static BUILT: Mutex<Vec<(ToolSurface, Arc<Vec<ToolDefinition>>)>> = Mutex::new(Vec::new());
    // A panic while the list was locked left it whole: it is pushed to only after
    // the definitions are built.
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, definitions)) = built.iter().find(|(built_for, _)| built_for == surface) {
        return Arc::clone(definitions);
    }
    let definitions = Arc::new(build_tool_definitions(surface));
    built.push((surface.clone(), Arc::clone(&definitions)));
    definitions
}

fn build_tool_definitions(surface: &ToolSurface) -> Vec<ToolDefinition> {
    let described = described_tools();
    let mut definitions: Vec<ToolDefinition> = surface
        .tools()
        .map(|tool| {
            let (description, input_schema) = &described[&tool];
            ToolDefinition {
                name: tool.as_str().to_owned(),
                description: (*description).to_owned(),
                input_schema: Arc::clone(input_schema),
                cache_control: None,
            }
        })
        .collect();
    definitions.sort_by(|a, b| a.name.cmp(&b.name));
    definitions
}

/// Every tool's description and input schema, built once per process: each spawn
/// offers them, and building the schemas' JSON anew cost more than the spawn.
fn described_tools() -> &'static BTreeMap<ToolName, (&'static str, Arc<serde_json::Value>)> {
    static DESCRIBED: OnceLock<BTreeMap<ToolName, (&'static str, Arc<serde_json::Value>)>> =
        OnceLock::new();
    DESCRIBED.get_or_init(|| {
        ToolName::ALL
            .into_iter()
            .map(|tool| {
                let (description, schema) = describe(tool);
                (tool, (description, Arc::new(schema)))
            })
            .collect()
    })
}

fn object(properties: serde_json::Value, required: &[&str]) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn describe(tool: ToolName) -> (&'static str, serde_json::Value) {
    let text = json!({"type": "string"});
    match tool {
        ToolName::Agent => (
            "Launch a worker agent. In coordinator mode it runs in the background and reports \
             through a <task-notification>.",
            object(
                json!({
                    "description": text, "prompt": text, "subagent_type": text,
                    "model": {"enum": ["sonnet", "opus", "haiku", "inherit"]},
                    "run_in_background": {"type": "boolean"}, "name": text, "team_name": text,
                    "mode": {"enum": ["default", "acceptEdits", "bypassPermissions", "plan"]},
                    "isolation": {"enum": ["worktree", "remote"]}, "cwd": text,
                }),
                &["description", "prompt"],
            ),
        ),
        ToolName::SendMessage => (
            "Send a message to an agent by name or id, to the team (\"*\"), or elsewhere.",
            object(
                json!({"to": text, "summary": text, "message": {}}),
                &["to", "message"],
            ),
        ),
        ToolName::SendMessageToWorker => (
            "Continue a finished worker with a new message.",
            object(
                json!({"worker_id": text, "message": text}),
                &["worker_id", "message"],
            ),
        ),
        ToolName::TaskStop => (
            "Stop a running task.",
            object(json!({"task_id": text}), &["task_id"]),
        ),
        ToolName::TaskOutput => (
            "Read a task's new output, optionally waiting for it to end.",
            object(
                json!({"task_id": text, "block": {"type": "boolean"}, "timeout_ms": {"type": "integer"}}),
                &["task_id"],
            ),
        ),
        ToolName::TaskList => ("List the session's tasks.", object(json!({}), &[])),
        ToolName::TaskGet => (
            "Show one task.",
            object(json!({"task_id": text}), &["task_id"]),
        ),
        ToolName::SyntheticOutput => (
            "Return structured output to the caller.",
            object(json!({"output": {}}), &["output"]),
        ),
        ToolName::TeamCreate => (
            "Create a team.",
            object(json!({"team_name": text}), &["team_name"]),
        ),
        ToolName::TeamDelete => (
            "Delete a team.",
            object(json!({"team_name": text}), &["team_name"]),
        ),
        ToolName::SendToPeer => (
            "Send a message to a peer.",
            object(json!({"peer": text, "message": text}), &["peer", "message"]),
        ),
        ToolName::ListPeers => ("List peers.", object(json!({}), &[])),
        ToolName::TodoWrite => (
            "Replace the todo list.",
            object(json!({"todos": {"type": "array"}}), &["todos"]),
        ),
        ToolName::Read => (
            "Read a file.",
            object(
                json!({"file_path": text, "offset": {"type": "integer"}, "limit": {"type": "integer"}}),
                &["file_path"],
            ),
        ),
        ToolName::Write => (
            "Write a file.",
            object(
                json!({"file_path": text, "content": text}),
                &["file_path", "content"],
            ),
        ),
        ToolName::Edit => (
            "Replace text in a file.",
            object(
                json!({"file_path": text, "old_string": text, "new_string": text,
                       "replace_all": {"type": "boolean"}}),
                &["file_path", "old_string", "new_string"],
            ),
        ),
        ToolName::Bash => (
            "Run a shell command.",
            object(
                json!({"command": text, "timeout_ms": {"type": "integer"},
                       "run_in_background": {"type": "boolean"}, "description": text}),
                &["command"],
            ),
        ),
        ToolName::Glob => (
            "Find files by glob pattern.",
            object(json!({"pattern": text, "path": text}), &["pattern"]),
        ),
        ToolName::Grep => (
            "Search file contents with a regular expression.",
            object(
                json!({"pattern": text, "path": text, "glob": text}),
                &["pattern"],
            ),
        ),
        ToolName::ScratchpadRead => (
            "Read a scratchpad key.",
            object(json!({"key": text}), &["key"]),
        ),
        ToolName::ScratchpadWrite => (
            "Write a scratchpad key.",
            object(json!({"key": text, "content": text}), &["key", "content"]),
        ),
    }
}

fn error(content: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: content.into(),
        is_error: true,
    }
}

fn ok(content: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: content.into(),
        is_error: false,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskIdInput {
    task_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskOutputInput {
    task_id: String,
    #[serde(default)]
    block: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackgroundBashInput {
    command: String,
    #[serde(default)]
    description: Option<String>,
    #[allow(dead_code)]
    run_in_background: bool,
    #[serde(default)]
    #[allow(dead_code)]
    timeout_ms: Option<u64>,
}

/// How long TaskOutput waits when the call gives no timeout.
const TASK_OUTPUT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// Where a tool call comes from: who calls, with what rights, where, and (for the
/// Agent tool's forks) from which conversation.
pub(crate) struct CallSite<'a> {
    pub(crate) caller: &'a AgentRef,
    pub(crate) surface: &'a ToolSurface,
    pub(crate) cwd: &'a Path,
    pub(crate) worktree: Option<&'a Worktree>,
    pub(crate) fork_from: Option<&'a ForkSource>,
    /// Set when the caller is a teammate: destructive calls may need the lead's word.
    pub(crate) teammate: Option<&'a TeammateSetup>,
}

impl Session {
    /// Runs one tool call of the main thread (the coordinator in coordinator mode),
    /// with the main thread's tool surface: what an embedding harness calls when it
    /// drives the model itself.
    pub async fn run_main_tool(&self, call: ToolCall) -> ToolOutput {
        let config = &self.inner.config;
        let role = if config.coordinator_mode {
            crate::tools::Role::Coordinator
        } else {
            crate::tools::Role::Solo
        };
        let surface = ToolSurface::for_role(role, config.profile);
        let site = CallSite {
            caller: &AgentRef::Main,
            surface: &surface,
            cwd: &config.cwd,
            worktree: None,
            fork_from: None,
            teammate: None,
        };
        self.call_tool(&site, call).await
    }

    /// Runs one tool call for `caller`, refusing it if the tool is not on `surface`.
    pub(crate) fn call_tool<'a>(
        &'a self,
        site: &'a CallSite<'a>,
        call: ToolCall,
    ) -> Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>> {
        let CallSite {
            caller,
            surface,
            cwd,
            worktree,
            fork_from,
            teammate,
        } = *site;
        Box::pin(async move {
            let allowed = |tool: &ToolName| surface.allows(*tool);
            // Defect `unchecked-tool-surface`: any known tool runs for any caller.
            #[cfg(feature = "defects")]
            let allowed = |tool: &ToolName| {
                allowed(tool) || self.inner.config.defects.has(Defect::UncheckedToolSurface)
            };
            let Some(tool) = ToolName::parse(&call.name).filter(allowed) else {
                let probe = match ToolName::parse(&call.name) {
                    None => Probe::ToolUnknownRefused,
                    Some(_) => Probe::ToolSurfaceRefused,
                };
                probe.reach(&*self.inner.world.journal);
                let reason = format!("tool {} is not available to {caller}", call.name);
                self.inner
                    .world
                    .journal
                    .record(RuntimeEvent::ToolCallRefused {
                        agent: caller.to_string(),
                        tool: call.name.clone(),
                        reason: reason.clone(),
                    });
                return error(reason);
            };
            // A teammate clears a destructive call with its lead before it runs,
            // however it runs: a shell started in the background is as destructive
            // as one waited for.
            if let Some(teammate) = teammate {
                if let Err(refusal) = self.check_teammate_permission(teammate, &call).await {
                    return error(refusal);
                }
            }
            match tool {
                ToolName::Agent => self.agent_tool(caller, fork_from, call).await,
                ToolName::TaskStop => match parse::<TaskIdInput>(&call) {
                    Ok(input) => match self.stop(&input.task_id) {
                        Ok(()) => ok(format!("stopped task {}", input.task_id)),
                        Err(e) => error(e.to_string()),
                    },
                    Err(e) => e,
                },
                ToolName::TaskOutput => match parse::<TaskOutputInput>(&call) {
                    Ok(input) => {
                        let timeout = input
                            .timeout_ms
                            .map_or(TASK_OUTPUT_TIMEOUT_DEFAULT, Duration::from_millis);
                        match self.task_output(&input.task_id, input.block, timeout).await {
                            Ok(report) => ok(json!({
                                "status": report.status,
                                "timed_out": report.timed_out,
                                "output": report.output,
                            })
                            .to_string()),
                            Err(e) => error(e.to_string()),
                        }
                    }
                    Err(e) => e,
                },
                ToolName::TaskList => ok(self.task_list()),
                ToolName::TaskGet => match parse::<TaskIdInput>(&call) {
                    Ok(input) => self.task_get(&input.task_id),
                    Err(e) => e,
                },
                ToolName::SendMessage => self.send_message_tool(caller, call.input).await,
                ToolName::SendMessageToWorker => self.send_to_worker_tool(caller, call.input),
                ToolName::SyntheticOutput => ok("structured output recorded"),
                ToolName::Bash if call.input.get("run_in_background") == Some(&json!(true)) => {
                    match parse::<BackgroundBashInput>(&call) {
                        Ok(input) => {
                            let description =
                                input.description.unwrap_or_else(|| input.command.clone());
                            match self.spawn_shell(
                                caller,
                                &input.command,
                                &description,
                                cwd.to_owned(),
                            ) {
                                Ok(id) => ok(format!(
                                    "Command running in background with ID: {id}. Output: {}",
                                    self.inner.layout.task_output(&id).display()
                                )),
                                Err(e) => error(e.to_string()),
                            }
                        }
                        Err(e) => e,
                    }
                }
                _ => {
                    let context = ToolCallContext {
                        agent_id: caller.to_string(),
                        surface: surface.clone(),
                        cwd: cwd.to_owned(),
                        worktree_root: worktree.map(|w| w.path.clone()),
                    };
                    self.inner.gate.call(context, call).await
                }
            }
        })
    }

    async fn agent_tool(
        &self,
        caller: &AgentRef,
        fork_from: Option<&ForkSource>,
        call: ToolCall,
    ) -> ToolOutput {
        let input = match AgentInput::parse(&call.input) {
            Ok(input) => input,
            Err(e) => return error(e.to_string()),
        };
        let fork = spawns_fork(
            input.subagent_type.as_deref(),
            self.inner.config.fork_experiment,
        );
        let spawned = if fork {
            match fork_from {
                Some(context) => self.spawn_fork(caller, context, input, Some(call.id)),
                None => return error("a fork needs the conversation it copies"),
            }
        } else {
            self.spawn(caller, input, Some(call.id)).await
        };
        match spawned {
            Ok(SpawnOutcome::Async(launch)) => {
                ok(serde_json::to_string(&launch).expect("launch results serialize"))
            }
            // One-shot agents cannot be continued, so their result has no trailer.
            Ok(SpawnOutcome::Sync {
                result,
                continuable: false,
                ..
            }) => ok(result),
            Ok(SpawnOutcome::Sync {
                task_id,
                status,
                result,
                continuable: true,
            }) => ok(format!(
                "{result}\n\nagentId: {task_id} ({status}; continue it with SendMessage)"
            )),
            Err(e) => error(e.to_string()),
        }
    }

    /// Every live task the caller may see: a nexo session lists only the workers of
    /// the binding it serves (PROTOCOL.md invariant 10).
    fn task_list(&self) -> String {
        let state = self.state();
        let tasks: Vec<serde_json::Value> = state
            .registry
            .iter()
            .filter(|task| {
                state
                    .bindings
                    .visible_from(state.binding.as_ref(), &task.id)
            })
            .map(|task| {
                json!({
                    "task_id": task.id.as_str(),
                    "type": task.kind().as_str(),
                    "status": task.status(),
                    "description": task.description,
                })
            })
            .collect();
        serde_json::Value::Array(tasks).to_string()
    }

    fn task_get(&self, id: &str) -> ToolOutput {
        let Ok(id) = TaskId::parse(id) else {
            return error(format!("no task {id}"));
        };
        // A worker of another binding is answered as one that never existed.
        let visible = {
            let state = self.state();
            state.bindings.visible_from(state.binding.as_ref(), &id)
        };
        match self.task(&id).filter(|_| visible) {
            Some(task) => ok(json!({
                "task_id": task.id.as_str(),
                "type": task.kind().as_str(),
                "status": task.status(),
                "description": task.description,
                "tool_uses": task.progress.tool_uses,
                // PROTOCOL.md §1: the task's last few activities, oldest first.
                "recent_activities": task.progress.recent_activities().collect::<Vec<_>>(),
                "output_file": task.output_path.display().to_string(),
            })
            .to_string()),
            None => error(format!("no task {id}")),
        }
    }

    /// SendMessage (PROTOCOL.md §5): validated and resolved by [`crate::route`], then
    /// delivered: a running agent gets it at its next tool-round boundary, an ended
    /// or evicted one is resumed from its transcript, a team member without a live
    /// task gets it in its mailbox, a broadcast reaches every other member.
    async fn send_message_tool(&self, caller: &AgentRef, input: serde_json::Value) -> ToolOutput {
        let input = match SendMessageInput::from_json(input) {
            Ok(input) => input,
            Err(e) => return error(e.to_string()),
        };
        let roster = self.roster_for(caller).await;
        let sender = match caller {
            AgentRef::Main if roster.is_some() => super::TEAM_LEAD_NAME.to_owned(),
            AgentRef::Main => caller.to_string(),
            AgentRef::Task(id) => self
                .state()
                .names
                .name_of(id)
                .map_or_else(|| id.to_string(), str::to_owned),
        };
        let route = {
            let state = self.state();
            let task_known = |id: &TaskId| !matches!(state.registry.lookup(id), Lookup::Unknown);
            let context = RouteContext {
                sender: &sender,
                profile: self.inner.config.profile,
                names: &state.names,
                team: roster.as_ref(),
                bridge_consent: self.inner.config.bridge_consent,
                task_known: &task_known,
            };
            resolve(&input, &context)
        };
        let route = match route {
            Ok(route) => route,
            Err(e) => return error(e.to_string()),
        };
        let sender_id = match caller {
            AgentRef::Main => self.inner.main_id.clone(),
            AgentRef::Task(id) => id.clone(),
        };
        let (text, team_message) = match input.message {
            MessageBody::Text(text) => (text, None),
            MessageBody::Structured(message) => {
                let message = TeamMessage::from_structured(
                    message,
                    &sender_id,
                    self.inner.world.clock.as_ref(),
                );
                (message.to_text(), Some(message))
            }
        };
        match (&route, &team_message) {
            // A shutdown request to an agent is a request, not text: it goes through
            // the handshake (PROTOCOL.md §5), or nowhere.
            (Route::Agent(id), Some(TeamMessage::ShutdownRequest { request_id, .. })) => {
                return match self.queue_shutdown_request(caller, id, request_id.clone(), &text) {
                    Ok(()) => ok(format!("shutdown request {request_id} queued for {id}")),
                    Err(e) => error(e.to_string()),
                };
            }
            // An answer must name a request its sender was handed and has not
            // answered.
            (_, Some(TeamMessage::ShutdownResponse { request_id, .. })) => {
                if let Err(e) = self.take_shutdown_answer(caller, &sender, request_id) {
                    return error(e.to_string());
                }
            }
            _ => {}
        }
        let output = self
            .deliver_message(caller, route, roster.as_ref(), &sender, &text)
            .await;
        if let Some(TeamMessage::ShutdownResponse {
            request_id,
            approve,
            ..
        }) = team_message
        {
            self.settle_shutdown_answer(caller, request_id, approve, !output.is_error);
        }
        output
    }

    /// Delivers SendMessage's `text` from `sender` along `route`.
    async fn deliver_message(
        &self,
        caller: &AgentRef,
        route: Route,
        roster: Option<&TeamRoster>,
        sender: &str,
        text: &str,
    ) -> ToolOutput {
        match route {
            Route::Agent(id) => self.deliver_to_agent(caller, &id, text),
            Route::Mailbox { team, agent } => {
                match self.write_team_mailbox(&team, &agent, sender, text).await {
                    Ok(()) => ok(format!(
                        "message written to {agent}'s mailbox in team {team}"
                    )),
                    Err(e) => error(e.to_string()),
                }
            }
            Route::Broadcast { recipients } => {
                let team = roster.map(|r| r.team.clone()).unwrap_or_default();
                match self
                    .broadcast_to_team(&team, sender, text, &recipients)
                    .await
                {
                    Ok(delivered) => ok(format!("message broadcast to {}", delivered.join(", "))),
                    Err(e) => error(e.to_string()),
                }
            }
            Route::Uds(socket) => error(format!(
                "uds:{socket}: this session has no local-socket transport configured"
            )),
            Route::Bridge(session) => error(format!(
                "bridge:{session}: this session has no bridge transport configured"
            )),
        }
    }

    /// Delivers `text` to agent `id`: queued if it runs, else it is resumed. A
    /// worker running on the remote-worker host is refused: the host takes one
    /// launch and returns one report, so nothing would ever hand it the message.
    fn deliver_to_agent(&self, caller: &AgentRef, id: &TaskId, text: &str) -> ToolOutput {
        // A worker that was resumed lives on as its latest continuation.
        let id = &self.state().latest_continuation(id);
        if self.runs_remotely(id) {
            return error(format!(
                "agent {id} runs on the remote-worker host, which takes no messages while \
                 it runs; the message was not delivered. Send it again once its \
                 notification has arrived."
            ));
        }
        if self.queue_message(caller, id, text) {
            return ok(format!("message queued for {id}"));
        }
        match self.resume_worker(caller, id, text) {
            Ok(new_id) => ok(format!("agent {id} resumed as {new_id}")),
            Err(e) => error(e.to_string()),
        }
    }

    /// Whether task `id` is a remote agent that has not ended.
    fn runs_remotely(&self, id: &TaskId) -> bool {
        self.state().registry.get(id).is_some_and(|task| {
            task.kind() == crate::task::TaskKind::RemoteAgent && !task.status().is_terminal()
        })
    }

    /// SendMessageToWorker (nexo): the checks of PROTOCOL.md §5 in their order, then
    /// the finished worker is continued from its transcript. Refusals are the
    /// serialized error, byte-identical for a worker of another binding and a worker
    /// that does not exist.
    fn send_to_worker_tool(&self, caller: &AgentRef, input: serde_json::Value) -> ToolOutput {
        let role = match caller {
            AgentRef::Main if self.inner.config.coordinator_mode => crate::tools::Role::Coordinator,
            AgentRef::Main => crate::tools::Role::Solo,
            AgentRef::Task(_) => crate::tools::Role::Worker,
        };
        let (binding, continued) = {
            let mut state = self.state();
            let State {
                registry,
                bindings,
                binding,
                continued_as,
                ..
            } = &mut *state;
            // A worker that was resumed runs, or ended, as its latest continuation.
            let latest_state =
                |id: &TaskId| registry.worker_state(super::latest_continuation(continued_as, id));
            let continued = bindings.continue_worker_json(
                WorkerCaller {
                    role,
                    binding: binding.as_ref(),
                },
                input.clone(),
                &latest_state,
            );
            (binding.clone(), continued)
        };
        let looked_up = match &continued {
            Ok(continued) => Some((continued.worker_id.to_string(), true)),
            Err(WorkerSendError::WorkerStillRunning { worker_id, .. }) => {
                Some((worker_id.to_string(), true))
            }
            Err(WorkerSendError::UnknownWorker { worker_id }) => Some((worker_id.clone(), false)),
            Err(_) => None,
        };
        if let (Some(binding), Some((worker_id, found))) = (binding, looked_up) {
            self.inner
                .world
                .journal
                .record(RuntimeEvent::WorkerLookedUp {
                    binding: binding.to_string(),
                    worker_id,
                    found,
                });
        }
        let continued = match continued {
            Ok(continued) => continued,
            Err(refusal) => {
                return error(serde_json::to_string(&refusal).expect("refusals serialize"))
            }
        };
        let message = input
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        match self.resume_worker(caller, &continued.worker_id, message) {
            Ok(new_id) => ok(json!({
                "status": "continued",
                "worker_id": continued.worker_id,
                "prior_status": continued.prior_status,
                "messages_count": continued.messages_count,
                "message_bytes": continued.message_bytes,
                "continued_as": new_id.as_str(),
            })
            .to_string()),
            Err(e) => error(e.to_string()),
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(call: &ToolCall) -> Result<T, ToolOutput> {
    serde_json::from_value(call.input.clone())
        .map_err(|e| error(format!("invalid {} input: {e}", call.name)))
}
