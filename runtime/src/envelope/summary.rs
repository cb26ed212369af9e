//! The `<summary>` line of an envelope.
//!
//! Claude Code writes `Agent "<description>" completed`, `… failed: <error>` and
//! `… was stopped`; nexo-rs summarises a fork's result as its first line, cut at 80
//! characters.

/// Characters kept by [`summary_first_line`].
pub const FIRST_LINE_CHARS_MAX: usize = 80;

/// `Agent "<description>" completed`.
pub fn summary_completed(description: &str) -> String {
    format!("Agent \"{description}\" completed")
}

/// `Agent "<description>" failed: <error>`.
pub fn summary_failed(description: &str, error: &str) -> String {
    format!("Agent \"{description}\" failed: {error}")
}

/// `Agent "<description>" was stopped`.
pub fn summary_stopped(description: &str) -> String {
    format!("Agent \"{description}\" was stopped")
}

/// The first non-blank line of `result`, trimmed and cut at
/// `FIRST_LINE_CHARS_MAX` (80) characters (not bytes, so no character is split).
pub fn summary_first_line(result: &str) -> String {
    let line = result
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    line.chars().take(FIRST_LINE_CHARS_MAX).collect()
}
