//! Where an agent's cache key changed between two of its requests, found from the
//! requests the model received (PROTOCOL.md §6 and invariant 8).
//!
//! The prompt cache keys a request on its model, its `max_tokens`, its thinking
//! configuration, its tool definitions and its system blocks before any message. An
//! agent sends the same key with every request; when the key changes, the runtime must
//! declare a cache break (`RuntimeEvent::CacheBreak`), naming the part of the key, the
//! block within that part and the byte offset where it first differs. The runtime's
//! account of where is only a claim: [`HeadWitness`] finds the first difference itself,
//! in the canonical prefix the runtime documents (`runtime/src/fork/prefix.rs`):
//!
//! ```text
//! {"model":…,"max_tokens":…,"thinking":…|null,"tools":[…],"system":[…],"messages":[
//! ```
//!
//! written here with `serde_json`, so a regression in the runtime's layout moves its
//! claim and not this yardstick. A block index is that of the first block the
//! difference does not lie wholly after, or the list's length when a block was added
//! or removed at its end. The `fork-prefix` checker holds every declared break to the
//! change the witness found, and every change to a declared break.
//!
//! An agent's key is compared with its previous request's; a restarted
//! coordinator's first request with its last before the crash, since it continues
//! its durable conversation. A fork's first request
//! is compared with the parent's request that launched it, which the parent may
//! have followed with others by then (an asynchronous fork starts when its host
//! gets to it): it must carry one of the parent's recent keys, and when it carries
//! none the change is reported against the parent's last. Keys are compared as
//! values (the lists nearly always as pointers), and laid out only when they
//! differ, which is rare.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use coord_runtime::world::{ModelRequest, SystemBlock, ThinkingConfig, ToolDefinition};
use serde::Serialize;

use crate::trace::{HeadChange, Name};

/// The cache keys of each agent's recent requests, the last one last. Clones share
/// them: the taps of a run's successive boots hold one witness.
#[derive(Debug, Default, Clone)]
pub struct HeadWitness {
    heads: Arc<Mutex<HashMap<Name, Vec<Head>>>>,
}

/// How many distinct keys of an agent a fork may have been launched with: an agent
/// changes its key a handful of times in a run.
const RECENT_HEADS_MAX: usize = 4;

/// The parts of a request the cache keys on before its messages.
#[derive(Debug, Clone, PartialEq)]
struct Head {
    model: String,
    max_tokens: u32,
    thinking: Option<ThinkingConfig>,
    tools: Arc<Vec<ToolDefinition>>,
    system: Arc<Vec<SystemBlock>>,
}

impl Head {
    fn of(request: &ModelRequest) -> Head {
        Head {
            model: request.model.clone(),
            max_tokens: request.max_tokens,
            thinking: request.thinking,
            tools: Arc::clone(&request.tools),
            system: Arc::clone(&request.system),
        }
    }

    fn is_of(&self, request: &ModelRequest) -> bool {
        self.max_tokens == request.max_tokens
            && self.model == request.model
            && self.thinking == request.thinking
            && self.tools == request.tools
            && self.system == request.system
    }
}

impl HeadWitness {
    /// Forgets every agent's keys but `agent`'s, as a host starts again: the
    /// coordinator continues its durable conversation and must send the key it sent
    /// before the crash (or declare the break), while every other agent's loop
    /// died with the host.
    pub fn keep_only(&self, agent: &Name) {
        self.heads
            .lock()
            .expect("head witness poisoned")
            .retain(|name, _| name == agent);
    }

    /// Notes `agent`'s `request` and returns where its key differs from the key of
    /// the agent's previous request or, for a fork's first request (`fork_parent`),
    /// from its parent's last. `None` for an agent's first request, and for one whose
    /// key is unchanged.
    pub fn observe(
        &self,
        agent: &Name,
        fork_parent: Option<&Name>,
        request: &ModelRequest,
    ) -> Option<HeadChange> {
        let mut heads = self.heads.lock().expect("head witness poisoned");
        let change = match (heads.get(agent), fork_parent) {
            (Some(own), _) => match own.last() {
                Some(last) if last.is_of(request) => return None,
                Some(last) => first_difference(last, &Head::of(request)),
                None => None,
            },
            (None, Some(parent)) => match heads.get(parent) {
                Some(recent) if recent.iter().any(|head| head.is_of(request)) => None,
                Some(recent) => recent
                    .last()
                    .and_then(|last| first_difference(last, &Head::of(request))),
                None => None,
            },
            (None, None) => None,
        };
        let own = heads.entry(agent.clone()).or_default();
        if own.len() == RECENT_HEADS_MAX {
            own.remove(0);
        }
        own.push(Head::of(request));
        change
    }
}

/// Where the canonical prefix of `after` first differs from that of `before`.
fn first_difference(before: &Head, after: &Head) -> Option<HeadChange> {
    let before_bytes = Layout::of(before).bytes;
    let after = Layout::of(after);
    let offset = match before_bytes
        .iter()
        .zip(&after.bytes)
        .position(|(x, y)| x != y)
    {
        Some(offset) => offset,
        None if before_bytes.len() != after.bytes.len() => {
            before_bytes.len().min(after.bytes.len())
        }
        // Unequal values with equal JSON text: nothing the cache would see.
        None => return None,
    };
    let (part, block_index) = after.locate(offset);
    Some(HeadChange {
        part: part.to_owned(),
        block_index: block_index.map(|index| index as u64),
        byte_offset: offset as u64,
    })
}

/// A head's canonical prefix (with no message), and where each part lies in it.
struct Layout {
    bytes: Vec<u8>,
    parts: Vec<PartSpan>,
}

/// A part's name, where its key starts, and the byte range of each of its blocks
/// (lists only).
type PartSpan = (&'static str, usize, Option<Vec<Range<usize>>>);

impl Layout {
    fn of(head: &Head) -> Layout {
        let mut layout = Layout {
            bytes: vec![b'{'],
            parts: Vec::with_capacity(6),
        };
        layout.scalar("model", &head.model);
        layout.scalar("max_tokens", &head.max_tokens);
        layout.scalar("thinking", &head.thinking);
        layout.list("tools", &head.tools, true);
        layout.list("system", &head.system, true);
        layout.list::<()>("messages", &[], false);
        layout
    }

    fn key(&mut self, part: &'static str) -> usize {
        if !self.parts.is_empty() {
            self.bytes.push(b',');
        }
        let start = self.bytes.len();
        self.write(part);
        self.bytes.push(b':');
        start
    }

    fn scalar<T: Serialize + ?Sized>(&mut self, part: &'static str, value: &T) {
        let start = self.key(part);
        self.write(value);
        self.parts.push((part, start, None));
    }

    fn list<T: Serialize>(&mut self, part: &'static str, items: &[T], closed: bool) {
        let start = self.key(part);
        self.bytes.push(b'[');
        let mut blocks = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.bytes.push(b',');
            }
            let block_start = self.bytes.len();
            self.write(item);
            blocks.push(block_start..self.bytes.len());
        }
        if closed {
            self.bytes.push(b']');
        }
        self.parts.push((part, start, Some(blocks)));
    }

    fn write<T: Serialize + ?Sized>(&mut self, value: &T) {
        // Strings, numbers and JSON values with string keys always serialize.
        serde_json::to_writer(&mut self.bytes, value).expect("request parts serialize to JSON");
    }

    /// The part `offset` falls in and, for a list, the first block that does not end
    /// at or before it.
    fn locate(&self, offset: usize) -> (&'static str, Option<usize>) {
        let (part, _, blocks) = self
            .parts
            .iter()
            .rev()
            .find(|(_, start, _)| *start <= offset)
            .unwrap_or(&self.parts[0]);
        let block_index = blocks.as_ref().map(|blocks| {
            blocks
                .iter()
                .position(|block| block.end > offset)
                .unwrap_or(blocks.len())
        });
        (part, block_index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::world::{ContentBlock, Message, Role};

    fn request(system: &[&str]) -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 8192,
            tools: Arc::new(Vec::new()),
            system: Arc::new(system.iter().map(|text| SystemBlock::text(*text)).collect()),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text("hello")],
            }],
            thinking: None,
        }
    }

    #[test]
    fn an_unchanged_key_and_a_first_request_show_no_change() {
        let witness = HeadWitness::default();
        let agent = Name::new("coordinator");
        assert_eq!(witness.observe(&agent, None, &request(&["a"])), None);
        assert_eq!(witness.observe(&agent, None, &request(&["a"])), None);
    }

    #[test]
    fn a_system_block_added_at_the_end_is_a_change_at_the_lists_length() {
        let witness = HeadWitness::default();
        let agent = Name::new("coordinator");
        witness.observe(&agent, None, &request(&["a"]));
        let change = witness
            .observe(&agent, None, &request(&["a", "b"]))
            .expect("a block was added");
        assert_eq!(change.part, "system");
        assert_eq!(change.block_index, Some(1));
        let before = Layout::of(&Head::of(&request(&["a"]))).bytes;
        // The old list's `]` is where the new one has `,`.
        assert_eq!(before[change.byte_offset as usize], b']');
    }

    #[test]
    fn a_changed_model_is_a_change_of_the_model_before_any_list() {
        let witness = HeadWitness::default();
        let agent = Name::new("worker");
        witness.observe(&agent, None, &request(&["a"]));
        let mut other = request(&["a"]);
        other.model = "claude-opus-4-1".to_owned();
        let change = witness
            .observe(&agent, None, &other)
            .expect("the model changed");
        assert_eq!(change.part, "model");
        assert_eq!(change.block_index, None);
        assert_eq!(change.byte_offset, r#"{"model":"claude-"#.len() as u64);
    }

    #[test]
    fn a_forks_first_request_is_held_to_its_parents_last() {
        let witness = HeadWitness::default();
        let parent = Name::new("coordinator");
        let fork = Name::new("fork");
        witness.observe(&parent, None, &request(&["a", "b"]));
        let change = witness
            .observe(&fork, Some(&parent), &request(&["a", "c"]))
            .expect("the fork's second block differs");
        assert_eq!(
            (change.part.as_str(), change.block_index),
            ("system", Some(1))
        );
        // From then on the fork is held to its own requests.
        assert_eq!(
            witness.observe(&fork, Some(&parent), &request(&["a", "c"])),
            None
        );
    }

    #[test]
    fn a_fork_may_carry_the_key_its_parent_had_before_its_last_request() {
        // The parent launched the fork, then changed its key before the fork's
        // first request went out: the fork keeps the key it was launched with.
        let witness = HeadWitness::default();
        let parent = Name::new("coordinator");
        witness.observe(&parent, None, &request(&["a"]));
        witness.observe(&parent, None, &request(&["a", "amended"]));
        let fork = Name::new("fork");
        assert_eq!(
            witness.observe(&fork, Some(&parent), &request(&["a"])),
            None
        );
    }
}
