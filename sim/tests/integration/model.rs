//! Simulated models: scripts with reactive triggers drive the real runtime, latencies
//! come from the seeded stream, and programmatic policies can fail or hang.

use std::sync::Arc;
use std::time::Duration;

use coord_runtime::envelope::{parse_block, EnvelopeStatus};
use coord_runtime::ipc::SessionLayout;
use coord_runtime::profile::Profile;
use coord_runtime::session::{AgentRef, Effects, Session, SessionConfig, SpawnOutcome};
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, Clock, ContentBlock, MemoryJournal, ModelError, ModelRequest,
    RealDisk, Role, SystemClock, ToolCall, ToolContext, ToolOutput, Tools,
};
use coord_runtime::World;
use coord_sim::model::{
    wildcard_match, AgentScript, ConversationView, Latency, ModelPolicy, PolicyReply, ScriptPolicy,
    ScriptedToolCall, ScriptedTurn, SimulatedModel, Trigger, WAITING_TEXT,
};
use coord_sim::world::Streams;
use rand_chacha::rand_core::RngCore;
use serde_json::json;

#[derive(Debug)]
struct NoTools;

impl Tools for NoTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        Box::pin(std::future::ready(ToolOutput {
            content: format!("ok {}", call.name),
            is_error: false,
        }))
    }
}

fn session_with(policy: Arc<dyn ModelPolicy>, seed: u64) -> (Session, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let streams = Streams::new(seed);
    let world = World {
        clock: clock.clone(),
        entropy: Arc::new(ChaChaEntropy::from_seed(streams.seed_for(Streams::ENTROPY))),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    };
    let model = SimulatedModel::new(policy, clock, streams.rng(Streams::LATENCY));
    let effects = Effects {
        model: Arc::new(model),
        tools: Arc::new(NoTools),
        vcs: None,
        remote: None,
        shell: None,
    };
    let mut config = SessionConfig::new(Profile::Hardened);
    config.coordinator_mode = true;
    config.idle_poll = Duration::from_millis(100);
    let session = Session::create(world, effects, config, SessionLayout::new(dir.path())).unwrap();
    (session, dir)
}

fn spawn_call(description: &str) -> ScriptedToolCall {
    ScriptedToolCall::new(
        "Agent",
        json!({"description": description, "prompt": format!("do {description}")}),
    )
}

fn worker(description: &str, latency_ms: u64) -> AgentScript {
    AgentScript {
        prompt: format!("do {description}"),
        recorded_prompt: None,
        turns: vec![ScriptedTurn {
            text: Some(format!("{description} result")),
            latency: Latency::Fixed { ms: latency_ms },
            ..ScriptedTurn::default()
        }]
        .into(),
        count: None,
    }
}

fn four_phase_policy() -> ScriptPolicy {
    let coordinator = AgentScript {
        prompt: "coordinate".into(),
        recorded_prompt: None,
        turns: vec![
            ScriptedTurn {
                tool_calls: vec![
                    spawn_call("research-1"),
                    spawn_call("research-2"),
                    spawn_call("impl-1"),
                ],
                latency: Latency::Fixed { ms: 100 },
                ..ScriptedTurn::default()
            },
            ScriptedTurn {
                text: Some("synthesis".into()),
                tool_calls: vec![spawn_call("verify")],
                latency: Latency::Fixed { ms: 100 },
                when: Some(Trigger::NotificationsFrom {
                    pattern: "research-*".into(),
                }),
                ..ScriptedTurn::default()
            },
            ScriptedTurn {
                text: Some("all done".into()),
                when: Some(Trigger::NotificationsAtLeast { count: 4 }),
                ..ScriptedTurn::default()
            },
        ]
        .into(),
        count: None,
    };
    ScriptPolicy::new(
        [
            coordinator,
            worker("research-1", 5_000),
            worker("research-2", 20_000),
            worker("impl-1", 1_000),
            worker("verify", 2_000),
        ],
        "nothing scripted",
    )
}

#[tokio::test(start_paused = true)]
async fn a_reactive_turn_fires_only_once_its_notifications_have_arrived() {
    // Goal: the synthesis turn waits for every research-* worker, whatever else
    // arrives first. Method: run the real coordinator loop on paused tokio time with
    // research-2 slowest, then read the conversation.
    let (session, _dir) = session_with(Arc::new(four_phase_policy()), 1);
    let report = session.run_coordinator("coordinate", vec![]).await.unwrap();
    assert_eq!(report.final_text, "all done");
    assert_eq!(report.notifications_delivered, 4);

    // Walk the conversation: which envelopes had arrived when the synthesis fired?
    let mut delivered = Vec::new();
    let mut synthesis_saw = None;
    for message in &report.messages {
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text { text, .. }) => {
                    delivered.extend(parse_block(text).into_iter().map(|e| e.summary))
                }
                (Role::Assistant, ContentBlock::Text { text, .. }) if text == "synthesis" => {
                    synthesis_saw = Some(delivered.clone())
                }
                _ => {}
            }
        }
    }
    let synthesis_saw = synthesis_saw.expect("the synthesis turn fired");
    assert!(synthesis_saw.contains(&"Agent \"research-1\" completed".to_owned()));
    assert!(synthesis_saw.contains(&"Agent \"research-2\" completed".to_owned()));
    // impl-1 (1 s) arrived first but could not fire the turn on its own: the
    // coordinator answered "waiting" in between.
    assert!(report
        .messages
        .iter()
        .any(|m| m.role == Role::Assistant && m.content == vec![ContentBlock::text(WAITING_TEXT)]));
}

#[tokio::test(start_paused = true)]
async fn latencies_are_drawn_from_the_seeded_stream() {
    // Goal: uniform latencies are a function of the seed. Method: time one worker's
    // virtual run under two seeds, twice each.
    let policy = || {
        Arc::new(ScriptPolicy::new(
            [AgentScript {
                prompt: "work".into(),
                recorded_prompt: None,
                turns: vec![ScriptedTurn {
                    text: Some("done".into()),
                    latency: Latency::Uniform {
                        min_ms: 1_000,
                        max_ms: 60_000,
                    },
                    ..ScriptedTurn::default()
                }]
                .into(),
                count: None,
            }],
            "x",
        ))
    };
    let mut durations = Vec::new();
    for seed in [1, 1, 2, 2] {
        let (session, _dir) = session_with(policy(), seed);
        let input =
            coord_runtime::agent::AgentInput::parse(&json!({"description": "w", "prompt": "work"}))
                .unwrap();
        let SpawnOutcome::Async(_) = session.spawn(&AgentRef::Main, input, None).await.unwrap()
        else {
            panic!("async");
        };
        let started = tokio::time::Instant::now();
        loop {
            let change = session.next_change();
            if !session.take_notifications().is_empty() {
                break;
            }
            session
                .wait_for_change(change, Duration::from_millis(100))
                .await;
        }
        durations.push(started.elapsed().as_millis() / 100);
    }
    assert_eq!(durations[0], durations[1]);
    assert_eq!(durations[2], durations[3]);
    assert_ne!(durations[0], durations[2]);
    assert!(
        durations.iter().all(|d| (10..=600).contains(d)),
        "{durations:?}"
    );
}

/// A policy that fails its first call with a 429 and hangs on any other.
#[derive(Debug)]
struct FlakyPolicy;

impl ModelPolicy for FlakyPolicy {
    fn reply(
        &self,
        _request: &ModelRequest,
        view: &ConversationView,
        _rng: &mut dyn RngCore,
    ) -> PolicyReply {
        if view.prompt == "fail" {
            PolicyReply::Fail {
                error: ModelError::RateLimited {
                    retry_after: Some(Duration::from_secs(3)),
                },
                latency: Duration::from_millis(200),
            }
        } else {
            PolicyReply::Hang
        }
    }
}

#[tokio::test(start_paused = true)]
async fn programmatic_policies_can_fail_and_hang() {
    // Goal: the Rust policy API reaches the runtime: a failure fails the worker, a
    // hang is ended by the spawn deadline.
    let (session, _dir) = session_with(Arc::new(FlakyPolicy), 3);
    for prompt in ["fail", "hang"] {
        let input = coord_runtime::agent::AgentInput::parse(
            &json!({"description": prompt, "prompt": prompt}),
        )
        .unwrap();
        session.spawn(&AgentRef::Main, input, None).await.unwrap();
    }
    let mut envelopes = Vec::new();
    loop {
        let change = session.next_change();
        envelopes.extend(session.take_notifications());
        if envelopes.len() >= 2 {
            break;
        }
        session
            .wait_for_change(change, Duration::from_secs(1))
            .await;
    }
    envelopes.sort_by_key(|e| e.status);
    assert_eq!(envelopes[0].status, EnvelopeStatus::Failed);
    assert!(
        envelopes[0].summary.contains("rate limited"),
        "{}",
        envelopes[0].summary
    );
    assert_eq!(envelopes[1].status, EnvelopeStatus::Timeout);
}

#[test]
fn wildcards_match_descriptions() {
    // Goal: the trigger pattern language: `*` matches any run, everything else literally.
    assert!(wildcard_match("research-*", "research-1"));
    assert!(wildcard_match("research-*", "research-"));
    assert!(!wildcard_match("research-*", "impl-1"));
    assert!(wildcard_match("*-1", "impl-1"));
    assert!(wildcard_match("a*b*c", "a-x-b-y-c"));
    assert!(!wildcard_match("a*b*c", "a-c-b"));
    assert!(wildcard_match("exact", "exact"));
    assert!(!wildcard_match("exact", "exactly"));
}

#[test]
fn scripts_are_written_in_toml_and_typos_are_refused() {
    // Goal: scripts have the serde shape the scenario format embeds; unknown keys fail.
    let script: AgentScript = toml::from_str(
        r#"
        prompt = "coordinate"
        [[turns]]
        tool_calls = [{ name = "Agent", input = { description = "research-1", prompt = "go" } }]
        latency = { kind = "uniform", min_ms = 100, max_ms = 900 }
        [[turns]]
        text = "synthesis"
        when = { kind = "notifications_from", pattern = "research-*" }
        "#,
    )
    .unwrap();
    assert_eq!(script.turns.len(), 2);
    assert_eq!(
        script.turns[1].when,
        Some(Trigger::NotificationsFrom {
            pattern: "research-*".into()
        })
    );
    let typo = toml::from_str::<AgentScript>("prompt = \"x\"\n[[turns]]\ntxt = \"oops\"\n");
    assert!(typo.unwrap_err().to_string().contains("txt"));
}
