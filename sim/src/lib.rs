//! # coord-sim
//!
//! The simulator side of coordsim: it drives the real `coord-runtime` through
//! scripted scenarios under seeded randomness, records every observable step in a
//! trace, checks the protocol's invariants on that trace, and reports failures with
//! the one command that reproduces them.
//!
//! - [`scenario`]: the TOML scenario format and its loader (`file:line:column` errors).
//! - [`run`]: one scenario under one seed: the boot loop that wires the real runtime
//!   to the simulated world, the model tap and the fault engine.
//! - [`fault`]: the one fault engine: the fault vocabulary, the fault book, the swarm
//!   draw, and one adapter per effect (disk, model, remote, outside world).
//! - [`trace`]: the ordered record of a run and its hash.
//! - [`cache`]: the simulated prompt cache, its rules as data, `usage` in tokens and
//!   cache-break reports.
//! - [`check`]: invariant checkers that read only the trace, and the verdict that
//!   turns a seed's violations into its failures.
//! - [`model`]: simulated models: scripted agents with reactive triggers, and the
//!   Rust API for programmatic model policies.
//! - [`cassette`]: model exchanges recorded into a cassette file, and replayed in
//!   order or by request hash, with a diff for every request that misses.
//! - [`sweep`]: many scenarios over a range of seeds.
//! - [`shrink`]: a failing seed reduced to a minimal explicit fault schedule.
//! - [`shell_word`]: paths quoted for the repro lines, so they run as pasted.
//! - [`world`]: the simulated World: virtual clocks, the in-memory crashable disk and
//!   network, the production disk rooted in a temp directory (`disk = "real"`), the
//!   remote-worker and model API hosts, the overlay VCS, seeded streams (and the
//!   turmoil clock and disk).
//! - [`cost`]: token accounting and pricing of Claude Code session transcripts.
//! - [`import`]: Claude Code sessions turned into scenarios that replay them.
//! - [`fidelity`]: how faithfully a replay reproduces its recorded session: the
//!   order of its spawns, tool calls and notifications, and the simulated cache's
//!   predicted usage against the recorded usage.
//! - [`economics`]: the cost meter that prices every simulated model call, what a
//!   run's calls cost (per agent, per run, cache-hit ratio, cache breaks), and a
//!   scenario's cost comparisons.
//! - [`target`]: real coordinators under test: the Claude Code CLI driven through
//!   the simulated API host on loopback, judged from what it did
//!   (`coordsim run --target claude-code`).
//! - [`report`]: what `--report DIR` writes: the summary, JUnit XML, an HTML index
//!   and per-failure timelines in SVG.
//! - [`explore`]: random but valid coordinator programs drawn from a seed, run in
//!   swarm mode (`coordsim explore`).
//!
//! The `coordsim` binary is a thin command line over these modules.

#![deny(missing_docs)]

pub mod cache;
pub mod cassette;
pub mod check;
pub mod cost;
pub mod economics;
pub mod explore;
pub mod fault;
pub mod fidelity;
pub mod import;
mod label_map;
pub mod model;
mod position;
pub mod report;
pub mod run;
pub mod scenario;
pub mod shell_word;
pub mod shrink;
pub mod sweep;
mod table;
pub mod target;
pub mod trace;
pub mod world;
