//! What a simulated model can tell from a request: whose conversation it is, which
//! workers it launched, and which of their notifications have arrived.

use std::collections::{BTreeMap, HashMap};

use coord_runtime::envelope::{parse_block, Envelope};
use coord_runtime::world::{ContentBlock, ModelRequest, Role};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

/// The text a scripted agent says while its next turn waits for a trigger. Turns
/// with this text do not count as script steps.
pub const WAITING_TEXT: &str = "(waiting for notifications)";

/// A summary of one request's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConversationView {
    /// The first user text: the agent's prompt, which names whose conversation it is.
    pub prompt: String,
    /// Assistant turns so far that were script steps (waiting turns excluded).
    pub steps_taken: usize,
    /// Workers this agent launched with the Agent tool, by task id: their
    /// descriptions, from the launch results.
    pub launched: BTreeMap<String, String>,
    /// Envelopes delivered into the conversation, in order.
    pub notifications: Vec<Envelope>,
    /// The texts of every user message block after the prompt (tool results
    /// excluded), in order: queued and mailbox messages, resumes.
    pub later_user_texts: Vec<String>,
    /// For a fork (PROTOCOL.md §6): the prompt of the conversation it copied. A
    /// fork's history is its parent's, so its own prompt is its directive, and
    /// `steps_taken`, `launched`, `notifications` and `later_user_texts` count only
    /// what followed the directive.
    pub forked_from: Option<String>,
    /// For a fork: how many messages of the request precede its own turns (the
    /// parent's history, the parent's assistant message and the directive message).
    pub fork_messages_len: usize,
}

/// Envelopes and launch results already parsed, by the text they were parsed from.
///
/// A coordinator's every request carries every notification it was ever given and
/// every launch result, so a caller that reads each request of a run into a view
/// ([`ConversationView::read`]) keeps one memo for the run and parses each
/// notification's XML and each launch's JSON once. The keys are hashed with XXH3:
/// they are whole notification texts, and SipHash spends several times as long on
/// them.
#[derive(Debug, Default)]
pub struct EnvelopeMemo {
    parsed: HashMap<String, Vec<Envelope>, Xxh3DefaultBuilder>,
    /// The `agentId` of each launch result, by its text.
    launched: HashMap<String, Option<String>, Xxh3DefaultBuilder>,
}

impl EnvelopeMemo {
    /// The envelopes in `text`, as [`parse_block`] finds them.
    fn envelopes(&mut self, text: &str) -> Vec<Envelope> {
        // Text with no envelope in it is not worth keeping a copy of.
        if !text.contains("<task-notification") {
            return Vec::new();
        }
        if let Some(envelopes) = self.parsed.get(text) {
            return envelopes.clone();
        }
        let envelopes = parse_block(text);
        self.parsed.insert(text.to_owned(), envelopes.clone());
        envelopes
    }

    /// The `agentId` string of the launch result `content`, if it is a JSON object
    /// with one.
    fn launched_agent_id(&mut self, content: &str) -> Option<String> {
        if let Some(agent_id) = self.launched.get(content) {
            return agent_id.clone();
        }
        let launch: Option<serde_json::Value> = serde_json::from_str(content).ok();
        let agent_id = launch
            .as_ref()
            .and_then(|launch| launch.get("agentId"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        self.launched.insert(content.to_owned(), agent_id.clone());
        agent_id
    }
}

impl ConversationView {
    /// Reads `request`.
    pub fn of(request: &ModelRequest) -> ConversationView {
        Self::read(request, &mut EnvelopeMemo::default())
    }

    /// Reads `request`, taking envelopes parsed before from `memo`.
    pub fn read(request: &ModelRequest, memo: &mut EnvelopeMemo) -> ConversationView {
        let mut view = ConversationView::default();
        // tool_use id → the description its Agent call gave.
        let mut agent_calls: BTreeMap<String, String> = BTreeMap::new();
        let mut first_text_seen = false;
        for (index, message) in request.messages.iter().enumerate() {
            for block in &message.content {
                match (message.role, block) {
                    (Role::User, ContentBlock::Text { text, .. }) => {
                        if !first_text_seen {
                            first_text_seen = true;
                            view.prompt = text.clone();
                            continue;
                        }
                        if let Some(directive) = fork_directive(text) {
                            // Everything before the directive is the parent's.
                            let parent = std::mem::replace(&mut view.prompt, directive.to_owned());
                            view = ConversationView {
                                prompt: view.prompt,
                                forked_from: Some(parent),
                                fork_messages_len: index + 1,
                                ..ConversationView::default()
                            };
                            continue;
                        }
                        let envelopes = memo.envelopes(text);
                        if envelopes.is_empty() {
                            view.later_user_texts.push(text.clone());
                        }
                        view.notifications.extend(envelopes);
                    }
                    (
                        Role::User,
                        ContentBlock::ToolResult {
                            tool_use_id,
                            content,
                            is_error: false,
                            ..
                        },
                    ) => {
                        let Some(description) = agent_calls.get(tool_use_id) else {
                            continue;
                        };
                        if let Some(agent_id) = memo.launched_agent_id(content) {
                            view.launched.insert(agent_id, description.clone());
                        }
                    }
                    (Role::Assistant, ContentBlock::ToolUse { id, name, input })
                        if name == "Agent" =>
                    {
                        if let Some(description) = input.get("description").and_then(|d| d.as_str())
                        {
                            agent_calls.insert(id.clone(), description.to_owned());
                        }
                    }
                    _ => {}
                }
            }
            if message.role == Role::Assistant {
                let waiting = message.content.iter().all(|block| {
                    matches!(block, ContentBlock::Text { text, .. } if text == WAITING_TEXT)
                });
                if !waiting {
                    view.steps_taken += 1;
                }
            }
        }
        view
    }

    /// Descriptions of launched workers matching `pattern` (`*` matches any run of
    /// characters), and how many of them have notified.
    pub fn launched_and_notified(&self, pattern: &str) -> (usize, usize) {
        let matching: Vec<&String> = self
            .launched
            .iter()
            .filter(|(_, description)| wildcard_match(pattern, description))
            .map(|(id, _)| id)
            .collect();
        let notified = matching
            .iter()
            .filter(|id| self.notifications.iter().any(|e| e.task_id == ***id))
            .count();
        (matching.len(), notified)
    }
}

/// The directive of a fork's directive block (PROTOCOL.md §6): the text after
/// `Your directive: ` in a block that carries the fork boilerplate.
fn fork_directive(text: &str) -> Option<&str> {
    use coord_runtime::fork::{FORK_BOILERPLATE_TAG, FORK_DIRECTIVE_PREFIX};
    // `<TAG>` tested piecewise: this runs on every user text of every request.
    let opens_boilerplate = text
        .strip_prefix('<')
        .and_then(|rest| rest.strip_prefix(FORK_BOILERPLATE_TAG))
        .is_some_and(|rest| rest.starts_with('>'));
    if !opens_boilerplate {
        return None;
    }
    let at = text.rfind(FORK_DIRECTIVE_PREFIX)?;
    Some(&text[at + FORK_DIRECTIVE_PREFIX.len()..])
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
///
/// Splits the pattern in place rather than into a list: disk-fault paths are matched
/// at every disk operation of a seed that has them.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let Some((first, after_first)) = pattern.split_once('*') else {
        return pattern == text;
    };
    // The parts between the first `*` and the last, if there are two or more.
    let (middles, last) = match after_first.rsplit_once('*') {
        Some((middles, last)) => (Some(middles), last),
        None => (None, after_first),
    };
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in middles.into_iter().flat_map(|middles| middles.split('*')) {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;
    use proptest::prelude::*;

    /// How patterns were matched before [`wildcard_match`] split them in place.
    fn wildcard_match_by_list(pattern: &str, text: &str) -> bool {
        let parts: Vec<&str> = pattern.split('*').collect();
        if parts.len() == 1 {
            return pattern == text;
        }
        let (first, last) = (parts[0], parts[parts.len() - 1]);
        if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
            return false;
        }
        let mut rest = &text[first.len()..text.len() - last.len()];
        for middle in &parts[1..parts.len() - 1] {
            match rest.find(middle) {
                Some(at) => rest = &rest[at + middle.len()..],
                None => return false,
            }
        }
        true
    }

    proptest! {
        /// Short alphabets, so that stars, repeats and overlaps are common.
        #[test]
        fn splitting_in_place_matches_what_splitting_into_a_list_did(
            pattern in "[ab*/]{0,8}",
            text in "[ab/]{0,10}",
        ) {
            prop_assert_eq!(
                wildcard_match(&pattern, &text),
                wildcard_match_by_list(&pattern, &text)
            );
        }
    }
}
