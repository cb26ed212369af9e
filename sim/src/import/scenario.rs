//! Threads turned into a scenario that replays them against the runtime.
//!
//! Each recorded response becomes one scripted turn: its text, its tool calls
//! (Claude Code's `Task` becomes the runtime's `Agent`, with the fields the
//! runtime's schema has; paths move into the workspace, see `paths`), its stop
//! reason, its recorded usage, its recorded latency, and how long the recording
//! held its request (tool runs and the user's pauses, which the replay's tools and
//! user take no time for). The main thread runs
//! outside coordinator mode, as Claude Code's does: it has every tool, and a
//! foreground `Task` returns its worker's answer as its result. What the recording
//! received (tool results, envelopes) is not replayed: the runtime produces its
//! own. Each call carries its recorded result, which only the cost meter reads, and
//! each script the size of its recorded first request, so that the billed prompts
//! are the recording's size. Two things are adapted so that the replay plays to its
//! end:
//!
//! - A main-thread turn that followed finished background subagents (a
//!   `<task-notification>` naming one) waits for as many of the runtime's real
//!   notifications, never more than it has spawned background workers.
//! - A response that ended the agent's turn while the recording went on (the user
//!   typed again) gets one harmless tool call, so that the runtime's loop does not
//!   end there: `SyntheticOutput` for the main thread, `TaskList` for a worker. The
//!   user's next prompt is that call's recorded result.

use serde_json::{Map, Value};

use coord_runtime::world::StopReason;

use crate::model::{
    AgentScript, Latency, RecordedPrompt, ScriptedCompaction, ScriptedToolCall, ScriptedTurn,
    Trigger,
};

use super::extract::{Response, Thread};
use super::paths::into_workspace;
use super::sidechain::SPAWNING_TOOLS;

/// The longest latency a turn keeps: recorded gaps also hold the user's thinking
/// time, which a replay has no use for.
pub const LATENCY_MS_MAX: u64 = 120_000;
/// The longest hold of a request a turn keeps: a minute past the longest cache
/// TTL, after which the cache has forgotten everything either way, and a longer
/// pause would only cost the replay virtual time to wait through.
pub const SEND_DELAY_MS_MAX: u64 = 61 * 60_000;
/// The latency of a turn whose recording has no timestamps.
const LATENCY_MS_DEFAULT: u64 = 1_000;
/// The model names the runtime's Agent schema accepts.
const AGENT_MODELS: [&str; 4] = ["sonnet", "opus", "haiku", "inherit"];

/// What the mapping left out or added, for the scenario's header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adaptations {
    /// Spawning calls without a prompt, dropped.
    pub spawns_without_prompt: usize,
    /// Fields of spawning calls the runtime's schema lacks, dropped.
    pub agent_fields_dropped: usize,
    /// `null` values in tool inputs, which TOML cannot hold, dropped.
    pub nulls_dropped: usize,
    /// Thinking blocks, which a replay does not carry.
    pub thinking_blocks: usize,
    /// Turns given a tool call to continue past a recorded end of turn.
    pub continuations: usize,
    /// Coordinator turns made to wait for notifications.
    pub triggers: usize,
    /// Latencies cut to [`LATENCY_MS_MAX`].
    pub latencies_capped: usize,
    /// Recorded holds of a request cut to [`SEND_DELAY_MS_MAX`].
    pub holds_capped: usize,
    /// Spawns whose `subagent_type` the runtime does not define, run as its
    /// default agent.
    pub agent_types_unknown: usize,
    /// Strings of tool inputs whose recorded paths moved into the workspace.
    pub paths_moved: usize,
    /// Tool calls carrying their recorded result.
    pub results_recorded: usize,
    /// Recorded compactions replayed before the turn that followed them.
    pub compactions: usize,
    /// Requests before which the recorded client rewrote its prompt (see
    /// [`prompt_rewritten`]), replayed as rewrites.
    pub prompt_rewrites: usize,
    /// Background shells the recording never heard from again (no notification
    /// arrived before it ended), run in the foreground so that the runtime's
    /// notification of them, which the recording never had, does not arrive.
    pub shells_foreground: usize,
    /// Shell commands the user moved to the background by hand, replayed as
    /// background shells whose notifications arrive where the recording had them.
    pub shells_backgrounded: usize,
    /// `Bash` calls whose `timeout` became the runtime's `timeout_ms`.
    pub bash_timeouts_renamed: usize,
    /// Agents counted at bytes a token of their own.
    pub agent_ratios: usize,
}

/// For a `Bash` call of `thread` that became a background shell (its result names a
/// background task) whose notification the thread received: the response that
/// notification came before.
pub fn shell_notified_before(thread: &Thread, call: &super::extract::ToolUse) -> Option<usize> {
    let task = thread.background_tasks.get(&call.id)?;
    thread
        .responses
        .iter()
        .position(|r| r.before.notifications.iter().any(|id| id == task))
}

/// Whether `call`'s input asked to run in the background.
fn asked_background(call: &super::extract::ToolUse) -> bool {
    call.input.get("run_in_background") == Some(&Value::Bool(true))
}

/// How far below what the previous request cached a request's cache read must
/// fall to be a rewrite: more than the API's smallest cacheable prefix, so that a
/// breakpoint placed a block earlier is not one.
pub const REWRITE_MARGIN_TOKENS: u64 = 1_024;

/// Whether the client rewrote its prompt between the request of `previous` and
/// that of `response`: the later request read back from the cache less than the
/// earlier one had cached (by more than [`REWRITE_MARGIN_TOKENS`]), but not
/// nothing (an expired cache reads nothing; a rewrite still reads the client's
/// unchanged head). A compaction in between shrinks the prompt on purpose, and is
/// not one.
pub fn prompt_rewritten(previous: &Response, response: &Response) -> bool {
    let (Some(before), Some(now)) = (previous.usage, response.usage) else {
        return false;
    };
    let cached_before = before.cache_read_input_tokens + before.cache_creation_input_tokens;
    response.before.compaction.is_none()
        && now.cache_read_input_tokens > 0
        && now.cache_read_input_tokens + REWRITE_MARGIN_TOKENS < cached_before
}

/// Who plays a script: the main thread waits for notifications, workers do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The main thread.
    Coordinator,
    /// A subagent.
    Worker,
}

/// The tool a continuation calls (see the module documentation).
pub fn continuation_tool(role: Role) -> &'static str {
    match role {
        Role::Coordinator => "SyntheticOutput",
        Role::Worker => "TaskList",
    }
}

/// A script and where it adds to the recording.
#[derive(Debug, Clone)]
pub struct Scripted {
    /// The script.
    pub script: AgentScript,
    /// The turns whose last tool call is a continuation, not recorded.
    pub continued_turns: Vec<usize>,
}

/// What the recording says about the session beyond one thread.
#[derive(Debug, Default)]
pub struct SessionFacts {
    /// Every subagent's id, so that envelopes of background shell tasks (which the
    /// replay cannot produce) do not count as finished workers.
    pub agent_ids: std::collections::BTreeSet<String>,
    /// How long each foreground subagent ran, by the id of the call that spawned
    /// it: the replay runs it while its parent waits, so that time is no part of
    /// the parent's recorded hold.
    pub foreground_ms: std::collections::BTreeMap<String, u64>,
    /// The recorded compaction requests (the `agent-acompact-*` transcripts), by
    /// the compacted agent's name (`main` or a subagent's `agentId`) and the line
    /// of the boundary they made in its transcript.
    pub compaction_requests: std::collections::BTreeMap<(String, usize), CompactionRequest>,
    /// The `tool_use` ids of `Bash` calls run in the background whose task no
    /// notification of the recording names.
    pub shells_never_notified: std::collections::BTreeSet<String>,
}

/// What a recorded compaction request reported: its usage, and how long it took
/// from its request to its boundary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionRequest {
    /// Its recorded usage.
    pub usage: Option<coord_runtime::world::Usage>,
    /// From its request to the boundary, when both were stamped.
    pub duration_ms: Option<u64>,
}

/// The script of `thread` under `prompt`: the thread of `agent` (`main` or a
/// subagent's `agentId`), whose recorded compactions `facts` keeps by that name.
pub fn script(
    agent: &str,
    prompt: &str,
    thread: &Thread,
    role: Role,
    facts: &SessionFacts,
    adapted: &mut Adaptations,
) -> Scripted {
    let agent_ids = &facts.agent_ids;
    let mut continued_turns = Vec::new();
    let mut turns = Vec::with_capacity(thread.responses.len());
    let mut finished = 0;
    let mut spawned = 0;
    let mut waited_for = 0;
    let cwd = thread.cwd.as_deref();
    for (index, response) in thread.responses.iter().enumerate() {
        finished += response
            .before
            .notifications
            .iter()
            .filter(|id| agent_ids.contains(*id))
            .count();
        let mut turn = turn(response, thread, cwd, facts, adapted);
        let mut compaction_ms = 0;
        if let Some(compaction) = &response.before.compaction {
            if let Some(summary) = &compaction.summary {
                let request = facts
                    .compaction_requests
                    .get(&(agent.to_owned(), compaction.line))
                    .copied()
                    .unwrap_or_default();
                let duration_ms = request.duration_ms.unwrap_or(LATENCY_MS_DEFAULT).max(1);
                compaction_ms = duration_ms;
                adapted.compactions += 1;
                turn.compact_before = Some(ScriptedCompaction {
                    summary: summary.clone(),
                    usage: request.usage,
                    // The compaction's whole time: it is part of the recorded hold of
                    // the request after it, which loses it below.
                    latency: Latency::Fixed {
                        ms: duration_ms.min(LATENCY_MS_MAX),
                    },
                });
            }
        }
        if let Some(previous) = index.checked_sub(1).map(|i| &thread.responses[i]) {
            if prompt_rewritten(previous, response) {
                turn.prompt_rewritten = true;
                adapted.prompt_rewrites += 1;
            }
            let held_ms = send_delay_ms(previous, response, facts).saturating_sub(compaction_ms);
            if held_ms > SEND_DELAY_MS_MAX {
                adapted.holds_capped += 1;
            }
            turn.send_delay_ms = held_ms.min(SEND_DELAY_MS_MAX);
        }
        let last = index + 1 == thread.responses.len();
        if turn.tool_calls.is_empty() && !last {
            adapted.continuations += 1;
            continued_turns.push(index);
            let next_prompts = &thread.responses[index + 1].before.user_prompt_texts;
            turn.tool_calls.push(ScriptedToolCall {
                result: (!next_prompts.is_empty()).then(|| next_prompts.join("\n\n")),
                ..ScriptedToolCall::new(continuation_tool(role), Value::Object(Map::new()))
            });
            turn.stop_reason = Some(StopReason::ToolUse);
        }
        let count = finished.min(spawned);
        if role == Role::Coordinator && count > waited_for {
            waited_for = count;
            adapted.triggers += 1;
            turn.when = Some(Trigger::NotificationsAtLeast { count });
        }
        // Outside coordinator mode only a background spawn notifies.
        spawned += turn
            .tool_calls
            .iter()
            .filter(|c| {
                c.name == "Agent" && c.input.get("run_in_background") == Some(&Value::Bool(true))
            })
            .count();
        turns.push(turn);
    }
    let recorded_prompt = thread.responses.first().and_then(|r| r.usage).map(|usage| {
        let first_request_tokens =
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
        RecordedPrompt {
            first_request_tokens,
            cached_before_tokens: usage.cache_read_input_tokens,
            head_tokens: client_head_tokens(&turns)
                .filter(|&head| head >= usage.cache_read_input_tokens)
                .filter(|&head| head <= first_request_tokens),
            // Measured once every script is made (`import::calibrate`).
            bytes_per_token: None,
        }
    });
    Scripted {
        script: AgentScript {
            prompt: prompt.to_owned(),
            recorded_prompt,
            turns: turns.into(),
            count: None,
        },
        continued_turns,
    }
}

/// The recorded client's head in tokens: the least that a request read back after
/// a rewrite of the client's prompt or a compaction, when `turns` have any.
fn client_head_tokens(turns: &[ScriptedTurn]) -> Option<u64> {
    turns
        .iter()
        .filter(|turn| turn.prompt_rewritten || turn.compact_before.is_some())
        .filter_map(|turn| turn.usage)
        .map(|usage| usage.cache_read_input_tokens)
        .filter(|&read| read > 0)
        .min()
}

/// How long the recording held `response`'s request after `previous` began: the
/// rest of `previous`'s generation (the replay's latency is its first token), its
/// tool runs and the user's pauses, less the foreground subagents it waited for.
fn send_delay_ms(previous: &Response, response: &Response, facts: &SessionFacts) -> u64 {
    let Some((started, sent)) = previous.started_ms.zip(response.sent_ms) else {
        return 0;
    };
    let waited: u64 = previous
        .tool_calls
        .iter()
        .filter_map(|call| facts.foreground_ms.get(&call.id))
        .sum();
    sent.saturating_sub(started).saturating_sub(waited)
}

fn turn(
    response: &Response,
    thread: &Thread,
    cwd: Option<&str>,
    facts: &SessionFacts,
    adapted: &mut Adaptations,
) -> ScriptedTurn {
    adapted.thinking_blocks += response.thinking_blocks;
    let tool_calls: Vec<ScriptedToolCall> = response
        .tool_calls
        .iter()
        .filter_map(|call| {
            let mut scripted = tool_call(&call.name, &call.input, cwd, adapted)?;
            if let Some(step) = shell_notified_before(thread, call) {
                // A background shell finishes where its notification arrived; one
                // the user moved to the background by hand runs in the background.
                scripted.finishes_before_step = Some(step);
                if !asked_background(call) {
                    if let Some(input) = scripted.input.as_object_mut() {
                        input.insert("run_in_background".into(), Value::Bool(true));
                        adapted.shells_backgrounded += 1;
                    }
                }
            }
            if facts.shells_never_notified.contains(&call.id) {
                if let Some(input) = scripted.input.as_object_mut() {
                    if input.remove("run_in_background").is_some() {
                        adapted.shells_foreground += 1;
                    }
                }
            }
            scripted.result = thread.results.get(&call.id).cloned();
            adapted.results_recorded += usize::from(scripted.result.is_some());
            Some(scripted)
        })
        .collect();
    let recorded = response
        .stop_reason
        .as_ref()
        .and_then(|r| serde_json::from_value::<StopReason>(Value::String(r.clone())).ok());
    // The runtime acts on the calls, so the stop reason must agree with them.
    let stop_reason = match (recorded, tool_calls.is_empty()) {
        (Some(StopReason::ToolUse), true) | (None, true) => StopReason::EndTurn,
        (Some(StopReason::EndTurn), false) | (None, false) => StopReason::ToolUse,
        (Some(reason), _) => reason,
    };
    let mut latency_ms = response.latency_ms.unwrap_or(LATENCY_MS_DEFAULT).max(1);
    if latency_ms > LATENCY_MS_MAX {
        adapted.latencies_capped += 1;
        latency_ms = LATENCY_MS_MAX;
    }
    ScriptedTurn {
        text: response.text.clone(),
        tool_calls,
        stop_reason: Some(stop_reason),
        usage: response.usage,
        latency: Latency::Fixed { ms: latency_ms },
        send_delay_ms: 0,
        when: None,
        repeat: None,
        prompt_rewritten: false,
        compact_before: None,
    }
}

/// The runtime's form of one recorded tool call, without its result, or `None` when
/// it cannot be made.
fn tool_call(
    name: &str,
    input: &Value,
    cwd: Option<&str>,
    adapted: &mut Adaptations,
) -> Option<ScriptedToolCall> {
    if !SPAWNING_TOOLS.contains(&name) {
        let input = match input {
            Value::Object(_) => without_nulls(input, adapted),
            _ => Value::Object(Map::new()),
        };
        let (mut input, moved) = into_workspace(name, input, cwd);
        adapted.paths_moved += moved;
        if name == "Bash" {
            // Claude Code's Bash names its timeout `timeout`, the runtime's
            // `timeout_ms`; both in milliseconds.
            if let Some(object) = input.as_object_mut() {
                if let Some(timeout) = object.remove("timeout") {
                    object.insert("timeout_ms".into(), timeout);
                    adapted.bash_timeouts_renamed += 1;
                }
            }
        }
        return Some(ScriptedToolCall::new(name, input));
    }
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
    };
    let Some(prompt) = text("prompt") else {
        adapted.spawns_without_prompt += 1;
        return None;
    };
    let mut agent = Map::new();
    agent.insert(
        "description".into(),
        text("description").unwrap_or("subagent").into(),
    );
    agent.insert("prompt".into(), prompt.into());
    if let Some(kind) = text("subagent_type") {
        // A type the runtime does not define (a plugin's agent) would refuse the
        // spawn: the worker runs as the default general-purpose agent instead.
        let known = coord_runtime::agent::builtin_definitions()
            .iter()
            .any(|d| d.agent_type == kind && kind != "fork");
        if known {
            agent.insert("subagent_type".into(), kind.into());
        } else {
            adapted.agent_types_unknown += 1;
        }
    }
    if let Some(model) = text("model").filter(|m| AGENT_MODELS.contains(m)) {
        agent.insert("model".into(), model.into());
    }
    if let Some(background) = input.get("run_in_background").and_then(Value::as_bool) {
        agent.insert("run_in_background".into(), background.into());
    }
    let kept = agent.len() - 1;
    let given = input.as_object().map_or(0, Map::len);
    adapted.agent_fields_dropped += given.saturating_sub(kept + 1);
    Some(ScriptedToolCall::new("Agent", Value::Object(agent)))
}

/// `value` without `null`s (TOML has none), and with integers TOML cannot hold
/// as floats.
fn without_nulls(value: &Value, adapted: &mut Adaptations) -> Value {
    match value {
        Value::Object(map) => {
            let mut kept = Map::new();
            for (key, item) in map {
                if item.is_null() {
                    adapted.nulls_dropped += 1;
                } else {
                    kept.insert(key.clone(), without_nulls(item, adapted));
                }
            }
            Value::Object(kept)
        }
        Value::Array(items) => {
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                if item.is_null() {
                    adapted.nulls_dropped += 1;
                } else {
                    kept.push(without_nulls(item, adapted));
                }
            }
            Value::Array(kept)
        }
        Value::Number(n) if n.is_u64() && n.as_i64().is_none() => {
            n.as_f64().map_or(Value::Null, Value::from)
        }
        other => other.clone(),
    }
}
