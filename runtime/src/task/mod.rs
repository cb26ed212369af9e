//! Tasks: ids, kinds, the status machine, base state, progress, and the registry.

mod id;
mod kind;
mod progress;
mod registry;
mod state;
mod status;

pub use id::{TaskId, TaskIdError, ID_BODY_LEN};
pub use kind::TaskKind;
pub use progress::{Progress, ACTIVITIES_RECENT_MAX};
pub use registry::{Lookup, NotifyOutcome, RegistryError, TaskRegistry};
pub use state::TaskState;
pub use status::{TaskStatus, TransitionError};
