//! Names that become path segments: team names, agent names, scratch key segments.
//!
//! Anything that ends up in a path is validated first, so that no name can climb out
//! of its directory (`..`), name an absolute path, or smuggle a separator.

/// Longest accepted segment, in bytes.
pub const SEGMENT_BYTES_MAX: usize = 64;

/// Why a string cannot be a path segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty.
    #[error("{what} is empty")]
    Empty {
        /// What the name names.
        what: &'static str,
    },
    /// Longer than [`SEGMENT_BYTES_MAX`].
    #[error("{what} {name:?} is longer than {SEGMENT_BYTES_MAX} bytes")]
    TooLong {
        /// What the name names.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// `.` or `..`.
    #[error("{what} {name:?} is a relative directory name")]
    DotSegment {
        /// What the name names.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A character outside `[A-Za-z0-9._-]`.
    #[error("{what} {name:?} has {character:?}; only A-Z a-z 0-9 . _ - are allowed")]
    BadCharacter {
        /// What the name names.
        what: &'static str,
        /// The name.
        name: String,
        /// The first offending character.
        character: char,
    },
}

/// Checks that `name` is one safe path segment: 1 to 64 bytes of `[A-Za-z0-9._-]`,
/// and not `.` or `..`. `what` says what the name names, for the error message.
pub fn validate_segment(what: &'static str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { what });
    }
    if name.len() > SEGMENT_BYTES_MAX {
        return Err(NameError::TooLong {
            what,
            name: name.to_owned(),
        });
    }
    if name == "." || name == ".." {
        return Err(NameError::DotSegment {
            what,
            name: name.to_owned(),
        });
    }
    if let Some(character) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameError::BadCharacter {
            what,
            name: name.to_owned(),
            character,
        });
    }
    Ok(())
}
