//! Compact JSON text for the paths that write it on every turn.
//!
//! A transcript line, a task record and a request body sent to the API are written
//! on every turn (and, in the simulator, a trace event and a cost meter's block),
//! and a message can carry megabytes (a file read back, an oversize message).
//! `serde_json` escapes a string one byte at a time, about ten instructions a
//! byte; sonic-rs scans sixteen bytes at a time and writes the same text. The
//! functions here are the one place that choice is made, and the tests hold their
//! output to `serde_json`'s byte for byte, so a file written here reads back with
//! `serde_json` and digests of the text do not depend on the writer.
//!
//! The writer is an implementation detail: no sonic-rs type is part of this
//! module's API, so replacing it changes no caller.

use serde::Serialize;

/// Why a value has no JSON text: a map with non-string keys, or a `Serialize`
/// implementation that failed. Its `Display` says which; it is opaque, since what
/// else the writer reports depends on the writer.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct JsonError(sonic_rs::Error);

/// `value` as compact JSON, the bytes `serde_json::to_vec` writes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, JsonError> {
    sonic_rs::to_vec(value).map_err(JsonError)
}

/// `value` as compact JSON, the text `serde_json::to_string` writes.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, JsonError> {
    sonic_rs::to_string(value).map_err(JsonError)
}

/// Appends `value` as compact JSON to `out`, as `serde_json::to_writer` would.
/// On an error, `out` may hold part of the value.
pub fn append<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), JsonError> {
    sonic_rs::to_writer(out, value).map_err(JsonError)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{CacheControl, CacheTtl, ContentBlock, Message, Role};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// Any JSON value, with strings drawn from every Unicode scalar so escapes,
    /// control characters and multi-byte text all appear.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x7f]{0,80}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    fn cache_control() -> impl Strategy<Value = Option<CacheControl>> {
        prop_oneof![
            Just(None),
            Just(Some(CacheControl::ephemeral(None))),
            Just(Some(CacheControl::ephemeral(Some(CacheTtl::FiveMinutes)))),
            Just(Some(CacheControl::ephemeral(Some(CacheTtl::OneHour)))),
        ]
    }

    fn content_block() -> impl Strategy<Value = ContentBlock> {
        prop_oneof![
            (any::<String>(), cache_control()).prop_map(|(text, cache_control)| {
                ContentBlock::Text {
                    text,
                    cache_control,
                }
            }),
            (any::<String>(), any::<String>(), value()).prop_map(|(id, name, input)| {
                ContentBlock::ToolUse {
                    id,
                    name,
                    input: input.into(),
                }
            }),
            (
                any::<String>(),
                any::<String>(),
                any::<bool>(),
                cache_control()
            )
                .prop_map(|(tool_use_id, content, is_error, cache_control)| {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        cache_control,
                    }
                }),
        ]
    }

    proptest! {
        #[test]
        fn a_value_is_written_as_serde_json_writes_it(value in value()) {
            let expected = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(to_vec(&value).unwrap(), expected.clone());
            prop_assert_eq!(to_string(&value).unwrap().into_bytes(), expected);
        }

        #[test]
        fn a_message_is_written_as_serde_json_writes_it(
            assistant in any::<bool>(),
            content in prop::collection::vec(content_block(), 0..6),
        ) {
            let role = if assistant { Role::Assistant } else { Role::User };
            let message = Message { role, content };
            let mut appended = b"prefix:".to_vec();
            append(&mut appended, &message).unwrap();
            let expected = serde_json::to_vec(&message).unwrap();
            prop_assert_eq!(&appended[7..], &expected[..]);
            prop_assert_eq!(to_vec(&message).unwrap(), expected);
        }
    }

    #[test]
    fn every_escape_is_written_as_serde_json_writes_it() {
        let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
        let text = format!("{every_ascii}é\u{2028}\u{10ffff}{}", "x".repeat(100_000));
        let value = json!({ "text": text, "floats": [0.1, 1e21, -0.0, 1.5e-7, f64::MAX] });
        assert_eq!(to_vec(&value).unwrap(), serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn a_value_without_json_text_is_a_json_error_that_says_why() {
        // Goal: a failure reaches the caller as this crate's error, with the
        // writer's reason in its text. Method: a map whose keys are not strings.
        let map = std::collections::BTreeMap::from([((1u8, 2u8), 3u8)]);
        let error: JsonError = to_vec(&map).unwrap_err();
        assert!(serde_json::to_vec(&map).is_err());
        assert!(!error.to_string().is_empty());
        assert!(to_string(&map).is_err());
        assert!(append(&mut Vec::new(), &map).is_err());
    }
}
