//! Plain-text tables for the reports `cost`, `replay`, `economics` and `fidelity`
//! print.
//!
//! Every column is as wide as its widest cell (measured in display width, so a `…`
//! or a non-ASCII agent name lines up), columns are two spaces apart (one would run
//! headers of several words together), and lines carry no trailing spaces. `tabled`
//! does the measuring and the padding.

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Padding, Style};

/// Which side of its column a cell keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Names and words.
    Left,
    /// Numbers, so that their digits line up.
    Right,
}

/// `rows`, the header first, as a table, each line ending in a newline. Column `i`
/// keeps to `align[i]`; a column past the end of `align` keeps right.
pub(crate) fn render<R, C>(rows: R, align: &[Align]) -> String
where
    R: IntoIterator<Item = C>,
    C: IntoIterator,
    C::Item: Into<String>,
{
    let mut builder = Builder::default();
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table
        .with(Style::empty())
        .with(Padding::new(0, 2, 0, 0))
        .with(Alignment::right());
    for (column, side) in align.iter().enumerate() {
        if *side == Align::Left {
            table.modify(Columns::one(column), Alignment::left());
        }
    }
    let mut text = String::new();
    for line in table.to_string().lines() {
        text += line.trim_end();
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: columns as wide as their widest cell, two spaces apart, aligned as asked,
    /// without trailing spaces. Method: a name column, a number column and a word
    /// column with cells of different widths, one of them non-ASCII.
    #[test]
    fn columns_fit_their_widest_cell() {
        let rows = [
            ["agent", "calls", "result"],
            ["main", "16", "match"],
            ["résumé…", "9", "diverges"],
        ];
        let text = render(rows, &[Align::Left, Align::Right, Align::Left]);
        assert_eq!(
            text,
            "agent    calls  result\n\
             main        16  match\n\
             résumé…      9  diverges\n"
        );
    }

    /// Goal: an empty table prints nothing rather than a blank line.
    #[test]
    fn no_rows_no_lines() {
        assert_eq!(render(Vec::<[&str; 2]>::new(), &[Align::Left]), "");
    }
}
