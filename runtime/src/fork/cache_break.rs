//! Cache-break detection (PROTOCOL.md §6).
//!
//! A fork's request must start with its parent's canonical prefix (see
//! [`request_prefix_bytes`](super::request_prefix_bytes)) through all of the parent's
//! messages. [`detect_cache_break`] compares the two prefixes byte by byte; the first
//! difference is the break, reported as the [`CachePart`] it falls in, the block within
//! that part for list parts, and its byte offset. [`journal_cache_break`] makes it
//! visible as a `RuntimeEvent::CacheBreak`, because a silent break costs a full cache
//! write on every fork and shows up only on the bill.

use crate::event::RuntimeEvent;
use crate::world::{Journal, ModelRequest};

use super::params::CacheSafeParams;
use super::prefix::{CachePart, PrefixLayout};

/// Where a child request's prefix first differs from its parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheBreak {
    /// The part of the cache key the first difference falls in.
    pub part: CachePart,
    /// For tools, system and messages: the index of the first differing block (the
    /// list's length when a block was added or removed at its end).
    pub block_index: Option<usize>,
    /// Offset of the first differing byte in the canonical prefix.
    pub byte_offset: u64,
}

impl CacheBreak {
    /// The journal event for this break in `agent`'s fork.
    pub fn to_event(&self, agent: &str) -> RuntimeEvent {
        RuntimeEvent::CacheBreak {
            agent: agent.to_owned(),
            part: self.part.as_str().to_owned(),
            block_index: self.block_index,
            byte_offset: self.byte_offset,
        }
    }
}

/// The first difference between the prefix of the parent's last request (all its
/// messages) and the same prefix of `child`, or `None` when the child reads the
/// parent's cache entry whole. A child with fewer messages than the parent differs
/// in `messages`, at the first missing one.
pub fn detect_cache_break(parent: &CacheSafeParams, child: &ModelRequest) -> Option<CacheBreak> {
    let shared_messages_len = parent.messages.len();
    // Equal values serialize to equal bytes: the common case (an agent's next turn,
    // a fork built as it should be) needs no serialization. Comparing is cheap, as
    // the tools' schemas are shared.
    let same_prefix = parent.model == child.model
        && parent.max_tokens == child.max_tokens
        && parent.thinking == child.thinking
        && parent.tools == child.tools
        && parent.system == child.system
        && child.messages.get(..shared_messages_len) == Some(&parent.messages[..]);
    if same_prefix {
        return None;
    }
    let parent_layout = PrefixLayout::of(&parent.to_request(), shared_messages_len);
    let child_layout = PrefixLayout::of(child, shared_messages_len.min(child.messages.len()));
    let offset = first_difference(&parent_layout.bytes, &child_layout.bytes)?;
    // Bytes before `offset` are equal, so both layouts agree on every part that
    // starts before it; the child's layout also covers a child that is longer.
    let (part, block_index) = child_layout.locate(offset);
    Some(CacheBreak {
        part,
        block_index,
        byte_offset: u64::try_from(offset).expect("a prefix offset fits in u64"),
    })
}

/// Records `cache_break` in `agent`'s fork as a `RuntimeEvent::CacheBreak`.
pub fn journal_cache_break(journal: &dyn Journal, agent: &str, cache_break: &CacheBreak) {
    journal.record(cache_break.to_event(agent));
}

/// Detects a cache break between `parent` and `child` and journals it if there is
/// one; returns what it found.
pub fn check_cache_break(
    journal: &dyn Journal,
    agent: &str,
    parent: &CacheSafeParams,
    child: &ModelRequest,
) -> Option<CacheBreak> {
    let found = detect_cache_break(parent, child);
    if let Some(cache_break) = &found {
        journal_cache_break(journal, agent, cache_break);
    }
    found
}

/// The first offset at which `a` and `b` differ, counting the end of the shorter one
/// as a difference when their lengths differ.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(offset) => Some(offset),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}
