//! How a seed is run besides its scenario and seed, and the command that reruns it
//! the same way.

use std::num::NonZeroU64;
use std::path::Path;

use crate::scenario::{DiskSetting, WorldKind};

/// How a seed is run, besides the scenario and the seed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Swarm mode: the seed also chooses which fault kinds the scenario allows are
    /// on, and draws a fault schedule from them.
    pub swarm: bool,
    /// The disk, overriding the scenario's `disk` setting; `None` keeps the
    /// scenario's.
    pub disk: Option<DiskSetting>,
    /// The simulated world to run in, over the scenario's `[settings] world`
    /// (`--world`). `None` keeps the scenario's.
    pub world: Option<WorldKind>,
    /// The turmoil world's tick in ms, over the scenario's
    /// `[settings] turmoil_tick_ms` (`--turmoil-tick-ms`). `None` keeps the
    /// scenario's.
    pub turmoil_tick_ms: Option<NonZeroU64>,
}

/// The complete command that reruns one seed of one scenario the way it was run.
pub fn repro_command(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    let swarm = if options.swarm { " --swarm" } else { "" };
    let world = world_flags(options);
    format!(
        "cargo run --release --locked -p coord-sim -- run {} --seed {seed}{swarm}{world}",
        crate::shell_word::quote_path(scenario_path)
    )
}

/// The command-line flags that choose the world `options` asks for, each with a
/// leading space: empty when the run keeps the scenario's world, tick and disk.
pub fn world_flags(options: &RunOptions) -> String {
    let mut flags = match options.world {
        Some(world) => format!(" --world {world}"),
        None => String::new(),
    };
    if let Some(tick_ms) = options.turmoil_tick_ms {
        flags += &format!(" --turmoil-tick-ms {tick_ms}");
    }
    if let Some(disk) = options.disk {
        flags += &format!(" --disk {disk}");
    }
    flags
}
