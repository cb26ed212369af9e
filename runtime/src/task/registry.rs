//! The task registry: every task of a session, and the notification queue.
//!
//! The queue lives inside the registry on purpose. Setting a task's `notified` flag
//! and enqueueing its envelope happen in one `&mut self` call, so whoever holds the
//! registry (behind one lock) sees both or neither: a task whose notification was
//! enqueued can never enqueue a second one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::{TaskId, TaskKind, TaskState, TaskStatus, TaskStore, TransitionError};
#[cfg(feature = "defects")]
use crate::defects::{Defect, Defects};
use crate::envelope::Envelope;
use crate::event::RuntimeEvent;
use crate::probe::Probe;
use crate::world::{Entropy, Journal};

/// How many draws [`TaskRegistry::allocate_id`] makes before it concludes the entropy
/// source is broken. With 36^8 ids a second draw is already rare.
const ID_DRAWS_MAX: usize = 64;

/// Why a registry operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No live task has this id (it may be evicted: see [`TaskRegistry::lookup`]).
    #[error("no task {0}")]
    UnknownTask(TaskId),
    /// A transition the state machine does not have.
    #[error("task {task_id}: {source}")]
    Transition {
        /// The task.
        task_id: TaskId,
        /// The refused transition.
        source: TransitionError,
    },
}

/// Whether [`TaskRegistry::notify`] enqueued anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyOutcome {
    /// The envelope was enqueued and the task is now notified.
    Enqueued,
    /// The task was already notified; nothing was enqueued.
    AlreadyNotified,
}

/// What the registry knows about an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// The task is in memory.
    Live(&'a TaskState),
    /// The task ended, was notified and was dropped from memory; its transcript is on disk.
    Evicted,
    /// No such task in this session.
    Unknown,
}

/// Every task of one session, in id order, and the notifications not yet delivered.
#[derive(Debug)]
pub struct TaskRegistry {
    tasks: BTreeMap<TaskId, TaskState>,
    evicted: BTreeSet<TaskId>,
    notifications: VecDeque<Envelope>,
    journal: Arc<dyn Journal>,
    #[cfg(feature = "defects")]
    defects: Defects,
    /// Where every change of a task is recorded durably, if anywhere.
    store: Option<Arc<dyn TaskStore>>,
}

impl TaskRegistry {
    /// An empty registry reporting to `journal`.
    pub fn new(journal: Arc<dyn Journal>) -> Self {
        Self {
            tasks: BTreeMap::new(),
            evicted: BTreeSet::new(),
            notifications: VecDeque::new(),
            journal,
            #[cfg(feature = "defects")]
            defects: Defects::none(),
            store: None,
        }
    }

    /// The registry recording every task change in `store`.
    pub fn with_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Hands task `id`'s current state to the store.
    fn persist(&self, id: &TaskId) {
        if let (Some(store), Some(task)) = (&self.store, self.tasks.get(id)) {
            store.save(task);
        }
    }

    /// Adds a task reloaded from its durable record after a restart, with the status
    /// and notification state the record gave it. Nothing is journaled or stored: the
    /// task is as it was.
    ///
    /// # Panics
    /// If the id is already used in this session.
    pub fn restore(&mut self, task: TaskState) {
        let id = task.id.clone();
        let previous = self.tasks.insert(id.clone(), task);
        assert!(previous.is_none(), "task id {id} restored twice");
    }

    /// The registry with `defects` switched on (for proving the simulator's
    /// checkers; never in production).
    #[cfg(feature = "defects")]
    pub fn with_defects(mut self, defects: Defects) -> Self {
        self.defects = defects;
        self
    }

    /// Draws a fresh id of `kind` that no task of this session has, live or evicted.
    /// A collision is retried, never ignored, and each retry reaches
    /// [`Probe::TaskIdRedrawn`] in `journal`.
    ///
    /// # Panics
    /// If 64 draws all collide, which only a broken entropy source does.
    pub fn allocate_id(
        &self,
        kind: TaskKind,
        entropy: &dyn Entropy,
        journal: &dyn Journal,
    ) -> TaskId {
        for _ in 0..ID_DRAWS_MAX {
            let id = TaskId::generate(kind, entropy);
            if !self.tasks.contains_key(&id) && !self.evicted.contains(&id) {
                return id;
            }
            Probe::TaskIdRedrawn.reach(journal);
        }
        panic!("{ID_DRAWS_MAX} task id draws collided: the entropy source is broken");
    }

    /// Adds a new task.
    ///
    /// # Panics
    /// If the id is already used in this session (ids come from [`Self::allocate_id`]).
    pub fn insert(&mut self, task: TaskState) {
        assert!(
            !self.evicted.contains(&task.id),
            "task id {} reused after eviction",
            task.id
        );
        let id = task.id.clone();
        let previous = self.tasks.insert(id.clone(), task);
        assert!(previous.is_none(), "task id {id} inserted twice");
        self.persist(&id);
    }

    /// What the registry knows about `id`.
    pub fn lookup(&self, id: &TaskId) -> Lookup<'_> {
        match self.tasks.get(id) {
            Some(task) => Lookup::Live(task),
            None if self.evicted.contains(id) => Lookup::Evicted,
            None => Lookup::Unknown,
        }
    }

    /// The live task `id`.
    pub fn get(&self, id: &TaskId) -> Option<&TaskState> {
        self.tasks.get(id)
    }

    /// The live task `id`, for progress and offset updates. Status and the notified
    /// flag stay private to the registry.
    pub fn get_mut(&mut self, id: &TaskId) -> Option<&mut TaskState> {
        self.tasks.get_mut(id)
    }

    /// Live tasks in id order.
    pub fn iter(&self) -> impl Iterator<Item = &TaskState> {
        self.tasks.values()
    }

    /// Number of live tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether there are no live tasks.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Moves pending task `id` to running, unless it has already ended, and returns
    /// whether it started. A stop or an expired deadline can end a task before its
    /// runner is first polled (a zero deadline expires at the spawn's own instant):
    /// the runner must then do nothing, where [`TaskRegistry::transition`] would
    /// treat the late start as a broken invariant.
    pub fn start(&mut self, id: &TaskId, now_unix_ms: u64) -> Result<bool, RegistryError> {
        match self.tasks.get(id) {
            Some(task) if task.status.is_terminal() => Ok(false),
            _ => self
                .transition(id, TaskStatus::Running, now_unix_ms)
                .map(|_| true),
        }
    }

    /// Moves task `id` to `to`, stamping its end time when `to` is terminal.
    /// Returns the previous status.
    ///
    /// # Panics
    /// If the task is already terminal (see [`TaskStatus::check_transition`]).
    pub fn transition(
        &mut self,
        id: &TaskId,
        to: TaskStatus,
        now_unix_ms: u64,
    ) -> Result<TaskStatus, RegistryError> {
        let task = self
            .tasks
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.clone()))?;
        let from = task.status;
        from.check_transition(to)
            .map_err(|source| RegistryError::Transition {
                task_id: id.clone(),
                source,
            })?;
        task.status = to;
        if to.is_terminal() {
            task.ended_at_unix_ms = Some(now_unix_ms);
        }
        self.journal.record(RuntimeEvent::TaskTransitioned {
            task_id: id.clone(),
            from,
            to,
        });
        self.persist(id);
        Ok(from)
    }

    /// Marks terminal task `id` notified and enqueues the envelope `build` makes from
    /// its state, in one step. A second call enqueues nothing.
    ///
    /// # Panics
    /// If the task is not terminal: a notification reports how a task ended.
    pub fn notify(
        &mut self,
        id: &TaskId,
        build: impl FnOnce(&TaskState) -> Envelope,
    ) -> Result<NotifyOutcome, RegistryError> {
        let task = self
            .tasks
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.clone()))?;
        assert!(
            task.status.is_terminal(),
            "notification for task {id} in non-terminal state {}",
            task.status
        );
        let already_notified = task.notified;
        // Defect `duplicate-notification`: the once-only guard is skipped.
        #[cfg(feature = "defects")]
        let already_notified = already_notified && !self.defects.has(Defect::DuplicateNotification);
        if already_notified {
            return Ok(NotifyOutcome::AlreadyNotified);
        }
        let envelope = build(task);
        assert_eq!(
            envelope.task_id,
            id.as_str(),
            "envelope built for the wrong task"
        );
        task.notified = true;
        self.notifications.push_back(envelope);
        self.journal.record(RuntimeEvent::NotificationEnqueued {
            task_id: id.clone(),
            status: task.status,
        });
        self.persist(id);
        Ok(NotifyOutcome::Enqueued)
    }

    /// Marks task `id` notified without any notification, so none can ever be sent:
    /// what TaskStop does to a background shell. Returns false if it already was.
    pub fn suppress_notification(&mut self, id: &TaskId) -> Result<bool, RegistryError> {
        let task = self
            .tasks
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.clone()))?;
        if task.notified {
            return Ok(false);
        }
        task.notified = true;
        task.suppressed = true;
        self.journal.record(RuntimeEvent::NotificationSuppressed {
            task_id: id.clone(),
        });
        self.persist(id);
        Ok(true)
    }

    /// Takes every enqueued notification, oldest first.
    pub fn take_notifications(&mut self) -> Vec<Envelope> {
        self.notifications.drain(..).collect()
    }

    /// Number of enqueued, undelivered notifications.
    pub fn notifications_pending(&self) -> usize {
        self.notifications.len()
    }

    /// Drops from memory every task that is terminal, notified, and ended at least
    /// `grace` before `now_unix_ms`. Returns their ids in order.
    pub fn evict_expired(&mut self, now_unix_ms: u64, grace: Duration) -> Vec<TaskId> {
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let expired: Vec<TaskId> = self
            .tasks
            .values()
            .filter(|task| task.status.is_terminal() && task.notified)
            .filter(|task| {
                let ended_ms = task
                    .ended_at_unix_ms
                    .expect("a terminal task has an end time");
                now_unix_ms.saturating_sub(ended_ms) >= grace_ms
            })
            .map(|task| task.id.clone())
            .collect();
        for id in &expired {
            self.tasks.remove(id);
            self.evicted.insert(id.clone());
            self.journal.record(RuntimeEvent::TaskEvicted {
                task_id: id.clone(),
            });
        }
        expired
    }
}
