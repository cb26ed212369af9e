//! The clock of the single-host path: tokio's paused clock, from a fixed epoch.

use std::time::Duration;

use coord_runtime::world::{Clock, Sleep};

use super::SIM_EPOCH_UNIX_MS;

/// Virtual time on a paused current-thread tokio runtime, which jumps straight to
/// the next timer whenever every task is idle: long model latencies cost nothing.
/// `booted_at` carries time across a host restart (a new runtime starts its clock
/// again), so the trace's times keep increasing.
#[derive(Debug, Clone)]
pub struct VirtualClock {
    origin: tokio::time::Instant,
    booted_at: Duration,
}

impl VirtualClock {
    /// A clock reading `booted_at` now. Call inside the runtime it will sleep on.
    pub fn new(booted_at: Duration) -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            booted_at,
        }
    }
}

impl VirtualClock {
    /// A clock for use outside any runtime, which its owner reads as frozen at
    /// `at`; only its `booted_at` is meaningful.
    pub fn frozen(at: Duration) -> Self {
        Self {
            origin: tokio::time::Instant::from_std(std::time::Instant::now()),
            booted_at: at,
        }
    }
}

impl Clock for VirtualClock {
    fn monotonic(&self) -> Duration {
        self.booted_at + self.origin.elapsed()
    }

    fn unix_ms(&self) -> u64 {
        SIM_EPOCH_UNIX_MS + u64::try_from(self.monotonic().as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}
