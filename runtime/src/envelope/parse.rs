//! Finding and reading envelopes in text.
//!
//! Text around and between envelopes may be anything (prose, code, broken markup),
//! so the text as a whole is not parsed as XML. Instead every `<task-notification>`
//! start tag is a candidate, and quick-xml reads from that tag to its matching end
//! tag. A candidate that is not well-formed, whose start tag has attributes, that
//! nests another envelope, repeats a field, lacks a task id, or has a status outside
//! `completed|failed|killed|timeout` is not an envelope, and the scan moves on.
//!
//! Claude Code interpolates raw text into its envelopes, so bodies such as
//! `cd web && make` (a bare `&`) are read as written, and unknown entities are kept
//! verbatim. A raw body containing markup (`</result>`) is not well-formed and is
//! refused, as it should be.

use quick_xml::events::{BytesRef, Event};
use quick_xml::Reader;

use super::{Envelope, EnvelopeStatus, EnvelopeUsage, EnvelopeWorktree};

const START_TAG: &str = "<task-notification";
const ROOT: &str = "task-notification";

/// Every envelope in `text`, in order of appearance.
pub fn parse_block(text: &str) -> Vec<Envelope> {
    let mut envelopes = Vec::new();
    let mut cursor = 0;
    while let Some(found) = text[cursor..].find(START_TAG) {
        let start = cursor + found;
        match read_candidate(&text[start..]) {
            Some((envelope, consumed_bytes)) => {
                envelopes.push(envelope);
                cursor = start + consumed_bytes;
            }
            None => cursor = start + START_TAG.len(),
        }
    }
    envelopes
}

/// An element whose text the envelope keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    TaskId,
    ToolUseId,
    OutputFile,
    Status,
    Summary,
    Result,
    TotalTokens,
    ToolUses,
    DurationMs,
    WorktreePath,
    WorktreeBranch,
}

impl Field {
    /// The field at element `path` (outermost first, root excluded). `None` for
    /// elements the envelope does not define, whose text is ignored.
    fn at(path: &[String]) -> Option<Field> {
        match path {
            [name] => match name.as_str() {
                "task-id" => Some(Field::TaskId),
                "tool-use-id" => Some(Field::ToolUseId),
                "output-file" => Some(Field::OutputFile),
                "status" => Some(Field::Status),
                "summary" => Some(Field::Summary),
                "result" => Some(Field::Result),
                _ => None,
            },
            [parent, name] => match (parent.as_str(), name.as_str()) {
                ("usage", "total_tokens") => Some(Field::TotalTokens),
                ("usage", "tool_uses") => Some(Field::ToolUses),
                ("usage", "duration_ms") => Some(Field::DurationMs),
                ("worktree", "path") => Some(Field::WorktreePath),
                ("worktree", "branch") => Some(Field::WorktreeBranch),
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
    result: Option<String>,
    usage_seen: bool,
    total_tokens: Option<String>,
    tool_uses: Option<String>,
    duration_ms: Option<String>,
    worktree_seen: bool,
    worktree_path: Option<String>,
    worktree_branch: Option<String>,
}

impl Fields {
    fn slot(&mut self, field: Field) -> &mut Option<String> {
        match field {
            Field::TaskId => &mut self.task_id,
            Field::ToolUseId => &mut self.tool_use_id,
            Field::OutputFile => &mut self.output_file,
            Field::Status => &mut self.status,
            Field::Summary => &mut self.summary,
            Field::Result => &mut self.result,
            Field::TotalTokens => &mut self.total_tokens,
            Field::ToolUses => &mut self.tool_uses,
            Field::DurationMs => &mut self.duration_ms,
            Field::WorktreePath => &mut self.worktree_path,
            Field::WorktreeBranch => &mut self.worktree_branch,
        }
    }

    /// Marks element `path` as opened. Returns false if it was already seen: a
    /// repeated field makes the candidate ambiguous, so it is no envelope.
    fn open(&mut self, path: &[String]) -> bool {
        match path {
            [name] if name == "usage" => !std::mem::replace(&mut self.usage_seen, true),
            [name] if name == "worktree" => !std::mem::replace(&mut self.worktree_seen, true),
            _ => match Field::at(path) {
                Some(field) => {
                    let slot = self.slot(field);
                    slot.replace(String::new()).is_none()
                }
                None => true,
            },
        }
    }

    /// Appends `text` to `field`'s body, if the reader is inside a field.
    fn push(&mut self, field: Option<Field>, text: &str) {
        if let Some(field) = field {
            self.slot(field)
                .as_mut()
                .expect("a field is opened before its text")
                .push_str(text);
        }
    }

    fn into_envelope(self) -> Option<Envelope> {
        let task_id = self.task_id?.trim().to_owned();
        if task_id.is_empty() {
            return None;
        }
        let status = EnvelopeStatus::parse(self.status?.trim())?;
        let usage = if self.usage_seen {
            Some(EnvelopeUsage {
                total_tokens: parse_count(self.total_tokens)?,
                tool_uses: parse_count(self.tool_uses)?,
                duration_ms: parse_count(self.duration_ms)?,
            })
        } else {
            None
        };
        let worktree = if self.worktree_seen {
            Some(EnvelopeWorktree {
                path: self.worktree_path?,
                branch: self.worktree_branch?,
            })
        } else {
            None
        };
        Some(Envelope {
            task_id,
            tool_use_id: self.tool_use_id.map(|id| id.trim().to_owned()),
            output_file: self.output_file,
            status,
            summary: self.summary.unwrap_or_default(),
            result: self.result,
            usage,
            worktree,
        })
    }
}

/// A missing count reads as zero; one that is not a number spoils the envelope.
fn parse_count(text: Option<String>) -> Option<u64> {
    match text {
        None => Some(0),
        Some(text) => text.trim().parse().ok(),
    }
}

/// Reads the candidate at the start of `text`. Returns the envelope and how many
/// bytes of `text` it spans, or `None` if it is not an envelope.
fn read_candidate(text: &str) -> Option<(Envelope, usize)> {
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.allow_dangling_amp = true;
    config.check_end_names = true;
    config.trim_text(false);

    match reader.read_event().ok()? {
        // Neither dialect writes attributes on the root. Refusing them matters: a quote
        // in a stray `<task-notification '` would otherwise open an attribute value that
        // hides the real envelopes after it, up to the next quote.
        Event::Start(start)
            if start.name().as_ref() == ROOT && start.attributes_raw().trim().is_empty() => {}
        _ => return None,
    }
    let mut fields = Fields::default();
    let mut path: Vec<String> = Vec::new();
    // The field whose body the reader is in, recomputed only when `path` changes.
    let mut active: Option<Field> = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(start) => {
                let name = start.name().as_ref().to_owned();
                // An envelope inside an envelope is a forgery attempt, and markup inside
                // a field's body would lose text: neither is an envelope.
                if name == ROOT || active.is_some() {
                    return None;
                }
                path.push(name);
                if !fields.open(&path) {
                    return None;
                }
                active = Field::at(&path);
            }
            Event::Empty(start) => {
                if start.name().as_ref() == ROOT || active.is_some() {
                    return None;
                }
                path.push(start.name().as_ref().to_owned());
                let fresh = fields.open(&path);
                path.pop();
                if !fresh {
                    return None;
                }
            }
            Event::End(_) => {
                // check_end_names guarantees the end tag matches the open element.
                if path.pop().is_none() {
                    let consumed = usize::try_from(reader.buffer_position()).ok()?;
                    return fields.into_envelope().map(|envelope| (envelope, consumed));
                }
                active = Field::at(&path);
            }
            Event::Text(body) => fields.push(active, &body.into_inner()),
            Event::CData(body) => fields.push(active, &body.into_inner()),
            Event::GeneralRef(reference) => push_reference(&mut fields, active, &reference)?,
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) | Event::DocType(_) => {}
            Event::Eof => return None,
        }
    }
}

/// Appends the text a reference stands for: the five predefined entities and
/// character references resolve; any other entity is kept as written, since a raw
/// Claude Code body may contain text such as `&nbsp;` that was never meant as markup.
/// A malformed character reference spoils the candidate.
fn push_reference(
    fields: &mut Fields,
    active: Option<Field>,
    reference: &BytesRef<'_>,
) -> Option<()> {
    let name: &str = reference;
    if name.starts_with('#') {
        let character = reference.resolve_char_ref().ok()??;
        fields.push(active, character.encode_utf8(&mut [0; 4]));
    } else if let Some(text) = quick_xml::escape::resolve_xml_entity(name) {
        // Named explicitly: `resolve_predefined_entity` resolves HTML's entities
        // too once any crate in the build turns on quick-xml's `escape-html`.
        fields.push(active, text);
    } else {
        fields.push(active, "&");
        fields.push(active, name);
        fields.push(active, ";");
    }
    Some(())
}
