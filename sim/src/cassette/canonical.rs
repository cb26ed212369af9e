//! The canonical form of a model request, and its hash: the key a replay finds a
//! recorded response by.
//!
//! The key is everything a response continues from, so the whole request is in it:
//! `model`, `max_tokens`, `thinking`, then in prompt-cache order `tools` (name,
//! description, input schema), `system` (each block's text) and `messages` (each
//! message's role and blocks: text; tool use id, name and input; tool result id,
//! content and error flag). Two things are left out because they do not change what
//! the model is asked:
//!
//! - `cache_control` markers, anywhere: where a client places its breakpoints
//!   changes what a call costs, never what it says.
//! - The order of keys inside JSON objects (tool inputs, input schemas): objects
//!   are written with their keys sorted.
//!
//! The canonical text is JSON with a fixed field order: compact for hashing
//! ([`CanonicalRequest::as_str`]), pretty for people and diffs
//! ([`CanonicalRequest::pretty`]). The hash is FNV-1a 64 of the compact text,
//! written as 16 lowercase hex digits ([`RequestHash`]).

use std::fmt;
use std::str::FromStr;

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::{ContentBlock, ModelRequest, Role, ThinkingConfig};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The 64-bit hash of a request's canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestHash(pub u64);

impl fmt::Display for RequestHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Why a text is not a request hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a request hash of 16 lowercase hex digits, found {0:?}")]
pub struct RequestHashError(String);

impl FromStr for RequestHash {
    type Err = RequestHashError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let well_formed = text.len() == 16
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(RequestHashError(text.to_owned()));
        }
        u64::from_str_radix(text, 16)
            .map(RequestHash)
            .map_err(|_| RequestHashError(text.to_owned()))
    }
}

impl Serialize for RequestHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequestHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One node of the canonical document: objects keep the order they were built in.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// A JSON literal, already encoded.
    Literal(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    fn string(text: &str) -> Node {
        Node::Literal(serde_json::to_string(text).expect("a string encodes"))
    }

    fn number(number: u64) -> Node {
        Node::Literal(number.to_string())
    }

    fn boolean(value: bool) -> Node {
        Node::Literal(value.to_string())
    }

    fn object<const N: usize>(fields: [(&str, Node); N]) -> Node {
        Node::Object(
            fields
                .into_iter()
                .map(|(key, node)| (key.to_owned(), node))
                .collect(),
        )
    }

    /// Any JSON value, with every object's keys sorted.
    fn value(value: &Value) -> Node {
        match value {
            Value::Array(items) => Node::Array(items.iter().map(Node::value).collect()),
            Value::Object(fields) => {
                // Sorted here, whatever order the map iterates in: the key must not
                // depend on serde_json's `preserve_order` feature.
                let mut sorted: Vec<(&String, &Value)> = fields.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                Node::Object(
                    sorted
                        .into_iter()
                        .map(|(key, value)| (key.clone(), Node::value(value)))
                        .collect(),
                )
            }
            Value::String(text) => Node::string(text),
            scalar => Node::Literal(scalar.to_string()),
        }
    }

    fn write_compact(&self, out: &mut String) {
        match self {
            Node::Literal(text) => out.push_str(text),
            Node::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    item.write_compact(out);
                }
                out.push(']');
            }
            Node::Object(fields) => {
                out.push('{');
                for (index, (key, node)) in fields.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).expect("a key encodes"));
                    out.push(':');
                    node.write_compact(out);
                }
                out.push('}');
            }
        }
    }

    fn write_pretty(&self, depth: usize, out: &mut String) {
        let indent = |out: &mut String, depth: usize| {
            for _ in 0..depth {
                out.push_str("  ");
            }
        };
        match self {
            Node::Literal(text) => out.push_str(text),
            Node::Array(items) if items.is_empty() => out.push_str("[]"),
            Node::Object(fields) if fields.is_empty() => out.push_str("{}"),
            Node::Array(items) => {
                out.push_str("[\n");
                for (index, item) in items.iter().enumerate() {
                    indent(out, depth + 1);
                    item.write_pretty(depth + 1, out);
                    if index + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                indent(out, depth);
                out.push(']');
            }
            Node::Object(fields) => {
                out.push_str("{\n");
                for (index, (key, node)) in fields.iter().enumerate() {
                    indent(out, depth + 1);
                    out.push_str(&serde_json::to_string(key).expect("a key encodes"));
                    out.push_str(": ");
                    node.write_pretty(depth + 1, out);
                    if index + 1 < fields.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                indent(out, depth);
                out.push('}');
            }
        }
    }
}

/// The canonical document of `request`, in the field order the module header lists.
fn document(request: &ModelRequest) -> Node {
    let thinking = match request.thinking {
        None => Node::Literal("null".to_owned()),
        Some(ThinkingConfig::Enabled { budget_tokens }) => Node::object([
            ("type", Node::string("enabled")),
            ("budget_tokens", Node::number(u64::from(budget_tokens))),
        ]),
        Some(ThinkingConfig::Disabled) => Node::object([("type", Node::string("disabled"))]),
    };
    let tools = request
        .tools
        .iter()
        .map(|tool| {
            Node::object([
                ("name", Node::string(&tool.name)),
                ("description", Node::string(&tool.description)),
                ("input_schema", Node::value(&tool.input_schema)),
            ])
        })
        .collect();
    let system = request
        .system
        .iter()
        .map(|block| Node::string(&block.text))
        .collect();
    let messages = request
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            Node::object([
                ("role", Node::string(role)),
                (
                    "content",
                    Node::Array(message.content.iter().map(block).collect()),
                ),
            ])
        })
        .collect();
    Node::object([
        ("model", Node::string(&request.model)),
        ("max_tokens", Node::number(u64::from(request.max_tokens))),
        ("thinking", thinking),
        ("tools", Node::Array(tools)),
        ("system", Node::Array(system)),
        ("messages", Node::Array(messages)),
    ])
}

/// One content block, without its `cache_control`.
fn block(block: &ContentBlock) -> Node {
    match block {
        ContentBlock::Text { text, .. } => {
            Node::object([("type", Node::string("text")), ("text", Node::string(text))])
        }
        ContentBlock::ToolUse { id, name, input } => Node::object([
            ("type", Node::string("tool_use")),
            ("id", Node::string(id)),
            ("name", Node::string(name)),
            ("input", Node::value(input)),
        ]),
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } => Node::object([
            ("type", Node::string("tool_result")),
            ("tool_use_id", Node::string(tool_use_id)),
            ("content", Node::string(content)),
            ("is_error", Node::boolean(*is_error)),
        ]),
    }
}

/// A request in canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalRequest {
    compact: String,
    hash: RequestHash,
}

impl CanonicalRequest {
    /// The canonical form of `request`.
    pub fn of(request: &ModelRequest) -> Self {
        let mut compact = String::new();
        document(request).write_compact(&mut compact);
        let hash = RequestHash(Fnv1a64::digest(compact.as_bytes()));
        Self { compact, hash }
    }

    /// The compact canonical JSON: what is hashed, and what "common prefix" is
    /// measured on.
    pub fn as_str(&self) -> &str {
        &self.compact
    }

    /// The request's hash.
    pub fn hash(&self) -> RequestHash {
        self.hash
    }

    /// The canonical JSON of `request`, pretty-printed (two-space indent, one
    /// field or item per line, a trailing newline): the text replay diffs compare.
    pub fn pretty(request: &ModelRequest) -> String {
        let mut out = String::new();
        document(request).write_pretty(0, &mut out);
        out.push('\n');
        out
    }
}

/// The hash of `request`'s canonical form.
pub fn request_hash(request: &ModelRequest) -> RequestHash {
    CanonicalRequest::of(request).hash()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::world::{CacheControl, Message, SystemBlock, ToolDefinition};
    use serde_json::json;

    fn request() -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 1024,
            tools: vec![ToolDefinition {
                name: "Read".to_owned(),
                description: "Reads a file.".to_owned(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"file_path": {"type": "string"}},
                })
                .into(),
                cache_control: None,
            }]
            .into(),
            system: vec![SystemBlock::text("You are a worker.")].into(),
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::text("Find the bug.")],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: "toolu_1".to_owned(),
                        name: "Read".to_owned(),
                        input: json!({"file_path": "/work/README.md"}).into(),
                    }],
                },
            ],
            thinking: None,
        }
    }

    #[test]
    fn cache_control_markers_are_not_part_of_the_key() {
        // Goal: breakpoints placed by a client never change the key. Method: mark a
        // tool, a system block and a message block; compare hashes.
        let plain = request();
        let mut marked = plain.clone();
        std::sync::Arc::make_mut(&mut marked.tools)[0].cache_control =
            Some(CacheControl::ephemeral(None));
        std::sync::Arc::make_mut(&mut marked.system)[0].cache_control =
            Some(CacheControl::ephemeral(None));
        marked.messages[0].content[0] = ContentBlock::Text {
            text: "Find the bug.".to_owned(),
            cache_control: Some(CacheControl::ephemeral(None)),
        };
        assert_eq!(request_hash(&plain), request_hash(&marked));
    }

    #[test]
    fn the_pretty_form_is_the_compact_form_reformatted() {
        // Goal: diffs show exactly what is hashed. Method: both parse to one value.
        let request = request();
        let compact: Value = serde_json::from_str(CanonicalRequest::of(&request).as_str()).unwrap();
        let pretty: Value = serde_json::from_str(&CanonicalRequest::pretty(&request)).unwrap();
        assert_eq!(compact, pretty);
        insta::assert_snapshot!(CanonicalRequest::pretty(&request));
    }

    #[test]
    fn request_hashes_print_and_parse_as_16_hex_digits() {
        // Goal: the hash round-trips through its text and rejects anything else.
        let hash = RequestHash(0x00ab_cdef_0123_4567);
        assert_eq!(hash.to_string(), "00abcdef01234567");
        assert_eq!("00abcdef01234567".parse::<RequestHash>(), Ok(hash));
        for bad in [
            "",
            "00ABCDEF01234567",
            "abc",
            "00abcdef012345678",
            "g0abcdef01234567",
        ] {
            assert!(bad.parse::<RequestHash>().is_err(), "{bad:?} parsed");
        }
    }
}
