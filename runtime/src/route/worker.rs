//! SendMessageToWorker (nexo): continue a finished worker with a new message.
//!
//! The checks run in exactly this order, and the first that fails answers:
//!
//! 1. the caller's role is not coordinator → [`WorkerSendError::RoleRefused`]. The role
//!    is checked here whatever the allowed-tool list says, `*` included: a worker's
//!    surface may list the tool, and it still may not drive other workers;
//! 2. a blank `worker_id` or `message` → [`WorkerSendError::Wire`];
//! 3. a message over [`MESSAGE_BYTES_MAX`] → [`WorkerSendError::MessageTooLarge`];
//! 4. no resolved binding → [`WorkerSendError::BindingUnresolved`];
//! 5. the registry: no worker under `(binding, worker_id)` →
//!    [`WorkerSendError::UnknownWorker`]; pending or running →
//!    [`WorkerSendError::WorkerStillRunning`]; else [`Continued`].
//!
//! Workers are keyed by `(binding_key, worker_id)`. A worker spawned under another
//! binding is answered exactly as a worker that does not exist: the same variant with
//! the same fields, so the same `Display` text and the same JSON, byte for byte. A
//! caller cannot learn that another binding's worker exists (invariant 10).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

#[cfg(feature = "defects")]
use crate::defects::{Defect, Defects};
use crate::task::{Lookup, TaskId, TaskRegistry, TaskStatus};
use crate::tools::Role;

/// The largest message accepted, in bytes of UTF-8: 32 KiB.
pub const MESSAGE_BYTES_MAX: usize = 32 * 1024;

/// The account part of a binding key when the channel has no account.
pub const DEFAULT_ACCOUNT: &str = "default";

/// A binding: `<channel>:<account|default>`, the scope a worker belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BindingKey(String);

impl BindingKey {
    /// The key of `channel` and `account`; no account means [`DEFAULT_ACCOUNT`].
    pub fn new(channel: &str, account: Option<&str>) -> BindingKey {
        BindingKey(format!("{channel}:{}", account.unwrap_or(DEFAULT_ACCOUNT)))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BindingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A SendMessageToWorker call's input: `{worker_id, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendMessageToWorkerInput {
    /// The worker to continue.
    pub worker_id: String,
    /// Its next prompt.
    pub message: String,
}

/// A malformed call: what nexo reports as a wire error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "wire_error", rename_all = "snake_case")]
pub enum WireError {
    /// The input does not parse.
    #[error("invalid input: {detail}")]
    Input {
        /// What the parser said.
        detail: String,
    },
    /// `worker_id` is empty or blank.
    #[error("worker_id is blank")]
    BlankWorkerId,
    /// `message` is empty or blank.
    #[error("message is blank")]
    BlankMessage,
}

/// Why a SendMessageToWorker was refused. Nothing was sent or counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum WorkerSendError {
    /// Only a coordinator may continue workers.
    #[error("SendMessageToWorker is for the coordinator; caller role is {role:?}")]
    RoleRefused {
        /// The caller's role.
        role: Role,
    },
    /// A malformed call.
    #[error("wire error: {source}")]
    Wire {
        /// What is wrong.
        source: WireError,
    },
    /// The message is over [`MESSAGE_BYTES_MAX`].
    #[error("message is {message_bytes} bytes; the limit is {message_bytes_max}")]
    MessageTooLarge {
        /// Its size.
        message_bytes: usize,
        /// The limit.
        message_bytes_max: usize,
    },
    /// The call has no resolved binding to scope the worker lookup.
    #[error("no binding resolved for this call")]
    BindingUnresolved,
    /// No worker with this id in the caller's binding. Identical for a worker of
    /// another binding and one that does not exist.
    #[error("unknown worker {worker_id:?}")]
    UnknownWorker {
        /// The id asked for, as given.
        worker_id: String,
    },
    /// The worker has not finished; wait for its notification.
    #[error("worker {worker_id} is still {status}")]
    WorkerStillRunning {
        /// The worker.
        worker_id: TaskId,
        /// `pending` or `running`.
        status: TaskStatus,
    },
}

/// The worker was found finished and may be resumed with the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Continued {
    /// The worker.
    pub worker_id: TaskId,
    /// Its status before the continuation; `None` when it was evicted from memory
    /// (terminal and notified, resumed from its transcript on disk).
    pub prior_status: Option<TaskStatus>,
    /// Messages the worker has received through SendMessageToWorker, this one
    /// included (so the first continuation answers 1).
    pub messages_count: u64,
    /// The message's size in bytes.
    pub message_bytes: usize,
}

/// What the session knows about a worker's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// In memory, with this status.
    Live(TaskStatus),
    /// Ended, notified and dropped from memory.
    Evicted,
    /// Not a task of this session.
    Unknown,
}

/// Where the status of a worker comes from: a [`TaskRegistry`], or any closure
/// `Fn(&TaskId) -> WorkerState`.
pub trait WorkerStatusSource {
    /// What is known about `id`.
    fn worker_state(&self, id: &TaskId) -> WorkerState;
}

impl WorkerStatusSource for TaskRegistry {
    fn worker_state(&self, id: &TaskId) -> WorkerState {
        match self.lookup(id) {
            Lookup::Live(task) => WorkerState::Live(task.status()),
            Lookup::Evicted => WorkerState::Evicted,
            Lookup::Unknown => WorkerState::Unknown,
        }
    }
}

impl<F: Fn(&TaskId) -> WorkerState> WorkerStatusSource for F {
    fn worker_state(&self, id: &TaskId) -> WorkerState {
        self(id)
    }
}

/// Who is calling, as the checks need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerCaller<'a> {
    /// The caller's role.
    pub role: Role,
    /// The caller's resolved binding, if any.
    pub binding: Option<&'a BindingKey>,
}

/// Per-binding worker records: which workers each binding spawned, and how many
/// messages each has received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerBindings {
    /// `(binding, worker)` → messages received through SendMessageToWorker.
    workers: BTreeMap<(BindingKey, TaskId), u64>,
    /// Defect `unscoped-worker-lookup`: a worker is found by id in any binding.
    #[cfg(feature = "defects")]
    unscoped: bool,
}

impl WorkerBindings {
    /// No workers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The records with `defects` switched on (for proving the simulator's checkers;
    /// never in production). Only `unscoped-worker-lookup` concerns them.
    #[cfg(feature = "defects")]
    pub fn with_defects(mut self, defects: &Defects) -> Self {
        self.unscoped = defects.has(Defect::UnscopedWorkerLookup);
        self
    }

    /// Records that `binding` spawned `worker`. Returns false (and changes nothing)
    /// if it was already recorded.
    pub fn bind(&mut self, binding: BindingKey, worker: TaskId) -> bool {
        use std::collections::btree_map::Entry;
        match self.workers.entry((binding, worker)) {
            Entry::Vacant(slot) => {
                slot.insert(0);
                true
            }
            Entry::Occupied(_) => false,
        }
    }

    /// Forgets `worker` of `binding`. Returns whether it was recorded.
    pub fn unbind(&mut self, binding: &BindingKey, worker: &TaskId) -> bool {
        self.workers
            .remove(&(binding.clone(), worker.clone()))
            .is_some()
    }

    /// Messages `worker` of `binding` has received, if it is recorded there.
    pub fn messages_count(&self, binding: &BindingKey, worker: &TaskId) -> Option<u64> {
        self.workers
            .get(&(binding.clone(), worker.clone()))
            .copied()
    }

    /// Whether `worker` may be seen while the session serves `current`: a worker a
    /// binding spawned is that binding's alone (invariant 10: no existence oracle),
    /// and one no binding spawned (a shell, a task from before any binding) is
    /// everyone's.
    pub fn visible_from(&self, current: Option<&BindingKey>, worker: &TaskId) -> bool {
        #[cfg(feature = "defects")]
        if self.unscoped {
            return true;
        }
        let mut owners = self
            .workers
            .keys()
            .filter(|(_, bound)| bound == worker)
            .map(|(binding, _)| binding)
            .peekable();
        owners.peek().is_none() || current.is_some_and(|current| owners.any(|b| b == current))
    }

    /// Every `(binding, worker)` pair, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&BindingKey, &TaskId)> {
        self.workers
            .keys()
            .map(|(binding, worker)| (binding, worker))
    }

    /// Runs a call whose input is raw JSON: the role is checked before the input is
    /// even parsed, and a parse failure is a [`WireError::Input`] at step 2.
    pub fn continue_worker_json(
        &mut self,
        caller: WorkerCaller<'_>,
        input: serde_json::Value,
        status: &dyn WorkerStatusSource,
    ) -> Result<Continued, WorkerSendError> {
        check_role(caller.role)?;
        let input: SendMessageToWorkerInput =
            serde_json::from_value(input).map_err(|error| WorkerSendError::Wire {
                source: WireError::Input {
                    detail: error.to_string(),
                },
            })?;
        self.continue_worker(caller, &input, status)
    }

    /// Runs the checks in the order of the module docs. On success the worker's
    /// message count goes up by one.
    pub fn continue_worker(
        &mut self,
        caller: WorkerCaller<'_>,
        input: &SendMessageToWorkerInput,
        status: &dyn WorkerStatusSource,
    ) -> Result<Continued, WorkerSendError> {
        check_role(caller.role)?;
        if input.worker_id.trim().is_empty() {
            return Err(WorkerSendError::Wire {
                source: WireError::BlankWorkerId,
            });
        }
        if input.message.trim().is_empty() {
            return Err(WorkerSendError::Wire {
                source: WireError::BlankMessage,
            });
        }
        let message_bytes = input.message.len();
        if message_bytes > MESSAGE_BYTES_MAX {
            return Err(WorkerSendError::MessageTooLarge {
                message_bytes,
                message_bytes_max: MESSAGE_BYTES_MAX,
            });
        }
        let binding = caller.binding.ok_or(WorkerSendError::BindingUnresolved)?;
        // Every "not here" path returns this one value, built from the caller's own
        // input only: nothing in it depends on whether another binding has the worker.
        let unknown = || WorkerSendError::UnknownWorker {
            worker_id: input.worker_id.clone(),
        };
        let worker_id = TaskId::parse(&input.worker_id).map_err(|_| unknown())?;
        let key = (binding.clone(), worker_id);
        // Defect `unscoped-worker-lookup`: the binding of whoever spawned the worker
        // is taken instead of the caller's.
        #[cfg(feature = "defects")]
        let key = match self.unscoped {
            false => key,
            true => self
                .workers
                .keys()
                .find(|(_, worker)| *worker == key.1)
                .cloned()
                .unwrap_or(key),
        };
        let Some(messages_count) = self.workers.get_mut(&key) else {
            return Err(unknown());
        };
        let (_, worker_id) = key;
        let prior_status = match status.worker_state(&worker_id) {
            WorkerState::Unknown => return Err(unknown()),
            WorkerState::Live(status @ (TaskStatus::Pending | TaskStatus::Running)) => {
                return Err(WorkerSendError::WorkerStillRunning { worker_id, status });
            }
            WorkerState::Live(status) => Some(status),
            WorkerState::Evicted => None,
        };
        *messages_count += 1;
        Ok(Continued {
            worker_id,
            prior_status,
            messages_count: *messages_count,
            message_bytes,
        })
    }
}

fn check_role(role: Role) -> Result<(), WorkerSendError> {
    if role == Role::Coordinator {
        Ok(())
    } else {
        Err(WorkerSendError::RoleRefused { role })
    }
}
