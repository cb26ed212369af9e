//! A cache break: the place where a request's prefix first differs from the cached
//! prefix its conversation should have read.

use super::Section;

/// Why a request missed a prefix its conversation had cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakCause {
    /// The prefix bytes differ at [`CacheBreak::block_index`].
    Prefix,
    /// The model changed; no entry of the old model is visible.
    Model,
    /// The organization changed; caches are per organization.
    Organization,
    /// The thinking settings changed; cached messages are invalid, tools and system
    /// stay valid.
    Thinking,
}

/// Where and why a request's prefix left the one its conversation had cached.
///
/// `byte_offset` counts block content bytes from the start of the prefix (tools,
/// then system, then messages), as the API's byte-exact comparison sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheBreak {
    /// The first block whose prefix no longer matches.
    pub block_index: usize,
    /// Byte offset of the first differing byte (or of the block, when the bytes are
    /// equal and only the block's kind or the request key changed).
    pub byte_offset: u64,
    /// The section holding `block_index`.
    pub section: Section,
    /// What changed.
    pub cause: BreakCause,
    /// Blocks of the prefix the conversation had cached.
    pub expected_read_blocks: usize,
    /// Tokens the request would have read had its prefix matched.
    pub expected_read_tokens: u64,
}
