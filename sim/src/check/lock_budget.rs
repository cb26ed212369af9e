//! PROTOCOL.md §4's lock rule, judged on the disk's record of every attempt: a
//! writer retries a held mailbox lock up to 10 times, waiting between attempts with
//! exponential backoff from 5 to 100 ms, and past that budget its write fails
//! loudly. Part of invariant 5 ("a failed write is reported to its sender"), so it
//! reports as `mailbox-durability`.
//!
//! The numbers are the protocol's, never the runtime's settings: a runtime whose
//! budget shrank to 5 retries must not shrink the checker's with it. The runtime's
//! jitter makes each wait between half and all of its nominal length
//! (`runtime/src/ipc/lock.rs`); a wait is seen rounded up to the clock's step.
//!
//! A lock record names the wall-clock time its holder took it (§4): one the disk
//! saw taken with a record more than a second off the clock is a violation, since
//! the stale rule reads that time. A lock's age is the disk's, from when its
//! holder's create succeeded (`run/lock_witness.rs`).
//!
//! A lock may be broken only when stale, and the break is logged (§4): every lock
//! file the disk saw moved aside must have the runtime's `stale_lock_broken` (or
//! `unreadable_lock_broken`) at that moment, and none whose record is younger than
//! the stale threshold every profile documents, 10 s (docs/profiles.md), may be
//! broken: its writer may be alive and mid-write.
//!
//! A holder gives back only its own lock: a lock file removed by a writer whose
//! record it no longer held (its lock was broken and someone else took it) is a
//! violation. A writer that did not crash gives its lock back whether its write
//! went through or failed: a lock file left once the run is over is a violation,
//! unless the fault engine left it (a crashed writer's, or a slow holder's the
//! run ended before), failed an operation on it, or the host crashed.
//!
//! Every taking of a lock is held to the backoff and the budget. A taking an
//! outside producer gave up on is also held to using the whole budget, and a write
//! acknowledged to one to having taken the lock: those are the writers whose
//! end the simulator sees for itself, since nothing else cancels them.

use std::collections::BTreeMap;
use std::time::Duration;

use coord_runtime::ipc::WriteMode;
use coord_runtime::profile::Profile;
use coord_runtime::RuntimeEvent;

use super::{Invariant, Violation};
use crate::fault::{Fault, CRASHED_WRITER_OWNER, SLOW_HOLDER_OWNER};
use crate::trace::{
    path_text, EventRef, LockAttempt, LockAttemptOutcome, Name, SimEvent, TraceEntry,
};
use crate::world::inbox_write_mode;

/// Retries after the first attempt (PROTOCOL.md §4).
const RETRIES_MAX: usize = 10;
/// The first backoff (PROTOCOL.md §4).
const BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest backoff (PROTOCOL.md §4).
const BACKOFF_MAX: Duration = Duration::from_millis(100);

/// The stale threshold of every profile (docs/profiles.md): a lock whose record is
/// younger may belong to a live writer, and breaking it is never right. The
/// documented number, not the runtime's setting, as for the budget above.
const STALE_AFTER_MS: u64 = 10_000;

/// Whether `path` is a team's file (`…/teams/<team>/team.json`), which every
/// profile replaces atomically: a crash after an in-place rewrite leaves it empty
/// or cut short, and a team file that does not parse shuts every member out of
/// its team.
fn is_team_file(path: &str) -> bool {
    let mut parts = path.rsplit('/');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some("team.json"), Some(_team), Some("teams"))
    )
}

/// How a write at `path` (`replaced`: by an atomic replace) wrote a team inbox
/// (`…/teams/<team>/inboxes/<agent>.json`): atomically when it went to a
/// temporary file beside the inbox (`.<agent>.json.<n>.tmp`, renamed over it
/// next) or replaced it, in place when it went to the inbox itself. `None` for a
/// write to anything else.
fn inbox_write_is_atomic(path: &str, replaced: bool) -> Option<bool> {
    let mut parts = path.rsplit('/');
    let (Some(file), Some("inboxes"), Some(_team), Some("teams")) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if file.starts_with('.') && file.ends_with(".tmp") && file.contains(".json.") {
        return Some(true);
    }
    file.ends_with(".json").then_some(replaced)
}

/// The nominal wait after failed attempt `k` (0-based), in µs.
fn nominal_us(k: usize) -> u64 {
    let doubled =
        BACKOFF_MIN.saturating_mul(1u32.checked_shl(k.min(31) as u32).unwrap_or(u32::MAX));
    u64::try_from(doubled.min(BACKOFF_MAX).as_micros()).unwrap_or(u64::MAX)
}

/// How an outside producer's write ended, as the producer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProducerEnd {
    Acked,
    /// Refused; `contended` when the refusal said the lock stayed held, after
    /// the number of `attempts` it gave.
    Refused {
        contended: bool,
        attempts: Option<u32>,
    },
}

/// What one taking of a lock looked like.
struct Taking<'t> {
    time_ms: u64,
    lock: &'t str,
    owner: &'t str,
    clock_step_us: u64,
    attempts: &'t [LockAttempt],
    breaks: u32,
}

impl Taking<'_> {
    /// Gaps between attempts that were backoffs (not the retry after a break).
    fn backoffs(&self) -> usize {
        self.attempts
            .iter()
            .skip(1)
            .filter(|a| !a.after_break)
            .count()
    }

    /// Gaps between attempts, whatever their kind.
    fn retries(&self) -> usize {
        self.attempts.len().saturating_sub(1)
    }

    fn last_outcome(&self) -> Option<LockAttemptOutcome> {
        self.attempts.last().map(|a| a.outcome)
    }

    fn names(&self) -> String {
        format!("{}'s taking of {}", self.owner, self.lock)
    }
}

/// A lock file the disk saw moved aside as stale.
struct BreakSeen<'a> {
    lock: &'a str,
    at_ms: u64,
    /// Its record's age then, when its record named a time.
    age_ms: Option<u64>,
    /// The owner its record named.
    owner: Option<&'a str>,
}

/// The lock rule over `trace`'s [`SimEvent::LockAcquisition`]s and its outside
/// producers' acknowledgements and refusals.
pub fn lock_budget(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut takings: Vec<Taking<'_>> = Vec::new();
    // Breaks the disk saw, each with its record's age and owner, and the ones the
    // runtime logged, by lock and time.
    let mut breaks_seen: Vec<BreakSeen<'_>> = Vec::new();
    let mut breaks_logged: BTreeMap<(String, u64), usize> = BTreeMap::new();
    // Outside producers' outcomes by lock file and owner: acknowledged, or refused
    // and whether the refusal said contended.
    // Keyed by the mailbox file and the sender.
    let mut producers: BTreeMap<(&str, &str), Vec<(u64, ProducerEnd)>> = BTreeMap::new();
    let mut misreleases = Vec::new();
    // Whether the profile writes inboxes atomically, and so reads them under the
    // lock (PROTOCOL.md §4); Claude Code's in-place inboxes are read without it.
    let mut reads_under_lock = false;
    // The inbox writes the disk saw that were not in the profile's write mode,
    // and whether a fault that writes inboxes its own way was scheduled.
    let mut inbox_writes_wrong: Vec<String> = Vec::new();
    let mut outside_inbox_writer = false;
    // The team files the disk saw rewritten in place.
    let mut team_files_rewritten: Vec<String> = Vec::new();
    let mut locks_left: &[(Name, Option<Name>)] = &[];
    let mut host_crashed = false;
    // What each fault the engine fired did: a lock it failed an operation on may
    // stay behind.
    let mut faults_fired: Vec<&str> = Vec::new();
    for entry in trace {
        let event = match entry.typed.as_ref() {
            EventRef::Sim(event) => event,
            EventRef::Runtime(
                RuntimeEvent::StaleLockBroken { path, .. }
                | RuntimeEvent::UnreadableLockBroken { path },
            ) => {
                *breaks_logged
                    .entry((path_text(path), entry.time_ms))
                    .or_default() += 1;
                continue;
            }
            EventRef::Runtime(_) => continue,
        };
        match event {
            SimEvent::LockBroken {
                lock,
                at_ms,
                age_ms,
                owner,
            } => {
                breaks_seen.push(BreakSeen {
                    lock,
                    at_ms: *at_ms,
                    age_ms: *age_ms,
                    owner: owner.as_deref(),
                });
            }
            SimEvent::LockMisreleased {
                lock,
                at_ms,
                holder,
                remover,
            } => misreleases.push(format!(
                "{remover} removed {lock} at {at_ms} ms, when its record named {holder}: a lock broken as stale and taken again belongs to its new holder"
            )),
            SimEvent::LockOverlapped {
                lock,
                at_ms,
                holder,
                taker,
            } => misreleases.push(format!(
                "{taker} took {lock} at {at_ms} ms while {holder} held it: a lock is taken by an exclusive create, which fails while the lock file exists"
            )),
            SimEvent::RunStarted { profile, .. } => {
                reads_under_lock = profile
                    .parse::<Profile>()
                    .is_ok_and(|profile| inbox_write_mode(profile) == WriteMode::Atomic);
            }
            SimEvent::FaultsScheduled { faults } => {
                outside_inbox_writer = faults.iter().any(|fault| {
                    matches!(
                        fault,
                        Fault::DuplicateMail { .. } | Fault::CorruptInbox { .. }
                    )
                });
            }
            SimEvent::DiskWrite {
                path,
                replaced,
                target_kept: false,
                agent: None,
                ..
            } => {
                if is_team_file(path.as_str()) && !replaced {
                    team_files_rewritten.push(format!(
                        "{path} was rewritten in place at {} ms: a team's file is replaced atomically (temp file, fsync, rename, fsync the directory) in every profile, or a crash mid-write shuts every member out of the team",
                        entry.time_ms
                    ));
                }
                let Some(atomic) = inbox_write_is_atomic(path.as_str(), *replaced) else {
                    continue;
                };
                if atomic != reads_under_lock {
                    let (did, should) = match atomic {
                        true => ("replaced atomically", "rewrites it in place"),
                        false => ("rewritten in place", "replaces it atomically"),
                    };
                    inbox_writes_wrong.push(format!(
                        "{path} was {did} at {} ms, where PROTOCOL.md §4 has this profile's inbox writer that {should}",
                        entry.time_ms
                    ));
                }
            }
            SimEvent::LockMisstamped {
                lock,
                at_ms,
                stamped_unix_ms,
                clock_unix_ms,
            } => misreleases.push(format!(
                "{lock} was taken at {at_ms} ms with a record naming {stamped_unix_ms} ms since the Unix epoch, when the clock read {clock_unix_ms}: a lock record names the wall-clock time it was taken, which the stale rule reads"
            )),
            SimEvent::InboxWrittenUnlocked { inbox, at_ms } => {
                misreleases.push(format!(
                    "{inbox} was written at {at_ms} ms while no one held its lock: every inbox is written under its lock"
                ));
            }
            SimEvent::InboxReadUnlocked { inbox, at_ms } if reads_under_lock => {
                misreleases.push(format!(
                    "{inbox} was read at {at_ms} ms while no one held its lock: an inbox written atomically is read under its lock"
                ));
            }
            SimEvent::LocksLeft { locks } => locks_left = locks,
            SimEvent::HostCrashed { .. } => host_crashed = true,
            SimEvent::FaultFired { detail, .. } => faults_fired.push(detail),
            SimEvent::LockAcquisition {
                lock,
                owner,
                clock_step_us,
                attempts,
                breaks,
            } => takings.push(Taking {
                time_ms: entry.time_ms,
                lock,
                owner,
                clock_step_us: *clock_step_us,
                attempts,
                breaks: *breaks,
            }),
            SimEvent::MailboxAcked { path, from, .. } => producers
                .entry((path, from))
                .or_default()
                .push((entry.time_ms, ProducerEnd::Acked)),
            SimEvent::MailboxRefused {
                path,
                from,
                contended,
                attempts,
                ..
            } => producers.entry((path, from)).or_default().push((
                entry.time_ms,
                ProducerEnd::Refused {
                    contended: *contended,
                    attempts: *attempts,
                },
            )),
            _ => {}
        }
    }
    let mut violations = Vec::new();
    let mut report = |detail: String| {
        violations.push(Violation::new(Invariant::MailboxDurability, detail));
    };
    for detail in misreleases.into_iter().chain(team_files_rewritten) {
        report(detail);
    }
    // A duplicate-mail or corrupt-inbox fault writes inboxes its own way.
    if !outside_inbox_writer {
        for detail in inbox_writes_wrong {
            report(detail);
        }
    }
    // Whether a lock file by `owner` may have been left behind: by the fault
    // engine's own writers, or by a fault on the lock file, or by a host crash.
    let may_be_left = |lock: &str, owner: Option<&str>| {
        host_crashed
            || owner.is_some_and(|owner| {
                owner == CRASHED_WRITER_OWNER || owner.starts_with(SLOW_HOLDER_OWNER)
            })
            || faults_fired.iter().any(|detail| detail.contains(lock))
    };
    for (lock, owner) in locks_left {
        if !may_be_left(lock, owner.as_deref()) {
            report(format!(
                "{lock} was still held by {} when the run was over: a writer that did not crash gives its lock back, whether its write went through or failed",
                owner.as_deref().unwrap_or("an unreadable record")
            ));
        }
    }
    for BreakSeen {
        lock,
        at_ms,
        age_ms,
        owner,
    } in breaks_seen
    {
        if !may_be_left(lock, owner) {
            report(format!(
                "{lock} was broken as stale at {at_ms} ms, but {} left it without crashing: a writer gives its lock back, whether its write went through or failed",
                owner.unwrap_or("an unreadable record")
            ));
        }
        match breaks_logged.get_mut(&(lock.to_owned(), at_ms)) {
            Some(logged) if *logged > 0 => *logged -= 1,
            _ => report(format!(
                "{lock} was moved aside at {at_ms} ms, and the runtime logged no broken lock then"
            )),
        }
        if let Some(age_ms) = age_ms.filter(|age| *age < STALE_AFTER_MS) {
            report(format!(
                "{lock} was broken at {at_ms} ms when its record was {age_ms} ms old, younger than the {STALE_AFTER_MS} ms stale threshold: its writer may be alive"
            ));
        }
    }
    for taking in &takings {
        if let Some(detail) = backoff_broken(taking) {
            report(detail);
        }
        if taking.breaks as usize > RETRIES_MAX {
            report(format!(
                "{} broke a stale lock {} times, past the budget of {RETRIES_MAX}: a lock that keeps going stale must end in a loud failure, not a loop",
                taking.names(),
                taking.breaks
            ));
        }
        if taking.backoffs() > RETRIES_MAX {
            report(format!(
                "{} waited out the lock {} times, past the budget of {RETRIES_MAX} retries ({} attempts, the last at {} µs)",
                taking.names(),
                taking.backoffs(),
                taking.attempts.len(),
                taking.attempts.last().map_or(0, |a| a.at_us),
            ));
        }
    }
    // The takings of each mailbox's lock, by the mailbox file and the owner.
    let mut owned: BTreeMap<(&str, &str), Vec<&Taking<'_>>> = BTreeMap::new();
    for taking in &takings {
        if let Some(mailbox) = taking.lock.strip_suffix(".lock") {
            owned
                .entry((mailbox, taking.owner))
                .or_default()
                .push(taking);
        }
    }
    for ((mailbox, owner), outcomes) in &producers {
        let taking = match owned.get(&(*mailbox, *owner)).map(Vec::as_slice) {
            None => None,
            Some([taking]) => Some(*taking),
            // Two producers of one name at one mailbox (two faults placing
            // producers there): which taking was whose is not known.
            Some(_) => continue,
        };
        let [(time_ms, outcome)] = outcomes.as_slice() else {
            continue;
        };
        // A write the disk saw no taking of made its one attempt and took the lock.
        match (outcome, taking) {
            (ProducerEnd::Acked, Some(taking)) if taking.last_outcome() != Some(LockAttemptOutcome::Taken) => {
                report(format!(
                    "{owner}'s write to {} was acknowledged at {time_ms} ms, but its last attempt on the lock {}: the write went ahead without the lock",
                    mailbox,
                    match taking.last_outcome() {
                        Some(LockAttemptOutcome::Held) => "found it held",
                        _ => "failed",
                    }
                ));
            }
            (ProducerEnd::Refused { contended: true, .. }, None) => report(format!(
                "{owner}'s write to {} was refused at {time_ms} ms as contended, but the disk saw no attempt on its lock that failed",
                mailbox
            )),
            (
                ProducerEnd::Refused {
                    contended: true,
                    attempts,
                },
                Some(taking),
            ) => {
                let claimed = attempts.map(|n| n as usize);
                if claimed.is_some_and(|claimed| claimed != taking.attempts.len()) {
                    report(format!(
                        "{} was refused at {time_ms} ms after {} attempts by its own account, but the disk saw {}",
                        taking.names(),
                        claimed.unwrap_or_default(),
                        taking.attempts.len()
                    ));
                }
                if taking.last_outcome() != Some(LockAttemptOutcome::Held) {
                    report(format!(
                        "{} was refused at {time_ms} ms as contended, but its last attempt did not find the lock held",
                        taking.names()
                    ));
                } else if taking.retries() < RETRIES_MAX {
                    report(format!(
                        "{} gave up at {time_ms} ms after {} retries: the budget is {RETRIES_MAX}",
                        taking.names(),
                        taking.retries()
                    ));
                }
            }
            _ => {}
        }
    }
    violations
}

/// The first wait of `taking` outside its backoff, described.
///
/// The k-th backoff lasts between half and all of `nominal(k)`, seen rounded up to
/// the clock's step. After a retry that followed someone's break of the lock, the
/// count of backoffs so far is uncertain by the number of such retries, and the
/// bounds widen to cover each count.
fn backoff_broken(taking: &Taking<'_>) -> Option<String> {
    let (mut backoffs, mut after_breaks) = (0usize, 0usize);
    for pair in taking.attempts.windows(2) {
        let [before, after] = pair else {
            continue;
        };
        if after.after_break {
            after_breaks += 1;
            continue;
        }
        let waited_us = after.at_us.saturating_sub(before.at_us);
        let counts = backoffs..=backoffs + after_breaks;
        let least_us = counts.clone().map(|k| nominal_us(k) / 2).min().unwrap_or(0);
        let most_us = counts.map(nominal_us).max().unwrap_or(0);
        let slack_us = taking.clock_step_us;
        if waited_us < least_us || waited_us > most_us.saturating_add(slack_us) {
            return Some(format!(
                "{} waited {waited_us} µs before retry {} (at {} µs); backoff {} waits {least_us} to {most_us} µs (logged at {} ms)",
                taking.names(),
                backoffs + after_breaks + 1,
                after.at_us,
                backoffs + 1,
                taking.time_ms,
            ));
        }
        backoffs += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Name, TraceEvent};

    fn attempt(at_ms: u64, outcome: LockAttemptOutcome) -> LockAttempt {
        LockAttempt {
            at_us: at_ms * 1_000,
            outcome,
            after_break: false,
        }
    }

    fn sim(time_ms: u64, event: SimEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "sim".into(),
            typed: TraceEvent::Sim(event),
        }
    }

    /// The runtime's log of breaking the inbox's lock, held by `owner`, at `time_ms`.
    fn logged_break(time_ms: u64, owner: &str, age_ms: u64) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "runtime".into(),
            typed: TraceEvent::runtime(RuntimeEvent::StaleLockBroken {
                path: "/s/inbox.json.lock".into(),
                owner: owner.to_owned(),
                age_ms,
            }),
        }
    }

    /// A producer's taking that waited `waits_ms` between attempts, then took the
    /// lock (`taken`) or gave up.
    fn taking(waits_ms: &[u64], taken: bool) -> TraceEntry {
        let mut at_ms = 2_000;
        let mut attempts = vec![attempt(at_ms, LockAttemptOutcome::Held)];
        for (i, wait) in waits_ms.iter().enumerate() {
            at_ms += wait;
            let last = i + 1 == waits_ms.len();
            let outcome = if last && taken {
                LockAttemptOutcome::Taken
            } else {
                LockAttemptOutcome::Held
            };
            attempts.push(attempt(at_ms, outcome));
        }
        sim(
            9_000,
            SimEvent::LockAcquisition {
                lock: Name::new("/s/inbox.json.lock"),
                owner: Name::new("producer-1"),
                clock_step_us: 1_000,
                attempts: attempts.into(),
                breaks: 0,
            },
        )
    }

    fn refused(contended: bool) -> TraceEntry {
        refused_after(contended, None)
    }

    /// A refusal that says it made `attempts` attempts, when it says.
    fn refused_after(contended: bool, attempts: Option<u32>) -> TraceEntry {
        sim(
            2_700,
            SimEvent::MailboxRefused {
                path: Name::new("/s/inbox.json"),
                from: Name::new("producer-1"),
                message_digest: "d".to_owned(),
                contended,
                attempts,
            },
        )
    }

    fn acked() -> TraceEntry {
        sim(
            2_700,
            SimEvent::MailboxAcked {
                path: Name::new("/s/inbox.json"),
                from: Name::new("producer-1"),
                message_digest: "d".to_owned(),
            },
        )
    }

    /// The waits of a whole budget, each `fraction` of its nominal length.
    fn budget_waits(retries: usize, fraction: f64) -> Vec<u64> {
        (0..retries)
            .map(|k| ((nominal_us(k) as f64 * fraction) / 1_000.0).ceil() as u64)
            .collect()
    }

    #[test]
    fn a_refusal_after_the_whole_budget_with_backoff_passes() {
        // Goal: the runtime's behaviour passes at both ends of the jitter.
        for fraction in [0.5, 1.0] {
            let trace = [taking(&budget_waits(10, fraction), false), refused(true)];
            assert!(lock_budget(&trace).is_empty(), "{fraction}");
        }
        let trace = [taking(&[3, 6, 12], true), acked()];
        assert!(lock_budget(&trace).is_empty());
    }

    #[test]
    fn a_short_budget_a_long_one_and_a_wrong_backoff_are_violations() {
        // Goal: each way of breaking §4's rule is named: giving up after 9
        // retries, retrying an 11th time, waits that do not double, and a write
        // acknowledged whose last attempt found the lock held.
        let short = lock_budget(&[taking(&budget_waits(9, 0.75), false), refused(true)]);
        assert!(short[0].detail.contains("after 9 retries"), "{short:?}");
        let long = lock_budget(&[taking(&budget_waits(11, 0.75), false), refused(true)]);
        assert!(
            long.iter().any(|v| v.detail.contains("past the budget")),
            "{long:?}"
        );
        let mut looping = taking(&budget_waits(10, 0.75), false);
        if let TraceEvent::Sim(SimEvent::LockAcquisition { breaks, .. }) = &mut looping.typed {
            *breaks = 11;
        }
        let looped = lock_budget(&[looping, refused(true)]);
        assert!(
            looped[0].detail.contains("broke a stale lock 11 times"),
            "{looped:?}"
        );
        let flat = lock_budget(&[taking(&[5; 10], false), refused(true)]);
        assert!(flat[0].detail.contains("before retry 3"), "{flat:?}");
        let unlocked = lock_budget(&[taking(&[3, 6], false), acked()]);
        assert!(
            unlocked[0].detail.contains("without the lock"),
            "{unlocked:?}"
        );
        let claimed = lock_budget(&[refused(true)]);
        assert!(claimed[0].detail.contains("no attempt"), "{claimed:?}");
        // The refusal's own count of its attempts is the disk's.
        let whole = taking(&budget_waits(10, 0.75), false);
        assert!(lock_budget(&[whole.clone(), refused_after(true, Some(11))]).is_empty());
        let miscounted = lock_budget(&[whole, refused_after(true, Some(10))]);
        assert!(
            miscounted[0]
                .detail
                .contains("after 10 attempts by its own account, but the disk saw 11"),
            "{miscounted:?}"
        );
        // A refusal that was not for contention (a disk fault) owes no budget.
        assert!(lock_budget(&[taking(&[3], false), refused(false)]).is_empty());
    }

    #[test]
    fn a_break_must_be_logged_and_of_a_lock_no_writer_holds() {
        // Goal: a lock moved aside is a violation unless the runtime logged the
        // break at that moment, and a break of a lock younger than the documented
        // 10 s threshold is one whatever the runtime logged.
        let broken = |age_ms| {
            sim(
                9_000,
                SimEvent::LockBroken {
                    lock: Name::new("/s/inbox.json.lock"),
                    at_ms: 2_000,
                    owner: Some(Name::new("crashed-writer")),
                    age_ms: Some(age_ms),
                },
            )
        };
        let logged = logged_break(2_000, "crashed-writer", 3_600_000);
        assert!(lock_budget(&[logged.clone(), broken(3_600_000)]).is_empty());
        let silent = lock_budget(&[broken(3_600_000)]);
        assert!(
            silent[0].detail.contains("logged no broken lock"),
            "{silent:?}"
        );
        let live = lock_budget(&[logged.clone(), broken(9_999)]);
        assert!(
            live[0]
                .detail
                .contains("younger than the 10000 ms stale threshold"),
            "{live:?}"
        );
        assert!(lock_budget(&[logged, broken(10_000)]).is_empty());
    }

    #[test]
    fn a_retry_after_a_break_is_no_backoff() {
        // Goal: the immediate retry after a stale lock was broken neither counts
        // against the budget nor has to wait.
        let TraceEvent::Sim(SimEvent::LockAcquisition { attempts, .. }) =
            taking(&budget_waits(10, 0.5), false).typed
        else {
            unreachable!()
        };
        let mut attempts = attempts.into_vec();
        let at = attempts[3].at_us;
        attempts.insert(
            4,
            LockAttempt {
                at_us: at,
                outcome: LockAttemptOutcome::Held,
                after_break: true,
            },
        );
        let event = SimEvent::LockAcquisition {
            lock: Name::new("/s/inbox.json.lock"),
            owner: Name::new("producer-1"),
            clock_step_us: 1_000,
            attempts: attempts.into(),
            breaks: 0,
        };
        assert!(lock_budget(&[sim(9_000, event), refused(true)]).is_empty());
    }

    fn left(owner: &str) -> TraceEntry {
        sim(
            9_000,
            SimEvent::LocksLeft {
                locks: vec![(Name::new("/s/inbox.json.lock"), Some(Name::new(owner)))],
            },
        )
    }

    #[test]
    fn a_lock_left_or_broken_must_be_a_crashed_or_faulted_writers() {
        // Goal: a lock file that outlives a live writer is a violation, whether it
        // is still there at the end or a later writer broke it as stale; the fault
        // engine's own writers, a fault on the lock file and a host crash explain
        // one.
        let kept = lock_budget(&[left("producer-3")]);
        assert!(
            kept[0].detail.contains("still held by producer-3"),
            "{kept:?}"
        );
        assert!(lock_budget(&[left(CRASHED_WRITER_OWNER)]).is_empty());
        assert!(lock_budget(&[left("slow-writer-2")]).is_empty());
        let faulted = sim(
            3_000,
            SimEvent::FaultFired {
                fault: 0,
                kind: crate::fault::FaultKind::Disk,
                detail: "remove_file /s/inbox.json.lock: Eio".to_owned(),
                agent: None,
            },
        );
        assert!(lock_budget(&[faulted, left("producer-3")]).is_empty());
        let crashed = sim(
            3_000,
            SimEvent::HostCrashed {
                lost: Vec::new(),
                changed: Vec::new(),
            },
        );
        assert!(lock_budget(&[crashed, left("producer-3")]).is_empty());
        let logged = logged_break(20_000, "producer-3", 10_000);
        let broken = sim(
            30_000,
            SimEvent::LockBroken {
                lock: Name::new("/s/inbox.json.lock"),
                at_ms: 20_000,
                owner: Some(Name::new("producer-3")),
                age_ms: Some(10_000),
            },
        );
        let stale = lock_budget(&[logged, broken]);
        assert!(
            stale[0].detail.contains("left it without crashing"),
            "{stale:?}"
        );
    }

    #[test]
    fn a_lock_removed_by_a_writer_that_no_longer_held_it_is_a_violation() {
        // Goal: the witness's record of a release that took another holder's lock
        // is reported with both owners.
        let taken = lock_budget(&[sim(
            30_000,
            SimEvent::LockMisreleased {
                lock: Name::new("/s/inbox.json.lock"),
                at_ms: 21_500,
                holder: Name::new("slow-writer-1"),
                remover: Name::new("slow-writer"),
            },
        )]);
        assert!(
            taken[0]
                .detail
                .contains("slow-writer removed /s/inbox.json.lock at 21500 ms, when its record named slow-writer-1"),
            "{taken:?}"
        );
    }

    #[test]
    fn an_inbox_write_is_atomic_when_it_goes_to_a_temporary_file_beside_it() {
        // Goal: the write mode is read from the paths the disk saw: the runtime's
        // temporary file beside the inbox, or an atomic replace, is atomic; a
        // write to the inbox itself is in place; anything else is no inbox write.
        let inboxes = "/session/teams/crew/inboxes";
        assert_eq!(
            inbox_write_is_atomic(&format!("{inboxes}/.alpha.json.7.tmp"), false),
            Some(true)
        );
        assert_eq!(
            inbox_write_is_atomic(&format!("{inboxes}/alpha.json"), false),
            Some(false)
        );
        assert_eq!(
            inbox_write_is_atomic(&format!("{inboxes}/alpha.json"), true),
            Some(true)
        );
        assert_eq!(
            inbox_write_is_atomic(&format!("{inboxes}/alpha.json.lock"), false),
            None
        );
        assert_eq!(
            inbox_write_is_atomic("/session/tasks/a1.output", false),
            None
        );
    }

    #[test]
    fn a_team_file_rewritten_in_place_is_a_violation() {
        // Goal: the team file's write mode is read from the writes the disk saw,
        // in every profile: an atomic replace passes, a rewrite in place fails,
        // and an inbox or a file merely named team.json elsewhere is not judged.
        let write = |path: &str, replaced: bool| {
            sim(
                1_000,
                SimEvent::DiskWrite {
                    path: Name::new(path),
                    resolved_path: Name::new(path),
                    through_symlink: false,
                    target_kept: false,
                    replaced,
                    agent: None,
                    cwd: None,
                },
            )
        };
        let team_file = "/session/teams/crew/team.json";
        assert!(lock_budget(&[write(team_file, true)]).is_empty());
        let in_place = lock_budget(&[write(team_file, false)]);
        assert_eq!(in_place.len(), 1, "{in_place:?}");
        assert!(
            in_place[0].detail.contains("rewritten in place at 1000 ms"),
            "{in_place:?}"
        );
        assert!(lock_budget(&[write("/work/docs/team.json", false)]).is_empty());
        assert!(is_team_file(team_file));
        assert!(!is_team_file("/session/teams/crew/inboxes/team.json"));
    }
}
