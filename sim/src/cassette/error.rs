//! What can go wrong reading or writing a cassette.

use std::path::PathBuf;

/// A cassette that could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassetteError {
    /// The file could not be read.
    #[error("{path}: cannot read the cassette: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid cassette.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong and what was expected.
        message: String,
    },
    /// The file could not be written (or its temporary file not renamed over it).
    #[error("{path}: cannot write the cassette: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A recording was asked to write, but was made without a file.
    #[error("the recording has no file to write to")]
    NoPath,
}
