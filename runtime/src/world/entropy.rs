//! Randomness, as the runtime sees it.
//!
//! Every random draw (task ids, lock-retry jitter, temp-file names) comes from an
//! injected [`Entropy`], so a simulated run is a pure function of its seed.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::fmt::Debug;
use std::sync::Mutex;

/// The runtime's only source of randomness.
pub trait Entropy: Send + Sync + Debug {
    /// The next 64 random bits.
    fn next_u64(&self) -> u64;

    /// A uniform draw from `0..bound`. `bound` must be non-zero.
    ///
    /// Rejection sampling keeps the draw unbiased; the loop ends with probability one
    /// and needs more than two rounds with probability below 1/4.
    fn below(&self, bound: u64) -> u64 {
        assert!(bound > 0, "Entropy::below needs a non-zero bound");
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let draw = self.next_u64();
            if draw < zone {
                return draw % bound;
            }
        }
    }
}

/// A ChaCha8 stream behind a mutex: seeded from the OS in production, or from a
/// fixed seed where a test or a simulation needs to replay the same draws.
#[derive(Debug)]
pub struct ChaChaEntropy {
    rng: Mutex<ChaCha8Rng>,
}

impl ChaChaEntropy {
    /// Seeded from the operating system's randomness: the production source.
    pub fn from_os() -> Self {
        Self {
            rng: Mutex::new(ChaCha8Rng::from_os_rng()),
        }
    }

    /// Seeded from `seed`: the same seed yields the same stream.
    pub fn from_seed(seed: u64) -> Self {
        Self {
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        }
    }
}

impl Entropy for ChaChaEntropy {
    fn next_u64(&self) -> u64 {
        self.rng.lock().expect("entropy poisoned").next_u64()
    }
}
