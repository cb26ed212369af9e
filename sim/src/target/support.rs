//! Which scenarios a real-process target can run, and a clear refusal for the rest.
//!
//! The Claude Code target injects faults only through what it serves: the model
//! faults of the fault engine's model adapter, which the API host turns into HTTP
//! errors (`model-api`: 429 with `retry-after`, 529, a stream cut short, silence),
//! and the answers a worker gives (`forged-envelope`, `delayed-notification`, and any
//! scripted text, such as a very large result). A `worker-crash` or a
//! `coordinator-crash` at a model call kills the whole process with SIGKILL when
//! that agent's call arrives (the worker runs inside it; the coordinator is it)
//! and restarts it with `--resume`. A `symlink-at-output` at the first
//! spawn plants the CLI's task directory as a symlink out of the session before
//! the first launch ([`super::plant`]). A fault that needs the runtime's
//! insides (its disk, its crash timer, its mailboxes) cannot be injected into a
//! process seen from outside; a scenario asking for one is refused before the
//! process starts, naming the fault kind and the target.

use crate::fault::{CoordinatorCrashPoint, CrashPoint, Fault, FaultKind};
use crate::scenario::LoadedScenario;

/// The fault kinds the Claude Code target injects (`worker-crash` and
/// `coordinator-crash` only at a model call, `symlink-at-output` only at the first
/// spawn).
pub const SUPPORTED_FAULT_KINDS: [FaultKind; 6] = [
    FaultKind::ModelApi,
    FaultKind::ForgedEnvelope,
    FaultKind::DelayedNotification,
    FaultKind::WorkerCrash,
    FaultKind::CoordinatorCrash,
    FaultKind::SymlinkAtOutput,
];

/// Why a scenario cannot run on a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetRefusal {
    /// The scenario schedules a fault the target cannot inject.
    #[error(
        "{scenario}: fault {kind} is not supported on target {target} \
         (supported: model-api, forged-envelope, delayed-notification, \
         worker-crash or coordinator-crash at a model call, symlink-at-output at \
         spawn 1); run it on the simulator"
    )]
    UnsupportedFault {
        /// The scenario file.
        scenario: String,
        /// The fault kind.
        kind: FaultKind,
        /// The target's name.
        target: &'static str,
    },
    /// The scenario needs something of the simulated runtime the target lacks.
    #[error("{scenario}: {what} is not supported on target {target}; run it on the simulator")]
    UnsupportedSetting {
        /// The scenario file.
        scenario: String,
        /// What it asks for.
        what: &'static str,
        /// The target's name.
        target: &'static str,
    },
}

/// `Ok` if `scenario` can run on the target named `target`, else why not.
pub fn check_supported(
    scenario: &LoadedScenario,
    target: &'static str,
) -> Result<(), TargetRefusal> {
    let name = scenario.path.display().to_string();
    let spec = &scenario.scenario;
    let supported = |fault: &Fault| match fault {
        // The worker runs inside the CLI's process: it dies with it, when its call
        // arrives. After its output, the host has nothing left to wait on.
        Fault::WorkerCrash { at, .. } => matches!(at, CrashPoint::ModelCall { .. }),
        // The coordinator is the process: it is killed when its call arrives. A
        // crash in virtual milliseconds has no moment on real time to be placed at,
        // nor one in the middle of a write the CLI makes on the real disk.
        Fault::CoordinatorCrash { at, .. } => {
            matches!(at, Some(CoordinatorCrashPoint::ModelCall { .. }))
        }
        // The task directory is planted before the first launch; after it, the
        // directory exists ([`super::plant`]).
        Fault::SymlinkAtOutput { spawn, after_check } => *spawn == 1 && !after_check,
        other => SUPPORTED_FAULT_KINDS.contains(&other.kind()),
    };
    if let Some(fault) = spec.faults.iter().find(|fault| !supported(fault)) {
        return Err(TargetRefusal::UnsupportedFault {
            scenario: name,
            kind: fault.kind(),
            target,
        });
    }
    let unsupported = if !spec.launches.is_empty() {
        Some("[[launches]] (workers the embedding harness spawns)")
    } else if !spec.lead.is_empty() {
        Some("[[lead]] (team lead actions)")
    } else if !spec.model.is_scripted() {
        Some("[model] (a cassette in place of the scripts)")
    } else if spec.recording.is_some() {
        Some("[recording] (a replayed session)")
    } else {
        None
    };
    match unsupported {
        Some(what) => Err(TargetRefusal::UnsupportedSetting {
            scenario: name,
            what,
            target,
        }),
        None => Ok(()),
    }
}
