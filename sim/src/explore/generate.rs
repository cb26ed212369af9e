//! The program generator: one seed, one valid coordinator program.
//!
//! Every choice is drawn from a `ChaCha8Rng` seeded with the seed alone, in a fixed
//! order, so the same seed always yields the same [`Scenario`] (and so the same
//! TOML text). The program is built from parts whose outcome does not depend on
//! timing, so that every script is playable to its end on the shipped runtime:
//!
//! - A first batch of background workers (`Agent` with `run_in_background`, a
//!   `name` and a `description`), each local, in a worktree or on the remote host.
//! - Right after it, messages to workers that are still running (they have three
//!   slow tool rounds ahead, so the message is handed over at a boundary) and
//!   `TaskStop`s through the `{{task:<prompt>}}` placeholder (a stopped worker
//!   rightly leaves its script unfinished).
//! - Once a chosen worker of the first batch has notified, a second batch.
//! - Messages to finished workers, each sent once its worker has notified, which
//!   resume it for exactly one more scripted turn (and one more notification).
//! - A last turn that waits for every notification the program causes: one per
//!   worker, one per resumption, one per background shell.
//!
//! Remote workers are never messaged (see `draw_worker`). Workers read, glob and
//! grep; local and worktree workers also read then edit or
//! write `/work/shared/notes.md`, write a file of their own, use the scratchpad,
//! and local ones start background shells. Calls the runtime may refuse (an edit
//! whose text is not found, a stale write, an off-surface `Read` by the
//! coordinator) carry no `expect`: either answer is correct, and the invariant
//! checkers judge what the refusal left behind.

use coord_runtime::defects::Defect;
use coord_runtime::profile::Profile;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn, Trigger};
use crate::scenario::{FaultKind, Scenario, Settings, SwarmSettings};

/// Most workers in one batch.
const BATCH_WORKERS_MAX: u64 = 4;
/// Most tool turns of a worker that is not messaged while it runs.
const WORKER_TOOL_TURNS_MAX: u64 = 3;
/// Tool rounds a worker messaged while running has ahead of it. The message is sent
/// half a second after the launch and each round takes 5 to 10 seconds, so the
/// message waits at a tool-round boundary, as in `hardened-queued-message`.
const RUNNING_TOOL_TURNS: usize = 3;

/// What a generated program is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExploreOptions {
    /// The runtime profile every program names. Default hardened.
    pub profile: Profile,
    /// The seeded defects every program switches on. Default none.
    pub defects: Vec<Defect>,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            profile: Profile::Hardened,
            defects: Vec::new(),
        }
    }
}

/// Where a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// In the session's own directory.
    Local,
    /// In a worktree of its own.
    Worktree,
    /// On the remote-worker host.
    Remote,
}

/// What the coordinator does to a worker after launching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Nothing: it runs to its end.
    Plain,
    /// A message while it runs.
    MessagedRunning,
    /// `TaskStop` right after the launch.
    Stopped,
    /// A message once it has notified, which resumes it.
    Resumed,
}

/// One worker of the program, as drawn.
#[derive(Debug, Clone)]
struct Worker {
    /// 1-based, unique in the program.
    index: usize,
    isolation: Isolation,
    fate: Fate,
    /// Whether its spawn asks for `run_in_background = false` (ignored in
    /// coordinator mode unless the `foreground-spawns` defect is on).
    foreground: bool,
    /// Whether it starts a background shell (one more notification).
    shell: bool,
    tool_turns: Vec<ScriptedTurn>,
}

impl Worker {
    fn description(&self) -> String {
        format!("task-{}", self.index)
    }

    fn name(&self) -> String {
        format!("worker-{}", self.index)
    }

    fn prompt(&self, seed: u64) -> String {
        format!("Explore task {} of program {seed}.", self.index)
    }

    fn spawn(&self, seed: u64) -> ScriptedToolCall {
        let mut input = json!({
            "description": self.description(),
            "name": self.name(),
            "prompt": self.prompt(seed),
            "run_in_background": !self.foreground,
        });
        match self.isolation {
            Isolation::Local => {}
            Isolation::Worktree => input["isolation"] = json!("worktree"),
            Isolation::Remote => input["isolation"] = json!("remote"),
        }
        call("Agent", input)
    }

    /// Notifications this worker causes: its own, a resumption's, a shell's.
    fn notifications(&self) -> usize {
        1 + usize::from(self.fate == Fate::Resumed) + usize::from(self.shell)
    }

    fn script(&self, seed: u64) -> AgentScript {
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
            turns,
        }
    }
}

/// A tool call without an expected answer.
fn call(name: &str, input: serde_json::Value) -> ScriptedToolCall {
    ScriptedToolCall {
        name: name.to_owned(),
        input,
        result: None,
        expect: None,
    }
}

fn tool_turn(calls: Vec<ScriptedToolCall>, latency: Latency) -> ScriptedTurn {
    ScriptedTurn {
        tool_calls: calls,
        latency,
        ..ScriptedTurn::default()
    }
}

/// The seed's draws, with the few shapes the generator needs.
struct Draw(ChaCha8Rng);

impl Draw {
    /// Uniform in `0..bound` (`bound` > 0).
    fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "a draw needs at least one outcome");
        crate::world::below(&mut self.0, bound)
    }

    /// True with probability `numerator / denominator`.
    fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }

    fn latency_ms(&mut self, min_ms: u64, spread_ms: u64) -> Latency {
        let low_ms = min_ms + self.below(spread_ms);
        Latency::Uniform {
            min_ms: low_ms,
            max_ms: low_ms + self.below(spread_ms) + 1,
        }
    }
}

/// The tool calls of one worker turn, drawn for a worker running at `isolation`.
fn worker_calls(draw: &mut Draw, index: usize, isolation: Isolation) -> Vec<ScriptedToolCall> {
    let read_only = |draw: &mut Draw| match draw.below(3) {
        0 => call("Read", json!({ "file_path": "/work/README.md" })),
        1 => call("Glob", json!({ "pattern": "**/*.md" })),
        _ => call("Grep", json!({ "pattern": "limit" })),
    };
    // Remote workers keep to reads: their tools run on another host, and the
    // program's point there is the launch and the report crossing the network.
    if isolation == Isolation::Remote {
        return vec![read_only(draw)];
    }
    match draw.below(6) {
        0 | 1 => vec![read_only(draw)],
        2 => vec![
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
        3 => vec![call(
            "Write",
            json!({
                "file_path": format!("src/explore/task_{index}.rs"),
                "content": format!("pub const TASK: u32 = {index};\n"),
            }),
        )],
        4 => vec![
            call("ScratchpadRead", json!({ "key": "shared/plan" })),
            call(
                "ScratchpadWrite",
                json!({ "key": "shared/plan", "content": format!("task {index} was here") }),
            ),
        ],
        _ => vec![call(
            "ScratchpadWrite",
            json!({ "key": format!("task-{index}/notes"), "content": "draft" }),
        )],
    }
}

fn draw_worker(draw: &mut Draw, index: usize, fates: &[Fate]) -> Worker {
    let isolation = match draw.below(5) {
        0 => Isolation::Worktree,
        1 => Isolation::Remote,
        _ => Isolation::Local,
    };
    let mut fate = fates[draw.below(fates.len() as u64) as usize];
    // Remote workers are not messaged here: a message to a running one is refused
    // (the host takes none while it runs), and the resumption of a finished one is
    // a scenario's (scenarios/isolation/resume-finished-remote.toml), not drawn
    // yet, so that seeds keep drawing the programs they drew.
    if isolation == Isolation::Remote && matches!(fate, Fate::MessagedRunning | Fate::Resumed) {
        fate = Fate::Plain;
    }
    let foreground = draw.chance(1, 6);
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
        isolation,
        fate,
        foreground,
        shell,
        tool_turns,
    }
}

/// The program of `seed`: a scenario that passes validation and whose scripts play
/// to their end on the shipped runtime.
pub fn generate(seed: u64, options: &ExploreOptions) -> Scenario {
    let mut draw = Draw(ChaCha8Rng::seed_from_u64(seed));
    let first_count = 1 + draw.below(BATCH_WORKERS_MAX) as usize;
    let second_count = draw.below(BATCH_WORKERS_MAX) as usize;
    let first: Vec<Worker> = (1..=first_count)
        .map(|index| {
            draw_worker(
                &mut draw,
                index,
                &[
                    Fate::Plain,
                    Fate::MessagedRunning,
                    Fate::Stopped,
                    Fate::Resumed,
                ],
            )
        })
        .collect();
    // The second batch launches late: a message or stop sent right after the first
    // batch does not reach it, so its workers only run plainly or are resumed.
    let second: Vec<Worker> = (first_count + 1..=first_count + second_count)
        .map(|index| draw_worker(&mut draw, index, &[Fate::Plain, Fate::Resumed]))
        .collect();
    let off_surface_read = draw.chance(1, 4);

    let mut turns = Vec::new();
    let mut launch: Vec<ScriptedToolCall> = Vec::new();
    if off_surface_read {
        // The coordinator has no file tools: the runtime must refuse this call.
        launch.push(call("Read", json!({ "file_path": "/work/README.md" })));
    }
    launch.extend(first.iter().map(|worker| worker.spawn(seed)));
    turns.push(ScriptedTurn {
        text: Some(format!("Program {seed}: launching {first_count} tasks.")),
        tool_calls: launch,
        latency: draw.latency_ms(200, 2_000),
        ..ScriptedTurn::default()
    });

    let mut steer: Vec<ScriptedToolCall> = Vec::new();
    for worker in &first {
        match worker.fate {
            Fate::MessagedRunning => steer.push(call(
                "SendMessage",
                json!({
                    "to": worker.name(),
                    "summary": "narrow the scope",
                    "message": format!("Task {}: skip the docs folder.", worker.index),
                }),
            )),
            Fate::Stopped => steer.push(call(
                "TaskStop",
                json!({ "task_id": format!("{{{{task:{}}}}}", worker.prompt(seed)) }),
            )),
            Fate::Plain | Fate::Resumed => {}
        }
    }
    if !steer.is_empty() {
        turns.push(ScriptedTurn {
            tool_calls: steer,
            latency: Latency::Fixed { ms: 500 },
            ..ScriptedTurn::default()
        });
    }

    if !second.is_empty() {
        let waited = &first[draw.below(first.len() as u64) as usize];
        turns.push(ScriptedTurn {
            text: Some(format!("Launching {second_count} more tasks.")),
            tool_calls: second.iter().map(|worker| worker.spawn(seed)).collect(),
            when: Some(Trigger::NotificationsFrom {
                pattern: waited.description(),
            }),
            latency: draw.latency_ms(200, 2_000),
            ..ScriptedTurn::default()
        });
    }

    for worker in first.iter().chain(&second) {
        if worker.fate == Fate::Resumed {
            turns.push(ScriptedTurn {
                tool_calls: vec![call(
                    "SendMessage",
                    json!({
                        "to": worker.name(),
                        "summary": "re-check",
                        "message": format!("Task {}: re-check what you found.", worker.index),
                    }),
                )],
                when: Some(Trigger::NotificationsFrom {
                    pattern: worker.description(),
                }),
                latency: draw.latency_ms(200, 2_000),
                ..ScriptedTurn::default()
            });
        }
    }

    let notifications: usize = first.iter().chain(&second).map(Worker::notifications).sum();
    turns.push(ScriptedTurn {
        text: Some(format!(
            "Program {seed} done: {notifications} notifications."
        )),
        when: Some(Trigger::NotificationsAtLeast {
            count: notifications,
        }),
        latency: draw.latency_ms(200, 2_000),
        ..ScriptedTurn::default()
    });

    let workers = first
        .iter()
        .chain(&second)
        .map(|worker| worker.script(seed))
        .collect();
    let mut settings = Settings {
        spawn_deadline_ms: 300_000,
        liveness_bound_ms: 600_000,
        defects: options.defects.clone(),
        ..Settings::default()
    };
    if options.defects.contains(&Defect::FollowSymlinks) {
        // The defect only shows on a filesystem that ignores O_NOFOLLOW.
        settings.disk_honours_nofollow = false;
    }
    Scenario {
        name: format!("explore-{seed}"),
        description: format!(
            "Generated by `coordsim explore --seed {seed}`: {} workers.",
            first_count + second_count
        ),
        profile: options.profile,
        settings,
        coordinator: AgentScript {
            prompt: format!("Run explore program {seed}."),
            recorded_prompt: None,
            turns,
        },
        workers,
        launches: Vec::new(),
        lead: Vec::new(),
        faults: Vec::new(),
        swarm: SwarmSettings {
            kinds: FaultKind::ALL.to_vec(),
            ..SwarmSettings::default()
        },
        expect: Default::default(),
        economics: Default::default(),
        model: Default::default(),
        recording: None,
    }
}
