//! What a script imported from a recorded session makes the meter bill: the
//! recorded client's larger head ([`HeadPads`]), the recorded results in place of
//! the runtime's ([`RecordedShape::message`]), and how long the recording held each
//! request ([`RecordedShape::send_delays_ms`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{CacheTtl, ContentBlock, Message, ModelRequest};

use super::ORGANIZATION;
use crate::cache::{Block, Prompt, PromptCache, Request, TokenEstimator};
use crate::model::{scripted_tool_use_position, AgentScript, RecordedPrompt};

/// The padding of one agent's head that makes its first request the recorded size:
/// first the part the recording read from a cache earlier sessions had written,
/// then the rest. Each is one system block whose token count is pinned, so the pad
/// costs a few bytes however many tokens it stands for.
#[derive(Debug, Clone, Default)]
pub(super) struct HeadPads {
    /// Whether the pads were sized (at the agent's first request).
    pub(super) sized: bool,
    /// The part of the recorded head that was cached before the session began.
    pub(super) cached_before: Option<Block>,
    /// The rest of the difference (with a known client head, the rest of the head).
    pub(super) rest: Option<Block>,
    /// With a known client head (`RecordedPrompt::head_tokens`): what the client's
    /// first user message held beyond the runtime's, after the head's breakpoint.
    /// A rewrite of the client's prompt or a compaction replaces it (see
    /// [`HeadPads::first_message`]).
    pub(super) first_message: Option<Block>,
}

impl HeadPads {
    /// The pads that bring `request` (an agent's first) to `recorded`'s size, its
    /// own blocks counted by `estimator` as the cache will count them.
    pub(super) fn sized_for(
        request: &ModelRequest,
        recorded: &RecordedPrompt,
        estimator: &dyn TokenEstimator,
    ) -> Self {
        let prompt = Prompt::from_model_request(request);
        let tokens = |blocks: &[Block]| -> u64 {
            blocks
                .iter()
                .map(|b| estimator.estimate_tokens(b.bytes()))
                .sum()
        };
        let (head, messages) = prompt.blocks().split_at(prompt.messages_start());
        let (head_tokens, messages_tokens) = (tokens(head), tokens(messages));
        let cached_before = recorded.cached_before_tokens.saturating_sub(head_tokens);
        let head_cached = if recorded.cached_before_tokens > 0 {
            head_tokens + cached_before
        } else {
            head_tokens
        };
        let pad = |what: &str, tokens: u64| {
            (tokens > 0)
                .then(|| Block::system(&format!("[{what}: {tokens} tokens]")).with_tokens(tokens))
        };
        let (rest, first_message) = match recorded.head_tokens {
            Some(head) => (
                head.saturating_sub(head_cached),
                recorded
                    .first_request_tokens
                    .saturating_sub(head.max(head_cached) + messages_tokens),
            ),
            None => (
                recorded
                    .first_request_tokens
                    .saturating_sub(head_cached + messages_tokens),
                0,
            ),
        };
        HeadPads {
            sized: true,
            cached_before: pad(
                "recorded client head, cached before the session",
                cached_before,
            ),
            rest: pad("recorded client prompt beyond the runtime's", rest),
            first_message: recorded
                .head_tokens
                .and_then(|_| Self::first_message(first_message, 0)),
        }
    }

    /// The pad standing for `tokens` of the client's first user message as its
    /// `version`th rewrite left it: each version differs in its bytes, so the
    /// cache reads nothing of a version it has not seen.
    pub(super) fn first_message(tokens: u64, version: u32) -> Option<Block> {
        (tokens > 0).then(|| {
            Block::system(&format!(
                "[recorded client first message, version {version}: {tokens} tokens]"
            ))
            .with_tokens(tokens)
        })
    }

    /// The pad blocks, in prefix order.
    pub(super) fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.cached_before
            .iter()
            .chain(self.rest.iter())
            .chain(self.first_message.iter())
    }
}

/// What an agent's script recorded about its prompts.
#[derive(Debug, Default)]
pub(super) struct RecordedShape {
    /// The size of the agent's recorded first request.
    pub(super) prompt: Option<RecordedPrompt>,
    /// `send_delays_ms[step]`: how long the recording held the request of that
    /// step before sending it.
    pub(super) send_delays_ms: Vec<u64>,
    /// `results[step][index]`: the recorded result of the scripted call `index` of
    /// the turn played as step `step`.
    results: Vec<Vec<Option<Arc<str>>>>,
    /// With a known client head: the steps before whose request the client
    /// rewrote its prompt or compacted, and the prompt tokens that request
    /// recorded, which the first message's pad is sized to there.
    pub(super) resyncs: BTreeMap<usize, u64>,
}

impl RecordedShape {
    /// What `script` recorded; `None` when nothing.
    pub(super) fn of(script: &AgentScript) -> Option<Self> {
        let results: Vec<Vec<Option<Arc<str>>>> = script
            .turns
            .iter()
            .map(|turn| {
                turn.tool_calls
                    .iter()
                    .map(|call| call.result.as_deref().map(Arc::from))
                    .collect()
            })
            .collect();
        let send_delays_ms: Vec<u64> = script.turns.iter().map(|t| t.send_delay_ms).collect();
        let any_result = results.iter().flatten().any(Option::is_some);
        let any_delay = send_delays_ms.iter().any(|&ms| ms > 0);
        let head_known = script
            .recorded_prompt
            .is_some_and(|prompt| prompt.head_tokens.is_some());
        let resyncs = script
            .turns
            .iter()
            .enumerate()
            .filter(|_| head_known)
            .filter(|(_, turn)| turn.prompt_rewritten || turn.compact_before.is_some())
            .filter_map(|(step, turn)| {
                let usage = turn.usage?;
                let tokens = usage.input_tokens
                    + usage.cache_read_input_tokens
                    + usage.cache_creation_input_tokens;
                Some((step, tokens))
            })
            .collect();
        (script.recorded_prompt.is_some() || any_result || any_delay).then_some(RecordedShape {
            prompt: script.recorded_prompt,
            send_delays_ms,
            results,
            resyncs,
        })
    }

    /// `message` with the recorded results of its tool results, when any differ.
    pub(super) fn message(&self, message: &Message) -> Option<Message> {
        let mut replaced: Option<Message> = None;
        for (position, block) in message.content.iter().enumerate() {
            let ContentBlock::ToolResult { tool_use_id, .. } = block else {
                continue;
            };
            let recorded = scripted_tool_use_position(tool_use_id)
                .and_then(|(step, index)| self.results.get(step)?.get(index)?.clone());
            let Some(recorded) = recorded else {
                continue;
            };
            let copy = replaced.get_or_insert_with(|| message.clone());
            if let ContentBlock::ToolResult { content, .. } = &mut copy.content[position] {
                *content = recorded.to_string();
            }
        }
        replaced
    }
}

/// Whose recorded results the messages of one request carry: a fork's history
/// before its directive message is its parent's, and the directive message's
/// placeholder results are nobody's.
pub(super) struct Owners<'a> {
    /// The agent's own.
    pub(super) own: Option<&'a RecordedShape>,
    /// For a fork, its parent's.
    pub(super) parent: Option<&'a RecordedShape>,
    /// For a fork, the messages up to and including its directive message; else 0.
    pub(super) fork_messages: usize,
}

impl Owners<'_> {
    /// Message `index` of the request as billed.
    pub(super) fn billed<'m>(&self, index: usize, message: &'m Message) -> Cow<'m, Message> {
        let shape = match (index + 1).cmp(&self.fork_messages) {
            std::cmp::Ordering::Less => self.parent,
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => self.own,
        };
        match shape.and_then(|shape| shape.message(message)) {
            Some(replaced) => Cow::Owned(replaced),
            None => Cow::Borrowed(message),
        }
    }
}

/// An agent's head, as [`warm_up`] writes it.
pub(super) struct WarmHead<'a> {
    /// The agent's label.
    pub(super) label: &'a str,
    /// Its prompt, head built (the runtime's tools and system blocks, then its pads).
    pub(super) prompt: &'a Prompt,
    /// Its pads.
    pub(super) pads: &'a HeadPads,
    /// The model its request names.
    pub(super) model: &'a str,
    /// When its first request is sent.
    pub(super) sent_at: Duration,
    /// The TTL of the write.
    pub(super) ttl: CacheTtl,
}

/// Writes the part of an agent's head the recording found cached at its
/// first request (the runtime's head and the `cached_before` pad), as an earlier
/// session of the recorded client would have, readable from `sent_at`. What the
/// write costs is not billed: the session did not pay it.
pub(super) fn warm_up(cache: &mut PromptCache, head: WarmHead<'_>) {
    let WarmHead {
        label,
        prompt,
        pads,
        model,
        sent_at,
        ttl,
    } = head;
    let runtime_head = prompt.messages_start()
        - usize::from(pads.cached_before.is_some())
        - usize::from(pads.rest.is_some())
        - usize::from(pads.first_message.is_some());
    let warm_len = runtime_head + usize::from(pads.cached_before.is_some());
    if warm_len == 0 {
        return;
    }
    let mut warm = Prompt::new();
    for block in &prompt.blocks()[..warm_len] {
        warm.push(block.clone())
            .expect("a prompt's own head is in prefix order");
    }
    warm.clear_cache_control();
    warm.set_cache_control(warm_len - 1, Some(ttl))
        .expect("the warmed head's last block is inside it");
    let request = Request::new(ORGANIZATION, model, sent_at)
        .conversation(format!("{label}\u{0}warm"))
        .first_token_after(Duration::ZERO);
    cache
        .send(&request, &mut warm)
        .expect("a head with one breakpoint, sent in time order, is a valid request");
}
