//! Files a scenario puts in the workspace before its run.
//!
//! Every run's workspace (`/work`) holds `README.md` and `shared/notes.md`; a
//! scenario adds its own with `[[files]]`: a path under the workspace, a text, and
//! optionally a size the text is repeated to, so that a file of megabytes (past a
//! tool's size cap) takes one line of the scenario, not megabytes of it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The files every workspace holds; a scenario's `[[files]]` may not name them.
pub const WORKSPACE_FILES_BUILT_IN: [&str; 2] = ["README.md", "shared/notes.md"];

/// A file the workspace holds when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Its path under the workspace (`/work`): relative, `/`-separated segments,
    /// none empty, `.` or `..`.
    pub path: String,
    /// Its text.
    pub content: String,
    /// Its size in bytes: `content` repeated, the last copy cut (back to a whole
    /// character), to this many.
    /// Default: `content` once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

impl WorkspaceFile {
    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        match self.size_bytes {
            Some(size_bytes) => repeated_to(&self.content, size_bytes).into_bytes(),
            None => self.content.as_bytes().to_vec(),
        }
    }

    /// What is wrong with the file's path, if anything.
    pub fn path_fault(&self) -> Option<String> {
        let path = self.path.as_str();
        if path.starts_with('/') {
            return Some(format!(
                "`path` = {path:?} is absolute: name the file under the workspace, as `src/lib.rs`"
            ));
        }
        if path
            .split('/')
            .any(|segment| segment.is_empty() || segment == "." || segment == "..")
        {
            return Some(format!(
                "`path` = {path:?} has an empty, `.` or `..` segment: a file stays inside the workspace"
            ));
        }
        if WORKSPACE_FILES_BUILT_IN.contains(&path) {
            return Some(format!(
                "`path` = {path:?} is a file every workspace already holds"
            ));
        }
        None
    }
}

/// `text` repeated, the last copy cut back to a whole character, to at most
/// `size_bytes` bytes: a text of megabytes from one line of a scenario. The size is
/// bounded when the scenario is loaded (`bounds`), and `text` is not empty unless
/// the size is 0.
pub fn repeated_to(text: &str, size_bytes: u64) -> String {
    let size = usize::try_from(size_bytes).expect("a checked size fits in memory");
    let mut repeated = text.repeat(size.div_ceil(text.len().max(1)));
    let mut cut = size.min(repeated.len());
    while !repeated.is_char_boundary(cut) {
        cut -= 1;
    }
    repeated.truncate(cut);
    repeated
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str, size_bytes: Option<u64>) -> WorkspaceFile {
        WorkspaceFile {
            path: path.to_owned(),
            content: content.to_owned(),
            size_bytes,
        }
    }

    #[test]
    fn a_file_is_its_content_repeated_and_cut_to_its_size() {
        assert_eq!(file("a.txt", "ab\n", None).bytes(), b"ab\n");
        assert_eq!(file("a.txt", "ab\n", Some(7)).bytes(), b"ab\nab\na");
        assert_eq!(file("a.txt", "ab\n", Some(2)).bytes(), b"ab");
    }

    #[test]
    fn a_path_stays_inside_the_workspace_and_off_its_built_in_files() {
        assert_eq!(file("logs/app.log", "x", None).path_fault(), None);
        for bad in [
            "/etc/passwd",
            "../up",
            "logs/../../up",
            "logs//app",
            "./a",
            "",
            "README.md",
        ] {
            assert!(file(bad, "x", None).path_fault().is_some(), "{bad}");
        }
    }
}
