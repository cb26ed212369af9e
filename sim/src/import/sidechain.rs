//! Subagent sidechains paired with the tool calls that spawned them.
//!
//! A `Task` (or `Agent`) call spawns a subagent whose `agentId` the parent's
//! transcript records twice: on every `agent_progress` line (`data.agentId` with the
//! call's id as `parentToolUseID`) and on the call's tool result
//! (`toolUseResult.agentId`). The subagent's own lines live in
//! `<session>/subagents/agent-<agentId>.jsonl`; when that file is missing, the
//! `agent_progress` lines, which carry each of its messages, stand in for it.
//! Sidechains no call spawned (Claude Code's compaction agents) are counted and left
//! out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cost::transcript::{discover, Agent};

use super::dag::Dag;
use super::extract::{thread, Thread};
use super::ImportError;

/// The UTF-8 byte order mark.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// The tool names that spawn a subagent: Claude Code's `Task`, and `Agent`, its
/// later name and the runtime's.
pub const SPAWNING_TOOLS: [&str; 2] = ["Task", "Agent"];

/// Where a subagent's lines came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Its own transcript file.
    File(PathBuf),
    /// The `agent_progress` lines of its parent.
    Progress,
    /// Nowhere: the recording has none of its lines.
    Missing,
}

/// One subagent and the call that spawned it.
#[derive(Debug)]
pub struct Sidechain {
    /// Its `agentId`, or the spawning call's id when the recording names none.
    pub agent_id: String,
    /// The prompt the spawning call passed.
    pub prompt: String,
    /// Where its lines came from.
    pub source: Source,
    /// Its thread (empty when [`Source::Missing`]).
    pub thread: Thread,
    /// Its file's DAG, for line counts (none unless [`Source::File`]).
    pub dag: Option<Dag>,
}

/// The subagent transcripts next to `session`, by `agentId`: the files in
/// `<dir>/<stem>/subagents/`.
pub fn subagent_files(session: &Path) -> Result<BTreeMap<String, PathBuf>, ImportError> {
    let Some(stem) = session.file_stem() else {
        return Ok(BTreeMap::new());
    };
    let dir = session.with_file_name(stem).join("subagents");
    if !dir.is_dir() {
        return Ok(BTreeMap::new());
    }
    let files = discover(std::slice::from_ref(&dir)).map_err(|error| ImportError::Read {
        path: dir.clone(),
        source: std::io::Error::other(error.to_string()),
    })?;
    Ok(files
        .into_iter()
        .filter_map(|file| match file.agent {
            Agent::Subagent(id) => Some((id, file.path)),
            Agent::Main => None,
        })
        .collect())
}

/// Reads the transcript at `path` into a DAG.
pub fn read_dag(path: &Path) -> Result<Dag, ImportError> {
    let text = std::fs::read(path).map_err(|source| ImportError::Read {
        path: path.to_owned(),
        source,
    })?;
    // A byte order mark opens some files written on Windows; it is not data.
    let mut text = text;
    if text.starts_with(BYTE_ORDER_MARK) {
        text.drain(..BYTE_ORDER_MARK.len());
    }
    let text = String::from_utf8(text).map_err(|error| {
        let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
        ImportError::Malformed {
            path: path.to_owned(),
            line: valid.iter().filter(|&&b| b == b'\n').count() + 1,
            message: "invalid UTF-8".to_owned(),
        }
    })?;
    Dag::parse(path, &text)
}

/// Every subagent spawned from `main`, directly or through other subagents, in
/// the order their spawning calls were made (depth first).
pub fn pair(
    main: &Thread,
    files: &BTreeMap<String, PathBuf>,
) -> Result<Vec<Sidechain>, ImportError> {
    let mut found = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    collect(main, files, &mut seen, &mut found)?;
    Ok(found)
}

fn collect(
    parent: &Thread,
    files: &BTreeMap<String, PathBuf>,
    seen: &mut BTreeSet<String>,
    found: &mut Vec<Sidechain>,
) -> Result<(), ImportError> {
    for call in parent.tool_calls() {
        if !SPAWNING_TOOLS.contains(&call.name.as_str()) {
            continue;
        }
        let Some(prompt) = call.input.get("prompt").and_then(|p| p.as_str()) else {
            continue;
        };
        let agent_id = parent.agent_ids.get(&call.id).cloned();
        // Each subagent is read once, which also bounds the recursion: a transcript
        // that claims to spawn itself ends here.
        if !seen.insert(agent_id.clone().unwrap_or_else(|| call.id.clone())) {
            continue;
        }
        let file = agent_id.as_ref().and_then(|id| files.get(id));
        let progress = agent_id
            .as_ref()
            .and_then(|id| parent.progress_lines.get(id));
        let (source, dag) = match (file, progress) {
            (Some(path), _) => (Source::File(path.clone()), Some(read_dag(path)?)),
            (None, Some(lines)) => (Source::Progress, Some(Dag::from_entries(lines.clone()))),
            (None, None) => (Source::Missing, None),
        };
        let sidechain = Sidechain {
            agent_id: agent_id.unwrap_or_else(|| call.id.clone()),
            prompt: prompt.to_owned(),
            thread: dag.as_ref().map(thread).unwrap_or_default(),
            // Only its line counts are kept: its lines are in `thread` now.
            dag: dag
                .filter(|_| matches!(source, Source::File(_)))
                .map(Dag::without_lines),
            source,
        };
        let index = found.len();
        found.push(sidechain);
        let child = std::mem::take(&mut found[index].thread);
        collect(&child, files, seen, found)?;
        found[index].thread = child;
    }
    Ok(())
}
