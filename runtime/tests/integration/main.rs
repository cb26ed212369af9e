//! Integration tests of coord-runtime, one module per area.

mod envelope;
mod ipc;
mod task;
mod world;
