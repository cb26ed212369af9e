//! Integration tests of coord-sim and the coordsim binary, one module per area.

mod api_host;
mod bounds;
mod browser;
mod cassette;
mod check;
mod claude_code_target;
mod cli;
mod cli_safety;
mod coordinator_crash;
mod cost;
mod disk_rules;
mod docs_examples;
mod economics;
mod errors_catalogue;
mod explore;
mod fidelity;
mod fuzz_parsers;
mod fuzz_scenario;
mod import;
mod import_recorded;
mod many_agents;
mod mem_disk;
mod mem_net;
mod model;
mod model_transport;
mod parsers_bad_input;
mod real_disk;
mod remote;
mod report;
mod restart;
mod run;
mod scenario;
mod shrink;
mod standstill;
mod turmoil_world;
mod vcs;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
