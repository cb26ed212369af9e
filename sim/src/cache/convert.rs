//! Building a [`Prompt`] and a [`Request`] from the runtime's `ModelRequest`, so
//! requests the real runtime makes can be fed to the cache unchanged.

use coord_runtime::world::{
    CacheControl, CacheTtl, ContentBlock, Message, ModelRequest, SystemBlock, ToolDefinition,
};
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
        for tool in &request.tools {
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
        } in &request.system
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
            let (bare, cache_control) = strip_cache_control(content);
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

fn strip_cache_control(content: &ContentBlock) -> (ContentBlock, Option<CacheControl>) {
    let mut bare = content.clone();
    let cache_control = match &mut bare {
        ContentBlock::Text { cache_control, .. }
        | ContentBlock::ToolResult { cache_control, .. } => cache_control.take(),
        ContentBlock::ToolUse { .. } => None,
    };
    (bare, cache_control)
}

fn to_json(value: &impl serde::Serialize) -> Vec<u8> {
    // Runtime request types serialize infallibly (plain structs, string keys).
    serde_json::to_vec(value).expect("runtime request types serialize")
}
