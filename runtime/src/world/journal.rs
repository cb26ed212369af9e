//! Where runtime events go.

use std::fmt::Debug;
use std::sync::Mutex;

use crate::event::RuntimeEvent;

/// The sink for [`RuntimeEvent`]s.
pub trait Journal: Send + Sync + Debug {
    /// Records one event. Must not block for long: it is called with locks held.
    fn record(&self, event: RuntimeEvent);
}

/// The production journal: each event becomes a `tracing` event at INFO level.
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingJournal;

impl Journal for TracingJournal {
    fn record(&self, event: RuntimeEvent) {
        tracing::info!(?event, "runtime event");
    }
}

/// A journal that keeps every event in memory, in order: for tests and for embedders
/// that want to inspect what happened.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    events: Mutex<Vec<RuntimeEvent>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every event recorded so far, oldest first.
    pub fn events(&self) -> Vec<RuntimeEvent> {
        self.events.lock().expect("journal poisoned").clone()
    }
}

impl Journal for MemoryJournal {
    fn record(&self, event: RuntimeEvent) {
        self.events.lock().expect("journal poisoned").push(event);
    }
}
