//! Time, as the runtime sees it.
//!
//! The runtime never reads `Instant::now` or `SystemTime::now` itself: under simulation
//! time is virtual, and a runtime that peeked at the wall clock would stop being
//! reproducible from its seed.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A future that completes once a [`Clock::sleep`] has elapsed.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The runtime's only source of time.
pub trait Clock: Send + Sync + Debug {
    /// Time elapsed since this clock's origin. Monotonic: never goes backwards.
    fn monotonic(&self) -> Duration;

    /// Wall-clock time as milliseconds since the Unix epoch, for timestamps that
    /// end up in files (mailbox messages, lock owners, transcripts).
    fn unix_ms(&self) -> u64;

    /// Completes after `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
}

/// The production clock: the OS monotonic clock, the system wall clock, and tokio timers.
///
/// Monotonic time is read through `tokio::time::Instant`, the same clock
/// [`SystemClock::sleep`] waits on, so a deadline computed from [`Clock::monotonic`]
/// and a sleep agree even when tokio's clock is paused (tests) or driven. Outside a
/// paused runtime it is the OS monotonic clock. `sleep` needs a tokio runtime with
/// the time driver enabled.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: tokio::time::Instant,
}

impl SystemClock {
    /// A clock whose [`Clock::monotonic`] origin is the moment of this call.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn unix_ms(&self) -> u64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            // A wall clock set before 1970 is a misconfigured host, not a runtime state.
            .unwrap_or(Duration::ZERO);
        u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that only moves when told to, for unit tests of time-dependent logic
/// (eviction, stale locks) without a scheduler. `sleep` advances the clock itself
/// and completes at once, so retry loops run instantly and deterministically.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: std::sync::Arc<std::sync::Mutex<ManualTime>>,
}

#[derive(Debug, Default)]
struct ManualTime {
    monotonic: Duration,
    unix_ms_at_origin: u64,
}

impl ManualClock {
    /// A manual clock at monotonic zero whose wall clock reads `unix_ms_at_origin`.
    pub fn new(unix_ms_at_origin: u64) -> Self {
        Self {
            now: std::sync::Arc::new(std::sync::Mutex::new(ManualTime {
                monotonic: Duration::ZERO,
                unix_ms_at_origin,
            })),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().expect("manual clock poisoned");
        now.monotonic += by;
    }
}

impl Clock for ManualClock {
    fn monotonic(&self) -> Duration {
        self.now.lock().expect("manual clock poisoned").monotonic
    }

    fn unix_ms(&self) -> u64 {
        let now = self.now.lock().expect("manual clock poisoned");
        let elapsed_ms = u64::try_from(now.monotonic.as_millis()).unwrap_or(u64::MAX);
        now.unix_ms_at_origin.saturating_add(elapsed_ms)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        self.advance(duration);
        Box::pin(std::future::ready(()))
    }
}
