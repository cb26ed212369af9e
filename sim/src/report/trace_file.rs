//! A run's trace read back from a file of `coordsim replay --trace` lines, for
//! `coordsim report TRACE.jsonl`.
//!
//! Each line is `{"time_ms":…,"actor":…,"event":{…}}`. A line whose `event` is a
//! string holding the event's JSON, as `replay --trace` wrote it before the events
//! became objects, is read too.

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

use super::timeline::TimelineEvent;

/// Why a trace file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceFileError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a trace entry.
    #[error("{}:{line}:{column}: not a trace entry: {reason}", path.display())]
    Entry {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// Why.
        reason: String,
    },
    /// The file holds no entry.
    #[error("{}: holds no trace entry", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// One line as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    time_ms: u64,
    actor: String,
    event: Value,
}

/// The events of the trace file at `path`.
pub fn read_trace_file(path: &Path) -> Result<Vec<TimelineEvent>, TraceFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TraceFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut events = Vec::new();
    for (index, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        let entry_error = |column: usize, reason: String| TraceFileError::Entry {
            path: path.to_owned(),
            line: index + 1,
            column,
            reason,
        };
        let line: Line = serde_json::from_str(text)
            .map_err(|error| entry_error(error.column(), error.to_string()))?;
        let event = match line.event {
            Value::String(json) => serde_json::from_str(&json)
                .map_err(|error| entry_error(1, format!("its event string: {error}")))?,
            event => event,
        };
        if !event.get("event").is_some_and(Value::is_string) {
            return Err(entry_error(1, "its event has no \"event\" kind".to_owned()));
        }
        events.push(TimelineEvent {
            time_ms: line.time_ms,
            actor: line.actor,
            event,
        });
    }
    if events.is_empty() {
        return Err(TraceFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(events)
}
