//! Runtime profiles: the published dialects and our own.
//!
//! - [`Profile::ClaudeCode`]: Claude Code's coordinator mode and swarm teams, as
//!   published, including its silent-loss behaviours (the in-place mailbox rewrite
//!   and unlocked reads), so that fault experiments can show them.
//! - [`Profile::Nexo`]: nexo-rs's coordinator mode ("Phase 84").
//! - [`Profile::Hardened`]: Claude Code semantics with every known silent-loss hole
//!   closed. The project's recommendation.
//!
//! Every behaviour that differs between profiles is a method here, so the table in
//! `docs/profiles.md` maps one row to one method, and each is tested.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::envelope::Dialect;
use crate::ipc::WriteMode;

/// Which published behaviour the runtime follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Claude Code, as published.
    ClaudeCode,
    /// nexo-rs coordinator mode.
    Nexo,
    /// Claude Code semantics with the silent-loss holes closed.
    Hardened,
}

/// How the system prompt is assembled (PROTOCOL.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptStyle {
    /// The coordinator prompt replaces the default; priority chain
    /// override > coordinator > agent > custom > default, then the append prompt.
    ReplaceChain,
    /// A `# COORDINATOR ROLE` persona block is prepended to the agent's prompt.
    PersonaPrepend,
}

/// How a scratchpad write over a version the writer never saw is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScratchOverwritePolicy {
    /// The write happens and the lost update is reported as an event.
    Report,
    /// The write is refused; the writer must read the key first.
    Refuse,
}

/// When an agent's conversation is compacted: Claude Code's auto-compact rule.
///
/// The effective context window is the model's window less the room kept for the
/// answer (the model's largest output, at most [`OUTPUT_RESERVE_TOKENS_MAX`]); an
/// agent whose context (the last response's input, cache and output tokens) passes
/// that window less [`COMPACT_BUFFER_TOKENS`] is compacted before its next request.
/// For the models here, a 200,000-token window and outputs of up to 64,000 tokens,
/// that is 200,000 − 20,000 − 13,000 = 167,000 tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// The model's context window.
    pub context_window_tokens: u64,
    /// The model's largest output.
    pub output_tokens_max: u64,
}

/// The most of the context window Claude Code keeps for the answer.
pub const OUTPUT_RESERVE_TOKENS_MAX: u64 = 20_000;

/// How far below the effective window Claude Code compacts.
pub const COMPACT_BUFFER_TOKENS: u64 = 13_000;

impl CompactionPolicy {
    /// Claude Code's models: a 200,000-token window, outputs of up to 64,000.
    pub const CLAUDE_MODELS: CompactionPolicy = CompactionPolicy {
        context_window_tokens: 200_000,
        output_tokens_max: 64_000,
    };

    /// The context size, in tokens, past which an agent is compacted.
    pub const fn threshold_tokens(self) -> u64 {
        let reserve = if self.output_tokens_max < OUTPUT_RESERVE_TOKENS_MAX {
            self.output_tokens_max
        } else {
            OUTPUT_RESERVE_TOKENS_MAX
        };
        self.context_window_tokens
            .saturating_sub(reserve)
            .saturating_sub(COMPACT_BUFFER_TOKENS)
    }
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 3] = [Profile::ClaudeCode, Profile::Nexo, Profile::Hardened];

    /// The profile's name (`claude-code`, `nexo`, `hardened`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Profile::ClaudeCode => "claude-code",
            Profile::Nexo => "nexo",
            Profile::Hardened => "hardened",
        }
    }

    /// The envelope dialect: a deadline expiry is `timeout` only in `nexo`.
    pub const fn dialect(self) -> Dialect {
        match self {
            Profile::Nexo => Dialect::Nexo,
            Profile::ClaudeCode | Profile::Hardened => Dialect::ClaudeCode,
        }
    }

    /// How mailbox writes reach the disk: Claude Code rewrites in place (and reads
    /// without the lock); the others replace atomically and read under the lock.
    pub const fn mailbox_write_mode(self) -> WriteMode {
        match self {
            Profile::ClaudeCode => WriteMode::LegacyInPlace,
            Profile::Nexo | Profile::Hardened => WriteMode::Atomic,
        }
    }

    /// Whether a Write or Edit of a file changed since the worker last read it is
    /// refused ("modified since read"). In every profile it is recorded as an event.
    pub const fn refuses_write_modified_since_read(self) -> bool {
        match self {
            Profile::ClaudeCode | Profile::Hardened => true,
            Profile::Nexo => false,
        }
    }

    /// How a lost scratchpad update is handled.
    pub const fn scratch_overwrite_policy(self) -> ScratchOverwritePolicy {
        match self {
            Profile::Hardened => ScratchOverwritePolicy::Refuse,
            Profile::ClaudeCode | Profile::Nexo => ScratchOverwritePolicy::Report,
        }
    }

    /// How the system prompt is assembled.
    pub const fn prompt_style(self) -> PromptStyle {
        match self {
            Profile::Nexo => PromptStyle::PersonaPrepend,
            Profile::ClaudeCode | Profile::Hardened => PromptStyle::ReplaceChain,
        }
    }

    /// Whether a fork's envelope summary is the first line of its result, cut at 80
    /// characters (nexo), rather than `Agent "<description>" completed`.
    pub const fn summarizes_fork_by_first_line(self) -> bool {
        matches!(self, Profile::Nexo)
    }

    /// Whether an unresolved message recipient is refused (`hardened`) rather than
    /// written to a mailbox nobody reads.
    pub const fn refuses_unknown_recipient(self) -> bool {
        matches!(self, Profile::Hardened)
    }

    /// When an agent's conversation is compacted, if ever: Claude Code's
    /// auto-compact rule in `claude-code` and `hardened`. nexo-rs publishes no
    /// compaction, so `nexo` has none (not modelled); a session's
    /// `compact_threshold_tokens` switches it on at a threshold of its own.
    pub const fn compaction(self) -> Option<CompactionPolicy> {
        match self {
            Profile::ClaudeCode | Profile::Hardened => Some(CompactionPolicy::CLAUDE_MODELS),
            Profile::Nexo => None,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(text: &str) -> Result<Profile, String> {
        Profile::ALL
            .into_iter()
            .find(|profile| profile.as_str() == text)
            .ok_or_else(|| {
                format!("unknown profile {text:?}; expected claude-code, nexo or hardened")
            })
    }
}
