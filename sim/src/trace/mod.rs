//! The trace: every observable step of a run, in order.
//!
//! Checkers and reports read only the trace. Each entry is the virtual time, the
//! actor, and the typed event; its canonical JSON is written when the trace is hashed
//! or printed, not as the run goes. Nothing in an entry depends on where or when the
//! run happened, so the trace hash is a function of the scenario and the seed.

mod event;
mod name;
mod shell_witness;
mod tool_witness;

pub use event::{
    digest_hex, message_digest_hex, AbandonedCall, CacheBreakSeen, CallAnswered, CallEnded,
    EnvelopeBodySeen, HeadChange, LockAttempt, LockAttemptOutcome, MailStampEarly, MessageWitness,
    PermissionAsked, RequestAnswers, RoundsSeen, ScriptPlayed, ShutdownsSeen, SimEvent,
    SpawnAnswerSaid, SummaryContinued, TaskLaunched, TaskProgressSeen, TeamMember, UsageSeen,
    BODY_TEXT_CHARS_MAX, CLOCK_STOOD_STILL, COORDINATOR_CUT_OFF, RESTART_FAILED,
};
pub use name::Name;
pub use shell_witness::WitnessedShell;
pub use tool_witness::{current_tool_writer, ToolWriter, WitnessedTools, SCRATCH_TARGET_PREFIX};

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::Clock;
use coord_runtime::{Journal, RuntimeEvent};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Entries a new trace has room for before it grows.
const ENTRIES_RESERVED: usize = 2048;

/// An event of either source.
///
/// A runtime event is boxed: its largest variants carry three strings, and a
/// trace holds an entry for every model call, tool call and disk write of a run,
/// most of them the simulator's smaller events (72 bytes an entry instead of 96).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// Reported by the runtime through its journal.
    Runtime(Box<RuntimeEvent>),
    /// Observed or caused by the simulator.
    Sim(SimEvent),
}

/// A [`TraceEvent`] borrowed, with the runtime's event unboxed, for matching
/// both sources in one `match`.
#[derive(Debug, Clone, Copy)]
pub enum EventRef<'a> {
    /// Reported by the runtime through its journal.
    Runtime(&'a RuntimeEvent),
    /// Observed or caused by the simulator.
    Sim(&'a SimEvent),
}

impl TraceEvent {
    /// A runtime event, boxed.
    pub fn runtime(event: RuntimeEvent) -> Self {
        TraceEvent::Runtime(Box::new(event))
    }

    /// The event, borrowed for matching.
    pub fn as_ref(&self) -> EventRef<'_> {
        match self {
            TraceEvent::Runtime(event) => EventRef::Runtime(event),
            TraceEvent::Sim(event) => EventRef::Sim(event),
        }
    }
}

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEntry {
    /// Virtual time, ms since the run started.
    pub time_ms: u64,
    /// Who acted: `runtime`, `sim`, `coordinator`, or a worker's prompt.
    pub actor: Name,
    /// What happened. Its canonical JSON is [`event_json`](Self::event_json).
    pub typed: TraceEvent,
}

impl TraceEntry {
    /// The event as canonical JSON: what the trace hash covers and what is printed.
    pub fn event_json(&self) -> String {
        let mut json = Vec::new();
        self.append_event_json(&mut json);
        String::from_utf8(json).expect("JSON text is UTF-8")
    }

    /// The entry as one line of a printed trace: its time in seconds, its actor
    /// and its event.
    pub fn line(&self) -> String {
        let time = format!("{}.{:03}s", self.time_ms / 1000, self.time_ms % 1000);
        format!("{time:>9}  {}  {}", self.actor, self.event_json())
    }

    /// Appends [`event_json`](Self::event_json) to `out`.
    fn append_event_json(&self, out: &mut Vec<u8>) {
        match &self.typed {
            TraceEvent::Runtime(event) => coord_runtime::json::append(out, &**event),
            TraceEvent::Sim(event) => coord_runtime::json::append(out, event),
        }
        .expect("trace events serialize");
    }
}

/// `{"time_ms":…,"actor":…,"event":{…}}`, the event as its canonical JSON object:
/// the line `coordsim replay --trace` prints.
impl Serialize for TraceEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut entry = serializer.serialize_struct("TraceEntry", 3)?;
        entry.serialize_field("time_ms", &self.time_ms)?;
        entry.serialize_field("actor", &self.actor)?;
        let event = serde_json::value::RawValue::from_string(self.event_json())
            .expect("an event's canonical JSON is JSON");
        entry.serialize_field("event", &event)?;
        entry.end()
    }
}

/// The trace of one run. Cheap to clone; clones share the entries.
#[derive(Debug, Clone)]
pub struct Trace {
    clock: Arc<dyn Clock>,
    entries: Arc<Mutex<Vec<TraceEntry>>>,
}

impl Trace {
    /// An empty trace stamped by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            // A reference seed records some two thousand entries; starting with room
            // for them saves the copies of a vector doubling its way there.
            entries: Arc::new(Mutex::new(Vec::with_capacity(ENTRIES_RESERVED))),
        }
    }

    /// Now, in ms of the run's virtual time, as entries are stamped.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.monotonic().as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends a simulator event by `actor`.
    pub fn push(&self, actor: &str, event: SimEvent) {
        self.append(actor, TraceEvent::Sim(event));
    }

    fn append(&self, actor: &str, typed: TraceEvent) {
        let entry = TraceEntry {
            time_ms: self.now_ms(),
            actor: Name::new(actor),
            typed,
        };
        self.entries.lock().expect("trace poisoned").push(entry);
    }

    /// A copy of the entries so far.
    pub fn entries(&self) -> Vec<TraceEntry> {
        self.entries.lock().expect("trace poisoned").clone()
    }

    /// The entries so far, leaving the trace empty.
    pub fn take(&self) -> Vec<TraceEntry> {
        std::mem::take(&mut *self.entries.lock().expect("trace poisoned"))
    }
}

/// The run's fingerprint: FNV-1a over every entry's time, actor and event JSON.
pub fn trace_hash(entries: &[TraceEntry]) -> u64 {
    let mut hasher = Fnv1a64::new();
    // One buffer for every event's text: entries do not keep their JSON.
    let mut json = Vec::new();
    for entry in entries {
        hash_entry(&mut hasher, entry, &mut json);
    }
    hasher.finish()
}

/// Each entry's own hash, over the same bytes [`trace_hash`] reads: two runs of a
/// seed part where these do.
pub fn entry_hashes(entries: &[TraceEntry]) -> Vec<u64> {
    let mut json = Vec::new();
    entries
        .iter()
        .map(|entry| {
            let mut hasher = Fnv1a64::new();
            hash_entry(&mut hasher, entry, &mut json);
            hasher.finish()
        })
        .collect()
}

/// Feeds `entry` (its time, actor and event JSON, written into `json`) to `hasher`.
fn hash_entry(hasher: &mut Fnv1a64, entry: &TraceEntry, json: &mut Vec<u8>) {
    json.clear();
    entry.append_event_json(json);
    hasher.update(&entry.time_ms.to_le_bytes());
    hasher.update(entry.actor.as_bytes());
    hasher.update(&[0]);
    hasher.update(json);
    hasher.update(&[0]);
}

/// The runtime's journal in a simulated run: runtime events become trace entries.
impl Journal for Trace {
    fn record(&self, event: RuntimeEvent) {
        self.append("runtime", TraceEvent::runtime(event));
    }
}
/// `path` as trace text. Paths the runtime writes are UTF-8, and copying one
/// costs far less than formatting it through `Path::display`, which every trace
/// record naming a path would do.
pub fn path_text(path: &Path) -> String {
    match path.to_str() {
        Some(text) => text.to_owned(),
        None => path.display().to_string(),
    }
}

/// [`path_text`] of a path the caller owns: a UTF-8 path becomes the text without
/// a copy.
pub fn path_into_text(path: PathBuf) -> String {
    path.into_os_string()
        .into_string()
        .unwrap_or_else(|os| Path::new(&os).display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace holds an entry for every model call, tool call and disk write: a
    /// whale run of 500,000 agent-turns holds three million of them, so every byte
    /// of an entry is three megabytes of its peak. A variant whose fields make
    /// the event larger than this boxes them (as `ShutdownsWitnessed` does).
    #[test]
    fn an_entry_stays_72_bytes() {
        assert_eq!(std::mem::size_of::<SimEvent>(), 56);
        assert_eq!(std::mem::size_of::<TraceEvent>(), 56);
        assert_eq!(std::mem::size_of::<TraceEntry>(), 72);
    }
}
