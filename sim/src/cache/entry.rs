//! A cache entry: one written prefix, its lifetime and when it became readable.

use coord_runtime::world::CacheTtl;
use std::time::Duration;

/// Where an entry lives: the namespace (organization, model and, for prefixes that
/// reach into the messages, the thinking settings), the prefix length and its hash.
///
/// Keeping the length beside the hash means a hash collision can only confuse two
/// prefixes of the same block count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct EntryKey {
    pub(super) namespace: u64,
    pub(super) prefix_blocks: usize,
    pub(super) prefix_hash: u64,
}

/// One cached prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// The longer of the TTLs it was written with; hits refresh it by this much.
    pub(super) ttl: CacheTtl,
    /// When the first response that wrote it started: it is invisible before.
    pub(super) readable_at: Duration,
    /// When it expires unless hit or written again.
    pub(super) expires_at: Duration,
}

impl Entry {
    /// Whether a request sent at `sent_at` can read this entry.
    pub(super) fn readable(&self, sent_at: Duration) -> bool {
        self.readable_at <= sent_at && sent_at < self.expires_at
    }

    /// Whether the entry has expired by `now`.
    pub(super) fn expired(&self, now: Duration) -> bool {
        self.expires_at <= now
    }
}

/// The longer of two TTLs.
pub(super) fn longer_ttl(a: CacheTtl, b: CacheTtl) -> CacheTtl {
    match (a, b) {
        (CacheTtl::OneHour, _) | (_, CacheTtl::OneHour) => CacheTtl::OneHour,
        _ => CacheTtl::FiveMinutes,
    }
}
