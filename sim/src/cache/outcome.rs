//! What one request did to the cache, and its `usage` block.

use coord_runtime::world::{CacheTtl, Usage};

use super::CacheBreak;

/// The result of one simulated request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheOutcome {
    /// Token usage in the Messages API's shape.
    pub usage: Usage,
    /// All prompt tokens: uncached input plus cache reads plus cache writes.
    pub prompt_tokens: u64,
    /// Blocks of the prefix read from the cache (0 on a miss).
    pub read_blocks: usize,
    /// Entries this request wrote, in prefix order.
    pub writes: Vec<CacheWrite>,
    /// Set when the request's conversation had a cached prefix that this request
    /// should have read but did not, because its prefix or key changed.
    pub cache_break: Option<CacheBreak>,
}

/// One entry written by a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheWrite {
    /// Blocks in the written prefix.
    pub prefix_blocks: usize,
    /// Tokens in the written prefix.
    pub prefix_tokens: u64,
    /// The breakpoint's TTL.
    pub ttl: CacheTtl,
}
