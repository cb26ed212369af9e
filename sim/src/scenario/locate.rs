//! Where a value sits in a scenario's text, found by its path of keys and indices.
//!
//! serde hands the loader typed values without positions, so a check made after
//! deserialising (a range, a relation between two fields) finds its value again in
//! the text: the text is parsed once more into toml's spanned tree, and the path is
//! walked down it. Searching the text for the key's name instead would point at the
//! first `min_ms` of the file when the fifth turn's is wrong.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One step down a scenario's tree: a key of a table, or an index of an array
/// (an array of tables such as `[[coordinator.turns]]` included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A key of a table.
    Key(&'static str),
    /// An index of an array, from 0.
    Index(usize),
}

/// The byte offset in `text` of the value at `path`, or of the deepest table or
/// array on the way that the text holds (a value left to its default has no place
/// of its own: its table stands for it). `None` when `text` is not TOML.
pub fn offset_of(text: &str, path: &[Step]) -> Option<usize> {
    let root: Spanned<DeTable<'_>> = DeTable::parse(text).ok()?;
    let mut offset = root.span().start;
    let mut value: Option<&DeValue<'_>> = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    for step in path {
        let next = match (step, table, value) {
            (Step::Key(key), Some(table), _) => table.get(*key),
            (Step::Index(index), None, Some(DeValue::Array(array))) => array.get(*index),
            _ => None,
        };
        let Some(next) = next else { break };
        offset = next.span().start;
        value = Some(next.get_ref());
        table = match next.get_ref() {
            DeValue::Table(inner) => Some(inner),
            _ => None,
        };
    }
    Some(offset)
}

#[cfg(test)]
mod tests {
    use super::{offset_of, Step};

    #[test]
    fn a_path_finds_the_value_of_the_nth_table_in_an_array() {
        // Goal: the second turn's `ms` is found, not the first one's.
        let text = "[[turns]]\nms = 1\n[[turns]]\nms = 2\n";
        let offset = offset_of(text, &[Step::Key("turns"), Step::Index(1), Step::Key("ms")]);
        assert_eq!(&text[offset.unwrap()..], "2\n");
    }

    #[test]
    fn a_missing_key_stands_at_its_table() {
        // Goal: a default value points at the table that would have held it.
        let text = "name = \"x\"\n[settings]\nidle_poll_ms = 5\n";
        let offset = offset_of(text, &[Step::Key("settings"), Step::Key("turns_max")]).unwrap();
        let settings = text.find("[settings]").unwrap();
        assert!((settings..text.len()).contains(&offset), "{offset}");
        assert!(offset < text.find("5").unwrap(), "{offset}");
        assert_eq!(offset_of("not toml = = =", &[Step::Key("x")]), None);
    }
}
