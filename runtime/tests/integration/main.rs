//! Integration tests of coord-runtime, one module per area.

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
