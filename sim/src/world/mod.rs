//! The simulated World: what the runtime's `World` boundary is made of under simulation.
//!
//! The runtime touches time, randomness and files only through
//! [`coord_runtime::World`]. Here are the simulated implementations, so that the code
//! under simulation is the production code and only the world around it is simulated:
//!
//! | boundary | simulated implementation |
//! | --- | --- |
//! | clock | [`BootClock`]: paused tokio time on one time line across the coordinator's boots |
//! | clock, on the turmoil world | [`TurmoilBootClock`]: turmoil's virtual time on that same time line |
//! | entropy | a [`ChaChaEntropy`] stream from [`Streams`], per host and boot |
//! | disk | [`MemDisk`]: an in-memory inode model with POSIX crash semantics, asking a [`DiskFaultPolicy`] before each operation |
//! | disk, on the turmoil world | [`TurmoilDisk`]: turmoil's simulated filesystem (`unstable-fs`) on a host of its own ([`TurmoilFsHost`]), whose crash drops what was never synced |
//! | disk, production code | [`RootedRealDisk`]: `RealDisk` on a temp directory under the run's virtual paths |
//! | disk, production code under power cuts | [`RealOnMemory`]: `RealDisk`, its every call made on a [`MemDisk`] by [`MemHostFs`] |
//! | journal | whatever the simulator passes in |
//! | version control, production code | [`RootedGit`]: the runtime's `GitVcs` on the real disk's repository |
//! | shell, on the real disk | [`GitShell`]: a plain `git` command runs the host's git in the run's repository; every other command is scripted |
//! | remote | [`TcpRemote`] over [`mem_network`]: in-memory pipes with partitions from a [`LinkPolicy`] |
//! | remote, on the turmoil world | [`TcpRemote`] over [`PartitionedTurmoilConnector`]: turmoil TCP with the fault engine's partitions as turmoil partitions and holds |
//! | model, over HTTP | the production [`AnthropicProvider`] talking to an [`ApiHost`], over in-memory pipes ([`over_http`]) or turmoil TCP ([`over_turmoil_http`]) |
//!
//! The turmoil disk and the real disk are one [`BackedDisk`] over two stores, so
//! the fault policy, the observer of landed writes and the clock's modification
//! times are written once. `docs/worlds.md` says what each world and disk models.
//!
//! [`Streams`] derives every random stream of a run from its one seed;
//! [`sim_builder`] starts a `turmoil::Builder` seeded from those streams and set to
//! the simulated epoch, [`SIM_EPOCH_UNIX_MS`].
//!
//! [`ChaChaEntropy`]: coord_runtime::world::ChaChaEntropy
//! [`AnthropicProvider`]: coord_runtime::world::anthropic::AnthropicProvider

mod api_host;
mod backed_disk;
mod boot_clock;
mod bus_paths;
mod disk_policy;
mod git_shell;
mod git_worktrees;
mod mem_disk;
mod mem_host_fs;
mod mem_net;
mod real_disk;
mod real_timeout;
mod remote;
mod remote_host;
mod standstill;
mod streams;
mod turmoil_boot_clock;
mod turmoil_connector;
mod turmoil_disk;
mod turmoil_link;
mod vcs;
mod virtual_clock;

pub use api_host::{
    over_http, over_turmoil_http, ApiHost, BodyAdapter, PipeApiConnector, ReceivedRequest,
    Streaming, MESSAGES_PATH, RECEIVED_LOG_RECORDS_MAX,
};
pub use backed_disk::{BackedDisk, Backing};
pub use boot_clock::{BootClock, BootTimeline};
pub use bus_paths::{inbox_path, inbox_write_mode};
pub(crate) use disk_policy::below;
pub use disk_policy::{DiskFault, DiskFaultPolicy, DiskOp, DiskRequest, Verdict};
pub use git_shell::{GitObserver, GitRun, GitShell};
pub use git_worktrees::{init_repository, RootedGit};
pub use mem_disk::{CrashReport, DiskWrite, MemDisk};
pub use mem_host_fs::{MemFile, MemHostFs, RealOnMemory};
pub use mem_net::{mem_network, AlwaysOpen, LinkFate, LinkPolicy, MemConnector, MemListener};
pub use real_disk::{RootedRealDisk, TempDirFiles};
pub use real_timeout::{time_out_for_real, TimeoutSeen};
pub use remote::{
    read_frame, serve_remote_worker, write_frame, Connector, FrameError, RemoteIo, RemoteListener,
    RemoteStream, TcpRemote, TokioConnector, TurmoilConnector, CONNECT_TIMEOUT_DEFAULT,
    FRAME_HEADER_SIZE_BYTES, FRAME_SIZE_BYTES_MAX, LAUNCH_READ_TIMEOUT,
};
pub use remote_host::{serve_remote_host, start_remote_host};
pub use standstill::{StandstillWatch, STANDSTILL_READS};
pub use streams::Streams;
pub use turmoil_boot_clock::TurmoilBootClock;
pub use turmoil_connector::TurmoilApiConnector;
pub use turmoil_disk::{TurmoilDisk, TurmoilFiles, TurmoilFsHost, SYMLINK_HOPS_MAX};
pub use turmoil_link::{HoldingListener, PartitionedTurmoilConnector, TurmoilLink};
pub use vcs::{
    AppliedChange, ChangeKind, ConflictKind, ConflictedFile, MergeError, MergeOutcome, SimVcs,
    TREE_FILES_MAX, UNTRACKED_TOP_DIRS,
};
pub use virtual_clock::VirtualClock;

use std::time::{Duration, UNIX_EPOCH};

/// The Unix time, in milliseconds, at which every simulated clock starts:
/// 2026-01-01T00:00:00Z. A fixed epoch keeps wall-clock readings (file times, dates
/// in prompts) functions of the seed.
pub const SIM_EPOCH_UNIX_MS: u64 = 1_767_225_600_000;

/// A `turmoil::Builder` for a run with these streams: turmoil's generator seeded from
/// the [`Streams::TURMOIL`] stream and its epoch set to [`SIM_EPOCH_UNIX_MS`], so that
/// turmoil's own draws (message latency) are functions of the seed. Every other
/// setting keeps turmoil's default (notably a 10 s simulation limit and a 1 ms tick);
/// set them on the result.
pub fn sim_builder(streams: &Streams) -> turmoil::Builder {
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(streams.seed_for(Streams::TURMOIL))
        .epoch(UNIX_EPOCH + Duration::from_millis(SIM_EPOCH_UNIX_MS));
    builder
}

/// The name of the entropy stream of `host` in its boot number `boot`:
/// `entropy/<host>/boot-<boot>`.
///
/// Each boot draws a new stream: a restarted process gets fresh OS randomness, and a
/// host that replayed its first boot's draws after a crash would regenerate the task
/// ids and lock tokens its earlier life already left on disk.
pub fn host_entropy_stream(host: &str, boot: u32) -> String {
    format!("{}/{host}/boot-{boot}", Streams::ENTROPY)
}
