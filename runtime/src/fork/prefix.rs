//! The canonical request prefix: what "byte-identical to the parent" means.
//!
//! [`request_prefix_bytes`]`(request, n)` serializes, with `serde_json`, a JSON object
//! with its keys in this fixed order:
//!
//! ```text
//! {"model":…,"max_tokens":…,"thinking":…|null,"tools":[…],"system":[…],"messages":[m0,…,m(n-1)
//! ```
//!
//! - Model, `max_tokens` and thinking come first because each keys the whole cache: a
//!   change to one of them loses everything, so it shows up at the smallest offsets.
//! - Tools, system and messages follow in the cache's own prefix order, each list
//!   written in full (tools and system) or up to `n` messages.
//! - The messages array is left **open** (no closing `]}`), so the prefix with `n`
//!   messages is a true byte prefix of the prefix with `n + 1`: a longer conversation
//!   extends the bytes instead of rewriting their end.
//! - Every field is always present (absent thinking is `null`, empty lists are `[]`),
//!   and blocks are serialized exactly as they are, `cache_control` markers included.
//!   Moving a marker is therefore reported as a difference: conservative, it may name
//!   a break the API would forgive, but it never hides one.
//!
//! Two requests share a cache prefix up to `n` messages exactly when these bytes are
//! equal; the first differing byte is the cache break's offset, and the layout kept
//! alongside the bytes names the part and block it falls in.

use std::fmt;
use std::ops::Range;

use serde::Serialize;

use crate::world::ModelRequest;

/// A part of the cache key, in the order of the canonical prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CachePart {
    /// The model id.
    Model,
    /// The output token limit.
    MaxTokens,
    /// The extended-thinking configuration.
    Thinking,
    /// The tool definitions.
    Tools,
    /// The system prompt blocks.
    System,
    /// The conversation.
    Messages,
}

impl CachePart {
    /// Every part, in prefix order.
    pub const ALL: [CachePart; 6] = [
        CachePart::Model,
        CachePart::MaxTokens,
        CachePart::Thinking,
        CachePart::Tools,
        CachePart::System,
        CachePart::Messages,
    ];

    /// The part's name, which is also its key in the prefix and the `part` of a
    /// `RuntimeEvent::CacheBreak`.
    pub const fn as_str(self) -> &'static str {
        match self {
            CachePart::Model => "model",
            CachePart::MaxTokens => "max_tokens",
            CachePart::Thinking => "thinking",
            CachePart::Tools => "tools",
            CachePart::System => "system",
            CachePart::Messages => "messages",
        }
    }

    /// Whether the part is a list of blocks (so a difference has a block index).
    pub const fn is_list(self) -> bool {
        matches!(
            self,
            CachePart::Tools | CachePart::System | CachePart::Messages
        )
    }
}

impl fmt::Display for CachePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The canonical prefix of `request` with its first `messages_len` messages: the
/// bytes two requests must share for one to read the other's cache entry.
///
/// # Panics
/// If `messages_len` exceeds the request's message count: asking for messages that
/// do not exist is a caller bug.
pub fn request_prefix_bytes(request: &ModelRequest, messages_len: usize) -> Vec<u8> {
    PrefixLayout::of(request, messages_len).bytes
}

/// Where one part sits in the prefix bytes.
#[derive(Debug)]
struct PartSpan {
    part: CachePart,
    /// Offset of the part's key (its opening quote).
    start: usize,
    /// Byte range of each block, for list parts.
    blocks: Vec<Range<usize>>,
}

/// The prefix bytes and where each part and block lies in them.
#[derive(Debug)]
pub(crate) struct PrefixLayout {
    /// The canonical prefix.
    pub(crate) bytes: Vec<u8>,
    spans: Vec<PartSpan>,
}

impl PrefixLayout {
    /// Serializes `request`'s canonical prefix with `messages_len` messages.
    pub(crate) fn of(request: &ModelRequest, messages_len: usize) -> PrefixLayout {
        assert!(
            messages_len <= request.messages.len(),
            "prefix of {messages_len} messages asked of a request with {}",
            request.messages.len()
        );
        let mut layout = PrefixLayout {
            bytes: vec![b'{'],
            spans: Vec::with_capacity(CachePart::ALL.len()),
        };
        layout.scalar(CachePart::Model, &request.model);
        layout.scalar(CachePart::MaxTokens, &request.max_tokens);
        layout.scalar(CachePart::Thinking, &request.thinking);
        layout.list(CachePart::Tools, &request.tools, true);
        layout.list(CachePart::System, &request.system, true);
        layout.list(
            CachePart::Messages,
            &request.messages[..messages_len],
            false,
        );
        assert_eq!(layout.spans.len(), CachePart::ALL.len());
        layout
    }

    /// The part and, for a list part, the block index that `offset` falls in.
    ///
    /// A list's block index is that of the first block not wholly before `offset`;
    /// an offset past the last block (a block added or removed at the end) gives the
    /// list's length.
    pub(crate) fn locate(&self, offset: usize) -> (CachePart, Option<usize>) {
        let span = self
            .spans
            .iter()
            .rev()
            .find(|span| span.start <= offset)
            .unwrap_or(&self.spans[0]);
        let block_index = span.part.is_list().then(|| {
            span.blocks
                .iter()
                .position(|block| block.end > offset)
                .unwrap_or(span.blocks.len())
        });
        (span.part, block_index)
    }

    fn key(&mut self, part: CachePart) -> usize {
        if !self.spans.is_empty() {
            self.bytes.push(b',');
        }
        let start = self.bytes.len();
        self.write(part.as_str());
        self.bytes.push(b':');
        start
    }

    fn scalar<T: Serialize + ?Sized>(&mut self, part: CachePart, value: &T) {
        let start = self.key(part);
        self.write(value);
        self.spans.push(PartSpan {
            part,
            start,
            blocks: Vec::new(),
        });
    }

    fn list<T: Serialize>(&mut self, part: CachePart, items: &[T], closed: bool) {
        let start = self.key(part);
        self.bytes.push(b'[');
        let mut blocks = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.bytes.push(b',');
            }
            let block_start = self.bytes.len();
            self.write(item);
            blocks.push(block_start..self.bytes.len());
        }
        if closed {
            self.bytes.push(b']');
        }
        self.spans.push(PartSpan {
            part,
            start,
            blocks,
        });
    }

    fn write<T: Serialize + ?Sized>(&mut self, value: &T) {
        // The request types hold only strings, numbers and JSON values with string
        // keys, which always serialize; a failure here is a bug in those types.
        crate::json::append(&mut self.bytes, value).expect("request parts serialize to JSON");
    }
}
