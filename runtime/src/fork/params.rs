//! The cache-safe parameters a fork inherits from its parent (PROTOCOL.md §6).
//!
//! Anthropic's prompt cache keys on the request prefix: tools, then system, then
//! messages, under one model, thinking configuration and `max_tokens`. A fork that
//! reuses exactly these values from its parent's last request reads the parent's
//! cache entry instead of paying to write its own; any other value is a cache break.

use std::sync::Arc;

use crate::world::{Message, ModelRequest, SystemBlock, ThinkingConfig, ToolDefinition};

/// The parts of a parent's last request that a fork must reuse byte for byte.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSafeParams {
    /// The system prompt blocks, shared with the request they came from.
    pub system: Arc<Vec<SystemBlock>>,
    /// The advertised tool definitions, shared with the request they came from.
    pub tools: Arc<Vec<ToolDefinition>>,
    /// The model id.
    pub model: String,
    /// The extended-thinking configuration.
    pub thinking: Option<ThinkingConfig>,
    /// The output token limit, part of the cache key.
    pub max_tokens: u32,
    /// The conversation so far: every message of the parent's last request.
    pub messages: Vec<Message>,
}

impl CacheSafeParams {
    /// The cache-safe parameters of `request`, the parent's last request.
    pub fn from_request(request: &ModelRequest) -> CacheSafeParams {
        CacheSafeParams {
            messages: request.messages.clone(),
            ..CacheSafeParams::head_of(request)
        }
    }

    /// The cache-safe parameters of `request` without its conversation: what must
    /// stay the same from one turn of an agent to the next. Built without copying
    /// the messages, which a long session would pay for at every turn.
    pub fn head_of(request: &ModelRequest) -> CacheSafeParams {
        CacheSafeParams {
            system: request.system.clone(),
            tools: request.tools.clone(),
            model: request.model.clone(),
            thinking: request.thinking,
            max_tokens: request.max_tokens,
            messages: Vec::new(),
        }
    }

    /// The request these parameters came from (equal to it field for field).
    pub fn to_request(&self) -> ModelRequest {
        ModelRequest {
            model: self.model.clone(),
            max_tokens: self.max_tokens,
            tools: self.tools.clone(),
            system: self.system.clone(),
            messages: self.messages.clone(),
            thinking: self.thinking,
        }
    }
}
