//! The fault engine: one vocabulary, one book, one swarm draw, and one adapter per
//! effect.
//!
//! - [`catalogue`](Fault): every fault a scenario can place, defined once. A fault is
//!   placed at an event ("the 2nd model call of the worker whose prompt matches
//!   `research-*`"), never at a wall time, so a shrunk or swarm-drawn schedule is an
//!   ordinary scenario.
//! - [`FaultBook`]: a run's schedule and what has fired, shared by every adapter.
//!   A fault fires at most once, is recorded in the trace when it does, and nothing
//!   fires after the book heals (the liveness phase).
//! - swarm ([`choose_kinds`], [`draw_faults`]): the seed picks which fault kinds are
//!   on and draws a schedule from them, in the same form explicit faults take.
//! - adapters, each consulting the book and returning one verdict to the world it
//!   sits in:
//!
//! | adapter | effect | verdict |
//! | --- | --- | --- |
//! | [`ScheduledDiskFaults`], [`RuntimeDisk`] | disk operations, crash points, planted symlinks | [`Verdict`](crate::world::Verdict) per operation |
//! | [`LinkedWorktrees`] | symlinked directories planted in worktrees as they are made | the worktree, with the link in it |
//! | [`FaultyPolicy`] | model calls: API errors, crashes in a call (a worker's, or the coordinator host's power cut as its call arrives), late or forged final turns | the [`PolicyReply`](crate::model::PolicyReply) the model plays |
//! | [`ScheduledPartitions`] | the network between the coordinator and the remote-worker host | the [`LinkFate`](crate::world::LinkFate) of each connection |
//! | [`CollidingEntropy`] | the runtime's task id draws: an id drawn as an earlier one was | the characters each draw gives |
//! | outside ([`adversary`]) | stale locks, mailbox producers, slow lock holders, duplicate endings, prompt changes, binding switches | the book's record of each fault that acts |
//!
//! Which world a run uses does not change the engine: the adapters see the runtime's
//! operations through the `World` boundary, whatever implements it.

mod book;
mod catalogue;
mod disk;
mod entropy;
mod model;
mod outside;
mod placeholder;
mod remote;
mod swarm;
mod worktree;

pub use book::{names, FaultBook, COORDINATOR_LABEL};
pub use catalogue::{
    ApiError, CoordinatorCrashPoint, CrashPoint, DiskEffect, DiskOpClass, Fault, FaultKind,
    LinkTarget, PartitionPhase,
};
pub use disk::{
    PlantableDisk, RuntimeDisk, ScheduledDiskFaults, SimulatedCrash, SymlinkPlanter,
    SYMLINK_DIR_TARGET, SYMLINK_TARGET,
};
pub use entropy::{CollidingEntropy, IdDraws};
pub use model::{agent_label, FaultyPolicy, API_TIMEOUT};
pub use outside::{
    adversary, producer_inbox, recover_mailboxes, CORRUPT_INBOX_BYTES, PRODUCER_TEAM, SAFETY_PHASE,
};
pub(crate) use outside::{CRASHED_WRITER_OWNER, SLOW_HOLDER_OWNER};
pub use placeholder::shell_pattern;
pub use remote::ScheduledPartitions;
pub use swarm::{choose_kinds, draw_faults};
pub use worktree::LinkedWorktrees;
