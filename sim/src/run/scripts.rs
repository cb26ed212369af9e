//! Faults that are things a model says: extra tool calls, hostile inputs. They are
//! applied to the scripts before the run starts, and recorded as fired at once.

use std::collections::BTreeMap;

use serde_json::json;

use crate::fault::{names, FaultBook};
use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn};
use crate::scenario::{Fault, Scenario};

/// The working directory of every same-dir worker.
pub const WORKSPACE_DIR: &str = "/work";
/// A name that tries to leave the worktree directory.
pub const MALICIOUS_NAME: &str = "../../../../etc/cron.d/evil";

fn turn(calls: Vec<ScriptedToolCall>) -> ScriptedTurn {
    ScriptedTurn {
        tool_calls: calls,
        latency: Latency::Fixed { ms: 1_000 },
        ..ScriptedTurn::default()
    }
}

fn call(name: &str, input: serde_json::Value) -> ScriptedToolCall {
    ScriptedToolCall::new(name, input)
}

/// The scripts with every script fault of `book` applied: the coordinator's and the
/// workers'.
pub fn apply(scenario: &Scenario, book: &FaultBook) -> (AgentScript, Vec<AgentScript>) {
    let mut coordinator = scenario.coordinator.clone();
    let mut workers: BTreeMap<String, AgentScript> = scenario
        .workers
        .iter()
        .map(|w| (w.prompt.clone(), w.clone()))
        .collect();
    for (index, fault) in book.schedule().iter().enumerate() {
        match fault {
            Fault::ClobberedWrite { writers, path } => {
                for (n, pattern) in writers.iter().enumerate() {
                    for script in workers.values_mut().filter(|s| names(pattern, &s.prompt)) {
                        let file_path = format!("{WORKSPACE_DIR}/{path}");
                        std::sync::Arc::make_mut(&mut script.turns).splice(
                            0..0,
                            [
                                turn(vec![call("Read", json!({ "file_path": file_path }))]),
                                turn(vec![call(
                                    "Write",
                                    json!({ "file_path": file_path, "content": format!("writer {n} was here\n") }),
                                )]),
                            ],
                        );
                    }
                }
                book.record(index, fault, format!("{writers:?} both write {path}"));
            }
            Fault::ClobberedScratch { writers, key } => {
                for (n, pattern) in writers.iter().enumerate() {
                    for script in workers.values_mut().filter(|s| names(pattern, &s.prompt)) {
                        std::sync::Arc::make_mut(&mut script.turns).insert(
                            0,
                            turn(vec![call(
                                "ScratchpadWrite",
                                json!({ "key": key, "content": format!("writer {n}'s findings") }),
                            )]),
                        );
                    }
                }
                book.record(
                    index,
                    fault,
                    format!("{writers:?} both write scratch key {key}"),
                );
            }
            Fault::OversizeMessage { worker, size_bytes } => {
                let text = "x".repeat(usize::try_from(*size_bytes).unwrap_or(usize::MAX));
                // Built around the text, not copied from it: it runs to megabytes.
                let mut input = serde_json::Map::new();
                input.insert("to".to_owned(), json!("team-lead"));
                input.insert("message".to_owned(), serde_json::Value::String(text));
                let mut input = Some(serde_json::Value::Object(input));
                let senders: Vec<&mut AgentScript> = workers
                    .values_mut()
                    .filter(|s| names(worker, &s.prompt))
                    .collect();
                let last = senders.len().saturating_sub(1);
                for (n, script) in senders.into_iter().enumerate() {
                    let input = if n == last {
                        input.take()
                    } else {
                        input.clone()
                    };
                    let input = input.expect("only the last sender takes the input");
                    std::sync::Arc::make_mut(&mut script.turns)
                        .insert(0, turn(vec![call("SendMessage", input)]));
                }
                book.record(index, fault, format!("{worker} sends {size_bytes} bytes"));
            }
            Fault::MaliciousSlug { worker } => {
                let target = workers.keys().find(|prompt| names(worker, prompt)).cloned();
                for turn in std::sync::Arc::make_mut(&mut coordinator.turns) {
                    for call in &mut turn.tool_calls {
                        let launches = call.name == "Agent"
                            && call.input.get("prompt").and_then(|p| p.as_str())
                                == target.as_deref();
                        if launches {
                            call.input["name"] = json!(MALICIOUS_NAME);
                            call.input["isolation"] = json!("worktree");
                        }
                    }
                }
                book.record(
                    index,
                    fault,
                    format!("{worker} is launched as {MALICIOUS_NAME:?}"),
                );
            }
            _ => {}
        }
    }
    (coordinator, workers.into_values().collect())
}

/// Spawn description → worker prompt, from the harness's launches and every Agent
/// call in the scripts.
pub fn description_prompts(scenario: &Scenario) -> BTreeMap<String, String> {
    let launches = scenario
        .launches
        .iter()
        .map(|launch| (launch.description.clone(), launch.prompt.clone()));
    std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .flat_map(|script| script.turns.iter())
        .flat_map(|turn| &turn.tool_calls)
        .filter(|call| call.name == "Agent")
        .filter_map(|call| {
            let description = call.input.get("description")?.as_str()?;
            let prompt = call.input.get("prompt")?.as_str()?;
            Some((description.to_owned(), prompt.to_owned()))
        })
        .chain(launches)
        .collect()
}
