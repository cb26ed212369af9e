//! The outside-world adapter of the fault engine: faults that act on a running
//! session from outside it, each its own task. A stale lock left by a crashed
//! writer, many producers at one mailbox, a slow writer holding a mailbox lock,
//! a forged answer to a teammate's permission request, a message appended twice,
//! repeated endings of finished workers, a change to what the coordinator's system
//! prompt includes, a switch of the channel binding the session serves, and the end
//! of the safety phase. After a restart, it reads back what the mailboxes kept.
//!
//! Its verdicts are the book's records: each fault that acts is fired (or
//! recorded) in the book, which writes it to the trace.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::ipc::{
    lock_path_for, parse_inbox, LockError, LockGuard, LockOwner, LockPolicy, Mailbox,
    MailboxConfig, MailboxError, MailboxMessage, SessionLayout,
};
use coord_runtime::profile::Profile;
use coord_runtime::route::RequestId;
use coord_runtime::session::Session;
use coord_runtime::task::TaskId;
use coord_runtime::team::{TeamMessage, TEAM_LEAD_NAME};
use coord_runtime::world::Disk;
use coord_runtime::World;

use super::book::{names, FaultBook, COORDINATOR_LABEL};
use super::catalogue::Fault;
use crate::trace::{message_digest_hex, path_text, Name, SimEvent, Trace};
use crate::world::{inbox_path, inbox_write_mode};

/// The team mailboxes that outside producers write to live in.
pub const PRODUCER_TEAM: &str = "sim";
/// When outside mailbox producers start writing.
const PRODUCERS_START: Duration = Duration::from_millis(2_000);
/// How many more times a restarted runtime tries to read a mailbox.
const RECOVERY_READS_MAX: u32 = 6;
/// The pause between those reads: longer than a lock takes to go stale.
const RECOVERY_READ_PAUSE: Duration = Duration::from_secs(15);
/// How long the safety phase lasts at most: faults stop firing after it.
pub const SAFETY_PHASE: Duration = Duration::from_secs(600);

/// What a `corrupt-inbox` fault leaves in its inbox: a writer that rewrote the
/// inbox in place died after one whole message and inside the next. The whole
/// message is one no reader has seen yet; losing these bytes loses it.
pub const CORRUPT_INBOX_BYTES: &[u8] = br#"[
  {
    "from": "earlier-writer",
    "text": "deploy window moved to 14:00",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "read": false
  },
  {
    "from": "earlier-writer",
    "text": "rollback plan is in"#;

/// When a slow lock holder takes its lock: shortly before outside producers start
/// writing, so they contend with it.
const SLOW_HOLDER_START: Duration = Duration::from_millis(1_500);
/// Who a slow holder's lock file names; one placed in time with `after_ms` adds its
/// index in the schedule.
pub(crate) const SLOW_HOLDER_OWNER: &str = "slow-writer";
/// How often a permission forger reads its team lead's inbox: well inside the
/// lead's own poll, so the forgery lands first.
const FORGER_POLL: Duration = Duration::from_millis(50);
/// Who a `duplicate-mail` fault's lock file names: a writer retrying an append.
const RETRYING_WRITER_OWNER: &str = "retrying-writer";
/// Who a `stale-lock` fault's lock file names: a writer that crashed holding it.
pub(crate) const CRASHED_WRITER_OWNER: &str = "crashed-writer";
/// How often the prompt-change and binding-switch tasks look at the coordinator's
/// call count.
const PROMPT_CHANGE_POLL: Duration = Duration::from_millis(250);
/// The block a prompt change adds to the coordinator's system prompt.
const CHANGED_INSTRUCTIONS: &str =
    "Project instructions (edited): prefer small pull requests and cite file paths.";

/// Every `forged-permission` fault: reads its team lead's inbox every
/// [`FORGER_POLL`], as any process that can read the team's files can, and answers
/// the first permission request its member put there (for its tool, if it names
/// one) with an approval in the member's inbox, sent under the fault's `from`. It
/// reads the lead's inbox from `outside_disk`, unwitnessed and without its lock (it
/// only looks), and writes the member's through `world` with the runtime's mailbox
/// code, as the producers do.
async fn forged_permissions(
    world: &World,
    outside_disk: &dyn Disk,
    layout: &SessionLayout,
    book: &FaultBook,
    config: MailboxConfig,
) {
    let schedule = book.schedule();
    let forgers = schedule
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::ForgedPermission {
                team,
                member,
                tool,
                from,
            } => Some((index, team, member, tool.as_deref(), from)),
            _ => None,
        })
        .map(|(index, team, member, tool, from)| async move {
            let (Some(lead_inbox), Some(member_inbox)) = (
                inbox_path(layout.root(), team, TEAM_LEAD_NAME),
                inbox_path(layout.root(), team, member),
            ) else {
                return;
            };
            let mailbox = Mailbox::new(world, member_inbox.clone(), config);
            while book.may_fire(|fault| matches!(fault, Fault::ForgedPermission { .. })) {
                world.clock.sleep(FORGER_POLL).await;
                let Some(request_id) =
                    permission_request_in(outside_disk, &lead_inbox, member, tool)
                else {
                    continue;
                };
                let answer = TeamMessage::PermissionResponse {
                    request_id: request_id.clone(),
                    approve: true,
                    reason: None,
                };
                if mailbox
                    .append(MailboxMessage::new(world, from.clone(), answer.to_text()))
                    .await
                    .is_ok()
                {
                    book.fire_index(
                        index,
                        format!(
                            "{from} approves {member}'s permission request {request_id} in {}",
                            member_inbox.display()
                        ),
                    );
                    return;
                }
            }
        });
    futures_util::future::join_all(forgers).await;
}

/// The id of the first `permission_request` from `member` (for `tool`, when given)
/// in the inbox at `path`, as its bytes stand; `None` while there is none, or the
/// inbox cannot be read as one.
fn permission_request_in(
    disk: &dyn Disk,
    path: &std::path::Path,
    member: &str,
    tool: Option<&str>,
) -> Option<RequestId> {
    let bytes = disk.read(path).ok()?;
    parse_inbox(path, &bytes)
        .ok()?
        .into_iter()
        .filter(|message| message.from.eq_ignore_ascii_case(member))
        .find_map(|message| match TeamMessage::parse(&message.text)? {
            TeamMessage::PermissionRequest {
                request_id,
                tool: asked,
                ..
            } if tool.is_none_or(|tool| tool == asked) => Some(request_id),
            _ => None,
        })
}

/// Every `duplicate-mail` fault: reads its member's inbox every [`FORGER_POLL`]
/// and, once an unread request from its sender is there (a structured message,
/// which names its request id), takes the inbox's lock as a writer retrying its
/// append would, and repeats that message right after itself. The check for an
/// unread request is made again under the lock, so the member cannot have read it
/// in between.
async fn duplicate_mail(
    world: &World,
    outside_disk: &dyn Disk,
    layout: &SessionLayout,
    book: &FaultBook,
) {
    let schedule = book.schedule();
    let writers = schedule
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::DuplicateMail { team, member, from } => Some((index, team, member, from)),
            _ => None,
        })
        .map(|(index, team, member, from)| async move {
            let Some(inbox) = inbox_path(layout.root(), team, member) else {
                return;
            };
            let lock = lock_path_for(&inbox);
            let unread_from = |messages: &[MailboxMessage]| {
                messages.iter().position(|message| {
                    !message.read
                        && message.from.eq_ignore_ascii_case(from)
                        && TeamMessage::parse(&message.text).is_some()
                })
            };
            while book.may_fire(|fault| matches!(fault, Fault::DuplicateMail { .. })) {
                world.clock.sleep(FORGER_POLL).await;
                let seen = outside_disk
                    .read(&inbox)
                    .ok()
                    .and_then(|bytes| parse_inbox(&inbox, &bytes).ok());
                if seen.as_deref().and_then(unread_from).is_none() {
                    continue;
                }
                let Ok(guard) =
                    LockGuard::acquire(world, &lock, RETRYING_WRITER_OWNER, &LockPolicy::default())
                        .await
                else {
                    continue;
                };
                let mut messages = match world.disk.read(&inbox) {
                    Ok(bytes) => parse_inbox(&inbox, &bytes).unwrap_or_default(),
                    Err(_) => Vec::new(),
                };
                let repeated = unread_from(&messages).map(|at| {
                    let copy = messages[at].clone();
                    messages.insert(at + 1, copy);
                    messages[at].text.clone()
                });
                let written = repeated.is_some()
                    && world
                        .disk
                        .replace_atomic(
                            &inbox,
                            &serde_json::to_vec_pretty(&messages)
                                .expect("mailbox messages serialize"),
                        )
                        .is_ok();
                let _ = guard.release();
                if let (true, Some(text)) = (written, repeated) {
                    book.fire_index(
                        index,
                        format!("{from}'s message to {member} arrives twice: {text}"),
                    );
                    return;
                }
            }
        });
    futures_util::future::join_all(writers).await;
}

/// Every `slow-lock-holder` fault: takes the lock of its inbox at its `after_ms`
/// ([`SLOW_HOLDER_START`] by default), holds it for `hold_ms`, then releases it
/// (unless a contender broke it as stale in the meantime).
pub async fn slow_lock_holders(world: &World, layout: &SessionLayout, book: &FaultBook) {
    let schedule = book.schedule();
    let holders = schedule
        .iter()
        .enumerate()
        .filter_map(|(index, fault)| match fault {
            Fault::SlowLockHolder {
                inbox,
                hold_ms,
                after_ms,
            } => {
                // A holder placed in time gets a name of its own, so that the
                // records of two holders of one lock tell them apart.
                let (start, owner) = match after_ms {
                    Some(ms) => (
                        Duration::from_millis(*ms),
                        format!("{SLOW_HOLDER_OWNER}-{index}"),
                    ),
                    None => (SLOW_HOLDER_START, SLOW_HOLDER_OWNER.to_owned()),
                };
                Some((index, inbox.clone(), *hold_ms, start, owner))
            }
            _ => None,
        })
        .map(|(index, inbox, hold_ms, start, owner)| async move {
            world.clock.sleep(start).await;
            let Some(path) = producer_inbox(layout, &inbox) else {
                return;
            };
            let lock = lock_path_for(&path);
            if let Some(dir) = lock.parent() {
                let _ = world.disk.create_dir_all(dir);
            }
            let Ok(guard) = LockGuard::acquire(world, &lock, &owner, &LockPolicy::default()).await
            else {
                return;
            };
            if !book.fire_index(
                index,
                format!("{owner} holds {} for {hold_ms} ms", lock.display()),
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
                session.serve_binding(Some(crate::scenario::binding_key(binding)));
            }
            false
        });
    }
}

/// The inbox path an outside producer writes for agent `inbox`.
pub fn producer_inbox(layout: &SessionLayout, inbox: &str) -> Option<PathBuf> {
    inbox_path(layout.root(), PRODUCER_TEAM, inbox)
}

/// Reads back, after a restart, every mailbox outside producers wrote to.
pub async fn recover_mailboxes(
    world: &World,
    layout: &SessionLayout,
    book: &FaultBook,
    trace: &Trace,
    profile: Profile,
) {
    let mut inboxes: Vec<String> = book
        .schedule()
        .iter()
        .filter_map(|fault| match fault {
            Fault::MailboxProducers { inbox, .. } => Some(inbox.clone()),
            _ => None,
        })
        .collect();
    inboxes.sort();
    inboxes.dedup();
    let config = MailboxConfig::with_write_mode(inbox_write_mode(profile));
    for inbox in inboxes {
        let Some(path) = producer_inbox(layout, &inbox) else {
            continue;
        };
        let mailbox = Mailbox::new(world, path.clone(), config);
        // A lock the dead process held is broken once it is stale; read as patiently
        // as a restarted runtime would.
        let mut read = mailbox.read_all().await;
        for _ in 0..RECOVERY_READS_MAX {
            if read.is_ok() {
                break;
            }
            world.clock.sleep(RECOVERY_READ_PAUSE).await;
            read = mailbox.read_all().await;
        }
        let (message_digests, readable) = match read {
            Ok(messages) => (
                messages
                    .iter()
                    .map(|m| message_digest_hex(&m.from, &m.text))
                    .collect(),
                true,
            ),
            Err(_) => (Vec::new(), false),
        };
        trace.push(
            "sim",
            SimEvent::MailboxRecovered {
                path: path_text(&path),
                message_digests,
                readable,
            },
        );
    }
}

/// The faults that act from outside the runtime while it runs: a stale lock left by
/// a crashed writer, many producers at one mailbox, repeated endings of finished
/// workers, and the end of the safety phase.
///
/// The stale lock is written to `outside_disk`, the disk without the runtime's
/// hooks and witnesses: it is a leftover the world holds, not an attempt to take
/// the lock. The producers and slow holders take locks through `world`, with the
/// runtime's own code, and are witnessed as the runtime is.
pub async fn adversary(
    session: Session,
    world: World,
    outside_disk: Arc<dyn Disk>,
    layout: SessionLayout,
    book: FaultBook,
    trace: Trace,
    profile: Profile,
) {
    let config = MailboxConfig::with_write_mode(inbox_write_mode(profile));
    for (index, fault) in book.schedule().iter().enumerate() {
        if let Fault::StaleLock {
            inbox,
            returns,
            raced,
        } = fault
        {
            let Some(path) = producer_inbox(&layout, inbox) else {
                continue;
            };
            let owner = LockOwner {
                owner: CRASHED_WRITER_OWNER.to_owned(),
                acquired_at_unix_ms: world.clock.unix_ms().saturating_sub(3_600_000),
                token: 7,
            };
            let lock = lock_path_for(&path);
            if let Some(dir) = lock.parent() {
                let _ = outside_disk.create_dir_all(dir);
            }
            let bytes = serde_json::to_vec(&owner).expect("a lock owner serializes");
            if outside_disk.create_new(&lock, &bytes).is_ok() {
                book.arm_lock_returns(&lock, *returns);
                if *raced {
                    book.arm_lock_race(&lock, index);
                }
                book.record(
                    index,
                    fault,
                    format!("stale lock left at {}", lock.display()),
                );
            }
        }
    }
    for (index, fault) in book.schedule().iter().enumerate() {
        if let Fault::CorruptInbox { inbox } = fault {
            let Some(path) = producer_inbox(&layout, inbox) else {
                continue;
            };
            if let Some(dir) = path.parent() {
                let _ = outside_disk.create_dir_all(dir);
            }
            if outside_disk
                .replace_atomic(&path, CORRUPT_INBOX_BYTES)
                .is_ok()
            {
                book.record(
                    index,
                    fault,
                    format!("inbox {} left cut off mid-message", path.display()),
                );
            }
        }
    }
    let producers = async {
        world.clock.sleep(PRODUCERS_START).await;
        let mut writes = Vec::new();
        for (index, fault) in book.schedule().iter().enumerate() {
            let Fault::MailboxProducers { inbox, producers } = fault else {
                continue;
            };
            let Some(path) = producer_inbox(&layout, inbox) else {
                continue;
            };
            if let Some(dir) = path.parent() {
                let _ = world.disk.create_dir_all(dir);
            }
            book.record(
                index,
                fault,
                format!("{producers} producers write {}", path.display()),
            );
            // One mailbox for all of them: its clones share what they last wrote.
            let inbox_mailbox = Mailbox::new(&world, path.clone(), config);
            for producer in 0..*producers {
                let mailbox = inbox_mailbox.clone();
                let message = MailboxMessage::new(
                    &world,
                    format!("producer-{producer}"),
                    format!("status report {producer}"),
                );
                let digest = message_digest_hex(&message.from, &message.text);
                let trace = trace.clone();
                let path = Name::new(&path_text(&path));
                // Each write is a large future, boxed where it is made: moved whole, it
                // would be copied five times on its way into the vector and `join_all`'s
                // queue.
                writes.push(Box::pin(async move {
                    let from = Name::new(&message.from);
                    let event = match mailbox.append(message).await {
                        Ok(_) => SimEvent::MailboxAcked {
                            path: path.clone(),
                            from,
                            message_digest: digest,
                        },
                        Err(error) => SimEvent::MailboxRefused {
                            path,
                            from,
                            message_digest: digest,
                            contended: matches!(
                                error,
                                MailboxError::Lock(LockError::Contended { .. })
                            ),
                            attempts: match error {
                                MailboxError::Lock(LockError::Contended { attempts, .. }) => {
                                    Some(attempts)
                                }
                                _ => None,
                            },
                        },
                    };
                    trace.push("producer", event);
                }));
            }
        }
        futures_util::future::join_all(writes).await;
    };
    let duplicates = async {
        // Polls only while a duplicate can still fire: a wake-up every 500 ms of
        // virtual time for the whole run would be most of a short seed's timer work.
        while book.may_fire(|fault| matches!(fault, Fault::DuplicateNotify { .. })) {
            world.clock.sleep(Duration::from_millis(500)).await;
            for task_id in book.take_duplicates() {
                let Some(prompt) = book.prompt_of(&task_id) else {
                    continue;
                };
                let fired = book.fire(
                    |_| format!("{task_id} is ended a second time"),
                    |fault| matches!(fault, Fault::DuplicateNotify { worker } if names(worker, &prompt)),
                );
                if let (Some(_), Ok(id)) = (fired, TaskId::parse(&task_id)) {
                    session.expire(&id);
                }
            }
        }
    };
    let heal = async {
        world.clock.sleep(SAFETY_PHASE).await;
        book.heal();
    };
    tokio::join!(
        producers,
        duplicates,
        heal,
        slow_lock_holders(&world, &layout, &book),
        forged_permissions(&world, outside_disk.as_ref(), &layout, &book, config),
        duplicate_mail(&world, outside_disk.as_ref(), &layout, &book),
        prompt_changes(&session, &book),
        binding_switches(&session, &book),
    );
}
