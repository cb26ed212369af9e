//! What a generated program exercises, read from the program itself (the scenario
//! that runs), not from the generator's intentions: `coordsim explore --coverage`
//! counts the seeds whose program has each feature, beside the runtime probes
//! their runs reached.

use std::collections::BTreeSet;

use crate::model::{AgentScript, ScriptedToolCall};
use crate::scenario::{Fault, LeadActionKind, Scenario};

/// Every feature a program may have, in the order reports list them.
pub const FEATURES: [&str; 35] = [
    "shape-coordinator",
    "shape-solo",
    "shape-nexo-coordinator",
    "background-spawn",
    "background-request-overridden",
    "foreground-spawn",
    "one-shot-spawn",
    "worktree-spawn",
    "remote-spawn",
    "spawn-name-clash",
    "spawn-bad-slug",
    "harness-launch",
    "fork",
    "fork-in-fork",
    "message-to-running",
    "message-to-finished",
    "send-message-to-worker",
    "binding-probe",
    "task-stop",
    "shell-stop",
    "task-list-get",
    "task-output",
    "team",
    "team-mail",
    "team-broadcast",
    "plan-approval",
    "permission-approved",
    "permission-denied",
    "team-shutdown",
    "scratchpad",
    "shared-file-write",
    "background-shell",
    "off-surface-call",
    "explicit-fault",
    "compaction",
];

fn input_str<'a>(call: &'a ScriptedToolCall, key: &str) -> Option<&'a str> {
    call.input.get(key).and_then(serde_json::Value::as_str)
}

fn calls(script: &AgentScript) -> impl Iterator<Item = &ScriptedToolCall> {
    script.turns.iter().flat_map(|turn| &turn.tool_calls)
}

/// The features of `scenario`, each one of [`FEATURES`].
pub fn features(scenario: &Scenario) -> BTreeSet<&'static str> {
    let mut found = BTreeSet::new();
    let coordinator_mode = scenario.settings.coordinator_mode;
    found.insert(match (coordinator_mode, scenario.launches.is_empty()) {
        (false, _) => "shape-solo",
        (true, false) => "shape-nexo-coordinator",
        (true, true) => "shape-coordinator",
    });
    if !scenario.launches.is_empty() {
        found.insert("harness-launch");
    }
    if !scenario.faults.is_empty() {
        found.insert("explicit-fault");
    }
    if scenario.settings.compact_threshold_tokens.is_some() {
        found.insert("compaction");
    }
    let switched = scenario
        .faults
        .iter()
        .any(|fault| matches!(fault, Fault::BindingSwitch { .. }));
    for turn in scenario.coordinator.turns.iter() {
        let mut names = BTreeSet::new();
        for call in &turn.tool_calls {
            match call.name.as_str() {
                "Agent" => {
                    if let Some(name) = input_str(call, "name") {
                        if !names.insert(name) {
                            found.insert("spawn-name-clash");
                        }
                        if name.ends_with('.') || name.ends_with(".lock") {
                            found.insert("spawn-bad-slug");
                        }
                    }
                    let fork = input_str(call, "subagent_type") == Some("fork");
                    let team = input_str(call, "team_name").is_some();
                    match call.input.get("run_in_background") {
                        _ if fork => {
                            found.insert("fork");
                        }
                        _ if team => {
                            found.insert("team");
                        }
                        Some(serde_json::Value::Bool(true)) => {
                            found.insert("background-spawn");
                        }
                        Some(serde_json::Value::Bool(false)) if coordinator_mode => {
                            found.insert("background-request-overridden");
                        }
                        _ if coordinator_mode => {
                            found.insert("background-spawn");
                        }
                        _ => {
                            found.insert("foreground-spawn");
                            if matches!(input_str(call, "subagent_type"), Some("Explore" | "Plan"))
                            {
                                found.insert("one-shot-spawn");
                            }
                        }
                    }
                    match input_str(call, "isolation") {
                        Some("worktree") => {
                            found.insert("worktree-spawn");
                        }
                        Some("remote") => {
                            found.insert("remote-spawn");
                        }
                        _ => {}
                    }
                }
                "SendMessage" => match (input_str(call, "to"), call.input.get("message")) {
                    (Some("*"), _) => {
                        found.insert("team-broadcast");
                    }
                    (_, Some(serde_json::Value::Object(_))) => {
                        found.insert("plan-approval");
                    }
                    (Some(to), _) if to.starts_with("mate-") => {
                        found.insert("team-mail");
                    }
                    _ if turn.when.is_some() => {
                        found.insert("message-to-finished");
                    }
                    _ => {
                        found.insert("message-to-running");
                    }
                },
                "SendMessageToWorker" => {
                    found.insert(if switched {
                        "binding-probe"
                    } else {
                        "send-message-to-worker"
                    });
                }
                "TaskStop" => {
                    let names_shell = input_str(call, "task_id")
                        .is_some_and(|id| crate::fault::shell_pattern(id).is_some());
                    found.insert(if names_shell {
                        "shell-stop"
                    } else {
                        "task-stop"
                    });
                }
                "TaskList" | "TaskGet" => {
                    found.insert("task-list-get");
                }
                "TaskOutput" => {
                    found.insert("task-output");
                }
                // The coordinator's surface has no file tools.
                "Read" if coordinator_mode => {
                    found.insert("off-surface-call");
                }
                _ => {}
            }
        }
    }
    for action in &scenario.lead {
        found.insert(match action.action {
            LeadActionKind::Shutdown => "team-shutdown",
            LeadActionKind::ApprovePermission => "permission-approved",
            // An unanswered request ends as a refusal too, at its timeout.
            LeadActionKind::DenyPermission | LeadActionKind::IgnorePermission => {
                "permission-denied"
            }
            LeadActionKind::Redirect => "teammate-redirect",
        });
    }
    for call in std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .flat_map(calls)
    {
        match call.name.as_str() {
            "ScratchpadRead" | "ScratchpadWrite" => {
                found.insert("scratchpad");
            }
            "Write" | "Edit" if input_str(call, "file_path") == Some("/work/shared/notes.md") => {
                found.insert("shared-file-write");
            }
            "Bash" if call.input.get("run_in_background") == Some(&serde_json::json!(true)) => {
                found.insert("background-shell");
            }
            _ => {}
        }
    }
    for script in &scenario.workers {
        for call in calls(script) {
            match call.name.as_str() {
                "Agent" if input_str(call, "subagent_type") == Some("fork") => {
                    found.insert("fork-in-fork");
                }
                // A worker has no SendMessage.
                "SendMessage" => {
                    found.insert("off-surface-call");
                }
                _ => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::{generate, ExploreOptions};
    use coord_runtime::profile::Profile;

    #[test]
    fn every_feature_is_named_in_the_list_and_drawn_by_some_seed() {
        // Goal: the list reports read is complete, and the generator reaches every
        // feature in it. Method: the features of seeds 0..300 of each profile.
        let mut seen = BTreeSet::new();
        for profile in [Profile::Hardened, Profile::ClaudeCode, Profile::Nexo] {
            let options = ExploreOptions {
                profile,
                ..ExploreOptions::default()
            };
            for seed in 0..300 {
                for feature in features(&generate(seed, &options)) {
                    assert!(FEATURES.contains(&feature), "{feature} is not listed");
                    seen.insert(feature);
                }
            }
        }
        let unseen: Vec<&str> = FEATURES
            .iter()
            .copied()
            .filter(|feature| !seen.contains(feature))
            .collect();
        assert!(unseen.is_empty(), "never drawn: {unseen:?}");
    }
}
