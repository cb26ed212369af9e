//! Secrets kept out of cassettes.
//!
//! A cassette is committed to git, and what a model was sent can hold a credential:
//! a key pasted into a prompt, an environment dump in a tool result. Before an
//! exchange is kept, every string in it (object keys included) is scrubbed:
//!
//! - anything that looks like an Anthropic API key: `sk-ant-` and the key
//!   characters (`A-Z a-z 0-9 - _`) that follow it;
//! - every occurrence of each literal secret the caller names, typically the value
//!   of `ANTHROPIC_API_KEY`. The caller passes them in, so nothing here reads the
//!   environment.
//!
//! Each is replaced by [`REDACTED`].

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// What a scrubbed secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// The prefix every Anthropic API key starts with.
const API_KEY_PREFIX: &str = "sk-ant-";

/// The secrets to scrub.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Literal secrets, longest first, so that a secret containing another is
    /// replaced whole.
    literals: Vec<String>,
}

impl Secrets {
    /// Scrubs API-key-shaped strings only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also scrubs every occurrence of `secret`. An empty secret is ignored: it
    /// would match everywhere.
    pub fn with_literal(mut self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        if !secret.is_empty() && !self.literals.contains(&secret) {
            self.literals.push(secret);
            self.literals
                .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        }
        self
    }

    /// `text` with every secret replaced.
    pub fn scrub_str<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for literal in &self.literals {
            if text.contains(literal.as_str()) {
                text = Cow::Owned(text.replace(literal.as_str(), REDACTED));
            }
        }
        if text.contains(API_KEY_PREFIX) {
            text = Cow::Owned(redact_api_keys(&text));
        }
        text
    }

    /// Whether JSON text `json` may hold a secret: a cheap test before a scrub,
    /// which walks the whole document. False means it holds none.
    pub fn may_occur_in(&self, json: &str) -> bool {
        json.contains(API_KEY_PREFIX)
            || self.literals.iter().any(|literal| {
                // A literal with quotes or control characters is escaped in JSON.
                let encoded = serde_json::to_string(literal).unwrap_or_default();
                let escaped = encoded
                    .strip_prefix('"')
                    .and_then(|e| e.strip_suffix('"'))
                    .unwrap_or(literal);
                json.contains(escaped)
            })
    }

    /// Scrubs every string and object key in `value`, in place.
    pub fn scrub_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(scrubbed) = self.scrub_str(text) {
                    *text = scrubbed;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_value(item)),
            Value::Object(fields) => {
                let scrubbed: Map<String, Value> = std::mem::take(fields)
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.scrub_value(&mut item);
                        (self.scrub_str(&key).into_owned(), item)
                    })
                    .collect();
                *fields = scrubbed;
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// `item` with every string in its JSON form scrubbed. Whatever shape `item`
    /// has, no field is missed: the walk is over its serialization.
    pub fn scrub<T: Serialize + DeserializeOwned + Clone>(&self, item: &T) -> T {
        let Ok(mut value) = serde_json::to_value(item) else {
            // Only a map with non-string keys fails to serialize, which the API's
            // types do not have.
            return item.clone();
        };
        self.scrub_value(&mut value);
        // Replacing a string by a string keeps every shape valid.
        serde_json::from_value(value).unwrap_or_else(|_| item.clone())
    }
}

/// Whether `c` can be part of an API key after its prefix.
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// `text` with every `sk-ant-…` run replaced.
fn redact_api_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(API_KEY_PREFIX) {
        out.push_str(&rest[..start]);
        out.push_str(REDACTED);
        let after = &rest[start + API_KEY_PREFIX.len()..];
        let key_len = after.find(|c: char| !is_key_char(c)).unwrap_or(after.len());
        rest = &after[key_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn api_keys_are_redacted_up_to_the_first_non_key_character() {
        // Goal: the key goes, the text around it stays.
        let secrets = Secrets::new();
        assert_eq!(
            secrets.scrub_str("key=sk-ant-api03-AbC_9-xYz, next"),
            "key=[redacted], next"
        );
        assert_eq!(
            secrets.scrub_str("sk-ant-a sk-ant-b."),
            "[redacted] [redacted]."
        );
        assert!(matches!(secrets.scrub_str("no key here"), Cow::Borrowed(_)));
    }

    #[test]
    fn literal_secrets_are_redacted_longest_first_and_empty_ones_ignored() {
        // Goal: a literal that contains another is removed whole; "" matches nothing.
        let secrets = Secrets::new()
            .with_literal("hunter2")
            .with_literal("hunter2-extended")
            .with_literal("");
        assert_eq!(
            secrets.scrub_str("a hunter2-extended b hunter2"),
            "a [redacted] b [redacted]"
        );
    }

    #[test]
    fn keys_and_values_of_nested_json_are_scrubbed() {
        // Goal: a secret is found wherever it sits in a JSON document.
        let secrets = Secrets::new().with_literal("s3cret");
        let mut value = json!({"env": {"s3cret": ["x sk-ant-zz y"], "n": 1}});
        secrets.scrub_value(&mut value);
        assert_eq!(
            value,
            json!({"env": {"[redacted]": ["x [redacted] y"], "n": 1}})
        );
    }
}
