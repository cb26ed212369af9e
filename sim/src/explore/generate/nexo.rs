//! Programs of a nexo coordinator (profile `nexo`, coordinator mode), whose
//! surface has no Agent tool: the harness hands it workers (`[[launches]]`) under
//! the channel binding the session serves, and it drives them with TaskList,
//! TaskGet, TaskStop and SendMessageToWorker.
//!
//! - The first turn lists the tasks, looks one up, stops some of the launches
//!   while their first model call is under way, and asks to continue one that is
//!   still running (which the runtime must refuse: it has not finished).
//! - Either the session keeps its binding, and once every launch has notified the
//!   coordinator continues some of them (each plays one more scripted turn and
//!   notifies again); or after the coordinator's first call a message from another
//!   chat makes the session serve another binding (an explicit `binding-switch`),
//!   and the coordinator, answering that chat, probes the first binding's workers
//!   by their ids, and an id that never existed. The registry is keyed by binding,
//!   so every probe must answer "unknown worker", byte for byte alike
//!   (invariant 10).
//! - A last turn waits for every notification.

use serde_json::json;

use super::draw::Draw;
use super::worker::{draw_worker, Fate, Origin, Worker};
use super::{call, tool_turn, Parts};
use crate::model::{ScriptedToolCall, ScriptedTurn, Trigger};
use crate::scenario::{Fault, Launch};

/// Most launches.
const LAUNCHES_MAX: u64 = 4;
/// Bindings a program starts with: `<channel>:<account>`, or a channel alone
/// (its account is `default`).
const BINDINGS: [&str; 3] = ["telegram:alice", "slack:acme", "telegram"];
/// Bindings a switch moves to, one per starting binding: the same channel with
/// another account, another channel, and the same channel's named account.
const SWITCHED_TO: [&str; 3] = ["telegram:bob", "discord:acme", "telegram:default-2"];
/// A worker id that never existed: the runtime must answer it exactly as it
/// answers a worker of another binding.
const NEVER_A_WORKER: &str = "a0zzzzzzz";

/// The program of `seed` for a nexo coordinator.
pub(super) fn program(draw: &mut Draw, seed: u64) -> Parts {
    let binding = draw.index(BINDINGS.len());
    let switched = draw.chance(1, 2);
    let count = 1 + draw.below(LAUNCHES_MAX) as usize;
    let fates: &[Fate] = if switched {
        // The other chat cannot continue the first one's workers.
        &[Fate::Plain, Fate::MessagedRunning, Fate::Stopped]
    } else {
        &[
            Fate::Plain,
            Fate::MessagedRunning,
            Fate::Stopped,
            Fate::Resumed,
        ]
    };
    let launches: Vec<Worker> = (1..=count)
        .map(|index| draw_worker(draw, index, Origin::Harness, fates))
        .collect();
    let looked_up = &launches[draw.index(count)];

    let mut parts = Parts::new(true);
    parts.binding = Some(BINDINGS[binding].to_owned());
    let mut first: Vec<ScriptedToolCall> = vec![
        call("TaskList", json!({})),
        call(
            "TaskGet",
            json!({ "task_id": looked_up.task_placeholder(seed) }),
        ),
    ];
    for worker in &launches {
        match worker.fate {
            Fate::Stopped => first.push(call(
                "TaskStop",
                json!({ "task_id": worker.task_placeholder(seed) }),
            )),
            Fate::MessagedRunning => first.push(continue_worker(worker, seed)),
            Fate::Plain | Fate::Resumed => {}
        }
    }
    parts
        .turns
        .push(tool_turn(first, draw.latency_ms(200, 2_000)));

    // Every launch notifies, a stopped one too, and so does each background shell:
    // once all have, each launch is finished.
    let all_notified = Trigger::NotificationsAtLeast {
        count: launches
            .iter()
            .map(|worker| 1 + usize::from(worker.shell))
            .sum(),
    };
    if switched {
        parts.faults.push(Fault::BindingSwitch {
            after_call: 1,
            binding: SWITCHED_TO[binding].to_owned(),
        });
        let mut probes: Vec<ScriptedToolCall> = launches
            .iter()
            .map(|worker| continue_worker(worker, seed))
            .collect();
        probes.push(call(
            "SendMessageToWorker",
            json!({ "worker_id": NEVER_A_WORKER, "message": "Add what was said since." }),
        ));
        parts.turns.push(ScriptedTurn {
            when: Some(all_notified),
            ..tool_turn(probes, draw.latency_ms(200, 2_000))
        });
    } else {
        let resumed: Vec<ScriptedToolCall> = launches
            .iter()
            .filter(|worker| worker.fate == Fate::Resumed)
            .map(|worker| continue_worker(worker, seed))
            .collect();
        if !resumed.is_empty() {
            parts.turns.push(ScriptedTurn {
                when: Some(all_notified),
                ..tool_turn(resumed, draw.latency_ms(200, 2_000))
            });
        }
    }

    parts.notifications = launches.iter().map(Worker::notifications).sum();
    parts.launches = launches
        .iter()
        .map(|worker| Launch {
            description: worker.description(),
            prompt: worker.prompt(seed),
        })
        .collect();
    parts
        .workers
        .extend(launches.iter().map(|worker| worker.script(seed)));
    parts.summary = format!(
        "{count} launches under {}{}",
        BINDINGS[binding],
        if switched {
            format!(", probed from {}", SWITCHED_TO[binding])
        } else {
            String::new()
        }
    );
    parts
}

/// A SendMessageToWorker to `worker`'s task.
fn continue_worker(worker: &Worker, seed: u64) -> ScriptedToolCall {
    call(
        "SendMessageToWorker",
        json!({
            "worker_id": worker.task_placeholder(seed),
            "message": format!("Launch {}: add what was said since.", worker.index),
        }),
    )
}
