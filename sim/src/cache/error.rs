//! Why a prompt edit or a request was refused.

use std::time::Duration;

use super::Section;

/// A request or prompt edit the real API would reject, or a simulator input that
/// cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// A block was placed before a section that must precede it (tools → system →
    /// messages).
    #[error("block {index} is in {section:?}, which cannot follow {previous:?}")]
    SectionOrder {
        /// The offending block's index.
        index: usize,
        /// Its section.
        section: Section,
        /// The section of the block before it.
        previous: Section,
    },
    /// A replacement block is in a different section from the block it replaces.
    #[error("block {index} is in {expected:?}; its replacement is in {found:?}")]
    SectionChanged {
        /// The replaced block's index.
        index: usize,
        /// The section of the block being replaced.
        expected: Section,
        /// The section of the replacement.
        found: Section,
    },
    /// A block index past the end of the prompt.
    #[error("block {index} does not exist (the prompt has {len_blocks} blocks)")]
    NoSuchBlock {
        /// The index asked for.
        index: usize,
        /// How many blocks the prompt has.
        len_blocks: usize,
    },
    /// More `cache_control` blocks than the API accepts.
    #[error("{count} cache_control blocks; at most {max} are allowed")]
    TooManyBreakpoints {
        /// Breakpoints in the request.
        count: usize,
        /// The rule's limit.
        max: usize,
    },
    /// A one-hour breakpoint after a five-minute one; the API requires longer TTLs
    /// first.
    #[error("block {index} has a 1h cache_control after a 5m one at block {five_minute_index}")]
    TtlOrder {
        /// The one-hour breakpoint's block.
        index: usize,
        /// The earlier five-minute breakpoint's block.
        five_minute_index: usize,
    },
    /// The response was said to start before the request was sent.
    #[error(
        "response starts at {response_started_at:?}, before the request was sent at {sent_at:?}"
    )]
    ResponseBeforeSend {
        /// When the request was sent.
        sent_at: Duration,
        /// When its response was said to start.
        response_started_at: Duration,
    },
}
