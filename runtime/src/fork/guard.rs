//! When a fork is allowed (PROTOCOL.md §6).
//!
//! A fork is refused, with a typed [`ForkError`], in this order:
//!
//! 1. in coordinator mode: a coordinator delegates to workers it instructs in full;
//!    a fork inherits the whole conversation instead, and the two modes do not mix;
//! 2. when the child's depth would exceed [`ForkConfig::depth_max`], counting from the
//!    depth the caller says the parent is at;
//! 3. when the parent's history itself says the child would be too deep: every fork
//!    level adds one user message carrying `<fork-boilerplate>`, so the number of such
//!    messages is a lower bound on the parent's depth even when the caller lost track
//!    of it (a resumed transcript, a caller bug). With the default limit of 1, any
//!    marker at all refuses the fork.
//!
//! Only the text blocks of user messages are scanned: tool results carry file
//! contents and command output, and a file that mentions the tag must not block
//! forking.

use crate::profile::Profile;
use crate::world::{ContentBlock, Message, Role as MessageRole};

/// The tag around the fork rules in a fork's first user message.
pub const FORK_BOILERPLATE_TAG: &str = "fork-boilerplate";

/// The default [`ForkConfig::depth_max`]: a fork cannot fork.
pub const FORK_DEPTH_MAX_DEFAULT: u32 = 1;

/// Whether someone watches a fork while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Supervision {
    /// Nobody approves its calls: destructive tools are refused (the default).
    #[default]
    Unsupervised,
    /// Its calls are supervised: it keeps the worker surface, destructive tools included.
    Supervised,
}

/// How forks are limited.
///
/// Defaults: `depth_max` = [`FORK_DEPTH_MAX_DEFAULT`] (1: a fork cannot fork),
/// `supervision` = [`Supervision::Unsupervised`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForkConfig {
    /// The deepest a fork may be; the main thread is depth 0, its forks depth 1.
    /// 0 disables forking.
    pub depth_max: u32,
    /// Whether forks run supervised.
    pub supervision: Supervision,
}

impl Default for ForkConfig {
    fn default() -> Self {
        ForkConfig {
            depth_max: FORK_DEPTH_MAX_DEFAULT,
            supervision: Supervision::Unsupervised,
        }
    }
}

impl ForkConfig {
    /// Sets the depth limit.
    pub fn with_depth_max(mut self, depth_max: u32) -> Self {
        self.depth_max = depth_max;
        self
    }

    /// Sets the supervision.
    pub fn with_supervision(mut self, supervision: Supervision) -> Self {
        self.supervision = supervision;
        self
    }
}

/// Who is forking. Defaults through [`ForkOrigin::main_thread`]: depth 0, not in
/// coordinator mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForkOrigin {
    /// The profile the parent runs under.
    pub profile: Profile,
    /// Whether the parent is a coordinator.
    pub coordinator_mode: bool,
    /// The parent's fork depth: 0 for the main thread, 1 for a fork, …
    pub depth: u32,
}

impl ForkOrigin {
    /// The main thread of `profile`, outside coordinator mode.
    pub fn main_thread(profile: Profile) -> ForkOrigin {
        ForkOrigin {
            profile,
            coordinator_mode: false,
            depth: 0,
        }
    }

    /// Sets coordinator mode.
    pub fn with_coordinator_mode(mut self, coordinator_mode: bool) -> Self {
        self.coordinator_mode = coordinator_mode;
        self
    }

    /// Sets the parent's fork depth.
    pub fn with_depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }
}

/// Why a fork was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The parent is a coordinator; fork and coordinator mode are mutually exclusive.
    #[error("fork refused: forking and coordinator mode are mutually exclusive")]
    CoordinatorMode,
    /// The child would be deeper than the limit.
    #[error("fork refused: the child would be at depth {depth}, over the limit of {depth_max}")]
    DepthExceeded {
        /// The child's depth.
        depth: u32,
        /// The configured limit.
        depth_max: u32,
    },
    /// The parent's history shows it is already a fork, too deep to fork again.
    #[error(
        "fork refused: fork from inside a fork (message {message_index} of the parent \
         history carries <{FORK_BOILERPLATE_TAG}>; {markers_count} such messages, depth limit \
         {depth_max})"
    )]
    RecursiveFork {
        /// The first user message carrying the marker.
        message_index: usize,
        /// How many user messages carry it.
        markers_count: usize,
        /// The configured limit.
        depth_max: u32,
    },
    /// The message given as the fork's launch message is not the assistant's.
    #[error("fork refused: the launching message is not an assistant message")]
    NotAssistantMessage,
    /// The launching assistant message has no tool use to answer.
    #[error("fork refused: the assistant message has no tool use")]
    NoToolUse,
    /// The directive is empty or blank.
    #[error("fork refused: the directive is empty")]
    EmptyDirective,
}

/// Indices of the user messages whose text blocks contain `<fork-boilerplate>`.
pub fn fork_marker_indices(messages: &[Message]) -> Vec<usize> {
    let marker = format!("<{FORK_BOILERPLATE_TAG}>");
    messages
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == MessageRole::User)
        .filter(|(_, message)| {
            message.content.iter().any(|block| match block {
                ContentBlock::Text { text, .. } => text.contains(&marker),
                ContentBlock::ToolUse { .. } | ContentBlock::ToolResult { .. } => false,
            })
        })
        .map(|(index, _)| index)
        .collect()
}

/// Checks that a parent with `history` may fork; returns the child's depth.
pub fn check_fork_allowed(
    history: &[Message],
    origin: &ForkOrigin,
    config: &ForkConfig,
) -> Result<u32, ForkError> {
    if origin.coordinator_mode {
        return Err(ForkError::CoordinatorMode);
    }
    let depth = origin.depth.saturating_add(1);
    if depth > config.depth_max {
        return Err(ForkError::DepthExceeded {
            depth,
            depth_max: config.depth_max,
        });
    }
    let markers = fork_marker_indices(history);
    let markers_depth = u32::try_from(markers.len()).unwrap_or(u32::MAX);
    if markers_depth.saturating_add(1) > config.depth_max {
        // Not empty: with no marker this is `1 > depth_max`, which the depth check
        // above already refused.
        return Err(ForkError::RecursiveFork {
            message_index: markers[0],
            markers_count: markers.len(),
            depth_max: config.depth_max,
        });
    }
    Ok(depth.max(markers_depth.saturating_add(1)))
}
