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
//!
//! It also names the writer of the disk writes a Write or Edit carries out, and of
//! the git commands a Bash call runs on the real disk: while such a call's future is
//! polled, [`current_tool_writer`] is the calling agent and its working directory,
//! and the disk's write observer stamps every write it sees with them, so the escape
//! checker judges each landed write against its writer's root.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use coord_runtime::tools::resolve_path;
use coord_runtime::world::{BoxFuture, ToolCall, ToolContext, ToolOutput, Tools};

use super::{digest_hex, path_into_text, path_text, Name, SimEvent, Trace};

/// The agent behind a Write or Edit call, as the disk's writes are attributed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolWriter {
    /// The calling agent's id.
    pub agent: String,
    /// Its working directory: its worktree, if it has one.
    pub cwd: String,
}

thread_local! {
    /// The Write or Edit call whose future this thread is polling, if any.
    ///
    /// Thread-local because the tools do a call's disk work inside the poll of its
    /// future, and the disk calls its write observer inside that work, on the same
    /// thread: set for exactly the poll, it names the call whose work a write is,
    /// whichever world polls it and however many runs share the process.
    static WRITING_CALL: RefCell<Option<ToolWriter>> = const { RefCell::new(None) };
}

/// The Write or Edit call this thread is carrying out, if any: the writer of a
/// disk write observed now.
pub fn current_tool_writer() -> Option<ToolWriter> {
    WRITING_CALL.with(|call| call.borrow().clone())
}

/// Puts back the writer that was current before a poll, even if the poll panics
/// (a simulated crash unwinds through it).
struct RestoreWriter(Option<ToolWriter>);

impl Drop for RestoreWriter {
    fn drop(&mut self) {
        let previous = self.0.take();
        WRITING_CALL.with(|call| *call.borrow_mut() = previous);
    }
}

/// A tool call's future that names its writer while it is polled.
struct Attributed {
    writer: ToolWriter,
    inner: BoxFuture<'static, ToolOutput>,
}

impl Future for Attributed {
    type Output = ToolOutput;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ToolOutput> {
        let this = self.get_mut();
        let previous = WRITING_CALL.with(|call| call.borrow_mut().replace(this.writer.clone()));
        let _restore = RestoreWriter(previous);
        this.inner.as_mut().poll(cx)
    }
}

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
            if call.name == "Bash" {
                // What a command changes on the disk (a real `git commit`) is its
                // caller's doing.
                let writer = ToolWriter {
                    agent: context.agent_id.clone(),
                    cwd: path_text(&context.cwd),
                };
                return Box::pin(Attributed {
                    writer,
                    inner: self.inner.call(context, call),
                });
            }
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
        // File writes are attributed to their caller; the scratchpad's files are the
        // runtime's, judged against the session root like its other files.
        let running: BoxFuture<'static, ToolOutput> = match tool.as_str() {
            "Write" | "Edit" => Box::pin(Attributed {
                writer: ToolWriter {
                    agent: agent.clone(),
                    cwd: cwd.clone(),
                },
                inner: running,
            }),
            _ => running,
        };
        Box::pin(async move {
            let output = running.await;
            // Recorded when the call is done: its effect, if any, has happened.
            trace.push(
                "tools",
                SimEvent::ToolRan {
                    agent: agent.into(),
                    tool: tool.into(),
                    target: target.into(),
                    cwd: cwd.into(),
                    content_digest: content_digest.map(Name::from),
                    ok: !output.is_error,
                },
            );
            output
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use coord_runtime::world::SystemClock;
    use serde_json::json;

    use super::*;

    /// Tools that note, while a call runs, which writer the disk would see.
    #[derive(Debug, Default)]
    struct SeenWriters(Arc<Mutex<Vec<Option<ToolWriter>>>>);

    impl Tools for SeenWriters {
        fn call(&self, _context: ToolContext, _call: ToolCall) -> BoxFuture<'static, ToolOutput> {
            let seen = self.0.clone();
            Box::pin(async move {
                seen.lock().unwrap().push(current_tool_writer());
                // A second poll, as a call that waits would need.
                tokio::task::yield_now().await;
                seen.lock().unwrap().push(current_tool_writer());
                ToolOutput {
                    content: String::new(),
                    is_error: false,
                }
            })
        }
    }

    #[tokio::test]
    async fn writes_of_a_write_or_edit_are_attributed_for_exactly_their_polls() {
        // Goal: the disk's witness names the agent of a file tool's writes, and no
        // one else's. Method: tools that read the current writer in each poll of a
        // Write, an Edit and a ScratchpadWrite, and outside any call.
        let seen = SeenWriters::default();
        let log = seen.0.clone();
        let trace = Trace::new(Arc::new(SystemClock::new()));
        let tools = WitnessedTools::new(Arc::new(seen), trace);
        let context = ToolContext {
            agent_id: "a1".to_owned(),
            cwd: "/work/.claude/worktrees/w1".into(),
        };
        let call = |name: &str, input: serde_json::Value| ToolCall {
            id: "toolu_1".to_owned(),
            name: name.to_owned(),
            input,
        };
        tools
            .call(
                context.clone(),
                call("Write", json!({"file_path": "a.rs", "content": "x"})),
            )
            .await;
        tools
            .call(
                context.clone(),
                call(
                    "Edit",
                    json!({"file_path": "a.rs", "old_string": "x", "new_string": "y"}),
                ),
            )
            .await;
        tools
            .call(
                context,
                call("ScratchpadWrite", json!({"key": "a1/k", "content": "v"})),
            )
            .await;
        let writer = Some(ToolWriter {
            agent: "a1".to_owned(),
            cwd: "/work/.claude/worktrees/w1".to_owned(),
        });
        assert_eq!(
            *log.lock().unwrap(),
            [
                writer.clone(),
                writer.clone(),
                writer.clone(),
                writer,
                None,
                None
            ]
        );
        assert_eq!(current_tool_writer(), None);
    }
}
