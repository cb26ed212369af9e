//! What the model API saw of stopped tasks. A kill cascades to a task's children
//! (PROTOCOL.md §1), and only the world can show that it did: a runtime that forgot
//! to cancel a child reports nothing wrong, and the child's call goes on.
//!
//! Once the coordinator's model has been told a task stopped, the witness notes
//! how each model call open then ends: answered, or abandoned by its caller (the
//! request's future dropped, as a client that closes its connection). With the
//! tasks each agent's model was told it launched, the closing `stops_witnessed`
//! event lets `notify-once` hold a stopped task and its descendants to ending when
//! the stop came.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::trace::{CallEnded, SimEvent, TaskLaunched, Trace};

/// No stop seen yet.
const NO_STOP: u64 = u64::MAX;

#[derive(Debug, Default)]
struct Seen {
    /// The agent label of each task some model was told it launched, and the label
    /// of the agent whose model was told.
    launches: BTreeMap<String, (String, String)>,
    /// The calls sent and not yet ended, by watch number: the agent, its call
    /// number, when it was sent and when its answer is due.
    open: BTreeMap<u64, OpenCall>,
    watches_made: u64,
    /// Calls that ended once a stop had been seen, and every call abandoned: a
    /// deadline kills a task before the coordinator's model is told of it.
    ends: Vec<CallEnded>,
}

#[derive(Debug)]
struct OpenCall {
    agent: String,
    call: u32,
    sent_ms: u64,
    due_ms: u64,
}

/// The stop witness, shared by the taps of a run's boots. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StopWitness {
    /// When the coordinator's model first received a TaskStop answer, in ms of
    /// virtual time; [`NO_STOP`] before. Read by every call's end, so kept apart
    /// from the lock.
    first_stop_ms: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
}

impl Default for StopWitness {
    fn default() -> Self {
        Self {
            first_stop_ms: Arc::new(AtomicU64::new(NO_STOP)),
            seen: Arc::default(),
        }
    }
}

impl StopWitness {
    /// Notes that the coordinator's model received a TaskStop answer at `at_ms`.
    pub fn note_stop(&self, at_ms: u64) {
        self.first_stop_ms.fetch_min(at_ms, Ordering::Relaxed);
    }

    /// Notes that `launcher`'s model was told it launched each of `task_ids` in the
    /// background; `agent_of` names a task's agent label when the tap knows it.
    pub fn note_launches<'a>(
        &self,
        launcher: &str,
        task_ids: impl Iterator<Item = &'a String>,
        agent_of: impl Fn(&str) -> Option<String>,
    ) {
        let mut seen = self.seen.lock().expect("stop witness poisoned");
        for task_id in task_ids {
            if seen.launches.contains_key(task_id) {
                continue;
            }
            if let Some(agent) = agent_of(task_id) {
                seen.launches
                    .insert(task_id.clone(), (agent, launcher.to_owned()));
            }
        }
    }

    /// A watch on `agent`'s call number `call`, sent now and due to be answered
    /// at `due_ms`: it notes how the call ends, once a stop has been seen, and
    /// whenever it is abandoned.
    pub fn watch(&self, trace: &Trace, agent: &str, call: u32, due_ms: u64) -> CallWatch {
        let mut seen = self.seen.lock().expect("stop witness poisoned");
        let number = seen.watches_made;
        seen.watches_made += 1;
        let open = OpenCall {
            agent: agent.to_owned(),
            call,
            sent_ms: trace.now_ms(),
            due_ms,
        };
        seen.open.insert(number, open);
        CallWatch {
            witness: self.clone(),
            trace: trace.clone(),
            number,
            answered: false,
        }
    }

    /// The closing event, if the coordinator stopped any task.
    pub fn closing_event(&self) -> Option<SimEvent> {
        if self.first_stop_ms.load(Ordering::Relaxed) == NO_STOP {
            return None;
        }
        let seen = self.seen.lock().expect("stop witness poisoned");
        Some(SimEvent::StopsWitnessed {
            tasks: seen
                .launches
                .iter()
                .map(|(task_id, (agent, launched_by))| TaskLaunched {
                    task_id: task_id.clone(),
                    agent: agent.clone(),
                    launched_by: launched_by.clone(),
                })
                .collect(),
            calls: seen
                .ends
                .iter()
                .cloned()
                .chain(seen.open.values().map(|open| CallEnded {
                    agent: open.agent.clone(),
                    call: open.call,
                    sent_ms: open.sent_ms,
                    ended_ms: None,
                    abandoned: false,
                    due_ms: None,
                }))
                .collect(),
        })
    }
}

/// One model call's end, as the API sees it. Dropped before [`CallWatch::answered`],
/// the call was abandoned.
#[derive(Debug)]
pub struct CallWatch {
    witness: StopWitness,
    trace: Trace,
    number: u64,
    answered: bool,
}

impl CallWatch {
    /// The response went back to the caller.
    pub fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        let mut seen = self.witness.seen.lock().expect("stop witness poisoned");
        let Some(open) = seen.open.remove(&self.number) else {
            return;
        };
        let abandoned = !self.answered;
        if abandoned || self.witness.first_stop_ms.load(Ordering::Relaxed) != NO_STOP {
            seen.ends.push(CallEnded {
                agent: open.agent,
                call: open.call,
                sent_ms: open.sent_ms,
                ended_ms: Some(self.trace.now_ms()),
                abandoned,
                due_ms: abandoned.then_some(open.due_ms),
            });
        }
    }
}
