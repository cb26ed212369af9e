//! The trace: every observable step of a run, in order.
//!
//! Checkers and reports read only the trace. Each entry is the virtual time, the
//! actor, and the event as canonical JSON with the run's temporary root replaced by
//! `$root`, so the trace hash depends on the seed and the scenario, never on where
//! or when the run happened.

mod event;

pub use event::{digest_hex, SimEvent};

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::Clock;
use coord_runtime::{Journal, RuntimeEvent};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceEntry {
    /// Virtual time, ms since the run started.
    pub time_ms: u64,
    /// Who acted: `runtime`, `coordinator`, or a worker's task id.
    pub actor: String,
    /// What happened, as canonical JSON.
    pub event: String,
}

/// The trace of one run. Cheap to clone; clones share the entries.
#[derive(Debug, Clone)]
pub struct Trace {
    clock: Arc<dyn Clock>,
    root: String,
    entries: Arc<Mutex<Vec<TraceEntry>>>,
}

impl Trace {
    /// An empty trace stamped by `clock`, hiding the run's `root` directory.
    pub fn new(clock: Arc<dyn Clock>, root: PathBuf) -> Self {
        Self {
            clock,
            root: root.display().to_string(),
            entries: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Appends an event by `actor`.
    pub fn push(&self, actor: &str, event: &impl Serialize) {
        let json = serde_json::to_string(event).expect("trace events serialize");
        let entry = TraceEntry {
            time_ms: u64::try_from(self.clock.monotonic().as_millis()).unwrap_or(u64::MAX),
            actor: actor.to_owned(),
            event: json.replace(&self.root, "$root"),
        };
        self.entries.lock().expect("trace poisoned").push(entry);
    }

    /// A copy of the entries so far.
    pub fn entries(&self) -> Vec<TraceEntry> {
        self.entries.lock().expect("trace poisoned").clone()
    }

    /// The run's fingerprint: FNV-1a over every entry.
    pub fn hash(&self) -> u64 {
        let mut hasher = Fnv1a64::new();
        for entry in self.entries.lock().expect("trace poisoned").iter() {
            hasher.update(&entry.time_ms.to_le_bytes());
            hasher.update(entry.actor.as_bytes());
            hasher.update(&[0]);
            hasher.update(entry.event.as_bytes());
            hasher.update(&[0]);
        }
        hasher.finish()
    }
}

/// The runtime's journal in a simulated run: runtime events become trace entries.
impl Journal for Trace {
    fn record(&self, event: RuntimeEvent) {
        self.push("runtime", &event);
    }
}
