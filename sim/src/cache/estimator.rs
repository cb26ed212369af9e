//! Token counts for blocks, from a pluggable estimator.

use std::fmt::Debug;

/// Counts the tokens of one block's bytes.
///
/// The cache works on bytes; tokens only enter through the minimum cacheable length
/// and the `usage` numbers. A recorded transcript can pin a block's count with
/// [`Block::with_tokens`](super::Block::with_tokens), which bypasses the estimator.
pub trait TokenEstimator: Debug + Send + Sync {
    /// The number of tokens `bytes` would tokenize to.
    fn estimate_tokens(&self, bytes: &[u8]) -> u64;
}

/// The default estimator: one token per four bytes, rounded up.
///
/// Known error: Claude's tokenizer averages roughly 3.5 to 4 bytes per token on
/// English prose, so this is usually within about 15% there; it undercounts code,
/// JSON and other punctuation-dense text (often 2.5 to 3 bytes per token) by up to
/// about 35%, and CJK text (about one token per 3-byte character) by about 25%. It
/// also ignores the few tokens of framing the API adds around each message and tool,
/// so short blocks are undercounted most. Use recorded counts where exact usage
/// matters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BytesPerToken4;

impl BytesPerToken4 {
    /// Bytes per token assumed.
    pub const BYTES_PER_TOKEN: u64 = 4;
}

impl TokenEstimator for BytesPerToken4 {
    fn estimate_tokens(&self, bytes: &[u8]) -> u64 {
        (bytes.len() as u64).div_ceil(Self::BYTES_PER_TOKEN)
    }
}
