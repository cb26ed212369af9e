//! What the Messages API refuses, held against every request a model received (it
//! answers 400 `invalid_request_error` to either):
//!
//! - a `tool_use` block must be answered by a `tool_result` for its id in the very
//!   next message, a user message. A runtime that restores a crashed conversation,
//!   builds a fork or resumes a worker without closing the calls its last
//!   assistant message left open sends such a request;
//! - a `tool_result` block must answer a `tool_use` of the message right before
//!   it. A fork built without its parent's assistant message, whose calls the
//!   fork's placeholder results answer, sends such a request.
//!
//! The simulated API refuses it as the real one would, the tap logs
//! `request_refused`, and the verdict fails the seed under `api-request`.
//!
//! Only the conversation's last assistant message, and its last message of
//! results, are checked: a conversation grows at its end, so every earlier one was
//! the last once, when its request was checked.

use std::collections::HashSet;

use coord_runtime::world::{ContentBlock, ModelRequest, Role};

use super::Violation;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The name a request the API refused fails under.
pub const API_REQUEST: &str = "api-request";

/// Why the Messages API would refuse `request`, if it would.
pub fn api_refusal(request: &ModelRequest) -> Option<String> {
    unanswered_tool_uses(request).or_else(|| unmatched_tool_results(request))
}

/// The tool calls of `request`'s last assistant message that the next message
/// does not answer, as the API words its refusal.
fn unanswered_tool_uses(request: &ModelRequest) -> Option<String> {
    let (index, assistant) = request
        .messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, message)| message.role == Role::Assistant)?;
    let next = request.messages.get(index + 1)?;
    // A set, not a search per call: a coordinator that launched a thousand workers
    // in one message sends a thousand calls and results in every later request.
    let answered: HashSet<&str> = match next.role {
        Role::User => next
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect(),
        _ => HashSet::new(),
    };
    let unanswered: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } if !answered.contains(id.as_str()) => {
                Some(id.as_str())
            }
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

/// The results in `request`'s last message of tool results that answer no call of
/// the message right before it, as the API words its refusal.
fn unmatched_tool_results(request: &ModelRequest) -> Option<String> {
    let is_result = |block: &ContentBlock| matches!(block, ContentBlock::ToolResult { .. });
    let (index, results) = request
        .messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, message)| message.content.iter().any(is_result))?;
    let previous = index
        .checked_sub(1)
        .and_then(|previous| request.messages.get(previous))
        .filter(|previous| previous.role == Role::Assistant);
    let called: HashSet<&str> = previous
        .iter()
        .flat_map(|previous| &previous.content)
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let unmatched: Vec<&str> = results
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. }
                if !called.contains(tool_use_id.as_str()) =>
            {
                Some(tool_use_id.as_str())
            }
            _ => None,
        })
        .collect();
    (!unmatched.is_empty()).then(|| {
        format!(
            "messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: {}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
            unmatched.join(", ")
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

    #[test]
    fn a_tool_result_must_answer_a_call_of_the_message_before_it() {
        // Goal: the API's other pairing rule: results that answer the calls right
        // before them pass; results with no assistant message before them (a fork
        // that left out its parent's calls), or answering calls of an earlier
        // message, are refused, naming the ids.
        let prompt = (Role::User, vec![ContentBlock::text("go")]);
        let calls = (Role::Assistant, vec![tool_use("t1")]);
        let answered = request(vec![
            prompt.clone(),
            calls.clone(),
            (Role::User, vec![result("t1"), ContentBlock::text("next")]),
        ]);
        assert_eq!(api_refusal(&answered), None);
        let orphaned = request(vec![
            prompt.clone(),
            (
                Role::User,
                vec![result("t1"), ContentBlock::text("directive")],
            ),
        ]);
        let refused = api_refusal(&orphaned).expect("t1 answers no call");
        assert!(
            refused.starts_with("messages.1.content:") && refused.contains(": t1."),
            "{refused}"
        );
        let stale = request(vec![
            prompt,
            calls,
            (Role::User, vec![result("t1")]),
            (Role::Assistant, vec![ContentBlock::text("done")]),
            (Role::User, vec![result("t1")]),
        ]);
        assert!(api_refusal(&stale).is_some());
    }
}
