//! The conversation DAG of one transcript: lines linked by `uuid` / `parentUuid`.
//!
//! Claude Code appends lines as they happen, so file order is time order, but not
//! every line belongs to the conversation the model finally saw: a rewound or
//! retried exchange leaves a branch behind. The active thread is the chain of
//! parents from the last user or assistant line back to the root. Two links need
//! help: parallel tool results hang off the tool call they answer rather than off
//! each other, so they are taken in by their `tool_use_id`; and a compaction
//! boundary starts a new root whose `logicalParentUuid` may name a line that was
//! never written, so it continues from the conversational line before it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::Value;

use super::ImportError;

/// The line types Claude Code writes that the importer understands or knowingly
/// ignores. Any other type is skipped and counted.
const KNOWN_TYPES: [&str; 7] = [
    "user",
    "assistant",
    "system",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "summary",
];

/// One line of a transcript.
#[derive(Debug, Clone)]
pub struct Entry {
    /// 1-based line number in its file (for an agent rebuilt from progress lines,
    /// the line of the progress line that carried it).
    pub line: usize,
    /// The line's `type`.
    pub kind: String,
    /// The whole line.
    pub value: Value,
}

impl Entry {
    /// A string field of the line.
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.value.get(key).and_then(Value::as_str)
    }

    fn uuid(&self) -> Option<&str> {
        self.str_field("uuid")
    }

    fn is_conversation(&self) -> bool {
        self.kind == "user" || self.kind == "assistant"
    }

    fn is_compact_boundary(&self) -> bool {
        self.kind == "system" && self.str_field("subtype") == Some("compact_boundary")
    }
}

/// The lines of one transcript and how they link.
#[derive(Debug, Default)]
pub struct Dag {
    /// Every known-type line, in file order.
    pub entries: Vec<Entry>,
    /// Lines read, blank lines excluded.
    pub lines_read: usize,
    /// Lines of each known type.
    pub lines_by_type: BTreeMap<String, usize>,
    /// Lines of unknown types, skipped, by type.
    pub skipped_by_type: BTreeMap<String, usize>,
    by_uuid: HashMap<String, usize>,
    /// Lines carried without their links (an agent rebuilt from progress lines):
    /// every line is on the active thread, in order.
    linear: bool,
}

impl Dag {
    /// Parses `text`, the contents of `path`. A line that is not a JSON object with
    /// a string `type` is an error naming its line.
    pub fn parse(path: &Path, text: &str) -> Result<Dag, ImportError> {
        let mut dag = Dag::default();
        for (index, raw) in text.split('\n').enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line = index + 1;
            let malformed = |message: String| ImportError::Malformed {
                path: path.to_owned(),
                line,
                message,
            };
            let value: Value = serde_json::from_str(raw).map_err(|e| malformed(e.to_string()))?;
            let Some(kind) = value.get("type").and_then(Value::as_str) else {
                return Err(malformed(
                    "expected a JSON object with a string `type`".into(),
                ));
            };
            dag.lines_read += 1;
            if !KNOWN_TYPES.contains(&kind) {
                *dag.skipped_by_type.entry(kind.to_owned()).or_default() += 1;
                continue;
            }
            *dag.lines_by_type.entry(kind.to_owned()).or_default() += 1;
            let kind = kind.to_owned();
            dag.push(Entry { line, kind, value });
        }
        Ok(dag)
    }

    /// A DAG of already parsed lines (an agent rebuilt from progress lines).
    pub fn from_entries(entries: Vec<Entry>) -> Dag {
        let mut dag = Dag {
            linear: true,
            ..Dag::default()
        };
        for entry in entries {
            dag.lines_read += 1;
            *dag.lines_by_type.entry(entry.kind.clone()).or_default() += 1;
            dag.push(entry);
        }
        dag
    }

    /// This DAG with its counts only: the lines, once extracted, need not be held
    /// a second time (a transcript line can be hundreds of megabytes).
    pub fn without_lines(self) -> Dag {
        Dag {
            entries: Vec::new(),
            by_uuid: HashMap::new(),
            ..self
        }
    }

    fn push(&mut self, entry: Entry) {
        if let Some(uuid) = entry.uuid() {
            // The first line with a uuid wins: a repeated uuid is a copy.
            self.by_uuid
                .entry(uuid.to_owned())
                .or_insert(self.entries.len());
        }
        self.entries.push(entry);
    }

    /// The indices of the active thread's lines, from the root to the last
    /// conversational line (see the module documentation).
    pub fn active_path(&self) -> BTreeSet<usize> {
        let mut path = BTreeSet::new();
        if self.linear {
            path.extend(0..self.entries.len());
            return path;
        }
        let Some(mut current) = self.entries.iter().rposition(Entry::is_conversation) else {
            return path;
        };
        // Bounded: each step visits a new line, and a repeat ends the walk.
        while path.insert(current) {
            let entry = &self.entries[current];
            let parent = entry
                .str_field("parentUuid")
                .or_else(|| entry.str_field("logicalParentUuid"))
                .and_then(|uuid| self.by_uuid.get(uuid).copied());
            let next = match parent {
                Some(parent) => Some(parent),
                None if entry.is_compact_boundary() => self.entries[..current]
                    .iter()
                    .rposition(Entry::is_conversation),
                None => None,
            };
            match next {
                Some(next) => current = next,
                None => break,
            }
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, uuid: &str, parent: Option<&str>) -> String {
        serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent}).to_string()
    }

    #[test]
    fn abandoned_branches_are_off_the_active_path() {
        // Goal: a retried exchange's first attempt is not on the path; the root is.
        let text = [
            line("user", "a", None),
            line("assistant", "b", Some("a")),
            line("assistant", "c", Some("a")),
            line("user", "d", Some("c")),
        ]
        .join("\n");
        let dag = Dag::parse(Path::new("s.jsonl"), &text).unwrap();
        assert_eq!(dag.active_path(), BTreeSet::from([0, 2, 3]));
    }

    #[test]
    fn a_compaction_boundary_continues_from_the_line_before_it() {
        // Goal: a boundary whose logical parent was never written still links back.
        let boundary = serde_json::json!({"type": "system", "subtype": "compact_boundary",
            "uuid": "c", "parentUuid": null, "logicalParentUuid": "missing"});
        let text = [
            line("user", "a", None),
            line("assistant", "b", Some("a")),
            boundary.to_string(),
            line("user", "d", Some("c")),
        ]
        .join("\n");
        let dag = Dag::parse(Path::new("s.jsonl"), &text).unwrap();
        assert_eq!(dag.active_path(), BTreeSet::from([0, 1, 2, 3]));
    }

    #[test]
    fn cycles_end_the_walk() {
        // Goal: a corrupt parent cycle cannot loop forever.
        let text = [line("user", "a", Some("b")), line("user", "b", Some("a"))].join("\n");
        let dag = Dag::parse(Path::new("s.jsonl"), &text).unwrap();
        assert_eq!(dag.active_path().len(), 2);
    }
}
