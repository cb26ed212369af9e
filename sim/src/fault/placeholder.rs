//! Placeholders in scripted tool-call inputs: a script is written before the run,
//! but task ids are drawn and request ids minted while it runs.
//!
//! A string value that is exactly `{{task:<pattern>}}`, anywhere in a tool call's
//! input, becomes the id of the first launched task whose worker prompt matches the
//! `*` pattern, once that launch is known (from an Agent call's result in the
//! coordinator's conversation, or from the harness's `launches`). Until then, and
//! when no launch matches, the text is left as written, so the runtime sees an id
//! that names no task and answers as it does for any unknown id.
//!
//! A string value that is exactly `{{shell:<pattern>}}` becomes the id of the
//! latest background shell the agent's own conversation started whose command
//! matches the `*` pattern (from the `Bash` call's result, as a model reads it to
//! stop the shell); when its own conversation started none, the latest any
//! agent's did (as a worker's report would name it to its coordinator). Until one
//! is started, the text is left as written.
//!
//! A string value that is exactly `{{request:<kind>}}` becomes the `request_id` of
//! the latest `<kind>_request` message the agent's own conversation holds (a
//! structured message handed to it as a user text, such as a `shutdown_request`):
//! what a model reads to answer a request. When the conversation holds none, the
//! text is left as written, and the runtime refuses it as it refuses any id that is
//! not a request id.

use coord_runtime::world::{ContentBlock, ModelResponse};

use super::book::FaultBook;
use crate::model::{wildcard_match, ConversationView};

/// What opens a task placeholder.
const TASK_OPEN: &str = "{{task:";
/// What opens a shell placeholder.
const SHELL_OPEN: &str = "{{shell:";
/// What opens a request placeholder.
const REQUEST_OPEN: &str = "{{request:";
/// What closes one.
const PLACEHOLDER_CLOSE: &str = "}}";

/// The `*` pattern of a task placeholder, if `text` is one.
pub fn task_pattern(text: &str) -> Option<&str> {
    text.strip_prefix(TASK_OPEN)?
        .strip_suffix(PLACEHOLDER_CLOSE)
        .filter(|pattern| !pattern.is_empty())
}

/// The command pattern of a shell placeholder (`cargo *` in
/// `{{shell:cargo *}}`), if `text` is one.
pub fn shell_pattern(text: &str) -> Option<&str> {
    text.strip_prefix(SHELL_OPEN)?
        .strip_suffix(PLACEHOLDER_CLOSE)
        .filter(|pattern| !pattern.is_empty())
}

/// The task id of the latest background shell of `view`'s conversation whose
/// command matches `pattern`.
fn latest_shell_id(view: &ConversationView, pattern: &str) -> Option<String> {
    view.shells
        .iter()
        .rev()
        .find(|(_, command)| wildcard_match(pattern, command))
        .map(|(id, _)| id.clone())
}

/// The request kind of a request placeholder (`shutdown` in
/// `{{request:shutdown}}`), if `text` is one.
pub fn request_kind(text: &str) -> Option<&str> {
    text.strip_prefix(REQUEST_OPEN)?
        .strip_suffix(PLACEHOLDER_CLOSE)
        .filter(|kind| !kind.is_empty())
}

/// The `request_id` of the latest `<kind>_request` among the user texts of
/// `view`'s conversation: a text that is a JSON object of that `type`.
fn latest_request_id(view: &ConversationView, kind: &str) -> Option<String> {
    let wanted_type = format!("{kind}_request");
    view.later_user_texts.iter().rev().find_map(|text| {
        if !text.trim_start().starts_with('{') {
            return None;
        }
        let object: serde_json::Value = serde_json::from_str(text).ok()?;
        if object.get("type")?.as_str()? != wanted_type {
            return None;
        }
        Some(object.get("request_id")?.as_str()?.to_owned())
    })
}

/// Replaces every placeholder in the response's tool-call inputs that `book` (task
/// ids, shells of other agents) or the agent's conversation `view` (its shells,
/// request ids) can resolve.
pub fn resolve(response: &mut ModelResponse, book: &FaultBook, view: &ConversationView) {
    for block in &mut response.content {
        // Only an input holding a placeholder gets its own copy: the others stay
        // shared with the script.
        if let ContentBlock::ToolUse { input, .. } = block {
            if holds_placeholder(input) {
                resolve_value(std::sync::Arc::make_mut(input), book, view);
            }
        }
    }
}

/// Whether some string in `value` is a placeholder.
fn holds_placeholder(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => {
            task_pattern(text).is_some()
                || shell_pattern(text).is_some()
                || request_kind(text).is_some()
        }
        serde_json::Value::Array(items) => items.iter().any(holds_placeholder),
        serde_json::Value::Object(fields) => fields.values().any(holds_placeholder),
        _ => false,
    }
}

fn resolve_value(value: &mut serde_json::Value, book: &FaultBook, view: &ConversationView) {
    match value {
        serde_json::Value::String(text) => {
            let resolved = if let Some(pattern) = task_pattern(text) {
                book.task_matching(pattern)
            } else if let Some(pattern) = shell_pattern(text) {
                latest_shell_id(view, pattern).or_else(|| book.shell_matching(pattern))
            } else if let Some(kind) = request_kind(text) {
                latest_request_id(view, kind)
            } else {
                None
            };
            if let Some(id) = resolved {
                *text = id;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                resolve_value(item, book, view);
            }
        }
        serde_json::Value::Object(fields) => {
            for field in fields.values_mut() {
                resolve_value(field, book, view);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault book with no faults and no launches: placeholders that name tasks
    /// stay as written.
    fn empty_book() -> FaultBook {
        let clock = std::sync::Arc::new(coord_runtime::world::ManualClock::new(0));
        FaultBook::new(
            Vec::new(),
            Default::default(),
            crate::trace::Trace::new(clock),
        )
    }

    #[test]
    fn only_a_whole_string_in_placeholder_form_is_a_placeholder() {
        // Goal: a placeholder is recognised only as the entire value, so a message
        // that merely mentions the syntax is never rewritten.
        assert_eq!(task_pattern("{{task:Summarize*}}"), Some("Summarize*"));
        assert_eq!(task_pattern("{{task:}}"), None);
        assert_eq!(task_pattern("see {{task:Summarize*}}"), None);
        assert_eq!(task_pattern("{{task:Summarize*}"), None);
        assert_eq!(request_kind("{{request:shutdown}}"), Some("shutdown"));
        assert_eq!(request_kind("{{request:}}"), None);
        assert_eq!(request_kind("id {{request:shutdown}}"), None);
        assert_eq!(shell_pattern("{{shell:cargo *}}"), Some("cargo *"));
        assert_eq!(shell_pattern("{{shell:}}"), None);
        assert_eq!(shell_pattern("stop {{shell:cargo *}}"), None);
    }

    #[test]
    fn a_shell_placeholder_names_the_latest_matching_shell_of_the_agents_own_conversation() {
        // Goal: TaskStop scripted against a background shell stops the shell the
        // agent itself started, the latest whose command matches; a pattern that
        // matches none is left as written, for the runtime to refuse.
        let view = ConversationView {
            shells: vec![
                ("b00000001".into(), "cargo test".into()),
                ("b00000002".into(), "npm run build".into()),
                ("b00000003".into(), "cargo test --release".into()),
            ],
            ..ConversationView::default()
        };
        let mut input = serde_json::json!({
            "task_id": "{{shell:cargo test*}}",
            "first": "{{shell:npm *}}",
            "none": "{{shell:make*}}",
        });
        resolve_value(&mut input, &empty_book(), &view);
        assert_eq!(input["task_id"], "b00000003");
        assert_eq!(input["first"], "b00000002");
        assert_eq!(input["none"], "{{shell:make*}}");
    }

    #[test]
    fn a_shell_placeholder_falls_back_to_the_shells_other_agents_started() {
        // Goal: a coordinator can name a shell a worker started (as the worker's
        // report would), while an agent's own shells come first. Method: the book
        // knows two shells of other agents; one view started a matching shell of
        // its own, the other none.
        let book = empty_book();
        book.learn_shell("b00000001", "cargo test");
        book.learn_shell("b00000002", "cargo test --release");
        book.learn_shell("b00000001", "cargo test");
        let mut input = serde_json::json!({ "worker_id": "{{shell:cargo test*}}" });
        resolve_value(&mut input, &book, &ConversationView::default());
        assert_eq!(input["worker_id"], "b00000002");
        let own = ConversationView {
            shells: vec![("b00000009".into(), "cargo test".into())],
            ..ConversationView::default()
        };
        let mut input = serde_json::json!({ "task_id": "{{shell:cargo test*}}" });
        resolve_value(&mut input, &book, &own);
        assert_eq!(input["task_id"], "b00000009");
    }

    #[test]
    fn a_request_placeholder_names_the_latest_request_of_its_kind_the_agent_was_handed() {
        // Goal: the id a model would read is the one it gets: the latest request of
        // the kind asked for, never another kind's, never plain text that mentions
        // one. Method: a conversation with two shutdown requests, a permission
        // request after them and a text that only looks like JSON.
        let view = ConversationView {
            later_user_texts: vec![
                r#"{"type":"shutdown_request","request_id":"shutdown-1@t00000001"}"#.into(),
                r#"{"type":"shutdown_request","request_id":"shutdown-2@t00000001"}"#.into(),
                r#"{"type":"permission_request","request_id":"permission-3@t00000002"}"#.into(),
                "{ not json".into(),
            ],
            ..ConversationView::default()
        };
        assert_eq!(
            latest_request_id(&view, "shutdown").as_deref(),
            Some("shutdown-2@t00000001")
        );
        assert_eq!(latest_request_id(&view, "plan_approval"), None);
        let mut input = serde_json::json!({
            "message": {"type": "shutdown_response", "request_id": "{{request:shutdown}}"},
            "other": "{{request:plan_approval}}",
        });
        resolve_value(&mut input, &empty_book(), &view);
        assert_eq!(input["message"]["request_id"], "shutdown-2@t00000001");
        assert_eq!(input["other"], "{{request:plan_approval}}");
    }
}
