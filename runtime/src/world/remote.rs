//! The remote boundary: workers that run on another host.

use serde::{Deserialize, Serialize};
use std::fmt::Debug;

use super::BoxFuture;

/// What a remote host needs to run a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLaunch {
    /// The task id the coordinator gave the worker.
    pub task_id: String,
    /// The worker's prompt.
    pub prompt: String,
    /// The model to run it on.
    pub model: String,
}

/// How a remote worker ended, as reported over the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteReport {
    /// The task id.
    pub task_id: String,
    /// Whether the worker finished its work.
    pub succeeded: bool,
    /// The worker's final text, or its error.
    pub text: String,
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
