//! The progress a TaskGet answer reports (PROTOCOL.md §1, Progress: the tool-use
//! count and the last five activities), judged against the rounds the task's
//! worker's model answered and was sent (`run/progress_witness.rs`).

use super::Violation;
use crate::trace::{Name, RoundsSeen, SimEvent, TaskProgressSeen, TraceEntry, TraceEvent};

/// The name a TaskGet answer with a wrong progress fails under.
pub const TASK_PROGRESS: &str = "task-progress";

/// How many recent activities a task reports (PROTOCOL.md §1).
const ACTIVITIES_RECENT: usize = 5;

/// A failure for each TaskGet answer whose progress no run of its worker's rounds
/// gives: a tool-use count that is not where a round of the worker ended, or below
/// the rounds its model had already been sent back, and activities other than
/// the tools of the last five calls counted, oldest first.
pub fn judge_task_progress(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::TaskProgressRead(seen)) => {
                let rounds = seen.rounds.as_ref()?;
                let problem = progress_problem(seen, rounds)?;
                Some(Violation {
                    invariant: TASK_PROGRESS,
                    detail: format!(
                        "at {} ms the coordinator read TaskGet's answer for task {}: {problem}",
                        entry.time_ms, seen.task_id
                    ),
                })
            }
            _ => None,
        })
        .collect()
}

/// What is wrong with `seen`'s progress, given its worker's `rounds`.
fn progress_problem(seen: &TaskProgressSeen, rounds: &RoundsSeen) -> Option<String> {
    let count = seen.tool_uses;
    let round_end = count == 0 || rounds.round_ends.contains(&count);
    if count < rounds.tool_uses_min || !round_end {
        return Some(format!(
            "it reports {count} tool uses, where its worker's model had been sent back the results of {} tool calls and its rounds ended at {:?}",
            rounds.tool_uses_min, rounds.round_ends
        ));
    }
    let counted = &rounds.tools[..count as usize];
    let expected = &counted[counted.len().saturating_sub(ACTIVITIES_RECENT)..];
    (seen.activities != expected).then(|| {
        format!(
            "after {count} tool uses it reports the recent activities [{}], where its worker's last calls were [{}]",
            joined(&seen.activities),
            joined(expected)
        )
    })
}

fn joined(names: &[Name]) -> String {
    names
        .iter()
        .map(Name::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Name> {
        list.iter().map(|name| Name::new(name)).collect()
    }

    fn read(tool_uses: u64, activities: &[&str]) -> Vec<TraceEntry> {
        let seen = TaskProgressSeen {
            task_id: "a00000001".into(),
            tool_uses,
            activities: names(activities),
            rounds: Some(RoundsSeen {
                tools: names(&["Glob", "Read", "Grep", "Read", "Glob", "Grep", "Read"]),
                round_ends: vec![3, 5, 7],
                tool_uses_min: 3,
            }),
        };
        vec![super::super::sim_entry(
            900,
            SimEvent::TaskProgressRead(Box::new(seen)),
        )]
    }

    #[test]
    fn the_last_five_tools_counted_pass() {
        assert!(
            judge_task_progress(&read(7, &["Grep", "Read", "Glob", "Grep", "Read"])).is_empty()
        );
        assert!(
            judge_task_progress(&read(5, &["Glob", "Read", "Grep", "Read", "Glob"])).is_empty()
        );
        assert!(judge_task_progress(&read(3, &["Glob", "Read", "Grep"])).is_empty());
    }

    #[test]
    fn the_newest_activity_dropped_fails() {
        // Goal: the slip that drops the newest activity past the cap. Method: the
        // list it leaves after seven tools.
        let violations = judge_task_progress(&read(7, &["Glob", "Read", "Grep", "Read", "Read"]));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].invariant, TASK_PROGRESS);
        assert!(
            violations[0]
                .detail
                .contains("where its worker's last calls were [Grep, Read, Glob, Grep, Read]"),
            "{}",
            violations[0].detail
        );
    }

    #[test]
    fn a_count_between_round_ends_or_below_the_rounds_sent_back_fails() {
        for count in [6, 2, 0, 8] {
            let violations = judge_task_progress(&read(count, &[]));
            assert_eq!(violations.len(), 1, "{count}");
            assert!(violations[0]
                .detail
                .contains(&format!("reports {count} tool uses")));
        }
    }

    #[test]
    fn an_answer_without_rounds_is_not_judged() {
        let mut trace = read(6, &[]);
        if let TraceEvent::Sim(SimEvent::TaskProgressRead(seen)) = &mut trace[0].typed {
            seen.rounds = None;
        }
        assert!(judge_task_progress(&trace).is_empty());
    }
}
