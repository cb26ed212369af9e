//! Programs of a main thread out of coordinator mode (`coordinator_mode = false`,
//! every profile), which has every tool and so can fork:
//!
//! - One assistant message forks one to three reviewers (`subagent_type = "fork"`),
//!   which must share their parent's prefix byte for byte (invariant 8), and
//!   launches background workers beside them. A fork may try to fork again, which
//!   the fork guard must refuse (depth limit 1), or call a destructive tool, which
//!   an unsupervised fork's surface lacks.
//! - The next tool round steers the background workers (a message while they run,
//!   `TaskStop`).
//! - A background shell the main thread starts beside them and stops in the next
//!   turn while it still runs (TaskStop on `{{shell:…}}`): it must send no
//!   notification at all.
//! - A foreground spawn (no `run_in_background`): the main thread waits for it and
//!   gets its result inline, with no notification. Its definition is drawn: the
//!   default, verification, or a one-shot Explore or Plan, whose result comes
//!   without the continuation trailer and whose writes are refused.
//! - The main thread's own calls on the shared notes and the scratchpad.
//! - Resumptions of finished background workers, then a last turn that waits for
//!   every notification.
//! - TaskOutput reads of the first background worker's output, one while it runs
//!   and one that waits for its end.

use serde_json::json;

use super::coordinator::{resumptions, steer};
use super::draw::Draw;
use super::worker::{draw_worker, read_only, Fate, Origin, Worker};
use super::{call, tool_turn, Parts};
use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn};

/// Most forks from one message.
const FORKS_MAX: u64 = 3;
/// Most background workers beside them.
const BACKGROUND_WORKERS_MAX: u64 = 2;
/// Most tool turns of a fork.
const FORK_TOOL_TURNS_MAX: u64 = 2;

/// The step a stopped shell's command is gated on: past any program's end, so
/// that only the TaskStop (or its deadline, should the stop be lost) ends it.
const SHELL_GATE_NEVER: usize = 1_000;

/// The background shell the main thread stops, for `seed`: its start and its
/// stop.
fn stopped_shell(seed: u64) -> (ScriptedToolCall, ScriptedToolCall) {
    let command = format!("cargo test -p program-{seed}");
    let mut start = call(
        "Bash",
        json!({ "command": command, "run_in_background": true }),
    );
    start.finishes_before_step = Some(SHELL_GATE_NEVER);
    let stop = call(
        "TaskStop",
        json!({ "task_id": format!("{{{{shell:{command}}}}}") }),
    );
    (start, stop)
}

/// One fork, as drawn.
struct Fork {
    /// 1-based, unique among the program's forks.
    index: usize,
    /// Whether its first turn tries to fork again.
    nested: bool,
    tool_turns: Vec<ScriptedTurn>,
}

impl Fork {
    fn directive(&self, seed: u64) -> String {
        format!(
            "Review part {} of program {seed} and list its findings.",
            self.index
        )
    }

    fn spawn(&self, seed: u64) -> ScriptedToolCall {
        call(
            "Agent",
            json!({
                "description": format!("fork-{}", self.index),
                "prompt": self.directive(seed),
                "subagent_type": "fork",
            }),
        )
    }

    fn script(&self, seed: u64) -> AgentScript {
        let mut turns = Vec::new();
        if self.nested {
            // The directive it plays is its own: were the nested fork let through,
            // it would play this script a second time.
            turns.push(tool_turn(
                vec![call(
                    "Agent",
                    json!({
                        "description": format!("fork-{}-again", self.index),
                        "prompt": self.directive(seed),
                        "subagent_type": "fork",
                    }),
                )],
                Latency::Uniform {
                    min_ms: 500,
                    max_ms: 3_000,
                },
            ));
        }
        turns.extend(self.tool_turns.iter().cloned());
        turns.push(ScriptedTurn {
            text: Some(format!(
                "Part {}: one finding.\nDetails follow in the report.",
                self.index
            )),
            latency: Latency::Uniform {
                min_ms: 500,
                max_ms: 3_000,
            },
            ..ScriptedTurn::default()
        });
        AgentScript {
            prompt: self.directive(seed),
            recorded_prompt: None,
            turns: turns.into(),
            count: None,
        }
    }
}

fn fork_calls(draw: &mut Draw, index: usize) -> Vec<ScriptedToolCall> {
    match draw.below(6) {
        0..=2 => vec![read_only(draw)],
        3 => vec![
            call(
                "ScratchpadRead",
                json!({ "key": format!("review-{index}") }),
            ),
            call(
                "ScratchpadWrite",
                json!({ "key": format!("review-{index}"), "content": "one finding" }),
            ),
        ],
        4 => vec![call(
            "ScratchpadWrite",
            json!({ "key": "shared/plan", "content": format!("part {index} reviewed") }),
        )],
        // An unsupervised fork has no destructive tools: the runtime must refuse it.
        _ => vec![call(
            "Write",
            json!({
                "file_path": format!("/work/src/explore/review_{index}.md"),
                "content": "findings\n",
            }),
        )],
    }
}

/// The main thread's own calls on the shared files, as one tool round.
fn main_calls(draw: &mut Draw, seed: u64) -> Vec<ScriptedToolCall> {
    match draw.below(3) {
        0 => vec![
            call("Read", json!({ "file_path": "/work/shared/notes.md" })),
            call(
                "Write",
                json!({
                    "file_path": "/work/shared/notes.md",
                    "content": format!("# Notes\n- program {seed} reviewed\n"),
                }),
            ),
        ],
        1 => vec![
            call("ScratchpadRead", json!({ "key": "shared/plan" })),
            call(
                "ScratchpadWrite",
                json!({ "key": "shared/plan", "content": format!("program {seed} planned") }),
            ),
        ],
        _ => vec![read_only(draw)],
    }
}

/// The program of `seed` out of coordinator mode.
pub(super) fn program(draw: &mut Draw, seed: u64) -> Parts {
    let forks: Vec<Fork> = (1..=1 + draw.below(FORKS_MAX) as usize)
        .map(|index| {
            let nested = draw.chance(1, 3);
            let tool_turns = (0..draw.below(FORK_TOOL_TURNS_MAX + 1))
                .map(|_| {
                    let calls = fork_calls(draw, index);
                    tool_turn(calls, draw.latency_ms(500, 3_000))
                })
                .collect();
            Fork {
                index,
                nested,
                tool_turns,
            }
        })
        .collect();
    let background: Vec<Worker> = (1..=draw.below(BACKGROUND_WORKERS_MAX + 1) as usize)
        .map(|index| {
            let mut worker = draw_worker(
                draw,
                index,
                Origin::Background,
                &[
                    Fate::Plain,
                    Fate::MessagedRunning,
                    Fate::Stopped,
                    Fate::Resumed,
                ],
            );
            // Out of coordinator mode `run_in_background = false` is honoured: that
            // is the foreground spawn below, not a background worker.
            worker.foreground_request = false;
            worker
        })
        .collect();
    let mut foreground = draw.chance(1, 2).then(|| {
        draw_worker(
            draw,
            background.len() + 1,
            Origin::Foreground,
            &[Fate::Plain],
        )
    });
    let own_calls = draw.chance(1, 2).then(|| main_calls(draw, seed));
    let system_prompt = draw.chance(1, 2);

    let mut parts = Parts::new(false);
    if system_prompt {
        parts.system_prompt = Some(format!("You are the lead engineer of program {seed}."));
    }
    let mut launch: Vec<ScriptedToolCall> = forks.iter().map(|fork| fork.spawn(seed)).collect();
    launch.extend(background.iter().map(|worker| worker.spawn(seed)));
    parts.turns.push(ScriptedTurn {
        text: Some(format!("Program {seed}: forking {} reviews.", forks.len())),
        tool_calls: launch,
        latency: draw.latency_ms(200, 2_000),
        ..ScriptedTurn::default()
    });
    let steer = steer(&background, seed);
    if !steer.is_empty() {
        parts.turns.push(tool_turn(
            steer,
            Latency::Uniform {
                min_ms: 200,
                max_ms: 800,
            },
        ));
    }
    if let Some(worker) = &foreground {
        parts.turns.push(tool_turn(
            vec![worker.spawn(seed)],
            draw.latency_ms(200, 2_000),
        ));
    }
    if let Some(calls) = own_calls {
        parts
            .turns
            .push(tool_turn(calls, draw.latency_ms(200, 2_000)));
    }
    let resumptions = resumptions(draw, &background);
    parts.turns.extend(resumptions);
    // Drawn last, so that adding it left every other draw of a seed as it was.
    if draw.chance(1, 3) {
        let (start, stop) = stopped_shell(seed);
        parts.turns[0].tool_calls.push(start);
        parts.turns.insert(
            1,
            tool_turn(
                vec![stop],
                Latency::Uniform {
                    min_ms: 200,
                    max_ms: 800,
                },
            ),
        );
    }

    // Drawn after the shell. The main thread reads its first background worker's
    // output while the worker runs, then waits for the rest: TaskOutput's reads
    // continue the output file from where the last one stopped (PROTOCOL.md §4).
    if let (Some(worker), true) = (background.first(), draw.chance(1, 3)) {
        let task_id = format!("{{{{task:{}}}}}", worker.prompt(seed));
        let reads = [
            json!({ "task_id": task_id, "block": false }),
            json!({ "task_id": task_id, "block": true, "timeout_ms": 60_000 }),
        ];
        for (offset, input) in reads.into_iter().enumerate() {
            parts.turns.insert(
                1 + offset,
                tool_turn(vec![call("TaskOutput", input)], draw.latency_ms(500, 5_000)),
            );
        }
    }

    // Drawn last as well. A one-shot definition reads only: a worker that starts a
    // shell keeps one that has Bash, or its shell's notification would never come.
    if let Some(worker) = foreground.as_mut() {
        let definitions: &[Option<&'static str>] = if worker.shell {
            &[None, Some("verification")]
        } else {
            &[None, Some("verification"), Some("Explore"), Some("Plan")]
        };
        worker.subagent_type = draw.pick(definitions);
        let spawn = worker.spawn(seed);
        let prompt = worker.prompt(seed);
        for call in parts.turns.iter_mut().flat_map(|turn| &mut turn.tool_calls) {
            if call.name == "Agent" && call.input.get("prompt") == Some(&json!(prompt)) {
                *call = spawn.clone();
            }
        }
    }

    parts.notifications = forks.len() + background.iter().map(Worker::notifications).sum::<usize>();
    parts
        .workers
        .extend(forks.iter().map(|fork| fork.script(seed)));
    parts.workers.extend(
        background
            .iter()
            .chain(&foreground)
            .map(|worker| worker.script(seed)),
    );
    parts.summary = format!(
        "{} forks, {} background workers{}",
        forks.len(),
        background.len(),
        match foreground.as_ref().map(|worker| worker.subagent_type) {
            Some(Some(definition)) => format!(" and a foreground {definition} spawn"),
            Some(None) => " and a foreground spawn".to_owned(),
            None => String::new(),
        }
    );
    parts
}
