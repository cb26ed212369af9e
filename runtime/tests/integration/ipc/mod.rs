//! IPC tests: files as the bus (PROTOCOL.md section 4).
//!
//! One submodule per bus file: task output files, mailboxes, their lock files, the
//! scratchpad, and the session layout that names them all. Every test runs on the real
//! disk in its own temporary directory, with a seeded entropy stream and, where time
//! must not pass for real, a [`ManualClock`].

mod layout;
mod lock;
mod mailbox;
mod output;
mod scratch;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coord_runtime::world::{ChaChaEntropy, ManualClock, MemoryJournal, RealDisk, SystemClock};
use coord_runtime::{RuntimeEvent, World};

/// A world on the real disk, with its journal kept for inspection.
pub(crate) struct TestWorld {
    pub world: World,
    pub journal: Arc<MemoryJournal>,
}

impl TestWorld {
    /// Every event journaled so far, oldest first.
    pub fn events(&self) -> Vec<RuntimeEvent> {
        self.journal.events()
    }
}

/// The system clock, entropy seeded with `seed`, the real disk, a memory journal.
pub(crate) fn real_world(seed: u64) -> TestWorld {
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(seed)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    TestWorld { world, journal }
}

/// Like [`real_world`], but time is a [`ManualClock`] whose wall clock starts at
/// `unix_ms`: lock retries run instantly and their waits can be measured.
pub(crate) fn manual_world(seed: u64, unix_ms: u64) -> (TestWorld, Arc<ManualClock>) {
    let journal = Arc::new(MemoryJournal::new());
    let clock = Arc::new(ManualClock::new(unix_ms));
    let world = World {
        clock: clock.clone(),
        entropy: Arc::new(ChaChaEntropy::from_seed(seed)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    (TestWorld { world, journal }, clock)
}

/// The host's wall clock in ms since the epoch: what file mtimes are compared with.
pub(crate) fn host_unix_ms() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the host clock is after 1970");
    u64::try_from(since_epoch.as_millis()).expect("ms since epoch fit in u64")
}

/// A fixed instant (2025-01-01T00:00:00Z) for tests whose timestamps must not vary.
pub(crate) const FIXED_UNIX_MS: u64 = 1_735_689_600_000;

/// One hour: far past the default 10 s stale-lock threshold.
pub(crate) const ONE_HOUR: Duration = Duration::from_secs(3600);
