//! Why a fidelity report could not be made.

use std::path::PathBuf;

use crate::import::ImportError;
use crate::run::RunError;

/// Why `coordsim replay --fidelity` could not compare a replay with its recording.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FidelityError {
    /// The scenario names no recorded session.
    #[error(
        "{scenario}: the scenario has no [recording] section naming the session it replays \
         (scenarios written by `coordsim import` have one)"
    )]
    NoRecording {
        /// The scenario file.
        scenario: PathBuf,
    },
    /// The recorded session could not be imported again.
    #[error("{scenario}: cannot read its recording {source_path}: {error}")]
    Import {
        /// The scenario file.
        scenario: PathBuf,
        /// The session file, resolved against the scenario's folder.
        source_path: PathBuf,
        /// Why.
        error: ImportError,
    },
    /// The recording's first prompt is not the scenario's: the scenario does not
    /// replay it.
    #[error(
        "{scenario}: the scenario does not replay {source_path}: its coordinator prompt is \
         not the recording's first prompt"
    )]
    NotItsRecording {
        /// The scenario file.
        scenario: PathBuf,
        /// The session file.
        source_path: PathBuf,
    },
    /// The replay could not be run.
    #[error("cannot run the replay: {0}")]
    Run(#[from] RunError),
}
