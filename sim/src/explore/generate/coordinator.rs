//! Programs of a main thread in coordinator mode with the Agent tool (profiles
//! `claude-code` and `hardened`):
//!
//! - A first batch of background workers (`Agent` with `run_in_background`, a
//!   `name` and a `description`), each local, in a worktree or on the remote host,
//!   now and then with `run_in_background = false`, which coordinator mode
//!   overrides; maybe a team; maybe a second spawn of a worker's prompt, under its
//!   live name or under a worktree name no branch may have, which the runtime must
//!   refuse;
//!   maybe an off-surface `Read`.
//! - In the same coordinator turn, the next tool round: messages to workers that
//!   are still running (they have three slow tool rounds ahead, so the message is
//!   handed over at a boundary; a remote one must refuse it) and `TaskStop`s
//!   through the `{{task:<prompt>}}` placeholder (a stopped worker rightly leaves
//!   its script unfinished), while the stopped worker's first model call may still
//!   be under way.
//! - The team's mail and the time it needs (see [`super::team`]).
//! - Once a chosen worker of the first batch has notified, a second batch.
//! - Messages to finished workers, each sent once its worker has notified, which
//!   resume it for exactly one more scripted turn (and one more notification).
//! - A last turn that waits for every notification the program causes.

use serde_json::json;

use super::draw::Draw;
use super::team::Team;
use super::worker::{draw_worker, Fate, Origin, Worker};
use super::{call, Parts};
use crate::model::{Latency, ScriptedToolCall, ScriptedTurn, Trigger};
use crate::scenario::FaultKind;

/// Most workers in one batch.
const BATCH_WORKERS_MAX: u64 = 4;

/// The coordinator turn's tool calls that steer the first batch right after its
/// launch: messages to running workers, and stops.
pub(super) fn steer(workers: &[Worker], seed: u64) -> Vec<ScriptedToolCall> {
    let mut steer = Vec::new();
    for worker in workers {
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
                json!({ "task_id": worker.task_placeholder(seed) }),
            )),
            Fate::Plain | Fate::Resumed => {}
        }
    }
    steer
}

/// One turn per resumed worker: a message once it has notified.
pub(super) fn resumptions(draw: &mut Draw, workers: &[Worker]) -> Vec<ScriptedTurn> {
    workers
        .iter()
        .filter(|worker| worker.fate == Fate::Resumed)
        .map(|worker| ScriptedTurn {
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
        })
        .collect()
}

/// The program of `seed` in coordinator mode.
pub(super) fn program(draw: &mut Draw, seed: u64) -> Parts {
    let first_count = 1 + draw.below(BATCH_WORKERS_MAX) as usize;
    let second_count = draw.below(BATCH_WORKERS_MAX) as usize;
    let first: Vec<Worker> = (1..=first_count)
        .map(|index| {
            draw_worker(
                draw,
                index,
                Origin::Background,
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
        .map(|index| {
            draw_worker(
                draw,
                index,
                Origin::Background,
                &[Fate::Plain, Fate::Resumed],
            )
        })
        .collect();
    let team = draw.chance(1, 3).then(|| Team::draw(draw));
    let off_surface_read = draw.chance(1, 4);
    let refused_spawn = draw.chance(1, 6);

    let mut parts = Parts::new(true);
    let mut launch: Vec<ScriptedToolCall> = Vec::new();
    if off_surface_read {
        // The coordinator has no file tools: the runtime must refuse this call.
        launch.push(call("Read", json!({ "file_path": "/work/README.md" })));
    }
    launch.extend(first.iter().map(|worker| worker.spawn(seed)));
    if let Some(team) = &team {
        launch.extend(team.spawns(seed));
    }
    if refused_spawn {
        // A second spawn of the first worker's prompt that the runtime must refuse,
        // so it launches nothing and notifies nothing: under the first worker's
        // live name, or in a worktree whose name is a valid agent name but no
        // valid branch (a trailing `.`, a `.lock` ending).
        let mut again = first[0].spawn(seed);
        if draw.chance(1, 2) {
            let name = match draw.below(2) {
                0 => format!("worker-{}.", first[0].index),
                _ => format!("worker-{}.lock", first[0].index),
            };
            again.input["name"] = json!(name);
            again.input["isolation"] = json!("worktree");
        }
        launch.push(again);
    }
    parts.turns.push(ScriptedTurn {
        text: Some(format!("Program {seed}: launching {first_count} tasks.")),
        tool_calls: launch,
        latency: draw.latency_ms(200, 2_000),
        ..ScriptedTurn::default()
    });

    let steer = steer(&first, seed);
    if !steer.is_empty() {
        parts.turns.push(ScriptedTurn {
            tool_calls: steer,
            latency: Latency::Uniform {
                min_ms: 200,
                max_ms: 800,
            },
            ..ScriptedTurn::default()
        });
    }

    if let Some(team) = &team {
        let mail_turn = parts.turns.len() as u32 + 1;
        let (turns, lead) = team.lead_turns(seed, mail_turn);
        parts.turns.extend(turns);
        parts.lead = lead;
        if team.asks_lead() {
            // A clobbered write gives a teammate a Write the lead's harness has no
            // answer for: it would wait out the permission timeout and its spawn
            // deadline, its script unplayed, for want of a scripted answer.
            parts.unfit_kinds.push(FaultKind::ClobberedWrite);
        }
    }

    if !second.is_empty() {
        let waited = &first[draw.index(first.len())];
        parts.turns.push(ScriptedTurn {
            text: Some(format!("Launching {second_count} more tasks.")),
            tool_calls: second.iter().map(|worker| worker.spawn(seed)).collect(),
            when: Some(Trigger::NotificationsFrom {
                pattern: waited.description(),
            }),
            latency: draw.latency_ms(200, 2_000),
            ..ScriptedTurn::default()
        });
    }

    let workers: Vec<Worker> = first.into_iter().chain(second).collect();
    let resumptions = resumptions(draw, &workers);
    parts.turns.extend(resumptions);
    parts.notifications = workers.iter().map(Worker::notifications).sum::<usize>()
        + team.as_ref().map_or(0, Team::notifications);
    parts
        .workers
        .extend(workers.iter().map(|worker| worker.script(seed)));
    if let Some(team) = &team {
        parts.workers.extend(team.scripts(seed));
    }
    parts.summary = format!(
        "{} workers{}",
        workers.len(),
        if team.is_some() { " and a team" } else { "" }
    );
    parts
}
