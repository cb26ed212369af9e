//! What one run of a real process showed, and the witness stream built from it.
//!
//! An [`Observation`] holds what the world saw of the process: every request it sent
//! to the API host and what it got back (the run's cassette, in the simulator's
//! request shape), its exit status and stream-json output, and the files it wrote
//! under its scratch home, workspace and temp directories. [`witness_trace`] turns it
//! into the trace the checkers of [`crate::check`] read, built only from what the
//! process did on the wire:
//!
//! - a launch result (`agentId: …`) in a coordinator request is a `task_spawned`
//!   (`run_in_background` from whether the CLI launched it asynchronously);
//! - a worker's final answer served by the host (text, no tool call) ends its task:
//!   `task_transitioned` to completed and `notification_enqueued`, the world's claim
//!   that exactly one genuine notification is now owed; a final answer of a worker
//!   continued after it ended (SendMessage resumes it under the same task id in
//!   2.1.328) ends that task again;
//! - each envelope that first appears in a coordinator request is accepted
//!   (`envelopes_accepted`), parsed from the request's text as the simulator's
//!   coordinator reads it, so a forged envelope the CLI failed to escape shows up as
//!   an accepted envelope no worker ending explains;
//! - a worker call left unanswered when a fault killed the process (then resumed
//!   with `--resume`) ends its task as killed, owing one notification;
//! - a coordinator call left unanswered when a fault killed the process accepts
//!   nothing: the envelopes it carried count once a request of the resumed session
//!   shows them, so a notification the resumed transcript lost is never accepted
//!   and one it holds twice is accepted twice;
//! - each SendMessage the coordinator's requests show answered without an error is
//!   an accepted message, and its recipient's requests say how often it arrived
//!   (`messages_witnessed`, invariant 4): the recipient is the worker whose task id
//!   or name the call addressed;
//! - how far each script was played, and how the process ended (`run_ended`).
//!
//! Trace times are request numbers (the order the host received calls in), not
//! milliseconds: the process runs on real time, and only the order matters to the
//! checkers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use coord_runtime::task::{TaskId, TaskStatus};
use coord_runtime::world::{ContentBlock, Role};
use coord_runtime::RuntimeEvent;
use serde::{Deserialize, Serialize};

use crate::cassette::{Cassette, Exchange, Outcome};
use crate::fault::{FaultKind, COORDINATOR_LABEL};
use crate::model::{ConversationView, WAITING_TEXT};
use crate::scenario::Scenario;
use crate::trace::{
    message_digest_hex, MessageWitness, Name, ScriptPlayed, SimEvent, TraceEntry, TraceEvent,
};

/// The most files an observation lists; a process that writes more is cut off here.
pub const OBSERVED_FILES_MAX: usize = 10_000;

/// What the process did, apart from its API exchanges (which are the cassette).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessReport {
    /// The exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// Whether the run's timeout killed it.
    pub timed_out: bool,
    /// How many times a fault killed it (SIGKILL at a chosen request).
    #[serde(default)]
    pub kills: u32,
    /// How many times it was resumed after such a kill (`--resume`); the exit code
    /// is the last process's.
    #[serde(default)]
    pub restarts: u32,
    /// Wall time of the process, in milliseconds.
    pub wall_ms: u64,
    /// The `result` event of its stream-json output, if it wrote one.
    pub stream_json_result: Option<serde_json::Value>,
    /// How many stream-json events it wrote.
    pub stream_json_events: u64,
    /// The files it left under its scratch directories.
    pub files: Vec<ObservedFile>,
    /// The paths it requested on the API host, in order (query strings dropped).
    pub request_paths: Vec<String>,
}

/// One file a process left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservedFile {
    /// `home/…`, `workspace/…` or `tmp/…`, relative to the scratch root.
    pub path: String,
    /// Its size.
    pub size_bytes: u64,
    /// What it is to the protocol: `task-output`, `transcript` or `other`.
    pub role: String,
    /// Where it points, if it is a symlink (relative to the scratch root when it
    /// points inside it). Claude Code 2.1.328 makes each task output file a symlink
    /// to the subagent's transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_to: Option<String>,
}

/// Everything one run of the process showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The API exchanges, in the simulator's request shape.
    pub cassette: Cassette,
    /// How the process ended and what it left.
    pub process: ProcessReport,
}

/// The `result` event and the number of events in stream-json `stdout`.
pub fn stream_json(stdout: &str) -> (Option<serde_json::Value>, u64) {
    let mut result = None;
    let mut events = 0;
    for line in stdout.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        events += 1;
        if event.get("type").and_then(serde_json::Value::as_str) == Some("result") {
            // Session ids and costs vary per run; the verdict needs none of them.
            let keep = ["subtype", "is_error", "num_turns", "result"];
            let kept: serde_json::Map<String, serde_json::Value> = keep
                .iter()
                .filter_map(|key| Some(((*key).to_owned(), event.get(*key)?.clone())))
                .collect();
            result = Some(serde_json::Value::Object(kept));
        }
    }
    (result, events)
}

/// The files under `root`'s `home`, `workspace` and `tmp` (at most
/// [`OBSERVED_FILES_MAX`]), sorted by path.
pub fn observed_files(root: &Path) -> Vec<ObservedFile> {
    let mut files = Vec::new();
    let mut pending: Vec<PathBuf> = ["home", "workspace", "tmp", super::plant::OUTSIDE_DIR]
        .iter()
        .map(|dir| root.join(dir))
        .collect();
    // Bounded by OBSERVED_FILES_MAX entries and the finite tree.
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if files.len() >= OBSERVED_FILES_MAX {
                break;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let text = relative.to_string_lossy().into_owned();
            // The size of what a symlink points at: a task output is its transcript.
            let size_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let symlink_to = kind.is_symlink().then(|| {
                let target = std::fs::read_link(&path).unwrap_or_default();
                let shown = target.strip_prefix(root).unwrap_or(&target);
                shown.to_string_lossy().into_owned()
            });
            files.push(ObservedFile {
                role: file_role(&text).to_owned(),
                path: text,
                size_bytes,
                symlink_to,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

fn file_role(path: &str) -> &'static str {
    if path.starts_with(&format!("{}/", super::plant::OUTSIDE_DIR)) {
        // Reached only through a planted symlink ([`super::plant`]).
        "outside"
    } else if path.contains("/tasks/") && path.ends_with(".output") {
        "task-output"
    } else if path.ends_with(".jsonl") {
        "transcript"
    } else {
        "other"
    }
}

/// A coordinator launch as the wire showed it.
struct Launch {
    task_id: TaskId,
    prompt: String,
    /// The `name` the Agent call gave the worker, if any: SendMessage may address it.
    name: Option<String>,
    background: bool,
    /// The request number that first carried its launch result.
    seen_at: u64,
}

/// The launches the coordinator's requests carry, in the order they appear.
fn launches(exchanges: &[&Exchange]) -> Vec<Launch> {
    let mut found: Vec<Launch> = Vec::new();
    for exchange in exchanges {
        let mut prompts: BTreeMap<&str, (&str, Option<&str>)> = BTreeMap::new();
        for message in &exchange.request.messages {
            for block in &message.content {
                match (message.role, block) {
                    (Role::Assistant, ContentBlock::ToolUse { id, name, input })
                        if name == "Agent" =>
                    {
                        if let Some(prompt) = input.get("prompt").and_then(|p| p.as_str()) {
                            let name = input.get("name").and_then(|n| n.as_str());
                            prompts.insert(id, (prompt, name));
                        }
                    }
                    (
                        Role::User,
                        ContentBlock::ToolResult {
                            tool_use_id,
                            content,
                            ..
                        },
                    ) => {
                        let Some(&(prompt, name)) = prompts.get(tool_use_id.as_str()) else {
                            continue;
                        };
                        let Ok(launch) = serde_json::from_str::<serde_json::Value>(content) else {
                            continue;
                        };
                        let Some(task_id) = launch
                            .get("agentId")
                            .and_then(|id| id.as_str())
                            .and_then(|id| TaskId::parse(id).ok())
                        else {
                            continue;
                        };
                        if found.iter().any(|known| known.task_id == task_id) {
                            continue;
                        }
                        found.push(Launch {
                            task_id,
                            prompt: prompt.to_owned(),
                            name: name.map(str::to_owned),
                            background: launch.get("launch").and_then(|l| l.as_str())
                                == Some("async"),
                            seen_at: exchange.call,
                        });
                    }
                    _ => {}
                }
            }
        }
    }
    found
}

/// The witness stream of one observed run of `scenario` (see the module docs).
pub fn witness_trace(scenario: &Scenario, observation: &Observation) -> Vec<TraceEntry> {
    let mut exchanges: Vec<&Exchange> = observation.cassette.exchanges.iter().collect();
    exchanges.sort_by_key(|exchange| exchange.call);
    let label = |exchange: &Exchange| exchange.agent.clone().unwrap_or_default();
    let coordinator: Vec<&Exchange> = exchanges
        .iter()
        .copied()
        .filter(|exchange| label(exchange) == COORDINATOR_LABEL)
        .collect();
    let launched = launches(&coordinator);

    let mut entries: Vec<TraceEntry> = Vec::new();
    let mut push = |time_ms: u64, actor: &str, typed: TraceEvent| {
        entries.push(TraceEntry {
            time_ms,
            actor: actor.into(),
            typed,
        });
    };
    push(
        0,
        "sim",
        TraceEvent::Sim(SimEvent::RunStarted {
            scenario: Name::new(&scenario.name),
            profile: Name::new("claude-code (real CLI)"),
            coordinator_mode: true,
            liveness_bound_ms: scenario.settings.liveness_bound_ms,
            background_forced: false,
            background_disabled: false,
            binding: None,
        }),
    );
    // The host's faults fire per request and are over when the process is: the
    // liveness bound counts from the start.
    push(0, "sim", TraceEvent::Sim(SimEvent::Healed));

    // Worker prompt → its tasks not yet ended, in launch order.
    let mut open_by_prompt: BTreeMap<&str, VecDeque<&TaskId>> = BTreeMap::new();
    let mut spawned_announced: BTreeSet<&TaskId> = BTreeSet::new();
    let mut ended: BTreeSet<&TaskId> = BTreeSet::new();
    let mut ended_by_prompt: BTreeMap<String, Vec<&TaskId>> = BTreeMap::new();
    let mut accepted_count = 0usize;
    // TaskStop answers without an error the coordinator's requests carried so far.
    let mut stops_count = 0usize;
    let mut played: BTreeMap<String, u64> = BTreeMap::new();
    let mut kills_recorded = 0u32;
    for exchange in &exchanges {
        let time = exchange.call;
        let agent = label(exchange);
        for launch in launched.iter().filter(|launch| launch.seen_at == time) {
            if spawned_announced.insert(&launch.task_id) {
                push(
                    time,
                    "runtime",
                    TraceEvent::runtime(RuntimeEvent::TaskSpawned {
                        task_id: launch.task_id.clone(),
                        parent: COORDINATOR_LABEL.to_owned(),
                        run_in_background: launch.background,
                    }),
                );
                open_by_prompt
                    .entry(launch.prompt.as_str())
                    .or_default()
                    .push_back(&launch.task_id);
            }
        }
        // A coordinator request the process died holding (a coordinator crash at
        // that call) was never acted on: what it carried counts as handed to the
        // coordinator only once a request of the resumed session shows it.
        let died_holding =
            matches!(exchange.outcome, Outcome::NoResponse) && observation.process.kills > 0;
        // The kill is the harness's own act, recorded from the process's side: it
        // took every agent of the process with it, whichever one's call it came at.
        if died_holding && kills_recorded < observation.process.kills {
            let kind = if agent == COORDINATOR_LABEL {
                FaultKind::CoordinatorCrash
            } else {
                FaultKind::WorkerCrash
            };
            push(
                time,
                "sim",
                TraceEvent::Sim(SimEvent::FaultFired {
                    fault: kills_recorded as usize,
                    kind,
                    detail: format!("the CLI process was killed holding {agent}'s request"),
                    agent: None,
                }),
            );
            kills_recorded += 1;
        }
        if agent == COORDINATOR_LABEL && !died_holding {
            let view = ConversationView::of(&exchange.request);
            if view.stopped.len() > stops_count {
                push(
                    time,
                    COORDINATOR_LABEL,
                    TraceEvent::Sim(SimEvent::TasksStopped {
                        task_ids: view.stopped[stops_count..].to_vec(),
                    }),
                );
                stops_count = view.stopped.len();
            }
            if view.notifications.len() > accepted_count {
                let new = &view.notifications[accepted_count..];
                accepted_count = view.notifications.len();
                push(
                    time,
                    COORDINATOR_LABEL,
                    TraceEvent::Sim(SimEvent::EnvelopesAccepted {
                        task_ids: new.iter().map(|e| e.task_id.clone()).collect(),
                        statuses: new.iter().map(|e| e.status).collect(),
                        // The process's workers are not the simulator's: what they
                        // said is in the cassette, but which task each answered
                        // is the process's to know.
                        bodies: Box::default(),
                    }),
                );
            }
        }
        let response = match &exchange.outcome {
            Outcome::Response(response) => response,
            // A worker whose call was never answered died with the killed process:
            // its task is over (killed), whether or not the CLI could be resumed.
            // One notification for it is owed, which only a coordinator that
            // finished can be judged on: an unresumable session is `target-resume`'s
            // finding, not a task that runs forever.
            Outcome::NoResponse if agent != COORDINATOR_LABEL && observation.process.kills > 0 => {
                let task = open_by_prompt
                    .get_mut(agent.as_str())
                    .and_then(VecDeque::pop_front);
                if let Some(task_id) = task {
                    ended.insert(task_id);
                    for typed in [
                        RuntimeEvent::TaskTransitioned {
                            task_id: task_id.clone(),
                            from: TaskStatus::Running,
                            to: TaskStatus::Killed,
                        },
                        RuntimeEvent::NotificationEnqueued {
                            task_id: task_id.clone(),
                            status: TaskStatus::Killed,
                        },
                    ] {
                        push(time, "runtime", TraceEvent::runtime(typed));
                    }
                }
                continue;
            }
            _ => continue,
        };
        let waiting = response
            .content
            .iter()
            .all(|block| matches!(block, ContentBlock::Text { text, .. } if text == WAITING_TEXT));
        if !waiting {
            *played.entry(agent.clone()).or_default() += 1;
        }
        if agent != COORDINATOR_LABEL && crate::model::ends_agent_work(response) {
            // A worker's final answer ends its oldest open task; with none open, it is
            // a continued (resumed) worker ending again under the task id it had.
            let open = open_by_prompt
                .get_mut(agent.as_str())
                .and_then(VecDeque::pop_front);
            let task = open.or_else(|| {
                ended_by_prompt
                    .get(agent.as_str())
                    .and_then(|ended| ended.last().copied())
            });
            if let Some(task_id) = task {
                ended.insert(task_id);
                ended_by_prompt
                    .entry(agent.clone())
                    .or_default()
                    .push(task_id);
                push(
                    time,
                    "runtime",
                    TraceEvent::runtime(RuntimeEvent::TaskTransitioned {
                        task_id: task_id.clone(),
                        from: TaskStatus::Running,
                        to: TaskStatus::Completed,
                    }),
                );
                push(
                    time,
                    "runtime",
                    TraceEvent::runtime(RuntimeEvent::NotificationEnqueued {
                        task_id: task_id.clone(),
                        status: TaskStatus::Completed,
                    }),
                );
            }
        }
    }
    let end = exchanges.last().map_or(0, |exchange| exchange.call) + 1;
    for (path, resolved_path) in writes_through_planted_link(&observation.process.files) {
        push(
            end,
            "disk",
            TraceEvent::Sim(SimEvent::DiskWrite {
                path: path.into(),
                resolved_path: resolved_path.into(),
                through_symlink: true,
                target_kept: false,
                replaced: false,
                // The CLI's own process wrote it; which of its agents is not seen.
                agent: None,
                cwd: None,
            }),
        );
    }
    let messages = messages_witnessed(&coordinator, &launched, &exchanges);
    if !messages.is_empty() {
        push(
            end,
            "sim",
            TraceEvent::Sim(SimEvent::MessagesWitnessed { messages }),
        );
    }
    let agents = std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .map(|script| {
            let label = if script.prompt == scenario.coordinator.prompt {
                COORDINATOR_LABEL.to_owned()
            } else {
                script.prompt.clone()
            };
            let turns = script.turns.len() as u64;
            ScriptPlayed {
                turns_played: played.get(&label).copied().unwrap_or(0).min(turns),
                agent: label,
                turns,
            }
        })
        .collect();
    push(
        end,
        "sim",
        TraceEvent::Sim(SimEvent::ScriptsPlayed { agents }),
    );
    let open_tasks = launched
        .iter()
        .filter(|launch| !ended.contains(&launch.task_id))
        .map(|launch| launch.task_id.to_string())
        .collect();
    push(
        end,
        "sim",
        TraceEvent::Sim(SimEvent::RunEnded {
            open_tasks,
            coordinator: process_ending(&observation.process),
        }),
    );
    entries
}

/// A SendMessage the coordinator's model made and the CLI answered without an
/// error: a message the process accepted.
struct AcceptedMessage<'a> {
    to: &'a str,
    text: &'a str,
}

/// The SendMessage calls with a string `message` that the coordinator's requests
/// show answered without an error, each once, in the order they were made.
fn accepted_messages<'a>(coordinator: &[&'a Exchange]) -> Vec<AcceptedMessage<'a>> {
    let mut calls: BTreeMap<&str, AcceptedMessage<'a>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut answered_ok: BTreeSet<&str> = BTreeSet::new();
    for exchange in coordinator {
        for message in &exchange.request.messages {
            for block in &message.content {
                match (message.role, block) {
                    (Role::Assistant, ContentBlock::ToolUse { id, name, input })
                        if name == "SendMessage" =>
                    {
                        let to = input.get("to").and_then(|to| to.as_str());
                        let text = input.get("message").and_then(|text| text.as_str());
                        if let (Some(to), Some(text)) = (to, text) {
                            if calls.insert(id, AcceptedMessage { to, text }).is_none() {
                                order.push(id);
                            }
                        }
                    }
                    (
                        Role::User,
                        ContentBlock::ToolResult {
                            tool_use_id,
                            is_error: false,
                            ..
                        },
                    ) => {
                        answered_ok.insert(tool_use_id);
                    }
                    _ => {}
                }
            }
        }
    }
    order
        .into_iter()
        .filter(|id| answered_ok.contains(id))
        .filter_map(|id| calls.remove(id))
        .collect()
}

/// Every message the process accepted whose recipient it launched, with how often
/// the recipient's model received it: the most user blocks holding its text (as
/// written or XML-escaped) in any one of the recipient's requests, since each
/// request carries the conversation so far. Once is delivery; none is a drop, two a
/// redelivery.
fn messages_witnessed(
    coordinator: &[&Exchange],
    launched: &[Launch],
    exchanges: &[&Exchange],
) -> Vec<MessageWitness> {
    accepted_messages(coordinator)
        .into_iter()
        .filter_map(|message| {
            let recipient = launched.iter().find(|launch| {
                launch.task_id.as_str() == message.to || launch.name.as_deref() == Some(message.to)
            })?;
            let escaped = quick_xml::escape::escape(message.text);
            let holds = |text: &str| text.contains(message.text) || text.contains(&*escaped);
            let received_count = exchanges
                .iter()
                .filter(|exchange| exchange.agent.as_deref() == Some(recipient.prompt.as_str()))
                .map(|exchange| {
                    exchange
                        .request
                        .messages
                        .iter()
                        .filter(|m| m.role == Role::User)
                        .flat_map(|m| &m.content)
                        .filter(|block| match block {
                            ContentBlock::Text { text, .. } => holds(text),
                            ContentBlock::ToolResult { content, .. } => holds(content),
                            _ => false,
                        })
                        .count()
                })
                .max()
                .unwrap_or(0);
            Some(MessageWitness {
                from: COORDINATOR_LABEL.to_owned(),
                to: recipient.prompt.clone(),
                message_digest: message_digest_hex(COORDINATOR_LABEL, message.text),
                received_count: received_count as u64,
                overtaken_by: None,
                may_miss: false,
                sent_ms: None,
                to_sender: false,
            })
        })
        .collect()
}

/// The files the process wrote through a symlink planted by `symlink-at-output`
/// ([`super::plant`]): every file under `outside/`, with the path it was written
/// at (under the planted link) and where it landed. Seen once the process is over,
/// so they are stamped at the end of the run.
fn writes_through_planted_link(files: &[ObservedFile]) -> Vec<(String, String)> {
    let outside = super::plant::OUTSIDE_DIR;
    let Some(link) = files
        .iter()
        .find(|file| file.symlink_to.as_deref() == Some(outside))
    else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|file| {
            let name = file.path.strip_prefix(outside)?.strip_prefix('/')?;
            Some((format!("{}/{name}", link.path), file.path.clone()))
        })
        .collect()
}

/// How the process ended, as `run_ended` words a coordinator's end: `finished` for
/// exit code 0.
fn process_ending(process: &ProcessReport) -> String {
    match (process.timed_out, process.exit_code) {
        (true, _) => "killed at the run's timeout".to_owned(),
        (false, Some(0)) => "finished (exit code 0)".to_owned(),
        (false, Some(code)) => format!("exited with code {code}"),
        (false, None) => "killed by a signal".to_owned(),
    }
}
