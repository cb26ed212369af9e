//! A request's head: its tool definitions and system blocks, which the prompt cache
//! keys on first and which an agent sends, shared, with every request.

use std::sync::Arc;

use coord_runtime::world::{ModelRequest, SystemBlock, ToolDefinition};

/// A request's tools and system blocks, shared with it.
#[derive(Debug)]
pub(crate) struct RequestHead {
    tools: Arc<Vec<ToolDefinition>>,
    system: Arc<Vec<SystemBlock>>,
}

impl RequestHead {
    pub(crate) fn of(request: &ModelRequest) -> Self {
        Self {
            tools: Arc::clone(&request.tools),
            system: Arc::clone(&request.system),
        }
    }

    /// Whether `request` has this head. Nearly always the same lists, which compare
    /// as pointers.
    pub(crate) fn is_of(&self, request: &ModelRequest) -> bool {
        self.tools == request.tools && self.system == request.system
    }
}
