//! Finding Claude Code session transcripts and telling whose each one is.
//!
//! Files are found by [`discover`]: `<dir>/<session>.jsonl` is the main thread of session
//! `<session>`, and `<dir>/<session>/subagents/agent-<id>.jsonl` is subagent `<id>` of the
//! same session; sessions are told apart by the bytes of their names, not a lossy
//! decoding. Their lines are read into a [`Ledger`](super::Ledger).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

use super::CostError;

/// Who in a session made a request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Agent {
    /// The session's main thread: `<session>.jsonl`.
    Main,
    /// A subagent: `<session>/subagents/agent-<id>.jsonl`, named by `<id>`.
    Subagent(String),
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Agent::Main => f.write_str("main"),
            Agent::Subagent(id) => f.write_str(id),
        }
    }
}

/// One transcript file and the session and agent its lines belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptFile {
    /// The file.
    pub path: PathBuf,
    /// The session: the file's stem, or for a subagent the directory above `subagents/`,
    /// with any byte that is not UTF-8 written as `\xNN`.
    pub session_id: String,
    /// The session's name as the file system gives it, which sessions are told apart
    /// by: two names that differ only in bytes that are not UTF-8 are two sessions.
    pub session_key: OsString,
    /// The main thread or a subagent.
    pub agent: Agent,
}

impl TranscriptFile {
    /// The session and agent of the transcript at `path`, from where it lies.
    pub fn at(path: &Path) -> TranscriptFile {
        let stem_key = path.file_stem().map(OsStr::to_owned).unwrap_or_default();
        let stem = escaped(&stem_key);
        let parent = path.parent();
        let in_subagents = parent
            .and_then(Path::file_name)
            .is_some_and(|name| name == "subagents");
        let session_dir = parent.and_then(Path::parent).and_then(Path::file_name);
        match (in_subagents, session_dir) {
            (true, Some(session)) => TranscriptFile {
                path: path.to_owned(),
                session_id: escaped(session),
                session_key: session.to_owned(),
                agent: Agent::Subagent(stem.strip_prefix("agent-").unwrap_or(&stem).to_owned()),
            },
            _ => TranscriptFile {
                path: path.to_owned(),
                session_id: stem,
                session_key: stem_key,
                agent: Agent::Main,
            },
        }
    }
}

/// `name` as text, each byte that is not UTF-8 written as `\xNN`, so that names that
/// differ only in such bytes print differently.
fn escaped(name: &OsStr) -> String {
    let bytes = name.as_encoded_bytes();
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02X}"));
        }
    }
    text
}

/// The transcripts under `paths`: each file as given, and every `*.jsonl` file below each
/// directory (symbolic links to directories are not followed), sorted by path without
/// repeats so that every run reads them in the same order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<TranscriptFile>, CostError> {
    let mut found = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|source| CostError::Read {
            path: path.clone(),
            source,
        })?;
        if metadata.is_dir() {
            collect_jsonl(path, &mut found)?;
        } else {
            found.push(path.clone());
        }
    }
    found.sort();
    found.dedup();
    Ok(found.iter().map(|path| TranscriptFile::at(path)).collect())
}

fn collect_jsonl(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), CostError> {
    let read_error = |source| CostError::Read {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(read_error)?;
        if file_type.is_dir() {
            collect_jsonl(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "jsonl")
            && (file_type.is_file() || path.is_file())
        {
            found.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> TranscriptFile {
        TranscriptFile::at(Path::new(path))
    }

    #[test]
    fn files_are_attributed_to_sessions_and_agents_by_where_they_lie() {
        // Goal: `<s>.jsonl` is the main thread of `s`; `<s>/subagents/agent-X.jsonl` is X in `s`.
        let main = file("/p/proj/abc.jsonl");
        assert_eq!(main.session_id, "abc");
        assert_eq!(main.agent, Agent::Main);
        let sub = file("/p/proj/abc/subagents/agent-a2898e3.jsonl");
        assert_eq!(sub.session_id, "abc");
        assert_eq!(sub.agent, Agent::Subagent("a2898e3".to_owned()));
        assert_eq!(sub.agent.to_string(), "a2898e3");
        let odd = file("/p/proj/abc/subagents/helper.jsonl");
        assert_eq!(odd.agent, Agent::Subagent("helper".to_owned()));
        let not_sub = file("/p/proj/abc/other/agent-x.jsonl");
        assert_eq!(
            (not_sub.session_id.as_str(), not_sub.agent),
            ("agent-x", Agent::Main)
        );
    }

    #[test]
    fn discover_finds_jsonl_recursively_in_a_stable_order() {
        // Goal: directories are searched recursively; only `.jsonl` files count; order is sorted.
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("s1/subagents");
        std::fs::create_dir_all(&sub).unwrap();
        for name in ["s2.jsonl", "s1.jsonl", "notes.txt"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::write(sub.join("agent-x.jsonl"), "").unwrap();
        let files = discover(&[dir.path().to_owned()]).unwrap();
        let names: Vec<(String, String)> = files
            .iter()
            .map(|file| (file.session_id.clone(), file.agent.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                ("s1".to_owned(), "x".to_owned()),
                ("s1".to_owned(), "main".to_owned()),
                ("s2".to_owned(), "main".to_owned())
            ]
        );
        let missing = discover(&[dir.path().join("nope")]).unwrap_err();
        assert!(matches!(missing, CostError::Read { .. }));
    }
}
