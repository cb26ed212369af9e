//! The simulated prompt cache: entries per organization and model, lookups with
//! lookback, TTLs, delayed visibility and mixed-TTL billing.

use crate::label_map::LabelMap;
use coord_runtime::world::{CacheCreation, CacheTtl, ThinkingConfig, Usage};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use super::conversation::Conversation;
use super::entry::{longer_ttl, Entry, EntryKey};
use super::{
    BytesPerToken, CacheError, CacheOutcome, CacheRules, CacheWrite, Prompt, Request,
    TokenEstimator,
};

/// A simulated Anthropic prompt cache.
///
/// Pure and deterministic: no clock, no I/O, no randomness. Feed it requests in the
/// order they reach the API (non-decreasing `sent_at`); each
/// [`send`](Self::send) returns the request's `usage` and any cache break.
///
/// Cost per request: hashing the blocks added since the prompt's previous send,
/// plus at most `breakpoints_max × (lookback_blocks + 1)` map probes, plus a binary
/// search and the changed tail for the conversation record.
#[derive(Debug)]
pub struct PromptCache {
    rules: CacheRules,
    estimator: Box<dyn TokenEstimator>,
    /// By key, never iterated in order: a hash map finds an entry in one probe of
    /// its table where an ordered map of a whale run's million entries walks six
    /// cold nodes, several times a request. The hasher's seed is fixed.
    entries: HashMap<EntryKey, Entry, foldhash::fast::FixedState>,
    conversations: LabelMap<String, Conversation>,
    /// The last model sent and its minimum cacheable prefix: a run sends one or two
    /// models, and finding a model's minimum tries every rule's pattern on its name.
    last_minimum_tokens: Option<(String, u64)>,
}

impl Default for PromptCache {
    fn default() -> Self {
        Self::new()
    }
}

impl PromptCache {
    /// A cache with the documented rules and the four-bytes-a-token estimator.
    pub fn new() -> Self {
        Self::with_rules(CacheRules::documented())
    }

    /// A cache applying `rules`, with the four-bytes-a-token estimator.
    pub fn with_rules(rules: CacheRules) -> Self {
        Self {
            rules,
            estimator: Box::new(BytesPerToken::FOUR),
            entries: HashMap::default(),
            conversations: LabelMap::default(),
            last_minimum_tokens: None,
        }
    }

    /// The same cache counting tokens with `estimator`.
    pub fn with_estimator(mut self, estimator: impl TokenEstimator + 'static) -> Self {
        self.estimator = Box::new(estimator);
        self
    }

    /// The rules in force.
    pub fn rules(&self) -> &CacheRules {
        &self.rules
    }

    /// Entries held, live or expired but not yet purged.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Drops entries expired by `now`; returns how many.
    pub fn purge_expired(&mut self, now: Duration) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, entry| !entry.expired(now));
        before - self.entries.len()
    }

    /// Starts conversation `child` as a copy of `parent`'s last request, so a fork's
    /// first request is checked against its parent's prefix. Returns false (and
    /// does nothing) when `parent` has sent nothing.
    pub fn fork_conversation(&mut self, parent: &str, child: &str) -> bool {
        match self.conversations.get(parent) {
            Some(state) => {
                let state = state.clone();
                self.conversations.insert(child.to_owned(), state);
                true
            }
            None => false,
        }
    }

    /// [`CacheRules::minimum_tokens`] of `model`, remembered for the next request.
    fn minimum_tokens(&mut self, model: &str) -> u64 {
        match &self.last_minimum_tokens {
            Some((last_model, tokens)) if last_model == model => *tokens,
            _ => {
                let tokens = self.rules.minimum_tokens(model);
                self.last_minimum_tokens = Some((model.to_owned(), tokens));
                tokens
            }
        }
    }

    /// Simulates one request: reads the longest live, readable cached prefix, writes
    /// entries at its breakpoints past that prefix, and returns the `usage` and any
    /// cache break.
    pub fn send(
        &mut self,
        request: &Request,
        prompt: &mut Prompt,
    ) -> Result<CacheOutcome, CacheError> {
        self.validate(request, prompt)?;
        prompt.measure(self.estimator.as_ref());
        let namespaces = Namespaces::of(request);
        let minimum_tokens = self.minimum_tokens(&request.model);
        // Breakpoints whose prefix is too short are never written, so no entry can
        // exist at or before them: they take no part in lookup or billing.
        let eligible: Vec<(usize, CacheTtl)> = prompt
            .breakpoints()
            .map(|index| (index + 1, prompt.blocks()[index].cache_control()))
            .filter(|&(len_blocks, _)| prompt.prefix_tokens(len_blocks) >= minimum_tokens)
            .map(|(len_blocks, ttl)| (len_blocks, ttl.expect("breakpoint without ttl")))
            .collect();

        let read_blocks = self.longest_readable(request, prompt, &namespaces, &eligible);
        self.refresh_hits(request, prompt, &namespaces, &eligible, read_blocks);
        let writes = self.write(request, prompt, &namespaces, &eligible, read_blocks);

        let prompt_tokens = prompt.prefix_tokens(prompt.len());
        let read_tokens = prompt.prefix_tokens(read_blocks);
        // Mixed-TTL billing: read up to the highest hit (A), 1h writes up to the last
        // 1h breakpoint past it (B), 5m writes from there to the last breakpoint (C).
        let last_1h_tokens = writes
            .iter()
            .filter(|write| write.ttl == CacheTtl::OneHour)
            .map(|write| write.prefix_tokens)
            .max()
            .unwrap_or(read_tokens);
        let last_tokens = writes
            .last()
            .map_or(read_tokens, |write| write.prefix_tokens);
        assert!(
            read_tokens <= last_1h_tokens,
            "1h writes end before the read"
        );
        assert!(
            last_1h_tokens <= last_tokens,
            "a 5m write precedes a 1h write"
        );
        assert!(last_tokens <= prompt_tokens, "cached more than the prompt");
        let cache_creation = CacheCreation {
            ephemeral_1h_input_tokens: last_1h_tokens - read_tokens,
            ephemeral_5m_input_tokens: last_tokens - last_1h_tokens,
        };
        let usage = Usage {
            input_tokens: prompt_tokens - last_tokens,
            cache_creation_input_tokens: last_tokens - read_tokens,
            cache_read_input_tokens: read_tokens,
            cache_creation,
            output_tokens: request.output_tokens,
        };
        assert_eq!(
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens,
            prompt_tokens
        );

        let cached_blocks = writes
            .last()
            .map_or(read_blocks, |write| write.prefix_blocks);
        let cache_break = self.track_conversation(request, prompt, read_blocks, cached_blocks);
        Ok(CacheOutcome {
            usage,
            prompt_tokens,
            read_blocks,
            writes,
            cache_break,
        })
    }

    fn validate(&self, request: &Request, prompt: &Prompt) -> Result<(), CacheError> {
        if request.response_started_at < request.sent_at {
            return Err(CacheError::ResponseBeforeSend {
                sent_at: request.sent_at,
                response_started_at: request.response_started_at,
            });
        }
        let count = prompt.breakpoints().count();
        if count > self.rules.breakpoints_max {
            return Err(CacheError::TooManyBreakpoints {
                count,
                max: self.rules.breakpoints_max,
            });
        }
        let mut first_5m = None;
        for index in prompt.breakpoints() {
            match prompt.blocks()[index].cache_control() {
                Some(CacheTtl::FiveMinutes) => {
                    first_5m.get_or_insert(index);
                }
                Some(CacheTtl::OneHour) => {
                    if let Some(five_minute_index) = first_5m {
                        return Err(CacheError::TtlOrder {
                            index,
                            five_minute_index,
                        });
                    }
                }
                None => unreachable!("breakpoint set holds a block without cache_control"),
            }
        }
        Ok(())
    }

    /// The longest prefix, in blocks, that a breakpoint or one of the
    /// `lookback_blocks` boundaries before it finds live and readable.
    fn longest_readable(
        &self,
        request: &Request,
        prompt: &Prompt,
        namespaces: &Namespaces,
        eligible: &[(usize, CacheTtl)],
    ) -> usize {
        let mut best = 0;
        // Later breakpoints reach further, so walk them last-first and stop once no
        // remaining window can beat what was found.
        for &(breakpoint_blocks, _) in eligible.iter().rev() {
            if breakpoint_blocks <= best {
                break;
            }
            let lowest = breakpoint_blocks
                .saturating_sub(self.rules.lookback_blocks)
                .max(best + 1)
                .max(1);
            for len_blocks in (lowest..=breakpoint_blocks).rev() {
                let key = namespaces.key(prompt, len_blocks);
                if self
                    .entries
                    .get(&key)
                    .is_some_and(|entry| entry.readable(request.sent_at))
                {
                    best = len_blocks;
                    break;
                }
            }
        }
        best
    }

    /// Refreshes the TTL of the entry read and of every entry at this request's
    /// breakpoints within the read prefix: the request used each of them.
    fn refresh_hits(
        &mut self,
        request: &Request,
        prompt: &Prompt,
        namespaces: &Namespaces,
        eligible: &[(usize, CacheTtl)],
        read_blocks: usize,
    ) {
        if read_blocks == 0 {
            return;
        }
        let used = eligible
            .iter()
            .map(|&(len_blocks, _)| len_blocks)
            .filter(|&len_blocks| len_blocks < read_blocks)
            .chain(std::iter::once(read_blocks));
        for len_blocks in used {
            let key = namespaces.key(prompt, len_blocks);
            if let Some(entry) = self.entries.get_mut(&key) {
                if entry.readable(request.sent_at) {
                    let refreshed = request.sent_at + self.rules.ttl(entry.ttl);
                    entry.expires_at = entry.expires_at.max(refreshed);
                }
            }
        }
    }

    /// Writes an entry at every eligible breakpoint past the read prefix, readable
    /// from the moment the response starts.
    fn write(
        &mut self,
        request: &Request,
        prompt: &Prompt,
        namespaces: &Namespaces,
        eligible: &[(usize, CacheTtl)],
        read_blocks: usize,
    ) -> Vec<CacheWrite> {
        let mut writes = Vec::new();
        for &(len_blocks, ttl) in eligible {
            if len_blocks <= read_blocks {
                continue;
            }
            let key = namespaces.key(prompt, len_blocks);
            let prefix_tokens = prompt.prefix_tokens(len_blocks);
            let expires_at = request.response_started_at + self.rules.ttl(ttl);
            let fresh = Entry {
                ttl,
                readable_at: request.response_started_at,
                expires_at,
            };
            self.entries
                .entry(key)
                .and_modify(|entry| {
                    if entry.expired(request.sent_at) {
                        *entry = fresh;
                    } else {
                        // Another request wrote the same prefix and it is not yet
                        // readable (or this one could not see it): the entry becomes
                        // readable when the first writer's response starts.
                        entry.readable_at = entry.readable_at.min(fresh.readable_at);
                        entry.expires_at = entry.expires_at.max(expires_at);
                        entry.ttl = longer_ttl(entry.ttl, ttl);
                    }
                })
                .or_insert(fresh);
            writes.push(CacheWrite {
                prefix_blocks: len_blocks,
                prefix_tokens,
                ttl,
            });
        }
        writes
    }

    fn track_conversation(
        &mut self,
        request: &Request,
        prompt: &Prompt,
        read_blocks: usize,
        cached_blocks: usize,
    ) -> Option<super::CacheBreak> {
        let name = request.conversation.as_ref()?;
        match self.conversations.get_mut(name) {
            Some(conversation) => {
                let cache_break = conversation.find_break(request, prompt, read_blocks);
                conversation.update(request, prompt, cached_blocks);
                cache_break
            }
            None => {
                let conversation = Conversation::new(request, prompt, cached_blocks);
                self.conversations.insert(name.clone(), conversation);
                None
            }
        }
    }
}

/// The part of the thinking settings the cache keys on: absent and disabled are the
/// same request to the model.
pub(super) fn thinking_budget_tokens(thinking: Option<ThinkingConfig>) -> Option<u32> {
    match thinking {
        None | Some(ThinkingConfig::Disabled) => None,
        Some(ThinkingConfig::Enabled { budget_tokens }) => Some(budget_tokens),
    }
}

/// The two namespaces of one request: prefixes inside tools and system are keyed by
/// organization and model; prefixes reaching into the messages also by thinking.
struct Namespaces {
    base: u64,
    with_thinking: u64,
}

impl Namespaces {
    fn of(request: &Request) -> Self {
        let mut hasher = DefaultHasher::new();
        request.organization.hash(&mut hasher);
        request.model.hash(&mut hasher);
        let base = hasher.finish();
        thinking_budget_tokens(request.thinking).hash(&mut hasher);
        Self {
            base,
            with_thinking: hasher.finish(),
        }
    }

    fn key(&self, prompt: &Prompt, len_blocks: usize) -> EntryKey {
        let namespace = if len_blocks > prompt.messages_start() {
            self.with_thinking
        } else {
            self.base
        };
        EntryKey {
            namespace,
            prefix_blocks: len_blocks,
            prefix_hash: prompt.prefix_hash(len_blocks),
        }
    }
}
