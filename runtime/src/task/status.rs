//! Task status and its state machine.
//!
//! ```text
//! pending ──▶ running ──▶ completed
//!    │           ├──────▶ failed
//!    │           └──────▶ killed
//!    ├──────────────────▶ failed   (could not start)
//!    └──────────────────▶ killed   (stopped before it started)
//! ```
//!
//! There are no cycles and the last three states are terminal. Leaving a terminal
//! state is a bug in the caller, so it asserts; any other transition the diagram
//! lacks is refused with an error.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Created, not started.
    Pending,
    /// Running.
    Running,
    /// Finished its work (terminal).
    Completed,
    /// Ended with an error (terminal).
    Failed,
    /// Stopped from outside: TaskStop, an abort, or its deadline (terminal).
    Killed,
}

/// A transition the state machine does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a task cannot go from {from} to {to}")]
pub struct TransitionError {
    /// The status the task is in.
    pub from: TaskStatus,
    /// The status asked for.
    pub to: TaskStatus,
}

impl TaskStatus {
    /// Whether this status is final.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Killed
        )
    }

    /// Checks a transition to `to`.
    ///
    /// # Panics
    /// If `self` is terminal: nothing may leave a terminal state.
    pub fn check_transition(self, to: TaskStatus) -> Result<(), TransitionError> {
        assert!(
            !self.is_terminal(),
            "task transition out of terminal state {self} (to {to})"
        );
        let allowed = match self {
            TaskStatus::Pending => matches!(
                to,
                TaskStatus::Running | TaskStatus::Failed | TaskStatus::Killed
            ),
            TaskStatus::Running => to.is_terminal(),
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Killed => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(TransitionError { from: self, to })
        }
    }

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
