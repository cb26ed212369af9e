//! A request prefix as a list of blocks, with chained block hashes kept
//! incrementally so each request hashes only the blocks added since the last one.
//!
//! The hash of the prefix through block `i` is `H(hash through i-1, kind of i, bytes
//! of i)`. Two prefixes with equal hashes at `i` are (up to a 64-bit collision)
//! byte-identical through `i`, so a cache lookup at any block boundary is one map
//! probe, and the first block where two prefixes differ is a binary search.
//! Appending blocks leaves every earlier hash valid; editing or removing a block
//! invalidates the hashes from that block on, and they are recomputed on the next
//! [`PromptCache::send`](super::PromptCache::send).

use coord_runtime::world::CacheTtl;
use std::collections::BTreeSet;
use xxhash_rust::xxh3::Xxh3Default;

use super::{Block, CacheError, Section, TokenEstimator};

/// The hash of the empty prefix.
pub(super) const EMPTY_PREFIX_HASH: u64 = 0;

/// The hash of a prefix extended by one block.
///
/// XXH3 reads a block's bytes many at a time, and a block can run to megabytes
/// (an oversize message); the prefix hashes never leave the process, so any
/// well-mixed 64-bit hash would do.
pub(super) fn chain_hash(previous: u64, block: &Block) -> u64 {
    let mut hasher = Xxh3Default::new();
    hasher.update(&previous.to_le_bytes());
    hasher.update(&[block.kind().tag()]);
    hasher.update(&(block.bytes().len() as u64).to_le_bytes());
    hasher.update(block.bytes());
    hasher.digest()
}

/// A request's cacheable prefix: tools, then system, then messages.
///
/// Keep one `Prompt` per conversation and extend it turn by turn: each
/// [`PromptCache::send`](super::PromptCache::send) measures only the blocks added or
/// changed since the previous one, so an n-turn conversation costs O(total bytes)
/// in all, not O(n²). Token counts are taken when a block is first measured, with
/// the estimator of the cache it is sent to; send one prompt to caches with the same
/// estimator.
#[derive(Debug, Clone, Default)]
pub struct Prompt {
    blocks: Vec<Block>,
    /// Indices of blocks carrying `cache_control`, so a request enumerates its
    /// breakpoints without scanning every block.
    breakpoints: BTreeSet<usize>,
    /// Number of tool and system blocks: the index of the first message block.
    messages_start: usize,
    /// `chain[i]`: hash of the prefix through block `i`, for `i < measured_blocks`.
    chain: Vec<u64>,
    /// `end_bytes[i]`: bytes of blocks `0..=i`.
    end_bytes: Vec<u64>,
    /// `end_tokens[i]`: tokens of blocks `0..=i`.
    end_tokens: Vec<u64>,
    /// Bytes hashed over this prompt's life; the incremental-cost tests read it.
    hashed_bytes_total: u64,
}

impl Prompt {
    /// An empty prompt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `block`; it must not be in a section before the last block's.
    pub fn push(&mut self, block: Block) -> Result<(), CacheError> {
        if let Some(last) = self.blocks.last() {
            if block.section() < last.section() {
                return Err(CacheError::SectionOrder {
                    index: self.blocks.len(),
                    section: block.section(),
                    previous: last.section(),
                });
            }
        }
        if block.section() != Section::Messages {
            self.messages_start += 1;
        }
        if block.cache_control().is_some() {
            self.breakpoints.insert(self.blocks.len());
        }
        self.blocks.push(block);
        Ok(())
    }

    /// Keeps the first `len_blocks` blocks.
    pub fn truncate(&mut self, len_blocks: usize) {
        self.blocks.truncate(len_blocks);
        // Everything at or past the cut is gone, so drop those breakpoints.
        self.breakpoints.split_off(&len_blocks);
        self.messages_start = self.messages_start.min(len_blocks);
        self.forget_measurements_from(len_blocks);
    }

    /// Replaces block `index` with `block`, which must be in the same section.
    pub fn replace(&mut self, index: usize, block: Block) -> Result<(), CacheError> {
        let old = self.block_checked(index)?;
        if old.section() != block.section() {
            return Err(CacheError::SectionChanged {
                index,
                expected: old.section(),
                found: block.section(),
            });
        }
        if block.cache_control().is_some() {
            self.breakpoints.insert(index);
        } else {
            self.breakpoints.remove(&index);
        }
        self.blocks[index] = block;
        self.forget_measurements_from(index);
        Ok(())
    }

    /// Sets or clears the breakpoint after block `index`. The block's bytes, and so
    /// every prefix hash, stay as they are: moving a breakpoint is not an edit.
    pub fn set_cache_control(
        &mut self,
        index: usize,
        ttl: Option<CacheTtl>,
    ) -> Result<(), CacheError> {
        self.block_checked(index)?;
        self.blocks[index].set_cache_control(ttl);
        if ttl.is_some() {
            self.breakpoints.insert(index);
        } else {
            self.breakpoints.remove(&index);
        }
        Ok(())
    }

    /// Clears every breakpoint, e.g. before marking only the newest message.
    pub fn clear_cache_control(&mut self) {
        for index in std::mem::take(&mut self.breakpoints) {
            self.blocks[index].set_cache_control(None);
        }
    }

    /// The blocks, in prefix order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether the prompt has no blocks.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Index of the first message block (the number of tool and system blocks).
    pub fn messages_start(&self) -> usize {
        self.messages_start
    }

    /// Indices of the blocks carrying `cache_control`, ascending.
    pub fn breakpoints(&self) -> impl Iterator<Item = usize> + '_ {
        self.breakpoints.iter().copied()
    }

    /// Bytes hashed so far over this prompt's life. Each block is hashed once unless
    /// it, or a block before it, is edited.
    pub fn hashed_bytes_total(&self) -> u64 {
        self.hashed_bytes_total
    }

    /// Hashes and counts the blocks not yet measured.
    pub(super) fn measure(&mut self, estimator: &dyn TokenEstimator) {
        let start = self.chain.len();
        assert!(
            start <= self.blocks.len(),
            "measurements outlive their blocks"
        );
        for block in &self.blocks[start..] {
            let previous_hash = self.chain.last().copied().unwrap_or(EMPTY_PREFIX_HASH);
            let previous_bytes = self.end_bytes.last().copied().unwrap_or(0);
            let previous_tokens = self.end_tokens.last().copied().unwrap_or(0);
            let tokens = block
                .recorded_tokens()
                .unwrap_or_else(|| estimator.estimate_tokens(block.bytes()));
            self.chain.push(chain_hash(previous_hash, block));
            self.end_bytes
                .push(previous_bytes + block.bytes().len() as u64);
            self.end_tokens.push(previous_tokens + tokens);
            self.hashed_bytes_total += block.bytes().len() as u64;
        }
        assert_eq!(self.chain.len(), self.blocks.len());
    }

    /// Hash of the prefix of `len_blocks` blocks. Call after `measure`.
    pub(super) fn prefix_hash(&self, len_blocks: usize) -> u64 {
        match len_blocks {
            0 => EMPTY_PREFIX_HASH,
            n => self.chain[n - 1],
        }
    }

    /// Tokens of the prefix of `len_blocks` blocks. Call after `measure`.
    pub(super) fn prefix_tokens(&self, len_blocks: usize) -> u64 {
        match len_blocks {
            0 => 0,
            n => self.end_tokens[n - 1],
        }
    }

    /// The measured prefix hashes, one per block.
    pub(super) fn chain(&self) -> &[u64] {
        &self.chain
    }

    /// The measured cumulative byte counts, one per block.
    pub(super) fn end_bytes(&self) -> &[u64] {
        &self.end_bytes
    }

    /// The measured cumulative token counts, one per block.
    pub(super) fn end_tokens(&self) -> &[u64] {
        &self.end_tokens
    }

    fn block_checked(&self, index: usize) -> Result<&Block, CacheError> {
        self.blocks.get(index).ok_or(CacheError::NoSuchBlock {
            index,
            len_blocks: self.blocks.len(),
        })
    }

    fn forget_measurements_from(&mut self, index: usize) {
        self.chain.truncate(index);
        self.end_bytes.truncate(index);
        self.end_tokens.truncate(index);
    }
}
