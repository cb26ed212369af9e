//! The name registry: which agent answers to which name.
//!
//! The Agent tool's `name` makes a worker addressable; SendMessage looks a `to` up here
//! before it tries it as an agent id, so that a name that happens to look like an id
//! still reaches the agent that chose it. Names become mailbox file names, so they are
//! validated as path segments, and they are unique ignoring ASCII case because mailbox
//! lookups and broadcast exclusion compare them that way: `Alice` and `alice` must not
//! be two agents.

use std::collections::BTreeMap;

use crate::ipc::{validate_segment, NameError};
use crate::task::TaskId;

/// Why a name could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameRegistryError {
    /// The name cannot be a path segment.
    #[error(transparent)]
    Invalid(#[from] NameError),
    /// Another agent already has this name (compared ignoring ASCII case).
    #[error("agent name {name:?} is taken by {holder} (registered as {registered:?})")]
    Taken {
        /// The name asked for.
        name: String,
        /// The name as it was registered.
        registered: String,
        /// The agent that holds it.
        holder: TaskId,
    },
}

/// One registered name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The name as registered (its case is kept for display and mailbox paths).
    name: String,
    /// The agent it names.
    id: TaskId,
}

/// Agent names to task ids, unique ignoring ASCII case, iterated in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRegistry {
    /// Keyed by the lower-cased name, so lookups and uniqueness ignore case.
    entries: BTreeMap<String, Entry>,
}

impl NameRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives `id` the name `name`. The name must be a valid path segment (see
    /// [`validate_segment`]) and not taken by any agent, in any case.
    pub fn register(&mut self, name: &str, id: TaskId) -> Result<(), NameRegistryError> {
        validate_segment("agent name", name)?;
        let key = name.to_ascii_lowercase();
        if let Some(existing) = self.entries.get(&key) {
            return Err(NameRegistryError::Taken {
                name: name.to_owned(),
                registered: existing.name.clone(),
                holder: existing.id.clone(),
            });
        }
        self.entries.insert(
            key,
            Entry {
                name: name.to_owned(),
                id,
            },
        );
        Ok(())
    }

    /// Frees `name` (any case). Returns the agent that had it, if any.
    pub fn unregister(&mut self, name: &str) -> Option<TaskId> {
        self.entries
            .remove(&name.to_ascii_lowercase())
            .map(|entry| entry.id)
    }

    /// The agent called `name`, ignoring ASCII case.
    pub fn resolve(&self, name: &str) -> Option<&TaskId> {
        self.entries
            .get(&name.to_ascii_lowercase())
            .map(|entry| &entry.id)
    }

    /// The name as registered (with its original case) that `name` matches.
    pub fn canonical_name(&self, name: &str) -> Option<&str> {
        self.entries
            .get(&name.to_ascii_lowercase())
            .map(|entry| entry.name.as_str())
    }

    /// The name (as registered) of agent `id`, if it has one.
    pub fn name_of(&self, id: &TaskId) -> Option<&str> {
        self.entries
            .values()
            .find(|entry| entry.id == *id)
            .map(|entry| entry.name.as_str())
    }

    /// Every `(name, id)`, ordered by lower-cased name: deterministic whatever the
    /// order of registration.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TaskId)> {
        self.entries
            .values()
            .map(|entry| (entry.name.as_str(), &entry.id))
    }

    /// How many names are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no name is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
