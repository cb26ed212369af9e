//! The size of a value as compact JSON, counted without writing the JSON.
//!
//! Every scripted turn estimates its usage from the size of the request, and a
//! request can carry megabytes (an oversize message stays in the conversation for
//! every later call). Serializing it only to count the bytes costs a buffer and a
//! byte-at-a-time escape pass; [`json_size_bytes`] is a `serde::Serializer` that
//! adds up what `serde_json::to_vec` would write instead, counting each string's
//! escapes in one branch-free pass. The tests hold it to `serde_json`'s output.

use serde::ser::{self, Serialize};
use std::fmt;

/// How many bytes `serde_json::to_vec(value)` writes, or `None` if it fails.
pub fn json_size_bytes<T: Serialize + ?Sized>(value: &T) -> Option<u64> {
    value.serialize(SizeSerializer).ok()
}

/// Extra bytes each byte takes when escaped in a JSON string: `\"`, `\\` and the
/// short escapes take one more; other control characters are `\u00XX`, five more.
const ESCAPE_EXTRA: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = 5;
        byte += 1;
    }
    table[b'\x08' as usize] = 1;
    table[b'\t' as usize] = 1;
    table[b'\n' as usize] = 1;
    table[b'\x0c' as usize] = 1;
    table[b'\r' as usize] = 1;
    table[b'"' as usize] = 1;
    table[b'\\' as usize] = 1;
    table
};

/// How many bytes [`str_size`] tests for escapes between checks for an early exit.
const ESCAPE_SCAN_CHUNK_BYTES: usize = 256;

/// Whether `byte` is written escaped.
fn escaped(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// A string's size, quotes included.
fn str_size(text: &str) -> u64 {
    // Most text has nothing to escape. The test runs a chunk at a time without
    // stopping early inside a chunk, so that it vectorizes (an early-exit `any`
    // over bytes does not); the table does not vectorize at all.
    let clean = text
        .as_bytes()
        .chunks(ESCAPE_SCAN_CHUNK_BYTES)
        .all(|chunk| {
            !chunk
                .iter()
                .fold(false, |found, &byte| found | escaped(byte))
        });
    if clean {
        return text.len() as u64 + 2;
    }
    let extra: u64 = text
        .as_bytes()
        .iter()
        .map(|&byte| u64::from(ESCAPE_EXTRA[usize::from(byte)]))
        .sum();
    text.len() as u64 + 2 + extra
}

/// The decimal digits of `value`.
fn digits(mut value: u128) -> u64 {
    let mut count = 1;
    while value >= 10 {
        value /= 10;
        count += 1;
    }
    count
}

fn signed_size(value: i128) -> u64 {
    u64::from(value < 0) + digits(value.unsigned_abs())
}

/// Floats are rare in requests: they are written out to be measured exactly.
fn written_size<T: Serialize>(value: T) -> Result<u64, SizeError> {
    serde_json::to_vec(&value)
        .map(|bytes| bytes.len() as u64)
        .map_err(|_| SizeError)
}

/// A value that `serde_json` would refuse (a non-string map key, say).
#[derive(Debug)]
pub struct SizeError;

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value does not serialize to JSON")
    }
}

impl std::error::Error for SizeError {}

impl ser::Error for SizeError {
    fn custom<T: fmt::Display>(_: T) -> Self {
        SizeError
    }
}

/// Counts one value.
#[derive(Clone, Copy)]
struct SizeSerializer;

/// Counts a sequence or map: brackets, separators, elements.
struct Compound {
    size_bytes: u64,
    first: bool,
}

impl Compound {
    fn open() -> Self {
        Compound {
            // The opening and closing bracket.
            size_bytes: 2,
            first: true,
        }
    }

    fn separator(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.size_bytes += 1;
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.separator();
        self.size_bytes += value.serialize(SizeSerializer)?;
        Ok(())
    }

    /// `"key":value`.
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), SizeError> {
        self.separator();
        self.size_bytes += str_size(key) + 1 + value.serialize(SizeSerializer)?;
        Ok(())
    }
}

/// `{"variant":` before a variant's value and `}` after it.
fn variant_wrapper(variant: &str) -> u64 {
    2 + str_size(variant) + 1
}

impl ser::Serializer for SizeSerializer {
    type Ok = u64;
    type Error = SizeError;
    type SerializeSeq = Compound;
    type SerializeTuple = Compound;
    type SerializeTupleStruct = Compound;
    type SerializeTupleVariant = Variant;
    type SerializeMap = MapSize;
    type SerializeStruct = Compound;
    type SerializeStructVariant = Variant;

    fn serialize_bool(self, value: bool) -> Result<u64, SizeError> {
        Ok(if value { 4 } else { 5 })
    }
    fn serialize_i8(self, value: i8) -> Result<u64, SizeError> {
        Ok(signed_size(value.into()))
    }
    fn serialize_i16(self, value: i16) -> Result<u64, SizeError> {
        Ok(signed_size(value.into()))
    }
    fn serialize_i32(self, value: i32) -> Result<u64, SizeError> {
        Ok(signed_size(value.into()))
    }
    fn serialize_i64(self, value: i64) -> Result<u64, SizeError> {
        Ok(signed_size(value.into()))
    }
    fn serialize_i128(self, value: i128) -> Result<u64, SizeError> {
        Ok(signed_size(value))
    }
    fn serialize_u8(self, value: u8) -> Result<u64, SizeError> {
        Ok(digits(value.into()))
    }
    fn serialize_u16(self, value: u16) -> Result<u64, SizeError> {
        Ok(digits(value.into()))
    }
    fn serialize_u32(self, value: u32) -> Result<u64, SizeError> {
        Ok(digits(value.into()))
    }
    fn serialize_u64(self, value: u64) -> Result<u64, SizeError> {
        Ok(digits(value.into()))
    }
    fn serialize_u128(self, value: u128) -> Result<u64, SizeError> {
        Ok(digits(value))
    }
    fn serialize_f32(self, value: f32) -> Result<u64, SizeError> {
        written_size(value)
    }
    fn serialize_f64(self, value: f64) -> Result<u64, SizeError> {
        written_size(value)
    }
    fn serialize_char(self, value: char) -> Result<u64, SizeError> {
        Ok(str_size(value.encode_utf8(&mut [0; 4])))
    }
    fn serialize_str(self, value: &str) -> Result<u64, SizeError> {
        Ok(str_size(value))
    }
    fn serialize_bytes(self, value: &[u8]) -> Result<u64, SizeError> {
        // An array of numbers.
        let mut seq = Compound::open();
        for byte in value {
            seq.element(byte)?;
        }
        Ok(seq.size_bytes)
    }
    fn serialize_none(self) -> Result<u64, SizeError> {
        Ok(4)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<u64, SizeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<u64, SizeError> {
        Ok(4)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<u64, SizeError> {
        Ok(4)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<u64, SizeError> {
        Ok(str_size(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<u64, SizeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<u64, SizeError> {
        Ok(variant_wrapper(variant) + value.serialize(self)?)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound, SizeError> {
        Ok(Compound::open())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound, SizeError> {
        Ok(Compound::open())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound, SizeError> {
        Ok(Compound::open())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant, SizeError> {
        Ok(Variant {
            wrapper_bytes: variant_wrapper(variant),
            inner: Compound::open(),
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapSize, SizeError> {
        Ok(MapSize {
            inner: Compound::open(),
        })
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound, SizeError> {
        Ok(Compound::open())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant, SizeError> {
        Ok(Variant {
            wrapper_bytes: variant_wrapper(variant),
            inner: Compound::open(),
        })
    }
}

impl ser::SerializeSeq for Compound {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.element(value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.size_bytes)
    }
}

impl ser::SerializeTuple for Compound {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.element(value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.size_bytes)
    }
}

impl ser::SerializeTupleStruct for Compound {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.element(value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.size_bytes)
    }
}

impl ser::SerializeStruct for Compound {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SizeError> {
        self.field(key, value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.size_bytes)
    }
}

/// A tuple or struct variant: `{"variant":[..]}` or `{"variant":{..}}`.
struct Variant {
    wrapper_bytes: u64,
    inner: Compound,
}

impl ser::SerializeTupleVariant for Variant {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.inner.element(value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.wrapper_bytes + self.inner.size_bytes)
    }
}

impl ser::SerializeStructVariant for Variant {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SizeError> {
        self.inner.field(key, value)
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.wrapper_bytes + self.inner.size_bytes)
    }
}

/// A map: keys are written as strings, as `serde_json` writes them.
struct MapSize {
    inner: Compound,
}

impl ser::SerializeMap for MapSize {
    type Ok = u64;
    type Error = SizeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SizeError> {
        self.inner.separator();
        // serde_json quotes keys that are numbers or booleans; measuring the key as
        // a string value gives that exactly, and anything else it refuses.
        let key = serde_json::to_value(key).map_err(|_| SizeError)?;
        self.inner.size_bytes += 1 + match &key {
            serde_json::Value::String(text) => str_size(text),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => str_size(&key.to_string()),
            _ => return Err(SizeError),
        };
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SizeError> {
        self.inner.size_bytes += value.serialize(SizeSerializer)?;
        Ok(())
    }
    fn end(self) -> Result<u64, SizeError> {
        Ok(self.inner.size_bytes)
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
}
