//! Reading Claude Code session transcripts into a ledger of deduplicated API responses.
//!
//! A transcript is a JSON Lines file. Claude Code writes one line per content block, so
//! the lines of one API response repeat its `message.id` and `requestId` and carry the
//! same or a growing `message.usage`. The [`Ledger`] keeps one [`Request`] per
//! `(message.id, requestId)` pair across every file it reads: the line with the largest
//! usage (prompt plus output tokens), the first of equals. A line with a usage but
//! without both ids cannot be matched with others and counts on its own.
//!
//! Files are found by [`discover`]: `<dir>/<session>.jsonl` is the main thread of session
//! `<session>`, and `<dir>/<session>/subagents/agent-<id>.jsonl` is subagent `<id>` of the
//! same session; sessions are told apart by the bytes of their names, not a lossy
//! decoding. A UTF-8 byte order mark before the first line is skipped. A line that is
//! not a JSON object of the expected shape is recorded as [`Malformed`] with its file
//! and line number and otherwise skipped: it never stops the reading.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::usage::Usage;
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

/// The UTF-8 byte order mark.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

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

/// One API response, deduplicated: the line of it with the largest usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Index of the file in [`Ledger::files`].
    pub file: usize,
    /// 1-based line number in that file.
    pub line: usize,
    /// `message.model`; empty if the line had none.
    pub model: String,
    /// Its token counts.
    pub usage: Usage,
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// Index of the file in [`Ledger::files`].
    pub file: usize,
    /// 1-based line number in that file.
    pub line: usize,
    /// What was wrong with it.
    pub error: String,
}

/// The deduplicated API responses of a set of transcripts, and every line that could not
/// be read.
#[derive(Debug, Default)]
pub struct Ledger {
    files: Vec<TranscriptFile>,
    requests: Vec<Request>,
    /// `(message.id, requestId)`, encoded by [`dedup_key`], to its index in `requests`.
    by_key: HashMap<String, usize>,
    malformed: Vec<Malformed>,
    lines_read: u64,
    duplicate_lines: u64,
    scratch_key: String,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Reads every file in `files`, in order.
    pub fn read_all(files: Vec<TranscriptFile>) -> Result<Ledger, CostError> {
        let mut ledger = Ledger::new();
        // One buffer for all files: reading is parse-bound, and fresh pages cost faults.
        let mut buffer = Vec::new();
        for file in files {
            ledger.read_into(file, &mut buffer)?;
        }
        Ok(ledger)
    }

    /// Reads the transcript `file` from disk.
    pub fn read_file(&mut self, file: TranscriptFile) -> Result<(), CostError> {
        self.read_into(file, &mut Vec::new())
    }

    fn read_into(&mut self, file: TranscriptFile, buffer: &mut Vec<u8>) -> Result<(), CostError> {
        use std::io::Read;
        buffer.clear();
        std::fs::File::open(&file.path)
            .and_then(|mut reader| reader.read_to_end(buffer))
            .map_err(|source| CostError::Read {
                path: file.path.clone(),
                source,
            })?;
        self.add_transcript(file, buffer);
        Ok(())
    }

    /// Adds the lines of `bytes`, the contents of `file`.
    pub fn add_transcript(&mut self, file: TranscriptFile, bytes: &[u8]) {
        let file_index = self.files.len();
        self.files.push(file);
        // A byte order mark opens some files written on Windows; it is not data.
        let mut rest = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
        let mut line_number = 0;
        while !rest.is_empty() {
            let (line, next) = match memchr::memchr(b'\n', rest) {
                Some(end) => (&rest[..end], &rest[end + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            rest = next;
            line_number += 1;
            self.add_line(file_index, line_number, line);
        }
    }

    fn add_line(&mut self, file: usize, line_number: usize, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        self.lines_read += 1;
        // serde_json does not check the UTF-8 of strings it skips, so check the whole line.
        let parsed = std::str::from_utf8(line)
            .map_err(|error| format!("invalid UTF-8 after byte {}", error.valid_up_to()))
            .and_then(|text| serde_json::from_str::<Line<'_>>(text).map_err(|e| e.to_string()));
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(error) => {
                self.malformed.push(Malformed {
                    file,
                    line: line_number,
                    error,
                });
                return;
            }
        };
        let Some(Message {
            id,
            model,
            usage: Some(raw),
        }) = parsed.message
        else {
            return;
        };
        let one_hour = raw
            .cache_creation
            .and_then(|split| split.ephemeral_1h_input_tokens)
            .unwrap_or(0);
        let request = Request {
            file,
            line: line_number,
            model: model.map(Cow::into_owned).unwrap_or_default(),
            usage: Usage::from_response(
                raw.input_tokens.unwrap_or(0),
                raw.output_tokens.unwrap_or(0),
                raw.cache_creation_input_tokens.unwrap_or(0),
                one_hour,
                raw.cache_read_input_tokens.unwrap_or(0),
            ),
        };
        let (Some(message_id), Some(request_id)) = (id, parsed.request_id) else {
            self.requests.push(request);
            return;
        };
        dedup_key(&mut self.scratch_key, &message_id, &request_id);
        match self.by_key.get(self.scratch_key.as_str()) {
            Some(&index) => {
                self.duplicate_lines += 1;
                let kept = &mut self.requests[index];
                if request.usage.total_tokens() > kept.usage.total_tokens() {
                    *kept = request;
                }
            }
            None => {
                self.by_key
                    .insert(self.scratch_key.clone(), self.requests.len());
                self.requests.push(request);
            }
        }
    }

    /// The files read, in order.
    pub fn files(&self) -> &[TranscriptFile] {
        &self.files
    }

    /// One entry per API response, in the order each was first seen.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// The lines that could not be read, in file and line order.
    pub fn malformed(&self) -> &[Malformed] {
        &self.malformed
    }

    /// Lines read, not counting blank ones.
    pub fn lines_read(&self) -> u64 {
        self.lines_read
    }

    /// Lines that repeated the ids of an earlier line and were merged into it.
    pub fn duplicate_lines(&self) -> u64 {
        self.duplicate_lines
    }
}

/// Writes the dedup key of `(message_id, request_id)` into `key`: the length of the first
/// id, then both ids, so that no two pairs share a key.
fn dedup_key(key: &mut String, message_id: &str, request_id: &str) {
    use std::fmt::Write;
    key.clear();
    write!(key, "{}:{message_id}{request_id}", message_id.len()).expect("a String never fails");
}

/// The fields of a transcript line that accounting reads; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, rename = "requestId", default)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
}

#[derive(Deserialize)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> TranscriptFile {
        TranscriptFile::at(Path::new(path))
    }

    fn assistant(id: &str, request: &str, model: &str, input: u64, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","requestId":"{request}","message":{{"id":"{id}","model":"{model}","content":[{{"type":"text","text":"x"}}],"usage":{{"input_tokens":{input},"output_tokens":{output},"cache_creation_input_tokens":10,"cache_read_input_tokens":20,"cache_creation":{{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":6}}}}}}}}"#
        )
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
    fn split_lines_of_one_response_count_once_with_the_largest_usage() {
        // Goal: lines sharing (message.id, requestId) merge, keeping the largest usage even
        // when it is not the last line; a different requestId is a different response.
        let text = [
            assistant("msg_1", "req_1", "m", 3, 1),
            assistant("msg_1", "req_1", "m", 3, 50),
            assistant("msg_1", "req_1", "m", 3, 7),
            assistant("msg_1", "req_2", "m", 1, 1),
        ]
        .join("\n");
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("s.jsonl"), text.as_bytes());
        assert_eq!(ledger.requests().len(), 2);
        assert_eq!(ledger.requests()[0].usage.output_tokens, 50);
        assert_eq!(
            ledger.requests()[0].line,
            2,
            "the kept line is the largest one"
        );
        assert_eq!(ledger.requests()[1].usage.output_tokens, 1);
        assert_eq!(ledger.duplicate_lines(), 2);
        assert_eq!(ledger.lines_read(), 4);
    }

    #[test]
    fn dedup_spans_files() {
        // Goal: a response copied into another file (a resumed session) counts once.
        let line = assistant("msg_1", "req_1", "m", 3, 5);
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("a.jsonl"), line.as_bytes());
        ledger.add_transcript(file("b.jsonl"), line.as_bytes());
        assert_eq!(ledger.requests().len(), 1);
        assert_eq!(ledger.requests()[0].file, 0, "the first of equals is kept");
    }

    #[test]
    fn lines_without_both_ids_each_count() {
        // Goal: a usage that cannot be matched to others is counted, not dropped.
        let text = r#"{"message":{"model":"m","usage":{"input_tokens":2,"output_tokens":3}}}
{"message":{"model":"m","usage":{"input_tokens":2,"output_tokens":3}}}
{"requestId":"r","message":{"model":"m","usage":{"input_tokens":2,"output_tokens":3}}}"#;
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("s.jsonl"), text.as_bytes());
        assert_eq!(ledger.requests().len(), 3);
        assert_eq!(ledger.duplicate_lines(), 0);
    }

    #[test]
    fn cache_write_split_is_read_from_cache_creation() {
        // Goal: the 1h share comes from `cache_creation`; without it every write is 5m.
        let mut ledger = Ledger::new();
        let text = format!(
            "{}\n{}",
            assistant("a", "r", "m", 1, 1),
            r#"{"requestId":"r2","message":{"id":"b","model":"m","usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":9}}}"#
        );
        ledger.add_transcript(file("s.jsonl"), text.as_bytes());
        let usage = ledger.requests()[0].usage;
        assert_eq!(
            (
                usage.cache_creation_5m_input_tokens,
                usage.cache_creation_1h_input_tokens
            ),
            (4, 6)
        );
        let usage = ledger.requests()[1].usage;
        assert_eq!(
            (
                usage.cache_creation_5m_input_tokens,
                usage.cache_creation_1h_input_tokens
            ),
            (9, 0)
        );
    }

    #[test]
    fn malformed_lines_are_counted_with_line_numbers_and_reading_goes_on() {
        // Goal: broken JSON, a non-object line, a wrongly typed usage and invalid UTF-8 are
        // each recorded with their line number; the good lines around them still count.
        let good = assistant("msg_1", "req_1", "m", 3, 5);
        let mut text = format!(
            "{good}\n{{\"type\":\"assistant\",\"message\":{{\"usage\":\n\n[1,2]\n\
             {{\"message\":{{\"usage\":{{\"input_tokens\":\"many\"}}}}}}\n"
        )
        .into_bytes();
        text.extend_from_slice(b"{\"x\":\"\xff\"}\r\n");
        text.extend_from_slice(assistant("msg_2", "req_2", "m", 1, 1).as_bytes());
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("s.jsonl"), &text);
        let lines: Vec<usize> = ledger.malformed().iter().map(|bad| bad.line).collect();
        assert_eq!(lines, [2, 4, 5, 6]);
        assert!(
            ledger.malformed()[0].error.contains("EOF"),
            "{:?}",
            ledger.malformed()
        );
        assert!(ledger.malformed()[2].error.contains("invalid type"));
        assert!(ledger.malformed()[3]
            .error
            .contains("invalid UTF-8 after byte 6"));
        assert_eq!(ledger.requests().len(), 2);
        assert_eq!(
            ledger.lines_read(),
            6,
            "the blank line is not a line of data"
        );
    }

    #[test]
    fn lines_without_usage_are_read_but_not_requests() {
        // Goal: user, progress and snapshot lines parse and contribute nothing.
        let text = r#"{"type":"user","message":{"role":"user","content":"hi"}}
{"type":"progress","data":{"message":{"message":{"usage":{"input_tokens":99}}}}}
{"type":"file-history-snapshot","snapshot":{}}"#;
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("s.jsonl"), text.as_bytes());
        assert!(ledger.requests().is_empty());
        assert!(ledger.malformed().is_empty());
        assert_eq!(ledger.lines_read(), 3);
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
