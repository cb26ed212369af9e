//! The clock of a run that may restart: one timeline across the boots of a
//! crashing host.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use coord_runtime::world::{Clock, Sleep};

use super::{StandstillWatch, VirtualClock, SIM_EPOCH_UNIX_MS};

/// A clock whose underlying [`VirtualClock`] is replaced at every boot, so the
/// trace and the disk keep one timeline across restarts. Between boots (before the
/// first, after a crash) no executor runs and the clock is frozen.
///
/// Paused virtual time moves only while the executor parks, so a reading stays
/// true until the executor next parks or unparks, which forgets it (the hooks in
/// `crate::run::run_seed_with_model_layer`). Reading tokio's clock takes its runtime handle and
/// a lock; a seed reads the time some 1,500 times between 600 parks. The kept
/// reading is an atomic, not under the lock: keeping, reading and forgetting it
/// happen at every read and every park.
#[derive(Debug)]
pub struct BootClock {
    current: Mutex<BootTime>,
    /// The kept reading in nanoseconds, or [`NO_READING`].
    reading_ns: AtomicU64,
    standstill: StandstillWatch,
}

/// [`BootClock::reading_ns`] when no reading is kept.
const NO_READING: u64 = u64::MAX;

#[derive(Debug)]
struct BootTime {
    clock: VirtualClock,
    /// Set while no executor runs: the time the clock stopped at.
    frozen_at: Option<Duration>,
}

impl BootClock {
    /// A clock stopped at `at`, with no executor running yet.
    pub fn frozen_at(at: Duration) -> Self {
        Self {
            current: Mutex::new(BootTime {
                clock: VirtualClock::frozen(at),
                frozen_at: Some(at),
            }),
            reading_ns: AtomicU64::new(NO_READING),
            standstill: StandstillWatch::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BootTime> {
        self.current.lock().expect("clock poisoned")
    }

    /// Starts the clock again at `booted_at`. Call inside the boot's executor.
    pub fn reboot(&self, booted_at: Duration) {
        let mut time = self.lock();
        *time = BootTime {
            clock: VirtualClock::new(booted_at),
            frozen_at: None,
        };
        self.forget_reading();
        self.standstill.restart();
    }

    /// Stops the clock where it is: the executor is going away.
    pub fn freeze(&self) {
        let now = self.monotonic();
        self.lock().frozen_at = Some(now);
        self.forget_reading();
    }

    /// Forgets the last reading: the executor is parking or unparking, and time may
    /// move in between.
    pub fn forget_reading(&self) {
        // Relaxed: one seed's executor, its hooks and its readers share one thread.
        self.reading_ns.store(NO_READING, Ordering::Relaxed);
    }

    /// The time as the clock shows it now, from the clock itself.
    fn read_clock(time: &BootTime) -> Duration {
        time.frozen_at.unwrap_or_else(|| time.clock.monotonic())
    }
}

/// A clock whose time line outlives the executor of one boot: the run restarts it
/// at each boot and freezes it when the boot's executor goes away.
pub trait BootTimeline: Clock {
    /// Starts the clock again at `booted_at`, for the boot about to run.
    fn reboot(&self, booted_at: Duration);

    /// Stops the clock where it is: the boot's executor is going away.
    fn freeze(&self);

    /// The watch on this clock's readings for a busy loop.
    fn standstill(&self) -> &StandstillWatch;
}

impl BootTimeline for BootClock {
    fn reboot(&self, booted_at: Duration) {
        BootClock::reboot(self, booted_at);
    }

    fn freeze(&self) {
        BootClock::freeze(self);
    }

    fn standstill(&self) -> &StandstillWatch {
        &self.standstill
    }
}

impl Clock for BootClock {
    fn monotonic(&self) -> Duration {
        let kept_ns = self.reading_ns.load(Ordering::Relaxed);
        if kept_ns != NO_READING {
            let kept = Duration::from_nanos(kept_ns);
            debug_assert_eq!(
                kept,
                Self::read_clock(&self.lock()),
                "virtual time moved without the executor parking"
            );
            self.standstill.read(kept);
            return kept;
        }
        let now = Self::read_clock(&self.lock());
        // A reading past 584 years of virtual time is not kept, only returned.
        if let Ok(now_ns) = u64::try_from(now.as_nanos()) {
            if now_ns != NO_READING {
                self.reading_ns.store(now_ns, Ordering::Relaxed);
            }
        }
        self.standstill.read(now);
        now
    }

    fn unix_ms(&self) -> u64 {
        SIM_EPOCH_UNIX_MS + u64::try_from(self.monotonic().as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let clock = self.lock().clock.clone();
        clock.sleep(duration)
    }
}
