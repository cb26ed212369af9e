//! What a worker's model calls say its task's progress can be (PROTOCOL.md §1,
//! Progress: the tool-use count and the last five activities), for judging the
//! progress a TaskGet answer reports. A task counts a round's tool calls when the
//! round ends, before its next request: so every request the worker's model
//! received shows rounds already counted, and every answer it gave bounds the
//! rounds that can have been.

use std::collections::{HashMap, HashSet};

use coord_runtime::world::{ContentBlock, Message, Role};

use crate::trace::{Name, RoundsSeen};

/// The calls of the workers of one run, kept only in runs whose coordinator asks
/// TaskGet.
#[derive(Debug, Default)]
pub struct ProgressWitness {
    workers: HashMap<String, WorkerCalls>,
    /// When the coordinator's model answered with each TaskGet call, by its
    /// `tool_use` id, in ms of the run's clock: the task was asked no earlier.
    task_gets_answered_ms: HashMap<String, u64>,
}

/// One worker's calls, by its label.
#[derive(Debug, Default)]
struct WorkerCalls {
    /// Each request its model received, in order: when, and how many tool calls
    /// the conversation it carried holds.
    requests: Vec<(u64, u64)>,
    /// Each answered call, in call order: its number, when it was answered and the
    /// tools it called.
    answers: Vec<(u32, u64, Vec<Name>)>,
    /// Its calls cannot be read as one task's rounds: a compaction restarted its
    /// call numbers, a call was answered twice (one answer never reached the
    /// runtime), or it is a fork, whose conversation starts with its parent's.
    muddled: bool,
}

impl ProgressWitness {
    /// Notes a request of worker `agent`'s model, received at `sent_ms`; `fork`
    /// says its conversation is a fork's.
    pub fn requested(&mut self, agent: &str, sent_ms: u64, messages: &[Message], fork: bool) {
        let calls = self.workers.entry(agent.to_owned()).or_default();
        calls.muddled |= fork;
        let tool_uses = messages
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .flat_map(|message| &message.content)
            .filter(|block| matches!(block, ContentBlock::ToolUse { .. }))
            .count() as u64;
        calls.requests.push((sent_ms, tool_uses));
    }

    /// Notes worker `agent`'s model answering call `call` at `answered_ms` with
    /// `content`, or answering a compaction request.
    pub fn answered(
        &mut self,
        agent: &str,
        call: u32,
        answered_ms: u64,
        content: &[ContentBlock],
        compaction: bool,
    ) {
        let calls = self.workers.entry(agent.to_owned()).or_default();
        if compaction || calls.answers.iter().any(|(number, ..)| *number == call) {
            calls.muddled = true;
            return;
        }
        let tools = content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { name, .. } => Some(Name::new(name)),
                _ => None,
            })
            .collect();
        calls.answers.push((call, answered_ms, tools));
    }

    /// Notes the coordinator's model answering at `answered_ms` with the TaskGet
    /// calls among `content`.
    pub fn note_task_gets(&mut self, content: &[ContentBlock], answered_ms: u64) {
        for block in content {
            if let ContentBlock::ToolUse { id, name, .. } = block {
                if name == "TaskGet" {
                    self.task_gets_answered_ms.insert(id.clone(), answered_ms);
                }
            }
        }
    }

    /// The rounds of worker `agent` a TaskGet answer can report, for the TaskGet
    /// call `tool_use_id` whose answer reached the coordinator's model at
    /// `read_ms`: `None` when its calls are not one task's rounds alone, or when
    /// the worker's first request came before the coordinator's host last started
    /// (`started_ms`): a restarted runtime reloads an ended task without its
    /// progress (PROTOCOL.md §3 says as much of an envelope's usage).
    pub fn rounds(
        &self,
        agent: &str,
        tool_use_id: &str,
        read_ms: u64,
        started_ms: Option<u64>,
    ) -> Option<RoundsSeen> {
        let calls = self.workers.get(agent).filter(|calls| !calls.muddled)?;
        let first_sent_ms = calls.requests.first().map(|(sent_ms, _)| *sent_ms);
        if started_ms
            .zip(first_sent_ms)
            .is_some_and(|(started, first)| first < started)
        {
            return None;
        }
        let asked_ms = *self.task_gets_answered_ms.get(tool_use_id)?;
        let tool_uses_min = calls
            .requests
            .iter()
            .take_while(|(sent_ms, _)| *sent_ms < asked_ms)
            .last()
            .map_or(0, |(_, tool_uses)| *tool_uses);
        let mut tools = Vec::new();
        let mut round_ends = Vec::new();
        for (_, _, called) in calls
            .answers
            .iter()
            .filter(|(_, answered_ms, _)| *answered_ms <= read_ms)
        {
            tools.extend(called.iter().cloned());
            round_ends.push(tools.len() as u64);
        }
        Some(RoundsSeen {
            tools,
            round_ends,
            tool_uses_min,
        })
    }
}

/// The labels of the workers whose calls are not one task's: a label launched as
/// more than one task, or one a message was sent to (which may resume it as a new
/// task whose count starts again).
pub fn shared_labels<'a>(
    task_labels: impl Iterator<Item = &'a String>,
    messaged: impl Iterator<Item = &'a String>,
) -> HashSet<&'a str> {
    let mut seen = HashSet::new();
    let mut shared: HashSet<&str> = messaged.map(String::as_str).collect();
    for label in task_labels {
        if !seen.insert(label.as_str()) {
            shared.insert(label.as_str());
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_use(name: &str) -> ContentBlock {
        ContentBlock::ToolUse {
            id: format!("toolu_{name}"),
            name: name.to_owned(),
            input: std::sync::Arc::new(json!({})),
        }
    }

    fn assistant(names: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            content: names.iter().map(|name| tool_use(name)).collect(),
        }
    }

    #[test]
    fn rounds_end_at_each_answer_and_start_from_the_latest_request_before_the_ask() {
        // Goal: the counts a TaskGet may report are the answers' round ends, and at
        // least the tool calls of the last request before the coordinator asked.
        // Method: two rounds of 2 and 1 tools; the ask comes between the second
        // request and its answer, and is read after it.
        let mut witness = ProgressWitness::default();
        let user = Message {
            role: Role::User,
            content: vec![ContentBlock::text("go")],
        };
        witness.requested("w", 0, std::slice::from_ref(&user), false);
        witness.answered("w", 1, 100, &[tool_use("Read"), tool_use("Glob")], false);
        witness.requested(
            "w",
            100,
            &[user.clone(), assistant(&["Read", "Glob"])],
            false,
        );
        witness.note_task_gets(&[tool_use("TaskGet")], 150);
        witness.answered("w", 2, 200, &[tool_use("Grep")], false);
        let rounds = witness.rounds("w", "toolu_TaskGet", 300, None).unwrap();
        assert_eq!(rounds.tool_uses_min, 2);
        assert_eq!(rounds.round_ends, vec![2, 3]);
        let names: Vec<&str> = rounds.tools.iter().map(Name::as_str).collect();
        assert_eq!(names, ["Read", "Glob", "Grep"]);
        // Read before the second answer, the second round cannot have counted.
        let rounds = witness.rounds("w", "toolu_TaskGet", 150, None).unwrap();
        assert_eq!(rounds.round_ends, vec![2]);
        // A host started after the worker's first request reloaded its task
        // without its progress; one started before it ran the task.
        assert!(witness
            .rounds("w", "toolu_TaskGet", 300, Some(50))
            .is_none());
        assert!(witness.rounds("w", "toolu_TaskGet", 300, Some(0)).is_some());
    }

    #[test]
    fn a_call_answered_twice_or_a_compaction_muddles_the_rounds() {
        // Goal: no judgement where the answers are not one task's rounds. Method:
        // a call answered again, a compaction, a fork.
        let mut witness = ProgressWitness::default();
        witness.note_task_gets(&[tool_use("TaskGet")], 0);
        witness.answered("twice", 1, 10, &[tool_use("Read")], false);
        witness.answered("twice", 1, 20, &[tool_use("Read")], false);
        witness.answered("compacted", 3, 10, &[], true);
        witness.requested("fork", 0, &[], true);
        for agent in ["twice", "compacted", "fork"] {
            assert!(
                witness.rounds(agent, "toolu_TaskGet", 100, None).is_none(),
                "{agent}"
            );
        }
        assert!(witness
            .rounds("never-called", "toolu_TaskGet", 100, None)
            .is_none());
    }

    #[test]
    fn labels_launched_twice_or_messaged_are_shared() {
        let launched = [
            "a".to_owned(),
            "b".to_owned(),
            "a".to_owned(),
            "c".to_owned(),
        ];
        let messaged = ["c".to_owned()];
        let shared = shared_labels(launched.iter(), messaged.iter());
        assert_eq!(shared, HashSet::from(["a", "c"]));
    }
}
