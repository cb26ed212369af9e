//! Tasks: ids, kinds, the status machine, base state, progress, the registry, and
//! the durable records a restarted runtime reloads.

mod id;
mod kind;
mod progress;
mod record;
mod registry;
mod state;
mod status;

pub use id::{TaskId, TaskIdError, ID_BODY_LEN};
pub use kind::TaskKind;
pub use progress::{Progress, ACTIVITIES_RECENT_MAX};
pub use record::{NotificationState, TaskRecord, TaskStore, TASK_RECORD_VERSION};
pub use registry::{Lookup, NotifyOutcome, RegistryError, TaskRegistry};
pub use state::TaskState;
pub use status::{TaskStatus, TransitionError};
