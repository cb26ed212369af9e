//! Rendering an envelope as XML.
//!
//! [`render`] is the runtime's: it renders whatever the runtime built. [`render_checked`]
//! and [`render_to`] are for envelopes from outside (`coordsim envelope render`): they
//! refuse, with a [`RenderError`], an envelope whose XML would not parse back to it, so
//! that for every envelope they accept, `parse_block(render(e)) == [e]` (with the
//! dialect's status word, see [`Dialect::wire_status`]). [`render_to`] writes as it
//! goes, so rendering holds no second copy of a large result.

use std::fmt::Write;

use super::parse::is_element_name;
use super::{Dialect, Envelope};

/// Renders `envelope` in `dialect`: one element per line, every body escaped
/// (`& < > " '` and carriage returns), optional elements only when present.
pub fn render(envelope: &Envelope, dialect: Dialect) -> String {
    let mut xml = String::with_capacity(256 + envelope.result.as_ref().map_or(0, String::len));
    write_with(&mut xml, envelope, dialect, ResultBody::Escaped)
        .expect("writing to a String never fails");
    xml
}

/// [`render`], after checking that the XML parses back to `envelope`.
pub fn render_checked(envelope: &Envelope, dialect: Dialect) -> Result<String, RenderError> {
    check(envelope)?;
    Ok(render(envelope, dialect))
}

/// Writes `envelope` in `dialect` to `out` as [`render`] would, after checking that
/// the XML parses back to it. Nothing is written if the check fails.
pub fn render_to<W: std::io::Write>(
    out: &mut W,
    envelope: &Envelope,
    dialect: Dialect,
) -> Result<(), RenderError> {
    check(envelope)?;
    let mut adapter = IoAdapter { out, error: None };
    match write_with(&mut adapter, envelope, dialect, ResultBody::Escaped) {
        Ok(()) => Ok(()),
        Err(std::fmt::Error) => {
            Err(RenderError::Write(adapter.error.unwrap_or_else(|| {
                std::io::Error::other("formatting failed")
            })))
        }
    }
}

/// Why an envelope cannot be rendered so that it parses back to itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// `task_id` is empty or blank: the parser refuses such an envelope.
    #[error("task_id is empty; an envelope without a task id does not parse back")]
    EmptyTaskId,
    /// An id has whitespace at an end, which the parser trims.
    #[error("{field} {value:?} has whitespace at an end, which parsing trims")]
    UntrimmedId {
        /// `task_id` or `tool_use_id`.
        field: &'static str,
        /// The id as given.
        value: String,
    },
    /// An `extra` key is not an XML element name, or names an element the codec
    /// defines.
    #[error("extra element {key:?} is not an element name this codec can write back")]
    BadExtraName {
        /// The key as given.
        key: String,
    },
    /// An `extra` key `usage.<name>` on an envelope without `usage`.
    #[error("extra element {key:?} belongs in <usage>, and the envelope has no usage")]
    ExtraWithoutUsage {
        /// The key as given.
        key: String,
    },
    /// Writing the XML failed.
    #[error("cannot write the envelope: {0}")]
    Write(#[source] std::io::Error),
}

/// The elements the codec defines at the top level and inside `<usage>`: an extra
/// element by one of these names would be read back as that field.
const TOP_LEVEL_NAMES: [&str; 10] = [
    "task-id",
    "tool-use-id",
    "output-file",
    "status",
    "summary",
    "note",
    "result",
    "usage",
    "worktree",
    "task-notification",
];
const USAGE_NAMES: [&str; 4] = [
    "total_tokens",
    "subagent_tokens",
    "tool_uses",
    "duration_ms",
];

fn check(envelope: &Envelope) -> Result<(), RenderError> {
    if envelope.task_id.trim().is_empty() {
        return Err(RenderError::EmptyTaskId);
    }
    let ids = [
        ("task_id", Some(&envelope.task_id)),
        ("tool_use_id", envelope.tool_use_id.as_ref()),
    ];
    for (field, value) in ids {
        if let Some(value) = value {
            if value.trim() != value {
                return Err(RenderError::UntrimmedId {
                    field,
                    value: value.clone(),
                });
            }
        }
    }
    for key in envelope.extra.keys() {
        let bad = || RenderError::BadExtraName { key: key.clone() };
        match key.strip_prefix("usage.") {
            Some(name) => {
                if !is_element_name(name) || USAGE_NAMES.contains(&name) {
                    return Err(bad());
                }
                if envelope.usage.is_none() {
                    return Err(RenderError::ExtraWithoutUsage { key: key.clone() });
                }
            }
            None => {
                if !is_element_name(key) || TOP_LEVEL_NAMES.contains(&key.as_str()) {
                    return Err(bad());
                }
            }
        }
    }
    Ok(())
}

/// Renders `envelope` as Claude Code does: like [`render`], except that the result is
/// interpolated raw, so a result holding `</result>` or a whole `<task-notification>`
/// breaks out of its element. A forgery vector (PROTOCOL.md §3), kept only for the
/// `raw-envelope-result` defect.
#[cfg(feature = "defects")]
pub fn render_raw_result(envelope: &Envelope, dialect: Dialect) -> String {
    let mut xml = String::with_capacity(256 + envelope.result.as_ref().map_or(0, String::len));
    write_with(&mut xml, envelope, dialect, ResultBody::Raw)
        .expect("writing to a String never fails");
    xml
}

/// How the result's body is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ResultBody {
    Escaped,
    #[cfg(feature = "defects")]
    Raw,
}

fn write_with<W: Write>(
    xml: &mut W,
    envelope: &Envelope,
    dialect: Dialect,
    result_body: ResultBody,
) -> std::fmt::Result {
    xml.write_str("<task-notification>\n")?;
    element(xml, "task-id", &envelope.task_id)?;
    if let Some(tool_use_id) = &envelope.tool_use_id {
        element(xml, "tool-use-id", tool_use_id)?;
    }
    if let Some(output_file) = &envelope.output_file {
        element(xml, "output-file", output_file)?;
    }
    element(xml, "status", dialect.wire_status(envelope.status).as_str())?;
    element(xml, "summary", &envelope.summary)?;
    if let Some(note) = &envelope.note {
        element(xml, "note", note)?;
    }
    match (&envelope.result, result_body) {
        (Some(result), ResultBody::Escaped) => element(xml, "result", result)?,
        // Defect `raw-envelope-result`: the body goes in unescaped.
        #[cfg(feature = "defects")]
        (Some(result), ResultBody::Raw) => writeln!(xml, "<result>{result}</result>")?,
        (None, _) => {}
    }
    if let Some(usage) = &envelope.usage {
        // Numbers need no escaping.
        write!(
            xml,
            "<usage><total_tokens>{}</total_tokens><tool_uses>{}</tool_uses>\
             <duration_ms>{}</duration_ms>",
            usage.total_tokens, usage.tool_uses, usage.duration_ms
        )?;
        for (key, body) in &envelope.extra {
            if let Some(name) = key.strip_prefix("usage.") {
                write!(xml, "<{name}>")?;
                escape_to(xml, body)?;
                write!(xml, "</{name}>")?;
            }
        }
        xml.write_str("</usage>\n")?;
    }
    if let Some(worktree) = &envelope.worktree {
        xml.write_str("<worktree><path>")?;
        escape_to(xml, &worktree.path)?;
        xml.write_str("</path><branch>")?;
        escape_to(xml, &worktree.branch)?;
        xml.write_str("</branch></worktree>\n")?;
    }
    for (key, body) in &envelope.extra {
        if !key.starts_with("usage.") {
            element(xml, key, body)?;
        }
    }
    xml.write_str("</task-notification>")
}

fn element<W: Write>(xml: &mut W, name: &str, body: &str) -> std::fmt::Result {
    write!(xml, "<{name}>")?;
    escape_to(xml, body)?;
    writeln!(xml, "</{name}>")
}

/// Writes `text` escaped as `quick_xml::escape::escape` escapes it (`& < > " '` and
/// carriage returns), without building an escaped copy first.
fn escape_to<W: Write>(xml: &mut W, text: &str) -> std::fmt::Result {
    let mut from = 0;
    for (at, byte) in text.bytes().enumerate() {
        let entity = match byte {
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'&' => "&amp;",
            b'\'' => "&apos;",
            b'"' => "&quot;",
            b'\r' => "&#13;",
            _ => continue,
        };
        xml.write_str(&text[from..at])?;
        xml.write_str(entity)?;
        from = at + 1;
    }
    xml.write_str(&text[from..])
}

/// A `fmt::Write` over an `io::Write`, keeping the I/O error that `fmt::Error` drops.
struct IoAdapter<'w, W: std::io::Write> {
    out: &'w mut W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> Write for IoAdapter<'_, W> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.out.write_all(text.as_bytes()).map_err(|error| {
            self.error = Some(error);
            std::fmt::Error
        })
    }
}

#[cfg(test)]
mod tests {
    use super::escape_to;
    use proptest::prelude::*;

    proptest! {
        /// Escaping while writing gives exactly what quick-xml's `escape` gives, so the
        /// wire form (and every trace that holds it) is unchanged.
        #[test]
        fn escape_to_writes_what_quick_xml_escape_returns(text in any::<String>()) {
            let mut written = String::new();
            escape_to(&mut written, &text).unwrap();
            prop_assert_eq!(written, quick_xml::escape::escape(text.as_str()).into_owned());
        }
    }
}
