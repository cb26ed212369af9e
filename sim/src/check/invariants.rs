//! The single-trace checkers, one function per invariant.

use std::collections::{BTreeMap, BTreeSet};

use coord_runtime::envelope::EnvelopeStatus;
use coord_runtime::profile::Profile;
use coord_runtime::task::TaskStatus;
use coord_runtime::tools::ToolName;

use super::surfaces::Surface;
use coord_runtime::RuntimeEvent;

use super::spawn_answers::is_shell_id;
use super::{Invariant, Violation};
use crate::fault::FaultKind;
use crate::model::FORK_PLACEHOLDER_RESULT;
use crate::run::transcript_path;
use crate::trace::{
    EventRef, PermissionAsked, SimEvent, TeamMember, TraceEntry, TraceEvent, UsageSeen,
    CLOCK_STOOD_STILL, COORDINATOR_CUT_OFF, RESTART_FAILED,
};
use crate::world::STANDSTILL_READS;

/// The roots the runtime may write under: the session and the workspace.
const WRITABLE_ROOTS: [&str; 2] = ["/session", "/work"];

/// Whether `path` is `root` or below it, component by component as
/// [`Path::starts_with`](std::path::Path::starts_with) compares.
///
/// Tests the bytes first: every disk write of a run is checked, the disk reports
/// them with normalized paths, and comparing components costs ten times as much.
fn is_under(path: &str, root: &str) -> bool {
    let bytes_under = path
        .strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    // A path spelled otherwise (`//session`, `/./session`) is compared properly.
    bytes_under || std::path::Path::new(path).starts_with(root)
}

pub(super) fn runtime_events(trace: &[TraceEntry]) -> impl Iterator<Item = (u64, &RuntimeEvent)> {
    trace.iter().filter_map(|entry| match &entry.typed {
        TraceEvent::Runtime(event) => Some((entry.time_ms, &**event)),
        TraceEvent::Sim(_) => None,
    })
}

fn sim_events(trace: &[TraceEntry]) -> impl Iterator<Item = (u64, &SimEvent)> {
    trace.iter().filter_map(|entry| match &entry.typed {
        TraceEvent::Sim(event) => Some((entry.time_ms, event)),
        TraceEvent::Runtime(_) => None,
    })
}

/// The tasks that reached a terminal state before the run ended.
fn ended_before_run_end(trace: &[TraceEntry]) -> BTreeSet<String> {
    trace
        .iter()
        .take_while(|entry| !matches!(&entry.typed, TraceEvent::Sim(SimEvent::RunEnded { .. })))
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Runtime(event) => match &**event {
                RuntimeEvent::TaskTransitioned { task_id, to, .. } if to.is_terminal() => {
                    Some(task_id.to_string())
                }
                _ => None,
            },
            TraceEvent::Sim(_) => None,
        })
        .collect()
}

/// When the coordinator host first crashed, if it did: mailbox writes acknowledged
/// before it must survive it.
fn first_crash_ms(trace: &[TraceEntry]) -> Option<u64> {
    sim_events(trace)
        .find_map(|(time, event)| matches!(event, SimEvent::HostCrashed { .. }).then_some(time))
}

/// Tasks whose durable record the disk refused to write before a crash of the host.
///
/// A restarted runtime settles every task from its record: running tasks end failed
/// with one notification, terminal ones keep their ending. That is all the protocol
/// can promise for what the disk made durable; a task whose last record write failed
/// (journaled as `task_record_unsaved`) before the host went down may be settled
/// from an older record, so it may end a second time after the restart. Its
/// notification still comes at most once: delivery is recorded in the coordinator's
/// own log, not in the task record.
fn unsaved_before_crash(trace: &[TraceEntry]) -> BTreeSet<String> {
    let mut unsaved = BTreeSet::new();
    let mut exempt = BTreeSet::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::TaskRecordUnsaved { task_id, .. }) => {
                unsaved.insert(task_id.to_string());
            }
            EventRef::Sim(SimEvent::HostCrashed { .. }) => exempt.append(&mut unsaved),
            _ => {}
        }
    }
    exempt
}

/// At most this many times are listed in a violation.
const TIMES_SHOWN_MAX: usize = 5;

fn times(list: &[u64]) -> String {
    let mut shown: Vec<String> = list
        .iter()
        .take(TIMES_SHOWN_MAX)
        .map(|t| format!("{t} ms"))
        .collect();
    if list.len() > TIMES_SHOWN_MAX {
        shown.push(format!("and {} more", list.len() - TIMES_SHOWN_MAX));
    }
    shown.join(", ")
}

/// Invariant 1: every task ends once, and the coordinator accepts exactly one
/// notification for it, except a background shell it stopped with TaskStop, for
/// which it accepts none. A crash of the host changes nothing: a task that died
/// with the process is failed by the restarted runtime and notified once. Only a
/// task whose record the disk refused before the crash ([`unsaved_before_crash`])
/// may end twice or go unreported; never is it accepted twice.
///
/// A missing envelope is judged once the coordinator finished, or was cut off at
/// the run limit, having waited as long as a run may: a crash earlier in the run
/// excuses its unplayed turns (invariant 14) but not an envelope for a task that
/// ended and was never sent (a restart that forgets to notify again).
///
/// Which shells were stopped is judged by what the coordinator's model was told
/// (TaskStop results without an error), not by the runtime's account of how the
/// shell ended: a runtime that forgets to silence a stopped shell still ends it
/// `killed`.
pub fn notify_once(trace: &[TraceEntry]) -> Vec<Violation> {
    const FINISHED: &str = "finished";
    let unsaved = unsaved_before_crash(trace);
    let mut spawned: BTreeMap<String, u64> = BTreeMap::new();
    let mut terminal: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    // A foreground spawn hands its result back inline instead of notifying; whether
    // the coordinator may spawn one at all is invariant 3's question.
    let mut foreground: BTreeSet<String> = BTreeSet::new();
    for (time, event) in runtime_events(trace) {
        match event {
            RuntimeEvent::TaskSpawned {
                task_id,
                run_in_background,
                ..
            } => {
                spawned.insert(task_id.to_string(), time);
                if !run_in_background {
                    foreground.insert(task_id.to_string());
                }
            }
            RuntimeEvent::TaskTransitioned { task_id, to, .. } if to.is_terminal() => {
                terminal.entry(task_id.to_string()).or_default().push(time);
            }
            _ => {}
        }
    }
    // Shells the coordinator stopped, with when its model learned it.
    let mut stopped_shells: BTreeMap<String, u64> = BTreeMap::new();
    for (time, event) in sim_events(trace) {
        if let SimEvent::TasksStopped { task_ids } = event {
            for id in task_ids.iter().filter(|id| is_shell_id(id)) {
                stopped_shells.entry(id.clone()).or_insert(time);
            }
        }
    }
    let mut accepted: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    // The status each accepted envelope gave its task, and when.
    let mut told: BTreeMap<&str, Vec<(u64, EnvelopeStatus)>> = BTreeMap::new();
    let mut recorded: &[(String, TaskStatus)] = &[];
    // How the run left the coordinator, if it was finished or had waited as long
    // as a run may: either way, every envelope still missing was never sent.
    let mut waited_out: Option<&str> = None;
    let mut unanswered: Vec<&String> = Vec::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::LaunchesUnanswered { task_ids } => unanswered.extend(task_ids),
            SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            } => {
                for (id, status) in task_ids.iter().zip(statuses.iter()) {
                    accepted.entry(id.clone()).or_default().push(time);
                    told.entry(id).or_default().push((time, *status));
                }
            }
            SimEvent::TaskRecordsWitnessed { ended } => recorded = ended,
            SimEvent::RunEnded { coordinator, .. } => {
                waited_out = if coordinator.starts_with(FINISHED) {
                    Some(FINISHED)
                } else if coordinator == COORDINATOR_CUT_OFF {
                    Some("was cut off at the run limit")
                } else {
                    None
                };
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (id, ends) in &terminal {
        if ends.len() > 1 && !unsaved.contains(id) {
            violations.push(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "task {id} reached a terminal state {} times, at {}",
                    ends.len(),
                    times(ends)
                ),
            ));
        }
    }
    // The record a restart would reload must end the task as the coordinator was
    // told it ended: another status is a second ending.
    for (id, status) in recorded {
        let Some(told) = told.get(id.as_str()) else {
            continue;
        };
        for (at, envelope) in told
            .iter()
            .filter(|(_, envelope)| !reports(*envelope, *status, StopWording::Unknown))
        {
            violations.push(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "task {id}'s record on the disk ends it {status}, but the coordinator was told at {at} ms that it ended {envelope}"
                ),
            ));
        }
    }
    for (id, stopped_at) in &stopped_shells {
        if let Some(at) = accepted.get(id) {
            violations.push(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "background shell {id} was stopped (the coordinator's model got TaskStop's answer at {stopped_at} ms), yet the coordinator accepted an envelope for it at {}",
                    times(at)
                ),
            ));
        }
    }
    // A foreground task's result is its Agent call's answer: an envelope for one
    // is a second report, and after a restart one its waiter never asked for.
    for (id, at) in accepted.iter().filter(|(id, _)| foreground.contains(*id)) {
        violations.push(Violation::new(
            Invariant::NotifyOnce,
            format!(
                "the coordinator accepted a notification for task {id} at {}, which ran in the foreground: its result is its Agent call's answer, never an envelope",
                times(at)
            ),
        ));
    }
    for (id, at) in &accepted {
        if at.len() > 1 {
            violations.push(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "the coordinator accepted {} notifications for task {id}, at {}",
                    at.len(),
                    times(at)
                ),
            ));
        }
    }
    if let Some(how) = waited_out {
        // Judged on what the coordinator's model received: it was told of the
        // launch, and no envelope for the task ever reached it.
        // A task the cut-off coordinator waited on that never ended is invariant
        // 11's failure (liveness), not a lost envelope.
        let finished = how == FINISHED;
        // A cut-off run's teardown may end what still runs after the run ended (a
        // turmoil host's shutdown kills it): only an ending inside the run could
        // have been notified.
        let ended_in_run = ended_before_run_end(trace);
        let ended = |id: &str| {
            if finished {
                terminal.contains_key(id)
            } else {
                ended_in_run.contains(id)
            }
        };
        for id in unanswered
            .iter()
            .filter(|id| !unsaved.contains(id.as_str()))
            .filter(|id| finished || ended(id))
        {
            violations.push(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "the coordinator's model received task {id}'s launch, but no envelope for it before the coordinator {how}"
                ),
            ));
        }
        for (id, spawned_at) in &spawned {
            if ended(id)
                && !unanswered.contains(&id)
                && !unsaved.contains(id)
                && !stopped_shells.contains_key(id)
                && !foreground.contains(id)
                && !accepted.contains_key(id)
            {
                violations.push(Violation::new(
                    Invariant::NotifyOnce,
                    format!(
                        "task {id} (spawned at {spawned_at} ms) ended at {} but the coordinator, which {how}, never received its notification",
                        times(&terminal[id])
                    ),
                ));
            }
        }
    }
    violations.extend(notifications_held_back(trace));
    violations
}

/// Invariant 1 with PROTOCOL.md §3's injection: every notification pending when
/// the coordinator's next turn starts goes into that turn, all of them, not one a
/// turn. Judged on the requests the coordinator's model received: a notification
/// the runtime says it enqueued (its claim) before two of the coordinator's
/// requests were made (new calls, not retries or compactions) must be in one of
/// them. Two, not one: the runtime takes what is pending just before it writes
/// the delivery to its log, and a slow disk may let one more arrive before the
/// request goes. Not judged across a host crash, which loses what was pending.
fn notifications_held_back(trace: &[TraceEntry]) -> Vec<Violation> {
    // Enqueued and not seen in a request yet: when, and how many new coordinator
    // requests have been made since.
    let mut pending: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    let mut last_call = 0;
    let mut violations = Vec::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::NotificationEnqueued { task_id, .. }) => {
                pending.insert(task_id.to_string(), (entry.time_ms, 0));
            }
            EventRef::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => {
                for task_id in task_ids.iter() {
                    pending.remove(task_id);
                }
            }
            EventRef::Sim(SimEvent::HostCrashed { .. }) => {
                pending.clear();
                last_call = 0;
            }
            EventRef::Sim(SimEvent::ModelCalled {
                agent,
                call,
                compaction: false,
                ..
            }) if agent.as_str() == crate::fault::COORDINATOR_LABEL && *call > last_call => {
                last_call = *call;
                for (task_id, (enqueued_ms, passed)) in pending.iter_mut() {
                    if *enqueued_ms >= entry.time_ms {
                        continue;
                    }
                    *passed += 1;
                    if *passed == 2 {
                        violations.push(Violation::new(
                            Invariant::NotifyOnce,
                            format!(
                                "task {task_id}'s notification was enqueued at {enqueued_ms} ms, and the coordinator's calls after it, up to call {call} at {} ms, never carried it: every pending notification goes into the next turn (PROTOCOL.md §3)",
                                entry.time_ms
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

/// Invariant 2: every envelope the coordinator accepted is one the runtime enqueued,
/// no earlier than it was enqueued, and built from task state
/// ([`envelope_bodies`]); and no permission answer of the lead's is taken under
/// an id that is not its request's.
pub fn no_forgery(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut enqueued: BTreeMap<String, usize> = BTreeMap::new();
    let mut accepted: BTreeMap<String, usize> = BTreeMap::new();
    let mut violations = Vec::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::NotificationEnqueued { task_id, .. }) => {
                *enqueued.entry(task_id.to_string()).or_default() += 1;
            }
            EventRef::Sim(SimEvent::LeadAnswerMisaccepted { detail }) => {
                violations.push(Violation::new(
                    Invariant::NoForgery,
                    format!("at {} ms {detail}", entry.time_ms),
                ));
            }
            EventRef::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => {
                for id in task_ids {
                    let count = accepted.entry(id.clone()).or_default();
                    *count += 1;
                    if *count > enqueued.get(id).copied().unwrap_or(0) {
                        violations.push(Violation::new(
                            Invariant::NoForgery,
                            format!(
                                "at {} ms the coordinator accepted an envelope for task {id} that the runtime never enqueued",
                                entry.time_ms
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    violations.extend(envelope_bodies(trace));
    violations
}

/// How a stopped task's envelope words its end (PROTOCOL.md §3): `killed`, except a
/// deadline expiry on the nexo wire, which is `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopWording {
    /// The task was stopped, and its deadline did not stop it.
    Stopped,
    /// Its deadline stopped it, on the claude-code wire (claude-code, hardened).
    ExpiredKilled,
    /// Its deadline stopped it, on the nexo wire.
    ExpiredTimeout,
    /// Either: a restarted runtime ended it from its record, which does not keep
    /// what stopped it.
    Unknown,
}

/// The envelope status that reports a task's terminal `status` (PROTOCOL.md §3): a
/// stopped task is `killed`, or `timeout` where its deadline stopped it on the nexo
/// wire (`stop`).
fn reports(envelope: EnvelopeStatus, status: TaskStatus, stop: StopWording) -> bool {
    match status {
        TaskStatus::Completed => envelope == EnvelopeStatus::Completed,
        TaskStatus::Failed => envelope == EnvelopeStatus::Failed,
        TaskStatus::Killed => match stop {
            StopWording::Stopped | StopWording::ExpiredKilled => envelope == EnvelopeStatus::Killed,
            StopWording::ExpiredTimeout => envelope == EnvelopeStatus::Timeout,
            StopWording::Unknown => {
                matches!(envelope, EnvelopeStatus::Killed | EnvelopeStatus::Timeout)
            }
        },
        TaskStatus::Pending | TaskStatus::Running => false,
    }
}

/// Whether `summary` is the one PROTOCOL.md §3 words for a task that ended
/// `status`: `Agent "<description>" completed`, `… failed: <error>` or `… was
/// stopped`, a completed fork's first result line where `first_line_worded` (the
/// nexo wording, which words every completed fork so, and only forks), or a
/// background shell's `Background command "<description>" …`. Without the task's
/// description only the wording's start is judged. A task `renotified` by a
/// restarted runtime may have either wording: its record does not keep how its
/// summary was to be worded, only the task's kind.
fn summary_fits(
    task_id: &str,
    status: EnvelopeStatus,
    body: &crate::trace::EnvelopeBodySeen,
    first_line_worded: bool,
    renotified: bool,
) -> bool {
    if is_shell_id(task_id) {
        return body.summary.starts_with("Background command \"");
    }
    let cut = |text: String| -> String {
        text.chars()
            .take(crate::trace::BODY_TEXT_CHARS_MAX)
            .collect()
    };
    let worded = match &body.description {
        None => body.summary.starts_with("Agent \""),
        Some(description) => {
            let head = format!("Agent \"{description}\"");
            match status {
                EnvelopeStatus::Completed => body.summary == cut(format!("{head} completed")),
                EnvelopeStatus::Failed => {
                    body.summary.starts_with(&cut(format!("{head} failed: ")))
                }
                EnvelopeStatus::Killed | EnvelopeStatus::Timeout => {
                    body.summary == cut(format!("{head} was stopped"))
                }
            }
        }
    };
    let first_line = || {
        let line = body
            .result_head
            .as_deref()
            .unwrap_or("")
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("");
        line.chars().take(FIRST_LINE_CHARS_MAX).collect::<String>()
    };
    if first_line_worded && body.forked && status == EnvelopeStatus::Completed {
        body.summary == first_line() || (renotified && worded)
    } else {
        worded
    }
}

/// What is wrong with an envelope's `<duration_ms>` (PROTOCOL.md §1: the task's
/// time from its start to its end), judged against the run's clock: no longer than
/// from the coordinator's model answering with the call that launched the task to
/// the request that carried the envelope, and for a completed task no shorter than
/// its worker's first model call. Both sides are whole ms of one clock, read at
/// other moments: a ms of slack each way.
fn duration_unfit(body: &crate::trace::EnvelopeBodySeen, status: EnvelopeStatus) -> Option<String> {
    let usage = body.usage.as_ref()?;
    let duration_ms = usage.duration_ms;
    if let Some(max_ms) = usage.active_ms_max {
        if duration_ms > max_ms.saturating_add(1) {
            return Some(format!(
                "whose duration_ms {duration_ms} is longer than the {max_ms} ms from the call that launched it to the envelope"
            ));
        }
    }
    if let Some(min_ms) = usage.active_ms_min {
        if status == EnvelopeStatus::Completed && duration_ms.saturating_add(1) < min_ms {
            return Some(format!(
                "whose duration_ms {duration_ms} is shorter than its worker's first model call, {min_ms} ms"
            ));
        }
    }
    None
}

/// What is wrong with how an envelope names its task's launch (PROTOCOL.md §3 and
/// §4): its `<tool-use-id>` must be the Agent call whose answer launched the task,
/// and its `<output-file>` the task's own, `…/tasks/<task id>.output`, the file
/// that answer named.
fn launch_unfit(task_id: &str, body: &crate::trace::EnvelopeBodySeen) -> Option<String> {
    if let Some(call_id) = &body.launch_call_id {
        if body.tool_use_id.as_ref() != Some(call_id) {
            return Some(format!(
                "whose tool-use-id is {}, where the Agent call that launched it was {call_id}",
                body.tool_use_id.as_deref().unwrap_or("missing")
            ));
        }
    }
    let Some(output_file) = &body.output_file else {
        return body
            .output_file_answered
            .as_ref()
            .map(|answered| format!("with no output-file, where its launch named {answered}"));
    };
    if !output_file.ends_with(&format!("/tasks/{task_id}.output")) {
        return Some(format!(
            "whose output-file {output_file} is not the task's own, …/tasks/{task_id}.output"
        ));
    }
    match &body.output_file_answered {
        Some(answered) if answered != output_file => Some(format!(
            "whose output-file {output_file} is not the {answered} its launch named"
        )),
        _ => None,
    }
}

/// How many characters of its result's first line a fork's summary keeps in the
/// nexo wording (PROTOCOL.md §3).
const FIRST_LINE_CHARS_MAX: usize = 80;

/// Invariant 2's second half: an accepted envelope is built from task state
/// (PROTOCOL.md §3). Its status reports the one terminal state the runtime
/// recorded for the task before it; its summary is §3's for that end; a
/// completed task's result is text its worker's model said; a stopped task's
/// result is its partial output, the output file as the disk held it, or the
/// file's start and the runtime's notice that the rest failed to read, where a
/// fault the fault engine fired on that file explains the failure. Judged where
/// the simulated world witnessed the body (the tap's `bodies`).
fn envelope_bodies(trace: &[TraceEntry]) -> Vec<Violation> {
    // The output files a fired fault acted on: a read of one may rightly fail.
    let faulted_outputs: Vec<&str> = sim_events(trace)
        .filter_map(|(_, event)| match event {
            SimEvent::FaultFired { detail, .. } => Some(detail.as_str()),
            _ => None,
        })
        .collect();
    let output_faulted = |task_id: &str| {
        let file = format!("/tasks/{task_id}.output");
        faulted_outputs.iter().any(|detail| detail.contains(&file))
    };
    // Only nexo words a fork's summary by its result's first line, and a deadline
    // expiry `timeout` (§3).
    let nexo_wire = sim_events(trace).any(|(_, event)| {
        matches!(event, SimEvent::RunStarted { profile, .. } if profile.as_str() == "nexo")
    });
    // Tasks a restarted runtime notified again from their records.
    let renotified: BTreeSet<String> = trace
        .iter()
        .filter_map(|entry| match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::SessionRestored { renotified, .. }) => {
                Some(renotified.iter().map(ToString::to_string))
            }
            _ => None,
        })
        .flatten()
        .collect();
    let mut ends: BTreeMap<String, Vec<TaskStatus>> = BTreeMap::new();
    // Tasks the runtime says their deadline ended: the claim that decides whether
    // `timeout` is the right word, held to the wire the profile speaks.
    let mut expired: BTreeSet<String> = BTreeSet::new();
    let mut accepted: BTreeSet<&str> = BTreeSet::new();
    let mut violations = Vec::new();
    let mut flag = |detail: String| violations.push(Violation::new(Invariant::NoForgery, detail));
    for entry in trace {
        let time = entry.time_ms;
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::TaskTransitioned { task_id, to, .. })
                if to.is_terminal() =>
            {
                ends.entry(task_id.to_string()).or_default().push(*to);
            }
            EventRef::Runtime(RuntimeEvent::DeadlineExpired { task_id }) => {
                expired.insert(task_id.to_string());
            }
            EventRef::Sim(SimEvent::EnvelopeUnescaped { detail }) => {
                flag(format!("at {time} ms {detail}"));
            }
            EventRef::Sim(SimEvent::EnvelopeMisread { detail }) => {
                flag(format!("at {time} ms {detail} (PROTOCOL.md §3)"));
            }
            EventRef::Sim(SimEvent::EnvelopesAccepted {
                task_ids,
                statuses,
                bodies,
            }) => {
                for (index, (task_id, status)) in task_ids.iter().zip(statuses).enumerate() {
                    // A second envelope for a task is invariant 1's finding,
                    // whatever it says.
                    if !accepted.insert(task_id) {
                        continue;
                    }
                    let Some(body) = bodies.get(index) else {
                        // A real coordinator's envelopes: the task ends the
                        // observation knows are inferred from the wire, not
                        // recorded by the process, and are not compared.
                        continue;
                    };
                    // A task that ended twice (its record lost in a crash) is
                    // invariant 1's finding; one that has not ended, or whose end
                    // a restarted runtime decided from its disk, has no end to
                    // compare with.
                    let again = renotified.contains(task_id.as_str());
                    let stop = match (again, expired.contains(task_id.as_str())) {
                        (true, _) => StopWording::Unknown,
                        (false, false) => StopWording::Stopped,
                        (false, true) if nexo_wire => StopWording::ExpiredTimeout,
                        (false, true) => StopWording::ExpiredKilled,
                    };
                    if let Some([end]) = ends.get(task_id).map(Vec::as_slice) {
                        if !reports(*status, *end, stop) {
                            flag(format!(
                                "at {time} ms the coordinator accepted a {status} envelope for task {task_id}, which ended {end}"
                            ));
                        }
                    }
                    if !summary_fits(task_id, *status, body, nexo_wire, again) {
                        flag(format!(
                            "at {time} ms the coordinator accepted a {status} envelope for task {task_id} whose summary {} is not the one its end is worded with{}",
                            short_label(&body.summary),
                            body.description
                                .as_ref()
                                .map(|d| format!(" (its description is {})", short_label(d)))
                                .unwrap_or_default()
                        ));
                    }
                    // A runtime that lost the worker's last words (it died before
                    // notifying, or the host crashed) reports the output file.
                    let cut_by_fault = body.result_is_output_cut && output_faulted(task_id);
                    let said = body.result_said != Some(false)
                        || body.result_is_output == Some(true)
                        || cut_by_fault;
                    if *status == EnvelopeStatus::Completed && !said {
                        flag(format!(
                            "at {time} ms the coordinator accepted a completed envelope for task {task_id} whose result {} is no text its worker's model said",
                            short_label(body.result_head.as_deref().unwrap_or(""))
                        ));
                    }
                    if let Some(UsageSeen {
                        total_tokens,
                        tool_uses,
                        billed: Some((billed_tokens, billed_tool_uses)),
                        ..
                    }) = &body.usage
                    {
                        let usage_true =
                            total_tokens == billed_tokens && tool_uses == billed_tool_uses;
                        if *status == EnvelopeStatus::Completed && !usage_true {
                            flag(format!(
                                "at {time} ms the coordinator accepted a completed envelope for task {task_id} whose usage says {total_tokens} tokens and {tool_uses} tool uses, where the model API billed its answered calls {billed_tokens} tokens (the latest input and every output) and {billed_tool_uses} tool calls"
                            ));
                        }
                    }
                    if body.usage_owed {
                        flag(format!(
                            "at {time} ms the coordinator accepted a {status} envelope for task {task_id} with no <usage>, though the runtime that sent it ran the task: only a restarted runtime, reloading a task that ended before it, has none to give"
                        ));
                    }
                    if let Some(detail) = duration_unfit(body, *status) {
                        flag(format!(
                            "at {time} ms the coordinator accepted a {status} envelope for task {task_id} {detail}"
                        ));
                    }
                    if let Some(detail) = launch_unfit(task_id, body) {
                        flag(format!(
                            "at {time} ms the coordinator accepted a {status} envelope for task {task_id} {detail}"
                        ));
                    }
                    let stopped =
                        matches!(status, EnvelopeStatus::Killed | EnvelopeStatus::Timeout);
                    if stopped && body.result_is_output == Some(false) && !cut_by_fault {
                        flag(format!(
                            "at {time} ms the coordinator accepted a {status} envelope for task {task_id} whose result {} is not the output its file held",
                            short_label(body.result_head.as_deref().unwrap_or(""))
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

/// Invariant 3: in coordinator mode every spawn by the coordinator runs in the
/// background, so no tool round of the coordinator waits for a worker: every
/// answer its model received to an Agent call is a launch, never the worker's
/// result inline. A trace without the tap's record of those answers (a real
/// coordinator's, observed from outside) is judged by its record of foreground
/// spawns instead.
pub fn never_blocks(trace: &[TraceEntry]) -> Vec<Violation> {
    let coordinator_mode = sim_events(trace).any(|(_, event)| {
        matches!(
            event,
            SimEvent::RunStarted {
                coordinator_mode: true,
                ..
            }
        )
    });
    if !coordinator_mode {
        return Vec::new();
    }
    let answers_seen =
        sim_events(trace).any(|(_, event)| matches!(event, SimEvent::SpawnAnswered { .. }));
    if answers_seen {
        return sim_events(trace)
            .filter_map(|(time, event)| match event {
                SimEvent::SpawnAnswered {
                    agent,
                    background: false,
                    ..
                } if agent.as_str() == crate::fault::COORDINATOR_LABEL => Some(Violation::new(
                    Invariant::NeverBlocks,
                    format!("at {time} ms the coordinator's model received a worker's result inline for its Agent call: the coordinator waited for it"),
                )),
                _ => None,
            })
            .collect();
    }
    runtime_events(trace)
        .filter_map(|(time, event)| match event {
            RuntimeEvent::TaskSpawned {
                task_id,
                parent,
                run_in_background: false,
            } if parent == "coordinator" => Some(Violation::new(
                Invariant::NeverBlocks,
                format!("at {time} ms the coordinator spawned task {task_id} in the foreground and waited for it"),
            )),
            _ => None,
        })
        .collect()
}

/// The inbox of a team's lead: what is written there is read by the lead, never
/// handed to a teammate's task.
const LEAD_INBOX_FILE: &str = "team-lead.json";

/// Invariant 4: a recipient is never handed more messages than were queued for it.
///
/// An idle teammate is also handed the mail written to its inbox. The journal
/// names an inbox by its member and a delivery by its task, so mail written to any
/// teammate's inbox (not the lead's) counts towards what any recipient may be
/// handed: a redelivered queued message still shows wherever no mail was written.
pub fn message_delivery(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut queued: BTreeMap<&str, usize> = BTreeMap::new();
    let mut delivered: BTreeMap<&str, usize> = BTreeMap::new();
    let mut mailed = 0;
    // A message an outside writer appended a second time is one more in an inbox:
    // the runtime may hand both copies over.
    let repeated_at_ms: Vec<u64> = sim_events(trace)
        .filter_map(|(time, event)| match event {
            SimEvent::FaultFired {
                kind: FaultKind::DuplicateMail,
                ..
            } => Some(time),
            _ => None,
        })
        .collect();
    let mut violations = Vec::new();
    for (time, event) in runtime_events(trace) {
        match event {
            RuntimeEvent::MessageQueued { to, .. } => *queued.entry(to).or_default() += 1,
            RuntimeEvent::MailboxWritten { path, .. }
                if path.file_name().is_some_and(|name| name != LEAD_INBOX_FILE) =>
            {
                mailed += 1;
            }
            RuntimeEvent::MessagesDelivered { to, count } => {
                let total = delivered.entry(to).or_default();
                *total += count;
                let queued_so_far = queued.get(to.as_str()).copied().unwrap_or(0);
                let repeated = repeated_at_ms.iter().filter(|at| **at <= time).count();
                if *total > queued_so_far + mailed + repeated {
                    violations.push(Violation::new(
                        Invariant::MessageDelivery,
                        format!("at {time} ms {to} had been handed {total} messages but only {queued_so_far} were queued for it (and {mailed} written to teammates' inboxes)"),
                    ));
                }
            }
            _ => {}
        }
    }
    violations.extend(messages_received(trace));
    violations.extend(requests_answered_twice(trace));
    violations.extend(shutdowns_marked_unasked(trace));
    violations.extend(mail_stamped_early(trace));
    violations.extend(idle_members_called(trace));
    violations
}

/// Invariant 4's send time: a message in a team inbox carries the time it was
/// sent (PROTOCOL.md §4's `timestamp`), which cannot be earlier than the model
/// response that asked to send it. Judged on the inboxes as the disk holds them.
fn mail_stamped_early(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(_, event)| match event {
            SimEvent::MailStampedEarly { mail } => Some(mail),
            _ => None,
        })
        .flatten()
        .map(|mail| {
            Violation::new(
                Invariant::MessageDelivery,
                format!(
                    "message {} from {} in {}'s inbox is stamped {}, but no model asked to \
                     send it before {} ms of virtual time",
                    mail.message_digest, mail.from, mail.owner, mail.stamp, mail.called_ms
                ),
            )
        })
        .collect()
}

/// Invariant 4 for a shutdown request's sender: a member's `shutdown_requested`
/// flag says it has seen a shutdown request from its lead (PROTOCOL.md §5: the
/// response goes only to the lead). Judged on the team files as the disk holds
/// them: a member marked when no lead asked it took another member's request, or
/// a forged one, for its lead's.
fn shutdowns_marked_unasked(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(_, event)| match event {
            SimEvent::ShutdownsMarked { marked, asked } => Some((marked, asked)),
            _ => None,
        })
        .flat_map(|(marked, asked)| {
            marked
                .iter()
                .filter(|member| {
                    !asked
                        .iter()
                        .any(|name| name.eq_ignore_ascii_case(&member.member))
                })
                .map(|member| {
                    Violation::new(
                        Invariant::MessageDelivery,
                        format!(
                            "the file of team {} marks {} as asked to shut down, and its lead \
                             never asked it: only the lead's shutdown request marks a member",
                            member.team, member.member
                        ),
                    )
                })
        })
        .collect()
}

/// Invariant 4 for a request that arrived twice: it is still one request, and
/// its member answers it once. Judged on the lead's inbox as the disk holds it.
fn requests_answered_twice(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(_, event)| match event {
            SimEvent::ShutdownsWitnessed(seen) => Some(&seen.answered_twice),
            _ => None,
        })
        .flatten()
        .map(|answered| {
            Violation::new(
                Invariant::MessageDelivery,
                format!(
                    "the lead of {} holds {} answers from {} to its shutdown request {}: a \
                     request is answered once, however many times it arrived",
                    answered.member.team,
                    answered.answers,
                    answered.member.member,
                    answered.request_id
                ),
            )
        })
        .collect()
}

/// Invariant 4, judged on what the models received: each message the runtime
/// accepted appears in its recipient's requests exactly once, never twice, and is
/// never dropped unless a fault that reaches its recipient fired (a crashed
/// recipient never reads it; a stale or contended lock must not lose it); messages
/// from one sender to one recipient arrive in the order they were sent. A
/// message to the team lead, which has no model in the run, is judged on the
/// lead's inbox as the disk holds it. A broadcast is judged at every other member
/// of its sender's team, and must never reach its sender.
fn messages_received(trace: &[TraceEntry]) -> Vec<Violation> {
    let reach = fault_reach(trace);
    // A message sent after the host's last restart went to a runtime that had
    // already picked itself up from its disk: that crash cannot have lost it.
    let last_crash_ms = sim_events(trace)
        .filter(|(_, event)| matches!(event, SimEvent::HostCrashed { .. }))
        .map(|(time, _)| time)
        .last();
    let reach_after_restart = fault_reach_after_crashes(trace, last_crash_ms);
    let reach_of = |m: &crate::trace::MessageWitness| match (m.sent_ms, last_crash_ms) {
        (Some(sent), Some(crash)) if sent > crash => &reach_after_restart,
        _ => &reach,
    };
    // A stop ends its task with whatever was queued to it: a message accepted
    // before the recipient was stopped may rightly never reach it. One sent
    // after the stop must resume it (PROTOCOL.md §5), and is judged.
    let stopped = stopped_labels(trace);
    let dropped_by_stop = |m: &crate::trace::MessageWitness| {
        let stop_ms = stopped.get(m.to.as_str());
        matches!((m.sent_ms, stop_ms), (Some(sent), Some(&stop)) if sent <= stop)
    };
    let Some(messages) = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::MessagesWitnessed { messages } => Some(messages),
        _ => None,
    }) else {
        return Vec::new();
    };
    let out_of_order = messages.iter().filter_map(|m| {
        let later = m.overtaken_by.as_ref()?;
        Some(Violation::new(
            Invariant::MessageDelivery,
            format!(
                "message {} from {} to {} reached its model after message {later}, which was sent after it",
                m.message_digest,
                short_label(&m.from),
                short_label(&m.to)
            ),
        ))
    });
    // A broadcast's sender is left out of its recipients (PROTOCOL.md §5).
    let echoed = messages.iter().filter(|m| m.to_sender).map(|m| {
        Violation::new(
            Invariant::MessageDelivery,
            format!(
                "broadcast {} from {} reached its own sender {} times",
                m.message_digest,
                short_label(&m.from),
                m.received_count
            ),
        )
    });
    let miscounted = messages
        .iter()
        .filter(|m| !m.to_sender)
        .filter(|m| {
            m.received_count > 1
                || (m.received_count == 0
                    && !reach_of(m).covers(&m.to)
                    && !m.may_miss
                    && !dropped_by_stop(m))
        })
        .map(|m| {
            // The team lead has no model in the run: its messages wait in its inbox.
            let at = match m.to == coord_runtime::team::TEAM_LEAD_NAME {
                true => "the lead's inbox",
                false => "its model",
            };
            let what = match m.received_count {
                0 => format!("never reached {at}"),
                n => format!("reached {at} {n} times"),
            };
            Violation::new(
                Invariant::MessageDelivery,
                format!(
                    "message {} from {} to {} {what}",
                    m.message_digest,
                    short_label(&m.from),
                    short_label(&m.to)
                ),
            )
        });
    miscounted.chain(out_of_order).chain(echoed).collect()
}

/// Invariant 5: every mailbox write acknowledged before a crash is still there when
/// the restarted runtime reads the mailbox.
pub fn mailbox_durability(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = corrupt_inboxes_kept(trace);
    let Some(crash) = first_crash_ms(trace) else {
        return violations;
    };
    let mut acked: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::MailboxAcked {
                path,
                message_digest,
                ..
            } if time <= crash => acked
                .entry(path.as_str())
                .or_default()
                .push((time, message_digest)),
            SimEvent::MailboxRecovered {
                path,
                message_digests,
                readable,
            } => {
                let mut left: Vec<&str> = message_digests.iter().map(String::as_str).collect();
                let mut lost = Vec::new();
                for (acked_at, digest) in acked.get(path.as_str()).into_iter().flatten() {
                    match left.iter().position(|d| d == digest) {
                        Some(found) => {
                            left.remove(found);
                        }
                        None => lost.push(*acked_at),
                    }
                }
                if !lost.is_empty() {
                    let state = if *readable { "readable" } else { "unreadable" };
                    violations.push(Violation::new(
                        Invariant::MailboxDurability,
                        format!(
                            "{} acknowledged writes to {path} (acked at {}) are gone after the crash at {crash} ms; the mailbox read back at {time} ms is {state}",
                            lost.len(),
                            times(&lost)
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    violations
}

/// Invariant 5 on an inbox a `corrupt-inbox` fault left cut off: nothing in it may
/// be lost. The bytes the fault left must still be on the disk at the end (in the
/// inbox or beside it: read as an empty inbox and written over, they are gone),
/// and every write an outside producer was told landed must be in the inbox.
fn corrupt_inboxes_kept(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (_, event) in sim_events(trace) {
        let SimEvent::CorruptInboxWitnessed {
            path,
            kept,
            message_digests,
        } = event
        else {
            continue;
        };
        if !kept {
            violations.push(Violation::new(
                Invariant::MailboxDurability,
                format!(
                    "{path} was left corrupt, and its bytes are gone once the run is over: \
                     a writer read what it could not parse as an empty inbox and wrote over it"
                ),
            ));
        }
        let missing: Vec<u64> = sim_events(trace)
            .filter_map(|(time, event)| match event {
                SimEvent::MailboxAcked {
                    path: acked,
                    message_digest,
                    ..
                } if acked.as_str() == path && !message_digests.contains(message_digest) => {
                    Some(time)
                }
                _ => None,
            })
            .collect();
        if !missing.is_empty() {
            violations.push(Violation::new(
                Invariant::MailboxDurability,
                format!(
                    "{} writes to the corrupt inbox {path} were acknowledged (at {}) but the \
                     inbox does not hold them once the run is over",
                    missing.len(),
                    times(&missing)
                ),
            ));
        }
    }
    violations
}

/// Invariant 6: two writers of one file or scratch key either serialize or one is
/// refused; a write over a version its writer never saw is a lost update.
///
/// Judged on the tool witness ([`tool_writes`]): the checker keeps each target's
/// versions and each agent's reads itself. The runtime's own reports of an
/// unrefused overwrite are claims, reported where the witness did not already
/// flag that target.
pub fn no_lost_update(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = tool_writes(trace);
    violations.extend(worktree_changes_kept(trace));
    let flagged: BTreeSet<String> = violations.iter().map(|v| v.detail.clone()).collect();
    let witnessed = |target: &str| flagged.iter().any(|detail| detail.contains(target));
    for (time, event) in runtime_events(trace) {
        let (target, detail) = match event {
            RuntimeEvent::ScratchOverwritten {
                key,
                writer,
                previous_writer,
            } => (
                format!("{}{key}", crate::trace::SCRATCH_TARGET_PREFIX),
                format!("at {time} ms {writer} overwrote scratch key {key} written by {previous_writer}, a version it never read"),
            ),
            RuntimeEvent::WriteModifiedSinceRead {
                agent,
                path,
                refused: false,
            } => (
                path.display().to_string(),
                format!("at {time} ms {agent} wrote {} over changes made since it read the file", path.display()),
            ),
            _ => continue,
        };
        if !witnessed(&target) {
            violations.push(Violation::new(Invariant::NoLostUpdate, detail));
        }
    }
    violations
}

/// One version of a file or scratch key, as the tool witness saw it written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version<'t> {
    writer: &'t str,
    /// What identifies the bytes: the written content's digest, or, for an Edit
    /// (whose result the witness does not see), a token of its own.
    content: String,
    time_ms: u64,
}

/// Lost updates in the tool witness: a successful write (Write, Edit,
/// ScratchpadWrite) over a version of its target that another agent wrote and the
/// writer never read. Versions are told apart by content, as a careful runtime
/// compares them: a write of the bytes already there loses nothing. A new target,
/// or one whose current content the writer last read or wrote, is fine.
fn tool_writes(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut current: BTreeMap<&str, Version<'_>> = BTreeMap::new();
    // The content each agent last read or wrote, by target.
    let mut known: BTreeMap<(&str, &str), String> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, (time, event)) in sim_events(trace).enumerate() {
        let SimEvent::ToolRan {
            agent,
            tool,
            target,
            content_digest,
            ok: true,
            ..
        } = event
        else {
            continue;
        };
        let at = current.get(target.as_str());
        match tool.as_str() {
            "Read" | "ScratchpadRead" => {
                let content = at.map_or_else(|| "initial".to_owned(), |v| v.content.clone());
                known.insert((agent, target), content);
            }
            "Write" | "Edit" | "ScratchpadWrite" => {
                if let Some(version) = at {
                    let seen = known.get(&(agent.as_str(), target.as_str()));
                    if version.writer != agent && seen != Some(&version.content) {
                        violations.push(Violation::new(
                            Invariant::NoLostUpdate,
                            format!(
                                "at {time} ms {agent} wrote {target} ({tool}) over the version {} wrote at {} ms, which it {}",
                                version.writer,
                                version.time_ms,
                                match seen {
                                    Some(_) => "read only an older version of",
                                    None => "never read",
                                }
                            ),
                        ));
                    }
                }
                let content = content_digest
                    .as_ref()
                    .map_or_else(|| format!("edit-{index}"), |digest| digest.to_string());
                known.insert((agent, target), content.clone());
                current.insert(
                    target,
                    Version {
                        writer: agent,
                        content,
                        time_ms: time,
                    },
                );
            }
            _ => {}
        }
    }
    violations
}

/// The workspace root: an agent whose working directory is elsewhere has a
/// worktree of its own.
const WORKSPACE_ROOT: &str = "/work";

/// Invariant 7, judged on every write the disk saw land: no data reaches a file
/// through a symlink, or outside the session and workspace roots, and a write a
/// Write or Edit of an agent with a worktree made lands inside that worktree. The
/// disk names where each write landed after symlinks, and the tool witness names
/// the agent whose call made it and that agent's working directory (its worktree,
/// when it is not the workspace root): what the runtime refused or journaled plays
/// no part.
pub fn no_escape(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = escaped_writes(trace);
    violations.extend(worktrees_reported(trace));
    violations.extend(shells_outside_worktree(trace));
    violations
}

/// Invariant 7 for background shells: a shell a worker with a worktree starts runs
/// in that worktree, as its other tools do (PROTOCOL.md §2), or the command
/// changes the files of the workspace everyone shares. The worker's directory is
/// where the tools beneath the runtime's gate ran its calls (the tool witness);
/// the shell's is where the world's shell ran the command (the shell witness).
/// Judged for each background shell whose command the shell ran, and whose
/// launching worker's calls all ran in one worktree (its tasks by its prompt, as
/// the models were told of them).
fn shells_outside_worktree(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut cwds_of_task: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut ran_in: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut launched: Vec<(u64, &str, &str, &str)> = Vec::new();
    let mut launcher_tasks_of: BTreeMap<&str, &[String]> = BTreeMap::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::ToolRan { agent, cwd, .. } => {
                cwds_of_task.entry(agent).or_default().insert(cwd);
            }
            SimEvent::DiskWrite {
                agent: Some(agent),
                cwd: Some(cwd),
                ..
            } => {
                cwds_of_task.entry(agent).or_default().insert(cwd);
            }
            SimEvent::ShellLaunched {
                agent,
                task_id,
                command,
            } => {
                launched.push((time, agent, task_id, command));
            }
            SimEvent::ShellLauncherTasks {
                task_id,
                launcher_tasks,
            } => {
                launcher_tasks_of.insert(task_id, launcher_tasks);
            }
            SimEvent::ShellEnded { command, cwd, .. } => {
                ran_in.entry(command).or_default().insert(cwd);
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (time, label, shell_id, command) in launched {
        let launcher_tasks = launcher_tasks_of.get(shell_id).copied().unwrap_or_default();
        let worker_cwds: BTreeSet<&str> = launcher_tasks
            .iter()
            .filter_map(|task_id| cwds_of_task.get(task_id.as_str()))
            .flatten()
            .copied()
            .collect();
        let [worktree] = worker_cwds.iter().copied().collect::<Vec<_>>()[..] else {
            continue;
        };
        if worktree == WORKSPACE_ROOT {
            continue;
        }
        let Some(shell_cwds) = ran_in.get(command) else {
            continue;
        };
        if !shell_cwds.contains(worktree) {
            let shell_cwds: Vec<&str> = shell_cwds.iter().copied().collect();
            violations.push(Violation::new(
                Invariant::NoEscape,
                format!(
                    "{}'s background shell, started at {time} ms, ran `{command}` in {}, outside the worker's worktree {worktree}, where its other calls ran",
                    short_label(label),
                    shell_cwds.join(", ")
                ),
            ));
        }
    }
    violations
}

/// Where PROTOCOL.md §2 puts worktrees, under the repository root.
const WORKTREES_DIR: &str = "/work/.claude/worktrees/";

/// The kept worktrees the coordinator was told of are the ones PROTOCOL.md §2
/// names: `.claude/worktrees/<slug>` on branch `worktree-<slug>` (a `/` in the
/// slug made `+`), for the slug the coordinator's Agent call asked for, and the
/// directory the worker's own writes were made in.
fn worktrees_reported(trace: &[TraceEntry]) -> Vec<Violation> {
    // Each tool-writing agent's working directories, as the tools saw them.
    let mut cwds: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    // Where the agents' writes landed so far, and the directories their commits
    // were made in (the worktree's own checkout is the version control's, not an
    // agent's): a kept worktree must have been written or committed in.
    let mut landed: Vec<&str> = Vec::new();
    // A fault may change a worktree without a write (a planted symlink), or make
    // its changes unreadable, which keeps it: only a run without faults is held to
    // "kept means changed".
    let faults_fired = sim_events(trace).any(|(_, event)| {
        matches!(
            event,
            SimEvent::FaultFired { .. } | SimEvent::HostCrashed { .. }
        )
    });
    let mut all_tasks_ended = false;
    let mut worktrees_left: Vec<String> = Vec::new();
    let mut violations = Vec::new();
    for (time, event) in sim_events(trace) {
        if let Some((_, cwd)) = committed_by_agent(event) {
            landed.push(cwd);
        }
        match event {
            SimEvent::DiskWrite {
                resolved_path,
                target_kept,
                agent,
                cwd,
                ..
            } => {
                if agent.is_some() && !target_kept {
                    landed.push(resolved_path.as_ref());
                }
                if let (Some(agent), Some(cwd)) = (agent, cwd) {
                    cwds.entry(agent.as_ref()).or_default().insert(cwd.as_ref());
                }
            }
            SimEvent::EnvelopesAccepted {
                task_ids, bodies, ..
            } => {
                for (task_id, body) in task_ids.iter().zip(bodies) {
                    let Some((path, branch)) = &body.worktree else {
                        continue;
                    };
                    let dir = path
                        .strip_prefix(WORKTREES_DIR)
                        .filter(|dir| !dir.is_empty() && !dir.contains('/'));
                    let expected_dir = body.name_asked.as_ref().map(|name| name.replace('/', "+"));
                    let wrong = match (dir, expected_dir) {
                        (None, _) => Some(format!("its path {path} is not a directory of {WORKTREES_DIR}")),
                        (Some(dir), Some(expected)) if dir != expected => Some(format!(
                            "its path {path} is not the one for the name {:?} its Agent call gave, {WORKTREES_DIR}{expected}",
                            body.name_asked.as_deref().unwrap_or("")
                        )),
                        (Some(dir), _) if *branch != format!("worktree-{dir}") => Some(format!(
                            "its branch {branch:?} is not worktree-{dir}"
                        )),
                        _ => cwds
                            .get(task_id.as_str())
                            .and_then(|seen| seen.iter().find(|cwd| **cwd != path.as_str()))
                            .map(|cwd| format!("its worker's writes were made in {cwd}"))
                            .or_else(|| {
                                let clean = !faults_fired
                                    && !landed.iter().any(|written| is_under(written, path));
                                clean.then(|| "nothing was ever written in it: a worktree without changes is removed".to_owned())
                            }),
                    };
                    if let Some(wrong) = wrong {
                        violations.push(Violation::new(
                            Invariant::NoEscape,
                            format!("at {time} ms the coordinator was told task {task_id} kept worktree {path} on branch {branch}, but {wrong}"),
                        ));
                    }
                }
            }
            SimEvent::RunEnded { open_tasks, .. } => all_tasks_ended = open_tasks.is_empty(),
            // Once every task has ended, a worktree still on the disk is one the
            // runtime kept: without a write in it, it had nothing to keep.
            SimEvent::WorktreesLeft { paths } => {
                worktrees_left.clone_from(paths);
                if !all_tasks_ended || faults_fired {
                    continue;
                }
                for path in paths {
                    if !landed.iter().any(|written| is_under(written, path)) {
                        violations.push(Violation::new(
                            Invariant::NoEscape,
                            format!("worktree {path} is still on the disk once every task has ended, but nothing was ever written in it: a worktree without changes is removed with its branch"),
                        ));
                    }
                }
            }
            // A branch `worktree-<slug>` belongs to the worktree `<slug>`: one left
            // without its worktree was not removed with it.
            SimEvent::WorktreeBranchesLeft { branches } if all_tasks_ended && !faults_fired => {
                for branch in branches {
                    let worktree = format!(
                        "{WORKTREES_DIR}{}",
                        branch.strip_prefix("worktree-").unwrap_or(branch)
                    );
                    if !worktrees_left.contains(&worktree) {
                        violations.push(Violation::new(
                            Invariant::NoEscape,
                            format!("branch {branch} is still in the repository once every task has ended, but its worktree {worktree} is gone: a worktree without changes is removed together with its branch"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

/// A commit the host's git made on the real disk for an agent's Bash call: the agent
/// and the directory it ran in.
fn committed_by_agent(event: &SimEvent) -> Option<(&str, &str)> {
    match event {
        SimEvent::GitRan {
            agent: Some(agent),
            cwd,
            subcommand,
            exit_code: Some(0),
        } if subcommand.as_ref() == "commit" => Some((agent.as_ref(), cwd.as_ref())),
        _ => None,
    }
}

/// The worktrees each task changed: the working directories under
/// [`WORKTREES_DIR`] in which a write of its Write or Edit landed, not through a
/// symlink and outside the directories git does not track, or in which its Bash
/// call's `git commit` succeeded (the branch is then ahead of its base, with the
/// files clean). A torn atomic replace changed nothing: its target kept what it
/// held.
fn worktrees_changed(trace: &[TraceEntry]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut changed: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, event) in sim_events(trace) {
        if let Some((agent, cwd)) = committed_by_agent(event) {
            if cwd.starts_with(WORKTREES_DIR) {
                changed.entry(agent).or_default().insert(cwd);
            }
            continue;
        }
        let SimEvent::DiskWrite {
            resolved_path,
            through_symlink: false,
            target_kept: false,
            agent: Some(agent),
            cwd: Some(cwd),
            ..
        } = event
        else {
            continue;
        };
        let untracked = crate::world::UNTRACKED_TOP_DIRS
            .iter()
            .any(|dir| is_under(resolved_path, &format!("{cwd}/{dir}")));
        if cwd.starts_with(WORKTREES_DIR) && is_under(resolved_path, cwd) && !untracked {
            changed
                .entry(agent.as_ref())
                .or_default()
                .insert(cwd.as_ref());
        }
    }
    changed
}

/// Invariant 6, for worktrees (PROTOCOL.md §2): a worktree its worker changed is
/// kept, and the completed task's envelope reports it; removing it would discard
/// the worker's changes without a word. Judged on the writes the disk saw land in
/// it and the worktrees the disk still holds once the run is over; a run whose host
/// crashed is not judged, since a crash may take unsynced files and tasks with it.
fn worktree_changes_kept(trace: &[TraceEntry]) -> Vec<Violation> {
    let changed = worktrees_changed(trace);
    if changed.is_empty() || first_crash_ms(trace).is_some() {
        return Vec::new();
    }
    let mut violations = Vec::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::EnvelopesAccepted {
                task_ids,
                statuses,
                bodies,
            } => {
                let ends = task_ids.iter().zip(statuses.iter()).zip(bodies.iter());
                for ((task_id, status), body) in ends {
                    let Some(worktrees) = changed.get(task_id.as_str()) else {
                        continue;
                    };
                    if *status != EnvelopeStatus::Completed {
                        continue;
                    }
                    let reported = body.worktree.as_ref().map(|(path, _)| path.as_str());
                    for worktree in worktrees.iter().filter(|w| Some(**w) != reported) {
                        violations.push(Violation::new(
                            Invariant::NoLostUpdate,
                            format!("at {time} ms task {task_id} completed having changed worktree {worktree}, but its envelope reports no such kept worktree"),
                        ));
                    }
                }
            }
            SimEvent::WorktreesLeft { paths } => {
                for (task_id, worktrees) in &changed {
                    for worktree in worktrees.iter().filter(|w| !paths.iter().any(|p| p == *w)) {
                        violations.push(Violation::new(
                            Invariant::NoLostUpdate,
                            format!("worktree {worktree}, which task {task_id} changed, is gone once the run is over: its changes were discarded"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

/// Invariant 7's writes: see [`no_escape`].
fn escaped_writes(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(time, event)| match event {
            // A torn atomic replace's temporary file reached the target's directory
            // too: where a write reached is judged whether or not it kept.
            SimEvent::DiskWrite {
                path,
                resolved_path,
                through_symlink,
                target_kept: _,
                replaced: _,
                agent,
                cwd,
            } => {
                let by = match agent {
                    Some(agent) => format!("{agent}'s write"),
                    None => "a write".to_owned(),
                };
                let outside_roots = !WRITABLE_ROOTS
                    .iter()
                    .any(|root| is_under(resolved_path, root));
                let worktree = cwd.as_deref().filter(|cwd| *cwd != WORKSPACE_ROOT);
                let detail = if *through_symlink {
                    format!("at {time} ms {by} to {path} landed in {resolved_path} through a symlink")
                } else if outside_roots {
                    format!(
                        "at {time} ms {by} to {path} landed in {resolved_path}, outside the session and workspace roots"
                    )
                } else {
                    match worktree {
                        Some(worktree) if !is_under(resolved_path, worktree) => format!(
                            "at {time} ms {by} to {path} landed in {resolved_path}, outside its worktree {worktree}"
                        ),
                        _ => return None,
                    }
                };
                Some(Violation::new(Invariant::NoEscape, detail))
            }
            _ => None,
        })
        .collect()
}

/// Invariant 8: an agent's requests keep one cache key (model, `max_tokens`,
/// thinking, tools and system) from call to call unless the runtime declared a
/// cache break for that agent in between, at the part, block and byte offset where
/// the requests the model received first differ; a fork's first request keeps its
/// parent's key; and sibling forks of one parent turn share their messages up to
/// their directives. Where the key changed is the tap's finding
/// (`run/head_witness.rs`), not the runtime's: a break declared where the requests
/// did not change, or at another place than where they did, is a violation too.
pub fn fork_prefix(trace: &[TraceEntry]) -> Vec<Violation> {
    // The breaks declared for each agent since its last call.
    let mut declared: BTreeMap<&str, Vec<(u64, DeclaredBreak)>> = BTreeMap::new();
    // The first sibling's shared digest, by parent and history length.
    let mut siblings: BTreeMap<(&str, u64), (&str, &str)> = BTreeMap::new();
    let mut violations = Vec::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::CacheBreak {
                agent,
                part,
                block_index,
                byte_offset,
            }) => declared.entry(agent.as_str()).or_default().push((
                entry.time_ms,
                DeclaredBreak {
                    part,
                    block_index: block_index.map(|index| index as u64),
                    byte_offset: *byte_offset,
                },
            )),
            EventRef::Sim(SimEvent::ModelCalled {
                agent,
                call,
                forked_from,
                fork_shared,
                head_change,
                ..
            }) => {
                if let (Some(parent), Some((history_len, shared))) =
                    (forked_from, fork_shared.as_deref())
                {
                    let sibling = siblings.entry((parent.as_str(), *history_len));
                    match sibling {
                        std::collections::btree_map::Entry::Vacant(first) => {
                            first.insert((agent.as_str(), shared.as_str()));
                        }
                        std::collections::btree_map::Entry::Occupied(first) => {
                            let (first_agent, first_shared) = *first.get();
                            if first_shared != shared {
                                violations.push(Violation::new(
                                    Invariant::ForkPrefix,
                                    format!(
                                        "{agent}'s first call at {} ms differs before its directive from its sibling fork {first_agent}'s, both forked from {parent}",
                                        entry.time_ms
                                    ),
                                ));
                            }
                        }
                    }
                }
                let claims = declared.remove(agent.as_str()).unwrap_or_default();
                let call_at = format!("{agent}'s call {call} at {} ms", entry.time_ms);
                let held_to = match forked_from {
                    Some(parent) if *call == 1 => format!("its parent {parent}'s last call"),
                    _ => "its previous call".to_owned(),
                };
                let mut claims = claims.into_iter();
                match (head_change.as_deref(), claims.next()) {
                    (Some(change), None) => violations.push(Violation::new(
                        Invariant::ForkPrefix,
                        format!(
                            "{call_at} has a different cache key than {held_to} (first difference: {}), and no cache break was declared",
                            describe_change(&change.part, change.block_index, change.byte_offset)
                        ),
                    )),
                    (Some(change), Some((declared_at, claim))) => {
                        let agrees = claim.part == change.part
                            && claim.block_index == change.block_index
                            && claim.byte_offset == change.byte_offset;
                        if !agrees {
                            violations.push(Violation::new(
                                Invariant::ForkPrefix,
                                format!(
                                    "a cache break declared for {agent} at {declared_at} ms names {}, but {call_at} first differs from {held_to} at {}",
                                    describe_change(claim.part, claim.block_index, claim.byte_offset),
                                    describe_change(&change.part, change.block_index, change.byte_offset)
                                ),
                            ));
                        }
                    }
                    (None, Some((declared_at, claim))) => violations.push(Violation::new(
                        Invariant::ForkPrefix,
                        format!(
                            "a cache break declared for {agent} at {declared_at} ms names {}, but {call_at} has the cache key of {held_to}",
                            describe_change(claim.part, claim.block_index, claim.byte_offset)
                        ),
                    )),
                    (None, None) => {}
                }
                // One request changes its key once.
                for (declared_at, _) in claims {
                    violations.push(Violation::new(
                        Invariant::ForkPrefix,
                        format!("a second cache break declared for {agent} at {declared_at} ms before {call_at}"),
                    ));
                }
            }
            EventRef::Sim(SimEvent::ForkResultsNotPlaceholder { agent, results }) => {
                violations.push(Violation::new(
                    Invariant::ForkPrefix,
                    format!(
                        "{agent}'s first call at {} ms answers its parent's calls with {results:?}, where PROTOCOL.md §6 gives every one the placeholder {FORK_PLACEHOLDER_RESULT:?}",
                        entry.time_ms
                    ),
                ));
            }
            _ => {}
        }
    }
    violations
}

/// A cache break as the runtime declared it.
struct DeclaredBreak<'t> {
    part: &'t str,
    block_index: Option<u64>,
    byte_offset: u64,
}

/// `part` block `block_index` at byte `byte_offset`, for a violation's detail.
fn describe_change(part: &str, block_index: Option<u64>, byte_offset: u64) -> String {
    match block_index {
        Some(block) => format!("{part} block {block}, byte {byte_offset}"),
        None => format!("{part}, byte {byte_offset}"),
    }
}

/// Invariant 9: no agent's model is offered a tool outside its surface, and no
/// tool outside the caller's surface comes back without an error. The surfaces are
/// PROTOCOL.md §7's ([`Surface`]), not the runtime's table. The caller's role is
/// the tap's: the coordinator, a teammate (launched into a team, so SendMessage is
/// on its surface), a fork or another worker. The offered tools are the tap's
/// record of each request (`run/surface_witness.rs`).
pub fn tool_surface(trace: &[TraceEntry]) -> Vec<Violation> {
    let started = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::RunStarted {
            profile,
            coordinator_mode,
            ..
        } => Some((profile.parse::<Profile>().ok()?, *coordinator_mode)),
        _ => None,
    });
    let Some((profile, coordinator_mode)) = started else {
        return Vec::new();
    };
    sim_events(trace)
        .filter_map(|(time, event)| match event {
            SimEvent::ToolsOfferedWrong { detail, .. } => Some(Violation::new(
                Invariant::ToolSurface,
                format!("at {time} ms {detail}"),
            )),
            SimEvent::ToolSucceeded { role, tool } => {
                let surface = Surface::of_role(role, coordinator_mode);
                let allowed =
                    ToolName::parse(tool).is_some_and(|name| surface.allows(name, profile));
                (!allowed).then(|| {
                    Violation::new(
                        Invariant::ToolSurface,
                        format!("at {time} ms a {role}'s {tool} call succeeded, but {tool} is not on the {role} surface of {profile}"),
                    )
                })
            }
            _ => None,
        })
        .collect()
}

/// Invariant 11: once faults heal, every task reaches a terminal state within the
/// scenario's bound, a task of a crashed host too (the restarted runtime fails it),
/// unless its record never reached the disk ([`unsaved_before_crash`]).
///
/// The tasks are those the runtime reported spawning and those whose launch the
/// coordinator's model was told of, so a runtime that never reports a task cannot
/// hide it; an envelope the coordinator accepted ends its task whatever the runtime
/// reported.
///
/// A runtime that cannot restart from what it made durable ends nothing again: a
/// failed restart is a violation, unless a disk fault fired since the power cut
/// (a read that fails at the restart rightly stops it with a typed error).
///
/// A command is a task's work too: one the shell timed out must not go on
/// running once its Bash call has returned, judged on the host's process table.
pub fn liveness(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = clock_stood_still(trace);
    violations.extend(failed_restart(trace));
    violations.extend(tasks_left_open(trace));
    violations.extend(commands_left_running(trace));
    violations
}

/// A run the world's clock ended because virtual time stood still: something kept
/// reading the time without ever waiting for it to move, and no task could end
/// after that, whatever the runtime would have reported.
fn clock_stood_still(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(_, event)| match event {
            SimEvent::RunEnded { coordinator, .. } => coordinator.strip_prefix(CLOCK_STOOD_STILL),
            _ => None,
        })
        .map(|at| {
            Violation::new(
                Invariant::Liveness,
                format!(
                    "virtual time stood still at {at}: the clock was read {STANDSTILL_READS} times \
                     at that instant while no task waited for time to pass, so a busy loop held \
                     the run there and nothing after it could happen"
                ),
            )
        })
        .collect()
}

/// The commands the production shell timed out and left running.
fn commands_left_running(trace: &[TraceEntry]) -> Vec<Violation> {
    sim_events(trace)
        .filter_map(|(time, event)| match event {
            SimEvent::ShellLeftRunning {
                command,
                timeout_ms,
                processes_count,
            } => Some(Violation::new(
                Invariant::Liveness,
                format!(
                    "the command `{command}` timed out after {timeout_ms} ms, and at {time} ms, \
                     after its Bash call returned, {processes_count} of its processes still ran: \
                     the shell never killed it"
                ),
            )),
            _ => None,
        })
        .collect()
}

/// A restart that failed with no disk fault since the power cut to explain it.
fn failed_restart(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut crashed_at = None;
    let mut disk_fault_since_crash = false;
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::HostCrashed { .. } => {
                crashed_at = Some(time);
                disk_fault_since_crash = false;
            }
            SimEvent::FaultFired {
                kind: FaultKind::Disk,
                ..
            } if crashed_at.is_some() => disk_fault_since_crash = true,
            SimEvent::RunEnded { coordinator, .. } if !disk_fault_since_crash => {
                if let (Some(crashed_at), Some(error)) =
                    (crashed_at, coordinator.strip_prefix(RESTART_FAILED))
                {
                    return vec![Violation::new(
                        Invariant::Liveness,
                        format!(
                            "the runtime could not restart from what it had made durable before the power cut at {crashed_at} ms ({error}), so no task it had open will end"
                        ),
                    )];
                }
            }
            _ => {}
        }
    }
    Vec::new()
}

/// The tasks that did not end within the bound once faults healed.
fn tasks_left_open(trace: &[TraceEntry]) -> Vec<Violation> {
    let bound = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::RunStarted {
            liveness_bound_ms, ..
        } => Some(*liveness_bound_ms),
        _ => None,
    });
    let healed = sim_events(trace)
        .find_map(|(time, event)| matches!(event, SimEvent::Healed).then_some(time));
    let (Some(bound), Some(healed)) = (bound, healed) else {
        return Vec::new();
    };
    let unsaved = unsaved_before_crash(trace);
    let mut spawned: BTreeMap<String, u64> = BTreeMap::new();
    let mut ended: BTreeMap<String, u64> = BTreeMap::new();
    for (time, event) in runtime_events(trace) {
        match event {
            RuntimeEvent::TaskSpawned { task_id, .. } => {
                spawned.insert(task_id.to_string(), time);
            }
            RuntimeEvent::TaskTransitioned { task_id, to, .. } if to.is_terminal() => {
                ended.entry(task_id.to_string()).or_insert(time);
            }
            _ => {}
        }
    }
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::EnvelopesAccepted { task_ids, .. } => {
                for id in task_ids {
                    let end = ended.entry(id.clone()).or_insert(time);
                    *end = (*end).min(time);
                }
            }
            // Known only at the run's end: when the launch was seen is not kept.
            SimEvent::LaunchesUnanswered { task_ids } => {
                for id in task_ids {
                    spawned.entry(id.clone()).or_insert(time);
                }
            }
            _ => {}
        }
    }
    let deadline = healed.saturating_add(bound);
    spawned
        .iter()
        .filter(|(id, _)| !unsaved.contains(*id))
        .filter_map(|(id, spawned_at)| match ended.get(id) {
            Some(end) if *end <= deadline => None,
            end => Some(Violation::new(
                Invariant::Liveness,
                format!(
                    "task {id} (spawned at {spawned_at} ms) {} although faults healed at {healed} ms and the bound is {bound} ms",
                    match end {
                        Some(end) => format!("ended only at {end} ms"),
                        None => "never ended".to_owned(),
                    }
                ),
            )),
        })
        .collect()
}

/// Where a task's output file lives under the simulated session.
fn output_path(task_id: &str) -> String {
    format!("/session/tasks/{task_id}.output")
}

/// Invariant 13: once the coordinator has received a `completed` envelope, the
/// task's output file survives a crash; no output file exceeds its cap, and a
/// capped file ends with exactly one truncation marker, at the cap (the output
/// that fits is kept, PROTOCOL.md §4). Judged on what the disk lost
/// or rolled back when the host lost power, and on the files' bytes once the run is
/// over, not on what the runtime says it synced or wrote.
///
/// A completed and notified agent's transcript is held the same way: such a task
/// may be dropped from memory and resumed from its transcript on disk
/// (PROTOCOL.md §1), which a crash must not take back. A remote worker's
/// transcript is its host's.
pub fn durable_output(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut completed: BTreeMap<String, u64> = BTreeMap::new();
    let mut completed_tasks: BTreeSet<&str> = BTreeSet::new();
    // What the disk faults that fired did, each naming its path, and the paths
    // crashes lost or rolled back.
    let mut touched: Vec<&str> = Vec::new();
    let mut violations = Vec::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::FaultFired {
                kind: FaultKind::Disk,
                detail,
                ..
            } => touched.push(detail),
            SimEvent::SummariesContinued { summaries } => {
                violations.extend(summaries_left_out(summaries, &completed_tasks, &touched));
            }
            SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            } => {
                for (task_id, status) in task_ids.iter().zip(statuses) {
                    if *status == coord_runtime::envelope::EnvelopeStatus::Completed {
                        completed_tasks.insert(task_id);
                        completed.entry(output_path(task_id)).or_insert(time);
                        if task_id.starts_with('a') {
                            completed.entry(transcript_path(task_id)).or_insert(time);
                        }
                    }
                }
            }
            SimEvent::HostCrashed { lost, changed } => {
                touched.extend(lost.iter().chain(changed).map(String::as_str));
                for (path, how) in lost
                    .iter()
                    .map(|p| (p, "lost"))
                    .chain(changed.iter().map(|p| (p, "rolled back")))
                {
                    if let Some(accepted_at) = completed.get(path) {
                        violations.push(Violation::new(
                            Invariant::DurableOutput,
                            format!(
                                "the crash at {time} ms {how} {path}, whose completed envelope the coordinator accepted at {accepted_at} ms"
                            ),
                        ));
                    }
                }
            }
            SimEvent::OutputFileWitnessed {
                path,
                size_bytes,
                size_bytes_max,
                markers_count,
                ends_with_marker,
            } => {
                let capped = *markers_count > 0;
                let wrong = if size_bytes > size_bytes_max {
                    Some(format!(
                        "{path} holds {size_bytes} bytes, over its cap of {size_bytes_max}"
                    ))
                } else if capped && (*markers_count != 1 || !ends_with_marker) {
                    Some(format!(
                        "{path} holds {markers_count} truncation markers{}; a capped file ends with exactly one",
                        if *ends_with_marker { "" } else { " and does not end with one" }
                    ))
                } else if capped && size_bytes < size_bytes_max {
                    // The output that fits is kept: a file cut short of its cap
                    // dropped output it had room for.
                    Some(format!(
                        "{path} was capped at {size_bytes} bytes, short of its cap of {size_bytes_max}: output it had room for was dropped"
                    ))
                } else {
                    None
                };
                if let Some(detail) = wrong {
                    violations.push(Violation::new(Invariant::DurableOutput, detail));
                }
            }
            _ => {}
        }
    }
    violations
}

/// The compaction summaries a worker went on from that none of its transcripts
/// holds a boundary for, judged for workers with a completed, notified task whose
/// transcript is on this host (an agent's or a teammate's; a remote worker's is its
/// host's) and that no disk fault or crash touched: such a task may be resumed from its
/// transcript, which would start it from the history its summary replaced.
fn summaries_left_out(
    summaries: &[crate::trace::SummaryContinued],
    completed_tasks: &BTreeSet<&str>,
    touched: &[&str],
) -> Vec<Violation> {
    summaries
        .iter()
        .filter(|summary| !summary.in_transcript)
        .filter_map(|summary| {
            let judged: Vec<&String> = summary
                .task_ids
                .iter()
                .filter(|id| id.starts_with('a') || id.starts_with('t'))
                .filter(|id| completed_tasks.contains(id.as_str()))
                .filter(|id| {
                    let path = transcript_path(id);
                    !touched.iter().any(|detail| detail.contains(&path))
                })
                .collect();
            let first = judged.first()?;
            Some(Violation::new(
                Invariant::DurableOutput,
                format!(
                    "worker {} went on from a compaction summary ({}) that its transcript {} holds no compact_boundary for: a resume would start from the history the summary replaced",
                    summary.agent,
                    summary.summary_digest,
                    transcript_path(first)
                ),
            ))
        })
        .collect()
}

/// Invariant 14: a run is not vacuous. Every scripted agent's script is played to
/// its end (the tap's `scripts_played` witness counts the turns whose response
/// reached the runtime), unless the trace says why not: a fault fired that may cut
/// that script short (its record names it, see [`fault_reach`]), a task was
/// stopped (TaskStop; a deadline expiry is not a stop), or the worker's own
/// script was slower than its deadline ([`outlasted_deadline`]). A run cut off at its
/// run limit, a `when` that never held, or a worker that was never launched is a
/// failure. The team lead's scripted acts count as a script: its permission
/// answers must meet exactly the requests its inbox holds on the disk, and every
/// member it asked to shut down must have approved there and be off its team's
/// file.
pub fn not_vacuous(trace: &[TraceEntry]) -> Vec<Violation> {
    let reach = fault_reach(trace);
    if reach == FaultReach::Every {
        return Vec::new();
    }
    let mut violations = Vec::new();
    // A struck teammate may never ask, or never answer, what the lead's script
    // expects of it.
    if reach == FaultReach::None {
        violations.extend(unplayed_permissions(trace));
        violations.extend(unplayed_shutdowns(trace));
    }
    let stopped = stopped_labels(trace);
    let outlasted = outlasted_deadline(trace);
    let ended = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::RunEnded { coordinator, .. } => Some(coordinator.as_str()),
        _ => None,
    });
    let Some(agents) = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::ScriptsPlayed { agents } => Some(agents),
        _ => None,
    }) else {
        return violations;
    };
    let scripts = agents
        .iter()
        .filter(|agent| agent.turns_played < agent.turns)
        .filter(|agent| !reach.covers(&agent.agent))
        // A stopped worker rightly leaves its script unfinished; the coordinator
        // that stopped it must still finish its own.
        .filter(|agent| !stopped.contains_key(agent.agent.as_str()))
        // So does a worker whose own script was slower than its deadline.
        .filter(|agent| !outlasted.contains(agent.agent.as_str()))
        .map(|agent| {
            let why = match (agent.turns_played, ended) {
                (0, _) => "it never ran".to_owned(),
                (_, Some(ended)) => format!("the coordinator {ended}"),
                (_, None) => "the run never ended".to_owned(),
            };
            Violation::new(
                Invariant::NotVacuous,
                format!(
                    "{} played {} of its {} scripted turns and no fault explains it: {why}",
                    short_label(&agent.agent),
                    agent.turns_played,
                    agent.turns
                ),
            )
        });
    let unplayed = violations.len();
    violations.extend(scripts);
    // Every script played and still the session never ended: it waits for
    // something no agent will do (a notification a task never sends), and a
    // user's session would hang there.
    if violations.len() == unplayed
        && ended == Some(COORDINATOR_CUT_OFF)
        && reach == FaultReach::None
    {
        violations.push(Violation::new(
            Invariant::NotVacuous,
            format!(
                "every script was played to its end, but the coordinator never finished: it was {COORDINATOR_CUT_OFF} and no fault explains it"
            ),
        ));
    }
    violations
}

/// The labels of the agents a stop reached, as the world saw it, each with when
/// the first stop that reached it was answered (ms of virtual time): each task the
/// coordinator's model was told TaskStop stopped, and every task launched under
/// one (PROTOCOL.md §1: a kill cascades). A deadline's kill is not a stop: the
/// deadline is what ends a worker that hangs, and a hung worker is what
/// `not-vacuous` is for; nor is a task the runtime killed unasked.
fn stopped_labels(trace: &[TraceEntry]) -> BTreeMap<&str, u64> {
    let mut stops: BTreeMap<&str, u64> = BTreeMap::new();
    let mut launched: &[crate::trace::TaskLaunched] = &[];
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::TasksStopped { task_ids } => {
                for task_id in task_ids {
                    stops.entry(task_id).or_insert(time);
                }
            }
            SimEvent::StopsWitnessed { tasks, .. } => launched = tasks,
            _ => {}
        }
    }
    let mut labels: BTreeMap<&str, u64> = super::stop_cascade::stopped_agents(&stops, launched)
        .into_iter()
        .map(|(label, (stop_ms, _))| (label, stop_ms))
        .collect();
    // A remote task is stopped too, though the cascade does not follow it.
    for task in launched {
        if let Some(&stop_ms) = stops.get(task.task_id.as_str()) {
            let earliest = labels.entry(task.agent.as_str()).or_insert(stop_ms);
            *earliest = (*earliest).min(stop_ms);
        }
    }
    labels
}

/// A spawn's deadline when the scenario sets none: the runtime's documented
/// default (docs/scenario-format.md), not whatever the runtime under test uses.
const SPAWN_DEADLINE_DEFAULT_MS: u64 = 600_000;

/// The labels of the workers whose own scripts outlasted their deadline, as the
/// world saw it. The coordinator's model was told the worker's task was killed (an
/// envelope saying `killed` or `timeout`), and the worker's model call was abandoned at or before then but before its scripted
/// answer was due (a turn's `latency` longer than the deadline), and no earlier
/// than the task's deadline after its spawn. The deadline ended a worker the script
/// made slow, as it must; a kill before the deadline excuses nothing, nor does a
/// worker that hangs with no call out (it waits on the runtime, which is what
/// `not-vacuous` is for).
fn outlasted_deadline(trace: &[TraceEntry]) -> BTreeSet<&str> {
    let deadline_ms = sim_events(trace)
        .find_map(|(_, event)| match event {
            SimEvent::SpawnDeadlineSet { spawn_deadline_ms } => Some(*spawn_deadline_ms),
            _ => None,
        })
        .unwrap_or(SPAWN_DEADLINE_DEFAULT_MS);
    let mut spawned_ms: BTreeMap<&str, u64> = BTreeMap::new();
    for (time_ms, event) in runtime_events(trace) {
        if let RuntimeEvent::TaskSpawned { task_id, .. } = event {
            spawned_ms.entry(task_id.as_str()).or_insert(time_ms);
        }
    }
    let mut killed_ms: BTreeMap<&str, u64> = BTreeMap::new();
    let mut witnessed: Option<(&[crate::trace::TaskLaunched], &[crate::trace::CallEnded])> = None;
    for (time_ms, event) in sim_events(trace) {
        match event {
            SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            } => {
                for (task_id, status) in task_ids.iter().zip(statuses) {
                    if super::stop_cascade::ends_by_kill(*status) {
                        killed_ms.entry(task_id).or_insert(time_ms);
                    }
                }
            }
            SimEvent::StopsWitnessed { tasks, calls } => witnessed = Some((tasks, calls)),
            _ => {}
        }
    }
    let Some((tasks, calls)) = witnessed else {
        return BTreeSet::new();
    };
    let mut outlasted = BTreeSet::new();
    for task in tasks {
        let (Some(&told_ms), Some(&spawn_ms)) = (
            killed_ms.get(task.task_id.as_str()),
            spawned_ms.get(task.task_id.as_str()),
        ) else {
            continue;
        };
        let expiry_ms = spawn_ms.saturating_add(deadline_ms);
        let cut_short_at_deadline = calls.iter().any(|call| {
            call.agent == task.agent
                && call.abandoned
                && matches!(
                    (call.ended_ms, call.due_ms),
                    (Some(ended_ms), Some(due_ms))
                        if expiry_ms <= ended_ms && ended_ms <= told_ms && ended_ms < due_ms
                )
        });
        if cut_short_at_deadline {
            outlasted.insert(task.agent.as_str());
        }
    }
    outlasted
}

/// Whose work the faults that fired may rightly have cut short: an unplayed
/// script (invariant 14) or a message that never reached its recipient
/// (invariant 4).
#[derive(Debug, PartialEq, Eq)]
enum FaultReach<'t> {
    /// Nobody's: no fault that cuts work short fired.
    None,
    /// These agents' (by label): faults struck single workers.
    Agents(BTreeSet<&'t str>),
    /// Every agent's: a fault of wide reach fired (a power cut, a disk fault, a
    /// partition, a binding switch, a refused launch).
    Every,
}

impl FaultReach<'_> {
    /// Whether the faults may have cut short the work of the agent labelled `label`.
    fn covers(&self, label: &str) -> bool {
        match self {
            FaultReach::None => false,
            FaultReach::Agents(labels) => labels.contains(label),
            FaultReach::Every => true,
        }
    }
}

/// How far the fired faults reach.
///
/// Faults that only shape what the scripts do (an extra read and write, a forged
/// or late final turn, an oversize message), and those a runtime must absorb
/// without losing a turn (a cache-breaking prompt change, a repeated task id, a
/// second notification, a stale, slow or contended mailbox lock, a symlink planted
/// in a worktree, whose write is refused and answered), explain nothing.
///
/// A fault that strikes one worker (its crash, a failed API call) explains that
/// worker's script, the coordinator's (which reacts to the failure), and the
/// scripts of agents whose first model call came after it: the coordinator may
/// launch differently, and a dead worker launches nothing. A worker that was
/// already running when another was struck must still play its script to its
/// end. Any other fault, or one that strikes the coordinator (whose failure ends
/// the session), explains every script.
fn fault_reach(trace: &[TraceEntry]) -> FaultReach<'_> {
    fault_reach_after_crashes(trace, None)
}

/// [`fault_reach`], leaving out host crashes at or before `crashes_until_ms`: what
/// reaches work that began after the host came back. Other faults still count,
/// since their effects (a partition, a dead worker) may outlast the restart.
fn fault_reach_after_crashes(
    trace: &[TraceEntry],
    crashes_until_ms: Option<u64>,
) -> FaultReach<'_> {
    let forgotten = |time: u64| crashes_until_ms.is_some_and(|until| time <= until);
    let mut struck: Vec<(u64, &str)> = Vec::new();
    for (time, event) in sim_events(trace) {
        match event {
            SimEvent::FaultFired {
                kind: FaultKind::CoordinatorCrash,
                ..
            }
            | SimEvent::HostCrashed { .. }
                if forgotten(time) => {}
            SimEvent::FaultFired { kind, agent, .. } => match (kind, agent) {
                (
                    FaultKind::ClobberedWrite
                    | FaultKind::ClobberedScratch
                    | FaultKind::ForgedEnvelope
                    | FaultKind::DelayedNotification
                    | FaultKind::OversizeMessage
                    | FaultKind::CacheBreakingPromptChange
                    | FaultKind::TaskIdCollision
                    | FaultKind::DuplicateNotify
                    | FaultKind::StaleLock
                    | FaultKind::SlowLockHolder
                    | FaultKind::MailboxProducers
                    | FaultKind::CorruptInbox
                    | FaultKind::ForgedPermission
                    | FaultKind::DuplicateMail
                    | FaultKind::SymlinkedWorktreeDir,
                    _,
                ) => {}
                // The coordinator's failure ends its session, and every task in it.
                (_, Some(agent)) if agent == crate::fault::COORDINATOR_LABEL => {
                    return FaultReach::Every
                }
                (_, Some(agent)) => struck.push((time, agent)),
                (_, None) => return FaultReach::Every,
            },
            SimEvent::HostCrashed { .. } => return FaultReach::Every,
            _ => {}
        }
    }
    let Some(first_struck_ms) = struck.iter().map(|(time, _)| *time).min() else {
        return FaultReach::None;
    };
    let mut labels: BTreeSet<&str> = struck.into_iter().map(|(_, agent)| agent).collect();
    labels.insert(crate::fault::COORDINATOR_LABEL);
    let mut started: BTreeSet<&str> = BTreeSet::new();
    for (time, event) in sim_events(trace) {
        if let SimEvent::ModelCalled { agent, .. } = event {
            if time < first_struck_ms {
                started.insert(agent);
            }
        }
    }
    if let Some(agents) = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::ScriptsPlayed { agents } => Some(agents),
        _ => None,
    }) {
        labels.extend(
            agents
                .iter()
                .map(|agent| agent.agent.as_str())
                .filter(|agent| !started.contains(agent)),
        );
    }
    FaultReach::Agents(labels)
}

/// PROTOCOL.md §5's `isIdle`, judged on the team files as the disk held them when
/// each teammate's model received a request: a member the file calls idle is
/// working unseen. Not judged where a fault fired on a team file, whose update may
/// have been refused, or across a host crash.
fn idle_members_called(trace: &[TraceEntry]) -> Vec<Violation> {
    let excused = sim_events(trace).any(|(_, event)| match event {
        SimEvent::FaultFired { detail, .. } => detail.contains("team.json"),
        SimEvent::HostCrashed { .. } => true,
        _ => false,
    });
    if excused {
        return Vec::new();
    }
    sim_events(trace)
        .filter_map(|(time_ms, event)| match event {
            SimEvent::IdleMemberCalled { team, member, call } => Some(Violation::new(
                Invariant::MessageDelivery,
                format!(
                    "at {time_ms} ms {member} of team {team} made model call {call} while its team's file listed it as idle: a teammate woken to work is marked busy first (PROTOCOL.md §5)"
                ),
            )),
            _ => None,
        })
        .collect()
}

/// The lead's scripted shutdowns held against its inbox and the team files on the
/// disk: each member asked to shut down must have approved in the lead's inbox
/// (the scenarios' teammates agree once idle), and a member that approved must be
/// off its team's file once the lead has read the approval, which is what takes
/// it off (a run may end with an approval the lead had no turn left to read).
fn unplayed_shutdowns(trace: &[TraceEntry]) -> Vec<Violation> {
    let Some((scripted, approved, read, listed)) =
        sim_events(trace).find_map(|(_, event)| match event {
            SimEvent::ShutdownsWitnessed(seen) => Some((
                &seen.scripted,
                &seen.approved,
                &seen.approvals_read,
                &seen.listed,
            )),
            _ => None,
        })
    else {
        return Vec::new();
    };
    let same = |a: &TeamMember, b: &TeamMember| {
        a.team == b.team && a.member.eq_ignore_ascii_case(&b.member)
    };
    let mut violations = Vec::new();
    for asked in scripted {
        let detail = if !approved.iter().any(|answer| same(answer, asked)) {
            format!(
                "the lead of {} asked {} to shut down, and no approving shutdown_response \
                 from it reached the lead's inbox",
                asked.team, asked.member
            )
        } else if read.iter().any(|answer| same(answer, asked))
            && listed.iter().any(|member| same(member, asked))
        {
            format!(
                "{} approved its shutdown, and the file of team {} still lists it",
                asked.member, asked.team
            )
        } else {
            continue;
        };
        violations.push(Violation::new(Invariant::NotVacuous, detail));
    }
    violations
}

/// The lead's scripted permission answers held against the requests its inbox
/// holds on the disk: each answer must have met a request from its member (for its
/// tool, if it names one), and each request must have been one the lead was
/// scripted to answer. A teammate that never asks, or asks about the wrong call,
/// leaves the lead's script unplayed however its own script ends.
fn unplayed_permissions(trace: &[TraceEntry]) -> Vec<Violation> {
    let Some((asked, scripted)) = sim_events(trace).find_map(|(_, event)| match event {
        SimEvent::PermissionsAsked { asked, scripted } => Some((asked, scripted)),
        _ => None,
    }) else {
        return Vec::new();
    };
    let mut unmatched: Vec<&PermissionAsked> = asked.iter().collect();
    let mut violations = Vec::new();
    for answer in scripted {
        let found = unmatched.iter().position(|request| {
            request.team == answer.team
                && request.member.eq_ignore_ascii_case(&answer.member)
                && (answer.tool.is_none() || request.tool == answer.tool)
        });
        match found {
            Some(at) => {
                unmatched.remove(at);
            }
            None => violations.push(Violation::new(
                Invariant::NotVacuous,
                format!(
                    "the lead of {} was scripted to answer {}'s permission request for {}, and \
                     no such request reached its inbox",
                    answer.team,
                    answer.member,
                    answer.tool.as_deref().unwrap_or("any tool")
                ),
            )),
        }
    }
    for request in unmatched {
        violations.push(Violation::new(
            Invariant::NotVacuous,
            format!(
                "{} asked the lead of {} for permission to use {}, which the lead was not \
                 scripted to answer",
                request.member,
                request.team,
                request.tool.as_deref().unwrap_or("a tool")
            ),
        ));
    }
    violations
}

/// At most this many characters of an agent's label are shown in a violation.
const LABEL_SHOWN_CHARS_MAX: usize = 60;

/// `label`, cut to [`LABEL_SHOWN_CHARS_MAX`] characters: a worker's label is its
/// whole prompt.
fn short_label(label: &str) -> String {
    match label.char_indices().nth(LABEL_SHOWN_CHARS_MAX) {
        Some((cut, _)) => format!("{:?}…", &label[..cut]),
        None => format!("{label:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{EnvelopeBodySeen, HeadChange, Name, ShutdownsSeen};
    use coord_runtime::task::TaskId;
    use proptest::prelude::*;

    proptest! {
        /// The byte test agrees with comparing components, however the path is
        /// spelled.
        #[test]
        fn is_under_agrees_with_path_starts_with(
            path in "(/|//|/\\./)?((session|work|sessionx|wor|\\.|a)(/|//)?){0,4}",
            root in prop::sample::select(vec!["/session", "/work"]),
        ) {
            prop_assert_eq!(is_under(&path, root), std::path::Path::new(&path).starts_with(root));
        }
    }

    fn entry(time_ms: u64, event: RuntimeEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "runtime".into(),
            typed: TraceEvent::runtime(event),
        }
    }

    fn called(
        time_ms: u64,
        agent: &str,
        change: Option<HeadChange>,
        forked_from: Option<&str>,
    ) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: agent.into(),
            typed: TraceEvent::Sim(SimEvent::ModelCalled {
                agent: agent.into(),
                call: 1,
                prefix_digest: "head".into(),
                forked_from: forked_from.map(Name::from),
                fork_shared: None,
                compaction: false,
                head_change: change.map(Box::new),
            }),
        }
    }

    fn system_change(block_index: u64, byte_offset: u64) -> Option<HeadChange> {
        Some(HeadChange {
            part: "system".to_owned(),
            block_index: Some(block_index),
            byte_offset,
        })
    }

    fn declared(time_ms: u64, agent: &str, block_index: usize, byte_offset: u64) -> TraceEntry {
        entry(
            time_ms,
            RuntimeEvent::CacheBreak {
                agent: agent.to_owned(),
                part: "system".to_owned(),
                block_index: Some(block_index),
                byte_offset,
            },
        )
    }

    fn fork_called(time_ms: u64, agent: &str, history_len: u64, shared: &str) -> TraceEntry {
        let mut entry = called(time_ms, agent, None, Some("coordinator"));
        if let TraceEvent::Sim(SimEvent::ModelCalled { fork_shared, .. }) = &mut entry.typed {
            *fork_shared = Some(Box::new((history_len, Name::new(shared))));
        }
        entry
    }

    #[test]
    fn fork_prefix_holds_sibling_forks_to_one_shared_prefix() {
        // Goal: sibling forks of one parent turn agree byte for byte up to their
        // directives; forks of another turn (another history length) are not
        // siblings. Method: hand-built fork calls under one parent head.
        let parent = called(10, "coordinator", None, None);
        let agreeing = [
            parent.clone(),
            fork_called(20, "fork-a", 3, "s1"),
            fork_called(21, "fork-b", 3, "s1"),
            fork_called(30, "fork-c", 5, "s2"),
        ];
        assert!(fork_prefix(&agreeing).is_empty());
        let differing = [
            parent,
            fork_called(20, "fork-a", 3, "s1"),
            fork_called(21, "fork-b", 3, "s9"),
        ];
        let violations = fork_prefix(&differing);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("sibling fork fork-a"));
    }

    #[test]
    fn fork_prefix_holds_a_forks_first_call_to_its_parents_key() {
        // Goal: invariant 8 is about forks and parents, not only about one agent's
        // calls. Method: a fork whose first key differs from its parent's, then one
        // that matches.
        let differing = [
            called(0, "coordinator", None, None),
            called(10, "fork-1", system_change(1, 40), Some("coordinator")),
        ];
        let violations = fork_prefix(&differing);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0]
                .detail
                .contains("than its parent coordinator's last call")
                && violations[0].detail.contains("system block 1, byte 40"),
            "{violations:?}"
        );
        let matching = [
            called(0, "coordinator", None, None),
            called(10, "fork-1", None, Some("coordinator")),
        ];
        assert!(fork_prefix(&matching).is_empty());
    }

    #[test]
    fn fork_prefix_holds_a_declared_break_to_where_the_requests_differ() {
        // Goal: a declared break is a claim the requests must bear out: for the
        // agent whose key changed, at the place it changed. Method: the same change
        // declared rightly, at another byte, for another agent, and not at all; and
        // a break declared where nothing changed.
        let first = called(0, "coordinator", None, None);
        let changed = called(10, "coordinator", system_change(2, 900), None);
        let right = [
            first.clone(),
            declared(5, "coordinator", 2, 900),
            changed.clone(),
        ];
        assert!(fork_prefix(&right).is_empty());

        let elsewhere = [
            first.clone(),
            declared(5, "coordinator", 2, 901),
            changed.clone(),
        ];
        let violations = fork_prefix(&elsewhere);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0]
                .detail
                .contains("names system block 2, byte 901")
                && violations[0].detail.contains("at system block 2, byte 900"),
            "{violations:?}"
        );

        let someone_else = [
            first.clone(),
            declared(5, "worker", 2, 900),
            changed.clone(),
        ];
        let violations = fork_prefix(&someone_else);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("no cache break was declared"));

        let unchanged = [
            first.clone(),
            declared(5, "coordinator", 2, 900),
            called(10, "coordinator", None, None),
        ];
        let violations = fork_prefix(&unchanged);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("has the cache key of its previous call"));

        let twice = [
            first,
            declared(5, "coordinator", 2, 900),
            declared(6, "coordinator", 2, 900),
            changed,
        ];
        let violations = fork_prefix(&twice);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("a second cache break"));
    }

    fn sim(time_ms: u64, event: SimEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "sim".into(),
            typed: TraceEvent::Sim(event),
        }
    }

    fn played(agent: &str, turns_played: u64, turns: u64) -> crate::trace::ScriptPlayed {
        crate::trace::ScriptPlayed {
            agent: agent.to_owned(),
            turns_played,
            turns,
        }
    }

    fn ended(time_ms: u64) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::RunEnded {
                open_tasks: Vec::new(),
                coordinator: "finished after 3 turns".to_owned(),
            },
        )
    }

    #[test]
    fn liveness_fails_a_restart_that_cannot_read_what_the_runtime_made_durable() {
        // Goal: a torn session file after a power cut ends the run with every task
        // open; only a disk fault at the restart explains that.
        let crashed = sim(
            10_000,
            SimEvent::HostCrashed {
                lost: Vec::new(),
                changed: Vec::new(),
            },
        );
        let restart_failed = sim(
            10_000,
            SimEvent::RunEnded {
                open_tasks: Vec::new(),
                coordinator: format!("{RESTART_FAILED}session file /session/session.json: EOF"),
            },
        );
        let disk_fault = sim(
            10_000,
            SimEvent::FaultFired {
                fault: 1,
                kind: FaultKind::Disk,
                detail: "read /session/session.json: Eio".to_owned(),
                agent: None,
            },
        );
        let failed = liveness(&[crashed.clone(), restart_failed.clone()]);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].invariant, "liveness");
        assert!(
            failed[0].detail.contains("session.json: EOF"),
            "{}",
            failed[0].detail
        );
        assert!(liveness(&[crashed.clone(), disk_fault, restart_failed]).is_empty());
        assert!(liveness(&[crashed, ended(20_000)]).is_empty());
    }

    #[test]
    fn not_vacuous_holds_the_leads_inbox_to_its_scripted_permission_answers() {
        // Goal: every scripted answer met a request from its member for its tool,
        // and every request in a lead's inbox was one the lead was to answer.
        let ask = |member: &str, tool: Option<&str>| PermissionAsked {
            team: "crew".to_owned(),
            member: member.to_owned(),
            tool: tool.map(str::to_owned),
        };
        let run = |asked, scripted| {
            not_vacuous(&[
                sim(80, SimEvent::PermissionsAsked { asked, scripted }),
                ended(100),
            ])
        };
        let played = run(
            vec![ask("editor", Some("Bash")), ask("Reviewer", Some("Write"))],
            vec![ask("reviewer", None), ask("editor", Some("Bash"))],
        );
        assert!(played.is_empty(), "{played:?}");

        let never_asked = run(Vec::new(), vec![ask("editor", Some("Bash"))]);
        assert_eq!(never_asked.len(), 1, "{never_asked:?}");
        assert!(never_asked[0]
            .detail
            .contains("scripted to answer editor's permission request for Bash"));

        let wrong_tool = run(
            vec![ask("editor", Some("Write"))],
            vec![ask("editor", Some("Bash"))],
        );
        assert_eq!(wrong_tool.len(), 2, "{wrong_tool:?}");
        assert!(wrong_tool[1]
            .detail
            .contains("editor asked the lead of crew for permission to use Write"));
    }

    #[test]
    fn not_vacuous_holds_a_scripted_shutdown_to_the_leads_inbox_and_the_team_file() {
        // Goal: a member asked to shut down approved in the lead's inbox, and once
        // the lead read the approval it is off its team's file; either missing is
        // a failure naming the member. An approval the lead never read (the run
        // ended first) leaves the member listed rightly.
        let member = |name: &str| TeamMember {
            team: "crew".to_owned(),
            member: name.to_owned(),
        };
        let run = |approved: Vec<TeamMember>, read: bool, listed| {
            not_vacuous(&[
                sim(
                    80,
                    SimEvent::ShutdownsWitnessed(Box::new(ShutdownsSeen {
                        scripted: vec![member("scout")],
                        approvals_read: if read { approved.clone() } else { Vec::new() },
                        approved,
                        listed,
                        answered_twice: Vec::new(),
                    })),
                ),
                ended(100),
            ])
        };
        assert!(run(vec![member("Scout")], true, vec![member("team-lead")]).is_empty());
        let unanswered = run(Vec::new(), false, vec![member("team-lead")]);
        assert_eq!(unanswered.len(), 1, "{unanswered:?}");
        assert!(unanswered[0].detail.contains("asked scout to shut down"));
        let kept = run(vec![member("scout")], true, vec![member("scout")]);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0].detail.contains("still lists it"));
        assert!(run(vec![member("scout")], false, vec![member("scout")]).is_empty());
    }

    #[test]
    fn message_delivery_fails_a_shutdown_request_answered_twice() {
        // Goal: two answers in the lead's inbox to one request (which may have
        // arrived twice) fail invariant 4, naming the member and the request; a
        // repeated message the runtime hands over is no over-delivery. Method:
        // hand-built witnesses.
        let member = TeamMember {
            team: "crew".to_owned(),
            member: "archivist".to_owned(),
        };
        let seen = |answered_twice| {
            sim(
                80,
                SimEvent::ShutdownsWitnessed(Box::new(ShutdownsSeen {
                    scripted: vec![member.clone()],
                    approved: vec![member.clone(), member.clone()],
                    approvals_read: Vec::new(),
                    listed: Vec::new(),
                    answered_twice,
                })),
            )
        };
        assert!(message_delivery(&[seen(Vec::new()), ended(100)]).is_empty());
        let twice = message_delivery(&[
            seen(vec![crate::trace::RequestAnswers {
                member: member.clone(),
                request_id: "shutdown-1767225631000@t59077f8t".to_owned(),
                answers: 2,
            }]),
            ended(100),
        ]);
        assert_eq!(twice.len(), 1, "{twice:?}");
        assert_eq!(twice[0].invariant, "message-delivery");
        assert!(twice[0].detail.contains(
            "holds 2 answers from archivist to its shutdown request \
             shutdown-1767225631000@t59077f8t"
        ));
    }

    #[test]
    fn message_delivery_fails_a_member_marked_asked_when_no_lead_asked_it() {
        // Goal: a team file that marks a member as asked to shut down must name one
        // its lead asked (by name, ignoring case). Method: the watcher marked, once
        // unasked and once asked as "Watcher".
        let marked = |asked: Vec<String>| {
            sim(
                80,
                SimEvent::ShutdownsMarked {
                    marked: vec![TeamMember {
                        team: "crew".to_owned(),
                        member: "watcher".to_owned(),
                    }],
                    asked,
                },
            )
        };
        let unasked = message_delivery(&[marked(vec!["indexer".to_owned()]), ended(100)]);
        assert_eq!(unasked.len(), 1, "{unasked:?}");
        assert!(unasked[0]
            .detail
            .contains("the file of team crew marks watcher as asked to shut down"));
        assert!(message_delivery(&[marked(vec!["Watcher".to_owned()]), ended(100)]).is_empty());
    }

    #[test]
    fn not_vacuous_flags_an_unplayed_script_and_a_worker_that_never_ran() {
        // Goal: a script left short with no fault fired is a failure, named by
        // agent; a fully played run passes. Method: hand-built witnesses.
        let scripts = |agents| sim(90, SimEvent::ScriptsPlayed { agents });
        let full = vec![
            ended(80),
            scripts(vec![played("coordinator", 3, 3), played("w", 2, 2)]),
        ];
        assert!(not_vacuous(&full).is_empty());
        let short = vec![
            ended(80),
            scripts(vec![played("coordinator", 2, 3), played("w", 0, 2)]),
        ];
        let violations = not_vacuous(&short);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("\"coordinator\" played 2 of its 3"));
        assert!(violations[1].detail.contains("it never ran"));
    }

    #[test]
    fn not_vacuous_flags_a_coordinator_still_running_when_every_script_was_played() {
        // Goal: a session that waits forever after its last scripted turn fails,
        // once (not again beside an unplayed script), unless a fault explains it.
        let scripts = |agents| sim(90, SimEvent::ScriptsPlayed { agents });
        let cut = sim(
            80,
            SimEvent::RunEnded {
                open_tasks: Vec::new(),
                coordinator: COORDINATOR_CUT_OFF.to_owned(),
            },
        );
        let played_all = vec![cut.clone(), scripts(vec![played("coordinator", 3, 3)])];
        let violations = not_vacuous(&played_all);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("never finished"));
        let short = vec![cut.clone(), scripts(vec![played("coordinator", 2, 3)])];
        let violations = not_vacuous(&short);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("played 2 of its 3"));
        let crashed = vec![
            sim(
                10,
                SimEvent::HostCrashed {
                    lost: Vec::new(),
                    changed: Vec::new(),
                },
            ),
            cut,
            scripts(vec![played("coordinator", 3, 3)]),
        ];
        assert!(not_vacuous(&crashed).is_empty());
    }

    #[test]
    fn every_pending_notification_goes_into_the_coordinators_next_turns() {
        // Goal: PROTOCOL.md §3's injection of every pending envelope at once,
        // judged on the requests: three enqueued together and carried one a turn
        // fail at the second request that lacks one; carried together they pass,
        // and a retry of a request (the same call) does not count.
        let enqueued = |time_ms: u64, task: &str| {
            entry(
                time_ms,
                RuntimeEvent::NotificationEnqueued {
                    task_id: TaskId::parse(task).unwrap(),
                    status: coord_runtime::task::TaskStatus::Completed,
                },
            )
        };
        let carried = |time_ms: u64, tasks: &[&str]| {
            sim(
                time_ms,
                SimEvent::EnvelopesAccepted {
                    task_ids: tasks.iter().map(|task| task.to_string()).collect(),
                    statuses: tasks
                        .iter()
                        .map(|_| coord_runtime::envelope::EnvelopeStatus::Completed)
                        .collect(),
                    bodies: Box::default(),
                },
            )
        };
        let call = |time_ms: u64, call: u32| TraceEntry {
            time_ms,
            actor: "coordinator".into(),
            typed: TraceEvent::Sim(SimEvent::ModelCalled {
                agent: "coordinator".into(),
                call,
                prefix_digest: "head".into(),
                forked_from: None,
                fork_shared: None,
                compaction: false,
                head_change: None,
            }),
        };
        let tasks = ["a00000001", "a00000002", "a00000003"];
        let mut together: Vec<TraceEntry> = tasks.iter().map(|t| enqueued(10, t)).collect();
        together.extend([call(20, 1), call(20, 1), carried(30, &tasks), call(30, 2)]);
        // The first call came before any was enqueued: its retry is no new turn.
        together.insert(0, call(5, 1));
        assert!(notifications_held_back(&together).is_empty());
        let mut one_a_turn: Vec<TraceEntry> = tasks.iter().map(|t| enqueued(10, t)).collect();
        one_a_turn.extend([
            carried(20, &tasks[..1]),
            call(20, 1),
            carried(30, &tasks[1..2]),
            call(30, 2),
            carried(40, &tasks[2..]),
            call(40, 3),
        ]);
        let held = notifications_held_back(&one_a_turn);
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0].detail.contains("task a00000003"),
            "{}",
            held[0].detail
        );
    }

    fn killed(time_ms: u64, task: &str) -> TraceEntry {
        entry(
            time_ms,
            RuntimeEvent::TaskTransitioned {
                task_id: TaskId::parse(task).unwrap(),
                from: coord_runtime::task::TaskStatus::Running,
                to: coord_runtime::task::TaskStatus::Killed,
            },
        )
    }

    #[test]
    fn not_vacuous_excuses_what_a_stop_reached_but_not_a_sibling_or_a_deadline() {
        // Goal: TaskStop may cut short the stopped worker's script and those of the
        // tasks it launched (the cascade); a sibling's, or a worker the runtime
        // killed unasked (a deadline expiry, how a hung worker ends), may not.
        // Method: w (which launched c) and v left short; the coordinator's model
        // told that w stopped; then no stop, only the runtime's kill and an expiry.
        let scripts = sim(
            90,
            SimEvent::ScriptsPlayed {
                agents: vec![
                    played("coordinator", 3, 3),
                    played("w", 1, 3),
                    played("c", 1, 2),
                    played("v", 2, 3),
                ],
            },
        );
        let stopped = vec![
            killed(50, "a00000001"),
            sim(
                50,
                SimEvent::TasksStopped {
                    task_ids: vec!["a00000001".to_owned()],
                },
            ),
            ended(80),
            scripts.clone(),
            sim(
                90,
                SimEvent::StopsWitnessed {
                    tasks: vec![
                        launched("a00000001", "w", "coordinator"),
                        launched("a00000002", "c", "w"),
                        launched("a00000003", "v", "coordinator"),
                    ],
                    calls: Vec::new(),
                },
            ),
        ];
        let violations = not_vacuous(&stopped);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("\"v\" played 2 of its 3"));
        let expired = vec![
            killed(50, "a00000001"),
            entry(
                50,
                RuntimeEvent::DeadlineExpired {
                    task_id: TaskId::parse("a00000001").unwrap(),
                },
            ),
            ended(80),
            scripts,
        ];
        let violations = not_vacuous(&expired);
        assert_eq!(violations.len(), 3, "{violations:?}");
        assert!(violations[0].detail.contains("\"w\" played 1 of its 3"));
    }

    #[test]
    fn not_vacuous_excuses_a_worker_its_own_script_made_slower_than_its_deadline() {
        // Goal: a worker whose scripted answer was due after its task's deadline,
        // and whose call was abandoned at that deadline, leaves its script unplayed
        // rightly; one killed before its deadline, or whose call was abandoned only
        // after the coordinator heard of the kill, does not.
        // Method: spawn at 1 s with a 120 s deadline; the answer is due at 301 s;
        // the envelope saying `killed` reaches the coordinator's model at 121.5 s.
        let run = |deadline_ms: u64, abandoned_ms: u64| {
            let trace = vec![
                sim(
                    0,
                    SimEvent::SpawnDeadlineSet {
                        spawn_deadline_ms: deadline_ms,
                    },
                ),
                entry(
                    1_000,
                    RuntimeEvent::TaskSpawned {
                        task_id: TaskId::parse("a00000001").unwrap(),
                        parent: "coordinator".to_owned(),
                        run_in_background: true,
                    },
                ),
                accepted_with(
                    121_500,
                    "a00000001",
                    EnvelopeStatus::Killed,
                    body("Agent \"soak\" was stopped", None, None),
                ),
                ended(122_000),
                sim(
                    122_000,
                    SimEvent::ScriptsPlayed {
                        agents: vec![played("coordinator", 2, 2), played("w", 0, 2)],
                    },
                ),
                sim(
                    122_000,
                    SimEvent::StopsWitnessed {
                        tasks: vec![launched("a00000001", "w", "coordinator")],
                        calls: vec![crate::trace::CallEnded {
                            agent: "w".to_owned(),
                            call: 1,
                            sent_ms: 1_000,
                            ended_ms: Some(abandoned_ms),
                            abandoned: true,
                            due_ms: Some(301_000),
                        }],
                    },
                ),
            ];
            not_vacuous(&trace)
        };
        assert!(run(120_000, 121_000).is_empty());
        // The runtime killed it at 61 s, before its 120 s deadline.
        let early = run(120_000, 61_000);
        assert_eq!(early.len(), 1, "{early:?}");
        assert!(early[0].detail.contains("\"w\" played 0 of its 2"));
        // The deadline kill left the call open past the envelope.
        assert_eq!(run(120_000, 121_800).len(), 1);
        // With a 60 s deadline, the 61 s kill came after it.
        assert!(run(60_000, 61_000).is_empty());
    }

    #[test]
    fn not_vacuous_excuses_a_struck_worker_and_what_followed_but_not_a_running_sibling() {
        // Goal: a fault that strikes one worker explains its script, the
        // coordinator's, and those of agents that had not yet run; a worker
        // already running must still finish. A fault of wider reach, or one that
        // strikes the coordinator, explains every script; one a runtime absorbs
        // explains none. Method: w struck at 40 ms, v running since 10 ms, late
        // first called at 60 ms; then the same with each other kind of fault.
        let fault = |kind, agent: Option<&str>| {
            sim(
                40,
                SimEvent::FaultFired {
                    fault: 0,
                    kind,
                    detail: "struck".to_owned(),
                    agent: agent.map(Name::new),
                },
            )
        };
        let called = |time, agent: &str| {
            sim(
                time,
                SimEvent::ModelCalled {
                    agent: Name::new(agent),
                    call: 1,
                    prefix_digest: Name::new("0"),
                    forked_from: None,
                    fork_shared: None,
                    compaction: false,
                    head_change: None,
                },
            )
        };
        let run = |fault: TraceEntry| {
            not_vacuous(&[
                called(0, "coordinator"),
                called(10, "v"),
                called(20, "w"),
                fault,
                called(60, "late"),
                ended(80),
                sim(
                    90,
                    SimEvent::ScriptsPlayed {
                        agents: vec![
                            played("coordinator", 2, 3),
                            played("w", 1, 3),
                            played("v", 1, 2),
                            played("late", 1, 2),
                        ],
                    },
                ),
            ])
        };
        let violations = run(fault(FaultKind::WorkerCrash, Some("w")));
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].detail.contains("\"v\" played 1 of its 2"));
        assert!(run(fault(FaultKind::ModelApi, Some("coordinator"))).is_empty());
        assert!(run(fault(FaultKind::Disk, None)).is_empty());
        assert_eq!(run(fault(FaultKind::StaleLock, None)).len(), 4);
    }

    #[test]
    fn notify_once_judges_a_stopped_shell_by_the_stop_the_model_was_told_of() {
        // Goal: a shell stopped by TaskStop sends no envelope, whatever the runtime
        // says of how it ended; a shell killed any other way must still notify.
        // Method: the same shell's killed end, after a TaskStop answer the model
        // received, with and without an envelope for it; then without the stop.
        let spawned = entry(
            0,
            RuntimeEvent::TaskSpawned {
                task_id: TaskId::parse("b00000001").unwrap(),
                parent: "coordinator".to_owned(),
                run_in_background: true,
            },
        );
        let stopped = sim(
            40,
            SimEvent::TasksStopped {
                task_ids: vec!["b00000001".to_owned()],
            },
        );
        let accepted = sim(
            60,
            SimEvent::EnvelopesAccepted {
                task_ids: vec!["b00000001".to_owned()].into(),
                statuses: vec![EnvelopeStatus::Killed].into(),
                bodies: Box::default(),
            },
        );
        let silent = vec![
            spawned.clone(),
            killed(40, "b00000001"),
            stopped.clone(),
            ended(80),
        ];
        assert!(
            notify_once(&silent).is_empty(),
            "{:?}",
            notify_once(&silent)
        );
        let notified = vec![
            spawned.clone(),
            killed(40, "b00000001"),
            stopped,
            accepted,
            ended(80),
        ];
        let violations = notify_once(&notified);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("background shell b00000001 was stopped"));
        let unstopped = vec![spawned, killed(40, "b00000001"), ended(80)];
        let violations = notify_once(&unstopped);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("never received its notification"));
    }

    #[test]
    fn notify_once_refuses_an_envelope_for_a_foreground_task() {
        // Goal: a foreground task's result is its Agent call's answer, so the
        // coordinator accepting an envelope for one fails the seed (as a restart
        // that records every task as a background one would send), and the same
        // envelope for a background task passes.
        let spawned = |background: bool| {
            entry(
                0,
                RuntimeEvent::TaskSpawned {
                    task_id: TaskId::parse("a00000001").unwrap(),
                    parent: "coordinator".to_owned(),
                    run_in_background: background,
                },
            )
        };
        let accepted = sim(
            60,
            SimEvent::EnvelopesAccepted {
                task_ids: vec!["a00000001".to_owned()].into(),
                statuses: vec![EnvelopeStatus::Failed].into(),
                bodies: Box::default(),
            },
        );
        let background = notify_once(&[spawned(true), accepted.clone()]);
        assert!(background.is_empty(), "{background:?}");
        let foreground = notify_once(&[spawned(false), accepted]);
        assert_eq!(foreground.len(), 1, "{foreground:?}");
        assert!(foreground[0].detail.contains("ran in the foreground"));
    }

    #[test]
    fn no_escape_holds_a_background_shell_to_its_workers_worktree() {
        // Goal: a worker whose calls ran in its worktree has its background shell
        // judged by where the world's shell ran the command: in the worktree it
        // passes, in the workspace root it is an escape; a worker without a
        // worktree, or one the tap could not name, is not judged.
        let worktree = "/work/.claude/worktrees/limits";
        let read = sim(
            10,
            SimEvent::ToolRan {
                agent: Name::new("a00000001"),
                tool: Name::new("Read"),
                target: Name::new(&format!("{worktree}/notes.md")),
                cwd: Name::new(worktree),
                content_digest: None,
                ok: true,
            },
        );
        let launched = sim(
            20,
            SimEvent::ShellLaunched {
                agent: Name::new("Test the limits."),
                task_id: "b00000001".to_owned(),
                command: Name::new("cargo test"),
            },
        );
        let launcher = sim(
            20,
            SimEvent::ShellLauncherTasks {
                task_id: "b00000001".to_owned(),
                launcher_tasks: vec!["a00000001".to_owned()].into(),
            },
        );
        let ended = |cwd: &str| {
            sim(
                30,
                SimEvent::ShellEnded {
                    command: Name::new("cargo test"),
                    cwd: Name::new(cwd),
                    exit_code: Some(0),
                    timed_out: false,
                },
            )
        };
        let inside = [
            read.clone(),
            launched.clone(),
            launcher.clone(),
            ended(worktree),
        ];
        assert!(shells_outside_worktree(&inside).is_empty());
        let outside = [
            read.clone(),
            launched.clone(),
            launcher,
            ended(WORKSPACE_ROOT),
        ];
        let violations = shells_outside_worktree(&outside);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].detail.contains("ran `cargo test` in /work, outside the worker's worktree /work/.claude/worktrees/limits"),
            "{violations:?}"
        );
        let unnamed = [read, launched, ended(WORKSPACE_ROOT)];
        assert!(shells_outside_worktree(&unnamed).is_empty());
    }

    #[test]
    fn notify_once_holds_a_coordinator_cut_off_at_the_run_limit_to_every_ended_task() {
        // Goal: a crash excuses unplayed scripts, but a coordinator left waiting
        // to the run limit for a task that ended and was never notified again
        // after the restart is a lost envelope; one waiting on a task that never
        // ended is liveness's failure, not this one's, even when the teardown
        // after the cut-off kills it (as a turmoil host's shutdown does).
        // Method: a completed task and a still-running one, both launches seen by
        // the model, neither answered, then the run cut off and the running one
        // killed.
        let spawn = |task: &str| {
            entry(
                0,
                RuntimeEvent::TaskSpawned {
                    task_id: TaskId::parse(task).unwrap(),
                    parent: "coordinator".to_owned(),
                    run_in_background: true,
                },
            )
        };
        let completed = entry(
            3_000,
            RuntimeEvent::TaskTransitioned {
                task_id: TaskId::parse("a00000001").unwrap(),
                from: coord_runtime::task::TaskStatus::Running,
                to: coord_runtime::task::TaskStatus::Completed,
            },
        );
        let crashed = sim(
            10_000,
            SimEvent::HostCrashed {
                lost: Vec::new(),
                changed: Vec::new(),
            },
        );
        let unanswered = sim(
            900_000,
            SimEvent::LaunchesUnanswered {
                task_ids: vec!["a00000001".to_owned(), "a00000002".to_owned()],
            },
        );
        let cut_off = sim(
            900_000,
            SimEvent::RunEnded {
                open_tasks: Vec::new(),
                coordinator: COORDINATOR_CUT_OFF.to_owned(),
            },
        );
        let killed_in_teardown = entry(
            900_000,
            RuntimeEvent::TaskTransitioned {
                task_id: TaskId::parse("a00000002").unwrap(),
                from: coord_runtime::task::TaskStatus::Running,
                to: coord_runtime::task::TaskStatus::Killed,
            },
        );
        let trace = vec![
            spawn("a00000001"),
            spawn("a00000002"),
            completed,
            crashed,
            unanswered,
            cut_off,
            killed_in_teardown,
        ];
        let violations = notify_once(&trace);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(
            violations[0].detail,
            "the coordinator's model received task a00000001's launch, but no envelope for it before the coordinator was cut off at the run limit"
        );
    }

    #[test]
    fn not_vacuous_accepts_a_short_script_that_a_fired_fault_explains() {
        // Goal: a fault that fired (its record is in the trace) explains a script
        // cut short.
        let trace = vec![
            sim(
                10,
                SimEvent::FaultFired {
                    fault: 0,
                    kind: crate::fault::FaultKind::CoordinatorCrash,
                    detail: "power cut".to_owned(),
                    agent: None,
                },
            ),
            ended(80),
            sim(
                90,
                SimEvent::ScriptsPlayed {
                    agents: vec![played("coordinator", 1, 3)],
                },
            ),
        ];
        assert!(not_vacuous(&trace).is_empty());
    }

    fn launched(task_id: &str, agent: &str, launched_by: &str) -> crate::trace::TaskLaunched {
        crate::trace::TaskLaunched {
            task_id: task_id.to_owned(),
            agent: agent.to_owned(),
            launched_by: launched_by.to_owned(),
        }
    }

    /// One message from the coordinator to `to`, as its recipient received it.
    fn message_witnessed(to: &str, received_count: u64, overtaken_by: Option<&str>) -> TraceEntry {
        sim(
            90,
            SimEvent::MessagesWitnessed {
                messages: vec![crate::trace::MessageWitness {
                    from: "coordinator".to_owned(),
                    to: to.to_owned(),
                    message_digest: "e55fe66096626132".to_owned(),
                    received_count,
                    overtaken_by: overtaken_by.map(str::to_owned),
                    may_miss: false,
                    sent_ms: (received_count == 0).then_some(40),
                    to_sender: false,
                }],
            },
        )
    }

    fn witnessed(received_count: u64) -> TraceEntry {
        message_witnessed("w", received_count, None)
    }

    #[test]
    fn message_delivery_counts_mail_to_a_teammates_inbox_but_not_to_the_leads() {
        // Goal: an idle teammate is handed its inbox's mail as well as its queued
        // messages; mail to the lead's inbox is never handed to a task. Method: one
        // queued message and one delivery of two, with the second written to the
        // teammate's inbox, then to the lead's.
        let mailed = |inbox: &str| {
            entry(
                30,
                RuntimeEvent::MailboxWritten {
                    path: std::path::PathBuf::from(format!("/session/teams/crew/inboxes/{inbox}")),
                    from: "team-lead".to_owned(),
                    messages_count: 1,
                },
            )
        };
        let queued = entry(
            40,
            RuntimeEvent::MessageQueued {
                to: "t00000001".to_owned(),
                from: "coordinator".to_owned(),
            },
        );
        let delivered = entry(
            50,
            RuntimeEvent::MessagesDelivered {
                to: "t00000001".to_owned(),
                count: 2,
            },
        );
        let to_member = [mailed("scout.json"), queued.clone(), delivered.clone()];
        assert!(message_delivery(&to_member).is_empty());
        let to_lead = [mailed("team-lead.json"), queued, delivered];
        let violations = message_delivery(&to_lead);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("handed 2 messages but only 1"));
    }

    #[test]
    fn message_delivery_judges_what_the_recipients_model_received() {
        // Goal: the checker does not trust the runtime's own "delivered" events.
        // A message the runtime says it delivered but the model never received is
        // dropped; one received twice is a duplicate; once is right.
        let delivered = |count| {
            entry(
                50,
                RuntimeEvent::MessagesDelivered {
                    to: "w".to_owned(),
                    count,
                },
            )
        };
        let queued = entry(
            40,
            RuntimeEvent::MessageQueued {
                to: "w".to_owned(),
                from: "coordinator".to_owned(),
            },
        );
        let once = vec![queued.clone(), delivered(1), witnessed(1)];
        assert!(message_delivery(&once).is_empty());
        let dropped = message_delivery(&[queued.clone(), delivered(1), witnessed(0)]);
        assert_eq!(dropped.len(), 1);
        assert!(dropped[0].detail.contains("never reached its model"));
        let twice = message_delivery(&[queued, delivered(1), witnessed(2)]);
        assert_eq!(twice.len(), 1);
        assert!(twice[0].detail.contains("reached its model 2 times"));
    }

    #[test]
    fn a_corrupt_inbox_must_keep_its_bytes_and_every_write_it_acknowledged() {
        // Goal: an inbox left corrupt loses nothing: its bytes stay on the disk, and
        // a write acknowledged to a producer is in it at the end. Method: the end
        // witness with the bytes gone, then kept with one acknowledged write
        // missing, then kept with it there.
        let path = "/session/teams/sim/inboxes/team-lead.json";
        let acked = sim(
            2_000,
            SimEvent::MailboxAcked {
                path: crate::trace::Name::new(path),
                from: crate::trace::Name::new("producer-0"),
                message_digest: "593fb7e985ddeb74".to_owned(),
            },
        );
        let witnessed = |kept: bool, digests: &[&str]| {
            sim(
                90_000,
                SimEvent::CorruptInboxWitnessed {
                    path: path.to_owned(),
                    kept,
                    message_digests: digests.iter().map(|d| (*d).to_owned()).collect(),
                },
            )
        };
        let overwritten = mailbox_durability(&[witnessed(false, &[])]);
        assert_eq!(overwritten.len(), 1, "{overwritten:?}");
        assert!(overwritten[0].detail.contains("its bytes are gone"));
        let dropped = mailbox_durability(&[acked.clone(), witnessed(true, &[])]);
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(dropped[0].detail.contains("1 writes to the corrupt inbox"));
        assert!(mailbox_durability(&[acked, witnessed(true, &["593fb7e985ddeb74"])]).is_empty());
    }

    #[test]
    fn a_stop_excuses_only_the_messages_accepted_before_it() {
        // Goal: a stop ends its task with what was queued to it, so a message
        // accepted before the stop (at 40 ms) may never arrive; a message sent
        // after the stop must resume the worker and is judged. The stop reaches
        // the tasks launched under the stopped one too. Method: the same dropped
        // message, the recipient stopped at 50 ms, at 30 ms, and never; and a
        // recipient whose launcher was stopped.
        let stopped_at = |time_ms: u64, task: &str, to: &str| {
            vec![
                sim(
                    time_ms,
                    SimEvent::TasksStopped {
                        task_ids: vec![task.to_owned()],
                    },
                ),
                message_witnessed(to, 0, None),
                sim(
                    95,
                    SimEvent::StopsWitnessed {
                        tasks: vec![
                            launched("a00000001", "w", "coordinator"),
                            launched("a00000002", "c", "w"),
                        ],
                        calls: Vec::new(),
                    },
                ),
            ]
        };
        assert!(message_delivery(&stopped_at(50, "a00000001", "w")).is_empty());
        assert!(message_delivery(&stopped_at(40, "a00000001", "w")).is_empty());
        assert!(message_delivery(&stopped_at(50, "a00000001", "c")).is_empty());
        let resumed = message_delivery(&stopped_at(30, "a00000001", "w"));
        assert_eq!(resumed.len(), 1, "{resumed:?}");
        assert!(resumed[0].detail.contains("never reached its model"));
        let sibling = message_delivery(&stopped_at(50, "a00000002", "w"));
        assert_eq!(sibling.len(), 1, "{sibling:?}");
        assert_eq!(message_delivery(&[witnessed(0)]).len(), 1);
    }

    #[test]
    fn message_delivery_flags_a_message_its_recipient_received_after_a_later_one() {
        // Goal: "in order" (PROTOCOL.md §5) is judged, not only "once". Method: a
        // witness whose message was overtaken by one sent after it.
        let overtaken = message_witnessed("w", 1, Some("0b8bdbd5d2555d75"));
        let violations = message_delivery(&[overtaken]);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0]
            .detail
            .contains("reached its model after message 0b8bdbd5d2555d75"));
    }

    fn task_ended(time_ms: u64, task: &str, to: TaskStatus) -> TraceEntry {
        entry(
            time_ms,
            RuntimeEvent::TaskTransitioned {
                task_id: TaskId::parse(task).unwrap(),
                from: TaskStatus::Running,
                to,
            },
        )
    }

    /// A body as the tap records it, for a task launched as "find-bug".
    fn body(
        summary: &str,
        result_said: Option<bool>,
        result_is_output: Option<bool>,
    ) -> EnvelopeBodySeen {
        EnvelopeBodySeen {
            summary: summary.to_owned(),
            description: Some("find-bug".to_owned()),
            result_head: Some("src/auth.rs:42 is wrong.".to_owned()),
            result_said,
            result_is_output,
            result_is_output_cut: false,
            name_asked: None,
            worktree: None,
            usage: None,
            usage_owed: false,
            forked: false,
            tool_use_id: None,
            launch_call_id: None,
            output_file: None,
            output_file_answered: None,
        }
    }

    #[test]
    fn a_nexo_fork_renotified_after_a_restart_may_be_worded_as_any_task() {
        // Goal: a restarted runtime's records keep a task's kind, not how its
        // summary was worded: a nexo fork notified again from its record may carry
        // the usual wording, one notified once may not, and its first line always
        // fits.
        let worded = EnvelopeBodySeen {
            forked: true,
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        let first_line = EnvelopeBodySeen {
            forked: true,
            ..body("src/auth.rs:42 is wrong.", Some(true), None)
        };
        let fits = |body: &EnvelopeBodySeen, renotified| {
            summary_fits(
                "a0123abcd",
                EnvelopeStatus::Completed,
                body,
                true,
                renotified,
            )
        };
        assert!(fits(&worded, true));
        assert!(!fits(&worded, false));
        assert!(fits(&first_line, true) && fits(&first_line, false));
    }

    #[test]
    fn an_envelopes_duration_fits_the_run_clock() {
        // Goal: `<duration_ms>` is held to the clock: no longer than from the
        // launching call's answer to the envelope, and for a completed task no
        // shorter than its worker's first call. Method: durations inside, at and
        // outside both bounds.
        let with_duration = |duration_ms| EnvelopeBodySeen {
            usage: Some(UsageSeen {
                total_tokens: 0,
                tool_uses: 0,
                billed: None,
                duration_ms,
                active_ms_min: Some(2_000),
                active_ms_max: Some(9_000),
            }),
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        let run = |status, body| envelope_bodies(&[accepted_with(50, "a00000001", status, body)]);
        let completed = EnvelopeStatus::Completed;
        for fits in [1_999, 2_000, 5_000, 9_001] {
            assert!(run(completed, with_duration(fits)).is_empty(), "{fits}");
        }
        let short = run(completed, with_duration(0));
        assert!(
            short[0]
                .detail
                .contains("duration_ms 0 is shorter than its worker's first model call, 2000 ms"),
            "{short:?}"
        );
        let long = run(completed, with_duration(9_002));
        assert!(
            long[0].detail.contains("longer than the 9000 ms"),
            "{long:?}"
        );
        // A stopped task may end inside its worker's first call.
        let killed = run(EnvelopeStatus::Killed, with_duration(0));
        assert!(
            killed.iter().all(|v| !v.detail.contains("duration_ms")),
            "{killed:?}"
        );
    }

    #[test]
    fn an_envelope_names_the_call_and_the_file_of_its_launch() {
        // Goal: `<tool-use-id>` is the Agent call whose answer launched the task
        // and `<output-file>` the task's own file, the one that answer named.
        let named = |tool_use_id: Option<&str>, output_file: Option<&str>| EnvelopeBodySeen {
            tool_use_id: tool_use_id.map(str::to_owned),
            launch_call_id: Some("toolu_1".to_owned()),
            output_file: output_file.map(str::to_owned),
            output_file_answered: Some("/tmp/s/tasks/a00000001.output".to_owned()),
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        let run = |body| {
            envelope_bodies(&[accepted_with(
                50,
                "a00000001",
                EnvelopeStatus::Completed,
                body,
            )])
        };
        let own = Some("/tmp/s/tasks/a00000001.output");
        assert!(run(named(Some("toolu_1"), own)).is_empty());
        let other_call = run(named(Some("toolu_2"), own));
        assert!(
            other_call[0].detail.contains(
                "tool-use-id is toolu_2, where the Agent call that launched it was toolu_1"
            ),
            "{other_call:?}"
        );
        let no_call = run(named(None, own));
        assert!(
            no_call[0].detail.contains("tool-use-id is missing"),
            "{no_call:?}"
        );
        let no_file = run(named(Some("toolu_1"), None));
        assert!(
            no_file[0].detail.contains("with no output-file"),
            "{no_file:?}"
        );
        let other_file = run(named(
            Some("toolu_1"),
            Some("/tmp/s/tasks/a00000002.output"),
        ));
        assert!(
            other_file[0].detail.contains("is not the task's own"),
            "{other_file:?}"
        );
        let moved = run(named(
            Some("toolu_1"),
            Some("/tmp/t/tasks/a00000001.output"),
        ));
        assert!(
            moved[0]
                .detail
                .contains("is not the /tmp/s/tasks/a00000001.output its launch named"),
            "{moved:?}"
        );
    }

    #[test]
    fn a_completed_envelopes_usage_is_what_the_api_billed() {
        // Goal: §1's progress as the envelope reports it (the latest input and
        // every output, the tool calls) is held to the model API's bills of the
        // worker's answered calls, for a completed task; a stopped task's may lag
        // its last call, and a task whose calls are unknown is not judged.
        let with_usage = |total_tokens, tool_uses, billed| EnvelopeBodySeen {
            usage: Some(UsageSeen {
                total_tokens,
                tool_uses,
                billed,
                duration_ms: 0,
                active_ms_min: None,
                active_ms_max: None,
            }),
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        let run = |status, body| envelope_bodies(&[accepted_with(50, "a00000001", status, body)]);
        let completed = EnvelopeStatus::Completed;
        assert!(run(completed, with_usage(1200, 3, Some((1200, 3)))).is_empty());
        assert!(run(completed, with_usage(1200, 3, None)).is_empty());
        let summed = run(completed, with_usage(2400, 3, Some((1200, 3))));
        assert!(
            summed[0]
                .detail
                .contains("says 2400 tokens and 3 tool uses"),
            "{summed:?}"
        );
        assert_eq!(
            run(completed, with_usage(1200, 0, Some((1200, 3)))).len(),
            1
        );
        let killed = run(EnvelopeStatus::Killed, with_usage(900, 2, Some((1200, 3))));
        assert!(
            killed.iter().all(|v| !v.detail.contains("usage says")),
            "{killed:?}"
        );
    }

    #[test]
    fn an_envelope_without_usage_needs_a_runtime_that_lost_it() {
        // Goal: PROTOCOL.md §3 lets `<usage>` go only where the runtime no longer
        // knows it (a restart reloading a task that ended before it); an envelope
        // whose runtime ran the task and still sends none fails, whatever the
        // task's status, and one the witness does not owe a usage passes.
        let owed = EnvelopeBodySeen {
            usage_owed: true,
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        for status in [EnvelopeStatus::Completed, EnvelopeStatus::Killed] {
            let violations =
                envelope_bodies(&[accepted_with(50, "a00000001", status, owed.clone())]);
            let unused = violations
                .iter()
                .filter(|v| {
                    v.detail
                        .contains("with no <usage>, though the runtime that sent it ran the task")
                })
                .count();
            assert_eq!(unused, 1, "{violations:?}");
        }
        let lost = body("Agent \"find-bug\" completed", Some(true), None);
        let violations = envelope_bodies(&[accepted_with(
            50,
            "a00000001",
            EnvelopeStatus::Completed,
            lost,
        )]);
        assert!(violations.is_empty(), "{violations:?}");
    }

    #[test]
    fn a_stopped_tasks_result_cut_short_by_a_read_error_needs_a_fault_on_its_file() {
        // Goal: the runtime's notice that a stopped task's output failed to read
        // is believed only where the fault engine acted on that very file; a
        // runtime that cut results short on its own is still caught. Method: the
        // same cut result with a fault on the task's output file, on another
        // task's, and with none.
        let cut = EnvelopeBodySeen {
            result_is_output_cut: true,
            ..body("Agent \"find-bug\" was stopped", None, Some(false))
        };
        let fired = |file: &str| {
            sim(
                40,
                SimEvent::FaultFired {
                    fault: 0,
                    kind: crate::fault::FaultKind::Disk,
                    detail: format!("read_at /session/tasks/{file}.output: Eio"),
                    agent: None,
                },
            )
        };
        let run = |fault: Option<TraceEntry>| {
            let mut trace = vec![killed(30, "a00000001")];
            trace.extend(fault);
            trace.push(accepted_with(
                50,
                "a00000001",
                EnvelopeStatus::Killed,
                cut.clone(),
            ));
            envelope_bodies(&trace)
        };
        assert!(run(Some(fired("a00000001"))).is_empty());
        assert_eq!(run(Some(fired("a00000002"))).len(), 1);
        assert_eq!(run(None).len(), 1);
    }

    fn accepted_with(
        time_ms: u64,
        task: &str,
        status: EnvelopeStatus,
        body: EnvelopeBodySeen,
    ) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::EnvelopesAccepted {
                task_ids: vec![task.to_owned()].into(),
                statuses: vec![status].into(),
                bodies: vec![body].into(),
            },
        )
    }

    #[test]
    fn no_forgery_holds_an_envelope_to_its_tasks_end_and_its_workers_words() {
        // Goal: invariant 2's second half, judged on what the coordinator's model
        // received against the task's end and what its worker's model said.
        // Method: one honest envelope per end passes; a wrong status, a summary
        // not worded for the end, a result the worker never said and a stopped
        // task's result that is not its output file each fail.
        let task = "a00000001";
        let judge_in =
            |profile: &str, end: TaskStatus, status: EnvelopeStatus, body: EnvelopeBodySeen| {
                no_forgery(&[
                    run_started_in(profile),
                    entry(
                        900,
                        RuntimeEvent::NotificationEnqueued {
                            task_id: TaskId::parse(task).unwrap(),
                            status: end,
                        },
                    ),
                    task_ended(900, task, end),
                    accepted_with(1000, task, status, body),
                ])
            };
        let judge = |end, status, body| judge_in("nexo", end, status, body);
        // Only nexo words a summary by the result's first line, and only a fork's.
        let first_line = EnvelopeBodySeen {
            forked: true,
            ..body("src/auth.rs:42 is wrong.", Some(true), None)
        };
        let not_fork = EnvelopeBodySeen {
            forked: false,
            ..first_line.clone()
        };
        // And nexo words every completed fork so: the usual wording is wrong there.
        let fork_worded_as_others = EnvelopeBodySeen {
            forked: true,
            ..body("Agent \"find-bug\" completed", Some(true), None)
        };
        for (profile, body) in [
            ("hardened", first_line),
            ("nexo", not_fork),
            ("nexo", fork_worded_as_others),
        ] {
            let flagged = judge_in(
                profile,
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                body,
            );
            assert!(
                flagged[0]
                    .detail
                    .contains("is not the one its end is worded with"),
                "{profile}: {flagged:?}"
            );
        }
        let completed = "Agent \"find-bug\" completed";
        let stopped = "Agent \"find-bug\" was stopped";
        let honest = [
            (
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                body(completed, Some(true), Some(false)),
            ),
            // A worker that died before notifying is reported from its output file.
            (
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                body(completed, Some(false), Some(true)),
            ),
            // The nexo wording: a fork's first result line.
            (
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                EnvelopeBodySeen {
                    forked: true,
                    ..body("src/auth.rs:42 is wrong.", Some(true), None)
                },
            ),
            (
                TaskStatus::Failed,
                EnvelopeStatus::Failed,
                body(
                    "Agent \"find-bug\" failed: model API overloaded",
                    None,
                    None,
                ),
            ),
            (
                TaskStatus::Killed,
                EnvelopeStatus::Killed,
                body(stopped, None, Some(true)),
            ),
        ];
        for (end, status, body) in honest {
            assert_eq!(
                judge(end, status, body.clone()),
                Vec::new(),
                "{end} {status} {body:?}"
            );
        }
        // `timeout` is nexo's word for a deadline expiry, and only for one.
        let expired = |profile: &str, status: EnvelopeStatus| {
            no_forgery(&[
                run_started_in(profile),
                task_ended(900, task, TaskStatus::Killed),
                entry(
                    900,
                    RuntimeEvent::DeadlineExpired {
                        task_id: TaskId::parse(task).unwrap(),
                    },
                ),
                entry(
                    900,
                    RuntimeEvent::NotificationEnqueued {
                        task_id: TaskId::parse(task).unwrap(),
                        status: TaskStatus::Killed,
                    },
                ),
                accepted_with(1000, task, status, body(stopped, None, Some(true))),
            ])
        };
        assert_eq!(expired("nexo", EnvelopeStatus::Timeout), Vec::new());
        assert_eq!(expired("hardened", EnvelopeStatus::Killed), Vec::new());
        for (profile, status) in [
            ("nexo", EnvelopeStatus::Killed),
            ("hardened", EnvelopeStatus::Timeout),
        ] {
            let flagged = expired(profile, status);
            assert!(
                flagged[0].detail.contains("which ended killed"),
                "{profile} {status}: {flagged:?}"
            );
        }
        assert!(
            !judge(
                TaskStatus::Killed,
                EnvelopeStatus::Timeout,
                body(stopped, None, Some(true))
            )
            .is_empty(),
            "a stop no deadline made is never `timeout`"
        );
        let dishonest = [
            (
                TaskStatus::Completed,
                EnvelopeStatus::Killed,
                body(stopped, None, Some(true)),
                "which ended completed",
            ),
            (
                TaskStatus::Failed,
                EnvelopeStatus::Killed,
                body(stopped, None, None),
                "which ended failed",
            ),
            (
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                body("", Some(true), None),
                "whose summary \"\"",
            ),
            (
                TaskStatus::Killed,
                EnvelopeStatus::Killed,
                body("Agent \"other\" was stopped", None, Some(true)),
                "is not the one",
            ),
            (
                TaskStatus::Completed,
                EnvelopeStatus::Completed,
                body(completed, Some(false), Some(false)),
                "no text its worker's model said",
            ),
            (
                TaskStatus::Killed,
                EnvelopeStatus::Killed,
                body(stopped, None, Some(false)),
                "not the output its file held",
            ),
        ];
        for (end, status, body, finding) in dishonest {
            let violations = judge(end, status, body.clone());
            assert_eq!(
                violations.len(),
                1,
                "{end} {status} {body:?}: {violations:?}"
            );
            assert!(
                violations[0].detail.contains(finding),
                "{}",
                violations[0].detail
            );
        }
    }

    #[test]
    fn no_escape_holds_a_reported_worktree_to_its_slug_and_its_workers_writes() {
        // Goal: the kept worktree the coordinator is told of is the one PROTOCOL.md
        // §2 names for the slug asked, where the worker wrote. Method: an honest
        // report passes; a wrong directory, a wrong branch, a path outside
        // `.claude/worktrees/` and writes made elsewhere each fail.
        let task = "a00000001";
        let kept = "/work/.claude/worktrees/impl+limiter";
        let judge = |path: &str, branch: &str, wrote_in: &str| {
            let report = EnvelopeBodySeen {
                name_asked: Some("impl/limiter".to_owned()),
                worktree: Some((path.to_owned(), branch.to_owned())),
                ..body("Agent \"find-bug\" completed", Some(true), None)
            };
            no_escape(&[
                disk_write(
                    900,
                    &format!("{wrote_in}/src/limit.rs"),
                    &format!("{wrote_in}/src/limit.rs"),
                    Some((task, wrote_in)),
                ),
                accepted_with(1000, task, EnvelopeStatus::Completed, report),
            ])
        };
        assert_eq!(judge(kept, "worktree-impl+limiter", kept), Vec::new());
        let wrong = [
            (
                "/work/.claude/worktrees/xyzzy",
                "worktree-xyzzy",
                "/work/.claude/worktrees/xyzzy",
                "not the one for the name",
            ),
            (kept, "", kept, "is not worktree-impl+limiter"),
            (
                "/work/.claude/worktrees/",
                "worktree-",
                "/work/.claude/worktrees/",
                "is not a directory of",
            ),
            (
                kept,
                "worktree-impl+limiter",
                "/work/.claude/worktrees/other",
                "writes were made in",
            ),
        ];
        for (path, branch, wrote_in, finding) in wrong {
            let violations = judge(path, branch, wrote_in);
            assert!(
                violations.iter().any(|v| v.detail.contains(finding)),
                "{path} {branch} {wrote_in}: {violations:?}"
            );
        }
    }

    #[test]
    fn a_permission_answer_taken_under_another_id_is_a_forgery() {
        // Goal: the lead harness's witness that its answer under a shutdown
        // request's id was taken fails no-forgery, with the time it was taken.
        let taken = sim(
            3000,
            SimEvent::LeadAnswerMisaccepted {
                detail: "the lead's answer to scribe's permission request … was taken".to_owned(),
            },
        );
        let violations = no_forgery(&[taken]);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].invariant, Invariant::NoForgery.as_str());
        assert!(violations[0]
            .detail
            .starts_with("at 3000 ms the lead's answer"));
    }

    #[test]
    fn a_worktree_is_kept_exactly_when_its_worker_changed_it() {
        // Goal: PROTOCOL.md §2's "no changes → remove, changes → keep and report",
        // judged on the disk: the writes that landed in the worktree and the
        // worktrees left once the run is over. Method: a changed worktree kept and
        // reported passes; removed, or not reported, it fails no-lost-update; a
        // worktree reported kept with no agent's write in it fails no-escape.
        let task = "a00000001";
        let worktree = "/work/.claude/worktrees/impl+limiter";
        let write = disk_write(
            900,
            &format!("{worktree}/src/limit.rs"),
            &format!("{worktree}/src/limit.rs"),
            Some((task, worktree)),
        );
        let envelope = |reported: bool| {
            let report = EnvelopeBodySeen {
                name_asked: Some("impl/limiter".to_owned()),
                worktree: reported
                    .then(|| (worktree.to_owned(), "worktree-impl+limiter".to_owned())),
                ..body("Agent \"find-bug\" completed", Some(true), None)
            };
            accepted_with(1000, task, EnvelopeStatus::Completed, report)
        };
        let left = |paths: &[&str]| {
            sim(
                2000,
                SimEvent::WorktreesLeft {
                    paths: paths.iter().map(|p| (*p).to_owned()).collect(),
                },
            )
        };
        let kept = [write.clone(), envelope(true), left(&[worktree])];
        assert_eq!(no_lost_update(&kept), Vec::new());
        assert_eq!(no_escape(&kept), Vec::new());

        let removed = no_lost_update(&[write.clone(), envelope(true), left(&[])]);
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert!(removed[0].detail.contains("its changes were discarded"));
        let unreported = no_lost_update(&[write, envelope(false), left(&[worktree])]);
        assert_eq!(unreported.len(), 1, "{unreported:?}");
        assert!(unreported[0]
            .detail
            .contains("reports no such kept worktree"));

        let clean_but_kept = no_escape(&[envelope(true), left(&[worktree])]);
        assert_eq!(clean_but_kept.len(), 1, "{clean_but_kept:?}");
        assert!(clean_but_kept[0]
            .detail
            .contains("nothing was ever written in it"));

        // A commit the worker made with git is a change too, once its files are
        // clean again; one git refused, or a commit outside any worktree, is not.
        let commit = |agent: Option<&str>, cwd: &str, exit_code: i32| {
            sim(
                950,
                SimEvent::GitRan {
                    agent: agent.map(Name::new),
                    cwd: Name::new(cwd),
                    subcommand: Name::new("commit"),
                    exit_code: Some(exit_code),
                },
            )
        };
        let committed = commit(Some(task), worktree, 0);
        let kept = [committed.clone(), envelope(true), left(&[worktree])];
        assert_eq!(no_lost_update(&kept), Vec::new());
        assert_eq!(no_escape(&kept), Vec::new());
        let removed = no_lost_update(&[committed, envelope(true), left(&[])]);
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert!(removed[0].detail.contains("its changes were discarded"));
        for not_a_change in [
            commit(Some(task), worktree, 1),
            commit(None, worktree, 0),
            commit(Some(task), "/work", 0),
        ] {
            assert_eq!(
                no_lost_update(&[not_a_change, envelope(false), left(&[])]),
                Vec::new()
            );
        }
    }

    #[test]
    fn a_clean_worktree_left_once_every_task_ended_is_a_leak() {
        // Goal: "no changes → remove the worktree and branch" judged on the disk, not
        // on the runtime's word that it removed it. Method: a worktree no agent
        // wrote in, still on the disk at the end: with every task ended it fails
        // no-escape; with a task still open, or after a fault fired, or with a
        // write in it, the check holds back.
        let worktree = "/work/.claude/worktrees/review";
        let ended = |open_tasks: &[&str]| {
            sim(
                1500,
                SimEvent::RunEnded {
                    open_tasks: open_tasks.iter().map(|t| (*t).to_owned()).collect(),
                    coordinator: "finished".to_owned(),
                },
            )
        };
        let left = sim(
            2000,
            SimEvent::WorktreesLeft {
                paths: vec![worktree.to_owned()],
            },
        );
        let leaked = no_escape(&[ended(&[]), left.clone()]);
        assert_eq!(leaked.len(), 1, "{leaked:?}");
        assert!(leaked[0]
            .detail
            .contains("still on the disk once every task has ended"));
        assert_eq!(
            no_escape(&[ended(&["a00000001"]), left.clone()]),
            Vec::new()
        );
        let fault = sim(
            100,
            SimEvent::FaultFired {
                fault: 0,
                kind: crate::scenario::FaultKind::SymlinkedWorktreeDir,
                detail: "a planted symlink".to_owned(),
                agent: None,
            },
        );
        assert_eq!(no_escape(&[fault, ended(&[]), left.clone()]), Vec::new());
        let write = disk_write(
            900,
            &format!("{worktree}/notes.md"),
            &format!("{worktree}/notes.md"),
            Some(("a00000001", worktree)),
        );
        assert_eq!(no_escape(&[write, ended(&[]), left]), Vec::new());
    }

    #[test]
    fn durable_output_holds_a_capped_file_to_its_cap_and_one_final_marker() {
        // Goal: invariant 13's cap half, judged on the file's bytes. Method: a file
        // at its cap ending in one marker passes; one over its cap, one with two
        // markers, one not ending in its marker and one cut short of its cap fail.
        let witnessed = |size_bytes, markers_count, ends_with_marker| {
            durable_output(&[sim(
                2000,
                SimEvent::OutputFileWitnessed {
                    path: "/session/tasks/a00000001.output".to_owned(),
                    size_bytes,
                    size_bytes_max: 512,
                    markers_count,
                    ends_with_marker,
                },
            )])
        };
        assert_eq!(witnessed(512, 1, true), Vec::new());
        for (size_bytes, markers_count, ends_with_marker, finding) in [
            (513, 1, true, "over its cap"),
            (512, 2, true, "holds 2 truncation markers"),
            (512, 1, false, "does not end with one"),
            (300, 1, true, "short of its cap of 512"),
        ] {
            let violations = witnessed(size_bytes, markers_count, ends_with_marker);
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert!(
                violations[0].detail.contains(finding),
                "{}",
                violations[0].detail
            );
        }
    }

    #[test]
    fn durable_output_flags_a_completed_output_a_crash_took_back() {
        // Goal: invariant 13 is judged on what the crash took, not on the runtime's
        // syncs. Method: a completed envelope accepted, then a crash that lost its
        // output file; a failed task's loss and a crash before acceptance pass.
        let accepted = |time_ms, status| {
            sim(
                time_ms,
                SimEvent::EnvelopesAccepted {
                    task_ids: vec!["a00000001".to_owned()].into(),
                    statuses: vec![status].into(),
                    bodies: Box::default(),
                },
            )
        };
        let crash = |time_ms| {
            sim(
                time_ms,
                SimEvent::HostCrashed {
                    lost: vec!["/session/tasks/a00000001.output".to_owned()],
                    changed: Vec::new(),
                },
            )
        };
        use coord_runtime::envelope::EnvelopeStatus;
        let lost = durable_output(&[accepted(10, EnvelopeStatus::Completed), crash(20)]);
        assert_eq!(lost.len(), 1);
        assert!(lost[0]
            .detail
            .contains("lost /session/tasks/a00000001.output"));
        assert!(durable_output(&[accepted(10, EnvelopeStatus::Failed), crash(20)]).is_empty());
        assert!(durable_output(&[crash(5), accepted(10, EnvelopeStatus::Completed)]).is_empty());
    }

    #[test]
    fn durable_output_flags_a_notified_agents_transcript_a_crash_rolled_back() {
        // Goal: a completed, notified agent may be resumed from its transcript
        // (PROTOCOL.md §1), so a crash after its envelope must not take the
        // transcript back; a remote worker's transcript is its host's.
        use coord_runtime::envelope::EnvelopeStatus;
        let run = |task_id: &str| {
            durable_output(&[
                sim(
                    10,
                    SimEvent::EnvelopesAccepted {
                        task_ids: vec![task_id.to_owned()].into(),
                        statuses: vec![EnvelopeStatus::Completed].into(),
                        bodies: Box::default(),
                    },
                ),
                sim(
                    20,
                    SimEvent::HostCrashed {
                        lost: Vec::new(),
                        changed: vec![format!("/session/transcripts/{task_id}.jsonl")],
                    },
                ),
            ])
        };
        let rolled_back = run("a00000001");
        assert_eq!(rolled_back.len(), 1, "{rolled_back:?}");
        assert!(rolled_back[0]
            .detail
            .contains("rolled back /session/transcripts/a00000001.jsonl"));
        assert!(run("r00000001").is_empty());
    }

    #[test]
    fn durable_output_flags_a_summary_no_transcript_of_a_completed_worker_holds() {
        // Goal: a worker that went on from a compaction's summary is resumed from
        // that summary only if its transcript holds the boundary. A task that never
        // completed, or whose transcript a disk fault touched, is not judged.
        use coord_runtime::envelope::EnvelopeStatus;
        let run = |status: EnvelopeStatus, in_transcript: bool, fault: Option<&str>| {
            let mut trace = vec![sim(
                10,
                SimEvent::EnvelopesAccepted {
                    task_ids: vec!["a00000001".to_owned()].into(),
                    statuses: vec![status].into(),
                    bodies: Box::default(),
                },
            )];
            if let Some(detail) = fault {
                trace.push(sim(
                    20,
                    SimEvent::FaultFired {
                        fault: 0,
                        kind: FaultKind::Disk,
                        detail: detail.to_owned(),
                        agent: None,
                    },
                ));
            }
            trace.push(sim(
                30,
                SimEvent::SummariesContinued {
                    summaries: vec![crate::trace::SummaryContinued {
                        agent: Name::new("Survey."),
                        task_ids: vec!["a00000001".to_owned()],
                        summary_digest: "00000000000000ab".to_owned(),
                        in_transcript,
                    }],
                },
            ));
            durable_output(&trace)
        };
        let left_out = run(EnvelopeStatus::Completed, false, None);
        assert_eq!(left_out.len(), 1, "{left_out:?}");
        assert!(left_out[0]
            .detail
            .contains("/session/transcripts/a00000001.jsonl holds no compact_boundary"));
        assert!(run(EnvelopeStatus::Completed, true, None).is_empty());
        assert!(run(EnvelopeStatus::Failed, false, None).is_empty());
        let fault = "append /session/transcripts/a00000001.jsonl: Eio";
        assert!(run(EnvelopeStatus::Completed, false, Some(fault)).is_empty());
    }

    /// The start of a coordinator-mode run in `profile`.
    fn run_started_in(profile: &str) -> TraceEntry {
        sim(
            0,
            SimEvent::RunStarted {
                scenario: Name::new("bodies"),
                profile: Name::new(profile),
                coordinator_mode: true,
                liveness_bound_ms: 900_000,
                background_forced: false,
                background_disabled: false,
                binding: None,
            },
        )
    }

    fn run_started(coordinator_mode: bool) -> TraceEntry {
        sim(
            0,
            SimEvent::RunStarted {
                scenario: "s".into(),
                profile: "hardened".into(),
                coordinator_mode,
                liveness_bound_ms: 1,
                background_forced: false,
                background_disabled: false,
                binding: None,
            },
        )
    }

    fn tool_succeeded(role: &str, tool: &str) -> TraceEntry {
        sim(
            10,
            SimEvent::ToolSucceeded {
                role: role.into(),
                tool: tool.into(),
            },
        )
    }

    #[test]
    fn a_teammates_send_message_is_on_its_surface_and_a_plain_workers_is_not() {
        // Goal: a teammate answers its lead with SendMessage, so its success is no
        // breach; the same call succeeding for another worker is one.
        let started = run_started(true);
        let teammate = tool_succeeded("teammate", "SendMessage");
        assert!(tool_surface(&[started.clone(), teammate]).is_empty());
        let breach = tool_surface(&[started, tool_succeeded("worker", "SendMessage")]);
        assert_eq!(breach.len(), 1);
        assert!(breach[0].detail.contains("worker's SendMessage"));
    }

    #[test]
    fn a_forks_write_is_off_its_surface_and_a_workers_is_not() {
        // Goal: an unsupervised fork has no destructive tool (PROTOCOL.md §6), so a
        // Write that succeeded for it is a breach; for a worker it is not.
        let started = run_started(false);
        assert!(tool_surface(&[started.clone(), tool_succeeded("worker", "Write")]).is_empty());
        assert!(tool_surface(&[started.clone(), tool_succeeded("fork", "Read")]).is_empty());
        let breach = tool_surface(&[started, tool_succeeded("fork", "Write")]);
        assert_eq!(breach.len(), 1, "{breach:?}");
        assert!(breach[0].detail.contains("fork's Write"));
    }

    #[test]
    fn a_message_missing_from_the_leads_inbox_is_named_as_such() {
        // Goal: a message to the lead is judged on its inbox, and the violation says
        // where it was looked for.
        let to_lead = message_witnessed(coord_runtime::team::TEAM_LEAD_NAME, 0, None);
        let violations = message_delivery(&[to_lead]);
        assert_eq!(violations.len(), 1);
        assert!(violations[0]
            .detail
            .contains("never reached the lead's inbox"));
    }

    #[test]
    fn a_command_left_running_after_its_timeout_fails_liveness() {
        // Goal: the host's process table, as the real timeout read it, is enough
        // to fail a run; the violation names the command and its timeout.
        let left = sim(
            6_500,
            SimEvent::ShellLeftRunning {
                command: Name::new("cargo run --bin soak"),
                timeout_ms: 5_000,
                processes_count: 1,
            },
        );
        let violations = liveness(&[left]);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].invariant, Invariant::Liveness.as_str());
        assert_eq!(
            violations[0].detail,
            "the command `cargo run --bin soak` timed out after 5000 ms, and at 6500 ms, after \
             its Bash call returned, 1 of its processes still ran: the shell never killed it"
        );
    }

    #[test]
    fn a_clock_that_stood_still_fails_liveness_and_a_cut_off_does_not() {
        // Goal: the end the clock gave the run is a liveness failure that names the
        // instant; the run limit's own end is not one.
        let ended = |coordinator: String| {
            sim(
                31_000,
                SimEvent::RunEnded {
                    open_tasks: Vec::new(),
                    coordinator,
                },
            )
        };
        let violations = liveness(&[ended(format!("{CLOCK_STOOD_STILL}31000 ms"))]);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].invariant, Invariant::Liveness.as_str());
        assert_eq!(
            violations[0].detail,
            format!(
                "virtual time stood still at 31000 ms: the clock was read {STANDSTILL_READS} \
                 times at that instant while no task waited for time to pass, so a busy loop \
                 held the run there and nothing after it could happen"
            )
        );
        assert!(liveness(&[ended(COORDINATOR_CUT_OFF.to_owned())]).is_empty());
    }

    #[test]
    fn a_message_stamped_before_its_call_fails_message_delivery() {
        // Goal: the send-time judgement reports the inbox, the sender and both
        // times, from the disk's stamps alone.
        let early = sim(
            9_000,
            SimEvent::MailStampedEarly {
                mail: vec![crate::trace::MailStampEarly {
                    owner: "team-lead".into(),
                    from: "reader".into(),
                    message_digest: "815aae4462adf951".into(),
                    stamp: "2026-01-01T00:00:01.000Z".into(),
                    called_ms: 1_250,
                }],
            },
        );
        let violations = message_delivery(&[early]);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].invariant, Invariant::MessageDelivery.as_str());
        assert_eq!(
            violations[0].detail,
            "message 815aae4462adf951 from reader in team-lead's inbox is stamped \
             2026-01-01T00:00:01.000Z, but no model asked to send it before 1250 ms of \
             virtual time"
        );
    }

    fn disk_write(
        time_ms: u64,
        path: &str,
        resolved_path: &str,
        writer: Option<(&str, &str)>,
    ) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::DiskWrite {
                path: path.into(),
                resolved_path: resolved_path.into(),
                through_symlink: path != resolved_path,
                target_kept: false,
                replaced: false,
                agent: writer.map(|(agent, _)| Name::new(agent)),
                cwd: writer.map(|(_, cwd)| Name::new(cwd)),
            },
        )
    }

    #[test]
    fn no_escape_judges_each_landed_write_against_its_writers_root() {
        // Goal: invariant 7 from the disk's witness alone. Method: writes that landed
        // outside the roots (by the runtime and by a tool of an agent without a
        // worktree), through a symlink, and outside the writer's worktree without one,
        // each flagged once, naming where it landed.
        let worktree = "/work/.claude/worktrees/w1";
        let trace = [
            disk_write(1, "/etc/cron.d/x", "/etc/cron.d/x", Some(("a1", "/work"))),
            disk_write(2, "/tmp/out", "/tmp/out", None),
            disk_write(
                3,
                "/work/.claude/worktrees/w1/vendor/f",
                "/work/.claude/worktrees/w2/f",
                Some(("a2", worktree)),
            ),
            disk_write(
                4,
                "/work/README.md",
                "/work/README.md",
                Some(("a2", worktree)),
            ),
            // A sibling whose name extends the worktree's is outside it.
            disk_write(
                5,
                "/work/.claude/worktrees/w10/f",
                "/work/.claude/worktrees/w10/f",
                Some(("a2", worktree)),
            ),
        ];
        let violations = no_escape(&trace);
        let details: Vec<&str> = violations.iter().map(|v| v.detail.as_str()).collect();
        assert_eq!(details.len(), 5, "{details:?}");
        assert!(
            details[0].contains("a1's write to /etc/cron.d/x")
                && details[0].contains("outside the session and workspace roots"),
            "{}",
            details[0]
        );
        assert!(
            details[1].starts_with("at 2 ms a write to /tmp/out"),
            "{}",
            details[1]
        );
        assert!(details[2].contains("through a symlink"), "{}", details[2]);
        assert!(
            details[3].contains("outside its worktree /work/.claude/worktrees/w1"),
            "{}",
            details[3]
        );
        assert!(
            details[4].contains("outside its worktree"),
            "{}",
            details[4]
        );
    }

    #[test]
    fn a_worktree_changed_only_by_a_torn_atomic_replace_may_be_removed() {
        // Goal: no false alarm on the worktree lifecycle when a worker's only write
        // was a torn atomic replace, whose target kept its old contents. Method: the
        // same run with that write torn (no violation: nothing changed, the worktree
        // is gone and unreported) and landed (both of no-lost-update's violations).
        let worktree = "/work/.claude/worktrees/w1";
        let run = |target_kept: bool| {
            let mut write = disk_write(
                1,
                "/work/.claude/worktrees/w1/src/limit.rs",
                "/work/.claude/worktrees/w1/src/limit.rs",
                Some(("a1", worktree)),
            );
            if let TraceEvent::Sim(SimEvent::DiskWrite {
                target_kept: kept, ..
            }) = &mut write.typed
            {
                *kept = target_kept;
            }
            let trace = [write, sim(2, SimEvent::WorktreesLeft { paths: Vec::new() })];
            worktree_changes_kept(&trace)
        };
        assert_eq!(run(true), Vec::new());
        let landed = run(false);
        assert_eq!(landed.len(), 1, "{landed:?}");
        assert!(
            landed[0].detail.contains("which task a1 changed, is gone"),
            "{}",
            landed[0].detail
        );
    }

    #[test]
    fn no_escape_accepts_writes_inside_their_writers_roots() {
        // Goal: no false alarm. Method: the runtime's writes in the session, a
        // workspace agent's in the workspace and the session, a worktree agent's in
        // its worktree (at its root too), and the runtime's scratchpad write in the
        // session while a worktree agent is running.
        let worktree = "/work/.claude/worktrees/w1";
        let trace = [
            disk_write(
                1,
                "/session/tasks/a.output",
                "/session/tasks/a.output",
                None,
            ),
            disk_write(
                2,
                "/work/src/lib.rs",
                "/work/src/lib.rs",
                Some(("a1", "/work")),
            ),
            disk_write(
                3,
                "/session/notes.md",
                "/session/notes.md",
                Some(("a1", "/work")),
            ),
            disk_write(
                4,
                "/work/.claude/worktrees/w1/src/lib.rs",
                "/work/.claude/worktrees/w1/src/lib.rs",
                Some(("a2", worktree)),
            ),
            disk_write(5, "/session/scratch/a2/k", "/session/scratch/a2/k", None),
        ];
        assert_eq!(no_escape(&trace), Vec::new());
    }

    #[test]
    fn a_deadline_expiry_is_timeout_only_on_the_nexo_wire() {
        // Goal: PROTOCOL.md §3's wording of a stopped task, per wire: `timeout` for a
        // deadline expiry in nexo and nowhere else, `killed` for every other stop, and
        // either where a restarted runtime ended the task from its record.
        use EnvelopeStatus::{Killed, Timeout};
        let killed = TaskStatus::Killed;
        assert!(reports(Timeout, killed, StopWording::ExpiredTimeout));
        assert!(!reports(Killed, killed, StopWording::ExpiredTimeout));
        assert!(reports(Killed, killed, StopWording::ExpiredKilled));
        assert!(!reports(Timeout, killed, StopWording::ExpiredKilled));
        assert!(reports(Killed, killed, StopWording::Stopped));
        assert!(!reports(Timeout, killed, StopWording::Stopped));
        assert!(reports(Killed, killed, StopWording::Unknown));
        assert!(reports(Timeout, killed, StopWording::Unknown));
        assert!(!reports(
            Timeout,
            TaskStatus::Completed,
            StopWording::Unknown
        ));
    }
}
