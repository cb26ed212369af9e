//! What a run's scripts promise, held against what the model tap saw once the run
//! is over: how far each script was played (invariant 14), the answers scripted
//! calls with an `expect`, `expect_text` or `expect_no_text` got, and which
//! accepted messages reached their recipients' models or, for the team lead, its
//! inbox on the disk (invariant 4). Each becomes one closing trace event for the
//! checkers.

use crate::fault::COORDINATOR_LABEL;
use crate::model::{AgentScript, CallOutcome};
use crate::trace::{CallAnswered, ScriptPlayed, SimEvent, Trace};

use super::{LeadMail, TapMemory};

/// A scripted call with an expected answer: where it is and what it must get.
#[derive(Debug)]
struct ExpectedCall {
    agent: String,
    step: usize,
    index: usize,
    tool: String,
    expected: Option<CallOutcome>,
    expected_text: Option<String>,
    unexpected_text: Option<String>,
}

/// The promises of a run's scripts, taken before the scripts go to the model.
#[derive(Debug)]
pub(super) struct ScriptPromises {
    /// Each scripted agent's label and the number of turns in its script.
    turns: Vec<(String, u64)>,
    expected_calls: Vec<ExpectedCall>,
    /// The coordinator's script calls TaskGet, whose answers report a task's
    /// progress.
    task_gets: bool,
}

impl ScriptPromises {
    /// The promises of the coordinator's script and the workers'.
    pub(super) fn of(coordinator: &AgentScript, workers: &[AgentScript]) -> Self {
        let scripts = || {
            std::iter::once((COORDINATOR_LABEL, coordinator)).chain(
                workers
                    .iter()
                    .map(|script| (script.prompt.as_str(), script)),
            )
        };
        let turns = scripts()
            .map(|(agent, script)| (agent.to_owned(), script.turns.len() as u64))
            .collect();
        let mut expected_calls = Vec::new();
        for (agent, script) in scripts() {
            for (step, turn) in script.turns.iter().enumerate() {
                for (index, call) in turn.tool_calls.iter().enumerate() {
                    if call.expect.is_some()
                        || call.expect_text.is_some()
                        || call.expect_no_text.is_some()
                    {
                        expected_calls.push(ExpectedCall {
                            agent: agent.to_owned(),
                            step,
                            index,
                            tool: call.name.clone(),
                            expected: call.expect,
                            expected_text: call.expect_text.clone(),
                            unexpected_text: call.expect_no_text.clone(),
                        });
                    }
                }
            }
        }
        let task_gets = coordinator
            .turns
            .iter()
            .any(|turn| turn.tool_calls.iter().any(|call| call.name == "TaskGet"));
        Self {
            turns,
            expected_calls,
            task_gets,
        }
    }

    /// Whether the coordinator asks TaskGet, so the tap must keep the workers'
    /// rounds.
    pub(super) fn asks_task_progress(&self) -> bool {
        self.task_gets
    }

    /// Whether some scripted call expects an answer, so the tap must keep them.
    pub(super) fn expects_answers(&self) -> bool {
        !self.expected_calls.is_empty()
    }

    /// Writes the closing witness events of the run into `trace`, from what `tap`
    /// saw across every boot and what the team leads' inboxes hold (`lead_mail`).
    pub(super) fn record(self, tap: &TapMemory, lead_mail: &[LeadMail], trace: &Trace) {
        let agents = self
            .turns
            .into_iter()
            .map(|(agent, turns)| ScriptPlayed {
                turns_played: tap.steps_played(&agent) as u64,
                agent,
                turns,
            })
            .collect();
        trace.push("sim", SimEvent::ScriptsPlayed { agents });
        let calls: Vec<CallAnswered> = self
            .expected_calls
            .into_iter()
            .filter_map(|call| {
                let answer = tap.answer_of(&call.agent, call.step, call.index)?;
                let text = &answer.text;
                let text_missing = call
                    .expected_text
                    .as_ref()
                    .is_some_and(|expected| !text.contains(expected.as_str()));
                let text_present = call
                    .unexpected_text
                    .as_ref()
                    .is_some_and(|unexpected| text.contains(unexpected.as_str()));
                Some(CallAnswered {
                    received_ms: answer.received_ms,
                    got: if answer.is_error {
                        CallOutcome::Error
                    } else {
                        CallOutcome::Ok
                    },
                    agent: call.agent,
                    step: call.step as u64,
                    index: call.index as u64,
                    tool: call.tool,
                    expected: call.expected,
                    expected_text: call.expected_text,
                    text_missing,
                    unexpected_text: call.unexpected_text,
                    text_present,
                })
            })
            .collect();
        if !calls.is_empty() {
            trace.push("sim", SimEvent::CallsAnswered { calls });
        }
        if let Some(stops) = tap.stops_witnessed() {
            trace.push("sim", stops);
        }
        if let Some(abandoned) = tap.retries_abandoned() {
            trace.push("sim", abandoned);
        }
        let messages = tap.messages_witnessed(lead_mail);
        if !messages.is_empty() {
            trace.push("sim", SimEvent::MessagesWitnessed { messages });
        }
    }
}
