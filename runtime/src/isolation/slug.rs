//! Worktree slugs: what a worker's worktree may be called.
//!
//! PROTOCOL.md §2: slugs are segments of `[A-Za-z0-9._-]`, at most 64 characters,
//! never `..`. We allow several `/`-separated segments (`feature/auth`), because
//! callers name worktrees after branches, but the slug never becomes nested
//! directories or nested refs: `/` maps to `+` in both the directory name and the
//! branch name (`feature/auth` → `.claude/worktrees/feature+auth`, branch
//! `worktree-feature+auth`). `+` is not a slug character, so the mapping is
//! one-to-one, and one worktree can never sit inside another (`a` and `a/b`).
//!
//! A few more rules keep the branch name a valid git ref whatever the slug: no `..`
//! anywhere (also inside a segment, `a..b`), and no trailing `.` or `.lock`.

use std::fmt;

/// Most characters (all ASCII, so also bytes) a slug may have, separators included.
pub const SLUG_CHARS_MAX: usize = 64;

/// Why a string is not a worktree slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlugError {
    /// The slug is empty.
    #[error("worktree slug is empty")]
    Empty,
    /// The slug is longer than [`SLUG_CHARS_MAX`].
    #[error(
        "worktree slug {slug:?} has {chars_count} characters; at most {SLUG_CHARS_MAX} are allowed"
    )]
    TooLong {
        /// The slug.
        slug: String,
        /// How many characters it has.
        chars_count: usize,
    },
    /// A `/`-separated segment is empty (leading, trailing or doubled `/`).
    #[error("worktree slug {slug:?} has an empty segment")]
    EmptySegment {
        /// The slug.
        slug: String,
    },
    /// A segment is `.` or `..`, or the slug contains `..` anywhere.
    #[error("worktree slug {slug:?} contains a relative directory name or `..`")]
    DotSegment {
        /// The slug.
        slug: String,
    },
    /// A character outside `[A-Za-z0-9._-]` and the separator `/`.
    #[error("worktree slug {slug:?} has {character:?}; only A-Z a-z 0-9 . _ - and / are allowed")]
    BadCharacter {
        /// The slug.
        slug: String,
        /// The first offending character.
        character: char,
    },
    /// The slug ends in `.` or `.lock`, which git refuses in a branch name.
    #[error("worktree slug {slug:?} ends in `.` or `.lock`, which git refuses in a branch name")]
    BadEnding {
        /// The slug.
        slug: String,
    },
}

/// A validated worktree slug.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorktreeSlug(String);

impl WorktreeSlug {
    /// The directory, relative to the repository, under which worktrees live.
    pub const WORKTREES_DIR: &'static str = ".claude/worktrees";

    /// The prefix of every worktree branch.
    pub const BRANCH_PREFIX: &'static str = "worktree-";

    /// Validates `slug`: 1 to 64 characters of `[A-Za-z0-9._-]` in `/`-separated
    /// segments, no empty segment, no `.` or `..` segment, no `..` anywhere, and no
    /// trailing `.` or `.lock`.
    pub fn parse(slug: &str) -> Result<WorktreeSlug, SlugError> {
        let owned = || slug.to_owned();
        if slug.is_empty() {
            return Err(SlugError::Empty);
        }
        let chars_count = slug.chars().count();
        if chars_count > SLUG_CHARS_MAX {
            return Err(SlugError::TooLong {
                slug: owned(),
                chars_count,
            });
        }
        if let Some(character) = slug
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
        {
            return Err(SlugError::BadCharacter {
                slug: owned(),
                character,
            });
        }
        if slug.split('/').any(str::is_empty) {
            return Err(SlugError::EmptySegment { slug: owned() });
        }
        if slug.contains("..") || slug.split('/').any(|segment| segment == ".") {
            return Err(SlugError::DotSegment { slug: owned() });
        }
        if slug.ends_with('.') || slug.ends_with(".lock") {
            return Err(SlugError::BadEnding { slug: owned() });
        }
        Ok(WorktreeSlug(owned()))
    }

    /// The slug as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The worktree's directory name: the slug with `/` mapped to `+`, one path
    /// segment.
    pub fn dir_name(&self) -> String {
        self.0.replace('/', "+")
    }

    /// The worktree's path relative to the repository root:
    /// `.claude/worktrees/<dir_name>`.
    pub fn relative_path(&self) -> std::path::PathBuf {
        std::path::Path::new(Self::WORKTREES_DIR).join(self.dir_name())
    }

    /// The worktree's branch: `worktree-<slug>` with `/` mapped to `+`.
    pub fn branch_name(&self) -> String {
        format!("{}{}", Self::BRANCH_PREFIX, self.dir_name())
    }
}

impl fmt::Display for WorktreeSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for WorktreeSlug {
    type Err = SlugError;

    fn from_str(text: &str) -> Result<WorktreeSlug, SlugError> {
        WorktreeSlug::parse(text)
    }
}
