//! Many similar agents without writing each one: `count` on a worker or a tool
//! call, `repeat` on a turn.
//!
//! A scenario of a thousand workers of five hundred turns each would be half a
//! million turn tables by hand. Instead a `[[workers]]` table with `count = 1000`
//! stands for a thousand workers whose prompts number them (`{n}` becomes 1, 2, …),
//! a tool call with `count` stands for that many calls in its turn (an Agent call
//! that launches them all), and a turn with `repeat` is played that many times in a
//! row. The loader expands them once its ranges are checked ([`super::bounds`]), so
//! everything after it sees ordinary scripts.
//!
//! Workers of one `count` share their turns (an [`Arc`]): memory grows with the
//! turns written, not with workers × turns, unless the turns themselves say `{n}`.

use std::sync::Arc;

use serde_json::Value;

use super::Scenario;
use crate::model::{AgentScript, ScriptedToolCall, ScriptedTurn};

/// What `{n}` becomes: the number of the worker or call, from 1.
pub const NUMBER_PLACEHOLDER: &str = "{n}";

/// Expands every `count` and `repeat` of `scenario` in place.
pub fn expand(scenario: &mut Scenario) {
    expand_turns(&mut scenario.coordinator);
    let written = std::mem::take(&mut scenario.workers);
    for mut worker in written {
        expand_turns(&mut worker);
        let Some(count) = worker.count.take() else {
            scenario.workers.push(worker);
            continue;
        };
        let numbered_turns = worker.turns.iter().any(turn_names_its_number);
        for number in 1..=count {
            let mut copy = AgentScript {
                prompt: numbered(&worker.prompt, number),
                recorded_prompt: worker.recorded_prompt,
                turns: Arc::clone(&worker.turns),
                count: None,
            };
            if numbered_turns {
                copy.turns = Arc::new(
                    worker
                        .turns
                        .iter()
                        .map(|turn| numbered_turn(turn, number))
                        .collect(),
                );
            }
            scenario.workers.push(copy);
        }
    }
}

/// Expands the counted calls and the repeated turns of one script.
fn expand_turns(script: &mut AgentScript) {
    let expands = script
        .turns
        .iter()
        .any(|turn| turn.repeat.is_some() || turn.tool_calls.iter().any(|c| c.count.is_some()));
    if !expands {
        return;
    }
    let mut turns = Vec::with_capacity(script.turns.len());
    for turn in script.turns.iter() {
        let mut turn = turn.clone();
        turn.tool_calls = turn.tool_calls.into_iter().flat_map(expand_call).collect();
        let times = turn.repeat.take().unwrap_or(1);
        turns.extend(std::iter::repeat_n(turn, times as usize));
    }
    script.turns = Arc::new(turns);
}

/// One call, or `count` numbered ones.
fn expand_call(mut call: ScriptedToolCall) -> Vec<ScriptedToolCall> {
    let Some(count) = call.count.take() else {
        return vec![call];
    };
    (1..=count)
        .map(|number| ScriptedToolCall {
            input: numbered_value(&call.input, number).into(),
            ..call.clone()
        })
        .collect()
}

/// Whether any string the turn says or sends holds [`NUMBER_PLACEHOLDER`].
fn turn_names_its_number(turn: &ScriptedTurn) -> bool {
    turn.text
        .as_deref()
        .is_some_and(|text| text.contains(NUMBER_PLACEHOLDER))
        || turn
            .tool_calls
            .iter()
            .any(|call| value_names_its_number(&call.input))
}

fn value_names_its_number(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains(NUMBER_PLACEHOLDER),
        Value::Array(items) => items.iter().any(value_names_its_number),
        Value::Object(fields) => fields.values().any(value_names_its_number),
        _ => false,
    }
}

fn numbered(text: &str, number: u32) -> String {
    text.replace(NUMBER_PLACEHOLDER, &number.to_string())
}

fn numbered_turn(turn: &ScriptedTurn, number: u32) -> ScriptedTurn {
    ScriptedTurn {
        text: turn.text.as_deref().map(|text| numbered(text, number)),
        tool_calls: turn
            .tool_calls
            .iter()
            .map(|call| ScriptedToolCall {
                input: numbered_value(&call.input, number).into(),
                ..call.clone()
            })
            .collect(),
        ..turn.clone()
    }
}

fn numbered_value(value: &Value, number: u32) -> Value {
    match value {
        Value::String(text) => Value::String(numbered(text, number)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| numbered_value(item, number))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, item)| (key.clone(), numbered_value(item, number)))
                .collect(),
        ),
        other => other.clone(),
    }
}
