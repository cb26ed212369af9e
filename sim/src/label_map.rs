//! Maps that a run looks agents and tasks up in on every model call.
//!
//! A run of a thousand agents holds a thousand labels in each of them. An ordered
//! map compares a label looked up with some ten of those, each a string of its own
//! elsewhere on the heap and cold by the time that agent's turn comes round again;
//! a hash map compares it with one. The hasher has a fixed seed, so a seed is the
//! same run on every machine, and none of these maps is iterated where the order
//! could reach a trace or a report: a map that is keeps its `BTreeMap`.

use std::collections::{HashMap, HashSet};

/// A map by agent label or task id, looked up far more often than iterated.
pub(crate) type LabelMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A set of agent labels or task ids, asked about far more often than iterated.
pub(crate) type LabelSet<K> = HashSet<K, foldhash::fast::FixedState>;
