//! Rendering an envelope as XML.

use quick_xml::escape::escape;
use std::fmt::Write;

use super::{Dialect, Envelope};

/// Renders `envelope` in `dialect`: one element per line, every body escaped
/// (`& < > " '` and carriage returns), optional elements only when present.
pub fn render(envelope: &Envelope, dialect: Dialect) -> String {
    render_with(envelope, dialect, ResultBody::Escaped)
}

/// Renders `envelope` as Claude Code does: like [`render`], except that the result is
/// interpolated raw, so a result holding `</result>` or a whole `<task-notification>`
/// breaks out of its element. A forgery vector (PROTOCOL.md §3), kept only for the
/// `raw-envelope-result` defect.
#[cfg(feature = "defects")]
pub fn render_raw_result(envelope: &Envelope, dialect: Dialect) -> String {
    render_with(envelope, dialect, ResultBody::Raw)
}

/// How the result's body is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ResultBody {
    Escaped,
    #[cfg(feature = "defects")]
    Raw,
}

fn render_with(envelope: &Envelope, dialect: Dialect, result_body: ResultBody) -> String {
    let mut xml = String::with_capacity(256 + envelope.result.as_ref().map_or(0, String::len));
    xml.push_str("<task-notification>\n");
    element(&mut xml, "task-id", &envelope.task_id);
    if let Some(tool_use_id) = &envelope.tool_use_id {
        element(&mut xml, "tool-use-id", tool_use_id);
    }
    if let Some(output_file) = &envelope.output_file {
        element(&mut xml, "output-file", output_file);
    }
    element(
        &mut xml,
        "status",
        dialect.wire_status(envelope.status).as_str(),
    );
    element(&mut xml, "summary", &envelope.summary);
    match (&envelope.result, result_body) {
        (Some(result), ResultBody::Escaped) => element(&mut xml, "result", result),
        // Defect `raw-envelope-result`: the body goes in unescaped.
        #[cfg(feature = "defects")]
        (Some(result), ResultBody::Raw) => {
            let _ = writeln!(xml, "<result>{result}</result>");
        }
        (None, _) => {}
    }
    if let Some(usage) = &envelope.usage {
        // Numbers need no escaping.
        let _ = writeln!(
            xml,
            "<usage><total_tokens>{}</total_tokens><tool_uses>{}</tool_uses>\
             <duration_ms>{}</duration_ms></usage>",
            usage.total_tokens, usage.tool_uses, usage.duration_ms
        );
    }
    if let Some(worktree) = &envelope.worktree {
        let _ = writeln!(
            xml,
            "<worktree><path>{}</path><branch>{}</branch></worktree>",
            escape(worktree.path.as_str()),
            escape(worktree.branch.as_str())
        );
    }
    xml.push_str("</task-notification>");
    xml
}

fn element(xml: &mut String, name: &str, body: &str) {
    let _ = writeln!(xml, "<{name}>{}</{name}>", escape(body));
}
