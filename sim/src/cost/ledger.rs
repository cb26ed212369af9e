//! The deduplicated API responses of a set of transcripts.
//!
//! Claude Code writes one line per content block, so the lines of one API response
//! repeat its `message.id` and `requestId` and carry the same or a growing
//! `message.usage`. The [`Ledger`] keeps one [`Request`] per `(message.id, requestId)`
//! pair across every file it reads: the line with the largest usage (prompt plus
//! output tokens), and of lines with equal usage the first, by file (in the order
//! given) and then by line. A line with a usage but without both ids cannot be matched
//! with others and counts on its own. A line that could hold a usage and is not a JSON
//! object of the expected shape, or is not framed as an object at all, is recorded as
//! [`Malformed`] with its file and line number and otherwise skipped: it never stops
//! the reading. A line that cannot hold a usage is not parsed beyond that (see
//! `cannot_hold_usage`).
//!
//! Which line is kept depends only on the lines, never on the order they were read in,
//! so files can be read on several threads, each into its own partial ledger, and the
//! partial ledgers merged (`Responses::absorb`) into the same ledger that reading
//! them one after another gives.

use std::borrow::Cow;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde::Deserialize;

use super::lines::{for_each_line_in, LineReader};
use super::read::read_files;
use super::transcript::TranscriptFile;
use super::usage::Usage;
use super::CostError;

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

/// Where a line is: its file's index, then its 1-based line number. Ordered as the
/// lines are when the files are read one after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Position {
    file: usize,
    line: usize,
}

/// The deduplicated API responses of a set of transcripts, and every line that could not
/// be read.
#[derive(Debug, Default)]
pub struct Ledger {
    files: Vec<TranscriptFile>,
    responses: Responses,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Reads every file in `files` on up to `threads` threads. The ledger is the same
    /// whatever the thread count: the one that reading the files in order gives.
    ///
    /// Memory holds one read buffer per thread (a chunk of a file, or its longest line)
    /// and one entry per distinct response, never a whole file.
    pub fn read_all(
        files: Vec<TranscriptFile>,
        threads: NonZeroUsize,
    ) -> Result<Ledger, CostError> {
        let responses = read_files(&files, threads)?;
        Ok(Ledger { files, responses })
    }

    /// Reads the transcript `file` from disk, after the files already read. If it cannot
    /// be read to its end, the ledger is left as it was.
    pub fn read_file(&mut self, file: TranscriptFile) -> Result<(), CostError> {
        let index = self.files.len();
        let mut share = Responses::default();
        let read = std::fs::File::open(&file.path).and_then(|reader| {
            LineReader::new().for_each_line(reader, |number, line| {
                share.add_line(index, number, line);
            })
        });
        read.map_err(|source| CostError::Read {
            path: file.path.clone(),
            source,
        })?;
        // Every line of the share comes after every line already read, so appending keeps
        // the orders `finish` would give.
        self.responses.absorb(share);
        self.files.push(file);
        Ok(())
    }

    /// Adds the lines of `bytes`, the contents of `file`, after the files already read.
    pub fn add_transcript(&mut self, file: TranscriptFile, bytes: &[u8]) {
        let index = self.files.len();
        self.files.push(file);
        for_each_line_in(bytes, |number, line| {
            self.responses.add_line(index, number, line);
        });
    }

    /// The files read, in order.
    pub fn files(&self) -> &[TranscriptFile] {
        &self.files
    }

    /// One entry per API response, in the order each was first seen.
    pub fn requests(&self) -> &[Request] {
        &self.responses.requests
    }

    /// The lines that could not be read, in file and line order.
    pub fn malformed(&self) -> &[Malformed] {
        &self.responses.malformed
    }

    /// Lines read, not counting blank ones.
    pub fn lines_read(&self) -> u64 {
        self.responses.lines_read
    }

    /// Lines that repeated the ids of another line and were merged with it.
    pub fn duplicate_lines(&self) -> u64 {
        self.responses.duplicate_lines
    }
}

/// The deduplicated responses of some lines of files known by their index: a whole
/// ledger's, or one reading thread's share of them.
#[derive(Debug, Default)]
pub(super) struct Responses {
    requests: Vec<Request>,
    /// Where the first line of each of `requests` is, index for index: the order the
    /// responses were first seen in.
    first_seen: Vec<Position>,
    /// `(message.id, requestId)`, encoded by [`dedup_key`], to its index in `requests`.
    by_key: HashMap<Box<str>, usize>,
    /// In file and line order once [`Responses::finish`] has run.
    malformed: Vec<Malformed>,
    lines_read: u64,
    duplicate_lines: u64,
    scratch_key: String,
}

impl Responses {
    /// Adds line `line_number` of the file with index `file`. Lines of one file must come
    /// in order.
    pub(super) fn add_line(&mut self, file: usize, line_number: usize, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        self.lines_read += 1;
        let at = Position {
            file,
            line: line_number,
        };
        match parse_line(line) {
            Ok(None) => {}
            Ok(Some(parsed)) => self.add_response(at, parsed),
            Err(error) => self.malformed.push(Malformed {
                file,
                line: line_number,
                error,
            }),
        }
    }

    fn add_response(&mut self, at: Position, parsed: ParsedLine<'_>) {
        let request = Request {
            file: at.file,
            line: at.line,
            model: parsed.model.map(Cow::into_owned).unwrap_or_default(),
            usage: parsed.usage,
        };
        let Some((message_id, request_id)) = parsed.ids else {
            self.push(request, at, None);
            return;
        };
        dedup_key(&mut self.scratch_key, &message_id, &request_id);
        match self.by_key.get(self.scratch_key.as_str()) {
            Some(&index) => self.merge_into(index, request, at),
            None => {
                let key = self.scratch_key.as_str().into();
                self.push(request, at, Some(key));
            }
        }
    }

    fn push(&mut self, request: Request, first_seen: Position, key: Option<Box<str>>) {
        if let Some(key) = key {
            self.by_key.insert(key, self.requests.len());
        }
        self.requests.push(request);
        self.first_seen.push(first_seen);
    }

    /// Merges `request`, a line first seen at `first_seen`, into the response at `index`
    /// that shares its ids.
    fn merge_into(&mut self, index: usize, request: Request, first_seen: Position) {
        self.duplicate_lines += 1;
        let seen = &mut self.first_seen[index];
        *seen = (*seen).min(first_seen);
        let kept = &mut self.requests[index];
        if keeps_over(&request, kept) {
            *kept = request;
        }
    }

    /// Merges `other`, the responses of other files, into these: the same as if this
    /// one had read their lines too.
    pub(super) fn absorb(&mut self, other: Responses) {
        let mut keys: Vec<Option<Box<str>>> = vec![None; other.requests.len()];
        for (key, index) in other.by_key {
            keys[index] = Some(key);
        }
        let entries = other.requests.into_iter().zip(other.first_seen).zip(keys);
        for ((request, first_seen), key) in entries {
            match key {
                Some(key) => match self.by_key.get(&key) {
                    Some(&index) => self.merge_into(index, request, first_seen),
                    None => self.push(request, first_seen, Some(key)),
                },
                None => self.push(request, first_seen, None),
            }
        }
        self.malformed.extend(other.malformed);
        self.lines_read += other.lines_read;
        self.duplicate_lines += other.duplicate_lines;
    }

    /// Puts the responses in the order they were first seen and the malformed lines in
    /// file and line order: the orders reading every file in turn gives.
    pub(super) fn finish(&mut self) {
        let mut order: Vec<usize> = (0..self.requests.len()).collect();
        order.sort_unstable_by_key(|&index| self.first_seen[index]);
        let mut new_index = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut requests: Vec<Option<Request>> = std::mem::take(&mut self.requests)
            .into_iter()
            .map(Some)
            .collect();
        self.requests = order
            .iter()
            .map(|&old| requests[old].take().expect("each index is taken once"))
            .collect();
        self.first_seen = order.iter().map(|&old| self.first_seen[old]).collect();
        for index in self.by_key.values_mut() {
            *index = new_index[*index];
        }
        self.malformed.sort_by_key(|bad| (bad.file, bad.line));
    }
}

/// Whether `line` replaces `kept`, a line of the same response: it has the larger usage,
/// or the same usage and comes first. A total order of the lines, so the kept line does
/// not depend on the order lines arrive in.
fn keeps_over(line: &Request, kept: &Request) -> bool {
    let (new, old) = (line.usage.total_tokens(), kept.usage.total_tokens());
    new > old || (new == old && (line.file, line.line) < (kept.file, kept.line))
}

/// Writes the dedup key of `(message_id, request_id)` into `key`: the length of the first
/// id, then both ids, so that no two pairs share a key.
fn dedup_key(key: &mut String, message_id: &str, request_id: &str) {
    use std::fmt::Write;
    key.clear();
    write!(key, "{}:{message_id}{request_id}", message_id.len()).expect("a String never fails");
}

/// What a line with a usage says.
struct ParsedLine<'a> {
    /// `(message.id, requestId)`, if the line has both.
    ids: Option<(Cow<'a, str>, Cow<'a, str>)>,
    model: Option<Cow<'a, str>>,
    usage: Usage,
}

/// The usage `line` reports, `None` for a line without one, or why the line is
/// malformed.
fn parse_line(line: &[u8]) -> Result<Option<ParsedLine<'_>>, String> {
    // serde_json does not check the UTF-8 of strings it skips, so check the whole line;
    // only a line that fails is checked again, for where it fails.
    let text = match simdutf8::basic::from_utf8(line) {
        Ok(text) => text,
        Err(_) => std::str::from_utf8(line)
            .map_err(|error| format!("invalid UTF-8 after byte {}", error.valid_up_to()))?,
    };
    if cannot_hold_usage(line) {
        return Ok(None);
    }
    let parsed = serde_json::from_str::<Line<'_>>(text).map_err(|e| e.to_string())?;
    let Some(Message {
        id,
        model,
        usage: Some(raw),
    }) = parsed.message
    else {
        return Ok(None);
    };
    let one_hour = raw
        .cache_creation
        .and_then(|split| split.ephemeral_1h_input_tokens)
        .unwrap_or(0);
    Ok(Some(ParsedLine {
        ids: id.zip(parsed.request_id),
        model,
        usage: Usage::from_response(
            raw.input_tokens.unwrap_or(0),
            raw.output_tokens.unwrap_or(0),
            raw.cache_creation_input_tokens.unwrap_or(0),
            one_hour,
            raw.cache_read_input_tokens.unwrap_or(0),
        ),
    }))
}

/// Whether `line` is framed as a JSON object (`{` to `}`, give or take whitespace) and
/// cannot hold a usage: no key `"usage"` appears in it, spelled out or with a `\u`
/// escape (the only escape that can stand for a letter).
///
/// Such lines are not parsed further. Four lines in five of a transcript are user
/// messages, tool results and progress, with no usage; parsing them in full was half
/// of the time of `coordsim cost`, for no token. A line that is not framed so
/// (a line cut short, text that is not an object) is still parsed, and reported as
/// malformed; one that is framed so but broken inside holds no token either way and
/// goes unreported.
fn cannot_hold_usage(line: &[u8]) -> bool {
    static USAGE_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));
    static UNICODE_ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    // JSON's whitespace; a line holds no `\n`.
    let is_space = |byte: &u8| matches!(byte, b' ' | b'\t' | b'\r');
    let start = line.iter().position(|byte| !is_space(byte));
    let end = line.iter().rposition(|byte| !is_space(byte));
    let framed = matches!((start, end), (Some(start), Some(end))
        if start < end && line[start] == b'{' && line[end] == b'}');
    framed && USAGE_KEY.find(line).is_none() && UNICODE_ESCAPE.find(line).is_none()
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
    use std::path::Path;

    fn file(path: &str) -> TranscriptFile {
        TranscriptFile::at(Path::new(path))
    }

    fn assistant(id: &str, request: &str, model: &str, input: u64, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","requestId":"{request}","message":{{"id":"{id}","model":"{model}","content":[{{"type":"text","text":"x"}}],"usage":{{"input_tokens":{input},"output_tokens":{output},"cache_creation_input_tokens":10,"cache_read_input_tokens":20,"cache_creation":{{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":6}}}}}}}}"#
        )
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
    fn only_lines_that_can_hold_a_usage_are_parsed_in_full() {
        // Goal: a line with no usage key, framed as an object, is read without parsing:
        // an error inside it is not reported (it holds no token either way); a line cut
        // short or not an object is; a usage key spelled with a `\u` escape is found.
        let text = [
            r#"{"type":"user","message":{"content":"x"},"broken":tru}"#,
            r#"  {"type":"user","message":{"content":"cut sho"#,
            r#"["not","an","object"]"#,
            r#"{"requestId":"r","message":{"id":"m","model":"m","us\u0061ge":{"input_tokens":5}}}"#,
            r#"{"requestId":"r2","message":{"id":"m2","usage":{"input_tokens":"five"}}}"#,
        ]
        .join("\n");
        let mut ledger = Ledger::new();
        ledger.add_transcript(file("s.jsonl"), text.as_bytes());
        let malformed: Vec<usize> = ledger.malformed().iter().map(|bad| bad.line).collect();
        assert_eq!(malformed, [2, 3, 5]);
        assert_eq!(ledger.requests().len(), 1);
        assert_eq!(ledger.requests()[0].usage.input_tokens, 5);
        assert_eq!(ledger.lines_read(), 5);
    }

    proptest! {
        #[test]
        fn a_line_read_without_parsing_could_not_hold_a_usage(
            inner in "[{}\\[\\]\":,\\\\ u0-9a-fmsgeqiod]{0,60}",
            key in prop_oneof![Just("usage"), Just("us\\u0061ge"), Just("u\\u0073age"), Just("usa")],
        ) {
            // Goal: whatever a line skipped unparsed holds, serde_json finds no usage in
            // it, so skipping it never changes a token total.
            for line in [
                format!("{{{inner}}}"),
                format!(r#"{{"message":{{"{key}":{{"input_tokens":1}}{inner}}}}}"#),
            ] {
                if cannot_hold_usage(line.as_bytes()) {
                    let usage = serde_json::from_str::<Line<'_>>(&line)
                        .ok()
                        .and_then(|parsed| parsed.message)
                        .and_then(|message| message.usage);
                    prop_assert!(usage.is_none(), "{line}");
                }
            }
        }
    }

    /// One line of a generated transcript: a response line from small pools of ids and
    /// sizes (so that ids repeat within and across files, with equal and unequal
    /// usage), a line without ids, a line without usage, or a malformed one.
    fn generated_line() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => (0..6u8, 0..2u8, 0..3u64, 0..3u64).prop_map(|(id, request, input, output)| {
                assistant(&format!("msg_{id}"), &format!("req_{request}"), "m", input, output)
            }),
            1 => (0..3u64).prop_map(|output| format!(
                r#"{{"message":{{"model":"m","usage":{{"output_tokens":{output}}}}}}}"#
            )),
            1 => Just(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#.to_owned()),
            1 => Just("{\"type\":\"assistant\",\"mess".to_owned()),
            1 => Just(String::new()),
        ]
    }

    /// What a ledger holds, to compare two.
    fn contents(ledger: &Ledger) -> (Vec<Request>, Vec<Malformed>, u64, u64) {
        (
            ledger.requests().to_vec(),
            ledger.malformed().to_vec(),
            ledger.lines_read(),
            ledger.duplicate_lines(),
        )
    }

    use proptest::collection;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn shares_merged_in_any_order_give_the_ledger_of_reading_in_order(
            files in collection::vec(collection::vec(generated_line(), 0..8), 1..7),
            assignment in collection::vec(0..3usize, 7),
            merge_order in Just(vec![0usize, 1, 2]).prop_shuffle(),
        ) {
            // Goal: however files are dealt to threads and the threads' shares merged,
            // the ledger is the one reading the files in order gives: the same kept line
            // of each response, the same order of responses and malformed lines, the same
            // counts. This is what makes `--threads` change nothing but the time.
            let texts: Vec<String> = files.iter().map(|lines| lines.join("\n")).collect();
            let mut in_order = Ledger::new();
            for (index, text) in texts.iter().enumerate() {
                in_order.add_transcript(file(&format!("s{index}.jsonl")), text.as_bytes());
            }
            let mut shares: Vec<Responses> = (0..3).map(|_| Responses::default()).collect();
            for (index, text) in texts.iter().enumerate() {
                let share = &mut shares[assignment[index]];
                for_each_line_in(text.as_bytes(), |number, line| share.add_line(index, number, line));
            }
            let mut shares: Vec<Option<Responses>> = shares.into_iter().map(Some).collect();
            let mut merged = shares[merge_order[0]].take().unwrap();
            for &next in &merge_order[1..] {
                merged.absorb(shares[next].take().unwrap());
            }
            merged.finish();
            let merged = Ledger {
                files: in_order.files().to_vec(),
                responses: merged,
            };
            prop_assert_eq!(contents(&merged), contents(&in_order));
        }
    }
}
