//! `count` on workers and tool calls, `repeat` on turns: what they expand to, how
//! little memory the expansion takes, and the mistakes the loader refuses.

use std::path::Path;
use std::sync::Arc;

use coord_sim::check::check_all;
use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{LoadedScenario, ScenarioError};

/// A coordinator that launches `agents` numbered workers of `turns` turns each.
fn whale(agents: u32, turns: u32, worker_extra: &str) -> String {
    format!(
        r#"
name = "whale"
profile = "hardened"
[settings]
turns_max = {turns_max}
[coordinator]
prompt = "Audit every shard."
[[coordinator.turns]]
tool_calls = [{{ name = "Agent", count = {agents}, input = {{ description = "shard-{{n}}", prompt = "Audit shard {{n}}." }} }}]
[[coordinator.turns]]
text = "All shards audited."
when = {{ kind = "notifications_at_least", count = {agents} }}
[[workers]]
prompt = "Audit shard {{n}}."
count = {agents}
{worker_extra}
[[workers.turns]]
tool_calls = [{{ name = "Read", input = {{ file_path = "/work/README.md" }} }}]
repeat = {repeats}
[[workers.turns]]
text = "Shard audited."
"#,
        turns_max = turns + 10,
        repeats = turns - 1,
    )
}

fn parse(text: &str) -> LoadedScenario {
    LoadedScenario::parse(Path::new("whale.toml"), text).unwrap()
}

fn error_of(text: &str) -> String {
    match LoadedScenario::parse(Path::new("whale.toml"), text) {
        Err(error @ ScenarioError::Invalid { .. }) => error.to_string(),
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

#[test]
fn a_counted_worker_is_that_many_numbered_workers_sharing_one_copy_of_their_turns() {
    let loaded = parse(&whale(3, 4, ""));
    let scenario = &loaded.scenario;
    let prompts: Vec<&str> = scenario.workers.iter().map(|w| w.prompt.as_str()).collect();
    assert_eq!(
        prompts,
        ["Audit shard 1.", "Audit shard 2.", "Audit shard 3."]
    );
    assert!(scenario.workers.iter().all(|w| w.count.is_none()));
    assert!(Arc::ptr_eq(
        &scenario.workers[0].turns,
        &scenario.workers[2].turns
    ));
    // The repeated turn is played 3 times, then the final one.
    assert_eq!(scenario.workers[0].turns.len(), 4);
    assert!(scenario.workers[0].turns.iter().all(|t| t.repeat.is_none()));
    let launches: Vec<&str> = scenario.coordinator.turns[0]
        .tool_calls
        .iter()
        .map(|call| call.input["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(launches, prompts);
    assert_eq!(
        scenario.coordinator.turns[0].tool_calls[1].input["description"],
        "shard-2"
    );
}

#[test]
fn turns_that_name_the_workers_number_are_copied_per_worker() {
    let text =
        whale(2, 2, "").replace("text = \"Shard audited.\"", "text = \"Shard {n} audited.\"");
    let loaded = parse(&text);
    let workers = &loaded.scenario.workers;
    assert!(!Arc::ptr_eq(&workers[0].turns, &workers[1].turns));
    assert_eq!(
        workers[1].turns[1].text.as_deref(),
        Some("Shard 2 audited.")
    );
}

#[test]
fn a_counted_scenario_runs_every_worker_to_its_end() {
    // Goal: the expansion is an ordinary scenario to the runtime and the checkers:
    // every worker's script is played (not-vacuous), one notification each.
    let loaded = parse(&whale(20, 30, ""));
    let run = run_seed(&loaded, 0, &RunOptions::default()).unwrap();
    assert!(
        check_all(&run.trace).is_empty(),
        "{:?}",
        check_all(&run.trace)
    );
    let played = run
        .trace
        .iter()
        .filter(|entry| entry.actor.starts_with("Audit shard "))
        .filter(|entry| entry.event_json().contains("\"model_called\""))
        .count();
    assert_eq!(played, 20 * 30);
}

#[test]
fn a_counted_worker_without_a_number_in_its_prompt_is_refused_at_the_count() {
    let text = whale(3, 2, "").replace(
        "prompt = \"Audit shard {n}.\"\ncount",
        "prompt = \"Audit.\"\ncount",
    );
    let error = error_of(&text);
    assert!(error.contains("put `{n}` in the prompt"), "{error}");
    let line = text
        .lines()
        .position(|l| l.starts_with("count = 3"))
        .unwrap()
        + 1;
    assert!(error.contains(&format!("whale.toml:{line}:")), "{error}");
}

#[test]
fn counts_and_repeats_out_of_range_are_refused() {
    let error = error_of(&whale(10_001, 2, ""));
    assert!(
        error.contains("`count` = 10001 is out of range: expected 1 to 10000"),
        "{error}"
    );
    let error = error_of(&whale(2, 2, "").replace("repeat = 1", "repeat = 0"));
    assert!(error.contains("`repeat` = 0 is out of range"), "{error}");
    let error = error_of(&whale(2, 2, "").replace(
        "[[coordinator.turns]]\ntool_calls",
        "count = 2\n[[coordinator.turns]]\ntool_calls",
    ));
    assert!(error.contains("the coordinator is one agent"), "{error}");
}

#[test]
fn scripts_that_would_expand_past_the_turn_limit_are_refused_before_expanding() {
    // Numbered turns are copied per worker: 10,000 workers × 1,000 turns would be
    // ten million turns in memory. Refused at once, not after allocating them.
    let text = whale(10_000, 1_000, "")
        .replace("text = \"Shard audited.\"", "text = \"Shard {n} audited.\"");
    let started = std::time::Instant::now();
    let error = error_of(&text);
    assert!(
        error.contains("the scripts expand to 10000002 turns"),
        "{error}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Shared turns are kept once: the same size without `{n}` in the turns loads.
    let loaded = parse(&whale(10_000, 1_000, ""));
    assert_eq!(loaded.scenario.workers.len(), 10_000);
}
