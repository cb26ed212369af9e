//! Integration tests of coord-runtime, one module per area.

// The seeded defects exist only with the `defects` feature. `cargo test
// --workspace` builds this crate with it, since coord-sim depends on it with the
// feature; alone, run `cargo test -p coord-runtime --features defects`.
mod compaction;
#[cfg(feature = "defects")]
mod defects;
mod envelope;
mod fork;
mod ipc;
mod isolation;
mod profile;
mod prompt;
mod route;
mod session;
mod task;
mod team;
mod tools;
mod world;
