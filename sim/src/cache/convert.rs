//! Building a [`Prompt`] and a [`Request`] from the runtime's `ModelRequest`, so
//! requests the real runtime makes can be fed to the cache unchanged.

use coord_runtime::world::{
    CacheControl, CacheTtl, ContentBlock, Message, ModelRequest, SystemBlock, ToolDefinition,
};
use serde::Serialize;
use std::time::Duration;

use super::{Block, BlockKind, Prompt, Request};

impl Prompt {
    /// The prefix of `request`: one block per tool, per system block and per message
    /// content block, each with its `cache_control`.
    ///
    /// The bytes compared are each block's JSON without its `cache_control` (moving a
    /// breakpoint changes no prefix bytes); system blocks compare their text. This
    /// conversion reads the whole request, so it costs O(request bytes); a caller
    /// that wants O(new bytes) per turn keeps one `Prompt` per conversation and
    /// pushes only the new blocks.
    pub fn from_model_request(request: &ModelRequest) -> Self {
        let mut prompt = Prompt::new();
        for tool in request.tools.iter() {
            let bare = ToolDefinition {
                cache_control: None,
                ..tool.clone()
            };
            push_with(&mut prompt, Block::tool(to_json(&bare)), tool.cache_control);
        }
        for SystemBlock {
            text,
            cache_control,
            ..
        } in request.system.iter()
        {
            push_with(&mut prompt, Block::system(text), *cache_control);
        }
        for message in &request.messages {
            prompt.push_message(message);
        }
        prompt
    }

    /// Appends `message`'s content blocks, each as its JSON without `cache_control`
    /// and with its own breakpoint, as [`Prompt::from_model_request`] does: a caller
    /// keeping one `Prompt` per conversation pushes only the messages added since
    /// its last request.
    pub fn push_message(&mut self, message: &Message) {
        for (position, content) in message.content.iter().enumerate() {
            let (bare, cache_control) = BareBlock::of(content);
            let kind = BlockKind::Message {
                role: message.role,
                starts_message: position == 0,
            };
            push_with(self, Block::new(kind, to_json(&bare)), cache_control);
        }
    }
}

impl Request {
    /// The parameters of `request` sent by `organization` at `sent_at`.
    pub fn from_model_request(
        organization: impl Into<String>,
        request: &ModelRequest,
        sent_at: Duration,
    ) -> Self {
        Request::new(organization, request.model.clone(), sent_at).thinking(request.thinking)
    }
}

fn push_with(prompt: &mut Prompt, block: Block, cache_control: Option<CacheControl>) {
    let block = match cache_control {
        // An absent TTL is the API's default, five minutes.
        Some(control) => block.with_cache_control(control.ttl.unwrap_or(CacheTtl::FiveMinutes)),
        None => block,
    };
    // A ModelRequest's fields are already in tools → system → messages order.
    prompt
        .push(block)
        .expect("ModelRequest sections are in prefix order");
}

/// A content block without its `cache_control`, borrowed: it serializes as the
/// block does when the breakpoint is absent, without copying the block's text.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BareBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a serde_json::Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl<'a> BareBlock<'a> {
    /// `content` without its breakpoint, and the breakpoint.
    fn of(content: &'a ContentBlock) -> (Self, Option<CacheControl>) {
        match content {
            ContentBlock::Text {
                text,
                cache_control,
            } => (BareBlock::Text { text }, *cache_control),
            ContentBlock::ToolUse { id, name, input } => {
                (BareBlock::ToolUse { id, name, input }, None)
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => (
                BareBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error: *is_error,
                },
                *cache_control,
            ),
        }
    }
}

fn to_json(value: &impl serde::Serialize) -> Vec<u8> {
    // Runtime request types serialize infallibly (plain structs, string keys).
    coord_runtime::json::to_vec(value).expect("runtime request types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bare_block_is_the_block_serialized_without_its_breakpoint() {
        let breakpoint = Some(CacheControl::ephemeral(Some(CacheTtl::OneHour)));
        let blocks = [
            ContentBlock::Text {
                text: "a \"quoted\" line\n".to_owned(),
                cache_control: breakpoint,
            },
            ContentBlock::ToolUse {
                id: "toolu_1".to_owned(),
                name: "Write".to_owned(),
                input: json!({ "path": "a.md", "content": "x" }).into(),
            },
            ContentBlock::ToolResult {
                tool_use_id: "toolu_1".to_owned(),
                content: "written".to_owned(),
                is_error: false,
                cache_control: breakpoint,
            },
            ContentBlock::ToolResult {
                tool_use_id: "toolu_2".to_owned(),
                content: "refused".to_owned(),
                is_error: true,
                cache_control: None,
            },
        ];
        for block in blocks {
            // The oracle: the block itself with its breakpoint taken out.
            let mut stripped = block.clone();
            let expected = match &mut stripped {
                ContentBlock::Text { cache_control, .. }
                | ContentBlock::ToolResult { cache_control, .. } => cache_control.take(),
                ContentBlock::ToolUse { .. } => None,
            };
            let (bare, cache_control) = BareBlock::of(&block);
            assert_eq!(to_json(&bare), serde_json::to_vec(&stripped).unwrap());
            assert_eq!(cache_control, expected);
        }
    }
}
