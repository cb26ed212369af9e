//! The seed's draws: one `ChaCha8Rng` seeded with the seed alone, asked in a fixed
//! order, so the same seed always draws the same program.

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::Latency;

/// The seed's draws, with the few shapes the generator needs.
pub(super) struct Draw(ChaCha8Rng);

impl Draw {
    pub(super) fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in `0..bound` (`bound` > 0).
    pub(super) fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "a draw needs at least one outcome");
        crate::world::below(&mut self.0, bound)
    }

    /// Uniform in `0..bound` as an index (`bound` > 0).
    pub(super) fn index(&mut self, bound: usize) -> usize {
        self.below(bound as u64) as usize
    }

    /// True with probability `numerator / denominator`.
    pub(super) fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    /// One of `items` (not empty), uniformly.
    pub(super) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }

    /// A uniform latency whose low end is `min_ms` plus up to `spread_ms`, and whose
    /// width is up to `spread_ms` more.
    pub(super) fn latency_ms(&mut self, min_ms: u64, spread_ms: u64) -> Latency {
        let low_ms = min_ms + self.below(spread_ms);
        Latency::Uniform {
            min_ms: low_ms,
            max_ms: low_ms + self.below(spread_ms) + 1,
        }
    }
}
