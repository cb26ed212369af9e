//! The simulated World: what the runtime's `World` boundary is made of under simulation.
//!
//! The runtime touches time, randomness and files only through
//! [`coord_runtime::World`]. Here are the simulated implementations, so that the code
//! under simulation is the production code and only the world around it is simulated:
//!
//! | boundary | simulated implementation |
//! | --- | --- |
//! | clock | [`SimClock`]: turmoil's virtual time from a fixed epoch |
//! | entropy | a [`ChaChaEntropy`] stream from [`Streams`], per host and boot |
//! | disk | [`SimDisk`]: turmoil's simulated filesystem, with [`DiskFaults`] hooks |
//! | disk, without turmoil | [`MemDisk`]: an in-memory inode model with POSIX crash semantics, with [`DiskFaults`] hooks |
//! | disk, production code | [`RootedRealDisk`]: `RealDisk` on a temp directory under the run's virtual paths, with the same fault hooks |
//! | journal | whatever the simulator passes in |
//! | remote, without turmoil | [`TcpRemote`] over [`mem_network`]: in-memory pipes with partitions from a [`LinkPolicy`] |
//! | model, over the network | the production [`AnthropicProvider`] over [`TurmoilApiConnector`], talking to an [`ApiHost`] turmoil host with [`ApiFault`]s |
//! | remote, on the turmoil world | [`TcpRemote`] over [`PartitionedTurmoilConnector`]: turmoil TCP with the fault engine's partitions as turmoil partitions and holds |
//! | clock, on the turmoil world | [`TurmoilBootClock`]: turmoil's virtual time on one time line across boots |
//!
//! [`Streams`] derives every random stream of a run from its one seed.
//! [`sim_builder`] starts a `turmoil::Builder` seeded from those streams and set to
//! [`SimClock`]'s epoch; [`host_world`] assembles the [`World`] that software on one
//! simulated host runs against.
//!
//! ```
//! use std::sync::Arc;
//! use coord_runtime::world::{Clock, MemoryJournal};
//! use coord_sim::world::{host_world, sim_builder, SimDisk, Streams, SIM_EPOCH_UNIX_MS};
//!
//! let streams = Streams::new(7);
//! let mut sim = sim_builder(&streams).build();
//! sim.client("coordinator", async move {
//!     let world = host_world(&streams, "coordinator", 0, SimDisk::new(), Arc::new(MemoryJournal::new()));
//!     world.disk.create_dir_all("/session".as_ref())?;
//!     world.disk.create_new("/session/hello".as_ref(), b"hi")?;
//!     assert_eq!(world.disk.read("/session/hello".as_ref())?, b"hi");
//!     assert_eq!(world.clock.unix_ms(), SIM_EPOCH_UNIX_MS);
//!     Ok(())
//! });
//! sim.run().unwrap();
//! ```
//!
//! [`ChaChaEntropy`]: coord_runtime::world::ChaChaEntropy
//! [`AnthropicProvider`]: coord_runtime::world::anthropic::AnthropicProvider

mod api_host;
mod boot_clock;
mod clock;
mod disk;
mod faults;
mod mem_disk;
mod mem_net;
mod real_disk;
mod remote;
mod remote_host;
mod streams;
mod turmoil_boot_clock;
mod turmoil_connector;
mod turmoil_link;
mod vcs;
mod virtual_clock;

pub use api_host::{
    over_http, over_turmoil_http, ApiFault, ApiFaultPlan, ApiFaultRule, ApiFaultRuleError,
    ApiFaultTrigger, ApiHost, PipeApiConnector, ReceivedRequest, Streaming, API_FAULT_STREAM,
    MESSAGES_PATH, RECEIVED_LOG_RECORDS_MAX,
};
pub use boot_clock::{BootClock, BootTimeline};
pub use clock::{SimClock, SIM_EPOCH_UNIX_MS};
pub use disk::SimDisk;
pub(crate) use faults::below;
pub use faults::{
    DiskFault, DiskFaultPolicy, DiskFaultRule, DiskFaultRuleError, DiskFaults, DiskOp, DiskRequest,
    FaultEffect, FaultRecord, OpMatch, PathMatch, Ratio, RatioError, TornLength, Trigger, Verdict,
    FAULT_LOG_RECORDS_MAX,
};
pub use mem_disk::{CrashReport, DiskWrite, MemDisk};
pub use mem_net::{mem_network, AlwaysOpen, LinkFate, LinkPolicy, MemConnector, MemListener};
pub use real_disk::RootedRealDisk;
pub use remote::{
    read_frame, serve_remote_worker, write_frame, Connector, FrameError, RemoteIo, RemoteListener,
    RemoteStream, TcpRemote, TokioConnector, TurmoilConnector, CONNECT_TIMEOUT_DEFAULT,
    FRAME_HEADER_SIZE_BYTES, FRAME_SIZE_BYTES_MAX, LAUNCH_READ_TIMEOUT,
};
pub use remote_host::{serve_remote_host, start_remote_host};
pub use streams::Streams;
pub use turmoil_boot_clock::TurmoilBootClock;
pub use turmoil_connector::TurmoilApiConnector;
pub use turmoil_link::{HoldingListener, PartitionedTurmoilConnector, TurmoilLink};
pub use vcs::{
    AppliedChange, ChangeKind, ConflictKind, ConflictedFile, MergeError, MergeOutcome, SimVcs,
    TREE_FILES_MAX, UNTRACKED_TOP_DIRS,
};
pub use virtual_clock::VirtualClock;

use std::sync::Arc;

use coord_runtime::world::Journal;
use coord_runtime::World;

/// A `turmoil::Builder` for a run with these streams: turmoil's generator seeded from
/// the [`Streams::TURMOIL`] stream and its epoch set to [`SimClock::epoch`], so that
/// turmoil's own draws (fs sync probability, torn writes on crash, message latency)
/// and file timestamps are functions of the seed. Every other setting keeps turmoil's
/// default (notably a 10 s simulation limit and a 1 ms tick); set them on the result.
pub fn sim_builder(streams: &Streams) -> turmoil::Builder {
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(streams.seed_for(Streams::TURMOIL))
        .epoch(SimClock::epoch());
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

/// The [`World`] for software on simulated `host` in boot number `boot` (0 for the
/// first start, +1 per bounce): [`SimClock`], the entropy stream
/// [`host_entropy_stream`]`(host, boot)` of `streams`, `disk`, and `journal`.
///
/// The returned world's clock and disk work only inside that turmoil host.
pub fn host_world(
    streams: &Streams,
    host: &str,
    boot: u32,
    disk: SimDisk,
    journal: Arc<dyn Journal>,
) -> World {
    World {
        clock: Arc::new(SimClock::new()),
        entropy: Arc::new(streams.entropy(&host_entropy_stream(host, boot))),
        disk: Arc::new(disk),
        journal,
    }
}
