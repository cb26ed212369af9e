//! Cassettes: recording a run's model exchanges, replaying them in order or by
//! request hash, misses with diffs, secrets, the file format and `coordsim record`.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::{Command, Output};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use coord_runtime::world::{
    BoxFuture, CacheControl, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse,
    Role, StopReason, SystemBlock, ToolDefinition, Usage,
};
use coord_sim::cassette::{
    canonical::request_hash, miss::MissReason, record_seed, AgentLabels, Cassette, CassetteError,
    Exchange, MatchMode, Outcome, RecordedError, Recording, RecordingModel, ReplayModel, Replayed,
    Secrets, REPLAY_MISS, REPLAY_UNUSED,
};
use coord_sim::run::{run_seed, RunError, RunOptions, SeedRun};
use coord_sim::scenario::LoadedScenario;
use coord_sim::trace::{SimEvent, TraceEntry, TraceEvent};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::repo_root;

const NOTIFY_ONCE: &str = "scenarios/core/notify-once.toml";
const NOTIFY_ONCE_REPLAY: &str = "scenarios/replay/notify-once-cassette.toml";
const NOTIFY_ONCE_CASSETTE: &str = "fixtures/cassettes/notify-once-seed-0.json";
const FOUR_PHASE: &str = "scenarios/reference/four-phase.toml";
const FOUR_PHASE_CASSETTE: &str = "fixtures/cassettes/four-phase-seed-0.json";

fn load(relative: &str) -> LoadedScenario {
    LoadedScenario::load(&repo_root().join(relative)).unwrap()
}

/// Seed `seed` of `scenario`, recorded in memory.
fn record(scenario: &LoadedScenario, seed: u64) -> (SeedRun, Cassette) {
    let recording = Recording::in_memory();
    let run = record_seed(scenario, seed, &RunOptions::default(), &recording).unwrap();
    (run, recording.cassette())
}

/// The committed notify-once replay scenario, made to replay `cassette` (a path
/// the scenario file names, relative to `dir`) by `matching`, written into `dir`.
fn notify_once_replay(dir: &Path, cassette: &str, matching: &str) -> LoadedScenario {
    let text = std::fs::read_to_string(repo_root().join(NOTIFY_ONCE_REPLAY)).unwrap();
    let text = text
        .replace(
            "cassette = \"../../fixtures/cassettes/notify-once-seed-0.json\"",
            &format!("cassette = {}", toml_string(cassette)),
        )
        .replace(
            "match = \"in-order-per-agent\"",
            &format!("match = \"{matching}\""),
        );
    let path = dir.join("replay.toml");
    std::fs::write(&path, text).unwrap();
    LoadedScenario::load(&path).unwrap()
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// What the runtime reported, with when: the behaviour a replay must reproduce.
fn runtime_events(trace: &[TraceEntry]) -> Vec<(u64, String)> {
    trace
        .iter()
        .filter(|entry| matches!(entry.typed, TraceEvent::Runtime(_)))
        .map(|entry| (entry.time_ms, entry.event_json()))
        .collect()
}

/// Every model call the tap saw, with when.
fn model_calls(trace: &[TraceEntry]) -> Vec<(u64, String)> {
    trace
        .iter()
        .filter(|entry| matches!(entry.typed, TraceEvent::Sim(SimEvent::ModelCalled { .. })))
        .map(|entry| (entry.time_ms, entry.event_json()))
        .collect()
}

fn failure_text(run: &SeedRun) -> String {
    run.failures
        .iter()
        .map(|f| format!("{}: {}", f.invariant, f.detail))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn recording_a_run_changes_nothing_in_it() {
    // Goal: the recorder is invisible to the run, and keeps every kind of outcome.
    // Method: record notify-once seed 0 and compare with a plain run; its faults
    // give one truncated response and one call that never answers.
    let scenario = load(NOTIFY_ONCE);
    let (recorded, cassette) = record(&scenario, 0);
    let plain = run_seed(&scenario, 0, &RunOptions::default()).unwrap();
    assert_eq!(recorded.trace_hash(), plain.trace_hash());
    let count = |wanted: fn(&Outcome) -> bool| {
        cassette
            .exchanges
            .iter()
            .filter(|e| wanted(&e.outcome))
            .count()
    };
    assert_eq!(count(|o| matches!(o, Outcome::Response(_))), 7);
    assert_eq!(
        count(|o| matches!(o, Outcome::Error(RecordedError::Malformed { .. }))),
        1
    );
    assert_eq!(count(|o| matches!(o, Outcome::NoResponse)), 1);
    let mut calls: Vec<u64> = cassette.exchanges.iter().map(|e| e.call).collect();
    calls.sort_unstable();
    assert_eq!(
        calls,
        (1..=9).collect::<Vec<_>>(),
        "every call numbered once"
    );
    assert!(cassette
        .exchanges
        .iter()
        .all(|e| e.agent.is_some() && e.latency_ms.is_some()));
}

#[test]
fn a_recorded_run_replays_by_request_hash_with_the_same_runtime_behaviour() {
    // Goal: replaying a recording by hash drives the runtime exactly as the scripts
    // did: the same runtime events at the same times, the same model calls, the same
    // cost, and no miss or unused exchange.
    let scenario = load(NOTIFY_ONCE);
    let (recorded, cassette) = record(&scenario, 0);
    let dir = tempfile::tempdir().unwrap();
    cassette
        .write(&dir.path().join("notify-once.json"))
        .unwrap();
    let replay = notify_once_replay(dir.path(), "notify-once.json", "request-hash");
    let replayed = run_seed(&replay, 0, &RunOptions::default()).unwrap();
    assert!(replayed.failures.is_empty(), "{}", failure_text(&replayed));
    assert_eq!(
        runtime_events(&replayed.trace),
        runtime_events(&recorded.trace)
    );
    assert_eq!(model_calls(&replayed.trace), model_calls(&recorded.trace));
    assert_eq!(replayed.cost.to_text(), recorded.cost.to_text());
}

#[test]
fn the_committed_cassettes_replay_by_request_hash() {
    // Goal: the committed recordings are what today's runtime sends. If this fails
    // after a deliberate change to the runtime's requests, re-record with
    //   cargo run -p coord-sim -- record scenarios/core/notify-once.toml --seed 0 -o fixtures/cassettes/notify-once-seed-0.json
    //   cargo run -p coord-sim -- record scenarios/reference/four-phase.toml --seed 0 -o fixtures/cassettes/four-phase-seed-0.json
    let dir = tempfile::tempdir().unwrap();
    let absolute = repo_root().join(NOTIFY_ONCE_CASSETTE);
    let replay = notify_once_replay(dir.path(), absolute.to_str().unwrap(), "request-hash");
    let run = run_seed(&replay, 0, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{}", failure_text(&run));

    // The reference workflow: four phases, a remote worker, 92 outside producers.
    let text = std::fs::read_to_string(repo_root().join(FOUR_PHASE)).unwrap();
    let absolute = repo_root().join(FOUR_PHASE_CASSETTE);
    let text = text.replacen(
        "[settings]",
        &format!(
            "[model]\ncassette = {}\n\n[settings]",
            toml_string(absolute.to_str().unwrap())
        ),
        1,
    );
    let path = dir.path().join("four-phase.toml");
    std::fs::write(&path, text).unwrap();
    let replay = LoadedScenario::load(&path).unwrap();
    let replayed = run_seed(&replay, 0, &RunOptions::default()).unwrap();
    assert!(replayed.failures.is_empty(), "{}", failure_text(&replayed));
    let scripted = run_seed(&load(FOUR_PHASE), 0, &RunOptions::default()).unwrap();
    assert_eq!(
        runtime_events(&replayed.trace),
        runtime_events(&scripted.trace)
    );
    assert!(
        std::fs::metadata(&absolute).unwrap().len() < 1_000_000,
        "the cassette stays small enough to review"
    );
}

#[test]
fn by_request_hash_replays_only_the_recorded_seed_while_in_order_replays_any() {
    // Goal: task ids come from the seed and reach the requests, so another seed
    // misses by hash (with a diff naming an id), while the committed in-order
    // scenario replays every seed.
    let dir = tempfile::tempdir().unwrap();
    let absolute = repo_root().join(NOTIFY_ONCE_CASSETTE);
    let by_hash = notify_once_replay(dir.path(), absolute.to_str().unwrap(), "request-hash");
    let run = run_seed(&by_hash, 1, &RunOptions::default()).unwrap();
    let miss = run
        .failures
        .iter()
        .find(|f| f.invariant == REPLAY_MISS)
        .expect("seed 1 misses by hash");
    assert!(miss.detail.contains("async_launched"), "{}", miss.detail);

    let in_order = load(NOTIFY_ONCE_REPLAY);
    for seed in 0..4 {
        let run = run_seed(&in_order, seed, &RunOptions::default()).unwrap();
        assert!(
            run.failures.is_empty(),
            "seed {seed}: {}",
            failure_text(&run)
        );
    }
}

#[test]
fn a_tampered_cassette_fails_the_run_with_a_miss_whose_diff_names_the_changed_line() {
    // Goal: a request the cassette does not hold fails the run, and the failure
    // shows where the recorded request and the actual one differ. Method: edit the
    // prompt in the coordinator's second recorded request by hand (leaving its
    // stale request_hash), replay by hash, and pin the miss report.
    let scenario = load(NOTIFY_ONCE);
    let (_, cassette) = record(&scenario, 0);
    let mut file: Value = serde_json::from_str(&cassette.to_json()).unwrap();
    let second_coordinator_call = file["exchanges"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter(|e| e["agent"] == "coordinator")
        .min_by_key(|e| {
            let call = e["call"].as_u64().unwrap();
            // The first coordinator call is call 1; skip it.
            if call == 1 {
                u64::MAX
            } else {
                call
            }
        })
        .unwrap();
    let text = &mut second_coordinator_call["request"]["messages"][0]["content"][0]["text"];
    assert_eq!(text, "Investigate the login failures.");
    *text = json!("Investigate the logout failures.");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tampered.json"),
        serde_json::to_string_pretty(&file).unwrap(),
    )
    .unwrap();
    let replay = notify_once_replay(dir.path(), "tampered.json", "request-hash");
    let run = run_seed(&replay, 0, &RunOptions::default()).unwrap();

    let miss = &run.failures[0];
    assert_eq!(miss.invariant, REPLAY_MISS, "{}", failure_text(&run));
    assert!(miss
        .detail
        .contains("-          \"text\": \"Investigate the logout failures.\""));
    assert!(miss
        .detail
        .contains("+          \"text\": \"Investigate the login failures.\""));
    let report = miss
        .detail
        .replace(&dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(report);
    // The coordinator's later calls never came: the run says so too.
    let unused = run
        .failures
        .iter()
        .find(|f| f.invariant == REPLAY_UNUSED)
        .expect("unused exchanges are reported");
    assert!(unused.detail.contains("(coordinator)"), "{}", unused.detail);
}

fn request(texts: &[&str]) -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".to_owned(),
        max_tokens: 1024,
        tools: Default::default(),
        system: vec![SystemBlock::text("You are terse.")].into(),
        messages: texts
            .iter()
            .enumerate()
            .map(|(index, text)| Message {
                role: if index % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content: vec![ContentBlock::text(*text)],
            })
            .collect(),
        thinking: None,
    }
}

fn response(text: &str) -> ModelResponse {
    ModelResponse {
        id: format!("msg_{}", text.len()),
        model: "claude-sonnet-4-5".to_owned(),
        role: Role::Assistant,
        content: vec![ContentBlock::text(text)],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 12,
            output_tokens: 3,
            ..Usage::default()
        },
    }
}

fn exchange(call: u64, agent: Option<&str>, request: ModelRequest, outcome: Outcome) -> Exchange {
    Exchange {
        call,
        agent: agent.map(str::to_owned),
        request,
        latency_ms: Some(100 * call),
        outcome,
    }
}

/// The answer of a future that must be ready at once.
fn now<T>(future: BoxFuture<'static, T>) -> T {
    let mut future = future;
    match Pin::new(&mut future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("the future was not ready"),
    }
}

/// What `model` answers, at once, to a request whose user turns are `texts`.
fn ask(model: &dyn Model, texts: &[&str]) -> Result<ModelResponse, ModelError> {
    now(model.send(Arc::new(request(texts))))
}

fn replied_text(answer: Result<ModelResponse, ModelError>) -> String {
    match answer.unwrap().content.as_slice() {
        [ContentBlock::Text { text, .. }] => text.clone(),
        other => panic!("unexpected content {other:?}"),
    }
}

#[test]
fn in_order_replay_gives_the_nth_call_the_nth_exchange_whatever_it_asks() {
    // Goal: in-order mode ignores what is asked, follows call order (not file
    // order), and misses once the cassette runs out.
    let cassette = Cassette {
        exchanges: vec![
            exchange(
                2,
                None,
                request(&["b"]),
                Outcome::Response(response("second")),
            ),
            exchange(
                1,
                None,
                request(&["a"]),
                Outcome::Response(response("first")),
            ),
        ],
    };
    let replay = ReplayModel::new(cassette, MatchMode::InOrder { per_agent: false });
    assert_eq!(replied_text(ask(&replay, &["x"])), "first");
    assert_eq!(replied_text(ask(&replay, &["y"])), "second");
    assert!(matches!(
        ask(&replay, &["z"]),
        Err(ModelError::Api { status: 400, .. })
    ));
    let report = replay.report();
    assert_eq!(report.misses.len(), 1);
    assert_eq!(report.misses[0].reason, MissReason::NoneLeft);
    assert!(report.unused.is_empty());
}

#[test]
fn per_agent_in_order_replay_keeps_each_agents_own_order() {
    // Goal: agents interleaving differently from the recording still get their own
    // answers. Method: recorded a, b, a; replayed b, a, a.
    let cassette = Cassette {
        exchanges: vec![
            exchange(
                1,
                Some("coordinator"),
                request(&["lead"]),
                Outcome::Response(response("lead 1")),
            ),
            exchange(
                2,
                Some("Worker."),
                request(&["Worker."]),
                Outcome::Response(response("worker 1")),
            ),
            exchange(
                3,
                Some("coordinator"),
                request(&["lead", "lead 1", "more"]),
                Outcome::Response(response("lead 2")),
            ),
        ],
    };
    let replay = ReplayModel::new(cassette, MatchMode::InOrder { per_agent: true })
        .labelled_by(AgentLabels::new("lead"));
    assert_eq!(replied_text(ask(&replay, &["Worker."])), "worker 1");
    assert_eq!(replied_text(ask(&replay, &["lead"])), "lead 1");
    assert_eq!(replied_text(ask(&replay, &["lead", "?", "?"])), "lead 2");
    assert!(replay.report().is_clean());
}

#[test]
fn a_request_recorded_twice_replays_its_exchanges_in_call_order() {
    // Goal: by hash, repeats of one request (a retry) replay in the order they were
    // made, then miss as exhausted; an error and a call that never answered replay
    // as themselves.
    let same = request(&["retry me"]);
    let cassette = Cassette {
        exchanges: vec![
            exchange(
                2,
                None,
                same.clone(),
                Outcome::Response(response("after retry")),
            ),
            exchange(
                1,
                None,
                same.clone(),
                Outcome::Error(RecordedError::Overloaded),
            ),
            exchange(3, None, request(&["hang"]), Outcome::NoResponse),
        ],
    };
    let replay = ReplayModel::new(cassette, MatchMode::ByRequestHash);
    assert_eq!(
        replay.answer(&same),
        Replayed::Error {
            error: ModelError::Overloaded,
            latency: std::time::Duration::from_millis(100)
        }
    );
    assert_eq!(
        replied_text(now(replay.send(Arc::new(same.clone())))),
        "after retry"
    );
    assert_eq!(replay.answer(&request(&["hang"])), Replayed::NoResponse);
    assert!(matches!(replay.answer(&same), Replayed::Miss(_)));
    let report = replay.report();
    assert_eq!(
        report.misses[0].reason,
        MissReason::Exhausted { recorded: 2 }
    );
    assert!(
        report.misses[0].diff.is_empty(),
        "the nearest is the same request"
    );
    assert!(report.unused.is_empty());
}

#[test]
fn a_miss_names_the_nearest_request_and_lists_what_went_unused() {
    // Goal: an unknown request is an error the runtime will not retry, and the
    // report names the recorded request it is closest to, with a diff.
    let cassette = Cassette {
        exchanges: vec![
            exchange(
                1,
                None,
                request(&["alpha", "beta", "gamma"]),
                Outcome::Response(response("x")),
            ),
            exchange(
                2,
                None,
                request(&["something else entirely"]),
                Outcome::Response(response("y")),
            ),
        ],
    };
    let replay = ReplayModel::new(cassette, MatchMode::ByRequestHash);
    let answer = ask(&replay, &["alpha", "BETA", "gamma"]);
    let Err(ModelError::Api { status, message }) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(status, 400);
    assert!(message.starts_with("cassette miss: call 1"), "{message}");
    let report = replay.report();
    let miss = &report.misses[0];
    assert_eq!(miss.reason, MissReason::Unrecorded);
    assert_eq!(miss.nearest.as_ref().unwrap().call, 1);
    assert!(
        miss.diff.contains("-          \"text\": \"beta\""),
        "{}",
        miss.diff
    );
    assert!(
        miss.diff.contains("+          \"text\": \"BETA\""),
        "{}",
        miss.diff
    );
    assert_eq!(report.unused.len(), 2);
    insta::assert_snapshot!(report.to_string());
}

/// A model that answers with every text of the request, echoed.
#[derive(Debug)]
struct Echo;

impl Model for Echo {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let echoed = serde_json::to_string(&request.messages).unwrap();
        Box::pin(std::future::ready(Ok(response(&echoed))))
    }
}

#[test]
fn secrets_never_reach_the_cassette_file_and_the_replay_still_finds_them() {
    // Goal: an API key in a message, in a tool input or in the response, and the
    // caller's literal secret, are scrubbed before the file is written; replaying
    // the original request, scrubbed the same way, still finds its exchange.
    const KEY: &str = "sk-ant-api03-Zx9_secretsecret-AA";
    const LITERAL: &str = "hunter2-env-value";
    let mut secret_request = request(&[&format!("my key is {KEY}, and {LITERAL}")]);
    secret_request.messages.push(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: "toolu_1".to_owned(),
            name: "Bash".to_owned(),
            input: json!({"command": format!("export ANTHROPIC_API_KEY={KEY}"), LITERAL: 1}).into(),
        }],
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.json");
    let secrets = Secrets::new().with_literal(LITERAL);
    let recording = Recording::to_file(&path).scrubbing(secrets.clone());
    let model = RecordingModel::new(Arc::new(Echo), recording);
    let answered = now(model.send(Arc::new(secret_request.clone()))).unwrap();
    assert!(
        answered.content[0] != ContentBlock::text(""),
        "the echo carries the key"
    );
    model.finish().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("sk-ant-"), "{text}");
    assert!(!text.contains(LITERAL), "{text}");
    assert!(!text.contains("secretsecret"), "{text}");
    assert!(text.contains("[redacted]"));

    let replay = ReplayModel::new(Cassette::load(&path).unwrap(), MatchMode::ByRequestHash)
        .scrubbing(secrets);
    assert!(matches!(
        replay.answer(&secret_request),
        Replayed::Response { .. }
    ));
    assert!(replay.report().is_clean());
}

/// A model that never answers.
#[derive(Debug)]
struct Silent;

impl Model for Silent {
    fn send(&self, _: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        Box::pin(std::future::pending())
    }
}

#[test]
fn a_call_dropped_unanswered_is_recorded_as_no_response() {
    // Goal: a hung call the caller gives up on is in the cassette, so a replay
    // hangs there too instead of missing.
    let recording = Recording::in_memory();
    let model = RecordingModel::new(Arc::new(Silent), recording.clone());
    let mut call = model.send(Arc::new(request(&["anyone?"])));
    assert!(Pin::new(&mut call)
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    assert!(recording.is_empty(), "still waiting");
    drop(call);
    let cassette = recording.cassette();
    assert_eq!(cassette.exchanges.len(), 1);
    assert_eq!(cassette.exchanges[0].outcome, Outcome::NoResponse);
    assert_eq!(cassette.exchanges[0].call, 1);
}

#[test]
fn a_recording_can_write_after_every_exchange() {
    // Goal: with writing_each_exchange, the file is complete before finish, so a
    // session that dies keeps what it recorded.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.json");
    let recording = Recording::to_file(&path).writing_each_exchange();
    let model = RecordingModel::new(Arc::new(Echo), recording);
    now(model.send(Arc::new(request(&["one"])))).unwrap();
    assert_eq!(Cassette::load(&path).unwrap().exchanges.len(), 1);
    now(model.send(Arc::new(request(&["two"])))).unwrap();
    assert_eq!(Cassette::load(&path).unwrap().exchanges.len(), 2);
}

#[test]
fn a_cassette_round_trips_through_its_pinned_file_format() {
    // Goal: the file format is stable (snapshot) and reads back as written.
    let mut with_tool = request(&["Read the file."]);
    std::sync::Arc::make_mut(&mut with_tool.tools).push(ToolDefinition {
        name: "Read".to_owned(),
        description: "Reads a file.".to_owned(),
        input_schema: json!({"type": "object", "required": ["file_path"]}).into(),
        cache_control: Some(CacheControl::ephemeral(None)),
    });
    let cassette = Cassette {
        exchanges: vec![
            exchange(
                1,
                Some("coordinator"),
                with_tool,
                Outcome::Response(response("ok")),
            ),
            exchange(
                3,
                Some("Worker."),
                request(&["Worker."]),
                Outcome::Error(RecordedError::RateLimited {
                    retry_after_ms: Some(5000),
                }),
            ),
            exchange(2, None, request(&["Hang."]), Outcome::NoResponse),
        ],
    };
    let text = cassette.to_json();
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    insta::assert_snapshot!(text);
    assert_eq!(
        Cassette::parse(Path::new("c.json"), &text).unwrap(),
        cassette
    );
}

#[test]
fn writing_is_atomic_and_failures_are_typed() {
    // Goal: a write leaves exactly the cassette (no temporary file), and a write
    // that cannot happen names the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let cassette = Cassette {
        exchanges: vec![exchange(1, None, request(&["a"]), Outcome::NoResponse)],
    };
    cassette.write(&path).unwrap();
    cassette.write(&path).unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["c.json"]);
    let missing = dir.path().join("no/such/folder/c.json");
    let error = cassette.write(&missing).unwrap_err();
    assert!(matches!(error, CassetteError::Write { .. }), "{error}");
    assert!(
        error.to_string().contains("no/such/folder/c.json"),
        "{error}"
    );
    let error = Recording::in_memory().write().unwrap_err();
    assert!(matches!(error, CassetteError::NoPath));
}

#[test]
fn malformed_cassettes_are_typed_errors_naming_file_line_and_column() {
    // Goal: every kind of bad file says where and what, never panics.
    let good = Cassette {
        exchanges: vec![exchange(
            1,
            None,
            request(&["a"]),
            Outcome::Response(response("b")),
        )],
    }
    .to_json();
    let cases = [
        ("truncated", good[..good.len() / 2].to_owned()),
        ("not-json", "{\n  \"format\": coordsim\n}\n".to_owned()),
        (
            "wrong-format",
            good.replace("\"coordsim-cassette\"", "\"vcr-cassette\""),
        ),
        (
            "wrong-version",
            good.replace("\"version\": 1", "\"version\": 7"),
        ),
        (
            "two-outcomes",
            good.replace(
                "\"response\": {",
                "\"no_response\": true,\n      \"response\": {",
            ),
        ),
        (
            "bad-hash",
            good.replace(&request_hash(&request(&["a"])).to_string(), "12345"),
        ),
        (
            "unknown-field",
            good.replace("\"call\": 1,", "\"call\": 1,\n      \"tape\": 3,"),
        ),
        (
            "unknown-error-kind",
            good.replace(
                "\"response\": {",
                "\"error\": {\"kind\": \"teapot\"},\n      \"ignored\": {",
            ),
        ),
    ];
    let mut report = String::new();
    for (name, text) in cases {
        let error = Cassette::parse(Path::new(&format!("{name}.json")), &text).unwrap_err();
        assert!(matches!(error, CassetteError::Invalid { .. }), "{error}");
        report += &format!("{error}\n");
    }
    insta::assert_snapshot!(report);
    let missing = Cassette::load(Path::new("no/such/cassette.json")).unwrap_err();
    assert!(matches!(missing, CassetteError::Read { .. }));
    assert!(missing.to_string().starts_with("no/such/cassette.json: "));
}

#[test]
fn the_scenario_loader_checks_the_model_section() {
    // Goal: [model] mistakes are file:line:column errors, scripts may be left out
    // only with a cassette, and a missing cassette fails the run naming its path.
    let dir = tempfile::tempdir().unwrap();
    let parse = |text: &str| LoadedScenario::parse(Path::new("s.toml"), text);
    let head = "name = \"x\"\n[coordinator]\nprompt = \"p\"\n";
    let error = parse(&format!(
        "{head}[[coordinator.turns]]\ntext = \"t\"\n[model]\nmatch = \"in-order\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "s.toml:7:1: [model] `match` needs a `cassette` to match against"
    );
    let error = parse(&format!("{head}[model]\nmatch = \"sideways\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("s.toml:5:9: unknown variant `sideways`"),
        "{error}"
    );
    let error = parse(head).unwrap_err().to_string();
    assert!(
        error.contains("expected at least one [[coordinator.turns]]"),
        "{error}"
    );
    let error = parse(&format!(
        "{head}[model]\ncassette = \"c.json\"\n[economics.fork_system_edit]\nfork = \"*\"\nappend = \"x\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(error.starts_with("s.toml:6:"), "{error}");
    let error = parse(&format!(
        "{head}[model]\ncassette = \"c.json\"\n[economics]\nstagger_ms = 500\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("s.toml:7:1: a [model] cassette's latencies"),
        "{error}"
    );

    let path = dir.path().join("s.toml");
    std::fs::write(&path, format!("{head}[model]\ncassette = \"gone.json\"\n")).unwrap();
    // A missing cassette is a load error (bad input), and a scenario parsed without
    // its file still meets it as a run error, never as a failed seed.
    let error = LoadedScenario::load(&path).unwrap_err();
    assert!(error.to_string().contains("gone.json"), "{error}");
    let text = std::fs::read_to_string(&path).unwrap();
    let scenario = LoadedScenario::parse(&path, &text).unwrap();
    let error = run_seed(&scenario, 0, &RunOptions::default()).unwrap_err();
    assert!(
        matches!(error, RunError::Cassette(CassetteError::Read { .. })),
        "{error}"
    );
    assert!(error.to_string().contains("gone.json"), "{error}");
}

fn coordsim(args: &[&str], api_key: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coordsim"));
    command.args(args).current_dir(repo_root());
    // Set or cleared for the child only: the test process's environment is untouched.
    match api_key {
        Some(key) => command.env("ANTHROPIC_API_KEY", key),
        None => command.env_remove("ANTHROPIC_API_KEY"),
    };
    command.output().unwrap()
}

#[test]
fn record_cli_writes_a_cassette_that_replays() {
    // Goal: `coordsim record` then `coordsim replay` of a scenario using the
    // cassette is a round trip, and the recording's trace hash is the plain run's.
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("notify-once.json");
    let output = coordsim(
        &[
            "record",
            NOTIFY_ONCE,
            "--seed",
            "0",
            "-o",
            cassette.to_str().unwrap(),
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with(
            "recorded 9 exchanges (7 responses, 1 errors, 1 without response) of scenarios/core/notify-once.toml seed 0 into "
        ),
        "{stdout}"
    );
    let plain = run_seed(&load(NOTIFY_ONCE), 0, &RunOptions::default()).unwrap();
    assert!(
        stdout.contains(&format!("trace hash {:016x}", plain.trace_hash())),
        "{stdout}"
    );

    let replay = notify_once_replay(dir.path(), "notify-once.json", "request-hash");
    let output = coordsim(
        &["replay", replay.path.to_str().unwrap(), "--seed", "0"],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("no violation"));
}

#[test]
fn record_cli_scrubs_the_api_key_from_the_environment() {
    // Goal: whatever ANTHROPIC_API_KEY holds never reaches the file. Method: a key
    // equal to text the prompts contain, so the scrub is visible.
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("scrubbed.json");
    let output = coordsim(
        &["record", NOTIFY_ONCE, "-o", cassette.to_str().unwrap()],
        Some("login failures"),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains("login failures"));
    assert!(text.contains("Investigate the [redacted]."));
}

#[test]
fn record_cli_rejects_an_unwritable_output() {
    // Goal: a cassette that cannot be written is exit 2 with the path.
    let output = coordsim(
        &["record", NOTIFY_ONCE, "-o", "/nonexistent-dir/c.json"],
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent-dir/c.json"), "{stderr}");
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// One content block: text, a tool call with any input, or a tool result.
fn block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        "[a-zA-Z ]{0,12}".prop_map(ContentBlock::text),
        ("[a-z0-9]{1,6}", "[A-Z][a-z]{1,6}", json_value()).prop_map(|(id, name, input)| {
            ContentBlock::ToolUse {
                id: format!("toolu_{id}"),
                name,
                input: input.into(),
            }
        }),
        ("[a-z0-9]{1,6}", "[a-z ]{0,12}", any::<bool>()).prop_map(|(id, content, is_error)| {
            ContentBlock::ToolResult {
                tool_use_id: format!("toolu_{id}"),
                content,
                is_error,
                cache_control: None,
            }
        }),
    ]
}

/// A request whose messages each open with a text block.
fn any_request() -> impl Strategy<Value = ModelRequest> {
    let message = (
        "[a-zA-Z ]{0,12}",
        prop::collection::vec(block(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(text, mut rest, user)| {
            rest.insert(0, ContentBlock::text(text));
            Message {
                role: if user { Role::User } else { Role::Assistant },
                content: rest,
            }
        });
    (prop::collection::vec(message, 1..5), json_value()).prop_map(|(messages, schema)| {
        ModelRequest {
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 2048,
            tools: vec![ToolDefinition {
                name: "Tool".to_owned(),
                description: "Does things.".to_owned(),
                input_schema: schema.into(),
                cache_control: None,
            }]
            .into(),
            system: vec![SystemBlock::text("System.")].into(),
            messages,
            thinking: None,
        }
    })
}

/// `value` as JSON text with every object's keys in an order `seed` picks.
fn shuffled_json(value: &Value, seed: u64) -> String {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            let count = keys.len().max(1);
            keys.rotate_left((seed as usize) % count);
            if seed & 1 == 1 {
                keys.reverse();
            }
            let body: Vec<String> = keys
                .iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(key).unwrap(),
                        shuffled_json(&fields[*key], seed.rotate_right(7) ^ 0x9e37)
                    )
                })
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => {
            let body: Vec<String> = items.iter().map(|item| shuffled_json(item, seed)).collect();
            format!("[{}]", body.join(","))
        }
        scalar => scalar.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_hash_ignores_key_order_in_the_request_and_its_tool_inputs(
        request in any_request(),
        seed in any::<u64>(),
    ) {
        // Goal: the same request written with its keys in any order (the request's
        // own fields and every object in tool inputs and schemas) has one hash.
        let text = shuffled_json(&serde_json::to_value(&request).unwrap(), seed);
        let reread: ModelRequest = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(request_hash(&reread), request_hash(&request));
    }

    #[test]
    fn the_hash_ignores_cache_control_markers(
        request in any_request(),
        marked_message in any::<prop::sample::Index>(),
    ) {
        // Goal: breakpoints anywhere leave the key alone.
        let mut marked = request.clone();
        std::sync::Arc::make_mut(&mut marked.system)[0].cache_control =
            Some(CacheControl::ephemeral(None));
        std::sync::Arc::make_mut(&mut marked.tools)[0].cache_control =
            Some(CacheControl::ephemeral(None));
        let message = marked_message.index(marked.messages.len());
        for block in &mut marked.messages[message].content {
            match block {
                ContentBlock::Text { cache_control, .. }
                | ContentBlock::ToolResult { cache_control, .. } => {
                    *cache_control = Some(CacheControl::ephemeral(None));
                }
                ContentBlock::ToolUse { .. } => {}
            }
        }
        prop_assert_eq!(request_hash(&marked), request_hash(&request));
    }

    #[test]
    fn changing_any_message_text_changes_the_hash(
        request in any_request(),
        changed_message in any::<prop::sample::Index>(),
        extra in "[a-z]{1,3}",
    ) {
        // Goal: what a message says is part of the key, wherever it is.
        let mut changed = request.clone();
        let message = changed_message.index(changed.messages.len());
        let ContentBlock::Text { text, .. } = &mut changed.messages[message].content[0] else {
            unreachable!("every generated message opens with text");
        };
        text.push_str(&extra);
        prop_assert_ne!(request_hash(&changed), request_hash(&request));
    }
}
