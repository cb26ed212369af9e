//! What a run survived, counted from its trace: the faults that fired by kind, the
//! tasks killed, the messages lost loudly and the prompt-cache breaks.
//!
//! A sweep that reports "0 failed" says little until it also says what the runs
//! went through; these counts are summed over every seed of the sweep and shown in
//! `--json` and in the report's `index.html`.

use coord_runtime::task::TaskStatus;
use coord_runtime::RuntimeEvent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::trace::{EventRef, SimEvent, TraceEntry};

/// What happened over one run, or over the runs of a sweep (summed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    /// Faults that fired, by kind (`worker-crash`, `model-api`, …); kinds that
    /// never fired are left out.
    pub faults_fired_by_kind: BTreeMap<String, u64>,
    /// Tasks that ended `killed`: stopped from outside, aborted, or past their
    /// deadline.
    pub tasks_killed: u64,
    /// Mailbox writes that gave up and returned the error to their sender: lost,
    /// but loudly.
    pub messages_lost_loudly: u64,
    /// Model requests that missed a prefix their conversation had cached because
    /// the prefix changed.
    pub cache_breaks: u64,
}

impl RunCounts {
    /// The counts of one run's trace.
    pub fn of_trace(trace: &[TraceEntry]) -> RunCounts {
        let mut counts = RunCounts::default();
        for entry in trace {
            match entry.typed.as_ref() {
                EventRef::Sim(SimEvent::FaultFired { kind, .. }) => {
                    *counts
                        .faults_fired_by_kind
                        .entry(kind.to_string())
                        .or_default() += 1;
                }
                EventRef::Sim(SimEvent::ModelBilled {
                    cache_break: Some(_),
                    ..
                }) => counts.cache_breaks += 1,
                EventRef::Runtime(RuntimeEvent::TaskTransitioned {
                    to: TaskStatus::Killed,
                    ..
                }) => counts.tasks_killed += 1,
                EventRef::Runtime(RuntimeEvent::MailboxWriteFailed { .. }) => {
                    counts.messages_lost_loudly += 1;
                }
                _ => {}
            }
        }
        counts
    }

    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &RunCounts) {
        for (kind, fired) in &other.faults_fired_by_kind {
            *self.faults_fired_by_kind.entry(kind.clone()).or_default() += fired;
        }
        self.tasks_killed += other.tasks_killed;
        self.messages_lost_loudly += other.messages_lost_loudly;
        self.cache_breaks += other.cache_breaks;
    }

    /// Faults fired of every kind.
    pub fn faults_fired(&self) -> u64 {
        self.faults_fired_by_kind.values().sum()
    }
}
