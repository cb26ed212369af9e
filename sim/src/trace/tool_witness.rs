//! The tool witness: every file and scratchpad access a tool carried out, as the
//! world saw it.
//!
//! [`WitnessedTools`] sits between the runtime's tool gate and the tools that touch
//! the disk, so it sees exactly the calls the gate let through and what each
//! returned, whatever the runtime journals about them. Each Read, Write, Edit,
//! ScratchpadRead and ScratchpadWrite becomes a `tool_ran` trace event naming the
//! calling agent, its working directory, the resolved target and whether the call
//! succeeded. The lost-update and escape checkers judge these, not the runtime's
//! own reports.

use std::sync::Arc;

use coord_runtime::tools::resolve_path;
use coord_runtime::world::{BoxFuture, ToolCall, ToolContext, ToolOutput, Tools};

use super::{digest_hex, path_into_text, path_text, SimEvent, Trace};

/// The target prefix of a scratchpad key, so keys and file paths never collide.
pub const SCRATCH_TARGET_PREFIX: &str = "scratch:";

/// Tools whose every file and scratchpad access is recorded into the trace.
#[derive(Debug)]
pub struct WitnessedTools {
    inner: Arc<dyn Tools>,
    trace: Trace,
}

impl WitnessedTools {
    /// Witnesses the calls `inner` carries out, into `trace`.
    pub fn new(inner: Arc<dyn Tools>, trace: Trace) -> Self {
        Self { inner, trace }
    }
}

/// What `call` reads or writes: a resolved file path, or a scratchpad key under
/// [`SCRATCH_TARGET_PREFIX`]. `None` for tools that touch neither, and for calls
/// whose input names no target (the tool refuses those itself).
fn target_of(context: &ToolContext, call: &ToolCall) -> Option<String> {
    let text = |key: &str| call.input.get(key).and_then(|value| value.as_str());
    match call.name.as_str() {
        "Read" | "Write" | "Edit" => {
            let file_path = text("file_path")?;
            Some(path_into_text(resolve_path(&context.cwd, file_path)))
        }
        "ScratchpadRead" | "ScratchpadWrite" => {
            Some(format!("{SCRATCH_TARGET_PREFIX}{}", text("key")?))
        }
        _ => None,
    }
}

impl Tools for WitnessedTools {
    fn call(&self, context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        let Some(target) = target_of(&context, &call) else {
            return self.inner.call(context, call);
        };
        let tool = call.name.clone();
        let content_digest = match tool.as_str() {
            "Write" | "ScratchpadWrite" => call
                .input
                .get("content")
                .and_then(|content| content.as_str())
                .map(digest_hex),
            _ => None,
        };
        let agent = context.agent_id.clone();
        let cwd = path_text(&context.cwd);
        let trace = self.trace.clone();
        let running = self.inner.call(context, call);
        Box::pin(async move {
            let output = running.await;
            // Recorded when the call is done: its effect, if any, has happened.
            trace.push(
                "tools",
                SimEvent::ToolRan {
                    agent,
                    tool,
                    target,
                    cwd,
                    content_digest,
                    ok: !output.is_error,
                },
            );
            output
        })
    }
}
