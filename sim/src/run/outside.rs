//! Faults that act on a running session from outside it, each its own task: a slow
//! writer holding a mailbox lock, a change to what the coordinator's system prompt
//! includes, and a switch of the channel binding the session serves.

use std::time::Duration;

use coord_runtime::ipc::{lock::lock_path_for, LockGuard, LockPolicy, SessionLayout};
use coord_runtime::session::Session;
use coord_runtime::World;

use super::book::{FaultBook, COORDINATOR_LABEL};
use super::producer_inbox;
use crate::scenario::Fault;

/// When a slow lock holder takes its lock: shortly before outside producers start
/// writing, so they contend with it.
const SLOW_HOLDER_START: Duration = Duration::from_millis(1_500);
/// Who the slow holder's lock file names.
const SLOW_HOLDER_OWNER: &str = "slow-writer";
/// How often the prompt-change and binding-switch tasks look at the coordinator's
/// call count.
const PROMPT_CHANGE_POLL: Duration = Duration::from_millis(250);
/// The block a prompt change adds to the coordinator's system prompt.
const CHANGED_INSTRUCTIONS: &str =
    "Project instructions (edited): prefer small pull requests and cite file paths.";

/// Every `slow-lock-holder` fault: takes the lock of its inbox at
/// [`SLOW_HOLDER_START`], holds it for `hold_ms`, then releases it (unless a
/// contender broke it as stale in the meantime).
pub async fn slow_lock_holders(world: &World, layout: &SessionLayout, book: &FaultBook) {
    world.clock.sleep(SLOW_HOLDER_START).await;
    let schedule = book.schedule();
    let holders = schedule
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::SlowLockHolder { inbox, hold_ms } => Some((index, inbox.clone(), *hold_ms)),
            _ => None,
        })
        .map(|(index, inbox, hold_ms)| async move {
            let Some(path) = producer_inbox(layout, &inbox) else {
                return;
            };
            let lock = lock_path_for(&path);
            if let Some(dir) = lock.parent() {
                let _ = world.disk.create_dir_all(dir);
            }
            let Ok(guard) =
                LockGuard::acquire(world, &lock, SLOW_HOLDER_OWNER, &LockPolicy::default()).await
            else {
                return;
            };
            if !book.fire_index(
                index,
                format!(
                    "{SLOW_HOLDER_OWNER} holds {} for {hold_ms} ms",
                    lock.display()
                ),
            ) {
                return;
            }
            world.clock.sleep(Duration::from_millis(hold_ms)).await;
            let _ = guard.release();
        });
    futures_util::future::join_all(holders).await;
}

/// Every `cache-breaking-prompt-change` fault: once the coordinator has made its
/// nth model call, a block is added to its system prompt.
pub async fn prompt_changes(session: &Session, book: &FaultBook) {
    let mut pending: Vec<(usize, u32)> = book
        .schedule()
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::CacheBreakingPromptChange { call } => Some((index, *call)),
            _ => None,
        })
        .collect();
    while !pending.is_empty() && !book.healed() {
        session.world().clock.sleep(PROMPT_CHANGE_POLL).await;
        let calls = book.calls_of(COORDINATOR_LABEL);
        pending.retain(|&(index, call)| {
            if calls < call {
                return true;
            }
            let fired = book.fire_index(
                index,
                format!("the coordinator's system prompt changes after its call {call}"),
            );
            if fired {
                session.amend_system_prompt(CHANGED_INSTRUCTIONS);
            }
            false
        });
    }
}

/// Every `binding-switch` fault: once the coordinator has made its nth model call,
/// the session serves the fault's binding, as a harness does when a message arrives
/// from another chat.
pub async fn binding_switches(session: &Session, book: &FaultBook) {
    let mut pending: Vec<(usize, u32, String)> = book
        .schedule()
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::BindingSwitch {
                after_call,
                binding,
            } => Some((index, *after_call, binding.clone())),
            _ => None,
        })
        .collect();
    while !pending.is_empty() && !book.healed() {
        session.world().clock.sleep(PROMPT_CHANGE_POLL).await;
        let calls = book.calls_of(COORDINATOR_LABEL);
        pending.retain(|(index, after_call, binding)| {
            if calls < *after_call {
                return true;
            }
            let fired = book.fire_index(
                *index,
                format!("the session serves binding {binding} after the coordinator's call {after_call}"),
            );
            if fired {
                session.serve_binding(Some(super::binding_key(binding)));
            }
            false
        });
    }
}
