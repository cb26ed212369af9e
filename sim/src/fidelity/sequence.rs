//! Sequence fidelity: the order in which an agent spawned, called tools and was
//! notified, as recorded and as replayed.
//!
//! An agent's sequence is read per model request. Request `k` brings the agent the
//! results of its response `k - 1` and then the notifications delivered since its
//! previous request; response `k` makes calls. So the sequence is, for each
//! response in order: one [`Item::Notification`] per `<task-notification>` envelope
//! the agent received since its previous response (the **notification delivery
//! position**: notifications count where the model first saw them, before the
//! response that follows them), then one item per call of the response, in order:
//! [`Item::Spawn`] for `Task`/`Agent`, [`Item::Tool`] by name for any other.
//!
//! - **Recorded**: from the transcript: each response's arrivals and its calls.
//! - **Replayed**: from the trace. An agent's request `k` is its `model_called`
//!   event; the `envelopes_accepted` event logged just before it holds the
//!   notifications its model saw for the first time, and the `tool_succeeded` /
//!   `tool_failed` events logged just after it name the calls of response `k - 1`
//!   (a call that failed, for instance one the runtime does not have, still counts
//!   by its name). The trace logs envelopes only for the main thread, so a worker's
//!   replayed sequence has no notifications.
//!
//! A call the import added where the recording ended a turn (a continuation, see
//! `import::scenario`) is expected in the replay and skipped on both sides.

use std::fmt;

use serde::Serialize;

use crate::import::{continuation_tool, RecordedAgent, SPAWNING_TOOLS};

use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// One step of an agent's sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// A subagent spawned (`Task` or `Agent`).
    Spawn,
    /// A tool called, by name.
    Tool {
        /// The tool.
        name: String,
    },
    /// A `<task-notification>` delivered.
    Notification,
    /// The conversation compacted before the next request.
    Compaction,
}

impl Item {
    /// The item a call of tool `name` is.
    pub fn call(name: &str) -> Item {
        if SPAWNING_TOOLS.contains(&name) {
            Item::Spawn
        } else {
            Item::Tool {
                name: name.to_owned(),
            }
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Spawn => f.write_str("spawn"),
            Item::Tool { name } => write!(f, "tool {name}"),
            Item::Notification => f.write_str("notification"),
            Item::Compaction => f.write_str("compaction"),
        }
    }
}

/// One item expected in the replay: recorded, or a continuation the import added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The item.
    pub item: Item,
    /// Whether the import added it (not recorded).
    pub continuation: bool,
}

/// The recorded sequence of `agent`, with the continuations its script adds.
pub fn recorded(agent: &RecordedAgent) -> Vec<Expected> {
    let recorded = |item| Expected {
        item,
        continuation: false,
    };
    let mut items = Vec::new();
    for (index, response) in agent.thread.responses.iter().enumerate() {
        if response.before.compaction.is_some() {
            items.push(recorded(Item::Compaction));
        }
        items.extend(
            response
                .before
                .notifications
                .iter()
                .map(|_| recorded(Item::Notification)),
        );
        items.extend(
            response
                .tool_calls
                .iter()
                .map(|call| recorded(Item::call(&call.name))),
        );
        if agent.continued_turns.contains(&index) {
            items.push(Expected {
                item: Item::call(continuation_tool(agent.role)),
                continuation: true,
            });
        }
    }
    items
}

/// The replayed sequence of the agent the trace labels `label`; its compactions
/// are the compaction requests its model received.
pub fn replayed(trace: &[TraceEntry], label: &str) -> Vec<Item> {
    // Per request: the calls of the previous response, then the notifications,
    // and whether the request was a compaction's.
    let mut requests: Vec<(Vec<Item>, usize, bool)> = Vec::new();
    let mut notifications_pending = 0;
    for entry in trace {
        if entry.actor != label {
            continue;
        }
        let TraceEvent::Sim(event) = &entry.typed else {
            continue;
        };
        match event {
            SimEvent::EnvelopesAccepted { task_ids, .. } => {
                notifications_pending += task_ids.len();
            }
            SimEvent::ModelCalled { compaction, .. } => {
                requests.push((
                    Vec::new(),
                    std::mem::take(&mut notifications_pending),
                    *compaction,
                ));
            }
            SimEvent::ToolSucceeded { tool, .. } | SimEvent::ToolFailed { tool, .. } => {
                if let Some((calls, _, _)) = requests.last_mut() {
                    calls.push(Item::call(tool));
                }
            }
            _ => {}
        }
    }
    let mut items = Vec::new();
    for (calls, notifications, compaction) in requests {
        items.extend(calls);
        items.extend(std::iter::repeat_n(Item::Notification, notifications));
        if compaction {
            items.push(Item::Compaction);
        }
    }
    items
}

/// Where a replayed sequence first left the recorded one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// The position in the recorded sequence, from 1.
    pub position: usize,
    /// The recorded item there; `None` past the recording's end.
    pub recorded: Option<Item>,
    /// The replayed item there; `None` past the replay's end.
    pub replayed: Option<Item>,
}

/// How one agent's replayed sequence compares with its recorded one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SequenceFidelity {
    /// Items recorded.
    pub recorded_items: usize,
    /// Items replayed, continuations included.
    pub replayed_items: usize,
    /// Continuations the import added.
    pub continuations: usize,
    /// Recorded items the replay matched before its first divergence.
    pub matching_items: usize,
    /// The first divergence; `None` when the sequences match.
    pub first_divergence: Option<Divergence>,
}

impl SequenceFidelity {
    /// Whether the replay matched the recording to the end.
    pub fn matches(&self) -> bool {
        self.first_divergence.is_none()
    }
}

/// Compares `replayed` with `expected`: equal item for item, a continuation
/// skipped on both sides where the replay has it.
pub fn compare(expected: &[Expected], replayed: &[Item]) -> SequenceFidelity {
    let mut fidelity = SequenceFidelity {
        recorded_items: expected.iter().filter(|e| !e.continuation).count(),
        replayed_items: replayed.len(),
        continuations: expected.iter().filter(|e| e.continuation).count(),
        matching_items: 0,
        first_divergence: None,
    };
    let (mut e, mut r) = (0, 0);
    loop {
        if let Some(added) = expected.get(e).filter(|x| x.continuation) {
            if replayed.get(r) == Some(&added.item) {
                r += 1;
            }
            e += 1;
            continue;
        }
        match (expected.get(e), replayed.get(r)) {
            (None, None) => return fidelity,
            (Some(want), Some(got)) if want.item == *got => {
                fidelity.matching_items += 1;
                e += 1;
                r += 1;
            }
            (want, got) => {
                fidelity.first_divergence = Some(Divergence {
                    position: fidelity.matching_items + 1,
                    recorded: want.map(|w| w.item.clone()),
                    replayed: got.cloned(),
                });
                return fidelity;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Item {
        Item::Tool {
            name: name.to_owned(),
        }
    }

    fn recorded(item: Item) -> Expected {
        Expected {
            item,
            continuation: false,
        }
    }

    #[test]
    fn continuations_are_skipped_and_the_first_difference_is_named() {
        // Goal: an added continuation matches nothing recorded; a missing call is
        // reported at its recorded position with what the replay did instead.
        let expected = [
            recorded(tool("Bash")),
            Expected {
                item: tool("SyntheticOutput"),
                continuation: true,
            },
            recorded(Item::Spawn),
            recorded(tool("Read")),
        ];
        let same = compare(
            &expected,
            &[
                tool("Bash"),
                tool("SyntheticOutput"),
                Item::Spawn,
                tool("Read"),
            ],
        );
        assert!(same.matches());
        assert_eq!((same.matching_items, same.recorded_items), (3, 3));
        let dropped = compare(
            &expected,
            &[tool("Bash"), tool("SyntheticOutput"), tool("Read")],
        );
        assert_eq!(
            dropped.first_divergence,
            Some(Divergence {
                position: 2,
                recorded: Some(Item::Spawn),
                replayed: Some(tool("Read")),
            })
        );
        let short = compare(&expected, &[tool("Bash")]);
        assert_eq!(
            short.first_divergence.map(|d| (d.position, d.replayed)),
            Some((2, None))
        );
    }
}
