//! Compaction: an agent whose context passed the threshold has its conversation
//! replaced by a summary of it, as Claude Code's auto-compact does.
//!
//! Before an agent's next request, when the context its last response reported
//! (input, cache reads and writes, output) passed the session's threshold
//! ([`SessionConfig::compact_threshold`](super::SessionConfig::compact_threshold)),
//! or when the model says so ([`Model::compaction_wanted`](crate::world::Model::compaction_wanted):
//! a replayed recording compacts where it was recorded to), the agent sends a compaction request: its own conversation, in its own request
//! shape (system, tools, model, limits), so the prefix is byte for byte the one its
//! last request cached, followed by [`COMPACT_INSTRUCTION`]. The answer's text is
//! the summary. The conversation becomes one user message, [`CONTINUATION_PREAMBLE`]
//! followed by the summary, and the agent goes on from it. A boundary line carrying
//! that message goes to the worker's transcript or the coordinator's durable log,
//! so a resume starts from the last summary.
//!
//! A compaction call that fails (after the retries every model call gets) loses
//! nothing: the agent goes on with its conversation uncompacted, journaled as
//! [`RuntimeEvent::CompactionFailed`], and tries again before its next request.

use std::sync::Arc;

use super::worker::text_of;
use super::{AgentRef, Session};
use crate::event::RuntimeEvent;
use crate::probe::Probe;
use crate::world::{ContentBlock, Message, ModelRequest, Role, Usage};

/// The instruction of a compaction request, after the conversation it summarises.
pub const COMPACT_INSTRUCTION: &str = "Your task is to create a detailed summary of the \
conversation so far, paying close attention to the user's explicit requests and your \
previous actions. This summary should be thorough in capturing technical details, code \
patterns, and decisions that would be essential for continuing the work without losing \
context. Cover: the primary request and intent; key technical concepts; files and code \
examined, modified or created; errors met and how they were fixed; problems solved; all \
of the user's messages; pending tasks; the current work; and the next step, if any. \
Answer with the summary only, and call no tools.";

/// The start of the user message that replaces a compacted conversation; the
/// summary follows it.
pub const CONTINUATION_PREAMBLE: &str = "This session is being continued from a previous \
conversation that ran out of context. The summary below covers the earlier portion of the \
conversation.\n\n";

/// What started a compaction: the context passed the threshold.
pub const AUTO_TRIGGER: &str = "auto";

/// The context a response reports: everything the request held, and the answer.
pub(crate) fn context_tokens(usage: &Usage) -> u64 {
    usage
        .input_tokens
        .saturating_add(usage.cache_creation_input_tokens)
        .saturating_add(usage.cache_read_input_tokens)
        .saturating_add(usage.output_tokens)
}

/// The conversation a compaction request sends: `messages`, then the instruction
/// (added to a trailing user message, as the API would merge it anyway, or as a
/// user message after an assistant one).
pub fn compaction_messages(mut messages: Vec<Message>) -> Vec<Message> {
    let instruction = ContentBlock::text(COMPACT_INSTRUCTION);
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(instruction),
        _ => messages.push(Message {
            role: Role::User,
            content: vec![instruction],
        }),
    }
    messages
}

/// The user message that replaces a conversation summarised as `summary`.
pub fn continuation_message(summary: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::text(format!(
            "{CONTINUATION_PREAMBLE}{summary}"
        ))],
    }
}

/// A compaction that happened: what replaces the conversation, and what the
/// boundary line records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compaction {
    /// The context size that passed the threshold.
    pub(crate) pre_tokens: u64,
    /// The one message the conversation becomes.
    pub(crate) message: Message,
}

impl Session {
    /// The context size to record when an agent whose conversation is `messages`,
    /// and whose last response reported `context_tokens` (none yet: `None`), is
    /// compacted before its next request; `None` when it is not. The model decides
    /// when it has a say (a replayed recording compacts where it was recorded to);
    /// otherwise the threshold rule does.
    pub(crate) fn compaction_due(
        &self,
        context_tokens: Option<u64>,
        messages: &[Message],
    ) -> Option<u64> {
        let due = match self.inner.effects.model.compaction_wanted(messages) {
            Some(wanted) => wanted,
            None => context_tokens.is_some_and(|tokens| {
                self.inner
                    .config
                    .compact_threshold()
                    .is_some_and(|threshold| tokens >= threshold)
            }),
        };
        due.then(|| context_tokens.unwrap_or(0))
    }

    /// Sends `request` (built by [`compaction_messages`] in the agent's own request
    /// shape) for `agent` and returns the compaction its answer makes; `None` when
    /// the call failed or the answer had no text, journaled, in which case the
    /// agent goes on uncompacted.
    pub(crate) async fn compact(
        &self,
        agent: &AgentRef,
        request: ModelRequest,
        pre_tokens: u64,
    ) -> Option<Compaction> {
        let journal = &self.inner.world.journal;
        let failed = |error: String| {
            journal.record(RuntimeEvent::CompactionFailed {
                agent: agent.to_string(),
                error,
            });
            None
        };
        let summary = match self.send_with_retry(agent, &Arc::new(request)).await {
            Ok(response) => text_of(&response.content),
            Err(error) => return failed(error.to_string()),
        };
        if summary.trim().is_empty() {
            return failed("the compaction answer holds no summary".to_owned());
        }
        journal.record(RuntimeEvent::Compacted {
            agent: agent.to_string(),
            trigger: AUTO_TRIGGER.to_owned(),
            pre_tokens,
            summary_bytes: summary.len() as u64,
        });
        Probe::ContextCompacted.reach(&**journal);
        Some(Compaction {
            pre_tokens,
            message: continuation_message(&summary),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_joins_a_trailing_user_message_or_follows_an_assistant_one() {
        // Goal: the compaction request is the conversation as sent, plus the
        // instruction at its end, so its prefix is the one the agent cached.
        let user = Message {
            role: Role::User,
            content: vec![ContentBlock::text("results")],
        };
        let assistant = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("done")],
        };
        let joined = compaction_messages(vec![assistant.clone(), user.clone()]);
        assert_eq!(joined.len(), 2);
        assert_eq!(joined[1].content[0], user.content[0]);
        assert_eq!(
            joined[1].content[1],
            ContentBlock::text(COMPACT_INSTRUCTION)
        );
        let appended = compaction_messages(vec![user.clone(), assistant.clone()]);
        assert_eq!(appended.len(), 3);
        assert_eq!(appended[2].role, Role::User);
        assert_eq!(
            appended[2].content,
            vec![ContentBlock::text(COMPACT_INSTRUCTION)]
        );
    }

    #[test]
    fn the_context_is_every_prompt_token_and_the_answer() {
        let usage = Usage {
            input_tokens: 1,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 300,
            output_tokens: 4_000,
            ..Usage::default()
        };
        assert_eq!(context_tokens(&usage), 4_321);
    }

    #[test]
    fn the_continuation_message_is_the_preamble_and_the_summary() {
        let message = continuation_message("the summary");
        assert_eq!(message.role, Role::User);
        assert_eq!(
            message.content,
            vec![ContentBlock::text(format!(
                "{CONTINUATION_PREAMBLE}the summary"
            ))]
        );
    }
}
