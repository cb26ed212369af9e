//! The World boundary: every effect the runtime has on the world goes through here.
//!
//! The runtime never calls `std::fs`, `std::time`, a global RNG, `std::process` or the
//! network itself. It is handed a [`World`] of trait objects at construction: the real
//! ones in production, simulated ones in `coord-sim`. There is no "sim mode" inside
//! the runtime; the code under simulation is the production code.
//!
//! | boundary | trait | production implementation |
//! | --- | --- | --- |
//! | time | [`Clock`] | [`SystemClock`] |
//! | randomness | [`Entropy`] | [`ChaChaEntropy::from_os`] |
//! | files | [`Disk`] | [`RealDisk`] (`O_NOFOLLOW`, fsync, rename), its calls made on a [`HostFs`]: [`StdFs`] |
//! | events | [`Journal`] | [`TracingJournal`] |
//! | model | [`Model`] | [`anthropic::AnthropicProvider`] (HTTP) |
//! | tools | [`Tools`] | real Read/Write/Edit/Bash |
//! | shell | [`Shell`] | `sh -c` via tokio |
//! | version control | [`Vcs`] | `git worktree` |
//! | other hosts | [`Remote`] | network transport |

pub mod anthropic;
mod clock;
mod disk;
mod entropy;
mod git;
mod host_fs;
mod journal;
mod model;
mod remote;
mod shell;
mod tools;
mod vcs;

pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use disk::{Disk, FileKind, FileMeta, RealDisk, Reread};
pub use entropy::{ChaChaEntropy, Entropy};
pub use git::GitVcs;
pub use host_fs::{HostFs, OpenHow, StdFs};
pub use journal::{Journal, MemoryJournal, TracingJournal};
pub use model::{
    CacheControl, CacheControlKind, CacheCreation, CacheTtl, ContentBlock, Message, Model,
    ModelError, ModelRequest, ModelResponse, Role, StopReason, SystemBlock, TextKind,
    ThinkingConfig, ToolDefinition, Usage,
};
pub use remote::{Remote, RemoteError, RemoteLaunch, RemoteReport};
pub use shell::{RealShell, Shell, ShellCommand, ShellOutput};
pub use tools::{ToolCall, ToolContext, ToolOutput, Tools};
pub use vcs::{Vcs, Worktree};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed, sendable future: the return type of the async boundary traits.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The handles through which the runtime's file IPC reaches time, randomness, files
/// and its event log. Cheap to clone.
#[derive(Debug, Clone)]
pub struct World {
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Randomness.
    pub entropy: Arc<dyn Entropy>,
    /// Files.
    pub disk: Arc<dyn Disk>,
    /// Where runtime events go.
    pub journal: Arc<dyn Journal>,
}

impl World {
    /// The production world: system clock, OS-seeded entropy, the real disk, and
    /// events logged through `tracing`.
    pub fn real() -> Self {
        Self {
            clock: Arc::new(SystemClock::new()),
            entropy: Arc::new(ChaChaEntropy::from_os()),
            disk: Arc::new(RealDisk::new()),
            journal: Arc::new(TracingJournal),
        }
    }
}
