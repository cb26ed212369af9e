//! When each agent asked for a compaction, judged against the context its model
//! had last reported to it.
//!
//! Claude Code compacts an agent whose last response reported a context (input,
//! cache reads and writes, output) at or past its auto-compact threshold, before the
//! agent's next request, and at no other time. The witness holds each agent's
//! requests to that rule from what the model API saw: the usage of every answer it
//! delivered, and whether each later request was a compaction. The runtime's own
//! account of its compactions (`compacted` events, boundary lines) plays no part, so a
//! runtime that miscounts its threshold, or never checks it, cannot pass unseen.
//!
//! The threshold is the simulator's own copy of the rule, never the runtime's
//! [`Profile::compaction`]: a regression there
//! must not move the yardstick with it.
//!
//! A restarted host starts its agents without a reported context, so the witness
//! lives per boot. A request is held to "compact now" only when it carries the tool
//! results of the answer that passed the threshold (the agent's loop went on from
//! that answer); a worker resumed later, by a message, starts a new loop.
//!
//! A remote worker's loop runs on the remote host, which compacts by its own rules,
//! not this session's: the tap does not hold its requests to the threshold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use coord_runtime::profile::Profile;
use coord_runtime::world::{ContentBlock, ModelRequest, Role, Usage};

use crate::scenario::Scenario;
use crate::trace::{Name, SimEvent, Trace};

/// Claude Code's auto-compact threshold for its models: a 200,000-token window,
/// less the 20,000 kept for the answer (the most it reserves; the models write up
/// to 64,000), less its 13,000-token buffer.
pub const CLAUDE_CODE_COMPACT_THRESHOLD_TOKENS: u64 = 200_000 - 20_000 - 13_000;

/// The context at which `scenario`'s agents must compact: the scenario's own
/// `compact_threshold_tokens`, else Claude Code's rule in the profiles that follow it.
/// `None` when no rule applies: nexo publishes none, and a script that asks for its
/// compactions (an imported recording) compacts where it says.
pub fn compaction_threshold_tokens(scenario: &Scenario) -> Option<u64> {
    let scripted = std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .any(|script| {
            script
                .turns
                .iter()
                .any(|turn| turn.compact_before.is_some())
        });
    if scripted {
        return None;
    }
    scenario
        .settings
        .compact_threshold_tokens
        .or(match scenario.profile {
            Profile::ClaudeCode | Profile::Hardened => Some(CLAUDE_CODE_COMPACT_THRESHOLD_TOKENS),
            _ => None,
        })
}

/// The context a response reports: every prompt token, and the answer.
pub fn context_tokens(usage: &Usage) -> u64 {
    usage
        .input_tokens
        .saturating_add(usage.cache_creation_input_tokens)
        .saturating_add(usage.cache_read_input_tokens)
        .saturating_add(usage.output_tokens)
}

/// The last answer the model API delivered to one agent in this boot.
#[derive(Debug)]
struct LastAnswer {
    context_tokens: u64,
    /// The answer was a compaction's summary, not a turn.
    compaction: bool,
    /// The ids of the tools the answer called: the request that carries their
    /// results continues from it.
    tool_use_ids: Vec<String>,
    /// A compaction was asked for since.
    compaction_asked: bool,
    /// A request was already held to it.
    judged: bool,
}

/// The compaction witness of one boot.
#[derive(Debug, Clone)]
pub struct CompactionWitness {
    threshold_tokens: u64,
    trace: Trace,
    answers: Arc<Mutex<HashMap<String, LastAnswer>>>,
}

impl CompactionWitness {
    /// A witness holding requests to `threshold_tokens`, logging into `trace`.
    pub fn new(threshold_tokens: u64, trace: Trace) -> Self {
        Self {
            threshold_tokens,
            trace,
            answers: Arc::default(),
        }
    }

    /// Judges `agent`'s request, number `call`, as it reaches the API.
    pub fn requested(&self, agent: &str, call: u32, request: &ModelRequest, compaction: bool) {
        let mut answers = self.answers.lock().expect("compaction witness poisoned");
        let last = answers.get_mut(agent);
        let mistimed = if compaction {
            let context_tokens = last
                .as_ref()
                .filter(|last| !last.compaction)
                .map(|last| last.context_tokens);
            if let Some(last) = last {
                last.compaction_asked = true;
            }
            context_tokens
                .is_none_or(|tokens| tokens < self.threshold_tokens)
                .then_some(context_tokens)
        } else {
            last.filter(|last| {
                !last.compaction
                    && !last.compaction_asked
                    && !last.judged
                    && last.context_tokens >= self.threshold_tokens
                    && carries_results_of(request, &last.tool_use_ids)
            })
            .map(|last| {
                last.judged = true;
                Some(last.context_tokens)
            })
        };
        if let Some(context_tokens) = mistimed {
            self.trace.push(
                agent,
                SimEvent::CompactionMistimed {
                    agent: Name::new(agent),
                    call,
                    compaction,
                    context_tokens,
                    threshold_tokens: self.threshold_tokens,
                },
            );
        }
    }

    /// Notes the answer the API delivered to `agent`.
    pub fn answered(&self, agent: &str, content: &[ContentBlock], usage: &Usage, compaction: bool) {
        let tool_use_ids = content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        self.answers
            .lock()
            .expect("compaction witness poisoned")
            .insert(
                agent.to_owned(),
                LastAnswer {
                    context_tokens: context_tokens(usage),
                    compaction,
                    tool_use_ids,
                    compaction_asked: false,
                    judged: false,
                },
            );
    }
}

/// Whether `request`'s last message carries the results of every tool in
/// `tool_use_ids` (and some were called).
fn carries_results_of(request: &ModelRequest, tool_use_ids: &[String]) -> bool {
    let Some(last) = request.messages.last() else {
        return false;
    };
    !tool_use_ids.is_empty()
        && last.role == Role::User
        && tool_use_ids.iter().all(|id| {
            last.content.iter().any(|block| {
                matches!(block, ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == id)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;
    use coord_runtime::world::{Message, SystemClock};

    fn usage(context_tokens: u64) -> Usage {
        Usage {
            input_tokens: 10,
            cache_read_input_tokens: context_tokens - 110,
            output_tokens: 100,
            ..Usage::default()
        }
    }

    fn read_call(id: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::ToolUse {
            id: id.to_owned(),
            name: "Read".to_owned(),
            input: Arc::new(serde_json::json!({"file_path": "/a"})),
        }]
    }

    fn results_of(id: &str) -> ModelRequest {
        ModelRequest {
            model: String::new(),
            max_tokens: 0,
            tools: Default::default(),
            system: Default::default(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id.to_owned(),
                    content: "text".to_owned(),
                    is_error: false,
                    cache_control: None,
                }],
            }],
            thinking: None,
        }
    }

    fn mistimed(trace: &Trace) -> Vec<(bool, Option<u64>)> {
        trace
            .entries()
            .iter()
            .filter_map(|entry| match &entry.typed {
                TraceEvent::Sim(SimEvent::CompactionMistimed {
                    compaction,
                    context_tokens,
                    ..
                }) => Some((*compaction, *context_tokens)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_context_at_the_threshold_must_be_compacted_before_the_next_round() {
        let trace = Trace::new(Arc::new(SystemClock::new()));
        let witness = CompactionWitness::new(1_000, trace.clone());
        witness.answered("w", &read_call("t1"), &usage(999), false);
        witness.requested("w", 2, &results_of("t1"), false);
        assert!(
            mistimed(&trace).is_empty(),
            "below the threshold, no compaction"
        );
        witness.answered("w", &read_call("t2"), &usage(1_000), false);
        witness.requested("w", 3, &results_of("t2"), false);
        assert_eq!(mistimed(&trace), vec![(false, Some(1_000))]);
        // A retry of the same request is the same lateness, not a second one.
        witness.requested("w", 4, &results_of("t2"), false);
        assert_eq!(mistimed(&trace).len(), 1);
    }

    #[test]
    fn a_compaction_below_the_threshold_or_before_any_answer_is_early() {
        let trace = Trace::new(Arc::new(SystemClock::new()));
        let witness = CompactionWitness::new(1_000, trace.clone());
        witness.requested("w", 1, &results_of("t0"), true);
        witness.answered("w", &read_call("t1"), &usage(999), false);
        witness.requested("w", 2, &results_of("t1"), true);
        assert_eq!(mistimed(&trace), vec![(true, None), (true, Some(999))]);
    }

    #[test]
    fn a_compaction_at_the_threshold_and_the_round_after_it_pass() {
        let trace = Trace::new(Arc::new(SystemClock::new()));
        let witness = CompactionWitness::new(1_000, trace.clone());
        witness.answered("w", &read_call("t1"), &usage(5_000), false);
        witness.requested("w", 2, &results_of("t1"), true);
        // A failed compaction call is asked again; the round then goes on.
        witness.requested("w", 3, &results_of("t1"), true);
        witness.requested("w", 4, &results_of("t1"), false);
        witness.answered("w", &[], &usage(5_000), true);
        witness.requested("w", 5, &results_of("t1"), false);
        assert!(mistimed(&trace).is_empty());
    }

    #[test]
    fn a_request_that_does_not_go_on_from_the_answer_is_not_held_to_it() {
        // A worker resumed by a message starts a new loop, with no context reported.
        let trace = Trace::new(Arc::new(SystemClock::new()));
        let witness = CompactionWitness::new(1_000, trace.clone());
        witness.answered("w", &read_call("t1"), &usage(5_000), false);
        witness.requested("w", 2, &results_of("t9"), false);
        witness.answered("v", &[], &usage(5_000), false);
        witness.requested("v", 2, &results_of("t1"), false);
        assert!(mistimed(&trace).is_empty());
    }
}
