//! Threads turned into a scenario that replays them against the runtime.
//!
//! Each recorded response becomes one scripted turn: its text, its tool calls
//! (Claude Code's `Task` becomes the runtime's `Agent`, with the fields the
//! runtime's schema has), its stop reason, its recorded usage, and its recorded
//! latency. What the recording received (tool results, envelopes) is not replayed:
//! the runtime produces its own. Two things are adapted so that the replay plays to
//! its end:
//!
//! - A coordinator turn that followed finished subagents (a foreground `Task`
//!   result or a `<task-notification>`) waits for as many of the runtime's real
//!   notifications, never more than it has spawned workers for.
//! - A response that ended the agent's turn while the recording went on (the user
//!   typed again) gets one harmless tool call, so that the runtime's loop does not
//!   end there: `SyntheticOutput` for the coordinator, `TaskList` for a worker.

use serde_json::{Map, Value};

use coord_runtime::world::StopReason;

use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn, Trigger};

use super::extract::{Response, Thread};
use super::sidechain::SPAWNING_TOOLS;

/// The longest latency a turn keeps: recorded gaps also hold the user's thinking
/// time, which a replay has no use for.
pub const LATENCY_MS_MAX: u64 = 120_000;
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
}

/// Who plays a script: the coordinator waits for notifications, workers do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The main thread.
    Coordinator,
    /// A subagent.
    Worker,
}

/// The script of `thread` under `prompt`. `agent_ids` are every subagent's ids, so
/// that envelopes of background shell tasks (which the replay cannot produce) do
/// not count as finished workers.
pub fn script(
    prompt: &str,
    thread: &Thread,
    role: Role,
    agent_ids: &std::collections::BTreeSet<String>,
    adapted: &mut Adaptations,
) -> AgentScript {
    let mut turns = Vec::with_capacity(thread.responses.len());
    let mut finished = 0;
    let mut spawned = 0;
    let mut waited_for = 0;
    for (index, response) in thread.responses.iter().enumerate() {
        finished += response.before.agent_results.len()
            + response
                .before
                .notifications
                .iter()
                .filter(|id| agent_ids.contains(*id))
                .count();
        let mut turn = turn(response, adapted);
        let last = index + 1 == thread.responses.len();
        if turn.tool_calls.is_empty() && !last {
            adapted.continuations += 1;
            let name = match role {
                Role::Coordinator => "SyntheticOutput",
                Role::Worker => "TaskList",
            };
            let input = match role {
                Role::Coordinator => {
                    serde_json::json!({"output": turn.text.clone().unwrap_or_default()})
                }
                Role::Worker => Value::Object(Map::new()),
            };
            turn.tool_calls.push(ScriptedToolCall {
                name: name.to_owned(),
                input,
            });
            turn.stop_reason = Some(StopReason::ToolUse);
        }
        let count = finished.min(spawned);
        if role == Role::Coordinator && count > waited_for {
            waited_for = count;
            adapted.triggers += 1;
            turn.when = Some(Trigger::NotificationsAtLeast { count });
        }
        spawned += turn.tool_calls.iter().filter(|c| c.name == "Agent").count();
        turns.push(turn);
    }
    AgentScript {
        prompt: prompt.to_owned(),
        turns,
    }
}

fn turn(response: &Response, adapted: &mut Adaptations) -> ScriptedTurn {
    adapted.thinking_blocks += response.thinking_blocks;
    let tool_calls: Vec<ScriptedToolCall> = response
        .tool_calls
        .iter()
        .filter_map(|call| tool_call(&call.name, &call.input, adapted))
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
        when: None,
    }
}

/// The runtime's form of one recorded tool call, or `None` when it cannot be made.
fn tool_call(name: &str, input: &Value, adapted: &mut Adaptations) -> Option<ScriptedToolCall> {
    if !SPAWNING_TOOLS.contains(&name) {
        let input = match input {
            Value::Object(_) => without_nulls(input, adapted),
            _ => Value::Object(Map::new()),
        };
        return Some(ScriptedToolCall {
            name: name.to_owned(),
            input,
        });
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
        agent.insert("subagent_type".into(), kind.into());
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
    Some(ScriptedToolCall {
        name: "Agent".to_owned(),
        input: Value::Object(agent),
    })
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
