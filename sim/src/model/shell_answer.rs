//! What the simulated shell answers a scripted `Bash` command with.
//!
//! The simulated shell runs nothing: by default a command succeeds at once with no
//! output. A scripted `Bash` call with a `shell` table says what its command prints
//! and how it ends (an exit code, a signal, its timeout), so that a scenario can
//! hold the answer the runtime builds from it (stdout, then stderr, then the
//! ending) to what the agent's model must receive.
//!
//! Answers are found by command line. Calls that run the same command line take
//! their answers in script order, each agent's script after the one before it; the
//! last answer serves every later run of that command. Give commands whose answers
//! differ lines of their own.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use coord_runtime::world::ShellOutput;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shell_gate::commands_of;
use super::AgentScript;
use crate::scenario::repeated_to;

/// How a scripted command ends, as the `shell` table of a scripted `Bash` call says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellAnswer {
    /// What the command prints on standard output. Default nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// The size of standard output in bytes: `stdout` repeated, the last copy cut
    /// (back to a whole character), to this many, so that an output of megabytes
    /// (past a reader's limit) takes one line of the scenario. Default: `stdout`
    /// once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_size_bytes: Option<u64>,
    /// What the command prints on standard error. Default nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Its exit code. Default 0. Must be 0 (left out) with `killed`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_code: i32,
    /// How the command was killed, if it was: by a `signal` (at once), or at its
    /// `timeout` (once the call's `timeout` has passed on the virtual clock).
    /// Default: it exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed: Option<Killed>,
}

fn is_zero(code: &i32) -> bool {
    *code == 0
}

/// How a scripted command was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Killed {
    /// By a signal: no exit code.
    Signal,
    /// By the shell, at the command's timeout.
    Timeout,
}

impl ShellAnswer {
    /// What the shell reports for a command answered this way.
    pub fn output(&self) -> ShellOutput {
        ShellOutput {
            exit_code: self.killed.is_none().then_some(self.exit_code),
            stdout: match self.stdout_size_bytes {
                Some(size_bytes) => repeated_to(&self.stdout, size_bytes),
                None => self.stdout.clone(),
            },
            stderr: self.stderr.clone(),
            timed_out: self.killed == Some(Killed::Timeout),
        }
    }

    /// The command's plain success: exit code 0, nothing printed.
    pub fn success() -> ShellOutput {
        ShellAnswer::default().output()
    }
}

/// The scripted answers of a run's commands, by command line.
#[derive(Debug, Default)]
pub struct ShellAnswers {
    by_command: Mutex<BTreeMap<String, VecDeque<ShellAnswer>>>,
}

impl ShellAnswers {
    /// The answers `scripts`' `Bash` calls give their commands; `None` when no call
    /// has one.
    pub fn of<'a>(scripts: impl IntoIterator<Item = &'a AgentScript>) -> Option<Self> {
        let mut by_command: BTreeMap<String, VecDeque<ShellAnswer>> = BTreeMap::new();
        for (_, call, command) in commands_of(scripts) {
            let Some(answer) = &call.shell else {
                continue;
            };
            by_command
                .entry(command.to_owned())
                .or_default()
                .push_back(ShellAnswer::clone(answer));
        }
        (!by_command.is_empty()).then(|| ShellAnswers {
            by_command: Mutex::new(by_command),
        })
    }

    /// Whether some answer kills its command at its timeout.
    pub fn kills_at_timeout(&self) -> bool {
        let by_command = self.by_command.lock().expect("shell answers poisoned");
        by_command
            .values()
            .flatten()
            .any(|answer| answer.killed == Some(Killed::Timeout))
    }

    /// The answer for the next run of `command`: its next scripted answer, the last
    /// one again once they are used up, or `None` for a command no call scripted.
    pub fn next(&self, command: &str) -> Option<ShellAnswer> {
        let mut by_command = self.by_command.lock().expect("shell answers poisoned");
        let answers = by_command.get_mut(command)?;
        if answers.len() > 1 {
            answers.pop_front()
        } else {
            answers.front().cloned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ScriptedToolCall, ScriptedTurn};

    fn bash(command: &str, answer: Option<ShellAnswer>) -> ScriptedToolCall {
        ScriptedToolCall {
            shell: answer.map(Box::new),
            ..ScriptedToolCall::new("Bash", serde_json::json!({ "command": command }))
        }
    }

    fn script(prompt: &str, calls: Vec<ScriptedToolCall>) -> AgentScript {
        AgentScript {
            prompt: prompt.to_owned(),
            recorded_prompt: None,
            turns: vec![ScriptedTurn {
                tool_calls: calls,
                ..ScriptedTurn::default()
            }]
            .into(),
            count: None,
        }
    }

    fn printing(stdout: &str) -> ShellAnswer {
        ShellAnswer {
            stdout: stdout.to_owned(),
            ..ShellAnswer::default()
        }
    }

    #[test]
    fn a_command_takes_its_answers_in_script_order_then_keeps_the_last() {
        // Goal: two runs of one command line get the answers their calls scripted, in
        // order; later runs get the last; an unscripted command has none.
        let scripts = [
            script("a", vec![bash("make", Some(printing("first")))]),
            script(
                "b",
                vec![bash("make", Some(printing("second"))), bash("ls", None)],
            ),
        ];
        let answers = ShellAnswers::of(&scripts).expect("two calls have answers");
        let stdout = |answer: Option<ShellAnswer>| answer.map(|a| a.stdout);
        assert_eq!(stdout(answers.next("make")), Some("first".to_owned()));
        assert_eq!(stdout(answers.next("make")), Some("second".to_owned()));
        assert_eq!(stdout(answers.next("make")), Some("second".to_owned()));
        assert_eq!(answers.next("ls"), None);
        assert!(ShellAnswers::of(&[script("c", vec![bash("ls", None)])]).is_none());
    }

    #[test]
    fn an_answer_reports_its_ending_as_a_shell_does() {
        // Goal: the three endings map onto the shell boundary's fields: an exit code,
        // a signal (no code), a timeout (no code, timed out).
        let exited = ShellAnswer {
            exit_code: 2,
            ..printing("out")
        };
        assert_eq!(exited.output().exit_code, Some(2));
        assert!(!exited.output().timed_out);
        let signalled = ShellAnswer {
            killed: Some(Killed::Signal),
            ..ShellAnswer::default()
        };
        assert_eq!(signalled.output().exit_code, None);
        assert!(!signalled.output().timed_out);
        let timed_out = ShellAnswer {
            killed: Some(Killed::Timeout),
            ..ShellAnswer::default()
        };
        assert_eq!(timed_out.output().exit_code, None);
        assert!(timed_out.output().timed_out);
        assert_eq!(ShellAnswer::success().exit_code, Some(0));
    }
}
