//! `coordsim import claude-code` on the real fixture sessions and on odd inputs.
//!
//! The expected counts were taken from the recordings independently of the
//! importer: distinct `(message.id, requestId)` pairs of assistant lines are the
//! turns, distinct `tool_use` ids the tool calls, per file (for `subagent.jsonl`
//! the subagent has no file, and its counts are those its `agent_progress` lines
//! carry, which its tool result's `totalToolUseCount` of 9 confirms).

use std::path::{Path, PathBuf};
use std::process::Command;

use coord_sim::cache::BytesPerToken;
use coord_sim::import::{
    import_claude_code, import_claude_code_to, ImportError, Imported, MEASURED_TOKENS_MIN,
    SEND_DELAY_MS_MAX,
};
use coord_sim::model::RecordedPrompt;
use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{LoadedScenario, TtlSetting};
use proptest::prelude::*;

use crate::repo_root;

fn spotter(name: &str) -> PathBuf {
    repo_root().join("fixtures/claude-code/spotter").join(name)
}

/// Imports `name`, loads the written scenario back, runs seed 0, and asserts the
/// run found no failure.
fn import_and_run(name: &str) -> Imported {
    let imported = import_claude_code(&spotter(name)).unwrap();
    let loaded = LoadedScenario::parse(Path::new(name), &imported.toml).unwrap();
    assert_eq!(loaded.scenario, imported.scenario);
    assert!(
        loaded.scenario.swarm.kinds.is_empty(),
        "a replay draws no faults"
    );
    let run = run_seed(&loaded, 0, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{name}: {:?}", run.failures);
    imported
}

/// `(name, source, turns, tool calls)` of each agent.
fn agents(imported: &Imported) -> Vec<(String, &'static str, usize, usize)> {
    imported
        .summary
        .agents
        .iter()
        .map(|a| (a.name.clone(), a.source, a.turns, a.tool_calls))
        .collect()
}

fn row(
    name: &str,
    source: &'static str,
    turns: usize,
    calls: usize,
) -> (String, &'static str, usize, usize) {
    (name.to_owned(), source, turns, calls)
}

#[test]
fn short_session_imports_and_replays_clean() {
    // Goal: one response split over four lines is one turn with both tool calls,
    // each with its recorded result, and its recorded path moved into the workspace.
    let imported = import_and_run("short.jsonl");
    assert_eq!(agents(&imported), [row("main", "main", 1, 2)]);
    let turn = &imported.scenario.coordinator.turns[0];
    let names: Vec<&str> = turn.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Bash", "Glob"]);
    assert_eq!(turn.tool_calls[1].input["path"], "/work");
    assert!(turn.tool_calls[0]
        .result
        .as_deref()
        .is_some_and(|r| r.starts_with("The user doesn't want to proceed")));
    assert_eq!(
        imported.scenario.coordinator.prompt,
        "mix phx.server doesnt seem to start"
    );
    let usage = turn.usage.expect("the recorded usage is kept");
    assert_eq!(
        (
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens
        ),
        (13_835, 11_515)
    );
    assert!(imported.summary.skipped_by_type.is_empty());
    // The first request's recorded size (3 + 13,835 + 11,515), the part it read,
    // the recorded 1-hour TTL, and the main thread outside coordinator mode.
    assert_eq!(
        imported.scenario.coordinator.recorded_prompt,
        Some(RecordedPrompt {
            first_request_tokens: 25_353,
            cached_before_tokens: 11_515,
            head_tokens: None,
            bytes_per_token: None,
        })
    );
    assert_eq!(imported.scenario.economics.ttl, TtlSetting::OneHour);
    assert!(!imported.scenario.settings.coordinator_mode);
    let recording = imported.scenario.recording.as_ref().unwrap();
    assert_eq!(recording.source, spotter("short.jsonl"));
}

#[test]
fn tool_heavy_session_imports_and_replays_clean() {
    // Goal: a session with several user prompts keeps every response.
    let imported = import_and_run("tool_heavy.jsonl");
    assert_eq!(agents(&imported), [row("main", "main", 4, 6)]);
    assert_eq!(imported.summary.later_user_prompts, 3);
    // One pair of its three is measurable (the others follow a user prompt or a
    // thinking block), and it grew by a few hundred tokens: too little to
    // calibrate on, so the default stays and the header says why.
    let calibration = imported.summary.calibration;
    assert_eq!((calibration.pairs, calibration.pairs_measured), (3, 1));
    assert!(calibration.tokens_measured < MEASURED_TOKENS_MIN);
    assert!(!calibration.calibrated);
    assert_eq!(
        imported.scenario.economics.bytes_per_token,
        BytesPerToken::FOUR
    );
    assert!(imported
        .toml
        .contains("# Tokens counted at the default 4.0 bytes a token: the 1 of 3 request pairs"));
}

#[test]
fn subagent_session_rebuilds_the_subagent_from_progress_lines() {
    // Goal: without a subagents/ directory the Task's subagent comes from its
    // agent_progress lines, becomes a worker under the Task's prompt, and the Task
    // becomes an Agent call the runtime accepts.
    let imported = import_and_run("subagent.jsonl");
    assert_eq!(
        agents(&imported),
        [
            row("main", "main", 12, 16),
            row("afb92ff", "progress", 5, 9)
        ]
    );
    let spawn = imported
        .scenario
        .coordinator
        .turns
        .iter()
        .flat_map(|t| &t.tool_calls)
        .find(|c| c.name == "Agent")
        .expect("the Task call is an Agent call");
    assert_eq!(spawn.input["subagent_type"], "Plan");
    assert_eq!(spawn.input["model"], "haiku");
    assert_eq!(imported.scenario.workers.len(), 1);
    assert_eq!(imported.scenario.workers[0].prompt, spawn.input["prompt"]);
    // Code, JSON and file listings: near three bytes a token, measured on 10 of the
    // 15 request pairs (thinking, user prompts and the compaction-free rest).
    let calibration = imported.summary.calibration;
    assert!(calibration.calibrated);
    assert_eq!((calibration.pairs, calibration.pairs_measured), (15, 10));
    let milli = imported
        .scenario
        .economics
        .bytes_per_token
        .milli_bytes_per_token();
    assert!((2_900..=3_100).contains(&milli), "{milli}");
}

#[test]
fn session_4d5611e5_imports_with_its_subagent_file_and_replays_clean() {
    // Goal: the Explore subagent is read from subagents/, the compaction agent is
    // paired with the compaction (`import_recorded`), not taken for a subagent, and
    // the compaction boundary does not cut the main thread short.
    let imported = import_and_run("4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    assert_eq!(
        agents(&imported),
        [
            row("main", "main", 139, 150),
            row("a2898e3", "file", 12, 33)
        ]
    );
    assert!(imported.summary.unpaired_subagents.is_empty());
    assert_eq!(imported.summary.compactions.len(), 1);
    assert_eq!(imported.summary.agents[0].abandoned_responses, 0);
    assert_eq!(imported.summary.agents[0].notifications, 1);
    // The session writes with the 5-minute TTL. Its user paused 19 minutes before
    // the 114th request (1,150 s between the two requests; the replay's latency of
    // the 113th response already covers its first 2 s), and 4.2 hours before the
    // 19th, which is held for 61 minutes: past every TTL the cache has forgotten
    // everything either way.
    assert_eq!(imported.scenario.economics.ttl, TtlSetting::FiveMinutes);
    let turns = &imported.scenario.coordinator.turns;
    let held_s = turns[113].send_delay_ms / 1000;
    assert!((1_140..=1_150).contains(&held_s), "{held_s}");
    assert_eq!(turns[18].send_delay_ms, SEND_DELAY_MS_MAX);
    assert_eq!(imported.summary.adaptations.holds_capped, 1);
}

#[test]
fn session_258c7280_imports_its_foreground_task_and_waits_for_nothing() {
    // Goal: outside coordinator mode the foreground Task returns its worker's
    // answer as its result, so no turn waits; background-shell envelopes, which the
    // replay cannot produce, are never waited for; and the plugin's agent type,
    // which the runtime lacks, runs as its default agent instead of refusing the
    // spawn.
    let imported = import_and_run("258c7280-ae70-4798-800f-63464d01a85d.jsonl");
    assert_eq!(
        agents(&imported),
        [row("main", "main", 152, 186), row("a881341", "file", 3, 2)]
    );
    assert_eq!(imported.summary.agents[0].notifications, 2);
    let waits = imported
        .scenario
        .coordinator
        .turns
        .iter()
        .filter(|t| t.when.is_some())
        .count();
    assert_eq!(waits, 0);
    assert_eq!(imported.summary.adaptations.agent_types_unknown, 1);
    let loaded = LoadedScenario::parse(Path::new("s.toml"), &imported.toml).unwrap();
    let run = run_seed(&loaded, 0, &RunOptions::default()).unwrap();
    let worker = &imported.scenario.workers[0].prompt;
    assert!(run
        .trace
        .iter()
        .any(|e| &e.actor == worker && e.event_json().contains("\"model_called\"")));
    assert!(imported
        .toml
        .contains("from 258c7280-ae70-4798-800f-63464d01a85d.jsonl"));
}

#[test]
fn a_scenario_written_elsewhere_names_its_session_relative_to_itself() {
    // Goal: `-o` writes a `[recording] source` that resolves from the scenario's
    // folder, so the two can move together.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested").join("short.toml");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let imported = import_claude_code_to(&spotter("short.jsonl"), &out).unwrap();
    let recording = imported.scenario.recording.unwrap();
    assert!(recording.source.is_relative(), "{:?}", recording.source);
    assert_eq!(
        recording.source_from(&out).canonicalize().unwrap(),
        spotter("short.jsonl").canonicalize().unwrap()
    );
}

#[test]
fn the_cli_writes_a_loadable_scenario() {
    // Goal: `coordsim import claude-code S -o F` writes F, which `coordsim run` passes.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("short.toml");
    let status = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["import", "claude-code"])
        .arg(spotter("short.jsonl"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let run = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["run", "--seeds", "0..2"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const PROMPT: &str =
    r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hello"}}"#;

#[test]
fn a_malformed_line_is_an_error_naming_its_line() {
    // Goal: broken JSON and a line without a `type` both name file and line.
    let dir = tempfile::tempdir().unwrap();
    let broken = write(
        dir.path(),
        "broken.jsonl",
        &format!("{PROMPT}\n\n{{\"type\":"),
    );
    match import_claude_code(&broken).unwrap_err() {
        ImportError::Malformed { line, path, .. } => {
            assert_eq!((line, path), (3, broken.clone()));
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    let untyped = write(dir.path(), "untyped.jsonl", &format!("{PROMPT}\n[1,2]"));
    let error = import_claude_code(&untyped).unwrap_err();
    assert!(
        matches!(error, ImportError::Malformed { line: 2, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("untyped.jsonl:2:"), "{error}");
}

#[test]
fn a_session_without_a_prompt_is_a_clear_error() {
    // Goal: a transcript with no user text on its main thread cannot start a
    // coordinator, and says so.
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "empty.jsonl",
        r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#,
    );
    let error = import_claude_code(&path).unwrap_err();
    assert!(matches!(error, ImportError::NoPrompt { .. }), "{error:?}");
    assert!(error.to_string().contains("no user prompt"));
}

#[test]
fn unknown_line_types_are_skipped_and_counted() {
    // Goal: types the importer does not know are counted by type, not errors.
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{PROMPT}\n{{\"type\":\"custom-title\",\"title\":\"x\"}}\n{{\"type\":\"custom-title\"}}\n{{\"type\":\"future-thing\"}}"
    );
    let path = write(dir.path(), "s.jsonl", &text);
    let imported = import_claude_code(&path).unwrap();
    let skipped: Vec<(&str, usize)> = imported
        .summary
        .skipped_by_type
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(skipped, [("custom-title", 2), ("future-thing", 1)]);
    assert_eq!(imported.summary.lines_read, 4);
    assert!(imported.toml.contains("custom-title 2, future-thing 1"));
}

/// An assistant line of the hand-made session below: one response with `content`
/// and a recorded prompt of `prompt_tokens` (all read from the cache).
fn assistant(uuid: &str, parent: &str, content: &str, prompt_tokens: u64) -> String {
    format!(
        r#"{{"type":"assistant","uuid":"{uuid}","parentUuid":"{parent}","requestId":"req_{uuid}","message":{{"id":"msg_{uuid}","role":"assistant","model":"claude-sonnet-4-5","content":[{content}],"stop_reason":"tool_use","usage":{{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":{prompt_tokens},"output_tokens":1}}}}}}"#
    )
}

/// A user line of the hand-made session: the result `text` of call `id`.
fn result(uuid: &str, parent: &str, id: &str, text: &str) -> String {
    format!(
        r#"{{"type":"user","uuid":"{uuid}","parentUuid":"{parent}","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":"{text}"}}]}}}}"#
    )
}

#[test]
fn the_import_calibrates_bytes_per_token_on_how_the_recorded_prompts_grew() {
    // Goal: each pair of requests that grew by a known appended content measures
    // bytes per token, in the bytes the meter will bill (the replay's blocks as
    // JSON, with its own tool-use ids), and a pair after a thinking block is left
    // out. Method: a session whose two measurable pairs each append exactly 2.5
    // bytes per recorded token, and whose third pair (after thinking) grows by far
    // more tokens than its bytes.
    let read = |id: &str, path: &str| {
        format!(
            r#"{{"type":"tool_use","id":"{id}","name":"Read","input":{{"file_path":"{path}"}}}}"#
        )
    };
    // What the replay bills after step `step`: its call and the call's result.
    let billed = |step: usize, path: &str, text: &str| -> u64 {
        let id = format!("toolu_s{step}_0");
        let call = format!(
            r#"{{"type":"tool_use","id":"{id}","name":"Read","input":{{"file_path":"{path}"}}}}"#
        );
        let answer = format!(r#"{{"type":"tool_result","tool_use_id":"{id}","content":"{text}"}}"#);
        (call.len() + answer.len()) as u64
    };
    // Results sized so that each pair appends a round number of bytes.
    let first_text = "a".repeat(2_500 - billed(0, "/a", "") as usize);
    let second_text = "b".repeat(5_000 - billed(1, "/b", "") as usize);
    assert_eq!(billed(0, "/a", &first_text), 2_500);
    assert_eq!(billed(1, "/b", &second_text), 5_000);
    let thinking = r#"{"type":"thinking","thinking":"let me see","signature":"sig"},"#;
    let lines = [
        PROMPT.to_owned(),
        assistant("a1", "u1", &read("toolu_01A", "/a"), 10_000),
        result("t1", "a1", "toolu_01A", &first_text),
        // 2,500 bytes over 1,000 tokens.
        assistant("a2", "t1", &read("toolu_01B", "/b"), 11_000),
        result("t2", "a2", "toolu_01B", &second_text),
        // 5,000 bytes over 2,000 tokens.
        assistant(
            "a3",
            "t2",
            &format!("{thinking}{}", read("toolu_01C", "/c")),
            13_000,
        ),
        result("t3", "a3", "toolu_01C", "c"),
        // A few hundred bytes over 5,000 tokens, most of them the thinking's.
        assistant("a4", "t3", r#"{"type":"text","text":"done"}"#, 18_000),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "calibrated.jsonl", &lines.join("\n"));
    let imported = import_claude_code(&path).unwrap();
    let calibration = imported.summary.calibration;
    assert_eq!(
        (
            calibration.pairs,
            calibration.pairs_measured,
            calibration.tokens_measured
        ),
        (3, 2, 3_000)
    );
    assert!(calibration.calibrated && !calibration.clamped);
    let expected = BytesPerToken::from_bytes_per_token(2.5).unwrap();
    assert_eq!(imported.scenario.economics.bytes_per_token, expected);
    assert!(
        imported.toml.contains("\nbytes_per_token = 2.5\n"),
        "{}",
        imported.toml
    );
    assert!(imported.toml.contains(
        "# Tokens counted at 2.5 bytes a token, calibrated on the growth of 2 of 3 request \
         pairs (3000 tokens)."
    ));
    // The written scenario loads back with the ratio, which its run bills with.
    let loaded = LoadedScenario::parse(Path::new("calibrated.toml"), &imported.toml).unwrap();
    assert_eq!(loaded.scenario.economics.bytes_per_token, expected);
    let run = run_seed(&loaded, 0, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
}

/// A line of a well-formed but unusual transcript: optional fields left out,
/// content empty, odd block types, numbers where text usually is.
fn unusual_line() -> impl Strategy<Value = String> {
    let content = prop_oneof![
        Just("[]".to_owned()),
        Just(r#""typed text""#.to_owned()),
        Just(r#"[{"type":"text"}]"#.to_owned()),
        Just(r#"[{"type":"tool_use","id":"t1","name":"Task","input":{"prompt":"sub"}}]"#.to_owned()),
        Just(r#"[{"type":"tool_use","name":"Bash","input":{"command":null,"n":18446744073709551615}}]"#.to_owned()),
        Just(r#"[{"type":"tool_result","tool_use_id":"t1"}]"#.to_owned()),
        Just(r#"[{"type":"image","source":{}}]"#.to_owned()),
        Just(r#"[{"type":"text","text":"<task-notification><task-id>a1</task-id><status>completed</status></task-notification>"}]"#.to_owned()),
    ];
    let kind = prop_oneof![
        Just("user"),
        Just("assistant"),
        Just("system"),
        Just("progress"),
        Just("summary"),
        Just("queue-operation"),
    ];
    let uuid = prop::option::of(0u8..6);
    let parent = prop::option::of(0u8..6);
    let id = prop::option::of(0u8..3);
    (kind, content, uuid, parent, id).prop_map(|(kind, content, uuid, parent, id)| {
        let mut line = format!(r#"{{"type":"{kind}""#);
        if let Some(uuid) = uuid {
            line.push_str(&format!(r#","uuid":"u{uuid}""#));
        }
        if let Some(parent) = parent {
            line.push_str(&format!(r#","parentUuid":"u{parent}""#));
        }
        let message_id = id.map(|id| format!(r#""id":"m{id}","#)).unwrap_or_default();
        line.push_str(&format!(
            r#","message":{{{message_id}"role":"x","content":{content},"usage":{{"output_tokens":1}}}}}}"#
        ));
        line
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn unusual_well_formed_transcripts_never_panic(lines in prop::collection::vec(unusual_line(), 0..12)) {
        // Goal: any mix of well-formed lines imports or fails with a typed error,
        // and whatever imports loads back as a scenario. Method: random lines of
        // known types with optional fields and content varied.
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "s.jsonl", &lines.join("\n"));
        match import_claude_code(&path) {
            Ok(imported) => {
                let loaded = LoadedScenario::parse(&path, &imported.toml);
                prop_assert!(loaded.is_ok(), "{:?}\n{}", loaded.err(), imported.toml);
            }
            Err(ImportError::NoPrompt { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other:?} for {lines:?}"),
        }
    }
}
