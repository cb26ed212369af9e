//! Names the trace repeats: actors, agents, tools, paths, digests of prefixes.
//!
//! A worker's every turn adds some seven entries naming the same agent, tool,
//! working directory and transcript path, so a run of a thousand workers of five
//! hundred turns held millions of copies of a few thousand strings. A [`Name`] is
//! one shared copy: names made from equal text on one thread share one allocation
//! while the run that made them is alive.
//!
//! A name reads as its text (`Deref<Target = str>`, comparisons with `str` and
//! `String`), and serializes as it, so the trace's JSON and its hash do not change.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

/// How many distinct names a thread keeps for sharing. Past it the table starts
/// afresh: names already made keep their text, later ones are shared anew.
const SHARED_NAMES_MAX: usize = 1 << 16;

/// How many names the recent-text cache holds.
const RECENT_NAMES_LEN: usize = 64;

thread_local! {
    /// The names made on this thread, by their text: hashed with XXH3, since every
    /// trace entry looks up a few, and SipHash costs several times as much.
    static SHARED_NAMES: RefCell<HashSet<Name, Xxh3DefaultBuilder>> =
        RefCell::new(HashSet::default());
    /// Names recently made, by where their text was: most names are made again
    /// and again from the same string (a literal actor, a worker's prompt, a
    /// transcript's path), which is found here without hashing it. A slot whose
    /// address was freed and reused for other text fails the comparison.
    static RECENT_NAMES: RefCell<[Option<(usize, Name)>; RECENT_NAMES_LEN]> =
        const { RefCell::new([const { None }; RECENT_NAMES_LEN]) };
}

/// A shared, immutable piece of trace text.
///
/// One word wide: the text sits behind a second pointer, so that the trace events
/// that hold four names stay small (`Arc<str>` takes two words). Equality, order and
/// hash are the text's.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<Box<str>>);

impl Name {
    /// The name for `text`: the copy this thread made before, if any.
    pub fn new(text: &str) -> Self {
        let address = text.as_ptr() as usize;
        // Texts sit at least a word apart; the low bits say little.
        let slot = (address >> 3) % RECENT_NAMES_LEN;
        RECENT_NAMES.with(|recent| {
            let mut recent = recent.borrow_mut();
            match &recent[slot] {
                Some((at, name)) if *at == address && name.as_str() == text => name.clone(),
                _ => {
                    let name = Self::shared(text);
                    recent[slot] = Some((address, name.clone()));
                    name
                }
            }
        })
    }

    /// The name for `text` from the table of this thread's names.
    fn shared(text: &str) -> Self {
        SHARED_NAMES.with(|names| {
            let mut names = names.borrow_mut();
            if let Some(shared) = names.get(text) {
                return shared.clone();
            }
            if names.len() >= SHARED_NAMES_MAX {
                names.clear();
            }
            let shared = Name(Arc::new(Box::from(text)));
            names.insert(shared.clone());
            shared
        })
    }

    /// Forgets this thread's shared names, as a run starts: names already made keep
    /// their text. A run's names are mostly its own (task ids, paths, digests), so a
    /// table kept across runs grows to its 65,536 entries, whose lookups miss the
    /// processor's caches, and holds megabytes of text no run needs.
    pub fn forget_shared() {
        SHARED_NAMES.with(|names| names.borrow_mut().clear());
        RECENT_NAMES.with(|recent| recent.borrow_mut().fill(None));
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Name {
    fn default() -> Self {
        Name::new("")
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name::new(&text)
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Self {
        Name::new(text)
    }
}

impl From<Name> for String {
    fn from(name: Name) -> Self {
        name.as_str().to_owned()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Borrowed where the input allows, owned where it holds escapes.
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Name::new(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: names of equal text made on one thread share one allocation, and read,
    /// compare and serialize as their text.
    #[test]
    fn equal_names_share_their_text() {
        let first = Name::new("Audit shard 7.");
        let second = Name::from("Audit shard 7.".to_owned());
        assert!(Arc::ptr_eq(&first.0, &second.0));
        assert_eq!(first, "Audit shard 7.");
        assert_eq!("Audit shard 7.".to_owned(), second);
        assert!(first.starts_with("Audit"));
        assert_eq!(
            serde_json::to_string(&first).unwrap(),
            r#""Audit shard 7.""#
        );
        let read: Name = serde_json::from_str(r#""a \"quoted\" name""#).unwrap();
        assert_eq!(read, r#"a "quoted" name"#);
        assert_eq!(
            format!("{first} {first:?}"),
            r#"Audit shard 7. "Audit shard 7.""#
        );
    }

    /// Goal: the table is bounded, and names made before it starts afresh keep
    /// their text.
    #[test]
    fn the_table_starts_afresh_when_full() {
        let kept = Name::new("kept");
        for n in 0..=SHARED_NAMES_MAX {
            Name::new(&n.to_string());
        }
        SHARED_NAMES.with(|names| assert!(names.borrow().len() <= SHARED_NAMES_MAX));
        assert_eq!(kept, "kept");
    }
}
