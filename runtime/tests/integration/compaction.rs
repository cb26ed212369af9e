//! Compaction: an agent whose context passed the threshold has its conversation
//! replaced by a summary before its next request, in the worker and the
//! coordinator loops, and resumes start from the last summary.

use std::sync::{Arc, Mutex};

use coord_runtime::envelope::EnvelopeStatus;
use coord_runtime::ipc::SessionLayout;
use coord_runtime::probe::Probe;
use coord_runtime::profile::Profile;
use coord_runtime::session::{
    coordinator_log_path, AgentRef, Effects, Session, SessionConfig, Transcript,
    COMPACT_INSTRUCTION, CONTINUATION_PREAMBLE,
};
use coord_runtime::world::{
    ChaChaEntropy, ContentBlock, MemoryJournal, ModelError, ModelRequest, ModelResponse, RealDisk,
    Role, SystemClock, Usage,
};
use coord_runtime::{RuntimeEvent, World};
use serde_json::json;

use crate::session::{
    agent_input, coordinator_config, model, now, prompt_of, response, text, tool_use,
    wait_for_envelopes, EchoTools,
};

/// `reply` reporting a context of `input_tokens` prompt tokens and 10 output.
fn sized(mut reply: ModelResponse, input_tokens: u64) -> ModelResponse {
    reply.usage = Usage {
        input_tokens,
        output_tokens: 10,
        ..Usage::default()
    };
    reply
}

/// Whether `request` is a compaction request: its last block is the instruction.
fn is_compaction(request: &ModelRequest) -> bool {
    request
        .messages
        .last()
        .and_then(|m| m.content.last())
        .is_some_and(
            |b| matches!(b, ContentBlock::Text { text, .. } if text == COMPACT_INSTRUCTION),
        )
}

fn first_text(request: &ModelRequest) -> String {
    prompt_of(request)
}

struct Setup {
    session: Session,
    journal: Arc<MemoryJournal>,
    world: World,
    effects: Effects,
    layout: SessionLayout,
    _dir: tempfile::TempDir,
}

fn setup(config: SessionConfig, model: Arc<dyn coord_runtime::world::Model>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(3)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    let effects = Effects {
        model,
        tools: Arc::new(EchoTools::default()),
        vcs: None,
        remote: None,
        shell: None,
    };
    let layout = SessionLayout::new(dir.path());
    let session = Session::create(world.clone(), effects.clone(), config, layout.clone()).unwrap();
    Setup {
        session,
        journal,
        world,
        effects,
        layout,
        _dir: dir,
    }
}

fn lowered(profile: Profile, threshold_tokens: u64) -> SessionConfig {
    let mut config = coordinator_config(profile);
    config.compact_threshold_tokens = Some(threshold_tokens);
    config
}

#[test]
fn the_threshold_is_claude_codes_rule_unless_the_session_overrides_it() {
    // Goal: 200,000 − min(64,000, 20,000) − 13,000 in claude-code and hardened,
    // never in nexo, and the override wins in every profile.
    assert_eq!(
        SessionConfig::new(Profile::ClaudeCode).compact_threshold(),
        Some(167_000)
    );
    assert_eq!(
        SessionConfig::new(Profile::Hardened).compact_threshold(),
        Some(167_000)
    );
    assert_eq!(SessionConfig::new(Profile::Nexo).compact_threshold(), None);
    for profile in Profile::ALL {
        let mut config = SessionConfig::new(profile);
        config.compact_threshold_tokens = Some(5_000);
        assert_eq!(config.compact_threshold(), Some(5_000), "{profile}");
    }
}

/// A worker ("long work") that reads once with a context of `context_tokens`, then
/// ends with "done"; its compaction is answered by `compaction`.
fn worker_model(
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    context_tokens: u64,
    compaction: fn() -> Result<ModelResponse, ModelError>,
) -> Arc<dyn coord_runtime::world::Model> {
    model(move |request| {
        requests.lock().unwrap().push(request.clone());
        if is_compaction(request) {
            return Box::pin(std::future::ready(compaction()));
        }
        let first = first_text(request);
        now(if first == "long work" && request.messages.len() == 1 {
            sized(
                response(vec![tool_use("toolu_1", "Read", json!({"file_path": "a"}))]),
                context_tokens,
            )
        } else {
            sized(text("done"), 50)
        })
    })
}

#[tokio::test(start_paused = true)]
async fn a_worker_past_the_threshold_compacts_reading_its_own_prefix_and_goes_on() {
    // Goal: the compaction request is the worker's conversation in its own request
    // shape plus the instruction; the next request is the continuation alone; the
    // transcript's boundary makes a resume start from it.
    let requests = Arc::new(Mutex::new(Vec::new()));
    let s = setup(
        lowered(Profile::ClaudeCode, 1_000),
        worker_model(requests.clone(), 1_500, || Ok(text("SUMMARY-1"))),
    );
    s.session
        .spawn(&AgentRef::Main, agent_input("long", "long work"), None)
        .await
        .unwrap();
    let envelope = wait_for_envelopes(&s.session, 1).await.remove(0);
    assert_eq!(envelope.status, EnvelopeStatus::Completed);
    assert_eq!(envelope.result.as_deref(), Some("done"));

    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    let (first, compaction, after) = (&requests[0], &requests[1], &requests[2]);
    assert!(is_compaction(compaction));
    assert_eq!(compaction.system, first.system);
    assert_eq!(compaction.tools, first.tools);
    assert_eq!(compaction.model, first.model);
    // The prompt, the Read call, and its result with the instruction after it.
    assert_eq!(compaction.messages.len(), 3);
    assert_eq!(compaction.messages[0], first.messages[0]);
    assert_eq!(compaction.messages[1].role, Role::Assistant);
    assert!(matches!(
        compaction.messages[2].content[0],
        ContentBlock::ToolResult { .. }
    ));
    assert_eq!(after.messages.len(), 1);
    assert_eq!(
        first_text(after),
        format!("{CONTINUATION_PREAMBLE}SUMMARY-1")
    );

    let events = s.journal.events();
    assert!(events.contains(&RuntimeEvent::Compacted {
        agent: envelope.task_id.clone(),
        trigger: "auto".to_owned(),
        pre_tokens: 1_510,
        summary_bytes: 9,
    }));
    assert!(events.contains(&RuntimeEvent::ProbeReached {
        probe: Probe::ContextCompacted
    }));

    let id = coord_runtime::task::TaskId::parse(&envelope.task_id).unwrap();
    let path = s.layout.transcript(&id);
    let raw = std::fs::read_to_string(&path).unwrap();
    let boundary = raw
        .lines()
        .find(|line| line.contains("compact_boundary"))
        .expect("a boundary line");
    let boundary: serde_json::Value = serde_json::from_str(boundary).unwrap();
    assert_eq!(boundary["type"], "compact_boundary");
    assert_eq!(boundary["trigger"], "auto");
    assert_eq!(boundary["pre_tokens"], 1_510);
    let transcript = Transcript::read(&s.world, &path).unwrap();
    assert_eq!(transcript.messages.len(), 2);
    assert_eq!(transcript.messages[0], after.messages[0]);
    assert_eq!(transcript.messages[1].role, Role::Assistant);
}

#[tokio::test(start_paused = true)]
async fn a_worker_under_the_threshold_never_compacts() {
    // Goal: one token under the threshold sends no compaction request.
    let requests = Arc::new(Mutex::new(Vec::new()));
    let s = setup(
        lowered(Profile::Hardened, 1_511),
        worker_model(requests.clone(), 1_500, || Ok(text("SUMMARY-1"))),
    );
    s.session
        .spawn(&AgentRef::Main, agent_input("long", "long work"), None)
        .await
        .unwrap();
    wait_for_envelopes(&s.session, 1).await;
    assert!(!requests.lock().unwrap().iter().any(is_compaction));
    assert!(!s
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::Compacted { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_failed_compaction_leaves_the_conversation_whole_and_the_worker_goes_on() {
    // Goal: a compaction call that fails loses nothing: the next request holds the
    // whole conversation, the failure is journaled, and the worker completes.
    let requests = Arc::new(Mutex::new(Vec::new()));
    let s = setup(
        lowered(Profile::ClaudeCode, 1_000),
        worker_model(requests.clone(), 1_500, || {
            Err(ModelError::Api {
                status: 400,
                message: "prompt is too long".to_owned(),
            })
        }),
    );
    s.session
        .spawn(&AgentRef::Main, agent_input("long", "long work"), None)
        .await
        .unwrap();
    let envelope = wait_for_envelopes(&s.session, 1).await.remove(0);
    assert_eq!(envelope.status, EnvelopeStatus::Completed);
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert!(is_compaction(&requests[1]));
    assert_eq!(requests[2].messages.len(), 3);
    assert_eq!(first_text(&requests[2]), "long work");
    let events = s.journal.events();
    assert!(events
        .iter()
        .any(|e| matches!(e, RuntimeEvent::CompactionFailed { .. })));
    assert!(!events
        .iter()
        .any(|e| matches!(e, RuntimeEvent::Compacted { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_compacts_and_a_resume_continues_from_the_summary() {
    // Goal: the coordinator compacts before the turn that brings its worker's
    // envelope, the envelope joins the continuation message, and its durable log's
    // boundary makes a restarted coordinator continue from the summary.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let coordinator = model(move |request| {
        let first = first_text(request);
        if first != "plan" && !first.starts_with(CONTINUATION_PREAMBLE) {
            return now(sized(text("findings"), 50));
        }
        seen.lock().unwrap().push(request.clone());
        if is_compaction(request) {
            return now(sized(text("COORD-SUMMARY"), 50));
        }
        now(match request.messages.len() {
            1 if first == "plan" => sized(
                response(vec![tool_use(
                    "toolu_1",
                    "Agent",
                    json!({"description": "research", "prompt": "research it"}),
                )]),
                2_000,
            ),
            _ => sized(text("synthesized"), 50),
        })
    });
    let s = setup(lowered(Profile::Hardened, 1_000), coordinator);
    let report = s.session.run_coordinator("plan", vec![]).await.unwrap();
    assert_eq!(report.final_text, "synthesized");
    assert_eq!(report.notifications_delivered, 1);
    {
        let requests = requests.lock().unwrap();
        let compaction = requests.iter().position(is_compaction).expect("compacted");
        assert_eq!(requests[compaction].system, requests[0].system);
        // Every later request starts from the continuation, and the envelope
        // arrives in one of them, after the summary.
        let continuation = format!("{CONTINUATION_PREAMBLE}COORD-SUMMARY");
        let later = &requests[compaction + 1..];
        assert!(!later.is_empty());
        assert!(later.iter().all(|r| first_text(r) == continuation));
        assert!(later.iter().any(|r| r
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .any(|b| matches!(b, ContentBlock::Text { text, .. } if text.contains("<task-notification>")))));
    }
    let log = std::fs::read_to_string(coordinator_log_path(&s.layout)).unwrap();
    assert_eq!(log.matches("\"type\":\"compact_boundary\"").count(), 1);

    // A restart reopens the log: the conversation starts from the continuation,
    // and the task is not notified again.
    let resumed = Session::resume(
        s.world.clone(),
        s.effects.clone(),
        lowered(Profile::Hardened, 1_000),
        s.layout.clone(),
    )
    .unwrap();
    let report = resumed.resume_coordinator("plan", vec![]).await.unwrap();
    assert_eq!(report.messages[0].role, Role::User);
    assert!(matches!(
        &report.messages[0].content[0],
        ContentBlock::Text { text, .. } if text == &format!("{CONTINUATION_PREAMBLE}COORD-SUMMARY")
    ));
    assert_eq!(report.final_text, "synthesized");
    assert_eq!(report.notifications_delivered, 0);
}

#[test]
fn a_transcript_is_read_from_its_last_boundary() {
    // Goal: a resume starts from the last summary and what followed it; a torn
    // boundary (a crash mid-append) leaves the conversation before it whole.
    use coord_runtime::session::{continuation_message, TranscriptHeader, TranscriptWriter};
    use coord_runtime::world::Message;
    let dir = tempfile::tempdir().unwrap();
    let world = World::real();
    let path = dir.path().join("t.jsonl");
    let writer = TranscriptWriter::create(
        &world,
        &path,
        TranscriptHeader {
            task_id: "a1".to_owned(),
            description: "d".to_owned(),
            agent_type: "worker".to_owned(),
            resumed_from: None,
            teammate: None,
        },
    )
    .unwrap();
    let message = |role, text: &str| Message {
        role,
        content: vec![ContentBlock::text(text)],
    };
    writer.append(&message(Role::User, "prompt")).unwrap();
    writer.append(&message(Role::Assistant, "one")).unwrap();
    writer
        .append_compact_boundary("auto", 1_000, &continuation_message("first"))
        .unwrap();
    writer.append(&message(Role::Assistant, "two")).unwrap();
    writer
        .append_compact_boundary("auto", 2_000, &continuation_message("second"))
        .unwrap();
    writer.append(&message(Role::Assistant, "three")).unwrap();
    let transcript = Transcript::read(&world, &path).unwrap();
    assert_eq!(
        transcript.messages,
        vec![
            continuation_message("second"),
            message(Role::Assistant, "three")
        ]
    );

    // A boundary torn mid-line is dropped with the rest of the torn append.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"compact_boundary","trigger":"auto","pre_to"#);
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(
        Transcript::read(&world, &path).unwrap().messages,
        transcript.messages
    );
}
