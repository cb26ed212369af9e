//! Scenario files: what a run drives the runtime through.
//!
//! A scenario is TOML. Unknown keys are errors, and every error names
//! `file:line:column` and what was expected, so a typo never silently changes a run.
//!
//! ```toml
//! name = "notify-once"
//! description = "three workers end in every way; each notifies exactly once"
//! dialect = "claude-code"          # or "nexo"
//!
//! [[workers]]
//! description = "Find auth bug"    # the spawn's description
//! result = "auth.rs:42 skips the expiry check"  # the worker's final text
//! end = "completed"                # completed | failed | killed | timeout
//! output_chunks = 3                # appends the result arrives in (default 1)
//! messages = 2                     # mailbox messages it sends the coordinator
//! duplicate_notify = true          # the worker's runner tries to notify twice
//! ```

use coord_runtime::envelope::{Dialect, EnvelopeStatus};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One scenario, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name, unique within its folder.
    pub name: String,
    /// What the scenario exercises.
    #[serde(default)]
    pub description: String,
    /// The envelope dialect the coordinator reads.
    #[serde(default = "default_dialect")]
    pub dialect: Dialect,
    /// The workers the coordinator spawns.
    pub workers: Vec<WorkerScript>,
}

fn default_dialect() -> Dialect {
    Dialect::ClaudeCode
}

/// One worker's script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerScript {
    /// The spawn's description.
    pub description: String,
    /// The worker's final text.
    pub result: String,
    /// How the worker ends.
    #[serde(default = "default_end")]
    pub end: EnvelopeStatus,
    /// How many appends the result arrives in.
    #[serde(default = "default_output_chunks")]
    pub output_chunks: u32,
    /// Mailbox messages the worker sends the coordinator.
    #[serde(default)]
    pub messages: u32,
    /// Whether the worker's runner tries to notify a second time.
    #[serde(default)]
    pub duplicate_notify: bool,
}

fn default_end() -> EnvelopeStatus {
    EnvelopeStatus::Completed
}

fn default_output_chunks() -> u32 {
    1
}

/// A scenario file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong and what was expected.
        message: String,
    },
}

/// A scenario and the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub scenario: Scenario,
}

impl LoadedScenario {
    /// Reads and validates the scenario at `path`.
    pub fn load(path: &Path) -> Result<LoadedScenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates scenario `text`, reporting errors against `path`.
    pub fn parse(path: &Path, text: &str) -> Result<LoadedScenario, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|error| {
            let offset = error.span().map_or(0, |span| span.start);
            let (line, column) = line_column(text, offset);
            ScenarioError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message: error.message().trim().to_owned(),
            }
        })?;
        let invalid = |needle: &str, message: String| {
            let offset = text.find(needle).unwrap_or(0);
            let (line, column) = line_column(text, offset);
            ScenarioError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message,
            }
        };
        if scenario.workers.is_empty() {
            return Err(invalid(
                "name",
                "expected at least one [[workers]] table".to_owned(),
            ));
        }
        if let Some(worker) = scenario.workers.iter().find(|w| w.output_chunks == 0) {
            return Err(invalid(
                "output_chunks",
                format!(
                    "worker {:?}: output_chunks must be at least 1",
                    worker.description
                ),
            ));
        }
        Ok(LoadedScenario {
            path: path.to_owned(),
            scenario,
        })
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Every `*.toml` file under `paths` (files are taken as they are), sorted, so that a
/// sweep runs scenarios in the same order everywhere.
pub fn discover(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            collect_toml(path, &mut found)?;
        } else {
            found.push(path.clone());
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

fn collect_toml(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_toml(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "toml") {
            found.push(path);
        }
    }
    Ok(())
}
