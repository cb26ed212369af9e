//! A replay miss: a request the cassette could not answer, with what it was
//! closest to and how the two differ.
//!
//! The nearest recorded request is the one whose canonical text differs from the
//! actual one in the fewest bytes once their common prefix and common suffix are
//! set aside (ties: the longer common prefix, then the earlier call). A longest
//! common prefix alone would pick a later call of the same agent, which repeats the
//! actual request and goes on, over the recorded call that differs from it in one
//! line. The diff is a unified diff of the two requests' pretty canonical JSON,
//! recorded (`-`) to actual (`+`), with three lines of context; a long line is
//! shown as a window around its first difference.

use std::fmt;

use super::canonical::RequestHash;

/// Lines of context around each change.
const CONTEXT_LINES: usize = 3;
/// The longest line a diff shows whole, in characters.
const LINE_CHARS_MAX: usize = 160;
/// How many characters before its first difference a windowed line shows.
const WINDOW_LEAD_CHARS: usize = 40;

/// Why a request missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissReason {
    /// No exchange in the cassette has this request.
    Unrecorded,
    /// The cassette has the request `recorded` times, and each has been replayed.
    Exhausted {
        /// How many exchanges the cassette has for it.
        recorded: usize,
    },
    /// In-order replay: no exchange is left (for this agent, when per agent).
    NoneLeft,
}

/// The recorded exchange nearest to a missed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearestExchange {
    /// Its call number.
    pub call: u64,
    /// Its agent, if labelled.
    pub agent: Option<String>,
    /// Its request's hash.
    pub request_hash: RequestHash,
    /// Bytes of canonical text the two requests share from the start.
    pub common_prefix_bytes: usize,
}

/// A request the replay could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayMiss {
    /// The replay's call number, from 1.
    pub call: u64,
    /// The request's agent, if labelled.
    pub agent: Option<String>,
    /// The actual request's hash.
    pub request_hash: RequestHash,
    /// Why it missed.
    pub reason: MissReason,
    /// The nearest recorded request, if the cassette has any.
    pub nearest: Option<NearestExchange>,
    /// A unified diff from the nearest recorded request to the actual one; empty
    /// when they are the same or there is none.
    pub diff: String,
}

/// Who a call was, for messages: ` (coordinator)` or nothing.
fn agent_suffix(agent: Option<&str>) -> String {
    match agent {
        Some(agent) => format!(" ({agent})"),
        None => String::new(),
    }
}

impl fmt::Display for ReplayMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let agent = agent_suffix(self.agent.as_deref());
        match &self.reason {
            MissReason::Unrecorded => write!(
                f,
                "call {}{agent}: request {} is not in the cassette",
                self.call, self.request_hash
            )?,
            MissReason::Exhausted { recorded } => write!(
                f,
                "call {}{agent}: request {} was recorded {recorded} time(s), and each was replayed already",
                self.call, self.request_hash
            )?,
            MissReason::NoneLeft => write!(
                f,
                "call {}{agent}: request {}: the cassette has no exchange left{}",
                self.call,
                self.request_hash,
                if self.agent.is_some() {
                    " for this agent"
                } else {
                    ""
                }
            )?,
        }
        match &self.nearest {
            None => write!(f, "\nthe cassette has no request to compare it with")?,
            Some(nearest) => write!(
                f,
                "\nnearest recorded request: call {}{}, request {}, the same for the first {} bytes of canonical JSON",
                nearest.call,
                agent_suffix(nearest.agent.as_deref()),
                nearest.request_hash,
                nearest.common_prefix_bytes
            )?,
        }
        if !self.diff.is_empty() {
            write!(f, "\n{}", self.diff.trim_end())?;
        }
        Ok(())
    }
}

/// The common prefix and common suffix of `a` and `b`, in bytes, not overlapping.
pub(crate) fn common_ends(a: &[u8], b: &[u8]) -> (usize, usize) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    (prefix, suffix)
}

/// The index of the candidate nearest to `actual`, and its common prefix in bytes.
/// Candidates come as `(index, canonical text)` in call order.
pub(crate) fn nearest<'c>(
    actual: &str,
    candidates: impl IntoIterator<Item = (usize, &'c str)>,
) -> Option<(usize, usize)> {
    candidates
        .into_iter()
        .map(|(index, recorded)| {
            let (prefix, suffix) = common_ends(actual.as_bytes(), recorded.as_bytes());
            let changed = (actual.len() + recorded.len()) - 2 * (prefix + suffix);
            (changed, std::cmp::Reverse(prefix), index)
        })
        .min()
        .map(|(_, std::cmp::Reverse(prefix), index)| (index, prefix))
}

/// A unified diff from `recorded` to `actual`, under the two header lines.
pub(crate) fn unified_diff(
    recorded_header: &str,
    actual_header: &str,
    recorded: &str,
    actual: &str,
) -> String {
    if recorded == actual {
        return String::new();
    }
    let patch = diffy::DiffOptions::new()
        .set_context_len(CONTEXT_LINES)
        .create_patch(recorded, actual);
    let mut out = format!("--- {recorded_header}\n+++ {actual_header}\n");
    for hunk in patch.hunks() {
        let (old, new) = (hunk.old_range(), hunk.new_range());
        out += &format!(
            "@@ -{},{} +{},{} @@\n",
            old.start(),
            old.len(),
            new.start(),
            new.len()
        );
        let lines: Vec<(char, &str)> = hunk
            .lines()
            .iter()
            .map(|line| match line {
                diffy::Line::Context(text) => (' ', *text),
                diffy::Line::Delete(text) => ('-', *text),
                diffy::Line::Insert(text) => ('+', *text),
            })
            .map(|(sign, text)| (sign, text.strip_suffix('\n').unwrap_or(text)))
            .collect();
        let mut at = 0;
        while at < lines.len() {
            if lines[at].0 == ' ' {
                out += &format!(" {}\n", shorten(lines[at].1, 0));
                at += 1;
                continue;
            }
            // A run of changes: the k-th removed line pairs with the k-th added one,
            // and both are windowed around where they first differ.
            let end = (at..lines.len())
                .find(|&i| lines[i].0 == ' ')
                .unwrap_or(lines.len());
            let removed: Vec<&str> = lines[at..end]
                .iter()
                .filter(|l| l.0 == '-')
                .map(|l| l.1)
                .collect();
            let added: Vec<&str> = lines[at..end]
                .iter()
                .filter(|l| l.0 == '+')
                .map(|l| l.1)
                .collect();
            let window_of = |k: usize| match (removed.get(k), added.get(k)) {
                (Some(a), Some(b)) => first_difference(a, b).saturating_sub(WINDOW_LEAD_CHARS),
                _ => 0,
            };
            for (k, line) in removed.iter().enumerate() {
                out += &format!("-{}\n", shorten(line, window_of(k)));
            }
            for (k, line) in added.iter().enumerate() {
                out += &format!("+{}\n", shorten(line, window_of(k)));
            }
            at = end;
        }
    }
    out
}

/// The character index where `a` and `b` first differ.
fn first_difference(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `line` cut to [`LINE_CHARS_MAX`] characters from character `from`, with `…`
/// where text was left out.
fn shorten(line: &str, from: usize) -> String {
    let total = line.chars().count();
    if total <= LINE_CHARS_MAX {
        return line.to_owned();
    }
    let from = from.min(total.saturating_sub(LINE_CHARS_MAX));
    let shown: String = line.chars().skip(from).take(LINE_CHARS_MAX).collect();
    let before = if from > 0 { "…" } else { "" };
    let after = if from + LINE_CHARS_MAX < total {
        "…"
    } else {
        ""
    };
    format!("{before}{shown}{after}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_ends_do_not_overlap() {
        // Goal: "aXa" against "aa" shares one byte each side, never the middle twice.
        assert_eq!(common_ends(b"aXa", b"aa"), (1, 1));
        assert_eq!(common_ends(b"abc", b"abc"), (3, 0));
        assert_eq!(common_ends(b"", b"abc"), (0, 0));
    }

    #[test]
    fn the_nearest_request_differs_least_not_just_shares_the_longest_prefix() {
        // Goal: a continuation of the actual request loses to a one-byte edit.
        let actual = r#"{"m":["a","b"]}"#;
        let continuation = r#"{"m":["a","b","c","d"]}"#;
        let edited = r#"{"m":["a","B"]}"#;
        assert_eq!(
            nearest(actual, [(0, continuation), (1, edited)]),
            Some((1, 11))
        );
    }

    #[test]
    fn a_long_changed_line_is_windowed_around_its_first_difference() {
        // Goal: the change is visible even deep inside a 1,000-character line.
        let recorded = format!(
            "{{\n  \"text\": \"{}X{}\"\n}}\n",
            "a".repeat(500),
            "b".repeat(500)
        );
        let actual = recorded.replace('X', "Y");
        let diff = unified_diff("recorded", "actual", &recorded, &actual);
        let removed = diff
            .lines()
            .find(|l| l.starts_with('-') && !l.starts_with("---"));
        let added = diff
            .lines()
            .find(|l| l.starts_with('+') && !l.starts_with("+++"));
        assert!(removed.unwrap().contains("aX") && added.unwrap().contains("aY"));
        assert!(diff
            .lines()
            .all(|l| l.chars().count() <= LINE_CHARS_MAX + 3));
    }
}
