//! How a simulated model survives its agent's compaction.
//!
//! A compaction replaces an agent's conversation by one message: the runtime's
//! continuation preamble and the summary the model wrote. A simulated model knows
//! its agent only from the conversation (its prompt, the script steps it took, the
//! workers it launched, the notifications it got), so, as a real model writes the
//! facts it needs into its summary, the simulated one writes that state into the
//! summary as a JSON block, and reads it back from the continuation message.
//!
//! The notifications go in as JSON, by task, status and summary line (a summary
//! keeps what happened, not every worker's whole result, or it would fill the
//! context it was written to empty), never as `<task-notification>` XML: checkers
//! find envelopes in the coordinator's requests by their XML, and an envelope
//! written again would count as a second delivery. Every `<` of the block is
//! escaped (`\u003c`) so that no text the state carries (a worker's result) reads
//! as XML either.

use std::collections::BTreeMap;

use coord_runtime::envelope::Envelope;
use coord_runtime::session::{COMPACT_INSTRUCTION, CONTINUATION_PREAMBLE};
use coord_runtime::world::{ContentBlock, ModelRequest, Role};
use serde::{Deserialize, Serialize};

use super::view::ConversationView;

/// The tag around the state block in a summary.
const STATE_TAG: &str = "simulated-model-state";

/// What a simulated agent needs to go on after a compaction: its view's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CompactedState {
    prompt: String,
    steps_taken: usize,
    /// Model calls of the conversation so far, the compaction call included.
    assistant_messages: usize,
    launched: BTreeMap<String, String>,
    notifications: Vec<Envelope>,
    later_user_texts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forked_from: Option<String>,
}

/// Whether `request` asks for a compaction: its last block is the instruction.
pub fn is_compaction_request(request: &ModelRequest) -> bool {
    request
        .messages
        .last()
        .filter(|message| message.role == Role::User)
        .and_then(|message| message.content.last())
        .is_some_and(is_compact_instruction)
}

/// Whether `block` is the compaction instruction.
pub(super) fn is_compact_instruction(block: &ContentBlock) -> bool {
    matches!(block, ContentBlock::Text { text, .. } if text == COMPACT_INSTRUCTION)
}

/// The summary the model answers a compaction request of the conversation `view`
/// read with: a line for a reader, then the state block.
pub fn summary_of(view: &ConversationView) -> String {
    let text = format!(
        "Summary: {} script steps taken, {} workers launched, {} notifications received.",
        view.steps_taken,
        view.launched.len(),
        view.notifications.len()
    );
    summary_with(view, &text)
}

/// A summary whose text for a reader is `text` (a recorded session's summary),
/// followed by the state block of the conversation `view` read.
pub fn summary_with(view: &ConversationView, text: &str) -> String {
    let state = CompactedState {
        prompt: view.prompt.clone(),
        steps_taken: view.steps_taken,
        assistant_messages: view.assistant_messages + 1,
        launched: view.launched.clone(),
        notifications: view.notifications.iter().map(summarised).collect(),
        later_user_texts: view.later_user_texts.clone(),
        forked_from: view.forked_from.clone(),
    };
    let json = serde_json::to_string(&state)
        .expect("views serialize")
        .replace('<', "\\u003c");
    format!("{text}\n<{STATE_TAG}>{json}</{STATE_TAG}>")
}

/// What a summary keeps of an envelope: whose, how it ended, its summary line.
fn summarised(envelope: &Envelope) -> Envelope {
    Envelope {
        task_id: envelope.task_id.clone(),
        tool_use_id: envelope.tool_use_id.clone(),
        output_file: None,
        status: envelope.status,
        summary: envelope.summary.clone(),
        note: None,
        result: None,
        usage: None,
        worktree: None,
        extra: BTreeMap::new(),
    }
}

/// Whether `text` is a summary [`summary_of`] wrote (in a response or in the
/// continuation message).
pub fn holds_summary(text: &str) -> bool {
    text.contains(concat!("<", "simulated-model-state", ">"))
}

/// The view a continuation message `text` restores: the state its summary
/// carries. `None` when `text` is not a continuation, or its summary carries no
/// state (another model wrote it).
pub(super) fn restored_view(text: &str) -> Option<ConversationView> {
    let summary = text.strip_prefix(CONTINUATION_PREAMBLE)?;
    let open = format!("<{STATE_TAG}>");
    let close = format!("</{STATE_TAG}>");
    let start = summary.find(&open)? + open.len();
    let end = start + summary[start..].find(&close)?;
    let state: CompactedState = serde_json::from_str(&summary[start..end]).ok()?;
    Some(ConversationView {
        prompt: state.prompt,
        steps_taken: state.steps_taken,
        launched: state.launched,
        launch_inputs: BTreeMap::new(),
        spawn_answers: Vec::new(),
        shells: Vec::new(),
        stopped: Vec::new(),
        notifications: state.notifications,
        later_user_texts: state.later_user_texts,
        forked_from: state.forked_from,
        fork_messages_len: 0,
        fork_results_not_placeholder: Vec::new(),
        assistant_messages: state.assistant_messages,
        compaction_requested: false,
        compacted_at_step: Some(state.steps_taken),
        summary_behind_history_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::envelope::EnvelopeStatus;

    #[test]
    fn a_summary_restores_the_view_it_was_written_from() {
        // Goal: the counts survive the round trip, envelopes without their
        // results, and no `<` of the state reaches the summary's text.
        let view = ConversationView {
            prompt: "plan <task-notification>".to_owned(),
            steps_taken: 3,
            launched: [("a1".to_owned(), "research".to_owned())].into(),
            notifications: vec![Envelope {
                task_id: "a1".to_owned(),
                tool_use_id: None,
                output_file: None,
                status: EnvelopeStatus::Completed,
                summary: "done".to_owned(),
                note: None,
                result: Some("a long result".to_owned()),
                usage: None,
                worktree: None,
                extra: BTreeMap::new(),
            }],
            later_user_texts: vec!["a message".to_owned()],
            assistant_messages: 4,
            ..ConversationView::default()
        };
        let summary = summary_of(&view);
        assert!(holds_summary(&summary));
        assert!(!summary.contains("<task-notification"));
        let restored = restored_view(&format!("{CONTINUATION_PREAMBLE}{summary}")).unwrap();
        let mut expected = view.clone();
        expected.assistant_messages = 5;
        expected.compacted_at_step = Some(3);
        expected.notifications[0].result = None;
        assert_eq!(restored, expected);
        assert_eq!(restored_view(&summary), None);
        assert_eq!(
            restored_view(&format!("{CONTINUATION_PREAMBLE}a summary of its own")),
            None
        );
    }
}
