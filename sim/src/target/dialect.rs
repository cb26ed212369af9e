//! The Claude Code CLI's dialect of the Messages API, read into the shape the
//! simulator's scripted model and checkers understand.
//!
//! The CLI's requests carry more than a [`ModelRequest`](coord_runtime::world::ModelRequest)
//! holds: a `system` role inside `messages`, `<system-reminder>` text blocks around
//! the prompt, `tool_result` contents as block arrays, thinking settings, betas.
//! [`simulator_request`] keeps what says who an agent is and what it was handed and
//! drops the rest, so the CLI's own prompts and tool descriptions (its code, not
//! ours) never reach a cassette:
//!
//! - `model`, `max_tokens`, `stream` and the `user`/`assistant` messages are kept;
//!   `system`, `tools`, `thinking`, `metadata` and every other field are dropped;
//! - a `user` text block that is a `<system-reminder>` is dropped unless it carries a
//!   `<task-notification>` (the CLI delivers notifications inside one), so an
//!   agent's first user text is its prompt, as in the simulator;
//! - `tool_result` content is flattened to its text; an Agent launch result
//!   (`agentId: …`) becomes the JSON the simulator's launch results are
//!   (`{"agentId": …, "launch": "async" | "sync", "outputFile": …, "text": …}`), so
//!   the scripted model knows which workers it launched;
//! - blocks of other types (thinking, images) are dropped, and so is a message left
//!   empty;
//! - in a notification, `<status>stopped</status>` (what 2.1.328 says, after
//!   `--resume`, for a worker that died with the previous process) is read as
//!   `killed`, the protocol's word for a stopped worker: the envelope codec knows no
//!   `stopped` and would drop the whole envelope.

use serde_json::{json, Map, Value};

/// The line of an Agent launch result that names the agent.
const AGENT_ID_PREFIX: &str = "agentId: ";
/// The line of an Agent launch result that names its output file.
const OUTPUT_FILE_PREFIX: &str = "output_file: ";
/// How a background launch result starts.
const ASYNC_LAUNCH_OPENING: &str = "Async agent launched";
/// The status 2.1.328 gives a worker that died with the previous process.
const STOPPED_STATUS: &str = "<status>stopped</status>";
/// The protocol's status for a stopped worker.
const KILLED_STATUS: &str = "<status>killed</status>";
/// The opening of a system reminder.
const SYSTEM_REMINDER_OPENING: &str = "<system-reminder>";

/// The CLI's request body `cli_body` in the simulator's request shape (see the
/// module docs). A body that is not a JSON object is returned as it is, for the host
/// to refuse.
pub fn simulator_request(cli_body: Value) -> Value {
    let Value::Object(body) = cli_body else {
        return cli_body;
    };
    let mut kept = Map::new();
    for key in ["model", "max_tokens", "stream"] {
        if let Some(value) = body.get(key) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    let messages: Vec<Value> = body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(simulator_message)
        .collect();
    kept.insert("messages".to_owned(), Value::Array(messages));
    Value::Object(kept)
}

/// One message in the simulator's shape, or `None` for a message it has no place
/// for (a `system` message, one left without content).
fn simulator_message(message: &Value) -> Option<Value> {
    let role = message.get("role")?.as_str()?;
    if role != "user" && role != "assistant" {
        return None;
    }
    let blocks: Vec<Value> = match message.get("content")? {
        Value::String(text) => vec![json!({ "type": "text", "text": text })],
        Value::Array(blocks) => blocks.clone(),
        _ => return None,
    };
    let content: Vec<Value> = blocks
        .iter()
        .filter_map(|block| simulator_block(role, block))
        .collect();
    if content.is_empty() {
        return None;
    }
    Some(json!({ "role": role, "content": content }))
}

fn simulator_block(role: &str, block: &Value) -> Option<Value> {
    match block.get("type")?.as_str()? {
        "text" => {
            let text = block.get("text")?.as_str()?;
            let notifies = text.contains("<task-notification");
            let reminder_only = role == "user"
                && text.trim_start().starts_with(SYSTEM_REMINDER_OPENING)
                && !notifies;
            if reminder_only {
                return None;
            }
            let text = if notifies {
                text.replace(STOPPED_STATUS, KILLED_STATUS)
            } else {
                text.to_owned()
            };
            Some(json!({ "type": "text", "text": text }))
        }
        "tool_use" => Some(json!({
            "type": "tool_use",
            "id": block.get("id")?,
            "name": block.get("name")?,
            "input": block.get("input").cloned().unwrap_or_else(|| json!({})),
        })),
        "tool_result" => {
            let text = tool_result_text(block.get("content"));
            let content = launch_json(&text).unwrap_or(text);
            let mut result = json!({
                "type": "tool_result",
                "tool_use_id": block.get("tool_use_id")?,
                "content": content,
            });
            if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                result["is_error"] = json!(true);
            }
            Some(result)
        }
        _ => None,
    }
}

/// A `tool_result`'s content as one text: a string as it is, the text blocks of an
/// array joined by newlines.
fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The launch JSON for an Agent result text that names an agent, `None` for any
/// other text.
pub fn launch_json(text: &str) -> Option<String> {
    let agent_id = line_value(text, AGENT_ID_PREFIX)?;
    let output_file = line_value(text, OUTPUT_FILE_PREFIX);
    let launch = if text.starts_with(ASYNC_LAUNCH_OPENING) {
        "async"
    } else {
        "sync"
    };
    let launch = json!({
        "agentId": agent_id,
        "launch": launch,
        "outputFile": output_file,
        "text": text,
    });
    Some(launch.to_string())
}

/// The first word after `prefix` on the first line that starts with it.
fn line_value<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    text.lines()
        .find_map(|line| line.trim_start().strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the prompt is the first user text once reminders and the system message
    /// are gone, and a launch result names its agent as the simulator's do.
    #[test]
    fn a_cli_request_reads_as_the_simulators_shape() {
        let cli = json!({
            "model": "claude-opus-5-5", "max_tokens": 128000, "stream": true,
            "system": [{ "type": "text", "text": "their prompt" }],
            "tools": [{ "name": "Agent" }],
            "thinking": { "type": "adaptive" },
            "messages": [
                { "role": "user", "content": [
                    { "type": "text", "text": "<system-reminder>\nAttribution\n</system-reminder>\n" },
                    { "type": "text", "text": "lead prompt" } ] },
                { "role": "system", "content": "# Environment" },
                { "role": "assistant", "content": [
                    { "type": "tool_use", "id": "toolu_1", "name": "Agent", "input": { "prompt": "p" } } ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        { "type": "text", "text": "Async agent launched successfully.\nagentId: aefcc14a90dcfa215 (internal)\noutput_file: /tmp/x/tasks/aefcc14a90dcfa215.output" } ] } ] },
                { "role": "user", "content": [
                    { "type": "text", "text": "<system-reminder>\n<task-notification>\n<task-id>aefcc14a90dcfa215</task-id>\n<status>stopped</status>\n</task-notification>\n</system-reminder>" } ] }
            ]
        });
        let sim = simulator_request(cli);
        assert_eq!(sim.get("system"), None);
        assert_eq!(sim.get("tools"), None);
        let messages = sim["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 4, "the system message is dropped");
        assert_eq!(messages[0]["content"][0]["text"], "lead prompt");
        let launch: Value = serde_json::from_str(
            messages[2]["content"][0]["content"]
                .as_str()
                .expect("flattened"),
        )
        .expect("launch JSON");
        assert_eq!(launch["agentId"], "aefcc14a90dcfa215");
        assert_eq!(launch["launch"], "async");
        assert_eq!(
            launch["outputFile"],
            "/tmp/x/tasks/aefcc14a90dcfa215.output"
        );
        let notification = messages[3]["content"][0]["text"].as_str().expect("text");
        assert!(notification.contains("<task-notification>"));
        assert!(
            notification.contains("<status>killed</status>"),
            "stopped reads as killed: {notification}"
        );
        let parsed: coord_runtime::world::ModelRequest =
            serde_json::from_value(sim).expect("parses as a ModelRequest");
        assert_eq!(parsed.messages.len(), 4);
    }
}
