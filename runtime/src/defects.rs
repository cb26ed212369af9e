//! Seeded defects: named, deliberately wrong behaviours, for proving the simulator's
//! checkers. Never on in production.
//!
//! A checker that has never caught a bug proves nothing: the runtime keeps every
//! invariant of PROTOCOL.md §8 in every profile, so no fault alone breaks it, and a
//! checker that is silently wrong would pass every run. As with FoundationDB's
//! BUGGIFY, each [`Defect`] switches off one protection at the exact spot where it
//! lives, reproducing a failure mode of a published coordinator system; a fault
//! experiment turns the defect on, places the fault the protection guards against,
//! and expects the matching checker to fire.
//!
//! Each defect is one small branch, commented at its site with the defect's name.
//! With [`Defects::none`] (the default) every branch takes the protected path.
//!
//! The module, the `defects` fields and builders and every branch exist only with
//! the crate's `defects` feature, which the simulator turns on: a production build
//! compiles the protected path alone, so no configuration can switch a defect on.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// One deliberately wrong behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Defect {
    /// The once-only notification guard is skipped: a task that is ended a second
    /// time enqueues a second envelope (invariant 1, `notify-once`).
    DuplicateNotification,
    /// The envelope's `<result>` is written without XML escaping, as Claude Code
    /// interpolates it: a worker's text can carry an envelope of its own
    /// (invariant 2, `no-forgery`).
    RawEnvelopeResult,
    /// Coordinator mode honours `run_in_background: false` and waits for the worker
    /// (invariant 3, `never-blocks`).
    ForegroundSpawns,
    /// Queued messages are handed over at a tool-round boundary but not removed from
    /// the queue, so every later boundary hands them over again (invariant 4,
    /// `message-delivery`).
    RedeliveredMessages,
    /// The task output writer trusts `O_NOFOLLOW` alone and skips its own check for a
    /// symlink at the path; a filesystem that ignores the flag writes through it
    /// (invariant 7, `no-escape`).
    FollowSymlinks,
    /// A change to an agent's cache prefix between its requests, or between a fork
    /// and its parent, is not journaled as a cache break (invariant 8, `fork-prefix`).
    UndeclaredCacheBreaks,
    /// Tool calls are not checked against the caller's tool surface, neither by the
    /// session nor by the tool gate (invariant 9, `tool-surface`).
    UncheckedToolSurface,
    /// SendMessageToWorker looks a worker up by id alone, ignoring the caller's
    /// binding, so a worker of one binding is reachable from another (invariant 10,
    /// `binding-isolation`).
    UnscopedWorkerLookup,
    /// The tool gate skips its check of an agent without a worktree against the
    /// session and workspace roots, confining worktree writers only: an absolute
    /// path or a `..` out of the workspace is written (invariant 7, `no-escape`).
    UnconfinedWrites,
}

impl Defect {
    /// Every defect.
    pub const ALL: [Defect; 9] = [
        Defect::DuplicateNotification,
        Defect::RawEnvelopeResult,
        Defect::ForegroundSpawns,
        Defect::RedeliveredMessages,
        Defect::FollowSymlinks,
        Defect::UndeclaredCacheBreaks,
        Defect::UncheckedToolSurface,
        Defect::UnscopedWorkerLookup,
        Defect::UnconfinedWrites,
    ];

    /// The defect's name, as written in scenarios.
    pub const fn as_str(self) -> &'static str {
        match self {
            Defect::DuplicateNotification => "duplicate-notification",
            Defect::RawEnvelopeResult => "raw-envelope-result",
            Defect::ForegroundSpawns => "foreground-spawns",
            Defect::RedeliveredMessages => "redelivered-messages",
            Defect::FollowSymlinks => "follow-symlinks",
            Defect::UndeclaredCacheBreaks => "undeclared-cache-breaks",
            Defect::UncheckedToolSurface => "unchecked-tool-surface",
            Defect::UnscopedWorkerLookup => "unscoped-worker-lookup",
            Defect::UnconfinedWrites => "unconfined-writes",
        }
    }
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Defect`]s switched on. Empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Defects(BTreeSet<Defect>);

impl Defects {
    /// No defect: the runtime as it ships.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether `defect` is on.
    pub fn has(&self, defect: Defect) -> bool {
        self.0.contains(&defect)
    }

    /// Whether no defect is on.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The defects that are on, in order.
    pub fn iter(&self) -> impl Iterator<Item = Defect> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Defect> for Defects {
    fn from_iter<I: IntoIterator<Item = Defect>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        // Goal: the kebab-case names scenarios use are the serde names.
        for defect in Defect::ALL {
            let json = serde_json::to_string(&defect).unwrap();
            assert_eq!(json, format!("\"{}\"", defect.as_str()));
            assert_eq!(serde_json::from_str::<Defect>(&json).unwrap(), defect);
        }
        assert!(serde_json::from_str::<Defect>("\"no-such-defect\"").is_err());
    }

    #[test]
    fn the_default_set_is_empty() {
        let defects = Defects::default();
        assert!(defects.is_empty());
        assert!(Defect::ALL.iter().all(|d| !defects.has(*d)));
        let one: Defects = [Defect::FollowSymlinks].into_iter().collect();
        assert!(one.has(Defect::FollowSymlinks) && !one.has(Defect::RawEnvelopeResult));
    }
}
