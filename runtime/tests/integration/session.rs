//! Sessions (PROTOCOL.md §2, §3, §5): the coordinator and worker loops against
//! small scripted models, on tokio's paused clock so deadlines pass instantly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::agent::{is_async, AgentInput, AgentInputError, AsyncInputs};
use coord_runtime::envelope::{parse_block, Envelope, EnvelopeStatus};
use coord_runtime::ipc::SessionLayout;
use coord_runtime::profile::Profile;
use coord_runtime::session::{
    coordinator_mode_requested, drop_orphaned_tool_results, drop_unresolved_tool_uses, AgentRef,
    Effects, Session, SessionConfig, SessionError, SpawnOutcome, StopError,
};
use coord_runtime::task::{TaskId, TaskStatus};
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, ContentBlock, MemoryJournal, Message, Model, ModelError,
    ModelRequest, ModelResponse, RealDisk, Remote, RemoteError, RemoteLaunch, RemoteReport, Role,
    StopReason, SystemClock, ToolCall, ToolContext, ToolOutput, Tools, Usage,
};
use coord_runtime::{RuntimeEvent, World};
use serde_json::json;
use tokio::sync::Notify;

type Reply = BoxFuture<'static, Result<ModelResponse, ModelError>>;

/// A model whose every answer is computed by a closure from the request.
struct ScriptModel {
    reply: Box<dyn Fn(&ModelRequest) -> Reply + Send + Sync>,
}

impl std::fmt::Debug for ScriptModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptModel")
    }
}

impl Model for ScriptModel {
    fn send(&self, request: Arc<ModelRequest>) -> Reply {
        (self.reply)(&request)
    }
}

pub(crate) fn model(
    reply: impl Fn(&ModelRequest) -> Reply + Send + Sync + 'static,
) -> Arc<dyn Model> {
    Arc::new(ScriptModel {
        reply: Box::new(reply),
    })
}

pub(crate) fn now(response: ModelResponse) -> Reply {
    Box::pin(std::future::ready(Ok(response)))
}

pub(crate) fn response(content: Vec<ContentBlock>) -> ModelResponse {
    let stop_reason = if content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
    {
        StopReason::ToolUse
    } else {
        StopReason::EndTurn
    };
    ModelResponse {
        id: "msg_test".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content,
        stop_reason,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        },
    }
}

pub(crate) fn text(text: &str) -> ModelResponse {
    response(vec![ContentBlock::text(text)])
}

pub(crate) fn tool_use(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.into(),
        name: name.into(),
        input: input.into(),
    }
}

/// The first user text of a request: whose conversation it is.
pub(crate) fn prompt_of(request: &ModelRequest) -> String {
    match request.messages.first().and_then(|m| m.content.first()) {
        Some(ContentBlock::Text { text, .. }) => text.clone(),
        _ => String::new(),
    }
}

/// Every text block of every user message of a request.
pub(crate) fn user_texts(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Tools that answer `ok <name>` at once.
#[derive(Debug, Default)]
pub(crate) struct EchoTools {
    pub(crate) calls: AtomicUsize,
}

impl Tools for EchoTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(ToolOutput {
            content: format!("ok {}", call.name),
            is_error: false,
        }))
    }
}

/// Tools whose calls wait until the test releases them.
#[derive(Debug, Default)]
pub(crate) struct GatedTools {
    pub(crate) entered: Notify,
    pub(crate) release: Arc<Notify>,
}

impl Tools for GatedTools {
    fn call(&self, _context: ToolContext, _call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        self.entered.notify_one();
        let release = self.release.clone();
        Box::pin(async move {
            release.notified().await;
            ToolOutput {
                content: "ok gated".into(),
                is_error: false,
            }
        })
    }
}

pub(crate) struct Harness {
    pub(crate) session: Session,
    pub(crate) journal: Arc<MemoryJournal>,
    _dir: tempfile::TempDir,
}

pub(crate) fn harness(
    config: SessionConfig,
    model: Arc<dyn Model>,
    tools: Arc<dyn Tools>,
) -> Harness {
    harness_with(config, model, tools, None)
}

fn harness_with(
    config: SessionConfig,
    model: Arc<dyn Model>,
    tools: Arc<dyn Tools>,
    remote: Option<Arc<dyn Remote>>,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(7)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    let effects = Effects {
        model,
        tools,
        vcs: None,
        remote,
        shell: None,
    };
    let layout = SessionLayout::new(dir.path());
    let session = Session::create(world, effects, config, layout).unwrap();
    Harness {
        session,
        journal,
        _dir: dir,
    }
}

pub(crate) fn coordinator_config(profile: Profile) -> SessionConfig {
    let mut config = SessionConfig::new(profile);
    config.coordinator_mode = true;
    config.idle_poll = Duration::from_millis(100);
    config
}

pub(crate) fn agent_input(description: &str, prompt: &str) -> AgentInput {
    AgentInput::parse(&json!({"description": description, "prompt": prompt})).unwrap()
}

pub(crate) async fn wait_for_envelopes(session: &Session, count: usize) -> Vec<Envelope> {
    let mut envelopes = Vec::new();
    for _ in 0..10_000 {
        let change = session.next_change();
        envelopes.extend(session.take_notifications());
        if envelopes.len() >= count {
            return envelopes;
        }
        session
            .wait_for_change(change, Duration::from_millis(50))
            .await;
    }
    panic!("only {} of {count} envelopes arrived", envelopes.len());
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_spawns_three_workers_at_once_and_gets_each_envelope_once() {
    // Goal: every tool call of one message runs concurrently, spawns return
    // async_launched at once, and each worker's envelope is injected exactly once as
    // a user message at a later turn boundary.
    let released = Arc::new(Notify::new());
    let release = released.clone();
    let coordinator_requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = coordinator_requests.clone();
    let model = model(move |request| {
        let prompt = prompt_of(request);
        if prompt == "plan the work" {
            seen.lock().unwrap().push(request.clone());
            let turn = request.messages.len();
            return now(match turn {
                1 => response(
                    (1..=3)
                        .map(|n| {
                            tool_use(
                                &format!("toolu_{n}"),
                                "Agent",
                                json!({"description": format!("research {n}"), "prompt": format!("research topic {n}")}),
                            )
                        })
                        .collect(),
                ),
                _ => text("synthesized"),
            });
        }
        // Workers wait until the coordinator has seen its launch results.
        let release = release.clone();
        Box::pin(async move {
            release.notified().await;
            Ok(text(&format!("findings for {prompt}")))
        })
    });
    let h = harness(
        coordinator_config(Profile::ClaudeCode),
        model,
        Arc::new(EchoTools::default()),
    );
    let session = h.session.clone();
    let run = tokio::spawn(async move { session.run_coordinator("plan the work", vec![]).await });
    // Let the coordinator take its first turn and launch the workers.
    while h.session.tasks().len() < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(h.session.tasks().iter().all(|t| !t.status().is_terminal()));
    released.notify_waiters();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.notifications_delivered, 3);

    let requests = coordinator_requests.lock().unwrap();
    let launch_results: Vec<serde_json::Value> = requests[1].messages[2]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => serde_json::from_str(content).ok(),
            _ => None,
        })
        .collect();
    assert_eq!(launch_results.len(), 3);
    assert!(launch_results
        .iter()
        .all(|r| r["status"] == "async_launched"));
    let delivered: Vec<Envelope> = user_texts(requests.last().unwrap())
        .iter()
        .flat_map(|t| parse_block(t))
        .collect();
    assert_eq!(delivered.len(), 3);
    let mut ids: Vec<&str> = delivered.iter().map(|e| e.task_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    assert!(delivered
        .iter()
        .all(|e| e.status == EnvelopeStatus::Completed));
    assert!(delivered
        .iter()
        .any(|e| e.result.as_deref() == Some("findings for research topic 2")));
}

/// A model whose coordinator ("plan the work") launches one worker and then ends
/// its turn, and whose worker answers after `worker_latency`.
fn one_worker_model(worker_latency: Duration) -> Arc<dyn Model> {
    model(move |request| {
        if prompt_of(request) != "plan the work" {
            return Box::pin(async move {
                tokio::time::sleep(worker_latency).await;
                Ok(text("findings"))
            });
        }
        now(match request.messages.len() {
            1 => response(vec![tool_use(
                "toolu_1",
                "Agent",
                json!({"description": "research", "prompt": "research the topic"}),
            )]),
            _ => text("synthesized"),
        })
    })
}

#[tokio::test(start_paused = true)]
async fn an_idle_coordinator_wakes_when_its_worker_ends_not_at_its_recheck() {
    // Goal: the coordinator's wait for notifications is signalled; the recheck only
    // bounds it. With an hour's recheck and a worker that takes 5 s, the run ends
    // 5 s in.
    let mut config = coordinator_config(Profile::Hardened);
    config.idle_recheck = Duration::from_secs(3_600);
    let h = harness(
        config,
        one_worker_model(Duration::from_secs(5)),
        Arc::new(EchoTools::default()),
    );
    let started = tokio::time::Instant::now();
    let report = h
        .session
        .run_coordinator("plan the work", vec![])
        .await
        .unwrap();
    assert_eq!(report.notifications_delivered, 1);
    assert_eq!(report.final_text, "synthesized");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_change_between_looking_and_waiting_still_wakes_the_waiter() {
    // Goal: a change signal counts from when it is taken, so a worker that ends
    // after the caller looked at the state but before it waits is not missed.
    let h = harness(
        coordinator_config(Profile::Hardened),
        one_worker_model(Duration::from_secs(5)),
        Arc::new(EchoTools::default()),
    );
    h.session
        .spawn(
            &AgentRef::Main,
            agent_input("research", "research the topic"),
            None,
        )
        .await
        .unwrap();
    let change = h.session.next_change();
    assert!(h.session.take_notifications().is_empty());
    // The worker ends in here, between the look and the wait.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let waited_from = tokio::time::Instant::now();
    h.session
        .wait_for_change(change, Duration::from_secs(3_600))
        .await;
    assert_eq!(waited_from.elapsed(), Duration::ZERO);
    assert_eq!(h.session.take_notifications().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_synthesizes_one_timeout_notification_rendered_per_dialect() {
    // Goal: a worker that never answers does not leave the coordinator waiting: at
    // its deadline the runtime ends it and sends one envelope, `timeout` in nexo and
    // `killed` on the claude-code wire.
    for (profile, wire) in [(Profile::Nexo, "timeout"), (Profile::ClaudeCode, "killed")] {
        let model = model(|_| Box::pin(std::future::pending()));
        let mut config = SessionConfig::new(profile);
        config.spawn_deadline = Duration::from_secs(60);
        let h = harness(config, model, Arc::new(EchoTools::default()));
        let mut input = agent_input("hang", "never answer");
        input.run_in_background = Some(true);
        let launch = h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
        assert!(matches!(launch, SpawnOutcome::Async(_)));
        let envelopes = wait_for_envelopes(&h.session, 1).await;
        assert_eq!(envelopes.len(), 1);
        assert_eq!(envelopes[0].status, EnvelopeStatus::Timeout);
        let xml = coord_runtime::envelope::render(&envelopes[0], profile.dialect());
        assert!(xml.contains(&format!("<status>{wire}</status>")), "{xml}");
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(
            h.session.take_notifications().is_empty(),
            "exactly one envelope"
        );
        assert!(h
            .journal
            .events()
            .iter()
            .any(|e| matches!(e, RuntimeEvent::DeadlineExpired { .. })));
    }
}

#[tokio::test(start_paused = true)]
async fn a_model_error_fails_the_worker() {
    // Goal: model error → status failed, summary names the error.
    let model = model(|_| Box::pin(std::future::ready(Err(ModelError::Overloaded))));
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    h.session
        .spawn(&AgentRef::Main, agent_input("doomed", "x"), None)
        .await
        .unwrap();
    let envelope = &wait_for_envelopes(&h.session, 1).await[0];
    assert_eq!(envelope.status, EnvelopeStatus::Failed);
    assert_eq!(
        envelope.summary,
        "Agent \"doomed\" failed: model API overloaded"
    );
}

#[tokio::test(start_paused = true)]
async fn task_stop_kills_an_agent_with_its_partial_result_and_cascades_to_children() {
    // Goal: TaskStop ends a running agent `killed`, its envelope carries what it had
    // written, and the abort cascades to the child it spawned.
    let model = model(|request| {
        let prompt = prompt_of(request);
        match (prompt.as_str(), request.messages.len()) {
            ("parent task", 1) => now(response(vec![
                ContentBlock::text("partial: step one done"),
                tool_use(
                    "toolu_child",
                    "Agent",
                    json!({"description": "child", "prompt": "child task", "run_in_background": true}),
                ),
            ])),
            // After launching its child the parent, and the child, hang.
            _ => Box::pin(std::future::pending()),
        }
    });
    let h = harness(
        coordinator_config(Profile::ClaudeCode),
        model,
        Arc::new(EchoTools::default()),
    );
    let SpawnOutcome::Async(launch) = h
        .session
        .spawn(&AgentRef::Main, agent_input("parent", "parent task"), None)
        .await
        .unwrap()
    else {
        panic!("coordinator spawns are async");
    };
    while h.session.tasks().len() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    h.session.stop(&launch.agent_id).unwrap();
    let envelopes = wait_for_envelopes(&h.session, 2).await;
    assert!(envelopes.iter().all(|e| e.status == EnvelopeStatus::Killed));
    let parent = envelopes
        .iter()
        .find(|e| e.task_id == launch.agent_id)
        .unwrap();
    assert!(parent
        .result
        .as_deref()
        .unwrap()
        .contains("partial: step one done"));
    assert_eq!(
        h.session.stop(&launch.agent_id),
        Err(StopError::NotRunning {
            id: launch.agent_id.clone(),
            status: "killed".into()
        })
    );
    assert_eq!(
        h.session.stop("a99999999"),
        Err(StopError::NotFound("a99999999".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn queued_messages_arrive_only_at_the_next_tool_round_boundary_once() {
    // Goal: a message to a running worker waits until its tool round ends, then
    // appears once, after the tool results, and never mid-turn.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        seen.lock().unwrap().push(request.clone());
        now(match request.messages.len() {
            1 => response(vec![tool_use(
                "toolu_1",
                "Read",
                json!({"file_path": "a.rs"}),
            )]),
            3 => response(vec![tool_use(
                "toolu_2",
                "Read",
                json!({"file_path": "b.rs"}),
            )]),
            _ => text("done"),
        })
    });
    let tools = Arc::new(GatedTools::default());
    let h = harness(coordinator_config(Profile::Hardened), model, tools.clone());
    let mut input = agent_input("reader", "read files");
    input.name = Some("reader".into());
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    tools.entered.notified().await;
    let id = h.session.resolve_name("READER").unwrap();
    assert!(h
        .session
        .queue_message(&AgentRef::Main, &id, "also check c.rs"));
    tools.release.notify_one();
    tools.entered.notified().await;
    tools.release.notify_one();
    let envelope = &wait_for_envelopes(&h.session, 1).await[0];
    assert_eq!(envelope.status, EnvelopeStatus::Completed);

    let requests = requests.lock().unwrap();
    // Turn 1 and the first round's request come before delivery; the message is in
    // the user message after the first tool results, exactly once.
    let second = &requests[1];
    let last_user = second.messages.last().unwrap();
    assert!(matches!(
        last_user.content[0],
        ContentBlock::ToolResult { .. }
    ));
    assert_eq!(last_user.content[1], ContentBlock::text("also check c.rs"));
    let total: usize = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter(|b| **b == ContentBlock::text("also check c.rs"))
        .count();
    assert_eq!(total, 1);
    assert!(h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::MessagesDelivered { count: 1, .. })));
}

#[tokio::test(start_paused = true)]
async fn a_message_queued_during_the_final_turn_is_answered_before_the_worker_ends() {
    // Goal: a message queued while a worker's last request is in flight (a turn
    // that ends with text, so no tool round follows) is not dropped: the end of
    // the turn is its boundary, the worker answers it in one more turn, and only
    // then notifies; once it has ended, a message resumes it instead.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        seen.lock().unwrap().push(request.clone());
        let turn = request.messages.len();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(match turn {
                1 => text("first answer"),
                _ => text("credits counted too"),
            })
        })
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(GatedTools::default()),
    );
    let mut input = agent_input("ledger", "reconcile the ledger");
    input.name = Some("ledger".into());
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let id = h.session.resolve_name("ledger").unwrap();
    assert!(h
        .session
        .queue_message(&AgentRef::Main, &id, "count the credits too"));
    let envelope = &wait_for_envelopes(&h.session, 1).await[0];
    assert_eq!(envelope.status, EnvelopeStatus::Completed);
    assert_eq!(envelope.result.as_deref(), Some("credits counted too"));

    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 2, "one more turn for the late message");
    assert_eq!(
        requests[1].messages.last().unwrap().content,
        [ContentBlock::text("count the credits too")]
    );
    assert!(h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::MessagesDelivered { count: 1, .. })));
    // Ended: its queue is closed, and a message must take the resume path.
    assert!(!h
        .session
        .queue_message(&AgentRef::Main, &id, "and the refunds"));
}

#[tokio::test(start_paused = true)]
async fn a_message_to_a_finished_worker_resumes_it_from_its_transcript() {
    // Goal: SendMessage to a stopped worker continues its conversation as a new task
    // whose first request holds the old transcript and the new message.
    let requests = Arc::new(Mutex::new(BTreeMap::<String, ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        let last = user_texts(request).last().cloned().unwrap_or_default();
        seen.lock().unwrap().insert(last.clone(), request.clone());
        now(text(&format!("answer to {last}")))
    });
    let h = harness(
        coordinator_config(Profile::ClaudeCode),
        model,
        Arc::new(EchoTools::default()),
    );
    let mut input = agent_input("analyst", "first question");
    input.name = Some("analyst".into());
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    let first = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(first.result.as_deref(), Some("answer to first question"));

    let message = ToolCall {
        id: "toolu_msg".into(),
        name: "SendMessage".into(),
        input: json!({"to": "analyst", "summary": "follow-up", "message": "second question"}),
    };
    let output = h.session.run_main_tool(message).await;
    assert!(!output.is_error, "{}", output.content);
    assert!(output.content.contains("resumed as"), "{}", output.content);
    let second = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_ne!(second.task_id, first.task_id);
    assert_eq!(second.result.as_deref(), Some("answer to second question"));
    let resumed_request = requests.lock().unwrap()["second question"].clone();
    assert_eq!(
        user_texts(&resumed_request),
        ["first question", "second question"]
    );
    assert!(h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::WorkerResumed { .. })));
}

#[test]
fn unresolved_tool_uses_are_dropped_on_resume() {
    // Goal: a tool use without a result (the worker stopped mid-round) is removed,
    // with an assistant message left empty by that.
    let mut messages = vec![
        Message {
            role: Role::User,
            content: vec![ContentBlock::text("go")],
        },
        Message {
            role: Role::Assistant,
            content: vec![tool_use("toolu_done", "Read", json!({}))],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "toolu_done".into(),
                content: "x".into(),
                is_error: false,
                cache_control: None,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![tool_use("toolu_lost", "Bash", json!({}))],
        },
    ];
    assert_eq!(drop_unresolved_tool_uses(&mut messages), 1);
    assert_eq!(messages.len(), 3);
}

#[test]
fn a_result_whose_call_never_reached_the_transcript_is_dropped() {
    // Goal: a transcript whose assistant line was lost (its append failed) but
    // whose results line was kept resumes without the orphaned result, and
    // without the user message it leaves empty; a result with its call stays.
    let result = |id: &str| ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content: "x".into(),
        is_error: false,
        cache_control: None,
    };
    let mut messages = vec![
        Message {
            role: Role::User,
            content: vec![ContentBlock::text("go")],
        },
        Message {
            role: Role::User,
            content: vec![result("toolu_lost")],
        },
        Message {
            role: Role::Assistant,
            content: vec![tool_use("toolu_kept", "Read", json!({}))],
        },
        Message {
            role: Role::User,
            content: vec![result("toolu_kept"), result("toolu_other")],
        },
    ];
    assert_eq!(drop_orphaned_tool_results(&mut messages), 2);
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2].content, vec![result("toolu_kept")]);
}

#[test]
fn the_agent_input_schema_is_strict() {
    // Goal: unknown fields, bad enum values and blank texts are typed errors.
    let bad = [
        json!({"description": "d", "prompt": "p", "colour": "red"}),
        json!({"description": "d", "prompt": "p", "model": "gpt"}),
        json!({"description": "d", "prompt": "p", "isolation": "docker"}),
        json!({"description": "d"}),
    ];
    for input in bad {
        assert!(
            matches!(AgentInput::parse(&input), Err(AgentInputError::Schema(_))),
            "{input}"
        );
    }
    assert_eq!(
        AgentInput::parse(&json!({"description": " ", "prompt": "p"})),
        Err(AgentInputError::Blank("description"))
    );
    assert!(matches!(
        AgentInput::parse(&json!({"description": "d", "prompt": "p", "name": "../x"})),
        Err(AgentInputError::BadName(_))
    ));
    assert_eq!(
        AgentInput::parse(&json!({"description": "d", "prompt": "p", "team_name": "t"})),
        Err(AgentInputError::TeammateWithoutName)
    );
    let full = AgentInput::parse(&json!({
        "description": "d", "prompt": "p", "subagent_type": "Explore", "model": "haiku",
        "run_in_background": true, "name": "n", "team_name": "t", "mode": "acceptEdits",
        "isolation": "worktree", "cwd": "/w"
    }))
    .unwrap();
    assert_eq!(full.subagent_type.as_deref(), Some("Explore"));
}

#[test]
fn the_async_decision_has_six_reasons_and_one_override() {
    // Goal: any of the six conditions makes a spawn async; disabled background
    // tasks force sync.
    assert!(!is_async(AsyncInputs::default()));
    let each: [fn(&mut AsyncInputs); 6] = [
        |i| i.run_in_background = true,
        |i| i.definition_background = true,
        |i| i.coordinator_mode = true,
        |i| i.fork_experiment = true,
        |i| i.assistant_mode = true,
        |i| i.proactive_mode = true,
    ];
    for set in each {
        let mut inputs = AsyncInputs::default();
        set(&mut inputs);
        assert!(is_async(inputs));
        inputs.background_tasks_disabled = true;
        assert!(!is_async(inputs));
    }
}

#[tokio::test(start_paused = true)]
async fn a_sync_spawn_returns_the_result_inline_and_sends_no_envelope() {
    // Goal: outside coordinator mode a foreground spawn waits for its worker, gets
    // the result as the tool result, and no notification follows.
    let model = model(|_| now(text("inline answer")));
    let h = harness(
        SessionConfig::new(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    let outcome = h
        .session
        .spawn(&AgentRef::Main, agent_input("quick", "q"), None)
        .await
        .unwrap();
    let SpawnOutcome::Sync {
        status,
        result,
        continuable,
        ..
    } = outcome
    else {
        panic!("expected a sync spawn");
    };
    assert_eq!(
        (status, result.as_str(), continuable),
        (TaskStatus::Completed, "inline answer", true)
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(h.session.take_notifications().is_empty());
}

#[tokio::test(start_paused = true)]
async fn coordinator_mode_refuses_disabled_background_tasks_and_resume_restores_the_mode() {
    // Goal: the switch needs the env value; a coordinator cannot be forced sync; a
    // resumed session keeps the mode it stored whatever the new config says.
    assert!(coordinator_mode_requested(Some("1")));
    assert!(coordinator_mode_requested(Some("true")));
    assert!(!coordinator_mode_requested(Some("0")));
    assert!(!coordinator_mode_requested(None));

    let dir = tempfile::tempdir().unwrap();
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(1)),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    };
    let effects = Effects {
        model: model(|_| now(text("x"))),
        tools: Arc::new(EchoTools::default()),
        vcs: None,
        remote: None,
        shell: None,
    };
    let layout = SessionLayout::new(dir.path());
    let mut bad = coordinator_config(Profile::Hardened);
    bad.background_tasks_disabled = true;
    assert!(matches!(
        Session::create(world.clone(), effects.clone(), bad, layout.clone()),
        Err(SessionError::CoordinatorNeedsBackground)
    ));
    Session::create(
        world.clone(),
        effects.clone(),
        coordinator_config(Profile::Nexo),
        layout.clone(),
    )
    .unwrap();
    let resumed = Session::resume(
        world,
        effects,
        SessionConfig::new(Profile::ClaudeCode),
        layout,
    )
    .unwrap();
    assert!(resumed.config().coordinator_mode);
    assert_eq!(resumed.config().profile, Profile::Nexo);
}

#[derive(Debug)]
struct FakeRemote;

impl Remote for FakeRemote {
    fn run(&self, launch: RemoteLaunch) -> BoxFuture<'static, Result<RemoteReport, RemoteError>> {
        Box::pin(std::future::ready(
            if launch.prompt.contains("unreachable") {
                Err(RemoteError::Unreachable("partitioned".into()))
            } else {
                Ok(RemoteReport {
                    task_id: launch.task_id,
                    succeeded: true,
                    text: format!("remote did: {}", launch.prompt),
                    messages: Vec::new(),
                })
            },
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn remote_isolation_runs_on_the_remote_host_and_reports_through_an_envelope() {
    // Goal: a remote worker's report becomes its envelope; an unreachable host fails it.
    let h = harness_with(
        coordinator_config(Profile::Hardened),
        model(|_| now(text("unused"))),
        Arc::new(EchoTools::default()),
        Some(Arc::new(FakeRemote)),
    );
    for prompt in ["build it", "unreachable host"] {
        let mut input = agent_input("remote job", prompt);
        input.isolation = Some(coord_runtime::agent::IsolationKind::Remote);
        let SpawnOutcome::Async(launch) =
            h.session.spawn(&AgentRef::Main, input, None).await.unwrap()
        else {
            panic!("async");
        };
        assert!(launch.agent_id.starts_with('r'));
    }
    let mut envelopes = wait_for_envelopes(&h.session, 2).await;
    envelopes.sort_by_key(|e| e.status);
    assert_eq!(envelopes[0].result.as_deref(), Some("remote did: build it"));
    assert_eq!(envelopes[1].status, EnvelopeStatus::Failed);
    assert!(envelopes[1].summary.contains("partitioned"));
}

/// A remote host that records each launch and reports its conversation back, as
/// the simulator's host does.
#[derive(Debug, Default)]
struct RecordingRemote {
    launches: Mutex<Vec<RemoteLaunch>>,
}

impl Remote for RecordingRemote {
    fn run(&self, launch: RemoteLaunch) -> BoxFuture<'static, Result<RemoteReport, RemoteError>> {
        self.launches.lock().unwrap().push(launch.clone());
        let mut messages = match launch.messages.is_empty() {
            true => vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text(launch.prompt.clone())],
            }],
            false => launch.messages,
        };
        let text = format!("remote answer to: {}", launch.prompt);
        messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text.clone())],
        });
        Box::pin(std::future::ready(Ok(RemoteReport {
            task_id: launch.task_id,
            succeeded: true,
            text,
            messages,
        })))
    }
}

#[tokio::test(start_paused = true)]
async fn a_message_to_a_finished_remote_worker_resumes_it_on_the_remote_host() {
    // Goal: a finished remote worker is resumed like any stopped worker, from the
    // transcript the coordinator kept of the conversation its report brought back,
    // and it runs on the remote host again: its launch carries that conversation
    // and the message, and its report becomes the new task's envelope. Eviction
    // changes nothing: the transcript is on the coordinator's disk.
    let remote = Arc::new(RecordingRemote::default());
    let mut config = coordinator_config(Profile::Hardened);
    config.eviction_grace = Duration::ZERO;
    let h = harness_with(
        config,
        model(|_| now(text("never called: remote workers use the remote host"))),
        Arc::new(EchoTools::default()),
        Some(remote.clone()),
    );
    let mut input = agent_input("bench", "benchmark the parser");
    input.name = Some("bench".into());
    input.isolation = Some(coord_runtime::agent::IsolationKind::Remote);
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    let first = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(
        first.result.as_deref(),
        Some("remote answer to: benchmark the parser")
    );
    let evicted = h.session.evict_expired();
    assert_eq!(evicted, [TaskId::parse(&first.task_id).unwrap()]);

    let sent = send(
        &h.session,
        json!({"to": "bench", "summary": "utf-16", "message": "run UTF-16 too"}),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.content);
    let second = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert!(second.task_id.starts_with('r'), "{}", second.task_id);
    assert_ne!(second.task_id, first.task_id);
    assert_eq!(
        second.result.as_deref(),
        Some("remote answer to: run UTF-16 too")
    );
    let launches = remote.launches.lock().unwrap();
    assert_eq!(launches.len(), 2);
    assert!(launches[0].messages.is_empty());
    let texts: Vec<String> = launches[1]
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "benchmark the parser",
            "remote answer to: benchmark the parser",
            "run UTF-16 too"
        ]
    );
    assert!(h.journal.events().iter().any(|e| matches!(
        e,
        RuntimeEvent::ProbeReached {
            probe: coord_runtime::probe::Probe::RemoteWorkerResumed
        }
    )));
}

#[tokio::test(start_paused = true)]
async fn task_output_blocks_until_the_task_ends_or_the_timeout() {
    // Goal: TaskOutput without block returns at once; with block it waits for the
    // end, or reports a timeout; each call returns only output not read before.
    let gate = Arc::new(Notify::new());
    let wait = gate.clone();
    let model = model(move |_| {
        let wait = wait.clone();
        Box::pin(async move {
            wait.notified().await;
            Ok(text("final words"))
        })
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    let SpawnOutcome::Async(launch) = h
        .session
        .spawn(&AgentRef::Main, agent_input("slow", "s"), None)
        .await
        .unwrap()
    else {
        panic!("async");
    };
    let id = launch.agent_id.clone();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let early = h
        .session
        .task_output(&id, false, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        (early.status, early.timed_out),
        (TaskStatus::Running, false)
    );
    let timed_out = h
        .session
        .task_output(&id, true, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(timed_out.timed_out);
    gate.notify_waiters();
    let done = h
        .session
        .task_output(&id, true, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.output, "final words\n");
    let again = h
        .session
        .task_output(&id, false, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again.output, "");
    assert!(h
        .session
        .task_output("a00000000", false, Duration::ZERO)
        .await
        .is_err());
    let _ = TaskId::parse(&id).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_cannot_call_file_tools() {
    // Goal: invariant 9: a call outside the coordinator's surface is refused, journaled,
    // and never reaches the tools.
    let tools = Arc::new(EchoTools::default());
    let model = model(|request| {
        now(if request.messages.len() == 1 {
            response(vec![tool_use(
                "toolu_r",
                "Read",
                json!({"file_path": "/etc/passwd"}),
            )])
        } else {
            text("ok")
        })
    });
    let h = harness(
        coordinator_config(Profile::ClaudeCode),
        model,
        tools.clone(),
    );
    let report = h
        .session
        .run_coordinator("read it yourself", vec![])
        .await
        .unwrap();
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    let refusal = report.messages[2]
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::ToolResult {
                content,
                is_error: true,
                ..
            } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(refusal.contains("not available"), "{refusal}");
    assert!(h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::ToolCallRefused { .. })));
}

fn shell_harness(profile: Profile) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(3)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    let effects = Effects {
        model: model(|_| now(text("unused"))),
        tools: Arc::new(EchoTools::default()),
        vcs: None,
        remote: None,
        shell: Some(Arc::new(coord_runtime::world::RealShell)),
    };
    let mut config = SessionConfig::new(profile);
    config.cwd = dir.path().to_owned();
    let session = Session::create(world, effects, config, SessionLayout::new(dir.path())).unwrap();
    Harness {
        session,
        journal,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_background_shell_reports_its_exit_code_and_a_stopped_one_reports_nothing() {
    // Goal: a background command ends with a `Background command … (exit code N)`
    // envelope naming its output file; TaskStop on a running one sends no envelope.
    let h = shell_harness(Profile::ClaudeCode);
    let cwd = h.session.config().cwd.clone();
    let done = h
        .session
        .spawn_shell(&AgentRef::Main, "echo built", "Build it", cwd.clone())
        .unwrap();
    assert!(done.as_str().starts_with('b'));
    let envelope = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(
        envelope.summary,
        "Background command \"Build it\" completed (exit code 0)"
    );
    assert_eq!(envelope.result, None);
    let output_file = envelope.output_file.unwrap();
    assert_eq!(std::fs::read_to_string(output_file).unwrap(), "built\n");

    let long = h
        .session
        .spawn_shell(&AgentRef::Main, "sleep 30", "Wait", cwd)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.session.stop(long.as_str()).unwrap();
    for _ in 0..20 {
        let change = h.session.next_change();
        h.session
            .wait_for_change(change, Duration::from_millis(50))
            .await;
    }
    assert_eq!(h.session.task(&long).unwrap().status(), TaskStatus::Killed);
    assert!(h.session.take_notifications().is_empty());
    assert!(h.journal.events().iter().any(|e| matches!(
        e,
        RuntimeEvent::NotificationSuppressed { task_id } if *task_id == long
    )));
}

fn git(repo: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test]
async fn worktree_workers_keep_changed_worktrees_and_remove_clean_ones() {
    // Goal: with real git, a worker that writes a file in its worktree ends with the
    // worktree kept and reported in its envelope; one that changes nothing has its
    // worktree and branch removed.
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["config", "user.email", "t@example.com"]);
    git(repo.path(), &["config", "user.name", "T"]);
    git(repo.path(), &["config", "commit.gpgsign", "false"]);
    std::fs::write(repo.path().join("README"), "hi\n").unwrap();
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-q", "-m", "init"]);

    let state = tempfile::tempdir().unwrap();
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(5)),
        disk: Arc::new(RealDisk::new()),
        journal: journal.clone(),
    };
    let scratchpad = Arc::new(coord_runtime::ipc::Scratchpad::new(
        &world,
        state.path().join("scratch"),
    ));
    let tools = Arc::new(coord_runtime::tools::StandardTools::new(
        world.clone(),
        Arc::new(coord_runtime::world::RealShell),
        scratchpad,
    ));
    let model = model(|request| {
        let prompt = prompt_of(request);
        now(match (prompt.as_str(), request.messages.len()) {
            ("change it", 1) => response(vec![tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": "CHANGED.md", "content": "new\n"}),
            )]),
            _ => text("finished"),
        })
    });
    let effects = Effects {
        model,
        tools,
        vcs: Some(Arc::new(coord_runtime::world::GitVcs::new())),
        remote: None,
        shell: None,
    };
    let mut config = coordinator_config(Profile::Hardened);
    config.repo = Some(repo.path().to_owned());
    let session =
        Session::create(world, effects, config, SessionLayout::new(state.path())).unwrap();
    for (name, prompt) in [("changer", "change it"), ("looker", "only look")] {
        let mut input = agent_input(name, prompt);
        input.name = Some(name.into());
        input.isolation = Some(coord_runtime::agent::IsolationKind::Worktree);
        session.spawn(&AgentRef::Main, input, None).await.unwrap();
    }
    let envelopes = wait_for_envelopes(&session, 2).await;
    let changed = envelopes
        .iter()
        .find(|e| e.summary.contains("changer"))
        .unwrap();
    let worktree = changed
        .worktree
        .as_ref()
        .expect("a changed worktree is reported");
    assert_eq!(worktree.branch, "worktree-changer");
    assert!(worktree.path.ends_with(".claude/worktrees/changer"));
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&worktree.path).join("CHANGED.md")).unwrap(),
        "new\n"
    );
    let clean = envelopes
        .iter()
        .find(|e| e.summary.contains("looker"))
        .unwrap();
    assert_eq!(clean.worktree, None);
    assert!(!repo.path().join(".claude/worktrees/looker").exists());
    assert!(journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::WorktreeRemoved { .. })));

    let mut bad = agent_input("escape", "x");
    bad.name = Some("..".into());
    bad.isolation = Some(coord_runtime::agent::IsolationKind::Worktree);
    assert!(AgentInput::parse(&json!({"description": "d", "prompt": "p", "name": ".."})).is_err());
    assert!(session.spawn(&AgentRef::Main, bad, None).await.is_err());
}

fn is_fork_request(request: &ModelRequest) -> bool {
    user_texts(request)
        .iter()
        .any(|t| t.contains("<fork-boilerplate>"))
}

#[tokio::test(start_paused = true)]
async fn forks_reuse_the_parent_prefix_byte_for_byte_and_lose_destructive_tools() {
    // Goal: two forks launched from one message send first requests whose prefix is
    // the parent's, byte for byte (no cache-break event); an unsupervised fork's Bash
    // call is refused; each fork notifies once.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        seen.lock().unwrap().push(request.clone());
        if is_fork_request(request) {
            let directive = user_texts(request).last().cloned().unwrap_or_default();
            let last_is_result = matches!(
                request.messages.last().unwrap().content.first(),
                Some(ContentBlock::ToolResult { tool_use_id, .. }) if tool_use_id == "toolu_bash"
            );
            return now(if directive.contains("run the tests") && !last_is_result {
                response(vec![tool_use(
                    "toolu_bash",
                    "Bash",
                    json!({"command": "cargo test"}),
                )])
            } else {
                text("fork finished\nwith details")
            });
        }
        now(match request.messages.len() {
            1 => response(vec![
                tool_use(
                    "toolu_f1",
                    "Agent",
                    json!({"description": "audit", "prompt": "audit auth", "subagent_type": "fork"}),
                ),
                tool_use(
                    "toolu_f2",
                    "Agent",
                    json!({"description": "tests", "prompt": "run the tests", "subagent_type": "fork"}),
                ),
            ]),
            _ => text("merged"),
        })
    });
    let tools = Arc::new(EchoTools::default());
    let h = harness(SessionConfig::new(Profile::Nexo), model, tools.clone());
    let report = h
        .session
        .run_coordinator("main task", vec![])
        .await
        .unwrap();
    assert_eq!(report.notifications_delivered, 2);

    let requests = requests.lock().unwrap();
    let parent_first = requests
        .iter()
        .find(|r| !is_fork_request(r) && r.messages.len() == 1)
        .unwrap();
    let parent_next = requests
        .iter()
        .find(|r| !is_fork_request(r) && r.messages.len() == 3)
        .unwrap();
    let fork_firsts: Vec<&ModelRequest> = requests
        .iter()
        .filter(|r| is_fork_request(r) && r.messages.len() == 3)
        .collect();
    assert_eq!(fork_firsts.len(), 2);
    for fork in &fork_firsts {
        assert_eq!(
            coord_runtime::fork::request_prefix_bytes(fork, 1),
            coord_runtime::fork::request_prefix_bytes(parent_first, 1)
        );
        assert_eq!(
            coord_runtime::fork::request_prefix_bytes(fork, 2),
            coord_runtime::fork::request_prefix_bytes(parent_next, 2)
        );
        assert_eq!(fork.tools, parent_first.tools);
    }
    assert!(!h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::CacheBreak { .. })));
    // The Bash call of the unsupervised fork never reached the tools.
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
    let refused = requests.iter().any(|r| {
        r.messages.iter().flat_map(|m| m.content.iter()).any(|b| matches!(
            b,
            ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "toolu_bash"
        ))
    });
    assert!(refused);
    // nexo summarises a fork by its result's first line.
    let delivered: Vec<Envelope> = report
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(parse_block(text)),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(delivered.len(), 2);
    assert!(delivered.iter().all(|e| e.summary == "fork finished"));
}

#[tokio::test(start_paused = true)]
async fn forks_are_refused_in_coordinator_mode_and_from_inside_a_fork() {
    // Goal: fork and coordinator mode exclude each other; a fork cannot fork.
    let model = model(|request| {
        if is_fork_request(request) {
            return now(if request.messages.len() == 3 {
                response(vec![tool_use(
                    "toolu_ff",
                    "Agent",
                    json!({"description": "again", "prompt": "fork again", "subagent_type": "fork"}),
                )])
            } else {
                text("fork done")
            });
        }
        now(match request.messages.len() {
            1 => response(vec![tool_use(
                "toolu_f",
                "Agent",
                json!({"description": "f", "prompt": "go", "subagent_type": "fork"}),
            )]),
            _ => text("end"),
        })
    });
    let coordinator = harness(
        coordinator_config(Profile::Hardened),
        model.clone(),
        Arc::new(EchoTools::default()),
    );
    let report = coordinator
        .session
        .run_coordinator("coordinate", vec![])
        .await
        .unwrap();
    let refusal = report.messages[2].content.iter().find_map(|b| match b {
        ContentBlock::ToolResult {
            content,
            is_error: true,
            ..
        } => Some(content.clone()),
        _ => None,
    });
    assert!(refusal.unwrap().contains("fork refused"));

    let solo = harness(
        SessionConfig::new(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    solo.session.run_coordinator("solo", vec![]).await.unwrap();
    // One fork ran; its own fork attempt was refused, so exactly one task exists.
    assert_eq!(solo.session.tasks().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_coordinator_prompt_follows_the_profile_and_tells_it_the_worker_tools() {
    // Goal: claude-code replaces the prompt by priority; nexo prepends its persona; in
    // coordinator mode both end with the workers' tools and the scratchpad path.
    use coord_runtime::prompt::{PersonaInputs, PromptInputs, PromptSources};
    let inputs = PromptInputs::default()
        .with_sources(
            PromptSources::default()
                .with_coordinator("You coordinate.")
                .with_agent("Agent prompt.")
                .with_default(["Default prompt."]),
        )
        .with_persona(PersonaInputs::default().with_allowed_tools(["*"]));
    let cc = harness(
        coordinator_config(Profile::ClaudeCode),
        model(|_| now(text("x"))),
        Arc::new(EchoTools::default()),
    );
    let blocks = cc.session.main_system_prompt(&inputs);
    assert_eq!(blocks[0].text, "You coordinate.");
    let context = &blocks.last().unwrap().text;
    assert!(
        context.contains("Bash") && context.contains("scratch"),
        "{context}"
    );

    let nexo = harness(
        coordinator_config(Profile::Nexo),
        model(|_| now(text("x"))),
        Arc::new(EchoTools::default()),
    );
    let blocks = nexo.session.main_system_prompt(&inputs);
    assert!(blocks[0].text.starts_with("# COORDINATOR ROLE"));
    assert!(blocks.iter().any(|b| b.text == "Agent prompt."));
    assert!(blocks.last().unwrap().text.contains("scratch"));
}

fn send(
    session: &Session,
    input: serde_json::Value,
) -> impl std::future::Future<Output = ToolOutput> + '_ {
    session.run_main_tool(ToolCall {
        id: "toolu_send".into(),
        name: "SendMessage".into(),
        input,
    })
}

/// Spawns teammate `name` of team `crew` with `prompt`.
async fn spawn_teammate(h: &Harness, name: &str, prompt: &str) {
    let input = AgentInput::parse(&json!({
        "description": name, "prompt": prompt, "name": name, "team_name": "crew"
    }))
    .unwrap();
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
}

/// Waits until some team member has gone idle.
async fn wait_for_idle(h: &Harness) {
    while !h
        .journal
        .events()
        .iter()
        .any(|e| matches!(e, RuntimeEvent::MemberIdle { .. }))
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_teammate_idles_wakes_on_messages_and_shuts_down_cooperatively() {
    // Goal: a teammate joins the team file, goes idle after its turn, takes a message
    // as its next input, and ends `completed` once it approves a shutdown request;
    // the lead sees the approval in its mailbox.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        seen.lock().unwrap().push(request.clone());
        let last = user_texts(request).last().cloned().unwrap_or_default();
        now(text(&format!("handled: {last}")))
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    spawn_teammate(&h, "helper", "join and wait").await;
    let id = h.session.resolve_name("helper").unwrap();
    wait_for_idle(&h).await;
    assert_eq!(h.session.task(&id).unwrap().status(), TaskStatus::Running);
    let sent = send(
        &h.session,
        json!({"to": "helper", "summary": "task", "message": "check the logs"}),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.content);
    while !requests
        .lock()
        .unwrap()
        .iter()
        .any(|r| user_texts(r).contains(&"check the logs".to_owned()))
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.session
        .request_shutdown("crew", "helper", Some("done".into()))
        .await
        .unwrap();
    let envelope = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(envelope.status, EnvelopeStatus::Completed);
    assert_eq!(envelope.result.as_deref(), Some("handled: check the logs"));
    let inbox = h.session.lead_inbox("crew").await.unwrap();
    assert!(inbox.iter().any(|d| matches!(
        d.team_message,
        Some(coord_runtime::team::TeamMessage::ShutdownResponse { approve: true, .. })
    )));
}

#[tokio::test(start_paused = true)]
async fn a_resumed_teammate_keeps_its_team_and_its_plan_mode() {
    // Goal: continuing a finished teammate by task id brings it back as the same
    // member of the same team in the same permission mode; a plan-mode teammate
    // resumed as a plain worker would run destructive tools without its plan.
    // Method: a plan-mode teammate shuts down; a message to its task id resumes it;
    // read the resumed task's kind and its transcript's header.
    let model = model(|request| {
        let last = user_texts(request).last().cloned().unwrap_or_default();
        now(text(&format!("planned: {last}")))
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    let input = AgentInput::parse(&json!({
        "description": "planner", "prompt": "plan the cleanup", "name": "planner",
        "team_name": "crew", "mode": "plan"
    }))
    .unwrap();
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    let id = h.session.resolve_name("planner").unwrap();
    wait_for_idle(&h).await;
    h.session
        .request_shutdown("crew", "planner", Some("done".into()))
        .await
        .unwrap();
    wait_for_envelopes(&h.session, 1).await;
    let sent = send(
        &h.session,
        json!({"to": id.as_str(), "summary": "more", "message": "plan the tests too"}),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.content);
    let resumed = h
        .journal
        .events()
        .iter()
        .find_map(|event| match event {
            RuntimeEvent::WorkerResumed { resumed_as, .. } => Some(resumed_as.clone()),
            _ => None,
        })
        .expect("the teammate was resumed");
    assert_eq!(
        h.session.task(&resumed).unwrap().kind(),
        coord_runtime::task::TaskKind::InProcessTeammate
    );
    let path = SessionLayout::new(h._dir.path()).transcript(&resumed);
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let transcript = std::fs::read_to_string(path).unwrap();
    let header: serde_json::Value =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    assert_eq!(
        header["teammate"],
        json!({"team": "crew", "member": "planner", "mode": "plan"})
    );
}

/// The `request_id` of the shutdown request among the texts of `message`, if one
/// was handed over in it.
fn shutdown_request_in(message: &Message) -> Option<String> {
    message.content.iter().find_map(|block| match block {
        ContentBlock::Text { text, .. } => serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .filter(|value| value["type"] == "shutdown_request")
            .and_then(|value| value["request_id"].as_str().map(str::to_owned)),
        _ => None,
    })
}

/// A SendMessage `shutdown_response` call to the lead.
fn shutdown_response(id: &str, request_id: &str, approve: bool) -> ContentBlock {
    let mut message =
        json!({"type": "shutdown_response", "request_id": request_id, "approve": approve});
    if !approve {
        message["reason"] = json!("the index is half built");
    }
    tool_use(
        id,
        "SendMessage",
        json!({"to": "team-lead", "message": message}),
    )
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_request_to_a_running_teammate_goes_through_the_handshake() {
    // Goal: SendMessage's shutdown_request to a teammate in the middle of a tool
    // round waits for the round's end and is handed to its model there as the
    // structured request, with its id; an answer naming another id is refused; a
    // rejection reaches the lead's inbox with its reason and leaves the teammate
    // running; an approval reaches it too and ends the teammate with one envelope.
    // Method: a teammate whose Read calls wait for the test; each request of its
    // model is answered from what the request holds.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let linted = Arc::new(Notify::new());
    let lint_done = linted.clone();
    let model = model(move |request| {
        if prompt_of(request) == "lint the index" {
            let lint_done = lint_done.clone();
            return Box::pin(async move {
                lint_done.notified().await;
                Ok(text("no findings"))
            });
        }
        seen.lock().unwrap().push(request.clone());
        let handed_so_far = request
            .messages
            .iter()
            .filter(|m| m.role == Role::User && shutdown_request_in(m).is_some())
            .count();
        let last = request.messages.last().unwrap();
        let turn = request.messages.len();
        now(match shutdown_request_in(last) {
            Some(id) if handed_so_far == 1 => response(vec![
                shutdown_response("toolu_bogus", "shutdown-1@t00000000", true),
                shutdown_response("toolu_reject", &id, false),
            ]),
            Some(id) => response(vec![
                ContentBlock::text("Index built; shutting down."),
                shutdown_response("toolu_approve", &id, true),
            ]),
            None => response(vec![tool_use(
                &format!("toolu_read_{turn}"),
                "Read",
                json!({"file_path": "src/index.rs"}),
            )]),
        })
    });
    let tools = Arc::new(GatedTools::default());
    let h = harness(coordinator_config(Profile::Hardened), model, tools.clone());
    spawn_teammate(&h, "indexer", "build the index").await;
    let mut plain = agent_input("linter", "lint the index");
    plain.name = Some("linter".into());
    h.session.spawn(&AgentRef::Main, plain, None).await.unwrap();
    let id = h.session.resolve_name("indexer").unwrap();

    // Asked mid-round: queued as a request, not handed over yet.
    tools.entered.notified().await;
    let asked = send(
        &h.session,
        json!({"to": "indexer", "message": {"type": "shutdown_request", "reason": "over budget"}}),
    )
    .await;
    assert!(!asked.is_error, "{}", asked.content);
    assert!(asked.content.contains("queued"), "{}", asked.content);
    let refused = send(
        &h.session,
        json!({"to": "linter", "message": {"type": "shutdown_request"}}),
    )
    .await;
    assert!(
        refused.is_error && refused.content.contains("is in no team"),
        "{}",
        refused.content
    );
    linted.notify_one();
    assert!(requests
        .lock()
        .unwrap()
        .iter()
        .all(|r| r.messages.iter().all(|m| shutdown_request_in(m).is_none())));
    tools.release.notify_one();

    // Handed over after the tool result; the bogus answer is refused, the rejection
    // is written, and the teammate goes on to its next round.
    tools.entered.notified().await;
    let after_reject = requests.lock().unwrap().last().unwrap().clone();
    let results = &after_reject.messages.last().unwrap().content;
    let is_error = |wanted: &str| {
        results.iter().find_map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                content,
                ..
            } if tool_use_id == wanted => Some((*is_error, content.clone())),
            _ => None,
        })
    };
    let (bogus_error, bogus) = is_error("toolu_bogus").unwrap();
    assert!(
        bogus_error && bogus.contains("no shutdown request"),
        "{bogus}"
    );
    assert_eq!(is_error("toolu_reject").map(|(e, _)| e), Some(false));
    let handed = after_reject.messages[after_reject.messages.len() - 3].clone();
    let first_request = shutdown_request_in(&handed).expect("the request was handed over");
    assert!(matches!(handed.content[0], ContentBlock::ToolResult { .. }));
    assert_eq!(h.session.task(&id).unwrap().status(), TaskStatus::Running);
    let inbox = h.session.lead_inbox("crew").await.unwrap();
    assert!(inbox.iter().any(|d| matches!(
        &d.team_message,
        Some(coord_runtime::team::TeamMessage::ShutdownResponse { request_id, approve: false, reason: Some(reason) })
            if request_id.to_string() == first_request && reason == "the index is half built"
    )));

    // Asked again: this time it approves, and ends once.
    let asked = send(
        &h.session,
        json!({"to": "indexer", "message": {"type": "shutdown_request"}}),
    )
    .await;
    assert!(!asked.is_error, "{}", asked.content);
    tools.release.notify_one();
    let mut envelopes = wait_for_envelopes(&h.session, 2).await;
    envelopes.retain(|e| e.task_id == id.as_str());
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].status, EnvelopeStatus::Completed);
    assert_eq!(
        envelopes[0].result.as_deref(),
        Some("Index built; shutting down.")
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(h.session.take_notifications().is_empty());
    let inbox = h.session.lead_inbox("crew").await.unwrap();
    assert!(inbox.iter().any(|d| matches!(
        d.team_message,
        Some(coord_runtime::team::TeamMessage::ShutdownResponse { approve: true, .. })
    )));
    let probes: Vec<coord_runtime::probe::Probe> = h
        .journal
        .events()
        .iter()
        .filter_map(|e| match e {
            RuntimeEvent::ProbeReached { probe } => Some(*probe),
            _ => None,
        })
        .collect();
    for probe in [
        coord_runtime::probe::Probe::ShutdownRequestQueued,
        coord_runtime::probe::Probe::ShutdownRequestRefused,
        coord_runtime::probe::Probe::ShutdownResponseUnmatched,
    ] {
        assert!(probes.contains(&probe), "{probe} not reached");
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_teammate_agrees_to_a_shutdown_request_sent_with_send_message() {
    // Goal: a teammate with no turn in progress has nothing to finish: a
    // shutdown_request sent to it with SendMessage is approved at once, in the
    // lead's inbox, and it ends completed, its model never asked.
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = model(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        now(text("watching"))
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    spawn_teammate(&h, "watcher", "watch the build").await;
    wait_for_idle(&h).await;
    let asked = send(
        &h.session,
        json!({"to": "watcher", "message": {"type": "shutdown_request"}}),
    )
    .await;
    assert!(!asked.is_error, "{}", asked.content);
    let envelope = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(envelope.status, EnvelopeStatus::Completed);
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    let inbox = h.session.lead_inbox("crew").await.unwrap();
    assert!(inbox.iter().any(|d| matches!(
        d.team_message,
        Some(coord_runtime::team::TeamMessage::ShutdownResponse { approve: true, .. })
    )));
    // The team file noted the request, so the lead's poll took it off the team.
    let team = std::fs::read_to_string(h._dir.path().join("teams/crew/team.json")).unwrap();
    assert!(!team.contains("\"watcher\""), "{team}");
}

#[tokio::test(start_paused = true)]
async fn a_redirect_abandons_the_current_turn_but_keeps_the_teammate() {
    // Goal: the current-work abort drops the turn in flight and gives the teammate new
    // input; the teammate is still running afterwards (unlike the main abort).
    let model = model(|request| {
        let last = user_texts(request).last().cloned().unwrap_or_default();
        if last == "slow job" {
            return Box::pin(std::future::pending());
        }
        now(text(&format!("did: {last}")))
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    spawn_teammate(&h, "mate", "slow job").await;
    let id = h.session.resolve_name("mate").unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    h.session.redirect(&id, "quick job instead").unwrap();
    wait_for_idle(&h).await;
    assert_eq!(h.session.task(&id).unwrap().status(), TaskStatus::Running);
    let output = h
        .session
        .task_output(id.as_str(), false, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(output.output, "did: quick job instead\n");
    h.session.stop(id.as_str()).unwrap();
    let envelope = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(envelope.status, EnvelopeStatus::Killed);
}

#[tokio::test(start_paused = true)]
async fn a_teammates_destructive_call_waits_for_the_leads_permission() {
    // Goal: in the default permission mode a teammate's Write is forwarded to the lead's
    // mailbox; the lead's answer (through the teammate's mailbox) decides it.
    let model = model(|request| {
        now(match request.messages.len() {
            1 => response(vec![tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": "x", "content": "y"}),
            )]),
            _ => text("finished"),
        })
    });
    let tools = Arc::new(EchoTools::default());
    for approve in [true, false] {
        let h = harness(
            coordinator_config(Profile::Hardened),
            model.clone(),
            tools.clone(),
        );
        let before = tools.calls.load(Ordering::SeqCst);
        spawn_teammate(&h, "writer", "write x").await;
        let request_id = loop {
            let inbox = h.session.lead_inbox("crew").await.unwrap();
            if let Some(id) = inbox.iter().find_map(|d| match &d.team_message {
                Some(coord_runtime::team::TeamMessage::PermissionRequest {
                    request_id,
                    tool,
                    ..
                }) => {
                    assert_eq!(tool, "Write");
                    Some(request_id.clone())
                }
                _ => None,
            }) {
                break id;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(
            tools.calls.load(Ordering::SeqCst),
            before,
            "nothing ran before the answer"
        );
        h.session
            .answer_permission(
                "crew",
                "writer",
                request_id,
                approve,
                (!approve).then(|| "not now".into()),
            )
            .await
            .unwrap();
        wait_for_idle(&h).await;
        let ran = tools.calls.load(Ordering::SeqCst) - before;
        assert_eq!(ran, usize::from(approve));
        assert!(h
            .journal
            .events()
            .iter()
            .any(|e| matches!(e, RuntimeEvent::PermissionForwarded { .. })));
    }
}

#[tokio::test(start_paused = true)]
async fn a_teammates_background_shell_waits_for_the_leads_permission() {
    // Goal: a Bash call started in the background is as destructive as one waited
    // for: a teammate in the default mode asks its lead first, and a denial starts
    // no shell.
    let model = model(|request| {
        now(match request.messages.len() {
            1 => response(vec![tool_use(
                "toolu_b",
                "Bash",
                json!({"command": "rm -rf target", "run_in_background": true}),
            )]),
            _ => text("finished"),
        })
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    spawn_teammate(&h, "cleaner", "clean the cache").await;
    let mut request_id = None;
    for _ in 0..1000 {
        let inbox = h.session.lead_inbox("crew").await.unwrap();
        request_id = inbox.iter().find_map(|d| match &d.team_message {
            Some(coord_runtime::team::TeamMessage::PermissionRequest {
                request_id, tool, ..
            }) => {
                assert_eq!(tool, "Bash");
                Some(request_id.clone())
            }
            _ => None,
        });
        if request_id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let request_id = request_id.expect("the background Bash call asks the lead first");
    h.session
        .answer_permission("crew", "cleaner", request_id, false, Some("not now".into()))
        .await
        .unwrap();
    wait_for_idle(&h).await;
    let shells = h
        .journal
        .events()
        .iter()
        .filter(|e| {
            matches!(e, RuntimeEvent::TaskSpawned { task_id, .. } if task_id.as_str().starts_with('b'))
        })
        .count();
    assert_eq!(shells, 0, "a denied background shell never starts");
}

#[tokio::test(start_paused = true)]
async fn send_message_to_worker_continues_a_finished_worker_of_its_binding() {
    // Goal: nexo's SendMessageToWorker: role first, then size, then the registry; a
    // finished worker of this binding is continued, a running one refused, an unknown
    // one answers exactly like a missing worker.
    let gate = Arc::new(Notify::new());
    let wait = gate.clone();
    let model = model(move |request| {
        let last = user_texts(request).last().cloned().unwrap_or_default();
        if last == "slow" {
            let wait = wait.clone();
            return Box::pin(async move {
                wait.notified().await;
                Ok(text("slow done"))
            });
        }
        now(text(&format!("re: {last}")))
    });
    let mut config = coordinator_config(Profile::Nexo);
    config.binding = Some(coord_runtime::route::BindingKey::new("slack", None));
    let h = harness(config, model, Arc::new(EchoTools::default()));
    let mut ids = Vec::new();
    for prompt in ["fast", "slow"] {
        let SpawnOutcome::Async(launch) = h
            .session
            .spawn(&AgentRef::Main, agent_input(prompt, prompt), None)
            .await
            .unwrap()
        else {
            panic!("async");
        };
        ids.push(launch.agent_id);
    }
    wait_for_envelopes(&h.session, 1).await;
    let call = |worker: &str, message: &str| ToolCall {
        id: "toolu_smw".into(),
        name: "SendMessageToWorker".into(),
        input: json!({"worker_id": worker, "message": message}),
    };
    let continued = h.session.run_main_tool(call(&ids[0], "and then?")).await;
    assert!(!continued.is_error, "{}", continued.content);
    let continued: serde_json::Value = serde_json::from_str(&continued.content).unwrap();
    assert_eq!(continued["messages_count"], 1);
    assert_eq!(continued["prior_status"], "completed");
    let running = h.session.run_main_tool(call(&ids[1], "hurry")).await;
    assert!(
        running.is_error && running.content.contains("worker_still_running"),
        "{}",
        running.content
    );
    let unknown = h.session.run_main_tool(call("a00000000", "hi")).await;
    assert!(
        unknown.is_error && unknown.content.contains("unknown_worker"),
        "{}",
        unknown.content
    );
    let big = h
        .session
        .run_main_tool(call(&ids[0], &"x".repeat(32 * 1024 + 1)))
        .await;
    assert!(
        big.is_error && big.content.contains("message_too_large"),
        "{}",
        big.content
    );
    let second = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(second.result.as_deref(), Some("re: and then?"));
    gate.notify_waiters();
}

#[tokio::test(start_paused = true)]
async fn send_message_validates_its_address_before_delivering() {
    // Goal: the §5 rules reach the model as tool errors: no `@`, a summary for plain
    // text, no broadcast without a team, no transport for uds/bridge, unknown names.
    let h = harness(
        coordinator_config(Profile::Hardened),
        model(|_| now(text("x"))),
        Arc::new(EchoTools::default()),
    );
    let cases = [
        (json!({"to": "a@b", "summary": "s", "message": "m"}), "@"),
        (json!({"to": "someone", "message": "m"}), "summary"),
        (json!({"to": "*", "summary": "s", "message": "m"}), "team"),
        (
            json!({"to": "uds:/tmp/sock", "summary": "s", "message": "m"}),
            "transport",
        ),
        (
            json!({"to": "bridge:s1", "summary": "s", "message": "m"}),
            "consent",
        ),
        (
            json!({"to": "nobody", "summary": "s", "message": "m"}),
            "nobody",
        ),
        (
            json!({"to": "x", "message": "m", "colour": "red"}),
            "colour",
        ),
    ];
    for (input, expected) in cases {
        let output = send(&h.session, input.clone()).await;
        assert!(output.is_error, "{input}");
        assert!(
            output.content.contains(expected),
            "{input}: {}",
            output.content
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_evicted_worker_is_resumed_from_its_transcript_on_disk() {
    // Goal: once a finished worker is evicted from memory, a message to it still
    // resumes it, from the transcript on disk.
    let model = model(|request| {
        let last = user_texts(request).last().cloned().unwrap_or_default();
        now(text(&format!("re: {last}")))
    });
    let mut config = coordinator_config(Profile::ClaudeCode);
    config.eviction_grace = Duration::ZERO;
    let h = harness(config, model, Arc::new(EchoTools::default()));
    let mut input = agent_input("old", "first");
    input.name = Some("old".into());
    h.session.spawn(&AgentRef::Main, input, None).await.unwrap();
    let first = wait_for_envelopes(&h.session, 1).await.remove(0);
    let evicted = h.session.evict_expired();
    assert_eq!(evicted.len(), 1);
    assert!(h.session.task(&evicted[0]).is_none());
    let sent = send(
        &h.session,
        json!({"to": first.task_id, "summary": "s", "message": "again"}),
    )
    .await;
    assert!(sent.content.contains("resumed as"), "{}", sent.content);
    let second = wait_for_envelopes(&h.session, 1).await.remove(0);
    assert_eq!(second.result.as_deref(), Some("re: again"));
}

#[tokio::test(start_paused = true)]
async fn only_nexo_summarises_a_fork_by_its_first_line() {
    // Goal: the fork-summary row of docs/profiles.md under all three profiles.
    for (profile, expected) in [
        (Profile::Nexo, "fork line one"),
        (Profile::ClaudeCode, "Agent \"audit\" completed"),
        (Profile::Hardened, "Agent \"audit\" completed"),
    ] {
        let model = model(|request| {
            now(if is_fork_request(request) {
                text("fork line one\nfork line two")
            } else if request.messages.len() == 1 {
                response(vec![tool_use(
                    "toolu_f",
                    "Agent",
                    json!({"description": "audit", "prompt": "audit it", "subagent_type": "fork"}),
                )])
            } else {
                text("done")
            })
        });
        let h = harness(
            SessionConfig::new(profile),
            model,
            Arc::new(EchoTools::default()),
        );
        let report = h.session.run_coordinator("main", vec![]).await.unwrap();
        let summaries: Vec<String> = report
            .messages
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(parse_block(text)),
                _ => None,
            })
            .flatten()
            .map(|e| e.summary)
            .collect();
        assert_eq!(summaries, [expected], "{profile}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_agent_registry_has_the_builtin_types_and_one_shot_results_have_no_trailer() {
    // Goal: the six built-in definitions exist; a one-shot type's inline result has no
    // agent id / continuation trailer, a continuable one has it; unknown types are
    // refused with the list of known ones.
    let registry = coord_runtime::agent::AgentRegistry::default();
    assert_eq!(
        registry.names(),
        [
            "general-purpose",
            "Explore",
            "Plan",
            "verification",
            "worker",
            "fork"
        ]
    );
    assert!(registry.get("Explore").unwrap().one_shot);
    assert!(!registry.get("general-purpose").unwrap().one_shot);
    assert!(!registry
        .get("Explore")
        .unwrap()
        .surface(Profile::Hardened)
        .allows(coord_runtime::tools::ToolName::Write));

    let model = model(|_| now(text("answer")));
    let h = harness(
        SessionConfig::new(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    let call = |agent_type: &str| ToolCall {
        id: "toolu_a".into(),
        name: "Agent".into(),
        input: json!({"description": "d", "prompt": "p", "subagent_type": agent_type}),
    };
    assert_eq!(
        h.session.run_main_tool(call("Explore")).await.content,
        "answer"
    );
    let continuable = h
        .session
        .run_main_tool(call("general-purpose"))
        .await
        .content;
    assert!(
        continuable.starts_with("answer\n\nagentId: a"),
        "{continuable}"
    );
    let unknown = h.session.run_main_tool(call("Wizard")).await;
    assert!(
        unknown.is_error && unknown.content.contains("general-purpose, Explore"),
        "{}",
        unknown.content
    );
}

#[tokio::test(start_paused = true)]
async fn a_broadcast_reaches_every_other_team_member_through_its_mailbox() {
    // Goal: `to: "*"` from the lead writes to every member's mailbox (not the
    // sender's); idle teammates wake on it.
    let requests = Arc::new(Mutex::new(Vec::<ModelRequest>::new()));
    let seen = requests.clone();
    let model = model(move |request| {
        seen.lock().unwrap().push(request.clone());
        now(text("ack"))
    });
    let h = harness(
        coordinator_config(Profile::Hardened),
        model,
        Arc::new(EchoTools::default()),
    );
    for name in ["ann", "bob"] {
        spawn_teammate(&h, name, &format!("{name} joins")).await;
    }
    let sent = send(
        &h.session,
        json!({"to": "*", "summary": "all", "message": "standup now"}),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.content);
    assert!(
        sent.content.contains("ann") && sent.content.contains("bob"),
        "{}",
        sent.content
    );
    let heard = |name: &str| {
        requests.lock().unwrap().iter().any(|r| {
            prompt_of(r) == format!("{name} joins")
                && user_texts(r).contains(&"standup now".to_owned())
        })
    };
    while !(heard("ann") && heard("bob")) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
