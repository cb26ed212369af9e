//! Finding and reading envelopes in text.
//!
//! Text around and between envelopes may be anything (prose, code, broken markup),
//! so the text as a whole is not parsed as XML. Instead every `<task-notification>`
//! start tag is a candidate, and quick-xml reads from that tag to its matching end
//! tag. A candidate that is not well-formed, whose start tag has attributes, that
//! repeats a field, lacks a task id, has a status outside
//! `completed|failed|killed|timeout`, or has a usage count that is not a number is not
//! an envelope, and the scan moves on. Nothing is dropped silently:
//! [`parse_block_with_warnings`] names every refused candidate with its position and
//! why, and every repair it made to an accepted one.
//!
//! Claude Code interpolates raw text into its envelopes, so bodies such as
//! `cd web && make` (a bare `&`) are read as written, and unknown entities are kept
//! verbatim. Inside `<result>`, well-formed markup is the worker's text: it is kept as
//! written, and a `<task-notification>` there is content, never an envelope of its own
//! (otherwise a worker could replace its own envelope with a forgery). Elsewhere, a
//! body with markup would lose text and is refused. Elements the parser does not know
//! (a newer dialect's) are kept by name in [`Envelope::extra`].

use std::collections::BTreeMap;

use quick_xml::events::{BytesRef, Event};
use quick_xml::Reader;
use serde::Serialize;

use super::{Envelope, EnvelopeStatus, EnvelopeUsage, EnvelopeWorktree};

const START_TAG: &str = "<task-notification";
const ROOT: &str = "task-notification";

/// Every envelope in `text`, in order of appearance.
pub fn parse_block(text: &str) -> Vec<Envelope> {
    parse_block_with_warnings(text).envelopes
}

/// Every envelope in `text`, in order of appearance, and a warning for every
/// candidate that was not read as an envelope or was read with a repair.
pub fn parse_block_with_warnings(text: &str) -> ParsedBlock {
    let mut parsed = ParsedBlock::default();
    // Candidates may overlap (one that never closes reads to the end of the text, and
    // the next starts inside it), so the bytes read over all candidates are bounded:
    // past the budget, the remaining candidates are refused with a warning each,
    // rather than the scan turning quadratic on hostile text.
    let mut budget_bytes = text
        .len()
        .saturating_mul(SCAN_BUDGET_FACTOR)
        .saturating_add(SCAN_BUDGET_MIN_BYTES);
    let mut cursor = 0;
    while let Some(found) = text[cursor..].find(START_TAG) {
        let start = cursor + found;
        let mut limit = (start + budget_bytes).min(text.len());
        while !text.is_char_boundary(limit) {
            limit -= 1;
        }
        let mut notes = Vec::new();
        let (outcome, scanned_bytes) = read_candidate(&text[start..limit], &mut notes);
        budget_bytes = budget_bytes.saturating_sub(scanned_bytes.max(START_TAG.len()));
        match outcome {
            Ok((envelope, consumed_bytes)) => {
                parsed.envelopes.push(envelope);
                cursor = start + consumed_bytes;
            }
            Err(refusal) => {
                // A refused candidate's repairs are moot: only why it was refused counts.
                notes.clear();
                if limit < text.len() && scanned_bytes >= limit - start {
                    notes.push(Note::new(
                        0,
                        EnvelopeWarningKind::ScanBudgetExhausted,
                        "<task-notification> not read: the text's earlier unclosed \
                         candidates used up the bytes the scan may read",
                    ));
                } else if refusal.kind != EnvelopeWarningKind::NotAStartTag {
                    // A start tag that is only part of a longer name
                    // (`<task-notifications>`) is not a candidate, and not worth a word.
                    notes.push(refusal);
                }
                cursor = start + START_TAG.len();
            }
        }
        parsed
            .warnings
            .extend(notes.into_iter().map(|note| note.at(text, start)));
    }
    parsed
}

/// The bytes all candidates of a text may read together: this many times the text...
const SCAN_BUDGET_FACTOR: usize = 16;
/// ...plus this many.
const SCAN_BUDGET_MIN_BYTES: usize = 1 << 20;

/// What [`parse_block_with_warnings`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedBlock {
    /// The envelopes, in order of appearance.
    pub envelopes: Vec<Envelope>,
    /// What was refused or repaired, in order of position.
    pub warnings: Vec<EnvelopeWarning>,
}

/// A candidate that was refused, or a repair made to an accepted envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct EnvelopeWarning {
    /// 1-based line of the offending construct in the parsed text.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What kind of problem.
    pub kind: EnvelopeWarningKind,
    /// A sentence for a human, naming the construct.
    pub message: String,
}

/// The kinds of [`EnvelopeWarning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EnvelopeWarningKind {
    /// Refused: the candidate is not well-formed XML.
    Malformed,
    /// Refused: the root tag has attributes, which neither dialect writes.
    RootAttributes,
    /// Refused: a field appears twice, so the candidate is ambiguous.
    RepeatedField,
    /// Refused: markup inside a field other than `<result>` would lose text.
    MarkupInField,
    /// Refused: a `<task-notification>` outside `<result>` inside the candidate.
    NestedEnvelope,
    /// Refused: no task id, or a blank one.
    MissingTaskId,
    /// Refused: no status, or one outside `completed|failed|killed|timeout`.
    BadStatus,
    /// Refused: a usage count that is not a number.
    BadCount,
    /// Refused: `<worktree>` without its path or branch.
    IncompleteWorktree,
    /// Refused: earlier candidates that never closed used up the bytes the scan of
    /// one text may read (16 times the text, plus 1 MiB).
    ScanBudgetExhausted,
    /// Accepted: a `<task-notification>` inside `<result>` was read as text.
    NestedEnvelopeAsText,
    /// Accepted: a character reference that names no XML character was kept as written.
    InvalidCharacterReference,
    /// Accepted: a usage count above `u64::MAX` was read as `u64::MAX`.
    CountSaturated,
    /// Accepted: an unknown element with child elements was kept as its text only.
    UnknownElementFlattened,
    /// Accepted: an unknown element whose name the codec cannot write back, or one
    /// inside `<worktree>`, was dropped.
    UnknownElementDropped,
    /// Internal: `<task-notification` is the start of a longer tag name.
    #[doc(hidden)]
    NotAStartTag,
}

/// A warning found at a byte offset of a candidate, before it is placed in the text.
struct Note {
    offset_bytes: usize,
    kind: EnvelopeWarningKind,
    message: String,
}

impl Note {
    fn new(offset_bytes: usize, kind: EnvelopeWarningKind, message: impl Into<String>) -> Note {
        Note {
            offset_bytes,
            kind,
            message: message.into(),
        }
    }

    /// The warning, with its position in `text`, whose candidate starts at `start`.
    fn at(self, text: &str, start: usize) -> EnvelopeWarning {
        let offset = (start + self.offset_bytes).min(text.len());
        let (line, column) = line_column(text, offset);
        EnvelopeWarning {
            line,
            column,
            kind: self.kind,
            message: self.message,
        }
    }
}

/// The 1-based line and character column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// An element whose text the envelope keeps.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    TaskId,
    ToolUseId,
    OutputFile,
    Status,
    Summary,
    Note,
    Result,
    TotalTokens,
    SubagentTokens,
    ToolUses,
    DurationMs,
    WorktreePath,
    WorktreeBranch,
    /// An element the envelope does not define, kept in [`Envelope::extra`] under
    /// its key (`name`, or `usage.name` inside `<usage>`).
    Extra(String),
    /// An element the envelope does not define whose name it could not write back
    /// (see [`is_element_name`]), or an unknown one inside `<worktree>`: dropped, with
    /// a warning.
    Dropped(String),
}

impl Field {
    /// The field at element `path` (outermost first, root excluded). `None` for a
    /// container (`usage`, `worktree`) or an element below an unknown one.
    fn at(path: &[String]) -> Option<Field> {
        match path {
            [name] => match name.as_str() {
                "task-id" => Some(Field::TaskId),
                "tool-use-id" => Some(Field::ToolUseId),
                "output-file" => Some(Field::OutputFile),
                "status" => Some(Field::Status),
                "summary" => Some(Field::Summary),
                "note" => Some(Field::Note),
                "result" => Some(Field::Result),
                "usage" | "worktree" => None,
                _ if is_element_name(name) => Some(Field::Extra(name.clone())),
                _ => Some(Field::Dropped(name.clone())),
            },
            [parent, name] => match (parent.as_str(), name.as_str()) {
                ("usage", "total_tokens") => Some(Field::TotalTokens),
                ("usage", "subagent_tokens") => Some(Field::SubagentTokens),
                ("usage", "tool_uses") => Some(Field::ToolUses),
                ("usage", "duration_ms") => Some(Field::DurationMs),
                ("worktree", "path") => Some(Field::WorktreePath),
                ("worktree", "branch") => Some(Field::WorktreeBranch),
                ("usage", _) if is_element_name(name) => {
                    Some(Field::Extra(format!("usage.{name}")))
                }
                ("usage" | "worktree", _) => Some(Field::Dropped(format!("{parent}><{name}"))),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The fields of one candidate, as read.
#[derive(Default)]
struct Fields {
    task_id: Option<String>,
    tool_use_id: Option<String>,
    output_file: Option<String>,
    status: Option<String>,
    summary: Option<String>,
    note: Option<String>,
    result: Option<String>,
    usage_seen: bool,
    total_tokens: Option<String>,
    subagent_tokens: Option<String>,
    tool_uses: Option<String>,
    duration_ms: Option<String>,
    worktree_seen: bool,
    worktree_path: Option<String>,
    worktree_branch: Option<String>,
    extra: BTreeMap<String, String>,
    /// Where each field's start tag is, in bytes, for warnings about its body.
    offsets: BTreeMap<Field, usize>,
}

impl Fields {
    fn slot(&mut self, field: &Field) -> Option<&mut Option<String>> {
        Some(match field {
            Field::TaskId => &mut self.task_id,
            Field::ToolUseId => &mut self.tool_use_id,
            Field::OutputFile => &mut self.output_file,
            Field::Status => &mut self.status,
            Field::Summary => &mut self.summary,
            Field::Note => &mut self.note,
            Field::Result => &mut self.result,
            Field::TotalTokens => &mut self.total_tokens,
            Field::SubagentTokens => &mut self.subagent_tokens,
            Field::ToolUses => &mut self.tool_uses,
            Field::DurationMs => &mut self.duration_ms,
            Field::WorktreePath => &mut self.worktree_path,
            Field::WorktreeBranch => &mut self.worktree_branch,
            Field::Extra(_) | Field::Dropped(_) => return None,
        })
    }

    /// Marks element `path` as opened. Returns false if it was already seen: a
    /// repeated field makes the candidate ambiguous, so it is no envelope.
    fn open(&mut self, path: &[String]) -> bool {
        match path {
            [name] if name == "usage" => !std::mem::replace(&mut self.usage_seen, true),
            [name] if name == "worktree" => !std::mem::replace(&mut self.worktree_seen, true),
            _ => match Field::at(path) {
                Some(Field::Extra(key)) => self.extra.insert(key, String::new()).is_none(),
                Some(Field::Dropped(_)) => true,
                Some(field) => {
                    let slot = self.slot(&field).expect("a known field has a slot");
                    slot.replace(String::new()).is_none()
                }
                None => true,
            },
        }
    }

    /// Appends `text` to `field`'s body, if the reader is inside a field.
    fn push(&mut self, field: Option<&Field>, text: &str) {
        let body = match field {
            None | Some(Field::Dropped(_)) => return,
            Some(Field::Extra(key)) => self.extra.get_mut(key),
            Some(field) => self
                .slot(field)
                .and_then(Option::as_mut)
                .map(|body| body as &mut String),
        };
        body.expect("a field is opened before its text")
            .push_str(text);
    }

    fn into_envelope(mut self, notes: &mut Vec<Note>) -> Result<Envelope, Note> {
        use EnvelopeWarningKind as Kind;
        let refuse = |kind, message: &str| Note::new(0, kind, message);
        let task_id = self
            .task_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| refuse(Kind::MissingTaskId, "no <task-id>, or a blank one"))?
            .to_owned();
        let status_text = self
            .status
            .as_deref()
            .ok_or_else(|| refuse(Kind::BadStatus, "no <status>"))?;
        let status = EnvelopeStatus::parse(status_text.trim()).ok_or_else(|| {
            refuse(
                Kind::BadStatus,
                &format!(
                    "status {:?} is not one of completed|failed|killed|timeout",
                    status_text.trim()
                ),
            )
        })?;
        let usage = if self.usage_seen {
            // A newer dialect writes `subagent_tokens` and no `total_tokens`; when both
            // are present, `subagent_tokens` is kept as an extra element.
            let total = match (self.total_tokens.take(), self.subagent_tokens.take()) {
                (None, Some(subagent)) => Some((Field::SubagentTokens, subagent)),
                (total, subagent) => {
                    if let Some(subagent) = subagent {
                        self.extra
                            .insert("usage.subagent_tokens".to_owned(), subagent);
                    }
                    total.map(|total| (Field::TotalTokens, total))
                }
            };
            let (total_field, total_text) = match total {
                Some((field, text)) => (field, Some(text)),
                None => (Field::TotalTokens, None),
            };
            let offsets = &self.offsets;
            let at = |field: &Field| offsets.get(field).copied().unwrap_or(0);
            Some(EnvelopeUsage {
                total_tokens: parse_count(&total_field, total_text, at(&total_field), notes)?,
                tool_uses: parse_count(
                    &Field::ToolUses,
                    self.tool_uses,
                    at(&Field::ToolUses),
                    notes,
                )?,
                duration_ms: parse_count(
                    &Field::DurationMs,
                    self.duration_ms,
                    at(&Field::DurationMs),
                    notes,
                )?,
            })
        } else {
            None
        };
        let worktree = if self.worktree_seen {
            match (self.worktree_path, self.worktree_branch) {
                (Some(path), Some(branch)) => Some(EnvelopeWorktree { path, branch }),
                _ => {
                    return Err(refuse(
                        Kind::IncompleteWorktree,
                        "<worktree> lacks its <path> or <branch>",
                    ))
                }
            }
        } else {
            None
        };
        Ok(Envelope {
            task_id,
            tool_use_id: self.tool_use_id.map(|id| id.trim().to_owned()),
            output_file: self.output_file,
            status,
            summary: self.summary.unwrap_or_default(),
            note: self.note,
            result: self.result,
            usage,
            worktree,
            extra: self.extra,
        })
    }
}

/// A missing count reads as zero; one that is not a number spoils the envelope; one
/// above `u64::MAX` reads as `u64::MAX`, with a warning.
fn parse_count(
    field: &Field,
    text: Option<String>,
    offset: usize,
    notes: &mut Vec<Note>,
) -> Result<u64, Note> {
    let Some(text) = text else { return Ok(0) };
    let name = match field {
        Field::SubagentTokens => "subagent_tokens",
        Field::ToolUses => "tool_uses",
        Field::DurationMs => "duration_ms",
        _ => "total_tokens",
    };
    let digits = text.trim();
    if let Ok(count) = digits.parse() {
        return Ok(count);
    }
    let all_digits = !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit());
    if all_digits {
        notes.push(Note::new(
            offset,
            EnvelopeWarningKind::CountSaturated,
            format!("usage {name} {digits} is above {}; read as that", u64::MAX),
        ));
        return Ok(u64::MAX);
    }
    Err(Note::new(
        offset,
        EnvelopeWarningKind::BadCount,
        format!("usage {name} {digits:?} is not a whole number"),
    ))
}

/// Reads the candidate at the start of `text`. Returns the envelope and how many
/// bytes of `text` it spans, or why it is not an envelope. Repairs made to an accepted
/// envelope are added to `notes`.
/// Also returns how many bytes of `text` were read, whatever the outcome.
fn read_candidate(text: &str, notes: &mut Vec<Note>) -> (Result<(Envelope, usize), Note>, usize) {
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.allow_dangling_amp = true;
    config.check_end_names = true;
    config.trim_text(false);
    let outcome = read_events(&mut reader, text, notes);
    let scanned_bytes = usize::try_from(reader.buffer_position())
        .unwrap_or(text.len())
        .min(text.len());
    (outcome, scanned_bytes)
}

/// The events of the candidate at the start of `text`, read by `reader`.
fn read_events(
    reader: &mut Reader<&[u8]>,
    text: &str,
    notes: &mut Vec<Note>,
) -> Result<(Envelope, usize), Note> {
    use EnvelopeWarningKind as Kind;
    let position = |reader: &Reader<&[u8]>| usize::try_from(reader.buffer_position()).unwrap_or(0);
    let malformed = |reader: &Reader<&[u8]>, error: quick_xml::Error| {
        let at = usize::try_from(reader.error_position()).unwrap_or(0);
        Note::new(
            at,
            Kind::Malformed,
            format!(
                "<task-notification> is not well-formed XML ({error}); not read as an envelope"
            ),
        )
    };

    match reader.read_event() {
        Ok(Event::Start(start)) if start.name().as_ref() == ROOT => {
            // Neither dialect writes attributes on the root. Refusing them matters: a
            // quote in a stray `<task-notification '` would otherwise open an attribute
            // value that hides the real envelopes after it, up to the next quote.
            if !start.attributes_raw().trim_ascii().is_empty() {
                return Err(Note::new(
                    0,
                    Kind::RootAttributes,
                    "<task-notification> has attributes, which no dialect writes; \
                     not read as an envelope",
                ));
            }
        }
        Ok(Event::Start(_) | Event::Empty(_)) => {
            return Err(Note::new(0, Kind::NotAStartTag, ""));
        }
        Ok(_) => {
            return Err(Note::new(
                0,
                Kind::Malformed,
                "<task-notification> is not a tag",
            ))
        }
        Err(error) => return Err(malformed(reader, error)),
    }
    let mut fields = Fields::default();
    let mut path: Vec<String> = Vec::new();
    // The field whose body the reader is in, recomputed only when `path` changes.
    let mut active: Option<Field> = None;
    // Elements open inside `<result>`: its markup is text, kept as written.
    let mut result_depth = 0usize;
    // An unknown element's children: flattened to their text.
    let mut extra_depth = 0usize;
    loop {
        let before = position(reader);
        let event = reader
            .read_event()
            .map_err(|error| malformed(reader, error))?;
        let after = position(reader);
        let raw = &text[before.min(after)..after];
        let in_result = active == Some(Field::Result);
        let extra_key = match &active {
            Some(Field::Extra(key) | Field::Dropped(key)) => Some(key.clone()),
            _ => None,
        };
        let in_extra = extra_key.is_some();
        let is_empty_tag = matches!(event, Event::Empty(_));
        match event {
            Event::Start(start) | Event::Empty(start) if in_result => {
                if start.name().as_ref() == ROOT {
                    notes.push(Note::new(
                        before,
                        Kind::NestedEnvelopeAsText,
                        "a <task-notification> inside <result> is the worker's text, \
                         not an envelope",
                    ));
                }
                if !is_empty_tag {
                    result_depth += 1;
                }
                fields.push(active.as_ref(), raw);
            }
            Event::End(_) if in_result && result_depth > 0 => {
                result_depth -= 1;
                fields.push(active.as_ref(), raw);
            }
            Event::Start(start) | Event::Empty(start) if in_extra => {
                if extra_depth == 0 && matches!(active, Some(Field::Extra(_))) {
                    let key = extra_key.unwrap_or_default();
                    notes.push(Note::new(
                        before,
                        Kind::UnknownElementFlattened,
                        format!("unknown element <{key}> has child elements; kept as its text"),
                    ));
                }
                if start.name().as_ref() == ROOT {
                    return Err(Note::new(
                        before,
                        Kind::NestedEnvelope,
                        "a <task-notification> nested outside <result>; not read as an envelope",
                    ));
                }
                if !is_empty_tag {
                    extra_depth += 1;
                }
            }
            Event::End(_) if in_extra && extra_depth > 0 => extra_depth -= 1,
            Event::Start(start) => {
                let name = start.name().as_ref().to_owned();
                if start.name().as_ref() == ROOT {
                    return Err(Note::new(
                        before,
                        Kind::NestedEnvelope,
                        "a <task-notification> nested outside <result>; not read as an envelope",
                    ));
                }
                if active.is_some() {
                    return Err(Note::new(
                        before,
                        Kind::MarkupInField,
                        format!("markup <{name}> inside a field; not read as an envelope"),
                    ));
                }
                path.push(name);
                if !fields.open(&path) {
                    return Err(repeated(before, &path));
                }
                active = Field::at(&path);
                if let Some(field) = &active {
                    fields.offsets.insert(field.clone(), before);
                }
                if let Some(Field::Dropped(name)) = &active {
                    notes.push(dropped(before, name));
                }
            }
            Event::Empty(start) => {
                let name = start.name().as_ref().to_owned();
                if start.name().as_ref() == ROOT || active.is_some() {
                    return Err(Note::new(
                        before,
                        Kind::MarkupInField,
                        format!("markup <{name}/> inside a field; not read as an envelope"),
                    ));
                }
                path.push(name);
                let fresh = fields.open(&path);
                if !fresh {
                    return Err(repeated(before, &path));
                }
                if let Some(Field::Dropped(name)) = Field::at(&path) {
                    notes.push(dropped(before, &name));
                }
                path.pop();
            }
            Event::End(_) => {
                // check_end_names guarantees the end tag matches the open element.
                if path.pop().is_none() {
                    let envelope = fields.into_envelope(notes)?;
                    return Ok((envelope, after));
                }
                active = Field::at(&path);
            }
            Event::Text(body) => fields.push(active.as_ref(), &body),
            Event::CData(body) => fields.push(active.as_ref(), &body),
            Event::GeneralRef(reference) => {
                push_reference(&mut fields, active.as_ref(), &reference, before, notes)
            }
            // In `<result>` these are the worker's text too.
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) | Event::DocType(_) if in_result => {
                fields.push(active.as_ref(), raw)
            }
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) | Event::DocType(_) => {}
            Event::Eof => {
                return Err(Note::new(
                    0,
                    Kind::Malformed,
                    "<task-notification> has no matching end tag; not read as an envelope",
                ))
            }
        }
    }
}

fn dropped(offset: usize, name: &str) -> Note {
    Note::new(
        offset,
        EnvelopeWarningKind::UnknownElementDropped,
        format!("unknown element <{name}> has a name this codec cannot keep; dropped"),
    )
}

/// Whether `name` is an element name the codec keeps and writes back: an ASCII letter
/// or `_` first, then letters, digits, `_` and `-`, not starting with `xml` (reserved).
/// Dots are left out, since `usage.` keys use one.
pub(crate) fn is_element_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_');
    first_ok
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
        && !name
            .get(..3)
            .is_some_and(|start| start.eq_ignore_ascii_case("xml"))
}

fn repeated(offset: usize, path: &[String]) -> Note {
    Note::new(
        offset,
        EnvelopeWarningKind::RepeatedField,
        format!(
            "<{}> appears twice; not read as an envelope",
            path.join("><")
        ),
    )
}

/// Appends the text a reference stands for: the five predefined entities and
/// character references resolve; any other entity is kept as written, since a raw
/// Claude Code body may contain text such as `&nbsp;` that was never meant as markup.
/// A character reference that names no XML character (`&#0;`, `&#xD800;`) is kept as
/// written too, with a warning.
fn push_reference(
    fields: &mut Fields,
    active: Option<&Field>,
    reference: &BytesRef<'_>,
    offset: usize,
    notes: &mut Vec<Note>,
) {
    let name: &str = reference;
    if name.starts_with('#') {
        match reference.resolve_char_ref() {
            Ok(Some(character)) => fields.push(active, character.encode_utf8(&mut [0; 4])),
            _ => {
                notes.push(Note::new(
                    offset,
                    EnvelopeWarningKind::InvalidCharacterReference,
                    format!("&{name}; names no XML character; kept as written"),
                ));
                fields.push(active, &format!("&{name};"));
            }
        }
    } else if let Some(text) = quick_xml::escape::resolve_xml_entity(name) {
        // Named explicitly: `resolve_predefined_entity` resolves HTML's entities
        // too once any crate in the build turns on quick-xml's `escape-html`.
        fields.push(active, text);
    } else {
        fields.push(active, &format!("&{name};"));
    }
}
