//! Probes: a named mark at every guard, journaled when the guard fires.
//!
//! As FoundationDB's code probes do, each guard of the runtime (a refusal, a
//! validation, a retry budget, a stale-lock break, a cap, a durability step) reaches
//! its [`Probe`] when it acts, as a [`RuntimeEvent::ProbeReached`] in the journal. A
//! simulator counts them over a sweep to show which guards its scenarios exercise:
//! a guard never reached is a guard whose regression no run could catch.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::event::RuntimeEvent;
use crate::world::Journal;

/// One guard of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Probe {
    /// The tool gate refused a tool it does not know.
    ToolUnknownRefused,
    /// The tool gate refused a tool outside the caller's surface.
    ToolSurfaceRefused,
    /// The tool gate refused a call whose input does not parse.
    ToolInputRefused,
    /// A write over a version its writer never read was refused.
    WriteUnseenRefused,
    /// A write over a version its writer never read went through, journaled
    /// (profiles that report rather than refuse).
    WriteUnseenReported,
    /// A scratchpad write over a version its writer never read was refused.
    ScratchUnseenRefused,
    /// A write outside the writer's worktree was refused.
    WorktreeEscapeRefused,
    /// A write by an agent without a worktree, outside the session and workspace
    /// roots, was refused.
    RootsEscapeRefused,
    /// A write whose path passes through a symlink below its writer's root (its
    /// worktree, or the session or workspace root) was refused.
    WriteSymlinkRefused,
    /// A second ending of a task that had already notified was ignored.
    SecondEndingIgnored,
    /// A spawn's deadline expired and the runtime ended its worker.
    DeadlineExpired,
    /// A completed task's output file could not be made durable: it ended failed.
    OutputSyncFailed,
    /// A completed task's output file was synced before its envelope went out.
    OutputSynced,
    /// A finished worker's transcript could not be made durable: it ended failed.
    TranscriptSyncFailed,
    /// A symlink at a task output path was refused.
    OutputSymlinkRefused,
    /// A stopped task's output file failed to read whole: its result says so.
    OutputUnreadable,
    /// A task's output reached its size cap and was truncated with the marker.
    OutputCapped,
    /// A stale mailbox lock was broken.
    StaleLockBroken,
    /// A lock moved aside as stale proved to be a live one that replaced the stale
    /// lock since it was read, and was put back.
    LiveLockPutBack,
    /// Every attempt at a mailbox lock found it held.
    LockContended,
    /// A transient model error was retried.
    ModelCallRetried,
    /// A model error was given up on: not transient, or the retry budget spent.
    ModelCallGivenUp,
    /// Coordinator mode ran a spawn asked for in the foreground in the background.
    SpawnForcedBackground,
    /// Background tasks being disabled ran a spawn in the foreground that would
    /// otherwise have run in the background.
    SpawnForcedForeground,
    /// An agent loop spent its turn budget (`turns_max`) and ended.
    TurnLimitReached,
    /// A worktree slug was refused before anything was created.
    WorktreeSlugRefused,
    /// A spawn's name belonged to a live task.
    SpawnNameTaken,
    /// A shutdown request sent to a running teammate was queued as a request for
    /// its next tool-round boundary, not as text.
    ShutdownRequestQueued,
    /// A shutdown request to an agent that is not a running teammate was refused.
    ShutdownRequestRefused,
    /// A shutdown response naming no request waiting for its sender's answer was
    /// refused.
    ShutdownResponseUnmatched,
    /// An idle teammate agreed at once to a shutdown request it had not answered.
    ShutdownAgreedIdle,
    /// A message to a finished remote worker resumed it on the remote-worker host.
    RemoteWorkerResumed,
    /// An agent's context passed the compaction threshold and its conversation was
    /// replaced by a summary.
    ContextCompacted,
    /// A task id drawn for a new task was a live or evicted task's, and was drawn
    /// again: ids are unique per session.
    TaskIdRedrawn,
    /// A message queued while a worker's final turn was under way was handed to it
    /// at the end of that turn, the last boundary it had, and the worker went on
    /// to answer it rather than end with the message undelivered.
    MessageTakenAtEnd,
    /// A restart found the coordinator's durable conversation ending in a torn
    /// line (a write the power cut never finished) and rewrote it without it.
    TornLogLineDropped,
}

impl Probe {
    /// Every probe.
    pub const ALL: [Probe; 36] = [
        Probe::ToolUnknownRefused,
        Probe::ToolSurfaceRefused,
        Probe::ToolInputRefused,
        Probe::WriteUnseenRefused,
        Probe::WriteUnseenReported,
        Probe::ScratchUnseenRefused,
        Probe::WorktreeEscapeRefused,
        Probe::RootsEscapeRefused,
        Probe::WriteSymlinkRefused,
        Probe::SecondEndingIgnored,
        Probe::DeadlineExpired,
        Probe::OutputSyncFailed,
        Probe::OutputSynced,
        Probe::TranscriptSyncFailed,
        Probe::OutputSymlinkRefused,
        Probe::OutputUnreadable,
        Probe::OutputCapped,
        Probe::StaleLockBroken,
        Probe::LiveLockPutBack,
        Probe::LockContended,
        Probe::ModelCallRetried,
        Probe::ModelCallGivenUp,
        Probe::SpawnForcedBackground,
        Probe::SpawnForcedForeground,
        Probe::TurnLimitReached,
        Probe::WorktreeSlugRefused,
        Probe::SpawnNameTaken,
        Probe::ShutdownRequestQueued,
        Probe::ShutdownRequestRefused,
        Probe::ShutdownResponseUnmatched,
        Probe::ShutdownAgreedIdle,
        Probe::RemoteWorkerResumed,
        Probe::ContextCompacted,
        Probe::TaskIdRedrawn,
        Probe::MessageTakenAtEnd,
        Probe::TornLogLineDropped,
    ];

    /// The probe's name, as reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Probe::ToolUnknownRefused => "tool-unknown-refused",
            Probe::ToolSurfaceRefused => "tool-surface-refused",
            Probe::ToolInputRefused => "tool-input-refused",
            Probe::WriteUnseenRefused => "write-unseen-refused",
            Probe::WriteUnseenReported => "write-unseen-reported",
            Probe::ScratchUnseenRefused => "scratch-unseen-refused",
            Probe::WorktreeEscapeRefused => "worktree-escape-refused",
            Probe::RootsEscapeRefused => "roots-escape-refused",
            Probe::WriteSymlinkRefused => "write-symlink-refused",
            Probe::SecondEndingIgnored => "second-ending-ignored",
            Probe::DeadlineExpired => "deadline-expired",
            Probe::OutputSyncFailed => "output-sync-failed",
            Probe::OutputSynced => "output-synced",
            Probe::TranscriptSyncFailed => "transcript-sync-failed",
            Probe::OutputSymlinkRefused => "output-symlink-refused",
            Probe::OutputUnreadable => "output-unreadable",
            Probe::OutputCapped => "output-capped",
            Probe::StaleLockBroken => "stale-lock-broken",
            Probe::LiveLockPutBack => "live-lock-put-back",
            Probe::LockContended => "lock-contended",
            Probe::ModelCallRetried => "model-call-retried",
            Probe::ModelCallGivenUp => "model-call-given-up",
            Probe::SpawnForcedBackground => "spawn-forced-background",
            Probe::SpawnForcedForeground => "spawn-forced-foreground",
            Probe::TurnLimitReached => "turn-limit-reached",
            Probe::WorktreeSlugRefused => "worktree-slug-refused",
            Probe::SpawnNameTaken => "spawn-name-taken",
            Probe::ShutdownRequestQueued => "shutdown-request-queued",
            Probe::ShutdownRequestRefused => "shutdown-request-refused",
            Probe::ShutdownResponseUnmatched => "shutdown-response-unmatched",
            Probe::ShutdownAgreedIdle => "shutdown-agreed-idle",
            Probe::RemoteWorkerResumed => "remote-worker-resumed",
            Probe::ContextCompacted => "context-compacted",
            Probe::TaskIdRedrawn => "task-id-redrawn",
            Probe::MessageTakenAtEnd => "message-taken-at-end",
            Probe::TornLogLineDropped => "torn-log-line-dropped",
        }
    }

    /// Marks this probe reached in `journal`.
    pub fn reach(self, journal: &dyn Journal) {
        journal.record(RuntimeEvent::ProbeReached { probe: self });
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_is_listed_once_under_its_serde_name() {
        // Goal: reports print the names serde writes, and ALL misses none.
        let names: std::collections::BTreeSet<&str> =
            Probe::ALL.iter().map(|probe| probe.as_str()).collect();
        assert_eq!(names.len(), Probe::ALL.len());
        for probe in Probe::ALL {
            let json = serde_json::to_string(&probe).unwrap();
            assert_eq!(json, format!("\"{probe}\""));
        }
    }
}
