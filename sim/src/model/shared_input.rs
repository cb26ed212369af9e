//! A scripted tool call's input, shared by every response that plays the call.
//!
//! A turn's input is a JSON object, and a copy of one costs hundreds of bytes (a
//! map node and its strings). The runtime keeps every response in its agent's
//! conversation, so a whale run of a thousand workers of five hundred turns kept
//! half a million copies of the same few inputs. [`SharedInput`] holds the value
//! behind an [`Arc`] that each response's `tool_use` block takes a reference to.
//!
//! It reads as the value it holds (`Deref`), and writes copy on write
//! (`DerefMut` is [`Arc::make_mut`]), so a script edited in place (a fault that
//! rewrites a launch, a placeholder resolved) changes only its own copy.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A tool call's input: any JSON value, shared on clone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SharedInput(Arc<serde_json::Value>);

/// The schema of the value it holds: a scenario file writes the bare value.
impl JsonSchema for SharedInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        serde_json::Value::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        serde_json::Value::schema_id()
    }

    fn inline_schema() -> bool {
        serde_json::Value::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        serde_json::Value::json_schema(generator)
    }
}

impl SharedInput {
    /// The shared value, for a response's `tool_use` block.
    pub fn shared(&self) -> Arc<serde_json::Value> {
        Arc::clone(&self.0)
    }
}

impl Default for SharedInput {
    /// An empty object: what a call without an input sends.
    fn default() -> Self {
        Self::from(serde_json::Value::Object(serde_json::Map::new()))
    }
}

impl From<serde_json::Value> for SharedInput {
    fn from(value: serde_json::Value) -> Self {
        Self(Arc::new(value))
    }
}

impl From<SharedInput> for serde_json::Value {
    fn from(input: SharedInput) -> Self {
        Arc::unwrap_or_clone(input.0)
    }
}

impl Deref for SharedInput {
    type Target = serde_json::Value;

    fn deref(&self) -> &serde_json::Value {
        &self.0
    }
}

impl DerefMut for SharedInput {
    /// The value to change: this input's own copy, made now if others share it.
    fn deref_mut(&mut self) -> &mut serde_json::Value {
        Arc::make_mut(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Goal: clones share one value until one of them is changed, and a change
    /// reaches only the changed clone.
    #[test]
    fn clones_share_until_written() {
        let original = SharedInput::from(json!({"file_path": "a.rs"}));
        let mut edited = original.clone();
        assert!(Arc::ptr_eq(&original.shared(), &edited.shared()));
        edited["file_path"] = json!("b.rs");
        assert!(!Arc::ptr_eq(&original.shared(), &edited.shared()));
        assert_eq!(*original, json!({"file_path": "a.rs"}));
        assert_eq!(*edited, json!({"file_path": "b.rs"}));
    }

    /// Goal: it reads and writes as the bare value in scenario files and schemas.
    #[test]
    fn it_serializes_as_the_value_it_holds() {
        let input: SharedInput = serde_json::from_str(r#"{"n": [1, 2]}"#).unwrap();
        assert_eq!(serde_json::to_string(&input).unwrap(), r#"{"n":[1,2]}"#);
        assert_eq!(
            schemars::schema_for!(SharedInput),
            schemars::schema_for!(serde_json::Value)
        );
    }
}
