//! Glob patterns over relative paths, for the `Glob` and `Grep` tools.
//!
//! Supported syntax, matched against a path's `/`-separated segments:
//!
//! - `*` any run of characters within one segment (dotfiles included), `?` one
//!   character, `[abc]`, `[a-z]` and `[!a-z]` one character of (not of) a class;
//! - `**` as a whole segment: zero or more segments;
//! - `{a,b}` alternatives (not nested), expanded before matching.
//!
//! Matching is by characters, case-sensitive, and never touches the disk.

use std::path::{Component, Path};

/// Most alternatives a `{…}` expansion may produce, so a pattern cannot blow up.
const ALTERNATIVES_MAX: usize = 64;

/// Why a string is not a glob pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GlobError {
    /// The pattern is empty.
    #[error("glob pattern is empty")]
    Empty,
    /// A `[` or `{` is not closed, or braces are nested.
    #[error("glob pattern {pattern:?}: {problem}")]
    Malformed {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// `{…}` alternatives expand to more than 64 patterns.
    #[error("glob pattern {pattern:?} expands to more than {ALTERNATIVES_MAX} alternatives")]
    TooManyAlternatives {
        /// The pattern.
        pattern: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyChar,
    AnyRun,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: zero or more whole segments.
    AnyDepth,
    Tokens(Vec<Token>),
}

/// A compiled glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobPattern {
    text: String,
    /// One segment list per `{…}` alternative.
    alternatives: Vec<Vec<Segment>>,
}

impl GlobPattern {
    /// Compiles `pattern`. A leading `./` is ignored.
    pub fn new(pattern: &str) -> Result<GlobPattern, GlobError> {
        let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
        if trimmed.is_empty() {
            return Err(GlobError::Empty);
        }
        let alternatives = expand_braces(trimmed)?
            .iter()
            .map(|alternative| compile(alternative, pattern))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GlobPattern {
            text: pattern.to_owned(),
            alternatives,
        })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern contains a `/`, i.e. is meant for whole relative paths
    /// rather than file names.
    pub fn has_separator(&self) -> bool {
        self.text.trim_start_matches("./").contains('/')
    }

    /// Whether the relative `path` matches. Absolute paths and `..` never match.
    pub fn matches(&self, path: &Path) -> bool {
        let mut segments = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(segment) => segments.push(segment.to_string_lossy()),
                Component::CurDir => {}
                _ => return false,
            }
        }
        let segments: Vec<&str> = segments.iter().map(|segment| segment.as_ref()).collect();
        self.alternatives
            .iter()
            .any(|pattern| match_segments(pattern, &segments))
    }
}

fn expand_braces(pattern: &str) -> Result<Vec<String>, GlobError> {
    let malformed = |problem| GlobError::Malformed {
        pattern: pattern.to_owned(),
        problem,
    };
    let Some(open) = pattern.find('{') else {
        if pattern.contains('}') {
            return Err(malformed("`}` without `{`"));
        }
        return Ok(vec![pattern.to_owned()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|offset| open + offset)
        .ok_or_else(|| malformed("`{` is not closed"))?;
    let body = &pattern[open + 1..close];
    if body.contains('{') {
        return Err(malformed("nested `{` is not supported"));
    }
    let mut expanded = Vec::new();
    for rest in expand_braces(&pattern[close + 1..])? {
        for choice in body.split(',') {
            expanded.push(format!("{}{choice}{rest}", &pattern[..open]));
            if expanded.len() > ALTERNATIVES_MAX {
                return Err(GlobError::TooManyAlternatives {
                    pattern: pattern.to_owned(),
                });
            }
        }
    }
    Ok(expanded)
}

fn compile(alternative: &str, pattern: &str) -> Result<Vec<Segment>, GlobError> {
    let malformed = |problem| GlobError::Malformed {
        pattern: pattern.to_owned(),
        problem,
    };
    let mut segments = Vec::new();
    for text in alternative.split('/') {
        if text.is_empty() {
            // `a//b` or a trailing `/`: nothing to match, like `a/b`.
            continue;
        }
        if text == "**" {
            // Consecutive `**` mean the same as one.
            if segments.last() != Some(&Segment::AnyDepth) {
                segments.push(Segment::AnyDepth);
            }
            continue;
        }
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    // `**` inside a segment (`a**b`) is just `*`.
                    while chars.peek() == Some(&'*') {
                        chars.next();
                    }
                    tokens.push(Token::AnyRun);
                }
                '?' => tokens.push(Token::AnyChar),
                '[' => {
                    let negated = matches!(chars.peek(), Some('!' | '^'));
                    if negated {
                        chars.next();
                    }
                    let mut ranges = Vec::new();
                    let mut closed = false;
                    let mut first = true;
                    while let Some(c) = chars.next() {
                        if c == ']' && !first {
                            closed = true;
                            break;
                        }
                        first = false;
                        if chars.peek() == Some(&'-') {
                            let mut lookahead = chars.clone();
                            lookahead.next();
                            match lookahead.peek() {
                                Some(&end) if end != ']' => {
                                    chars.next();
                                    chars.next();
                                    ranges.push((c, end));
                                    continue;
                                }
                                _ => {}
                            }
                        }
                        ranges.push((c, c));
                    }
                    if !closed {
                        return Err(malformed("`[` is not closed"));
                    }
                    tokens.push(Token::Class { negated, ranges });
                }
                other => tokens.push(Token::Literal(other)),
            }
        }
        segments.push(Segment::Tokens(tokens));
    }
    Ok(segments)
}

fn match_segments(pattern: &[Segment], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((Segment::AnyDepth, rest)) => {
            // Zero segments, or one more and try again; bounded by the path's depth.
            (0..=path.len()).any(|skipped| match_segments(rest, &path[skipped..]))
        }
        Some((Segment::Tokens(tokens), rest)) => match path.split_first() {
            Some((segment, path_rest)) => {
                match_tokens(tokens, segment) && match_segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// Wildcard matching with one backtrack point: linear in practice, quadratic at worst.
fn match_tokens(tokens: &[Token], text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let (mut token_index, mut char_index) = (0, 0);
    // Where the last `*` was, and the text position it currently absorbs up to.
    let mut backtrack: Option<(usize, usize)> = None;
    while char_index < chars.len() {
        let matched = match tokens.get(token_index) {
            Some(Token::AnyRun) => {
                backtrack = Some((token_index, char_index));
                token_index += 1;
                continue;
            }
            Some(token) => matches_one(token, chars[char_index]),
            None => false,
        };
        if matched {
            token_index += 1;
            char_index += 1;
        } else if let Some((star_index, absorbed)) = backtrack {
            token_index = star_index + 1;
            char_index = absorbed + 1;
            backtrack = Some((star_index, absorbed + 1));
        } else {
            return false;
        }
    }
    tokens[token_index..]
        .iter()
        .all(|token| *token == Token::AnyRun)
}

fn matches_one(token: &Token, c: char) -> bool {
    match token {
        Token::Literal(literal) => *literal == c,
        Token::AnyChar => true,
        Token::AnyRun => unreachable!("handled by match_tokens"),
        Token::Class { negated, ranges } => {
            let inside = ranges.iter().any(|(low, high)| (*low..=*high).contains(&c));
            inside != *negated
        }
    }
}
