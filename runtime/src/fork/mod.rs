//! Fork subagents: cache-safe parameters, the fork request, guards and cache breaks.
//!
//! A fork is a background copy of an agent that continues from the agent's own
//! conversation with one directive (PROTOCOL.md §6). Its value is the prompt cache: a
//! fork whose request starts with the same bytes as its parent's pays a tenth of the
//! price for that prefix. The module is built around that:
//!
//! - [`spawns_fork`] and [`ForkSource`]: when an Agent call is a fork, and the turn
//!   it copies;
//! - [`CacheSafeParams`]: what a fork must reuse from the parent's last request;
//! - [`request_prefix_bytes`]: the canonical prefix that defines "byte-identical";
//! - [`build_fork`]: the child's first request, behind the guards of
//!   [`check_fork_allowed`] (no fork in coordinator mode, from inside a fork, or past
//!   the depth limit), with destructive tools gated off the surface of an unsupervised
//!   fork rather than removed from the request;
//! - [`detect_cache_break`] and [`journal_cache_break`]: any difference in the prefix,
//!   located and made visible.

mod cache_break;
mod guard;
mod params;
mod prefix;
mod request;
mod source;

pub use cache_break::{check_cache_break, detect_cache_break, journal_cache_break, CacheBreak};
pub use guard::{
    check_fork_allowed, fork_marker_indices, ForkConfig, ForkError, ForkOrigin, Supervision,
    FORK_BOILERPLATE_TAG, FORK_DEPTH_MAX_DEFAULT,
};
pub use params::CacheSafeParams;
pub use prefix::{request_prefix_bytes, CachePart};
pub use request::{
    build_fork, fork_directive_text, fork_tool_surface, Fork, FORK_DIRECTIVE_PREFIX,
    FORK_PLACEHOLDER_RESULT,
};
pub use source::{is_fork_type, spawns_fork, ForkSource, FORK_AGENT_TYPE};
