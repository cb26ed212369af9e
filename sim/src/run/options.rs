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
    /// The version control the runtime's worktrees are made with (`--vcs`). `None`:
    /// the production git on the real disk, the simulated one on every other.
    pub vcs: Option<VcsSetting>,
}

/// Which version control makes the runtime's worktrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VcsSetting {
    /// The simulated version control: a copy-on-write checkout through the disk.
    Sim,
    /// The production `GitVcs`, the host's `git` on a real repository: the real
    /// disk only.
    Git,
}

impl VcsSetting {
    /// The setting's name on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            VcsSetting::Sim => "sim",
            VcsSetting::Git => "git",
        }
    }
}

impl std::fmt::Display for VcsSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for VcsSetting {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "sim" => Ok(VcsSetting::Sim),
            "git" => Ok(VcsSetting::Git),
            other => Err(format!("expected `sim` or `git`, got {other:?}")),
        }
    }
}

/// The complete command that reruns one seed of one scenario the way it was run,
/// from any directory: `coordsim run <absolute path> --seed N` and the flags of
/// `options`.
pub fn repro_command(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    format!("coordsim {}", repro_arguments(scenario_path, seed, options))
}

/// The same command through `cargo run`, when the current directory is inside the
/// repository this binary was built from (where `coordsim` may not be installed);
/// `None` elsewhere.
pub fn repro_cargo_command(
    scenario_path: &Path,
    seed: u64,
    options: &RunOptions,
) -> Option<String> {
    inside_repository().then(|| {
        format!(
            "cargo run --release --locked -p coord-sim -- {}",
            repro_arguments(scenario_path, seed, options)
        )
    })
}

/// `run <absolute path> --seed N` and the flags of `options`.
fn repro_arguments(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    let swarm = if options.swarm { " --swarm" } else { "" };
    let world = world_flags(options);
    format!(
        "run {} --seed {seed}{swarm}{world}",
        crate::shell_word::quote_path(&absolute(scenario_path))
    )
}

/// `path` made absolute against the current directory, so a printed command names
/// the same file from any directory; a path that cannot be made absolute (no
/// current directory) is kept as given.
pub fn absolute(path: &Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Whether the current directory is inside the repository this crate was built
/// from (the workspace holding `sim/`).
pub fn inside_repository() -> bool {
    let Some(root) = Path::new(env!("CARGO_MANIFEST_DIR")).parent() else {
        return false;
    };
    let (Ok(root), Ok(current)) = (
        root.canonicalize(),
        std::env::current_dir().and_then(|dir| dir.canonicalize()),
    ) else {
        return false;
    };
    current.starts_with(root)
}

/// The command-line flags that choose the world `options` asks for, each with a
/// leading space: empty when the run keeps the scenario's world, tick, disk and
/// version control.
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
    if let Some(vcs) = options.vcs {
        flags += &format!(" --vcs {vcs}");
    }
    flags
}
