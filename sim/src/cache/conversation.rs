//! A conversation's last request: the prefix it sent and how much of it was cached,
//! kept to explain the next request's misses.

use coord_runtime::world::ThinkingConfig;

use super::simulator::thinking_budget_tokens;
use super::{Block, BreakCause, CacheBreak, Prompt, Request, Section};

/// The last prefix one conversation sent.
///
/// Updating it after a request costs a binary search plus the blocks that changed:
/// the common prefix stays in place and only the new tail is copied (block bytes are
/// shared, not duplicated).
#[derive(Debug, Clone)]
pub(super) struct Conversation {
    organization: String,
    model: String,
    thinking: Option<ThinkingConfig>,
    blocks: Vec<Block>,
    chain: Vec<u64>,
    end_bytes: Vec<u64>,
    end_tokens: Vec<u64>,
    messages_start: usize,
    /// Blocks of the prefix that were in the cache after the request: the longer of
    /// what it read and what it wrote.
    cached_blocks: usize,
}

impl Conversation {
    /// The state after `request` sent `prompt` (already measured) and left
    /// `cached_blocks` of it cached.
    pub(super) fn new(request: &Request, prompt: &Prompt, cached_blocks: usize) -> Self {
        let mut conversation = Self {
            organization: request.organization.clone(),
            model: request.model.clone(),
            thinking: request.thinking,
            blocks: Vec::new(),
            chain: Vec::new(),
            end_bytes: Vec::new(),
            end_tokens: Vec::new(),
            messages_start: 0,
            cached_blocks: 0,
        };
        conversation.update(request, prompt, cached_blocks);
        conversation
    }

    /// Number of leading blocks `prompt` shares byte for byte with the last prefix.
    fn common_blocks(&self, prompt: &Prompt) -> usize {
        let theirs = prompt.chain();
        let len = self.chain.len().min(theirs.len());
        // Chained hashes are equal up to the first differing block and unequal from
        // there on, so equality is a monotone predicate over the index.
        partition_point(len, |i| self.chain[i] == theirs[i])
    }

    /// The break `request` suffered, if it read less than this conversation had
    /// cached because its prefix or key changed. `read_blocks` is what it did read.
    pub(super) fn find_break(
        &self,
        request: &Request,
        prompt: &Prompt,
        read_blocks: usize,
    ) -> Option<CacheBreak> {
        let expected_read_blocks = self.cached_blocks.min(prompt.len());
        if read_blocks >= expected_read_blocks {
            return None;
        }
        let at_start = |cause| CacheBreak {
            block_index: 0,
            byte_offset: 0,
            section: self.section_of(0),
            cause,
            expected_read_blocks: self.cached_blocks,
            expected_read_tokens: self.prefix_tokens(self.cached_blocks),
        };
        if request.organization != self.organization {
            return Some(at_start(BreakCause::Organization));
        }
        if request.model != self.model {
            return Some(at_start(BreakCause::Model));
        }
        let common = self.common_blocks(prompt);
        // A thinking change invalidates the prefix from the first message block on;
        // tools and system stay valid.
        let thinking_changed =
            thinking_budget_tokens(request.thinking) != thinking_budget_tokens(self.thinking);
        let thinking_break =
            thinking_changed.then_some(self.messages_start.min(prompt.messages_start()));
        let (block_index, cause) = match thinking_break {
            Some(start) if start <= common => (start, BreakCause::Thinking),
            _ => (common, BreakCause::Prefix),
        };
        if block_index >= expected_read_blocks {
            // The prefix the conversation cached is intact; the miss has another
            // cause (expiry, an entry not yet readable, lookback, minimum length).
            return None;
        }
        let within_block = match cause {
            BreakCause::Prefix => first_difference(
                self.blocks[block_index].bytes(),
                prompt.blocks()[block_index].bytes(),
            ),
            _ => 0,
        };
        Some(CacheBreak {
            block_index,
            byte_offset: self.prefix_bytes(block_index) + within_block as u64,
            section: self.section_of(block_index),
            cause,
            expected_read_blocks: self.cached_blocks,
            expected_read_tokens: self.prefix_tokens(self.cached_blocks),
        })
    }

    /// Records that `request` sent `prompt` and left `cached_blocks` cached.
    pub(super) fn update(&mut self, request: &Request, prompt: &Prompt, cached_blocks: usize) {
        assert!(
            cached_blocks <= prompt.len(),
            "cached more blocks than sent"
        );
        assert_eq!(prompt.chain().len(), prompt.len(), "prompt not measured");
        let common = self.common_blocks(prompt);
        self.blocks.truncate(common);
        self.chain.truncate(common);
        self.end_bytes.truncate(common);
        self.end_tokens.truncate(common);
        self.blocks.extend_from_slice(&prompt.blocks()[common..]);
        self.chain.extend_from_slice(&prompt.chain()[common..]);
        self.end_bytes
            .extend_from_slice(&prompt.end_bytes()[common..]);
        self.end_tokens
            .extend_from_slice(&prompt.end_tokens()[common..]);
        // Token counts of shared blocks may differ if a recorded count replaced an
        // estimate; the newest prompt's counts win.
        if common > 0 && self.end_tokens[common - 1] != prompt.prefix_tokens(common) {
            self.end_tokens.copy_from_slice(prompt.end_tokens());
        }
        self.messages_start = prompt.messages_start();
        self.cached_blocks = cached_blocks;
        if request.organization != self.organization {
            self.organization.clone_from(&request.organization);
        }
        if request.model != self.model {
            self.model.clone_from(&request.model);
        }
        self.thinking = request.thinking;
        assert_eq!(self.blocks.len(), prompt.len());
    }

    fn prefix_tokens(&self, len_blocks: usize) -> u64 {
        len_blocks.checked_sub(1).map_or(0, |i| self.end_tokens[i])
    }

    fn prefix_bytes(&self, len_blocks: usize) -> u64 {
        len_blocks.checked_sub(1).map_or(0, |i| self.end_bytes[i])
    }

    fn section_of(&self, index: usize) -> Section {
        self.blocks
            .get(index)
            .map_or(Section::Messages, |block| block.section())
    }
}

/// The first index in `0..len` where `holds` is false, given that it is true on a
/// prefix of the range and false after.
fn partition_point(len: usize, holds: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let middle = low + (high - low) / 2;
        if holds(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// Index of the first byte where `a` and `b` differ, or the shorter length when one
/// is a prefix of the other (which is also where they differ).
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}
