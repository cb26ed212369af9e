//! A simulated Anthropic prompt cache, with its rules kept as data.
//!
//! A request's prefix is a [`Prompt`]: tool definitions, then system blocks, then
//! message content blocks, each some exact bytes with an optional `cache_control`
//! breakpoint. [`PromptCache::send`] takes the prompt and a [`Request`] (organization,
//! model, thinking settings, conversation, virtual send and first-token times) and
//! returns a [`CacheOutcome`]: the API's `usage` block in tokens, the entries
//! written, and a [`CacheBreak`] when the request missed a prefix its conversation
//! had cached because the prefix or key changed. Prices are not this module's
//! business; it counts tokens.
//!
//! The rules, each pinned by a unit test (`sim/src/cache/tests/`) and described in
//! `docs/prompt-cache.md`; the numbers live in `rules.toml` ([`CacheRules`]):
//!
//! - Prefix order tools → system → messages; a prefix matches an entry only when it
//!   is byte-identical up to a block boundary where an entry was written.
//! - At most 4 breakpoints per request; each looks for an entry at its own boundary
//!   and up to 20 boundaries before it, and the longest hit is read.
//! - Entries are written at breakpoints past the read prefix whose prefix reaches
//!   the model's minimum cacheable length (1024, 2048 or 4096 tokens).
//! - A 5-minute TTL (default) or a 1-hour TTL, refreshed by every hit; 1-hour
//!   breakpoints must precede 5-minute ones. Billing with mixed TTLs: read up to the
//!   highest hit, 1-hour writes up to the last 1-hour breakpoint, 5-minute writes up
//!   to the last breakpoint, uncached input after it.
//! - An entry is readable only once the response that wrote it has started, so
//!   requests sent together do not read each other's writes.
//! - Entries are keyed by organization and model; prefixes reaching into the
//!   messages are also keyed by the thinking settings, so a thinking change keeps
//!   the tools and system entries and loses the message entries. A tool or system
//!   change changes the bytes and so every later prefix.
//!
//! Matching costs O(new bytes) per request: a prompt keeps chained block hashes
//! (hash through block i = H(hash through i-1, block i)), so a turn that appends to
//! the previous one hashes only the appended blocks, and every lookup is one probe.
//!
//! ```
//! use coord_sim::cache::{Block, Prompt, PromptCache, Request};
//! use coord_runtime::world::CacheTtl;
//! use std::time::Duration;
//!
//! let mut cache = PromptCache::new();
//! let mut prompt = Prompt::new();
//! let system = "You are a careful reviewer. ".repeat(200); // 5600 bytes, 1400 tokens
//! prompt.push(Block::system(&system).with_cache_control(CacheTtl::FiveMinutes))?;
//! prompt.push(Block::user("Review the patch."))?;
//! let request = Request::new("org-1", "claude-sonnet-4-5", Duration::ZERO)
//!     .first_token_after(Duration::from_secs(2));
//! let first = cache.send(&request, &mut prompt)?;
//! assert_eq!(first.usage.cache_creation_input_tokens, 1400);
//!
//! let later = Request::new("org-1", "claude-sonnet-4-5", Duration::from_secs(60));
//! let second = cache.send(&later, &mut prompt)?;
//! assert_eq!(second.usage.cache_read_input_tokens, 1400);
//! # Ok::<(), coord_sim::cache::CacheError>(())
//! ```

mod block;
mod cache_break;
mod conversation;
mod convert;
mod entry;
mod error;
mod estimator;
mod outcome;
mod prompt;
mod request;
mod rules;
mod simulator;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockKind, Section};
pub use cache_break::{BreakCause, CacheBreak};
pub use error::CacheError;
pub use estimator::{BytesPerToken, BytesPerTokenError, TokenEstimator};
pub use outcome::{CacheOutcome, CacheWrite};
pub use prompt::Prompt;
pub use request::Request;
pub use rules::{CacheRules, MinimumTokens};
pub use simulator::PromptCache;
