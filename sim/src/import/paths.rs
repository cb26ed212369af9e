//! Recorded paths moved into the replay's workspace.
//!
//! A recording's tool calls name files under the session's working directory (the
//! `cwd` its lines carry), which the simulated disk does not have; and a write
//! there would land outside the replay's writable roots, which the `no-escape`
//! checker reports. The replay's workspace ([`WORKSPACE_DIR`]) stands in for that
//! directory: every occurrence of it in a tool call's input, at a path boundary,
//! becomes the workspace. A file-writing call aimed anywhere else is moved under
//! [`OUTSIDE_DIR`] in the workspace, so it still writes, and still inside.

use serde_json::Value;

use crate::run::WORKSPACE_DIR;

/// Where a file-writing call aimed outside the recorded working directory writes:
/// its absolute path, under this folder of the workspace.
pub const OUTSIDE_DIR: &str = ".recorded-outside";

/// The tools that write the file their path field names, with that field.
const FILE_WRITERS: [(&str, &str); 4] = [
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// `input` of a call to `tool`, with the recorded working directory `cwd` moved to
/// the workspace. Returns the input and how many strings changed.
pub fn into_workspace(tool: &str, input: Value, cwd: Option<&str>) -> (Value, usize) {
    let mut moved = 0;
    let mut input = match cwd.filter(|cwd| cwd.len() > 1 && cwd.starts_with('/')) {
        Some(cwd) => replace_strings(input, cwd, &mut moved),
        None => input,
    };
    let writer_field = FILE_WRITERS
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, field)| *field);
    if let Some(field) = writer_field {
        if let Some(Value::String(path)) = input.get_mut(field) {
            let inside = path == WORKSPACE_DIR || path.starts_with(&format!("{WORKSPACE_DIR}/"));
            if path.starts_with('/') && !inside {
                *path = format!("{WORKSPACE_DIR}/{OUTSIDE_DIR}{path}");
                moved += 1;
            }
        }
    }
    (input, moved)
}

fn replace_strings(value: Value, cwd: &str, moved: &mut usize) -> Value {
    match value {
        Value::String(text) => {
            let replaced = replace_at_boundaries(&text, cwd, WORKSPACE_DIR);
            if replaced != text {
                *moved += 1;
            }
            Value::String(replaced)
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| replace_strings(item, cwd, moved))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| (key, replace_strings(item, cwd, moved)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` with every `from` that ends at a path boundary (the end, or a character
/// that cannot continue a file name) replaced by `to`: `/a/b` in `/a/b/c` and
/// `cd /a/b && ls`, not in `/a/bc`.
fn replace_at_boundaries(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        let continues_name = after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
        out.push_str(&rest[..at]);
        out.push_str(if continues_name { from } else { to });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_working_directory_becomes_the_workspace_at_path_boundaries_only() {
        // Goal: paths under the recorded directory move; a sibling whose name only
        // starts the same does not.
        let (input, moved) = into_workspace(
            "Bash",
            json!({"command": "cd /home/u/p && ls /home/u/p/lib /home/u/p-other"}),
            Some("/home/u/p"),
        );
        assert_eq!(
            input,
            json!({"command": "cd /work && ls /work/lib /home/u/p-other"})
        );
        assert_eq!(moved, 1);
    }

    #[test]
    fn a_write_outside_the_working_directory_moves_under_the_workspace() {
        // Goal: a file-writing call never leaves the writable roots; reads are left.
        let (input, _) = into_workspace(
            "Write",
            json!({"file_path": "/etc/hosts", "content": "x"}),
            Some("/home/u/p"),
        );
        assert_eq!(input["file_path"], "/work/.recorded-outside/etc/hosts");
        let (input, moved) = into_workspace("Read", json!({"file_path": "/etc/hosts"}), None);
        assert_eq!(
            (input["file_path"].as_str(), moved),
            (Some("/etc/hosts"), 0)
        );
    }
}
