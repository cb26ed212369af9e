//! A watch on a run's clock for a busy loop: code that keeps reading the time while
//! virtual time cannot move.
//!
//! Virtual time moves only when every task of the host waits. A task that loops
//! without ever waiting for time to pass (a deadline test off by one, a retry with
//! no backoff) holds the clock still for ever: the seed would hang instead of
//! failing, and a sweep over thousands of seeds would never print its repro line.
//! Such a loop reads the clock as it goes round, directly or through the trace and
//! the simulated disk, which stamp what they record with it, so the clock itself
//! can tell. A loop that does none of these (and yields) would still hang its seed.
//! Reads of one instant are counted; past [`STANDSTILL_READS`] of them, the run
//! cannot go on, and whoever waits on [`StandstillWatch::stood_still`] ends it.
//! The count is made on the seed's own thread, in the order its tasks ran, so a
//! standstill happens at the same read on every replay of the seed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Reads of one instant of virtual time that mean the clock stands still for good.
///
/// A run that makes progress reads one instant at most a few dozen times per agent
/// starting then: 23,014 times when one Agent call launches 1,000 workers at once
/// (`scripts/bench-whale`'s scenario), some 10,000 in the sweep over `scenarios/`.
/// Four million is past 170,000 agents starting at one instant, far more than a
/// host holds, and a busy loop reaches it within about three seconds.
pub const STANDSTILL_READS: u64 = 4_000_000;

/// [`StandstillWatch::instant_ns`] before the first read.
const NO_INSTANT: u64 = u64::MAX;

/// Counts the reads of the instant last read, and wakes the run when they pass
/// [`STANDSTILL_READS`].
#[derive(Debug)]
pub struct StandstillWatch {
    /// The instant last read, in nanoseconds of the run's time line.
    instant_ns: AtomicU64,
    /// How many reads in a row returned that instant.
    reads: AtomicU64,
    stood_still: Notify,
}

impl Default for StandstillWatch {
    fn default() -> Self {
        Self {
            instant_ns: AtomicU64::new(NO_INSTANT),
            reads: AtomicU64::new(0),
            stood_still: Notify::new(),
        }
    }
}

impl StandstillWatch {
    /// Counts one read of the clock that returned `now`.
    pub fn read(&self, now: Duration) {
        // Relaxed: one seed's tasks and the clock they read share one thread.
        let now_ns = u64::try_from(now.as_nanos()).unwrap_or(NO_INSTANT - 1);
        if self.instant_ns.load(Ordering::Relaxed) != now_ns {
            self.instant_ns.store(now_ns, Ordering::Relaxed);
            self.reads.store(1, Ordering::Relaxed);
            return;
        }
        let reads = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        if reads == STANDSTILL_READS {
            self.stood_still.notify_waiters();
        }
    }

    /// Forgets the count: a new boot's executor starts from a moving clock.
    pub fn restart(&self) {
        self.instant_ns.store(NO_INSTANT, Ordering::Relaxed);
        self.reads.store(0, Ordering::Relaxed);
    }

    /// Waits until the clock has stood still for [`STANDSTILL_READS`] reads; returns
    /// the instant it stood still at.
    pub async fn stood_still(&self) -> Duration {
        loop {
            // Made before the test, so that a standstill in between still wakes it.
            let notified = self.stood_still.notified();
            if self.reads.load(Ordering::Relaxed) >= STANDSTILL_READS {
                return Duration::from_nanos(self.instant_ns.load(Ordering::Relaxed));
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clock_read_at_one_instant_too_often_stood_still_there() {
        let watch = StandstillWatch::default();
        let instant = Duration::from_millis(1_500);
        for _ in 0..STANDSTILL_READS {
            watch.read(instant);
        }
        assert_eq!(watch.stood_still().await, instant);
    }

    #[test]
    fn a_clock_that_moves_never_stands_still() {
        let watch = StandstillWatch::default();
        for step in 0..STANDSTILL_READS {
            // Two reads of each instant, as a loop that waits between reads makes.
            let now = Duration::from_millis(step / 2);
            watch.read(now);
        }
        let stood_still = std::pin::pin!(watch.stood_still());
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        assert!(std::future::Future::poll(stood_still, &mut context).is_pending());
    }

    #[test]
    fn a_restart_forgets_the_reads_before_it() {
        let watch = StandstillWatch::default();
        let instant = Duration::from_millis(7);
        for _ in 0..STANDSTILL_READS - 1 {
            watch.read(instant);
        }
        watch.restart();
        watch.read(instant);
        assert_eq!(watch.reads.load(Ordering::Relaxed), 1);
    }
}
