//! Teams: the team file, teammates, idle state, cooperative shutdown, permission
//! forwarding (PROTOCOL.md §4 and §5).
//!
//! A team is a directory `<root>/teams/<team>/` holding `team.json` (who is in it,
//! replaced atomically under a lock) and `inboxes/` (one mailbox per member). Every
//! exchange between teammates goes through those files, so a team survives any of
//! its processes restarting:
//!
//! - `file`: the team file's contents and the errors of every team operation.
//! - `handle`: [`Team`], load/save/add/remove under the file lock.
//! - `color`: member colours from a fixed palette, in join order.
//! - `message`: the structured messages teammates exchange through mailboxes.
//! - `inbox`: exactly-once polling of a member's mailbox.
//! - `idle`: idle flags and on-idle callbacks, once per transition, and what an
//!   idle member's mailbox wakes it with.
//! - `shutdown`: the cooperative shutdown handshake, and a running member's side of it.
//! - `permission`: tool-permission requests to the lead and the bounded wait.

mod color;
mod file;
mod handle;
mod idle;
mod inbox;
mod message;
mod permission;
mod shutdown;

pub use color::{color_for_join, PALETTE};
pub use file::{Member, TeamError, TeamFile};
pub use handle::{team_file_path, IdleCallback, Team};
pub use idle::IdleMail;
pub use inbox::{take_unread, take_unread_where, Delivery};
pub use message::TeamMessage;
pub use permission::{needs_permission, PermissionAnswer};
pub use shutdown::{ShutdownError, ShutdownHandshake};

/// The name the lead (a session's main thread) has in every team it leads.
pub const TEAM_LEAD_NAME: &str = "team-lead";
