//! The size of a value as compact JSON, counted without keeping the JSON.
//!
//! Every scripted turn estimates its usage from the size of the request, and a
//! request can carry megabytes (an oversize message stays in the conversation for
//! every later call). [`json_size_bytes`] runs `serde_json`'s own serializer into a
//! writer that only adds up the lengths it is handed, so the count is what
//! `serde_json::to_vec` writes by construction, without the buffer that would hold
//! it. The tests hold it to `serde_json`'s output all the same.
//!
//! A reply's content is counted on every scripted call, and its text can be an
//! oversize message of megabytes: [`content_size_bytes`] counts text blocks
//! directly, eight bytes at a time, where serde_json's escaper looks at each byte.

use coord_runtime::world::ContentBlock;
use serde::Serialize;
use std::io;

/// How many bytes `serde_json::to_vec(value)` writes, or `None` if it fails.
pub fn json_size_bytes<T: Serialize + ?Sized>(value: &T) -> Option<u64> {
    let mut counter = ByteCounter { size_bytes: 0 };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.size_bytes)
}

/// How many bytes `serde_json::to_vec(content)` writes, or `None` if it fails.
/// Text blocks without a breakpoint and tool calls (all a scripted reply holds)
/// are counted directly, their strings by [`json_str_size_bytes`]; other blocks
/// by serde_json's serializer.
pub fn content_size_bytes(content: &[ContentBlock]) -> Option<u64> {
    // `{"type":"text","text":` and the closing `}` around the text's string.
    const TEXT_FRAME_BYTES: u64 = 23;
    // `{"type":"tool_use","id":`, `,"name":`, `,"input":` and the closing `}`.
    const TOOL_USE_FRAME_BYTES: u64 = 24 + 8 + 9 + 1;
    // `[` and `]`, and a comma between neighbours.
    let mut size_bytes = 2 + content.len().saturating_sub(1) as u64;
    for block in content {
        size_bytes += match block {
            ContentBlock::Text {
                text,
                cache_control: None,
            } => TEXT_FRAME_BYTES + json_str_size_bytes(text),
            ContentBlock::ToolUse { id, name, input } => {
                TOOL_USE_FRAME_BYTES
                    + json_str_size_bytes(id)
                    + json_str_size_bytes(name)
                    + value_size_bytes(input)?
            }
            other => json_size_bytes(other)?,
        };
    }
    Some(size_bytes)
}

/// How many bytes `serde_json::to_vec(value)` writes, or `None` if it fails.
fn value_size_bytes(value: &serde_json::Value) -> Option<u64> {
    use serde_json::Value;
    // Brackets or braces, and a comma between neighbours.
    let frame_bytes = |len: usize| 2 + len.saturating_sub(1) as u64;
    Some(match value {
        Value::String(text) => json_str_size_bytes(text),
        Value::Array(items) => {
            let mut size_bytes = frame_bytes(items.len());
            for item in items {
                size_bytes += value_size_bytes(item)?;
            }
            size_bytes
        }
        Value::Object(fields) => {
            let mut size_bytes = frame_bytes(fields.len());
            for (key, field) in fields {
                // The key, its colon, the value.
                size_bytes += json_str_size_bytes(key) + 1 + value_size_bytes(field)?;
            }
            size_bytes
        }
        // Null, booleans and numbers are short: serde_json writes them.
        scalar => json_size_bytes(scalar)?,
    })
}

/// How many bytes `text` takes as a JSON string the way serde_json writes it: its
/// quotes, its bytes, and two bytes for `"`, `\\` and the control characters with
/// a short escape (`\b`, `\f`, `\n`, `\r`, `\t`), six for the other control
/// characters (`\u00XX`). Words of eight bytes holding none of these are skipped
/// whole.
fn json_str_size_bytes(text: &str) -> u64 {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH_BITS: u64 = u64::from_le_bytes([0x80; 8]);
    // Whether some byte of `word` is below `limit` (at most 0x80): the classic
    // test, exact for the first such byte, and all this needs is whether one is.
    let has_byte_below =
        |word: u64, limit: u8| word.wrapping_sub(ONES * u64::from(limit)) & !word & HIGH_BITS != 0;
    let has_byte = |word: u64, byte: u8| has_byte_below(word ^ (ONES * u64::from(byte)), 1);
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut escape_bytes = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("a chunk of eight bytes"));
        if has_byte_below(word, 0x20) || has_byte(word, b'"') || has_byte(word, b'\\') {
            escape_bytes += chunk
                .iter()
                .map(|&byte| escape_extra_bytes(byte))
                .sum::<u64>();
        }
    }
    escape_bytes += chunks
        .remainder()
        .iter()
        .map(|&byte| escape_extra_bytes(byte))
        .sum::<u64>();
    2 + bytes.len() as u64 + escape_bytes
}

/// How many bytes serde_json adds to `byte` when it escapes it in a string.
fn escape_extra_bytes(byte: u8) -> u64 {
    match byte {
        b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
        0x00..=0x1f => 5,
        _ => 0,
    }
}

/// A writer that keeps nothing: it counts the bytes written to it.
struct ByteCounter {
    size_bytes: u64,
}

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.size_bytes += buf.len() as u64;
        Ok(buf.len())
    }

    // serde_json hands over every token with `write_all`: one addition, not the
    // default's loop over `write`.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.size_bytes += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(value: &serde_json::Value) -> u64 {
        serde_json::to_vec(value).expect("serializes").len() as u64
    }

    /// Goal: the counted size is what serde_json writes. Method: values covering
    /// every escape, numbers at their digit boundaries, floats and nesting.
    #[test]
    fn the_size_is_what_serde_json_writes() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(""),
            json!("plain"),
            json!("quote \" backslash \\ slash / tab \t nl \n cr \r bs \u{8} ff \u{c}"),
            json!("control \u{1} \u{1f} del \u{7f} unicode é ✓ 🦀"),
            json!(0),
            json!(9),
            json!(10),
            json!(-1),
            json!(-10),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.5),
            json!(-1.25e-7),
            json!(1e300),
            json!([]),
            json!({}),
            json!([1, [2, [3, []]], {"a": {}}]),
            json!({"type": "object", "properties": {"x\n": {"type": "string"}}, "required": ["x"]}),
        ];
        for value in &values {
            assert_eq!(json_size_bytes(value), Some(written(value)), "{value}");
        }
    }

    /// Goal: derived serializations (internally tagged enums, skipped fields,
    /// options, maps with number keys) count as serde_json writes them.
    #[test]
    fn derived_shapes_count_as_written() {
        use coord_runtime::world::{
            CacheControl, CacheTtl, ContentBlock, Message, ModelRequest, Role, SystemBlock,
            ThinkingConfig, ToolDefinition,
        };
        use std::collections::BTreeMap;

        let message = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("said \"so\"\n"),
                ContentBlock::ToolUse {
                    id: "toolu_1".to_owned(),
                    name: "Write".to_owned(),
                    input: json!({"file_path": "a.rs", "content": "x".repeat(1000)}).into(),
                },
            ],
        };
        let request = ModelRequest {
            model: "claude-test".to_owned(),
            max_tokens: 32_000,
            tools: vec![ToolDefinition {
                name: "Write".to_owned(),
                description: "Writes a file.\n\tCarefully.".to_owned(),
                input_schema: json!({"type": "object", "properties": {"n": {"minimum": 0.5}}})
                    .into(),
                cache_control: Some(CacheControl::ephemeral(Some(CacheTtl::OneHour))),
            }]
            .into(),
            system: vec![SystemBlock::text("You are \"lead\".")].into(),
            messages: vec![
                message,
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::ToolResult {
                            tool_use_id: "toolu_1".to_owned(),
                            content: "<error>\u{1}no</error>".to_owned(),
                            is_error: true,
                            cache_control: None,
                        },
                        ContentBlock::ToolResult {
                            tool_use_id: "toolu_2".to_owned(),
                            content: "ok".to_owned(),
                            is_error: false,
                            cache_control: Some(CacheControl::ephemeral(None)),
                        },
                    ],
                },
            ],
            thinking: Some(ThinkingConfig::Enabled {
                budget_tokens: 1024,
            }),
        };
        let written_request = serde_json::to_vec(&request).expect("serializes").len() as u64;
        assert_eq!(json_size_bytes(&request), Some(written_request));
        let disabled = ModelRequest {
            thinking: Some(ThinkingConfig::Disabled),
            tools: Default::default(),
            system: Default::default(),
            ..request
        };
        let written_disabled = serde_json::to_vec(&disabled).expect("serializes").len() as u64;
        assert_eq!(json_size_bytes(&disabled), Some(written_disabled));

        let numbered: BTreeMap<u32, Option<bool>> = [(1, Some(true)), (20, None)].into();
        let written_numbered = serde_json::to_vec(&numbered).expect("serializes").len() as u64;
        assert_eq!(json_size_bytes(&numbered), Some(written_numbered));
    }

    fn written_content(content: &[coord_runtime::world::ContentBlock]) -> u64 {
        serde_json::to_vec(content).expect("serializes").len() as u64
    }

    /// Goal: content is counted as serde_json writes it, every escape and every
    /// position of it within an eight-byte word included.
    #[test]
    fn content_counts_as_written() {
        use coord_runtime::world::{CacheControl, ContentBlock};
        let mut texts: Vec<String> = vec![
            String::new(),
            "plain".to_owned(),
            "x".repeat(1_000),
            "quote \" backslash \\ slash / tab \t nl \n cr \r bs \u{8} ff \u{c}".to_owned(),
            "control \u{0} \u{1} \u{1f} space \u{20} del \u{7f} é ✓ 🦀".to_owned(),
        ];
        for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', ' ', '\u{7f}', 'é'] {
            for at in 0..17 {
                let mut text = "a".repeat(17);
                text.insert(at, special);
                texts.push(text);
            }
        }
        for text in &texts {
            let content = vec![ContentBlock::text(text.clone())];
            assert_eq!(
                content_size_bytes(&content),
                Some(written_content(&content)),
                "{text:?}"
            );
        }
        let mixed = vec![
            ContentBlock::text("said \"so\""),
            ContentBlock::Text {
                text: "cached".to_owned(),
                cache_control: Some(CacheControl::ephemeral(None)),
            },
            ContentBlock::ToolUse {
                id: "toolu_1".to_owned(),
                name: "Write".to_owned(),
                input: json!({"file_path": "a.rs", "content": "x\ny"}).into(),
            },
            ContentBlock::ToolUse {
                id: "toolu_\"2".to_owned(),
                name: "Odd\tname".to_owned(),
                input: json!({
                    "": [], "e": {}, "n": null, "t": true, "f": false,
                    "numbers": [0, -1, 12345678901234567890u64, 0.5, -1.25e-7, 1e300],
                    "nested\n": [{"a": [1, [2, {"b": "c\u{1}"}]]}, "quote \" \\"],
                })
                .into(),
            },
            ContentBlock::ToolUse {
                id: String::new(),
                name: String::new(),
                input: json!("a bare string").into(),
            },
            ContentBlock::text(""),
        ];
        assert_eq!(content_size_bytes(&mixed), Some(written_content(&mixed)));
        assert_eq!(content_size_bytes(&[]), Some(written_content(&[])));
    }

    proptest::proptest! {
        /// Goal: any text block counts as serde_json writes it.
        #[test]
        fn any_text_counts_as_written(text in proptest::prelude::any::<String>(), repeat in 1usize..4) {
            let content = vec![coord_runtime::world::ContentBlock::text(text.repeat(repeat)); repeat];
            proptest::prop_assert_eq!(content_size_bytes(&content), Some(written_content(&content)));
        }

        /// Goal: any tool call counts as serde_json writes it, whatever its input.
        #[test]
        fn any_tool_call_counts_as_written(id in ".*", name in ".*", input in any_value()) {
            let content = vec![coord_runtime::world::ContentBlock::ToolUse { id, name, input: input.into() }];
            proptest::prop_assert_eq!(content_size_bytes(&content), Some(written_content(&content)));
        }
    }

    /// Arbitrary JSON values, nested a few levels deep.
    fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let scalar = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
        ];
        scalar.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|fields| serde_json::Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    /// Goal: a value serde_json refuses has no size. Method: a map keyed by pairs,
    /// which JSON object keys cannot hold.
    #[test]
    fn a_value_serde_json_refuses_has_no_size() {
        let paired: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(serde_json::to_vec(&paired).is_err());
        assert_eq!(json_size_bytes(&paired), None);
    }
}
