//! Plain workers: spawned with the Agent tool (in the background, or in the
//! foreground out of coordinator mode) or handed to the coordinator by the
//! harness, and what their scripts do.
//!
//! Workers read, glob and grep; local and worktree workers also read then edit or
//! write `/work/shared/notes.md`, write a file of their own, use the scratchpad,
//! and local ones start background shells. Now and then a worker makes a call the
//! runtime must refuse: a tool its surface lacks (`SendMessage`), a tool nobody
//! knows, an input the tool does not take, a write outside the session and
//! workspace roots. Calls the runtime may refuse (an edit whose text
//! is not found, a stale write, a write outside a worktree, an off-surface call)
//! carry no `expect`: either answer is correct, and the invariant checkers judge
//! what the refusal left behind.

use serde_json::json;

use super::draw::Draw;
use super::{call, tool_turn};
use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn};

/// Most tool turns of a worker that is not messaged while it runs.
const WORKER_TOOL_TURNS_MAX: u64 = 3;
/// Tool rounds a worker messaged while running has ahead of it. The message is sent
/// half a second after the launch and each round takes 5 to 10 seconds, so the
/// message waits at a tool-round boundary, as in `hardened-queued-message`.
const RUNNING_TOOL_TURNS: usize = 3;

/// Where a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Isolation {
    /// In the session's own directory.
    Local,
    /// In a worktree of its own.
    Worktree,
    /// On the remote-worker host.
    Remote,
}

/// What the coordinator does to a worker after launching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Nothing: it runs to its end.
    Plain,
    /// A message while it runs.
    MessagedRunning,
    /// `TaskStop` right after the launch, in the same coordinator turn.
    Stopped,
    /// A message once it has notified, which resumes it.
    Resumed,
}

/// How a worker comes to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// An Agent call with `run_in_background = true` (or `false`, which coordinator
    /// mode overrides).
    Background,
    /// An Agent call without `run_in_background`, out of coordinator mode: the
    /// caller waits for it and gets its result inline, with no notification.
    Foreground,
    /// The embedding harness, before the coordinator's first turn (`[[launches]]`).
    Harness,
}

/// One worker of the program, as drawn.
#[derive(Debug, Clone)]
pub(super) struct Worker {
    /// 1-based, unique among the program's workers.
    pub(super) index: usize,
    pub(super) origin: Origin,
    pub(super) isolation: Isolation,
    pub(super) fate: Fate,
    /// Whether its spawn asks for `run_in_background = false` (ignored in
    /// coordinator mode unless the `foreground-spawns` defect is on).
    pub(super) foreground_request: bool,
    /// Whether it starts a background shell (one more notification).
    pub(super) shell: bool,
    /// The definition its spawn names (`subagent_type`); none, general-purpose.
    pub(super) subagent_type: Option<&'static str>,
    tool_turns: Vec<ScriptedTurn>,
}

impl Worker {
    pub(super) fn description(&self) -> String {
        match self.origin {
            Origin::Harness => format!("launch-{}", self.index),
            Origin::Background | Origin::Foreground => format!("task-{}", self.index),
        }
    }

    pub(super) fn name(&self) -> String {
        format!("worker-{}", self.index)
    }

    pub(super) fn prompt(&self, seed: u64) -> String {
        match self.origin {
            Origin::Harness => format!("Explore launch {} of program {seed}.", self.index),
            Origin::Background => format!("Explore task {} of program {seed}.", self.index),
            Origin::Foreground => {
                format!(
                    "Explore task {} of program {seed} in the foreground.",
                    self.index
                )
            }
        }
    }

    /// The `{{task:<prompt>}}` placeholder naming this worker's task.
    pub(super) fn task_placeholder(&self, seed: u64) -> String {
        format!("{{{{task:{}}}}}", self.prompt(seed))
    }

    /// Its Agent call. A harness launch has none.
    pub(super) fn spawn(&self, seed: u64) -> ScriptedToolCall {
        let mut input = json!({
            "description": self.description(),
            "name": self.name(),
            "prompt": self.prompt(seed),
        });
        match self.origin {
            Origin::Background => {
                input["run_in_background"] = json!(!self.foreground_request);
            }
            Origin::Foreground | Origin::Harness => {}
        }
        match self.isolation {
            Isolation::Local => {}
            Isolation::Worktree => input["isolation"] = json!("worktree"),
            Isolation::Remote => input["isolation"] = json!("remote"),
        }
        if let Some(definition) = self.subagent_type {
            input["subagent_type"] = json!(definition);
        }
        call("Agent", input)
    }

    /// Notifications this worker causes the coordinator: its own (none for a
    /// foreground spawn, whose result comes inline), a resumption's, a shell's.
    pub(super) fn notifications(&self) -> usize {
        usize::from(self.origin != Origin::Foreground)
            + usize::from(self.fate == Fate::Resumed)
            + usize::from(self.shell)
    }

    pub(super) fn script(&self, seed: u64) -> AgentScript {
        let mut turns = self.tool_turns.clone();
        turns.push(ScriptedTurn {
            text: Some(format!("Task {} done.", self.index)),
            latency: Latency::Uniform {
                min_ms: 500,
                max_ms: 4_000,
            },
            ..ScriptedTurn::default()
        });
        if self.fate == Fate::Resumed {
            turns.push(ScriptedTurn {
                text: Some(format!("Task {} re-checked.", self.index)),
                latency: Latency::Uniform {
                    min_ms: 500,
                    max_ms: 4_000,
                },
                ..ScriptedTurn::default()
            });
        }
        AgentScript {
            prompt: self.prompt(seed),
            recorded_prompt: None,
            turns: turns.into(),
            count: None,
        }
    }
}

/// A read-only call.
pub(super) fn read_only(draw: &mut Draw) -> ScriptedToolCall {
    match draw.below(3) {
        0 => call("Read", json!({ "file_path": "/work/README.md" })),
        1 => call("Glob", json!({ "pattern": "**/*.md" })),
        _ => call("Grep", json!({ "pattern": "limit" })),
    }
}

/// The tool calls of one worker turn, drawn for a worker running at `isolation`.
fn worker_calls(draw: &mut Draw, index: usize, isolation: Isolation) -> Vec<ScriptedToolCall> {
    // Remote workers keep to reads: their tools run on another host, and the
    // program's point there is the launch and the report crossing the network.
    if isolation == Isolation::Remote {
        return vec![read_only(draw)];
    }
    match draw.below(13) {
        0..=3 => vec![read_only(draw)],
        4 | 5 => vec![
            call("Read", json!({ "file_path": "/work/shared/notes.md" })),
            if draw.chance(1, 2) {
                call(
                    "Edit",
                    json!({
                        "file_path": "/work/shared/notes.md",
                        "old_string": "# Notes",
                        "new_string": format!("# Notes\n- task {index}"),
                    }),
                )
            } else {
                call(
                    "Write",
                    json!({
                        "file_path": "/work/shared/notes.md",
                        "content": format!("# Notes\n- task {index}\n"),
                    }),
                )
            },
        ],
        6 | 7 => vec![call(
            "Write",
            json!({
                "file_path": format!("src/explore/task_{index}.rs"),
                "content": format!("pub const TASK: u32 = {index};\n"),
            }),
        )],
        8 | 9 => vec![
            call("ScratchpadRead", json!({ "key": "shared/plan" })),
            call(
                "ScratchpadWrite",
                json!({ "key": "shared/plan", "content": format!("task {index} was here") }),
            ),
        ],
        10 | 11 => vec![call(
            "ScratchpadWrite",
            json!({ "key": format!("task-{index}/notes"), "content": "draft" }),
        )],
        // Calls the runtime must refuse: a tool a worker's surface lacks, a tool
        // nobody knows, an input the tool does not take, a write outside the
        // session and workspace roots.
        _ => vec![match draw.below(4) {
            0 => call(
                "SendMessage",
                json!({ "to": "team-lead", "message": format!("Task {index} is half done.") }),
            ),
            1 => call(
                "NotebookEdit",
                json!({ "notebook_path": "/work/notes.ipynb" }),
            ),
            2 => call("Read", json!({ "path": "/work/README.md" })),
            _ => call(
                "Write",
                json!({
                    "file_path": format!("/etc/coordsim-explore/task_{index}.conf"),
                    "content": "escaped\n",
                }),
            ),
        }],
    }
}

/// Draws worker `index` of `origin`, with one of `fates`.
pub(super) fn draw_worker(draw: &mut Draw, index: usize, origin: Origin, fates: &[Fate]) -> Worker {
    let isolation = match (origin, draw.below(5)) {
        // The harness's launches carry no isolation, and a foreground spawn's
        // caller waits for it where it runs.
        (Origin::Harness | Origin::Foreground, 1) | (Origin::Harness, _) => Isolation::Local,
        (_, 0) => Isolation::Worktree,
        (_, 1) => Isolation::Remote,
        _ => Isolation::Local,
    };
    // A finished remote worker is resumed on the remote host; a message to a
    // running one is drawn too: the runtime must refuse it, since the host takes
    // none while the worker runs.
    let fate = draw.pick(fates);
    let foreground_request = origin == Origin::Background && draw.chance(1, 6);
    // A stopped worker may be stopped before it starts its shell, which would then
    // never notify: only workers that run to their end start one.
    let shell = isolation == Isolation::Local && fate != Fate::Stopped && draw.chance(1, 4);
    let mut tool_turns = Vec::new();
    if shell {
        tool_turns.push(tool_turn(
            vec![call(
                "Bash",
                json!({ "command": format!("cargo test task_{index}"), "run_in_background": true }),
            )],
            draw.latency_ms(500, 3_000),
        ));
    }
    if fate == Fate::MessagedRunning {
        for _ in 0..RUNNING_TOOL_TURNS {
            let calls = worker_calls(draw, index, isolation);
            tool_turns.push(tool_turn(
                calls,
                Latency::Uniform {
                    min_ms: 5_000,
                    max_ms: 10_000,
                },
            ));
        }
    } else {
        for _ in 0..draw.below(WORKER_TOOL_TURNS_MAX + 1) {
            let calls = worker_calls(draw, index, isolation);
            let latency = draw.latency_ms(500, 8_000);
            tool_turns.push(tool_turn(calls, latency));
        }
    }
    Worker {
        index,
        origin,
        isolation,
        fate,
        foreground_request,
        shell,
        subagent_type: None,
        tool_turns,
    }
}
