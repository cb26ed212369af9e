//! PROTOCOL.md §1's kill, judged on what the model API saw: a stopped agent
//! aborts, and the stop cascades to the tasks it launched. Part of invariant 1 (a
//! task ends in exactly one terminal state, and a stop is one), so it reports as
//! `notify-once`.
//!
//! Once the coordinator's model has been told a task stopped (a TaskStop answer
//! without an error, or an envelope saying `killed` or `timeout`: a task killed at
//! its deadline is aborted as a stopped one is), every model call that task, or a task it launched in the
//! background (directly or not), had open then must have ended by then: answered
//! before, or abandoned by its caller. A call answered after the stop, abandoned
//! only later (a child left running until its deadline), or still open when the run
//! was over, is a violation. A runtime that forgets to cancel a child reports
//! nothing wrong; the child's call going on is what the world sees.
//!
//! Who launched whom comes from the launch answers each agent's model received,
//! never from the runtime's record of parents. Calls sent after the stop are not
//! judged: a message to a stopped worker may resume it, as a new task under its
//! old label. Nor are a remote worker's (a task id with §1's `r` prefix): it runs
//! on its own host, which hears of the stop only over the network, and a
//! partition may hold that back; the coordinator's side of its stop is that it
//! stops waiting, which the envelope checks see.

use std::collections::{BTreeMap, BTreeSet};

use coord_runtime::envelope::EnvelopeStatus;

use super::spawn_answers::is_remote_id;
use super::{Invariant, Violation};
use crate::trace::{CallEnded, EventRef, SimEvent, TaskLaunched, TraceEntry};

/// Whether an envelope of `status` tells of a task that was killed: stopped, or
/// ended at its deadline (`timeout` on the nexo wire, `killed` on Claude Code's).
pub fn ends_by_kill(status: EnvelopeStatus) -> bool {
    matches!(status, EnvelopeStatus::Killed | EnvelopeStatus::Timeout)
}

/// Stops cascade over `trace`'s TaskStop answers and its `stops_witnessed` event.
pub fn stop_cascade(trace: &[TraceEntry]) -> Vec<Violation> {
    // Each stopped task, with when the coordinator's model first learned it, and
    // when it learned of each from an envelope saying so.
    let mut stops: BTreeMap<&str, u64> = BTreeMap::new();
    let mut told_by_envelope: BTreeSet<(&str, u64)> = BTreeSet::new();
    let mut witnessed: Option<(&[TaskLaunched], &[CallEnded])> = None;
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Sim(SimEvent::TasksStopped { task_ids }) => {
                for task_id in task_ids {
                    stops.entry(task_id).or_insert(entry.time_ms);
                }
            }
            EventRef::Sim(SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            }) => {
                let killed = task_ids
                    .iter()
                    .zip(statuses.iter())
                    .filter(|(_, status)| ends_by_kill(**status));
                for (task_id, _) in killed {
                    stops.entry(task_id).or_insert(entry.time_ms);
                    told_by_envelope.insert((task_id, entry.time_ms));
                }
            }
            EventRef::Sim(SimEvent::StopsWitnessed { tasks, calls }) => {
                witnessed = Some((tasks, calls));
            }
            _ => {}
        }
    }
    let Some((tasks, calls)) = witnessed else {
        return Vec::new();
    };
    let mut stopped = stopped_agents(&stops, tasks);
    // An agent label that more than one task carries cannot tell their calls
    // apart: only stopped agents of one task each are judged.
    let mut tasks_of_agent: BTreeMap<&str, usize> = BTreeMap::new();
    for task in tasks.iter().filter(|task| !is_remote_id(&task.task_id)) {
        *tasks_of_agent.entry(&task.agent).or_default() += 1;
    }
    stopped.retain(|agent, _| tasks_of_agent.get(agent).copied().unwrap_or(1) == 1);
    calls
        .iter()
        .filter_map(|call| {
            let (stop_ms, stopped_task) = *stopped.get(call.agent.as_str())?;
            // An envelope reaches the coordinator in the turn that may continue the
            // stopped worker, resumed under its old label in the same millisecond:
            // a call sent then is the resumed task's.
            let resumable_then = told_by_envelope.contains(&(stopped_task, stop_ms));
            if call.sent_ms > stop_ms || (resumable_then && call.sent_ms == stop_ms) {
                return None;
            }
            let how = match call.ended_ms {
                Some(ended_ms) if ended_ms <= stop_ms => return None,
                Some(ended_ms) if call.abandoned => format!("was abandoned only at {ended_ms} ms"),
                Some(ended_ms) => format!("was answered at {ended_ms} ms"),
                None => "was still open when the run was over".to_owned(),
            };
            let is_stopped_task = tasks
                .iter()
                .any(|task| task.task_id == stopped_task && task.agent == call.agent);
            let whose = if is_stopped_task {
                format!("the stopped task {stopped_task}")
            } else {
                format!("a task launched under the stopped task {stopped_task}")
            };
            Some(Violation::new(
                Invariant::NotifyOnce,
                format!(
                    "{whose} ({}) had call {} open (sent at {} ms) when the coordinator was told at {stop_ms} ms that {stopped_task} stopped, and it {how}: a stop aborts the task and cascades to the tasks it launched",
                    call.agent, call.call, call.sent_ms
                ),
            ))
        })
        .collect()
}

/// The agent labels a stop reaches, each with the earliest stop that reaches it
/// and that stop's task: each stopped task's label, and the labels of every task
/// launched under it. Remote tasks are left out: they run on another host, and a
/// stop reaches them over the network, not through the cascade.
pub(super) fn stopped_agents<'a>(
    stops: &BTreeMap<&'a str, u64>,
    tasks: &'a [TaskLaunched],
) -> BTreeMap<&'a str, (u64, &'a str)> {
    let mut agent_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for task in tasks.iter().filter(|task| !is_remote_id(&task.task_id)) {
        agent_of.insert(&task.task_id, &task.agent);
        children
            .entry(&task.launched_by)
            .or_default()
            .push(&task.agent);
    }
    let mut reached: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
    for (&task_id, &stop_ms) in stops {
        let Some(&root) = agent_of.get(task_id) else {
            continue;
        };
        let mut seen = BTreeSet::new();
        let mut stack = vec![root];
        while let Some(agent) = stack.pop() {
            if !seen.insert(agent) {
                continue;
            }
            let earliest = reached.entry(agent).or_insert((stop_ms, task_id));
            if stop_ms < earliest.0 {
                *earliest = (stop_ms, task_id);
            }
            stack.extend(children.get(agent).into_iter().flatten());
        }
    }
    reached
}

#[cfg(test)]
mod tests {
    use super::super::sim_entry as sim;
    use super::*;

    fn launched(task_id: &str, agent: &str, launched_by: &str) -> TaskLaunched {
        TaskLaunched {
            task_id: task_id.to_owned(),
            agent: agent.to_owned(),
            launched_by: launched_by.to_owned(),
        }
    }

    fn call(agent: &str, sent_ms: u64, ended_ms: Option<u64>, abandoned: bool) -> CallEnded {
        CallEnded {
            agent: agent.to_owned(),
            call: 2,
            sent_ms,
            ended_ms,
            abandoned,
            due_ms: None,
        }
    }

    /// The coordinator stops `stopped` at 10 s; the model API saw `tasks` launched
    /// and `calls` end.
    fn judge(stopped: &str, tasks: Vec<TaskLaunched>, calls: Vec<CallEnded>) -> Vec<Violation> {
        let stop = sim(
            10_000,
            SimEvent::TasksStopped {
                task_ids: vec![stopped.to_owned()],
            },
        );
        let witnessed = sim(20_000, SimEvent::StopsWitnessed { tasks, calls });
        stop_cascade(&[stop, witnessed])
    }

    /// The coordinator stops `aplan0001` (Plan) at 10 s; Plan launched Draft.
    fn run(calls: Vec<CallEnded>) -> Vec<Violation> {
        let tasks = vec![
            launched("aplan0001", "Plan.", "coordinator"),
            launched("adraft001", "Draft.", "Plan."),
        ];
        judge("aplan0001", tasks, calls)
    }

    #[test]
    fn a_stop_that_reaches_the_child_passes() {
        // Goal: calls abandoned at the stop, or answered before it, or sent after it
        // (a resume), are what a cascading stop leaves.
        let violations = run(vec![
            call("Plan.", 500, Some(10_000), true),
            call("Draft.", 900, Some(10_000), true),
            call("Draft.", 12_000, Some(15_000), false),
        ]);
        assert!(violations.is_empty(), "{violations:?}");
    }

    #[test]
    fn a_child_left_running_is_a_violation() {
        // Goal: each way a child outlives its stopped parent is reported with the
        // parent named: abandoned later (its deadline), answered later, never ended.
        for (ended_ms, abandoned, says) in [
            (Some(600_000), true, "abandoned only at 600000 ms"),
            (Some(30_000), false, "answered at 30000 ms"),
            (None, false, "still open when the run was over"),
        ] {
            let violations = run(vec![call("Draft.", 900, ended_ms, abandoned)]);
            assert_eq!(violations.len(), 1, "{violations:?}");
            let detail = &violations[0].detail;
            assert!(detail.contains(says), "{detail}");
            assert!(
                detail.contains("a task launched under the stopped task aplan0001"),
                "{detail}"
            );
        }
    }

    #[test]
    fn a_stopped_task_still_answered_is_a_violation() {
        // Goal: the stopped task itself is held to the same rule.
        let violations = run(vec![call("Plan.", 500, Some(11_000), false)]);
        assert!(
            violations[0].detail.contains("the stopped task aplan0001"),
            "{violations:?}"
        );
    }

    #[test]
    fn a_task_killed_at_its_deadline_is_held_to_its_envelope_as_to_a_stop() {
        // Goal: an envelope saying `timeout` (or `killed`) tells the coordinator the
        // task was stopped: a call it had open then must have ended, except one
        // sent in that millisecond, which is the task resumed under its label.
        let judged = |calls| {
            let killed = sim(
                30_000,
                SimEvent::EnvelopesAccepted {
                    task_ids: vec!["aplan0001".to_owned()].into(),
                    statuses: vec![EnvelopeStatus::Timeout].into(),
                    bodies: Vec::new().into(),
                },
            );
            let tasks = vec![launched("aplan0001", "Plan.", "coordinator")];
            let witnessed = sim(40_000, SimEvent::StopsWitnessed { tasks, calls });
            stop_cascade(&[killed, witnessed])
        };
        assert_eq!(judged(vec![call("Plan.", 500, None, false)]).len(), 1);
        assert!(judged(vec![call("Plan.", 500, Some(30_000), true)]).is_empty());
        assert!(judged(vec![call("Plan.", 30_000, Some(31_000), false)]).is_empty());
    }

    #[test]
    fn a_remote_worker_is_not_held_to_the_stop() {
        // Goal: a remote worker's host may go on until the stop reaches it over
        // the network; its calls are not judged.
        let tasks = vec![launched("rplan0001", "Plan.", "coordinator")];
        let calls = vec![call("Plan.", 500, Some(15_000), false)];
        assert!(judge("rplan0001", tasks, calls).is_empty());
    }

    #[test]
    fn a_label_two_tasks_share_is_not_judged() {
        // Goal: calls are attributed by agent label; when two launched tasks carry
        // one label, neither's calls can be held to the other's stop.
        let tasks = vec![
            launched("aplan0001", "Plan.", "coordinator"),
            launched("aplan0002", "Plan.", "coordinator"),
        ];
        let calls = vec![call("Plan.", 500, Some(30_000), false)];
        assert!(judge("aplan0001", tasks, calls).is_empty());
    }
}
