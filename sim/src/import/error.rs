//! Why a session could not be imported.

use std::path::PathBuf;

/// Why a session could not be imported. Unknown line types are not errors: they
/// are skipped and counted in the [`ImportSummary`](super::ImportSummary).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// A transcript or its subagents directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line is not a JSON object with a string `type`.
    #[error("{path}:{line}: malformed transcript line: {message}")]
    Malformed {
        /// The transcript.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        message: String,
    },
    /// The main thread never received a user prompt, so there is nothing for the
    /// coordinator to start from.
    #[error("{path}: the session has no user prompt on its main thread")]
    NoPrompt {
        /// The transcript.
        path: PathBuf,
    },
    /// The written scenario did not load back: a bug in the importer, reported with
    /// the loader's own message rather than as a panic.
    #[error("the imported scenario does not load: {0}")]
    Scenario(String),
}
