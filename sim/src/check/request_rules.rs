//! What the Messages API refuses, held against every request a model received: a
//! `tool_use` block must be answered by a `tool_result` for its id in the very next
//! message, a user message (the API answers 400 `invalid_request_error`
//! otherwise). A runtime that restores a crashed conversation, builds a fork or
//! resumes a worker without closing the calls its last assistant message left
//! open sends such a request. The simulated API refuses it as the real one
//! would, the tap logs `request_refused`, and the verdict fails the seed under
//! `api-request`.
//!
//! Only the conversation's last assistant message is checked: a conversation
//! grows at its end, so every earlier one was the last once, when its request
//! was checked.

use coord_runtime::world::{ContentBlock, ModelRequest, Role};

use super::Violation;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The name a request the API refused fails under.
pub const API_REQUEST: &str = "api-request";

/// Why the Messages API would refuse `request`, if it would: the tool calls of
/// its last assistant message that the next message does not answer.
pub fn unanswered_tool_uses(request: &ModelRequest) -> Option<String> {
    let (index, assistant) = request
        .messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, message)| message.role == Role::Assistant)?;
    let next = request.messages.get(index + 1)?;
    let answered = |id: &str| {
        next.role == Role::User
            && next.content.iter().any(|block| {
                matches!(block, ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == id)
            })
    };
    let unanswered: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } if !answered(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    (!unanswered.is_empty()).then(|| {
        format!(
            "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {}",
            unanswered.join(", ")
        )
    })
}

/// A failure for each `request_refused` the tap logged.
pub fn judge_requests(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::RequestRefused { agent, detail }) => Some(Violation {
                invariant: API_REQUEST,
                detail: format!(
                    "at {} ms the model API refused {agent}'s request: {detail}",
                    entry.time_ms
                ),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::world::Message;
    use std::sync::Arc;

    fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse {
            id: id.to_owned(),
            name: "Read".to_owned(),
            input: Arc::new(serde_json::json!({})),
        }
    }

    fn result(id: &str) -> ContentBlock {
        ContentBlock::ToolResult {
            tool_use_id: id.to_owned(),
            content: "ok".to_owned(),
            is_error: false,
            cache_control: None,
        }
    }

    fn request(messages: Vec<(Role, Vec<ContentBlock>)>) -> ModelRequest {
        ModelRequest {
            messages: messages
                .into_iter()
                .map(|(role, content)| Message { role, content })
                .collect(),
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 1024,
            tools: Arc::default(),
            system: Arc::default(),
            thinking: None,
        }
    }

    #[test]
    fn a_tool_call_must_be_answered_in_the_next_message() {
        // Goal: the API's pairing rule on the last assistant message: every call
        // answered passes; one left open, or answered only later, is refused.
        let prompt = (Role::User, vec![ContentBlock::text("go")]);
        let calls = (Role::Assistant, vec![tool_use("t1"), tool_use("t2")]);
        let answered = request(vec![
            prompt.clone(),
            calls.clone(),
            (Role::User, vec![result("t1"), result("t2")]),
        ]);
        assert_eq!(unanswered_tool_uses(&answered), None);
        let half = request(vec![
            prompt.clone(),
            calls.clone(),
            (Role::User, vec![result("t1"), ContentBlock::text("news")]),
        ]);
        let refused = unanswered_tool_uses(&half).expect("t2 is open");
        assert!(
            refused.starts_with("messages.1:") && refused.ends_with("t2"),
            "{refused}"
        );
        let text_only = request(vec![
            prompt.clone(),
            calls,
            (Role::User, vec![ContentBlock::text("restarted")]),
        ]);
        assert!(unanswered_tool_uses(&text_only).is_some());
        assert_eq!(unanswered_tool_uses(&request(vec![prompt])), None);
    }
}
