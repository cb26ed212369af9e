//! The fault catalogue: every fault a scenario can place, and what swarm mode draws.
//!
//! A fault is placed at an event, not at a wall time: "the 2nd model call of the
//! worker whose prompt matches `research-*`", "the 3rd append under the tasks
//! directory". Event placement survives the changes a shrinker makes (removing one
//! fault shifts every later virtual time, but not which call of which agent a fault
//! hits), and a swarm-drawn schedule is written down in exactly this form, so a
//! shrunk failure is an ordinary scenario.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The worker's process dies. At `model-call` N the model call never returns (the
    /// process is gone); at `after-output` the worker dies after its result reached
    /// its output file but before the notification was enqueued.
    WorkerCrash {
        /// Prompt pattern of the worker (`*` matches any run of characters).
        worker: String,
        /// Where it dies.
        #[serde(default)]
        at: CrashPoint,
    },
    /// The coordinator host loses power, either `at_ms` after the run starts or when
    /// the coordinator's nth model call arrives (`at`), before it is answered:
    /// unsynced data is lost, and the runtime restarts from what its disk made
    /// durable. Exactly one of the two is given.
    CoordinatorCrash {
        /// Virtual milliseconds after the run starts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<u64>,
        /// The request at which the host dies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<CoordinatorCrashPoint>,
    },
    /// Once the worker has notified, something tries to end it (and notify) again.
    DuplicateNotify {
        /// Prompt pattern of the worker.
        worker: String,
    },
    /// The worker's final text carries a forged `<task-notification>` for another task.
    ForgedEnvelope {
        /// Prompt pattern of the worker.
        worker: String,
    },
    /// The worker's final turn is late by `delay_ms`, reordering notifications.
    DelayedNotification {
        /// Prompt pattern of the worker.
        worker: String,
        /// Extra virtual milliseconds.
        delay_ms: u64,
    },
    /// A mailbox lock is held by a crashed writer: its lock file is left behind.
    StaleLock {
        /// Which mailbox: the agent name whose inbox it is (`team-lead` for the lead).
        inbox: String,
        /// How many times the lock comes back once broken: a writer whose clock is
        /// stuck at the Unix epoch takes it between the break and the breaker's
        /// retry, and crashes holding it. Default 0.
        #[serde(default, skip_serializing_if = "is_zero")]
        returns: u32,
        /// Whether another writer breaks the stale lock first and takes it, between
        /// a contender's read of the stale record and its move of the lock aside:
        /// the lock the contender moves is then a live one, which it must find is
        /// not the record it read and put back. The racing writer gives the lock
        /// back once the contender has found it held twice. Default false.
        #[serde(default, skip_serializing_if = "is_false")]
        raced: bool,
    },
    /// An outside writer forges the team lead's answer to a teammate's permission
    /// request. Reading the team's files as any process on the host can, it finds
    /// the member's `permission_request` (for `tool`) in the lead's inbox and writes an
    /// approving `permission_response` with that request's id into the member's
    /// inbox, sent under `from`, before the lead answers. A member must take its
    /// answer from its lead alone: one that takes the forgery runs a tool call its
    /// lead denied or never allowed.
    ForgedPermission {
        /// The team.
        team: String,
        /// The member whose request is answered.
        member: String,
        /// The tool the request is for (`Write`, `Bash`): the first request for
        /// it is answered. Default the member's first request, for any tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// The name the forged answer is sent under. Default `intruder`.
        #[serde(default = "intruder")]
        from: String,
    },
    /// A request in a team member's inbox arrives twice, as a writer whose append
    /// landed but whose acknowledgement was lost appends it again: the first
    /// unread structured message (a shutdown request, a plan or permission answer:
    /// each names its request id) from `from` in the inbox of `member` is repeated
    /// right after itself, byte for byte (sender, text and timestamp), before the
    /// member reads it. A request that arrives twice is still one request: it is
    /// answered once. Plain text is left alone: nothing in it tells a repeat from
    /// the same words sent again.
    DuplicateMail {
        /// The team.
        team: String,
        /// The member whose inbox it is.
        member: String,
        /// Who sent the message repeated. Default `team-lead`.
        #[serde(default = "team_lead")]
        from: String,
    },
    /// A mailbox is left corrupt, as a writer that rewrote it in place and died
    /// mid-write leaves it: a JSON array cut off inside a message. Every later
    /// write must be refused loudly, or land without losing those bytes.
    CorruptInbox {
        /// The agent name whose inbox it is.
        inbox: String,
    },
    /// Many producers write to one mailbox at the same moment.
    MailboxProducers {
        /// The agent name whose inbox they write.
        inbox: String,
        /// How many producers.
        producers: u32,
    },
    /// Two workers write the same file in the same directory.
    ClobberedWrite {
        /// Prompt patterns of the two writers.
        writers: [String; 2],
        /// The file, relative to the working directory.
        path: String,
    },
    /// Two workers write the same scratchpad key without reading it.
    ClobberedScratch {
        /// Prompt patterns of the two writers.
        writers: [String; 2],
        /// The key.
        key: String,
    },
    /// A disk operation fails or tears.
    Disk {
        /// Which operations.
        #[serde(default)]
        op: DiskOpClass,
        /// Which paths: a `*` pattern over the absolute path.
        #[serde(default = "any_path")]
        path: String,
        /// The nth matching operation (from 1).
        nth: u64,
        /// What happens.
        effect: DiskEffect,
    },
    /// A model API call fails.
    ModelApi {
        /// Prompt pattern of the agent (`coordinator` matches the coordinator).
        agent: String,
        /// The nth call of that agent (from 1).
        call: u32,
        /// How it fails.
        error: ApiError,
    },
    /// A symlink is planted where the runtime will write: the output file of the nth
    /// spawned task, pointing outside the session.
    SymlinkAtOutput {
        /// The nth spawn of the run (from 1).
        spawn: u32,
        /// When the link is swapped in. Default: right after the file is created.
        /// With `after_check = true`, later: right after the runtime next looks at
        /// the file before writing to it (a check-then-use race), so the runtime's
        /// own look finds a regular file, and only the disk's refusal to follow a
        /// final symlink (`O_NOFOLLOW`) keeps the write out of the link's target.
        #[serde(default, skip_serializing_if = "is_false")]
        after_check: bool,
    },
    /// Right after the nth worktree of the run is made, a symlinked directory is
    /// planted in it: `<worktree>/<dir>` points at `target`, so a write under `dir`
    /// would land there, as an attacker who can write the worktree would arrange.
    SymlinkedWorktreeDir {
        /// The nth worktree made in the run (from 1).
        worktree: u32,
        /// The link's name inside the worktree: one path segment, which the
        /// checkout does not already hold.
        dir: String,
        /// Where it points.
        #[serde(default)]
        target: LinkTarget,
    },
    /// The Agent call that launches the worker asks for worktree isolation under a
    /// name that tries to escape the worktree directory.
    MaliciousSlug {
        /// Prompt pattern of the worker.
        worker: String,
    },
    /// The worker sends its parent a message larger than any mailbox accepts.
    OversizeMessage {
        /// Prompt pattern of the sender.
        worker: String,
        /// Its size.
        size_bytes: u64,
    },
    /// The network to the remote-worker host is partitioned while the nth remote
    /// launch of the run is under way, for `duration_ms`.
    RemotePartition {
        /// The nth remote launch (from 1).
        launch: u32,
        /// What the partition cuts.
        #[serde(default)]
        during: PartitionPhase,
        /// How long it lasts, in virtual milliseconds.
        duration_ms: u64,
    },
    /// Once the coordinator has made its nth model call, the instructions its system
    /// prompt includes change (an edited instructions file): every later request has
    /// a different cache prefix, which the runtime must declare as a cache break.
    CacheBreakingPromptChange {
        /// The coordinator's model call after which the prompt changes (from 1).
        call: u32,
    },
    /// An outside writer takes the mailbox lock of `inbox` and holds it for
    /// `hold_ms` while the runtime and producers contend for it, then releases it.
    SlowLockHolder {
        /// The agent name whose inbox it is (`team-lead` for the lead).
        inbox: String,
        /// How long it holds the lock, in virtual milliseconds.
        hold_ms: u64,
        /// When it takes the lock, in virtual ms of the run. Default 1,500, shortly
        /// before outside producers start writing. A later holder of the same inbox
        /// can find an earlier one's lock stale and break it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
    },
    /// Once the coordinator has made its nth model call, the session serves another
    /// channel binding (a message arrived from another chat): its later spawns and
    /// SendMessageToWorker calls are scoped to `binding`, and the workers spawned
    /// before stay with the binding that spawned them.
    BindingSwitch {
        /// The coordinator's model call after which the binding changes (from 1).
        after_call: u32,
        /// The binding served from then on, `<channel>:<account>` or `<channel>`.
        binding: String,
    },
    /// The runtime's entropy repeats itself: the nth task id the runtime draws
    /// comes out as an earlier draw did, as a source re-seeded the same way after a
    /// restart would make it. A runtime that does not draw again hands two tasks
    /// one id (PROTOCOL.md §1: ids are unique per session).
    TaskIdCollision {
        /// The nth task id draw of the run (from 2), counted across restarts. The
        /// session draws its own id first, so the first spawn's is draw 2.
        draw: u32,
        /// The earlier draw it repeats (from 1). Default: the one before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeats: Option<u32>,
    },
}

/// Where a planted worktree symlink points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LinkTarget {
    /// A directory outside the session and the workspace.
    #[default]
    Outside,
    /// The worktree made just before this one: another worker's.
    OtherWorktree,
}

/// What a remote partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionPhase {
    /// The connect: the launch never reaches the host, and so do the launches that
    /// follow while the partition lasts.
    Connect,
    /// The report: the launch reached the host, whose report is held until the
    /// partition heals.
    #[default]
    Report,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// Who a `forged-permission` fault's answer is sent as, unless it names someone.
pub(crate) const FORGER_NAME: &str = "intruder";

fn team_lead() -> String {
    coord_runtime::team::TEAM_LEAD_NAME.to_owned()
}

fn intruder() -> String {
    FORGER_NAME.to_owned()
}

fn any_path() -> String {
    "*".to_owned()
}

/// Where a worker crash happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "point", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CrashPoint {
    /// During its nth model call (from 1).
    ModelCall {
        /// Which call.
        call: u32,
    },
    /// After its result was written to its output file, before its notification.
    #[default]
    AfterOutput,
}

/// Where a coordinator crash happens, when it is placed at an event rather than at
/// a virtual time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "point", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CoordinatorCrashPoint {
    /// When the coordinator's nth model call (from 1, counted over the whole run,
    /// across restarts) arrives: the host dies holding it unanswered.
    ModelCall {
        /// Which call.
        call: u32,
    },
    /// In the middle of the nth write of class `op` (from 1, over the whole run) to
    /// a path matching `path`: half its bytes reach the disk, unsynced, the call
    /// fails, and nothing after it reaches the disk before the host is down.
    DiskWrite {
        /// Which writes count: any write of data (the default), or appends,
        /// replaces or creates only.
        #[serde(default)]
        op: DiskOpClass,
        /// Path pattern (`*` wildcards) of the file written.
        path: String,
        /// Which matching write.
        nth: u64,
    },
}

impl Fault {
    /// A coordinator crash `at_ms` after the run starts.
    pub const fn coordinator_crash_at_ms(at_ms: u64) -> Self {
        Fault::CoordinatorCrash {
            at_ms: Some(at_ms),
            at: None,
        }
    }

    /// A coordinator crash when the coordinator's `call`th model call arrives.
    pub const fn coordinator_crash_at_call(call: u32) -> Self {
        Fault::CoordinatorCrash {
            at_ms: None,
            at: Some(CoordinatorCrashPoint::ModelCall { call }),
        }
    }
}

/// Classes of disk operation a fault can match.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum DiskOpClass {
    /// Any operation that writes data.
    #[default]
    Write,
    /// Appends.
    Append,
    /// Atomic replaces.
    Replace,
    /// Creates.
    Create,
    /// Reads.
    Read,
    /// Syncs of a file's data or a directory's entries.
    Sync,
}

/// What a disk fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DiskEffect {
    /// `EIO`.
    Eio,
    /// `ENOSPC`.
    Enospc,
    /// Half the bytes land, then `EIO`.
    Torn,
}

/// How a model API call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApiError {
    /// HTTP 429, asking the client to wait 5 s (`retry-after`).
    RateLimited,
    /// HTTP 429 that names no wait, so the client backs off by its own rule: a
    /// gateway's 429, or a rate limit a stream reports after its `200` is out,
    /// where no header can carry a wait (the API host sends it either way).
    RateLimitedNoWait,
    /// HTTP 529.
    Overloaded,
    /// No answer before the client's timeout.
    Timeout,
    /// The response stream ends early (`max_tokens` stop, cut text).
    Truncated,
    /// The response completes with a blank text (whitespace only) and no tool
    /// calls, as a model that wrote nothing answers: a turn that says nothing, or
    /// a compaction without a summary.
    Blank,
    /// HTTP 500, an internal error: worth another attempt.
    ServerError,
    /// HTTP 408, the server gave up waiting for the request: worth another attempt.
    RequestTimeout,
    /// HTTP 400, a request the API refuses as invalid: final.
    BadRequest,
    /// HTTP 401, a key the API does not accept (expired or revoked): final.
    Authentication,
    /// HTTP 403, a key without access to what was asked: final.
    Permission,
    /// HTTP 404, a model the API does not have: final.
    NotFound,
    /// HTTP 413, a request over the API's size limit: final.
    RequestTooLarge,
}

/// The kinds of fault, for swarm configuration and reports.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// [`Fault::WorkerCrash`].
    WorkerCrash,
    /// [`Fault::CoordinatorCrash`].
    CoordinatorCrash,
    /// [`Fault::DuplicateNotify`].
    DuplicateNotify,
    /// [`Fault::ForgedEnvelope`].
    ForgedEnvelope,
    /// [`Fault::DelayedNotification`].
    DelayedNotification,
    /// [`Fault::StaleLock`].
    StaleLock,
    /// [`Fault::MailboxProducers`].
    MailboxProducers,
    /// [`Fault::ClobberedWrite`].
    ClobberedWrite,
    /// [`Fault::ClobberedScratch`].
    ClobberedScratch,
    /// [`Fault::Disk`].
    Disk,
    /// [`Fault::ModelApi`].
    ModelApi,
    /// [`Fault::SymlinkAtOutput`].
    SymlinkAtOutput,
    /// [`Fault::SymlinkedWorktreeDir`].
    SymlinkedWorktreeDir,
    /// [`Fault::MaliciousSlug`].
    MaliciousSlug,
    /// [`Fault::OversizeMessage`].
    OversizeMessage,
    /// [`Fault::RemotePartition`].
    RemotePartition,
    /// [`Fault::CacheBreakingPromptChange`].
    CacheBreakingPromptChange,
    /// [`Fault::SlowLockHolder`].
    SlowLockHolder,
    /// [`Fault::BindingSwitch`].
    BindingSwitch,
    /// [`Fault::TaskIdCollision`].
    TaskIdCollision,
    /// [`Fault::CorruptInbox`].
    CorruptInbox,
    /// [`Fault::ForgedPermission`].
    ForgedPermission,
    /// [`Fault::DuplicateMail`].
    DuplicateMail,
}

impl FaultKind {
    /// Every kind, in catalogue order.
    pub const ALL: [FaultKind; 23] = [
        FaultKind::WorkerCrash,
        FaultKind::CoordinatorCrash,
        FaultKind::DuplicateNotify,
        FaultKind::ForgedEnvelope,
        FaultKind::DelayedNotification,
        FaultKind::StaleLock,
        FaultKind::MailboxProducers,
        FaultKind::ClobberedWrite,
        FaultKind::ClobberedScratch,
        FaultKind::Disk,
        FaultKind::ModelApi,
        FaultKind::SymlinkAtOutput,
        FaultKind::SymlinkedWorktreeDir,
        FaultKind::MaliciousSlug,
        FaultKind::OversizeMessage,
        FaultKind::RemotePartition,
        FaultKind::CacheBreakingPromptChange,
        FaultKind::SlowLockHolder,
        FaultKind::BindingSwitch,
        FaultKind::TaskIdCollision,
        FaultKind::CorruptInbox,
        FaultKind::ForgedPermission,
        FaultKind::DuplicateMail,
    ];

    /// The kinds swarm mode draws when a scenario does not name its own: every
    /// kind but those that only a scenario asking for them should meet.
    /// `corrupt-inbox` makes every outside producer's write fail, which would hide
    /// the producers' other faults from the seeds that draw it.
    pub fn drawn_by_default() -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|kind| *kind != FaultKind::CorruptInbox)
            .collect()
    }

    /// The kind's name as written in scenarios.
    pub const fn as_str(self) -> &'static str {
        match self {
            FaultKind::WorkerCrash => "worker-crash",
            FaultKind::CoordinatorCrash => "coordinator-crash",
            FaultKind::DuplicateNotify => "duplicate-notify",
            FaultKind::ForgedEnvelope => "forged-envelope",
            FaultKind::DelayedNotification => "delayed-notification",
            FaultKind::StaleLock => "stale-lock",
            FaultKind::MailboxProducers => "mailbox-producers",
            FaultKind::ClobberedWrite => "clobbered-write",
            FaultKind::ClobberedScratch => "clobbered-scratch",
            FaultKind::Disk => "disk",
            FaultKind::ModelApi => "model-api",
            FaultKind::SymlinkAtOutput => "symlink-at-output",
            FaultKind::SymlinkedWorktreeDir => "symlinked-worktree-dir",
            FaultKind::MaliciousSlug => "malicious-slug",
            FaultKind::OversizeMessage => "oversize-message",
            FaultKind::RemotePartition => "remote-partition",
            FaultKind::CacheBreakingPromptChange => "cache-breaking-prompt-change",
            FaultKind::SlowLockHolder => "slow-lock-holder",
            FaultKind::BindingSwitch => "binding-switch",
            FaultKind::TaskIdCollision => "task-id-collision",
            FaultKind::CorruptInbox => "corrupt-inbox",
            FaultKind::ForgedPermission => "forged-permission",
            FaultKind::DuplicateMail => "duplicate-mail",
        }
    }
}

impl FaultKind {
    /// Whether a fault of this kind may rightly change what a tool call is
    /// answered or how far a run gets, in a runtime that does everything right. A
    /// forged permission answer may not (the member waits for its lead's own),
    /// nor may a message that arrives twice (it is still one message).
    pub const fn changes_answers(self) -> bool {
        !matches!(self, FaultKind::ForgedPermission | FaultKind::DuplicateMail)
    }

    /// Why the production disk on a temp directory (`disk = "real"`) cannot carry
    /// out this kind, or `None` when it can. A real filesystem keeps every write the
    /// runtime made, synced or not, and the host cannot be made to lose power under
    /// a run: a kind whose effect is the loss of unsynced data needs the in-memory
    /// disk. Every other kind acts through the runtime's disk calls (the fault
    /// policy, crash points, planted symlinks) or off the disk entirely.
    pub const fn real_disk_refusal(self) -> Option<&'static str> {
        match self {
            FaultKind::CoordinatorCrash => Some(
                "a power cut must drop the writes that were never synced, which only \
                 the in-memory disk can do",
            ),
            _ => None,
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Fault {
    /// The fault's kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::WorkerCrash { .. } => FaultKind::WorkerCrash,
            Fault::CoordinatorCrash { .. } => FaultKind::CoordinatorCrash,
            Fault::DuplicateNotify { .. } => FaultKind::DuplicateNotify,
            Fault::ForgedEnvelope { .. } => FaultKind::ForgedEnvelope,
            Fault::DelayedNotification { .. } => FaultKind::DelayedNotification,
            Fault::StaleLock { .. } => FaultKind::StaleLock,
            Fault::MailboxProducers { .. } => FaultKind::MailboxProducers,
            Fault::ClobberedWrite { .. } => FaultKind::ClobberedWrite,
            Fault::ClobberedScratch { .. } => FaultKind::ClobberedScratch,
            Fault::Disk { .. } => FaultKind::Disk,
            Fault::ModelApi { .. } => FaultKind::ModelApi,
            Fault::SymlinkAtOutput { .. } => FaultKind::SymlinkAtOutput,
            Fault::SymlinkedWorktreeDir { .. } => FaultKind::SymlinkedWorktreeDir,
            Fault::MaliciousSlug { .. } => FaultKind::MaliciousSlug,
            Fault::OversizeMessage { .. } => FaultKind::OversizeMessage,
            Fault::RemotePartition { .. } => FaultKind::RemotePartition,
            Fault::CacheBreakingPromptChange { .. } => FaultKind::CacheBreakingPromptChange,
            Fault::SlowLockHolder { .. } => FaultKind::SlowLockHolder,
            Fault::BindingSwitch { .. } => FaultKind::BindingSwitch,
            Fault::TaskIdCollision { .. } => FaultKind::TaskIdCollision,
            Fault::CorruptInbox { .. } => FaultKind::CorruptInbox,
            Fault::ForgedPermission { .. } => FaultKind::ForgedPermission,
            Fault::DuplicateMail { .. } => FaultKind::DuplicateMail,
        }
    }
}
