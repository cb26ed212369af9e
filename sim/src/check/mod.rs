//! Invariant checkers. Each reads only the trace and names the invariant of
//! PROTOCOL.md §8 it checks.

use std::collections::BTreeMap;

use crate::trace::{SimEvent, TraceEntry};

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The checker's name, e.g. `notify-once`.
    pub invariant: &'static str,
    /// What went wrong, naming the events and their virtual times.
    pub detail: String,
}

/// The simulator's own events in the trace, with their times.
fn sim_events(trace: &[TraceEntry]) -> Vec<(u64, SimEvent)> {
    trace
        .iter()
        .filter(|entry| entry.actor != "runtime")
        .filter_map(|entry| {
            serde_json::from_str(&entry.event)
                .ok()
                .map(|event| (entry.time_ms, event))
        })
        .collect()
}

/// Runs every checker over `trace`.
pub fn check_all(trace: &[TraceEntry]) -> Vec<Violation> {
    let events = sim_events(trace);
    let mut violations = Vec::new();
    violations.extend(notify_once(&events));
    violations.extend(no_forgery(&events));
    violations.extend(mailbox_durability(&events));
    violations
}

/// Invariant 1: every spawned task is delivered exactly once, with the status its
/// script ends in.
fn notify_once(events: &[(u64, SimEvent)]) -> Vec<Violation> {
    let mut expected = BTreeMap::new();
    let mut delivered: BTreeMap<&str, Vec<(u64, _)>> = BTreeMap::new();
    for (time_ms, event) in events {
        match event {
            SimEvent::Spawned {
                task_id,
                expected_status,
                ..
            } => {
                expected.insert(task_id.as_str(), *expected_status);
            }
            SimEvent::Delivered {
                task_id, status, ..
            } => delivered
                .entry(task_id.as_str())
                .or_default()
                .push((*time_ms, *status)),
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (task_id, status) in expected {
        let deliveries = delivered.get(task_id).map_or(&[][..], Vec::as_slice);
        if deliveries.len() != 1 {
            violations.push(Violation {
                invariant: "notify-once",
                detail: format!(
                    "task {task_id} was delivered {} times (at ms {:?}); expected exactly once",
                    deliveries.len(),
                    deliveries.iter().map(|(t, _)| *t).collect::<Vec<_>>()
                ),
            });
        } else if deliveries[0].1 != status {
            violations.push(Violation {
                invariant: "notify-once",
                detail: format!(
                    "task {task_id} was delivered as {} at {} ms; its script ends {}",
                    deliveries[0].1, deliveries[0].0, status
                ),
            });
        }
    }
    violations
}

/// Invariant 2: every delivered envelope is one the runtime built for a spawned task,
/// carrying exactly that task's result.
fn no_forgery(events: &[(u64, SimEvent)]) -> Vec<Violation> {
    let mut results = BTreeMap::new();
    let mut violations = Vec::new();
    for (time_ms, event) in events {
        match event {
            SimEvent::Spawned {
                task_id,
                expected_result_digest,
                ..
            } => {
                results.insert(task_id.clone(), expected_result_digest.clone());
            }
            SimEvent::Delivered {
                task_id,
                result_digest,
                ..
            } => match results.get(task_id) {
                None => violations.push(Violation {
                    invariant: "no-forgery",
                    detail: format!("envelope for unknown task {task_id} accepted at {time_ms} ms"),
                }),
                Some(expected) if result_digest.as_ref() != Some(expected) => {
                    violations.push(Violation {
                        invariant: "no-forgery",
                        detail: format!(
                            "envelope for {task_id} at {time_ms} ms carries result \
                             {result_digest:?}, not the worker's {expected}"
                        ),
                    })
                }
                Some(_) => {}
            },
            _ => {}
        }
    }
    violations
}

/// Invariant 5: every acknowledged mailbox write is in the final inbox.
fn mailbox_durability(events: &[(u64, SimEvent)]) -> Vec<Violation> {
    let mut acked: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    let mut final_inbox: Option<(u64, &Vec<String>)> = None;
    for (time_ms, event) in events {
        match event {
            SimEvent::MailboxAcked { message_digest, .. } => {
                acked
                    .entry(message_digest.as_str())
                    .or_insert((*time_ms, 0))
                    .1 += 1;
            }
            SimEvent::InboxFinal { message_digests } => {
                final_inbox = Some((*time_ms, message_digests))
            }
            _ => {}
        }
    }
    let Some((final_ms, inbox)) = final_inbox else {
        return Vec::new();
    };
    let mut present: BTreeMap<&str, usize> = BTreeMap::new();
    for digest in inbox {
        *present.entry(digest.as_str()).or_default() += 1;
    }
    acked
        .into_iter()
        .filter(|(digest, (_, count))| present.get(digest).copied().unwrap_or(0) < *count)
        .map(|(digest, (time_ms, _))| Violation {
            invariant: "mailbox-durability",
            detail: format!(
                "message {digest} acknowledged at {time_ms} ms is missing from the inbox at {final_ms} ms"
            ),
        })
        .collect()
}
