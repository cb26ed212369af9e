//! The clock of a run on the turmoil world: turmoil's virtual time, kept on one
//! timeline across the boots of a crashing coordinator.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use coord_runtime::world::{Clock, Sleep};

use super::{BootTimeline, StandstillWatch, SIM_EPOCH_UNIX_MS};

/// Turmoil's virtual time plus the time the current boot started at.
///
/// Each boot of the turmoil world is a new simulation whose time starts at zero, so
/// the run's time is the boot's start plus `turmoil::sim_elapsed` of whichever host
/// reads it. Every host of a simulation advances by the same tick in each step, so
/// the coordinator, the remote-worker host and the API host read one time line.
/// Between boots (before the first, after a crash) no simulation runs and the
/// clock is frozen.
///
/// Sleeps are `tokio::time::sleep` on the reading host's runtime, whose paused
/// clock turmoil advances one tick per step.
#[derive(Debug)]
pub struct TurmoilBootClock {
    state: Mutex<BootState>,
    standstill: StandstillWatch,
}

#[derive(Debug)]
struct BootState {
    booted_at: Duration,
    /// Set while no simulation runs: the time the clock stopped at.
    frozen_at: Option<Duration>,
}

impl TurmoilBootClock {
    /// A clock stopped at `at`, with no simulation running yet.
    pub fn frozen_at(at: Duration) -> Self {
        Self {
            state: Mutex::new(BootState {
                booted_at: at,
                frozen_at: Some(at),
            }),
            standstill: StandstillWatch::default(),
        }
    }

    /// A clock running on the current simulation's time from zero: the clock of a
    /// simulation with one boot.
    pub fn running() -> Self {
        Self {
            state: Mutex::new(BootState {
                booted_at: Duration::ZERO,
                frozen_at: None,
            }),
            standstill: StandstillWatch::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BootState> {
        self.state.lock().expect("clock poisoned")
    }
}

impl BootTimeline for TurmoilBootClock {
    /// Starts the clock at `booted_at` for a simulation whose time starts at zero.
    /// Outside a turmoil host (before the simulation's first step) it reads
    /// `booted_at`.
    fn reboot(&self, booted_at: Duration) {
        *self.lock() = BootState {
            booted_at,
            frozen_at: None,
        };
        self.standstill.restart();
    }

    fn freeze(&self) {
        let now = self.monotonic();
        self.lock().frozen_at = Some(now);
    }

    fn standstill(&self) -> &StandstillWatch {
        &self.standstill
    }
}

impl Clock for TurmoilBootClock {
    fn monotonic(&self) -> Duration {
        let now = {
            let state = self.lock();
            match state.frozen_at {
                Some(at) => at,
                None => state.booted_at + turmoil::sim_elapsed().unwrap_or_default(),
            }
        };
        self.standstill.read(now);
        now
    }

    fn unix_ms(&self) -> u64 {
        SIM_EPOCH_UNIX_MS + u64::try_from(self.monotonic().as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}
