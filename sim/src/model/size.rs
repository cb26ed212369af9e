//! The size of a value as compact JSON, counted without keeping the JSON.
//!
//! Every scripted turn estimates its usage from the size of the request, and a
//! request can carry megabytes (an oversize message stays in the conversation for
//! every later call). [`json_size_bytes`] runs `serde_json`'s own serializer into a
//! writer that only adds up the lengths it is handed, so the count is what
//! `serde_json::to_vec` writes by construction, without the buffer that would hold
//! it. The tests hold it to `serde_json`'s output all the same.

use serde::Serialize;
use std::io;

/// How many bytes `serde_json::to_vec(value)` writes, or `None` if it fails.
pub fn json_size_bytes<T: Serialize + ?Sized>(value: &T) -> Option<u64> {
    let mut counter = ByteCounter { size_bytes: 0 };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.size_bytes)
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
                    input: json!({"file_path": "a.rs", "content": "x".repeat(1000)}),
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

    /// Goal: a value serde_json refuses has no size. Method: a map keyed by pairs,
    /// which JSON object keys cannot hold.
    #[test]
    fn a_value_serde_json_refuses_has_no_size() {
        let paired: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(serde_json::to_vec(&paired).is_err());
        assert_eq!(json_size_bytes(&paired), None);
    }
}
