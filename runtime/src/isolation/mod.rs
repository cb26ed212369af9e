//! Worker isolation: worktree slugs, the worktree lifecycle, and path confinement.
//!
//! A worker spawned with `isolation: worktree` works in a git worktree of its own
//! under `.claude/worktrees/<slug>` on the branch `worktree-<slug>` (PROTOCOL.md §2).
//! This module owns the three decisions around that:
//!
//! - [`WorktreeSlug`]: which slugs are acceptable, and how a slug maps to a directory
//!   name and a branch name. Every [`Vcs`](crate::world::Vcs) implementation uses this
//!   mapping, so the real git backend and the simulated overlay agree.
//! - [`prepare`] and [`finish`]: a worktree is made before the worker starts; when it
//!   ends, a worktree without changes is removed with its branch, and one with changes
//!   is kept so that the notification can report its path and branch.
//! - [`contains`] and [`within`]: whether a path lies inside a writer's worktree, or
//!   inside the session and workspace roots (invariant 7: no file is written outside
//!   them). The tool gate calls them for every write.

mod confine;
mod lifecycle;
mod slug;

pub use confine::{contains, normalize, within};
pub use lifecycle::{finish, prepare, WorktreeOutcome};
pub use slug::{SlugError, WorktreeSlug, SLUG_CHARS_MAX};
