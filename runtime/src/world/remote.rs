//! The remote boundary: workers that run on another host.

use serde::{Deserialize, Serialize};
use std::fmt::Debug;

use super::model::Message;
use super::BoxFuture;

/// What a remote host needs to run a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteLaunch {
    /// The task id the coordinator gave the worker.
    pub task_id: String,
    /// The worker's prompt: for a resumed worker, the message it resumes with.
    pub prompt: String,
    /// The model to run it on.
    pub model: String,
    /// For a resumed worker, the conversation it continues: its transcript, then
    /// the user message holding the new prompt. Empty for a fresh launch, which
    /// starts from `prompt` alone (and leaves the field off the wire).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
}

/// How a remote worker ended, as reported over the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteReport {
    /// The task id.
    pub task_id: String,
    /// Whether the worker finished its work.
    pub succeeded: bool,
    /// The worker's final text, or its error.
    pub text: String,
    /// The worker's conversation as it ended, from its first message: what the
    /// coordinator keeps as its transcript, so that a message can resume it later.
    /// Empty when the host kept none (the coordinator then keeps the final text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
}

/// Why a remote call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The host could not be reached (partition, refused connection).
    #[error("remote host unreachable: {0}")]
    Unreachable(String),
    /// The host answered something that is not a report.
    #[error("bad report from remote host: {0}")]
    BadReport(String),
}

/// A transport to another host that runs workers.
pub trait Remote: Send + Sync + Debug {
    /// Runs a worker remotely and waits for its report.
    fn run(&self, launch: RemoteLaunch) -> BoxFuture<'static, Result<RemoteReport, RemoteError>>;
}
