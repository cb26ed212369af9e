//! Virtual time for a simulated host.
//!
//! Inside a turmoil simulation each host runs on a tokio runtime whose clock is
//! paused and advanced by turmoil one tick per step, so `tokio::time::sleep` waits in
//! virtual time and an hour-long sleep costs a few thousand steps, not an hour.
//! [`SimClock`] reads that virtual time through `turmoil::sim_elapsed` and never
//! touches the wall clock: its wall time is a fixed epoch plus the virtual time
//! elapsed, so every file timestamp a run writes is the same on every machine.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coord_runtime::world::{Clock, Sleep};

/// The wall-clock reading at simulation start: 2026-01-01T00:00:00Z, in ms since the
/// Unix epoch. The same epoch `run` uses for its manual clock.
pub const SIM_EPOCH_UNIX_MS: u64 = 1_767_225_600_000;

/// The clock of code running inside a turmoil host.
///
/// - [`Clock::monotonic`]: virtual time since the simulation started
///   (`turmoil::sim_elapsed`), so it keeps counting across a host's crash and bounce.
/// - [`Clock::unix_ms`]: [`SIM_EPOCH_UNIX_MS`] plus that virtual time.
/// - [`Clock::sleep`]: `tokio::time::sleep` on the host's virtual timer.
///
/// # Panics
/// Reading the clock outside a turmoil host's software (for example from the test
/// body between `sim.step()` calls) panics: there is no virtual time there, and
/// falling back to the wall clock would silently break reproducibility.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimClock {
    _private: (),
}

impl SimClock {
    /// The clock of whichever turmoil host is running when it is read.
    pub const fn new() -> Self {
        Self { _private: () }
    }

    /// [`SIM_EPOCH_UNIX_MS`] as a `SystemTime`, for `turmoil::Builder::epoch`: it keeps
    /// turmoil's own file timestamps on the same time line as this clock.
    pub fn epoch() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(SIM_EPOCH_UNIX_MS)
    }
}

impl Clock for SimClock {
    fn monotonic(&self) -> Duration {
        turmoil::sim_elapsed()
            .expect("SimClock read outside a turmoil host: there is no virtual time here")
    }

    fn unix_ms(&self) -> u64 {
        let elapsed_ms = u64::try_from(self.monotonic().as_millis()).unwrap_or(u64::MAX);
        SIM_EPOCH_UNIX_MS.saturating_add(elapsed_ms)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}
