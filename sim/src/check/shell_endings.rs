//! A background shell's envelope against how the world's shell ended its command
//! (PROTOCOL.md §1, §3): a command the shell ended with a non-zero exit code, or
//! killed, failed, and an envelope that tells the coordinator's model it completed
//! forges its status (invariant 2).
//!
//! The shell witness (`trace/shell_witness.rs`) logs each ending by command line,
//! the tap logs each background shell's task id with its command as the
//! launching model was told it, and the envelope witness the status the
//! coordinator's model received. A command line may run more than once with
//! different endings; an envelope is judged only when none of its command's
//! runs succeeded.

use std::collections::{BTreeMap, BTreeSet};

use coord_runtime::envelope::EnvelopeStatus;

use super::{Invariant, Violation};
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// How the world's shell ended one run of a command.
fn ending(exit_code: Option<i32>, timed_out: bool) -> String {
    match (exit_code, timed_out) {
        (_, true) => "killed it at its timeout".to_owned(),
        (Some(code), false) => format!("ended it with exit code {code}"),
        (None, false) => "killed it by a signal".to_owned(),
    }
}

/// A violation for each background shell whose envelope said completed while the
/// shell ended every run of its command in failure.
pub fn shell_endings(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut launched: Vec<(&str, &str)> = Vec::new();
    let mut succeeded: BTreeSet<&str> = BTreeSet::new();
    let mut failed: BTreeMap<&str, String> = BTreeMap::new();
    let mut completed: Vec<(&str, u64)> = Vec::new();
    for entry in trace {
        let TraceEvent::Sim(event) = &entry.typed else {
            continue;
        };
        match event {
            SimEvent::ShellLaunched {
                task_id, command, ..
            } => launched.push((task_id, command)),
            SimEvent::ShellEnded {
                command,
                exit_code,
                timed_out,
                ..
            } => {
                if *exit_code == Some(0) && !*timed_out {
                    succeeded.insert(command);
                } else {
                    failed.insert(command, ending(*exit_code, *timed_out));
                }
            }
            SimEvent::EnvelopesAccepted {
                task_ids, statuses, ..
            } => completed.extend(
                task_ids
                    .iter()
                    .zip(statuses.iter())
                    .filter(|(_, status)| **status == EnvelopeStatus::Completed)
                    .map(|(task_id, _)| (task_id.as_str(), entry.time_ms)),
            ),
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (task_id, at_ms) in completed {
        let Some((_, command)) = launched.iter().find(|(id, _)| *id == task_id) else {
            continue;
        };
        if succeeded.contains(command) {
            continue;
        }
        if let Some(how) = failed.get(command) {
            violations.push(Violation::new(
                Invariant::NoForgery,
                format!(
                    "at {at_ms} ms the coordinator's model was told shell task {task_id} \
                     completed, but the shell {how} (`{command}`)"
                ),
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::sim_entry;
    use crate::trace::Name;

    fn launched(task_id: &str, command: &str) -> TraceEntry {
        sim_entry(
            100,
            SimEvent::ShellLaunched {
                agent: Name::new("worker"),
                task_id: task_id.to_owned(),
                command: Name::new(command),
            },
        )
    }

    fn ended(command: &str, exit_code: Option<i32>, timed_out: bool) -> TraceEntry {
        sim_entry(
            200,
            SimEvent::ShellEnded {
                command: Name::new(command),
                cwd: Name::new("/work"),
                exit_code,
                timed_out,
            },
        )
    }

    fn accepted(task_id: &str, status: EnvelopeStatus) -> TraceEntry {
        sim_entry(
            300,
            SimEvent::EnvelopesAccepted {
                task_ids: vec![task_id.to_owned()].into(),
                statuses: vec![status].into(),
                bodies: Box::default(),
            },
        )
    }

    #[test]
    fn a_failed_command_reported_completed_is_a_forged_status() {
        // Goal: the status is judged by the shell's ending, in both directions of
        // failure (an exit code, a kill), and a command that also succeeded once
        // is left alone.
        let nonzero = [
            launched("b1", "cargo test"),
            ended("cargo test", Some(101), false),
            accepted("b1", EnvelopeStatus::Completed),
        ];
        let found = shell_endings(&nonzero);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].detail.contains("exit code 101"),
            "{}",
            found[0].detail
        );
        let timeout = [
            launched("b2", "soak"),
            ended("soak", None, true),
            accepted("b2", EnvelopeStatus::Completed),
        ];
        assert!(shell_endings(&timeout)[0].detail.contains("timeout"));
        let told_failed = [
            launched("b1", "cargo test"),
            ended("cargo test", Some(101), false),
            accepted("b1", EnvelopeStatus::Failed),
        ];
        assert!(shell_endings(&told_failed).is_empty());
        let once_succeeded = [
            launched("b1", "cargo test"),
            ended("cargo test", Some(101), false),
            ended("cargo test", Some(0), false),
            accepted("b1", EnvelopeStatus::Completed),
        ];
        assert!(shell_endings(&once_succeeded).is_empty());
    }
}
