//! Seeded streams: one run seed, one independent random stream per component.
//!
//! Every random choice of a simulated run (the runtime's entropy, disk faults, model
//! latency, scheduling, turmoil's own draws) comes from a stream derived from the run
//! seed and the component's name, never from a shared generator. Enabling a fault, or
//! drawing one more latency sample, therefore cannot shift the draws of any other
//! component: each stream is a function of `(seed, name)` alone.
//!
//! A stream's seed is FNV-1a 64 over the run seed's little-endian bytes followed by
//! the component name (the derivation `run` already uses), expanded into a
//! [`ChaCha8Rng`] with `seed_from_u64`. [`Streams::entropy`] gives the runtime's
//! [`ChaChaEntropy`] over the same stream, so `streams.rng(name)` and
//! `streams.entropy(name)` yield the same numbers.

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::ChaChaEntropy;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The run seed and the streams derived from it, one per component name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    seed: u64,
}

impl Streams {
    /// The runtime's [`Entropy`](coord_runtime::world::Entropy) (ids, tokens, jitter).
    pub const ENTROPY: &'static str = "entropy";
    /// The swarm's fault draws.
    pub const FAULTS: &'static str = "faults";
    /// Simulated model and tool latency.
    pub const LATENCY: &'static str = "latency";
    /// Interleaving choices of the scenario driver.
    pub const SCHEDULE: &'static str = "schedule";
    /// turmoil's own generator (message latency).
    pub const TURMOIL: &'static str = "turmoil";
    /// The simulated API host's choices of how to report an error.
    pub const API_HOST: &'static str = "api-host";

    /// The streams of run `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { seed }
    }

    /// The run seed.
    pub const fn seed(&self) -> u64 {
        self.seed
    }

    /// The 64-bit seed of the stream named `component`.
    pub fn seed_for(&self, component: &str) -> u64 {
        assert!(!component.is_empty(), "a stream needs a component name");
        let mut hasher = Fnv1a64::new();
        hasher.update(&self.seed.to_le_bytes());
        hasher.update(component.as_bytes());
        hasher.finish()
    }

    /// A fresh generator at the start of the stream named `component`. Two calls with
    /// the same name give two generators that yield the same sequence.
    pub fn rng(&self, component: &str) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed_for(component))
    }

    /// The runtime's entropy source over the stream named `component`.
    pub fn entropy(&self, component: &str) -> ChaChaEntropy {
        ChaChaEntropy::from_seed(self.seed_for(component))
    }
}
