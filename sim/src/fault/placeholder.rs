//! Placeholders in scripted tool-call inputs: a script is written before the run,
//! but task ids are drawn while it runs.
//!
//! A string value that is exactly `{{task:<pattern>}}`, anywhere in a tool call's
//! input, becomes the id of the first launched task whose worker prompt matches the
//! `*` pattern, once that launch is known (from an Agent call's result in the
//! coordinator's conversation, or from the harness's `launches`). Until then, and
//! when no launch matches, the text is left as written, so the runtime sees an id
//! that names no task and answers as it does for any unknown id.

use coord_runtime::world::{ContentBlock, ModelResponse};

use super::book::FaultBook;

/// What opens a task placeholder.
const TASK_OPEN: &str = "{{task:";
/// What closes one.
const PLACEHOLDER_CLOSE: &str = "}}";

/// The `*` pattern of a task placeholder, if `text` is one.
pub fn task_pattern(text: &str) -> Option<&str> {
    text.strip_prefix(TASK_OPEN)?
        .strip_suffix(PLACEHOLDER_CLOSE)
        .filter(|pattern| !pattern.is_empty())
}

/// Replaces every task placeholder in the response's tool-call inputs that `book`
/// can resolve.
pub fn resolve(response: &mut ModelResponse, book: &FaultBook) {
    for block in &mut response.content {
        if let ContentBlock::ToolUse { input, .. } = block {
            resolve_value(input, book);
        }
    }
}

fn resolve_value(value: &mut serde_json::Value, book: &FaultBook) {
    match value {
        serde_json::Value::String(text) => {
            if let Some(id) = task_pattern(text).and_then(|pattern| book.task_matching(pattern)) {
                *text = id;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                resolve_value(item, book);
            }
        }
        serde_json::Value::Object(fields) => {
            for field in fields.values_mut() {
                resolve_value(field, book);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_string_in_placeholder_form_is_a_placeholder() {
        // Goal: a placeholder is recognised only as the entire value, so a message
        // that merely mentions the syntax is never rewritten.
        assert_eq!(task_pattern("{{task:Summarize*}}"), Some("Summarize*"));
        assert_eq!(task_pattern("{{task:}}"), None);
        assert_eq!(task_pattern("see {{task:Summarize*}}"), None);
        assert_eq!(task_pattern("{{task:Summarize*}"), None);
    }
}
