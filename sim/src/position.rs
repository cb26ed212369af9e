//! Positions in text files, for errors that name `file:line:column`.

/// 1-based line and column (in characters) of byte `offset` in `text`. An offset
/// past the end is the end.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::line_column;

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nx", 3), (2, 1));
        assert_eq!(line_column("éx", 2), (1, 2));
        assert_eq!(line_column("ab", 99), (1, 3));
    }
}
