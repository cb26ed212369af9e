//! When a scripted background shell finishes.
//!
//! The simulated shell finishes every command at once, so the runtime notifies
//! its caller of a background shell at the caller's next request. A recorded
//! session (`coordsim import`) can have had it later: a command the user moved
//! to the background by hand ran on while the agent went on, and its notification
//! reached the agent requests later. A scripted `Bash` call with
//! [`finishes_before_step`](super::ScriptedToolCall::finishes_before_step) `n`
//! makes its command wait in the shell until the agent's model has received its
//! request for step `n - 1`, so that the runtime delivers the notification with
//! the request for step `n`, where the recording had it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::world::{BoxFuture, Clock, Shell, ShellCommand, ShellOutput};
use tokio::sync::Notify;

use super::{AgentScript, ScriptedToolCall, ShellAnswer, ShellAnswers};

/// The gates of a run's scripted background shells, and how far each agent's
/// requests have gone.
#[derive(Debug, Default)]
pub struct ShellGates {
    /// By command line: the gates of the calls that run it, in script order, each
    /// the caller's prompt and the step before whose request it finishes.
    waiting: Mutex<BTreeMap<String, VecDeque<(String, usize)>>>,
    /// By agent prompt: one past the highest script step whose request the model
    /// received.
    requested: Mutex<BTreeMap<String, usize>>,
    changed: Notify,
}

impl ShellGates {
    /// The gates of `scripts`' calls; `None` when none has one.
    pub fn of<'a>(scripts: impl IntoIterator<Item = &'a AgentScript>) -> Option<Self> {
        let mut waiting: BTreeMap<String, VecDeque<(String, usize)>> = BTreeMap::new();
        for (script, call, command) in commands_of(scripts) {
            let Some(step) = call.finishes_before_step else {
                continue;
            };
            waiting
                .entry(command.to_owned())
                .or_default()
                .push_back((script.prompt.clone(), step));
        }
        (!waiting.is_empty()).then(|| ShellGates {
            waiting: Mutex::new(waiting),
            ..ShellGates::default()
        })
    }

    /// Notes that the model received the request for step `step` of the agent
    /// whose prompt is `prompt`.
    pub fn requested(&self, prompt: &str, step: usize) {
        let mut requested = self.requested.lock().expect("shell gates poisoned");
        let reached = requested.entry(prompt.to_owned()).or_default();
        if step + 1 > *reached {
            *reached = step + 1;
            drop(requested);
            self.changed.notify_waiters();
        }
    }

    /// Waits until `command` may finish: at once for a command no gate holds, else
    /// once its caller's request for the step before its gate was received.
    pub async fn wait(&self, command: &str) {
        let gate = self
            .waiting
            .lock()
            .expect("shell gates poisoned")
            .get_mut(command)
            .and_then(VecDeque::pop_front);
        let Some((prompt, step)) = gate else {
            return;
        };
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so that no change between them is lost.
            changed.as_mut().enable();
            let reached = self
                .requested
                .lock()
                .expect("shell gates poisoned")
                .get(&prompt)
                .copied()
                .unwrap_or(0);
            if reached >= step {
                return;
            }
            changed.await;
        }
    }
}

/// Every call of `scripts` that names a shell command, with its script and the
/// command line: the calls a shell's gates and answers are keyed by.
pub(super) fn commands_of<'a>(
    scripts: impl IntoIterator<Item = &'a AgentScript>,
) -> impl Iterator<Item = (&'a AgentScript, &'a ScriptedToolCall, &'a str)> {
    scripts.into_iter().flat_map(|script| {
        script
            .turns
            .iter()
            .flat_map(|turn| &turn.tool_calls)
            .filter_map(move |call| {
                let command = call.input.get("command")?.as_str()?;
                Some((script, call, command))
            })
    })
}

/// The simulated shell of a run with gated commands: it runs nothing, and finishes
/// each command once its gate opens (at once without one), or, should the gate
/// never open (its agent never got that far), kills it after `hold_max`.
///
/// Not at the command's own timeout: the runtime gives a background shell the
/// spawn deadline, and a recorded command the user moved to the background can
/// have run on for longer than a worker may.
#[derive(Debug)]
pub struct GatedShell {
    gates: Arc<ShellGates>,
    answers: Option<Arc<ShellAnswers>>,
    clock: Arc<dyn Clock>,
    hold_max: Duration,
}

impl GatedShell {
    /// A shell holding commands at `gates`, for at most `hold_max` on `clock`, and
    /// ending them with their scripted `answers` (none: they succeed).
    pub fn new(
        gates: Arc<ShellGates>,
        answers: Option<Arc<ShellAnswers>>,
        clock: Arc<dyn Clock>,
        hold_max: Duration,
    ) -> Self {
        Self {
            gates,
            answers,
            clock,
            hold_max,
        }
    }
}

impl Shell for GatedShell {
    fn run(&self, command: ShellCommand) -> BoxFuture<'static, std::io::Result<ShellOutput>> {
        let gates = self.gates.clone();
        let timeout = self.clock.sleep(self.hold_max);
        let answer = self
            .answers
            .as_ref()
            .and_then(|answers| answers.next(&command.command));
        Box::pin(async move {
            let finished = tokio::select! {
                biased;
                () = gates.wait(&command.command) => true,
                () = timeout => false,
            };
            Ok(match (finished, answer) {
                (true, Some(answer)) => answer.output(),
                (true, None) => ShellAnswer::success(),
                (false, _) => ShellOutput {
                    exit_code: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    timed_out: true,
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ScriptedToolCall, ScriptedTurn};
    use std::sync::Arc;

    fn gated_script() -> AgentScript {
        let mut call = ScriptedToolCall::new(
            "Bash",
            serde_json::json!({"command": "mix test", "run_in_background": true}),
        );
        call.finishes_before_step = Some(3);
        AgentScript {
            prompt: "p".to_owned(),
            recorded_prompt: None,
            turns: Arc::new(vec![ScriptedTurn {
                tool_calls: vec![call],
                ..ScriptedTurn::default()
            }]),
            count: None,
        }
    }

    #[tokio::test]
    async fn a_gated_command_finishes_once_the_step_before_its_gate_was_requested() {
        // Goal: the shell holds the command until the caller's request for step 2
        // arrived, and no other command waits at all.
        let gates = Arc::new(ShellGates::of([&gated_script()]).expect("one gate"));
        gates.wait("ls").await;
        let waiter = tokio::spawn({
            let gates = gates.clone();
            async move { gates.wait("mix test").await }
        });
        gates.requested("p", 1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        gates.requested("other", 5);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        gates.requested("p", 2);
        waiter.await.expect("the waiter ends");
        // The gate is used up: the same command again finishes at once.
        gates.wait("mix test").await;
    }

    #[test]
    fn scripts_without_gated_calls_have_no_gates() {
        let mut script = gated_script();
        Arc::make_mut(&mut script.turns)[0].tool_calls[0].finishes_before_step = None;
        assert!(ShellGates::of([&script]).is_none());
    }
}
