//! The cost model of a run: every model request the runtime makes goes through one
//! simulated prompt cache, which gives the response its `usage` block and reports
//! cache breaks.
//!
//! The runtime sends no `cache_control` markers of its own, so the meter places them
//! the way a caching client does: one on the last tool or system block (the stable
//! head), one on the last block of the request (the conversation so far), and for a
//! fork one on the last block its siblings share (the parent's history, its
//! assistant message and the identical placeholder results, before the directive).
//! A request that carries markers keeps its own. All take the scenario's TTL.
//!
//! Each agent keeps one [`Prompt`], extended by the messages added since its last
//! request, so metering costs O(new bytes) per call. Earlier messages are assumed
//! unchanged when their block counts and the last one's bytes are: the runtime only
//! appends to a conversation; a changed head (tools, system) rebuilds the prompt.
//!
//! Tokens are counted by the cache's [`BytesPerToken`] estimator at the scenario's
//! `[economics] bytes_per_token` (four bytes a token unless set; `coordsim import`
//! calibrates it to the recording; see `docs/prompt-cache.md` for its known error).
//! Usage a
//! script recorded wins over the estimate; the cache is still fed, so its state and
//! its break reports stay complete, and its prediction goes into the trace beside
//! the recorded usage (`predicted_usage`), for `coordsim replay --fidelity`.
//!
//! A script imported from a recorded session can make the billed prompts the
//! recording's size and pace, which the runtime's are not
//! ([`CostMeter::with_recorded_scripts`]): its `recorded_prompt` pads the agent's
//! head, the recorded `result` of a scripted tool call is billed in place of the
//! runtime's result, and a turn's `send_delay_ms` holds its request as long as the
//! recording did. None of it reaches the runtime or the model: only what the meter
//! bills, and when, changes.

mod recorded;

use crate::label_map::LabelMap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::{CacheTtl, Message, ModelRequest, Usage};

use super::RequestHead;
use crate::cache::{
    Block, BreakCause, BytesPerToken, Prompt, PromptCache, Request, Section, TokenEstimator,
};
use crate::cost::PriceTable;
use crate::fault::COORDINATOR_LABEL;
use crate::model::AgentScript;
use crate::scenario::{Economics, SystemEdit};
use crate::trace::{CacheBreakSeen, SimEvent};
use recorded::{warm_up, HeadPads, Owners, RecordedShape, WarmHead};

/// The organization every simulated request is billed to: one cache for the run.
const ORGANIZATION: &str = "sim";

/// What the meter knows of one agent's conversation.
#[derive(Debug, Default)]
struct Conversation {
    prompt: Prompt,
    /// Digest of the tools and system blocks the prompt was built from.
    head_digest: u64,
    /// Per message converted: its first block.
    messages: Vec<usize>,
    /// The last message converted, as the request had it: the one a runtime would
    /// still be adding to, so the next request's copy is compared with it.
    last_message: Option<Message>,
    /// Breakpoints the meter placed on the last request, cleared before the next.
    placed: Vec<usize>,
    /// The tools and system blocks `head_digest` was taken of: a request that
    /// repeats them (nearly every one) is compared, not serialized again.
    head: Option<RequestHead>,
    /// Blocks standing for a recorded client's larger head, after the runtime's
    /// system blocks on every request (see [`HeadPads`]).
    pads: HeadPads,
    /// The boot ([`CostMeter::begin_boot`]) of the last request converted.
    boot: u64,
    /// The script step whose request last resized the first message's pad (a
    /// recorded rewrite or compaction), and how many times it was resized.
    resynced_step: Option<usize>,
    first_message_version: u32,
    /// Per message (by index): a pad after it standing for what the recorded
    /// client's request held beyond the replayed one when that message was new
    /// (reminders and attachments its transcript does not show), so that the
    /// request billed its recorded size. Kept with the message from then on.
    message_pads: BTreeMap<usize, Block>,
    /// The bytes a token the agent's own messages are counted at, when its
    /// script recorded a ratio of its own (`RecordedPrompt::bytes_per_token`):
    /// their blocks carry the count, which the cache then takes.
    own_ratio: Option<BytesPerToken>,
}

/// Where a fork's request came from, as the tap read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkOrigin {
    /// The label of the conversation it copied.
    pub parent: String,
    /// Messages of the request before the fork's own turns.
    pub messages_len: usize,
}

/// The simulated cache of one run and the conversations feeding it.
#[derive(Debug)]
pub struct CostMeter {
    cache: PromptCache,
    conversations: LabelMap<String, Conversation>,
    ttl: CacheTtl,
    stagger: Duration,
    edit: Option<SystemEdit>,
    /// Sibling forks already sent, per parent and fork point: the next one's place
    /// in the stagger.
    forks_sent: BTreeMap<(String, usize), u32>,
    /// The boot of the coordinator host the requests come from: within one boot a
    /// conversation only grows, so only its first request after a boot is compared
    /// message by message with what was converted. 0 until a boot begins.
    boot: u64,
    /// Whether agents may fork. Then the cache's record of every request is kept
    /// under [`snapshot_name`]: a fork is built from one parent request, and by the
    /// time it is sent (staggered, or after the parent's next turn) the parent's
    /// latest record may be a later request.
    forks_possible: bool,
    /// What the scripts recorded, by agent label.
    recorded: LabelMap<String, RecordedShape>,
    /// The cache's token estimator, which also sizes a recorded head's pads: the
    /// pads make up the difference between the recorded first request and the
    /// runtime's head as the cache counts it.
    estimator: BytesPerToken,
    /// The script step each agent's request in flight asks for ([`Self::send_delay`]
    /// learns it, [`Self::bill`] uses it); `None` for a compaction request.
    steps: LabelMap<String, Option<usize>>,
}

/// How many tokens the recorded request held beyond what `prompt` counts: the
/// recording's whole prompt (uncached, read and written) less the replay's.
fn tokens_beyond(usage: &Usage, prompt: &Prompt, estimator: &BytesPerToken) -> u64 {
    let recorded_tokens =
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    recorded_tokens.saturating_sub(prompt_tokens(prompt, estimator))
}

/// The tokens of `prompt` as the cache counts them: a pad's pinned count, else
/// `estimator`'s.
fn prompt_tokens(prompt: &Prompt, estimator: &BytesPerToken) -> u64 {
    prompt
        .blocks()
        .iter()
        .map(|block| {
            block
                .recorded_tokens()
                .unwrap_or_else(|| estimator.estimate_tokens(block.bytes()))
        })
        .sum()
}

/// The cache conversation holding `label`'s record as of its request with
/// `messages_len` messages.
fn snapshot_name(label: &str, messages_len: usize) -> String {
    format!("{label}\u{0}{messages_len}")
}

/// The built-in prices, parsed once per process.
pub fn built_in_prices() -> &'static PriceTable {
    static PRICES: OnceLock<PriceTable> = OnceLock::new();
    PRICES.get_or_init(PriceTable::built_in)
}

/// The cost in micro-dollars of `usage` on `model` at the built-in prices; zero for
/// a model the table does not price.
pub fn cost_micro_usd(model: &str, usage: &Usage) -> u64 {
    let Some(model_prices) = built_in_prices().lookup(model) else {
        return 0;
    };
    let usage = to_cost_usage(usage);
    let rates = model_prices.rates(model_prices.tier(usage.prompt_tokens()));
    // Rounded to the micro-dollar: at most half a micro-dollar per call is lost.
    (rates.cost_usd(&usage) * 1_000_000.0).round() as u64
}

/// The API's usage block as the cost module counts it.
pub fn to_cost_usage(usage: &Usage) -> crate::cost::Usage {
    crate::cost::Usage::from_response(
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_creation.ephemeral_1h_input_tokens,
        usage.cache_read_input_tokens,
    )
}

impl CostMeter {
    /// Marks the start of a boot of the coordinator host: a restarted runtime
    /// rebuilds its conversations from its disk, so the next request of each may
    /// differ from the last one converted anywhere, not only at its end.
    pub fn begin_boot(&mut self) {
        self.boot += 1;
    }

    /// A meter with `economics`'s TTL, stagger, edit and bytes per token;
    /// `forks_possible` when the session may launch forks (not in coordinator mode).
    pub fn new(economics: &Economics, forks_possible: bool) -> Self {
        Self {
            cache: PromptCache::new().with_estimator(economics.bytes_per_token),
            conversations: LabelMap::default(),
            ttl: economics.ttl.cache_ttl(),
            stagger: Duration::from_millis(economics.stagger_ms),
            edit: economics.fork_system_edit.clone(),
            forks_sent: BTreeMap::new(),
            boot: 0,
            forks_possible,
            recorded: LabelMap::default(),
            estimator: economics.bytes_per_token,
            steps: LabelMap::default(),
        }
    }

    /// The meter billing what the scripts recorded: each agent's `recorded_prompt`
    /// and its calls' recorded `result`s. `coordinator` is the main thread's script,
    /// `workers` are found by their prompts, as the trace labels them.
    pub fn with_recorded_scripts<'a>(
        mut self,
        coordinator: &AgentScript,
        workers: impl IntoIterator<Item = &'a AgentScript>,
    ) -> Self {
        let labelled = std::iter::once((COORDINATOR_LABEL.to_owned(), coordinator))
            .chain(workers.into_iter().map(|w| (w.prompt.clone(), w)));
        for (label, script) in labelled {
            if let Some(shape) = RecordedShape::of(script) {
                self.recorded.insert(label, shape);
            }
        }
        self
    }

    /// The scenario's deliberate edit to a fork's system prompt, applied to
    /// `request` when `label` is a fork it names. Returns whether it applied.
    /// The request is copied only then: the runtime keeps its own.
    pub fn edit_fork_request(
        &self,
        label: &str,
        fork: Option<&ForkOrigin>,
        request: &mut Arc<ModelRequest>,
    ) -> bool {
        let Some(edit) = &self.edit else {
            return false;
        };
        if fork.is_none() || !crate::model::wildcard_match(&edit.fork, label) {
            return false;
        }
        let system = Arc::make_mut(&mut Arc::make_mut(request).system);
        match system.first_mut() {
            Some(block) => block.text.push_str(&edit.append),
            None => system.push(coord_runtime::world::SystemBlock::text(&edit.append)),
        }
        true
    }

    /// How long the client holds `label`'s request before sending it: the
    /// recorded hold of the scripted turn it asks for, its `step`
    /// (`send_delay_ms`; none for a compaction request, `step` `None`), and for a
    /// fork's first request one stagger per sibling sent before it. The step is the
    /// model's count, not the request's: a compacted conversation's request holds
    /// none of the steps before the compaction.
    pub fn send_delay(
        &mut self,
        label: &str,
        fork: Option<&ForkOrigin>,
        step: Option<usize>,
    ) -> Duration {
        if self.recorded.contains_key(label) {
            self.steps.insert(label.to_owned(), step);
        }
        let held = match (self.recorded.get(label), step) {
            (Some(shape), Some(step)) => {
                let ms = shape.send_delays_ms.get(step).copied().unwrap_or(0);
                Duration::from_millis(ms)
            }
            _ => Duration::ZERO,
        };
        held + self.stagger(label, fork)
    }

    /// A fork's first request waits one stagger per sibling sent before it.
    fn stagger(&mut self, label: &str, fork: Option<&ForkOrigin>) -> Duration {
        let Some(fork) = fork else {
            return Duration::ZERO;
        };
        if self.stagger.is_zero() || self.conversations.contains_key(label) {
            return Duration::ZERO;
        }
        let sent = self
            .forks_sent
            .entry((fork.parent.clone(), fork.messages_len))
            .or_default();
        let delay = self.stagger * *sent;
        *sent += 1;
        delay
    }

    /// Sends `request` of `label`'s call `call` through the cache at `sent_at`, its
    /// first token `latency` later, and returns the simulated usage and the trace
    /// event (with `recorded` usage instead, when the script recorded some).
    #[allow(clippy::too_many_arguments)]
    pub fn bill(
        &mut self,
        label: &str,
        call: u32,
        fork: Option<&ForkOrigin>,
        request: &ModelRequest,
        sent_at: Duration,
        latency: Duration,
        recorded: Option<Usage>,
        output_tokens: u64,
    ) -> (Usage, SimEvent) {
        if let Some(fork) = fork {
            if !self.conversations.contains_key(label) {
                // The fork's first request is judged against the parent request it
                // was built from: the parent's history is the fork's messages but
                // the parent's assistant message and the directive message.
                let base = snapshot_name(&fork.parent, fork.messages_len.saturating_sub(2));
                if !self.cache.fork_conversation(&base, label) {
                    self.cache.fork_conversation(&fork.parent, label);
                }
            }
        }
        let ttl = self.ttl;
        let estimator = self.estimator;
        let parent_pads = fork
            .and_then(|fork| self.conversations.get(&fork.parent))
            .map(|parent| parent.pads.clone());
        let owners = Owners {
            own: self.recorded.get(label),
            parent: fork.and_then(|fork| self.recorded.get(&fork.parent)),
            fork_messages: fork.map_or(0, |fork| fork.messages_len),
        };
        let recorded_prompt = owners.own.and_then(|own| own.prompt);
        let boot = self.boot;
        let conversation = self.conversations.entry(label.to_owned()).or_default();
        let mut warm_head = false;
        if !conversation.pads.sized {
            conversation.own_ratio = recorded_prompt.and_then(|prompt| prompt.bytes_per_token);
            // A fork's head is its parent's, pads included.
            conversation.pads = match (parent_pads, recorded_prompt) {
                (Some(pads), _) => pads,
                (None, Some(recorded)) => {
                    warm_head = recorded.cached_before_tokens > 0;
                    HeadPads::sized_for(request, &recorded, &estimator)
                }
                (None, None) => HeadPads {
                    sized: true,
                    ..HeadPads::default()
                },
            };
        }
        let step = self.steps.get(label).copied().flatten();
        let compaction_request = matches!(self.steps.get(label), Some(None));
        let recorded_shape = owners.own.is_some_and(|own| own.prompt.is_some());
        let head_known = owners
            .own
            .and_then(|own| own.prompt)
            .is_some_and(|prompt| prompt.head_tokens.is_some());
        let resync_tokens = step
            .filter(|&step| conversation.resynced_step != Some(step))
            .and_then(|step| owners.own?.resyncs.get(&step).copied());
        if let Some(recorded_tokens) = resync_tokens {
            // The client rewrote its first message (or compacted) here: the pad
            // becomes a new version, sized so that the request is the recorded size.
            conversation.resynced_step = step;
            conversation.first_message_version += 1;
            conversation.pads.first_message = None;
            conversation.prompt = Prompt::new();
            conversation.sync(request, &owners, boot);
            let tokens = prompt_tokens(&conversation.prompt, &estimator);
            conversation.pads.first_message = HeadPads::first_message(
                recorded_tokens.saturating_sub(tokens),
                conversation.first_message_version,
            );
            conversation.prompt = Prompt::new();
        }
        conversation.sync(request, &owners, boot);
        let message_index = request.messages.len().checked_sub(1);
        let padded = message_index.is_some_and(|i| conversation.message_pads.contains_key(&i));
        if let (Some(index), Some(usage), Some(_), false) = (
            message_index,
            recorded,
            step.filter(|_| recorded_shape),
            padded,
        ) {
            // What the recorded request held beyond the replayed one came with
            // its newest message: billed there, and kept in the prompt after it.
            let beyond = tokens_beyond(&usage, &conversation.prompt, &estimator);
            if beyond > 0 {
                let pad = Block::user(&format!(
                    "[recorded client content beyond its transcript: {beyond} tokens]"
                ))
                .with_tokens(beyond);
                conversation
                    .prompt
                    .push(pad.clone())
                    .expect("a message block goes after the messages");
                conversation.message_pads.insert(index, pad);
            }
        }
        if let (true, Some(usage)) = (compaction_request && head_known, recorded) {
            // The recorded client's compaction instruction is longer than the
            // runtime's: the difference is billed after it, so that the request is
            // the recorded size. The next request, compacted, drops it.
            let beyond = tokens_beyond(&usage, &conversation.prompt, &estimator);
            if beyond > 0 {
                conversation
                    .prompt
                    .push(
                        Block::user(&format!(
                            "[recorded compaction instruction beyond the runtime's: {beyond} tokens]"
                        ))
                        .with_tokens(beyond),
                    )
                    .expect("a message block goes after the messages");
                // The pad is no message of the conversation: the next request
                // converts its messages again.
                conversation.last_message = None;
            }
        }
        if warm_head {
            warm_up(
                &mut self.cache,
                WarmHead {
                    label,
                    prompt: &conversation.prompt,
                    pads: &conversation.pads,
                    model: &request.model,
                    sent_at,
                    ttl,
                },
            );
        }
        conversation.place_breakpoints(request, fork, ttl);
        let cache_request = Request::from_model_request(ORGANIZATION, request, sent_at)
            .conversation(label)
            .first_token_after(latency)
            .output_tokens(output_tokens);
        let outcome = self
            .cache
            .send(&cache_request, &mut conversation.prompt)
            .expect("the meter's prompts are in prefix order with at most four breakpoints");
        if self.forks_possible {
            let snapshot = snapshot_name(label, request.messages.len());
            self.cache.fork_conversation(label, &snapshot);
        }
        let usage = recorded.unwrap_or(outcome.usage);
        let cache_break = outcome.cache_break.map(|found| {
            Box::new(CacheBreakSeen {
                block_index: found.block_index as u64,
                section: match found.section {
                    Section::Tools => "tools",
                    Section::System => "system",
                    Section::Messages => "messages",
                }
                .to_owned(),
                byte_offset: found.byte_offset,
                cause: match found.cause {
                    BreakCause::Prefix => "prefix",
                    BreakCause::Model => "model",
                    BreakCause::Organization => "organization",
                    BreakCause::Thinking => "thinking",
                }
                .to_owned(),
                expected_read_tokens: found.expected_read_tokens,
            })
        });
        let event = SimEvent::ModelBilled {
            agent: label.into(),
            call,
            model: request.model.clone().into(),
            usage: Box::new(usage),
            usage_recorded: recorded.is_some(),
            predicted_usage: recorded.is_some().then(|| Box::new(outcome.usage)),
            cost_micro_usd: cost_micro_usd(&request.model, &usage),
            cache_break,
        };
        (outcome.usage, event)
    }
}

/// The prompt of `request`'s tools and system blocks, and the FNV-1a of their
/// bytes as the cache compares them: converted once per process for each distinct
/// head, and copied for every conversation that starts with it.
fn head_prompt_of(request: &ModelRequest) -> (Prompt, u64) {
    let head_only = ModelRequest {
        model: request.model.clone(),
        max_tokens: request.max_tokens,
        tools: request.tools.clone(),
        system: request.system.clone(),
        messages: Vec::new(),
        thinking: request.thinking,
    };
    let mut converted = CONVERTED_HEADS.lock().expect("converted heads poisoned");
    if let Some(index) = converted.iter().position(|(head, ..)| *head == head_only) {
        // Most recently used last, so the least recently used goes first.
        let entry = converted.remove(index);
        let found = (entry.1.clone(), entry.2);
        converted.push(entry);
        return found;
    }
    let (prompt, digest) = convert_head(&head_only);
    if converted.len() == CONVERTED_HEADS_MAX {
        converted.remove(0);
    }
    converted.push((head_only, prompt.clone(), digest));
    (prompt, digest)
}

/// Heads converted by any run of this process, each with everything its conversion
/// reads (a request without messages), least recently used first. Every seed of a
/// scenario sends the same heads, and converting one serializes every tool
/// definition: a sweep converts each once.
static CONVERTED_HEADS: Mutex<Vec<(ModelRequest, Prompt, u64)>> = Mutex::new(Vec::new());

/// How many heads [`CONVERTED_HEADS`] keeps: a few per scenario, for the scenarios
/// two sweep threads run at once.
const CONVERTED_HEADS_MAX: usize = 64;

/// A head's prompt and its digest.
fn convert_head(head_only: &ModelRequest) -> (Prompt, u64) {
    let prompt = Prompt::from_model_request(head_only);
    let mut hasher = Fnv1a64::new();
    for block in prompt.blocks() {
        hasher.update(&[matches!(block.section(), Section::Tools) as u8]);
        hasher.update(block.bytes());
        hasher.update(&[0]);
    }
    (prompt, hasher.finish())
}

impl Conversation {
    /// Brings the prompt up to `request` as billed (recorded results in place of
    /// the runtime's, per `owners`), converting only what changed.
    fn sync(&mut self, request: &ModelRequest, owners: &Owners<'_>, boot: u64) {
        // Within a boot the runtime only appends to a conversation, so comparing
        // every message's block count on every request would make a conversation of
        // n messages cost n² comparisons; the first request after a boot is
        // compared whole.
        // Boot 0 is a meter never told of boots: it compares every request whole.
        let same_boot = std::mem::replace(&mut self.boot, boot) == boot && boot != 0;
        let head_repeated = self.head.as_ref().is_some_and(|head| head.is_of(request));
        let (head, mut head_prompt) = if head_repeated {
            (self.head_digest, None)
        } else {
            self.head = Some(RequestHead::of(request));
            let (prompt, digest) = head_prompt_of(request);
            (digest, Some(prompt))
        };
        let shrunk = request.messages.len() < self.messages.len();
        let recounted = !shrunk
            && !same_boot
            && self.messages.iter().enumerate().any(|(i, &start)| {
                let end = self
                    .messages
                    .get(i + 1)
                    .map_or(self.prompt.len(), |&next| next);
                let pad = usize::from(self.message_pads.contains_key(&i));
                end - start != request.messages[i].content.len() + pad
            });
        if shrunk {
            // A compacted conversation: its messages are others now.
            self.message_pads.clear();
        }
        if head != self.head_digest || self.prompt.is_empty() || shrunk || recounted {
            let tail = request.messages.len();
            self.messages.clear();
            self.last_message = None;
            // The breakpoints placed last time were on the prompt just dropped.
            self.placed.clear();
            self.prompt = head_prompt
                .take()
                .unwrap_or_else(|| head_prompt_of(request).0);
            for pad in self.pads.blocks() {
                self.prompt
                    .push(pad.clone())
                    .expect("pads are system blocks, after the request's own");
            }
            self.head_digest = head;
            self.push_messages(request, 0..tail, owners);
            return;
        }
        // The last converted message is compared whole: it is the one a runtime
        // would still be adding to. (How a message is billed depends only on the
        // message and its place, so equal messages bill equal blocks.)
        if let Some(&start) = self.messages.last() {
            let index = self.messages.len() - 1;
            if self.last_message.as_ref() != Some(&request.messages[index]) {
                self.prompt.truncate(start);
                self.messages.pop();
                // Breakpoints placed on the blocks cut off went with them.
                self.placed.retain(|&placed| placed < start);
            }
        }
        let from = self.messages.len();
        self.push_messages(request, from..request.messages.len(), owners);
    }

    fn push_messages(
        &mut self,
        request: &ModelRequest,
        range: std::ops::Range<usize>,
        owners: &Owners<'_>,
    ) {
        for index in range.clone() {
            let start = self.prompt.len();
            self.messages.push(start);
            self.prompt
                .push_message(&owners.billed(index, &request.messages[index]));
            if let Some(ratio) = self.own_ratio {
                for at in start..self.prompt.len() {
                    let block = &self.prompt.blocks()[at];
                    let counted = block
                        .clone()
                        .with_tokens(ratio.estimate_tokens(block.bytes()));
                    self.prompt
                        .replace(at, counted)
                        .expect("a block replaced by itself, counted");
                }
            }
            if let Some(pad) = self.message_pads.get(&index) {
                self.prompt
                    .push(pad.clone())
                    .expect("a message block goes after the messages");
            }
        }
        if !range.is_empty() {
            self.last_message = request.messages.last().cloned();
        }
    }

    /// Places the client's breakpoints, unless the request brought its own.
    fn place_breakpoints(
        &mut self,
        request: &ModelRequest,
        fork: Option<&ForkOrigin>,
        ttl: CacheTtl,
    ) {
        for index in std::mem::take(&mut self.placed) {
            self.prompt
                .set_cache_control(index, None)
                .expect("a placed breakpoint is inside the prompt");
        }
        if self.prompt.breakpoints().next().is_some() || self.prompt.is_empty() {
            return;
        }
        let mut wanted = Vec::new();
        // The client's head ends before its first message's pad, where a rewrite
        // of that message leaves it readable.
        let first_message = usize::from(self.pads.first_message.is_some());
        if let Some(head_end) = self.prompt.messages_start().checked_sub(1 + first_message) {
            wanted.push(head_end);
        }
        if let Some(fork) = fork {
            // The directive is the last block of the fork's first user message; the
            // block before it is the last one its siblings share.
            let directive_message = fork.messages_len.checked_sub(1);
            if let Some(&start) = directive_message.and_then(|i| self.messages.get(i)) {
                let blocks = request.messages[fork.messages_len - 1].content.len();
                if blocks >= 2 {
                    wanted.push(start + blocks - 2);
                }
            }
        }
        wanted.push(self.prompt.len() - 1);
        wanted.sort_unstable();
        wanted.dedup();
        for index in wanted {
            self.prompt
                .set_cache_control(index, Some(ttl))
                .expect("a wanted breakpoint is inside the prompt");
            self.placed.push(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RecordedPrompt, WAITING_TEXT};
    use coord_runtime::world::{ContentBlock, Role, SystemBlock};

    /// The script steps a request's conversation has taken: its assistant messages
    /// after the first `from` (a fork's parent history), waiting answers excluded, as
    /// the scripted model counts them (until a compaction).
    fn steps_taken(request: &ModelRequest, from: usize) -> usize {
        request
            .messages
            .iter()
            .skip(from)
            .filter(|m| m.role == Role::Assistant)
            .filter(|m| {
                !m.content
                    .iter()
                    .all(|b| matches!(b, ContentBlock::Text { text, .. } if text == WAITING_TEXT))
            })
            .count()
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 1024,
            tools: Arc::default(),
            system: Arc::default(),
            messages,
            thinking: None,
        }
    }

    #[test]
    fn a_head_converted_by_an_earlier_run_is_the_head_converting_it_gives() {
        // Goal: the process-wide memo answers exactly what converting would, for
        // each distinct head, whatever other heads were converted in between.
        let with_system = |text: &str| ModelRequest {
            system: Arc::new(vec![SystemBlock::text(text)]),
            ..request(vec![message(Role::User, &["hello"])])
        };
        let heads = [
            with_system("the lead's rules"),
            with_system("a worker's rules"),
        ];
        for _ in 0..2 {
            for head in &heads {
                let (prompt, digest) = head_prompt_of(head);
                let head_only = ModelRequest {
                    messages: Vec::new(),
                    ..head.clone()
                };
                let (converted, converted_digest) = convert_head(&head_only);
                assert_eq!(digest, converted_digest);
                assert_eq!(prompt.blocks().len(), converted.blocks().len());
                assert!(prompt
                    .blocks()
                    .iter()
                    .zip(converted.blocks())
                    .all(|(a, b)| a.bytes() == b.bytes()));
            }
        }
        assert_ne!(head_prompt_of(&heads[0]).1, head_prompt_of(&heads[1]).1);
    }

    fn message(role: Role, texts: &[&str]) -> Message {
        Message {
            role,
            content: texts.iter().map(|text| ContentBlock::text(*text)).collect(),
        }
    }

    fn script(recorded_prompt: Option<RecordedPrompt>, result: Option<&str>) -> AgentScript {
        use crate::model::{ScriptedToolCall, ScriptedTurn};
        AgentScript {
            prompt: "prompt".to_owned(),
            recorded_prompt,
            turns: vec![
                ScriptedTurn {
                    tool_calls: vec![ScriptedToolCall {
                        result: result.map(str::to_owned),
                        ..ScriptedToolCall::new("Read", serde_json::json!({}))
                    }],
                    ..ScriptedTurn::default()
                },
                ScriptedTurn {
                    send_delay_ms: 7_000,
                    ..ScriptedTurn::default()
                },
            ]
            .into(),
            count: None,
        }
    }

    /// The conversation after the script's first turn: its call and a short result.
    fn after_first_turn() -> ModelRequest {
        request(vec![
            message(Role::User, &["prompt"]),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: crate::model::scripted_tool_use_id(0, 0),
                    name: "Read".to_owned(),
                    input: serde_json::json!({}).into(),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: crate::model::scripted_tool_use_id(0, 0),
                    content: "short".to_owned(),
                    is_error: false,
                    cache_control: None,
                }],
            },
        ])
    }

    fn prompt_tokens(usage: &Usage) -> u64 {
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    }

    #[test]
    fn a_recorded_prompt_pads_the_first_request_and_reads_its_cached_head() {
        // Goal: the first request bills the recorded size, reading the part the
        // recording found cached; the pad stays, so the second request grows only by
        // what the conversation added.
        let recorded = RecordedPrompt {
            first_request_tokens: 20_000,
            cached_before_tokens: 12_000,
            head_tokens: None,
            bytes_per_token: None,
        };
        let mut meter = CostMeter::new(&Economics::default(), false)
            .with_recorded_scripts(&script(Some(recorded), None), []);
        let first = request(vec![message(Role::User, &["prompt"])]);
        let second = Duration::from_secs(1);
        let (usage, event) = meter.bill(
            COORDINATOR_LABEL,
            1,
            None,
            &first,
            Duration::ZERO,
            second,
            None,
            1,
        );
        assert_eq!(prompt_tokens(&usage), 20_000);
        assert_eq!(usage.cache_read_input_tokens, 12_000);
        assert!(matches!(
            event,
            SimEvent::ModelBilled {
                predicted_usage: None,
                ..
            }
        ));
        let (next, _) = meter.bill(
            COORDINATOR_LABEL,
            2,
            None,
            &after_first_turn(),
            second,
            second,
            None,
            1,
        );
        assert_eq!(next.cache_read_input_tokens, 20_000);
        assert!(prompt_tokens(&next) < 20_100, "{next:?}");
    }

    #[test]
    fn a_recorded_result_is_billed_in_place_of_the_runtime_s() {
        // Goal: the 40,000-byte recorded result, not the runtime's five bytes, is
        // what the second request adds (10,000 tokens at four bytes a token), and
        // recorded usage keeps the prediction beside it.
        let recorded_text = "x".repeat(40_000);
        let mut meter = CostMeter::new(&Economics::default(), false)
            .with_recorded_scripts(&script(None, Some(&recorded_text)), []);
        let second = Duration::from_secs(1);
        let first = request(vec![message(Role::User, &["prompt"])]);
        let (before, _) = meter.bill(
            COORDINATOR_LABEL,
            1,
            None,
            &first,
            Duration::ZERO,
            second,
            None,
            1,
        );
        let recorded_usage = Usage {
            input_tokens: 7,
            ..Usage::default()
        };
        let (after, event) = meter.bill(
            COORDINATOR_LABEL,
            2,
            None,
            &after_first_turn(),
            second,
            second,
            Some(recorded_usage),
            1,
        );
        let added = prompt_tokens(&after) - prompt_tokens(&before);
        assert!((10_000..10_100).contains(&added), "{added}");
        let SimEvent::ModelBilled {
            usage,
            predicted_usage,
            ..
        } = event
        else {
            panic!("a billing event");
        };
        assert_eq!(
            (usage, predicted_usage),
            (Box::new(recorded_usage), Some(Box::new(after)))
        );
    }

    #[test]
    fn a_recorded_hold_delays_the_request_of_its_step() {
        // Goal: the second scripted turn's request waits its recorded 7 s; the
        // first's, an agent without a script's, and a compaction's, do not.
        let mut meter = CostMeter::new(&Economics::default(), false)
            .with_recorded_scripts(&script(None, None), []);
        let first = request(vec![message(Role::User, &["prompt"])]);
        assert_eq!(
            meter.send_delay(COORDINATOR_LABEL, None, Some(steps_taken(&first, 0))),
            Duration::ZERO
        );
        assert_eq!(
            meter.send_delay(
                COORDINATOR_LABEL,
                None,
                Some(steps_taken(&after_first_turn(), 0))
            ),
            Duration::from_secs(7)
        );
        assert_eq!(
            meter.send_delay("other", None, Some(steps_taken(&after_first_turn(), 0))),
            Duration::ZERO
        );
        assert_eq!(
            meter.send_delay(COORDINATOR_LABEL, None, None),
            Duration::ZERO
        );
    }

    #[test]
    fn a_last_message_that_shrinks_drops_the_breakpoints_placed_on_it() {
        // Goal: a request whose last message has fewer blocks than the one billed
        // before (a retried turn) bills without a breakpoint left past the end.
        let mut meter = CostMeter::new(&Economics::default(), false);
        let long = request(vec![
            message(Role::User, &["prompt"]),
            message(Role::Assistant, &["a", "b", "c", "d"]),
        ]);
        let short = request(vec![
            message(Role::User, &["prompt"]),
            message(Role::Assistant, &["a"]),
        ]);
        let second = Duration::from_secs(1);
        meter.bill("agent", 1, None, &long, Duration::ZERO, second, None, 1);
        let (usage, _) = meter.bill("agent", 2, None, &short, second, second, None, 1);
        assert!(
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
                > 0
        );
    }
}
