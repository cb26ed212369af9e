//! The files one run of a real process leaves: its cassette, its observation, and a
//! scenario that replays the cassette on the simulator.
//!
//! Runs on real time are not reproducible by seed, so each run records what the API
//! host served as a cassette (`run-N.cassette.json`, the format of
//! [`crate::cassette`], requests in the simulator's shape), what else the process
//! showed as `run-N.observation.json` (a [`ProcessReport`]), and
//! `run-N.replay.toml`: the scenario without its faults (the cassette holds what
//! they did) and with `[model] cassette` pointing at the cassette, matched in order
//! per agent, so `coordsim run run-N.replay.toml` plays the
//! same answers to the simulated runtime. The files of a failed run are kept and
//! named in its failure; a passed run's are removed unless `COORDSIM_KEEP_RUNS=1`.
//! They go under `COORDSIM_RUNS_DIR` (default `target/claude-code-runs`), in a folder
//! per scenario.

use std::io;
use std::path::{Path, PathBuf};

use super::observation::{Observation, ProcessReport};
use crate::cassette::{Cassette, CassetteError};
use crate::scenario::{CassetteMatch, Fault, LoadedScenario, ModelSettings};

/// Where run files go, unless `COORDSIM_RUNS_DIR` says otherwise.
pub const RUNS_DIR_DEFAULT: &str = "target/claude-code-runs";

/// The environment variable that keeps a passed run's files.
pub const KEEP_RUNS_VARIABLE: &str = "COORDSIM_KEEP_RUNS";

/// The environment variable naming the folder run files go under.
pub const RUNS_DIR_VARIABLE: &str = "COORDSIM_RUNS_DIR";

/// The files of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    /// The cassette.
    pub cassette: PathBuf,
    /// The process report.
    pub observation: PathBuf,
    /// The scenario that replays the cassette on the simulator.
    pub replay_scenario: PathBuf,
}

impl RunFiles {
    /// The files of run `run` of the scenario named `scenario_name`, under `dir`.
    pub fn new(dir: &Path, scenario_name: &str, run: u32) -> Self {
        let folder = dir.join(scenario_name);
        Self {
            cassette: folder.join(format!("run-{run}.cassette.json")),
            observation: folder.join(format!("run-{run}.observation.json")),
            replay_scenario: folder.join(format!("run-{run}.replay.toml")),
        }
    }

    /// The files of a recorded run whose cassette is `cassette` (`run-N.cassette.json`).
    pub fn of_cassette(cassette: &Path) -> Self {
        let name = cassette
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name.strip_suffix(".cassette.json").unwrap_or(&name);
        let sibling = |suffix: &str| cassette.with_file_name(format!("{stem}{suffix}"));
        Self {
            cassette: cassette.to_owned(),
            observation: sibling(".observation.json"),
            replay_scenario: sibling(".replay.toml"),
        }
    }

    /// The command that replays this run's cassette against the simulator.
    pub fn replay_command(&self) -> String {
        format!("coordsim run {}", self.replay_scenario.display())
    }

    /// Writes the observation and the replay scenario of `scenario` (the cassette is
    /// written by its recording).
    pub fn write(&self, scenario: &LoadedScenario, process: &ProcessReport) -> io::Result<()> {
        let json = serde_json::to_string_pretty(process).map_err(io::Error::other)?;
        std::fs::write(&self.observation, json + "\n")?;
        std::fs::write(&self.replay_scenario, self.replay_scenario_text(scenario)?)
    }

    /// The replay scenario: `scenario` with its faults dropped (the cassette holds
    /// the errors they caused, and the worker answers they shaped) and its answers
    /// taken from the cassette, in order per agent. A coordinator crash at a model
    /// call is kept: the cassette holds the call the process died holding, which
    /// only the crash ends, and the simulated host then restarts as the CLI was
    /// resumed.
    fn replay_scenario_text(&self, scenario: &LoadedScenario) -> io::Result<String> {
        let mut replay = scenario.scenario.clone();
        replay
            .faults
            .retain(|fault| matches!(fault, Fault::CoordinatorCrash { at: Some(_), .. }));
        replay.model = ModelSettings {
            cassette: self
                .cassette
                .file_name()
                .map(|name| name.to_string_lossy().into_owned()),
            matching: Some(CassetteMatch::InOrderPerAgent),
        };
        let body = toml::to_string(&replay).map_err(io::Error::other)?;
        Ok(format!(
            "# Run {} of `coordsim run {} --target claude-code`: the answers the real CLI\n\
             # was served, replayed to the simulated runtime (faults dropped but a\n\
             # coordinator crash at a model call: the cassette holds what they did).\n{body}",
            self.cassette.display(),
            scenario.path.display()
        ))
    }

    /// Removes the files (a passed run's).
    pub fn remove(&self) {
        for path in [&self.cassette, &self.observation, &self.replay_scenario] {
            // A file never written has nothing to remove.
            let _ = std::fs::remove_file(path);
        }
    }

    /// Reads the observation the files hold back.
    pub fn load(&self) -> Result<Observation, ObservationError> {
        let cassette = Cassette::load(&self.cassette)?;
        let text = std::fs::read_to_string(&self.observation).map_err(|source| {
            ObservationError::Read {
                path: self.observation.clone(),
                source,
            }
        })?;
        let process = serde_json::from_str(&text).map_err(|source| ObservationError::Parse {
            path: self.observation.clone(),
            line: source.line(),
            column: source.column(),
            message: source.to_string(),
        })?;
        Ok(Observation { cassette, process })
    }
}

/// Why a recorded run could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObservationError {
    /// The cassette could not be read.
    #[error(transparent)]
    Cassette(#[from] CassetteError),
    /// The observation file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The observation file is not a process report.
    #[error("{}:{line}:{column}: not an observation: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// The column.
        column: usize,
        /// What was wrong.
        message: String,
    },
}
