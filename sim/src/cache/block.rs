//! One block of a request prefix: a tool definition, a system text block or a
//! message content block, as the bytes the cache compares.

use coord_runtime::world::{CacheTtl, Role};
use std::sync::Arc;

/// Where a block sits in the prefix; the cache orders blocks tools → system →
/// messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// A tool definition.
    Tools,
    /// A system prompt block.
    System,
    /// A message content block.
    Messages,
}

/// What a block is, beyond its bytes: part of the prefix identity, so the same text
/// as a system block and as a user message never match each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A tool definition.
    Tool,
    /// A system prompt block.
    System,
    /// A message content block; `starts_message` marks the first block of a message,
    /// so `[user: a, b]` and `[user: a], [user: b]` are different prefixes.
    Message {
        /// Who speaks the message.
        role: Role,
        /// Whether this block opens a new message.
        starts_message: bool,
    },
}

impl BlockKind {
    /// The section this kind belongs to.
    pub fn section(self) -> Section {
        match self {
            BlockKind::Tool => Section::Tools,
            BlockKind::System => Section::System,
            BlockKind::Message { .. } => Section::Messages,
        }
    }

    /// A one-byte tag fed to the prefix hash ahead of the block's bytes.
    pub(super) fn tag(self) -> u8 {
        match self {
            BlockKind::Tool => 1,
            BlockKind::System => 2,
            BlockKind::Message {
                role: Role::User,
                starts_message: true,
            } => 3,
            BlockKind::Message {
                role: Role::User,
                starts_message: false,
            } => 4,
            BlockKind::Message {
                role: Role::Assistant,
                starts_message: true,
            } => 5,
            BlockKind::Message {
                role: Role::Assistant,
                starts_message: false,
            } => 6,
        }
    }
}

/// One block: its kind, its exact bytes, an optional breakpoint and an optional
/// recorded token count.
///
/// The bytes are shared (`Arc`), so cloning a prompt or keeping a conversation's
/// last prefix for cache-break reports copies pointers, not text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    kind: BlockKind,
    bytes: Arc<[u8]>,
    cache_control: Option<CacheTtl>,
    tokens: Option<u64>,
}

impl Block {
    /// A block of `kind` with `bytes`, no breakpoint and an estimated token count.
    pub fn new(kind: BlockKind, bytes: impl Into<Arc<[u8]>>) -> Self {
        Self {
            kind,
            bytes: bytes.into(),
            cache_control: None,
            tokens: None,
        }
    }

    /// A tool definition, as its serialized JSON.
    pub fn tool(json: impl Into<Arc<[u8]>>) -> Self {
        Self::new(BlockKind::Tool, json)
    }

    /// A system prompt text block.
    pub fn system(text: &str) -> Self {
        Self::new(BlockKind::System, text.as_bytes())
    }

    /// A text block opening a new user message.
    pub fn user(text: &str) -> Self {
        Self::message(Role::User, true, text.as_bytes())
    }

    /// A text block opening a new assistant message.
    pub fn assistant(text: &str) -> Self {
        Self::message(Role::Assistant, true, text.as_bytes())
    }

    /// A message content block; `starts_message` is false for the second and later
    /// blocks of one message.
    pub fn message(role: Role, starts_message: bool, bytes: impl Into<Arc<[u8]>>) -> Self {
        Self::new(
            BlockKind::Message {
                role,
                starts_message,
            },
            bytes,
        )
    }

    /// The same block with a `cache_control` breakpoint after it.
    pub fn with_cache_control(mut self, ttl: CacheTtl) -> Self {
        self.cache_control = Some(ttl);
        self
    }

    /// The same block with a recorded token count instead of an estimate.
    pub fn with_tokens(mut self, tokens: u64) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// The block's kind.
    pub fn kind(&self) -> BlockKind {
        self.kind
    }

    /// The block's section.
    pub fn section(&self) -> Section {
        self.kind.section()
    }

    /// The exact bytes the cache compares.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The breakpoint after this block, if any.
    pub fn cache_control(&self) -> Option<CacheTtl> {
        self.cache_control
    }

    /// The recorded token count, if one was given.
    pub fn recorded_tokens(&self) -> Option<u64> {
        self.tokens
    }

    pub(super) fn set_cache_control(&mut self, ttl: Option<CacheTtl>) {
        self.cache_control = ttl;
    }
}
