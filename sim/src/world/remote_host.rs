//! The run's remote-worker host. The partitions between it and the coordinator are
//! the [`LinkPolicy`] it is given (the fault engine's `ScheduledPartitions` in a run).
//!
//! A worker launched with `isolation: "remote"` goes through the runtime's real
//! remote path: [`TcpRemote`] frames the launch, [`serve_remote_worker`] answers on
//! the host. The link between them is an in-memory network ([`mem_network`]) on the
//! run's virtual clock. The host runs the worker's script against the same scripted
//! model, with its faults, that every other agent talks to, and reports its last
//! text.
//!
//! On the turmoil world the same host software ([`serve_remote_host`]) is a turmoil
//! host reached over turmoil TCP; see `crate::run`.

use std::sync::Arc;

use coord_runtime::world::{
    Clock, ContentBlock, Message, Model, ModelRequest, RemoteLaunch, RemoteReport, Role, StopReason,
};

use super::{mem_network, serve_remote_worker, LinkPolicy, RemoteListener, TcpRemote};

/// How the remote host appears in messages.
const REMOTE_HOST: &str = "remote-worker:7000";
/// `max_tokens` of the remote worker's model calls.
const REMOTE_MAX_TOKENS: u32 = 8_192;
/// Most model turns a remote worker takes.
const REMOTE_TURNS_MAX: u32 = 50;

/// Starts the remote-worker host on the current executor and returns the
/// coordinator's [`TcpRemote`] to it, over links that `partitions` decides. The host dies with the executor, as a boot's
/// every task does.
pub fn start_remote_host(
    model: Arc<dyn Model>,
    clock: Arc<dyn Clock>,
    partitions: Arc<dyn LinkPolicy>,
) -> TcpRemote {
    let (connector, listener) = mem_network(REMOTE_HOST, partitions);
    tokio::spawn(serve_remote_host(listener, model));
    TcpRemote::new(connector, clock)
}

/// The remote-worker host's software: answers every launch on `listener` with a
/// remote worker talking to `model`, until accepting fails. On the turmoil world
/// this is the body of the remote-worker turmoil host.
pub async fn serve_remote_host<L: RemoteListener>(
    listener: L,
    model: Arc<dyn Model>,
) -> std::io::Result<()> {
    serve_remote_worker(listener, move |launch| {
        let model = model.clone();
        async move { run_remote_worker(model.as_ref(), launch).await }
    })
    .await
}

/// One remote worker: its prompt sent as the first user message (or, resumed, the
/// conversation it was launched with), turns taken until the model ends its turn,
/// and the last text reported back with the whole conversation, which the
/// coordinator keeps as the worker's transcript. The host has no tools of the
/// coordinator's workspace: each tool call is answered with an error result, so a
/// script written for a local worker still runs to its end.
async fn run_remote_worker(model: &dyn Model, launch: RemoteLaunch) -> RemoteReport {
    let mut messages = match launch.messages.is_empty() {
        true => vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text(launch.prompt.clone())],
        }],
        false => launch.messages,
    };
    for _ in 0..REMOTE_TURNS_MAX {
        let request = ModelRequest {
            model: launch.model.clone(),
            max_tokens: REMOTE_MAX_TOKENS,
            tools: Arc::default(),
            system: Arc::default(),
            messages: messages.clone(),
            thinking: None,
        };
        let response = match model.send(Arc::new(request)).await {
            Ok(response) => response,
            Err(error) => {
                return RemoteReport {
                    task_id: launch.task_id,
                    succeeded: false,
                    text: error.to_string(),
                    messages,
                }
            }
        };
        let tool_results: Vec<ContentBlock> = response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, .. } => Some(ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: format!("{name} is not available on the remote host"),
                    is_error: true,
                    cache_control: None,
                }),
                _ => None,
            })
            .collect();
        if response.stop_reason != StopReason::ToolUse || tool_results.is_empty() {
            let text = response
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            messages.push(Message {
                role: Role::Assistant,
                content: response.content,
            });
            return RemoteReport {
                task_id: launch.task_id,
                succeeded: true,
                text,
                messages,
            };
        }
        messages.push(Message {
            role: Role::Assistant,
            content: response.content,
        });
        messages.push(Message {
            role: Role::User,
            content: tool_results,
        });
    }
    RemoteReport {
        task_id: launch.task_id,
        succeeded: false,
        text: format!("the remote worker took {REMOTE_TURNS_MAX} turns without ending"),
        messages,
    }
}
