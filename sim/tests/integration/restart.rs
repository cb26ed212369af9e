//! The coordinator host's crash and restart: the real runtime's `Session` on a
//! `MemDisk` that keeps only what was synced, crashed mid-plan and resumed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::envelope::{parse_block, EnvelopeStatus};
use coord_runtime::ipc::{Scratchpad, SessionLayout};
use coord_runtime::profile::Profile;
use coord_runtime::session::{
    coordinator_log_path, CoordinatorReport, Effects, Session, SessionConfig, SessionError,
    HOST_RESTARTED,
};
use coord_runtime::task::TaskStatus;
use coord_runtime::tools::StandardTools;
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, Clock, ContentBlock, Disk, MemoryJournal, Model, ModelError,
    ModelRequest, ModelResponse, Role, Shell, StopReason, Usage,
};
use coord_runtime::{RuntimeEvent, World};
use coord_sim::run::SimShell;
use coord_sim::world::MemDisk;
use coord_sim::world::VirtualClock;
use rand_chacha::rand_core::SeedableRng;

const PROMPT: &str = "Run the two jobs and report.";
const FAST: &str = "fast job";
const SLOW: &str = "slow job";
const FINAL_TEXT: &str = "both jobs reported";
const SESSION_ROOT: &str = "/session";

/// A model that plays the coordinator and both workers. The coordinator spawns the
/// two jobs, waits while fewer than two envelopes have arrived, then ends. The fast
/// worker answers after a second, the slow one after ten minutes.
#[derive(Debug)]
struct PlanModel {
    clock: Arc<dyn Clock>,
    /// How long the coordinator's call after the spawns takes.
    second_call_latency: Duration,
}

fn response(content: Vec<ContentBlock>, stop_reason: StopReason) -> ModelResponse {
    ModelResponse {
        id: "msg_test".into(),
        model: "test".into(),
        role: Role::Assistant,
        content,
        stop_reason,
        usage: Usage::default(),
    }
}

fn agent_call(id: &str, description: &str) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.into(),
        name: "Agent".into(),
        input: serde_json::json!({ "description": description, "prompt": description }).into(),
    }
}

/// Every envelope in the user messages of `messages`.
fn envelopes_in(
    messages: &[coord_runtime::world::Message],
) -> Vec<coord_runtime::envelope::Envelope> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter())
        .flat_map(|block| match block {
            ContentBlock::Text { text, .. } => parse_block(text),
            _ => Vec::new(),
        })
        .collect()
}

impl Model for PlanModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let first = request.messages[0].content.iter().find_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.clone()),
            _ => None,
        });
        let assistant_turns = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let (latency, reply) = match first.as_deref() {
            Some(PROMPT) if assistant_turns == 0 => (
                Duration::from_millis(100),
                response(
                    vec![agent_call("toolu_1", FAST), agent_call("toolu_2", SLOW)],
                    StopReason::ToolUse,
                ),
            ),
            Some(PROMPT) => {
                let done = envelopes_in(&request.messages).len() >= 2;
                let text = if done { FINAL_TEXT } else { "waiting" };
                let latency = match assistant_turns {
                    1 => self.second_call_latency,
                    _ => Duration::from_millis(100),
                };
                (
                    latency,
                    response(vec![ContentBlock::text(text)], StopReason::EndTurn),
                )
            }
            Some(FAST) => (
                Duration::from_secs(1),
                response(vec![ContentBlock::text("fast result")], StopReason::EndTurn),
            ),
            _ => (
                Duration::from_secs(600),
                response(vec![ContentBlock::text("slow result")], StopReason::EndTurn),
            ),
        };
        let sleep = self.clock.sleep(latency);
        Box::pin(async move {
            sleep.await;
            Ok(reply)
        })
    }
}

/// One boot of the host: a world over `disk` whose clock starts at `booted_at`.
fn boot(
    disk: &MemDisk,
    booted_at: Duration,
    boot: u64,
    second_call_latency: Duration,
) -> (World, Effects, Arc<MemoryJournal>) {
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new(booted_at));
    let journal = Arc::new(MemoryJournal::new());
    let world = World {
        clock: clock.clone(),
        entropy: Arc::new(ChaChaEntropy::from_seed(boot)),
        disk: Arc::new(disk.clone()),
        journal: journal.clone(),
    };
    let layout = SessionLayout::new(SESSION_ROOT);
    let shell: Arc<dyn Shell> = Arc::new(SimShell::new(None, clock.clone()));
    let effects = Effects {
        model: Arc::new(PlanModel {
            clock,
            second_call_latency,
        }),
        tools: Arc::new(StandardTools::new(
            world.clone(),
            shell.clone(),
            Arc::new(Scratchpad::new(&world, layout.scratch_dir())),
        )),
        vcs: None,
        remote: None,
        shell: Some(shell),
    };
    (world, effects, journal)
}

fn config() -> SessionConfig {
    let mut config = SessionConfig::new(Profile::Hardened);
    config.coordinator_mode = true;
    config.idle_poll = Duration::from_millis(200);
    config.spawn_deadline = Duration::from_secs(3_600);
    config.cwd = PathBuf::from("/work");
    config
}

fn executor() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// What the second boot saw.
struct Restarted {
    report: Result<CoordinatorReport, SessionError>,
    session: Session,
    journal: Arc<MemoryJournal>,
}

/// Runs the plan until the host loses power at `crash_at`, crashes the disk, then
/// resumes the session and its coordinator on a second boot.
fn crash_and_resume(crash_at: Duration, second_call_latency: Duration) -> Restarted {
    let disk = MemDisk::default();
    disk.create_dir_all(std::path::Path::new(SESSION_ROOT))
        .unwrap();
    let first = executor();
    first.block_on(async {
        let (world, effects, _) = boot(&disk, Duration::ZERO, 1, second_call_latency);
        let session =
            Session::create(world, effects, config(), SessionLayout::new(SESSION_ROOT)).unwrap();
        let run = session.run_coordinator(PROMPT, Vec::new());
        tokio::select! {
            biased;
            result = run => panic!("the plan ended before the crash: {result:?}"),
            () = tokio::time::sleep(crash_at) => {}
        }
    });
    // The process dies with every task; the disk keeps only what was synced.
    drop(first);
    disk.crash(&mut rand_chacha::ChaCha8Rng::seed_from_u64(3));
    let second = executor();
    second.block_on(async {
        let (world, effects, journal) = boot(&disk, crash_at, 2, second_call_latency);
        let session =
            Session::resume(world, effects, config(), SessionLayout::new(SESSION_ROOT)).unwrap();
        let report = session.resume_coordinator(PROMPT, Vec::new()).await;
        Restarted {
            report,
            session,
            journal,
        }
    })
}

fn restored(journal: &MemoryJournal) -> (Vec<String>, Vec<String>) {
    journal
        .events()
        .into_iter()
        .find_map(|event| match event {
            RuntimeEvent::SessionRestored {
                died, renotified, ..
            } => Some((
                died.iter().map(ToString::to_string).collect(),
                renotified.iter().map(ToString::to_string).collect(),
            )),
            _ => None,
        })
        .expect("the resumed session reports what it restored")
}

#[test]
fn a_task_running_at_the_crash_ends_failed_with_one_notification_and_a_delivered_one_is_not_renotified(
) {
    // Goal: after a power cut mid-plan, the running worker ends failed and the
    // coordinator hears of it once, while the worker whose envelope it already had
    // is not reported again, and the coordinator finishes its own conversation.
    // Method: the fast job's envelope is delivered at ~1 s, the power is cut at 10 s
    // while the slow job runs; the session and its coordinator are resumed.
    let restarted = crash_and_resume(Duration::from_secs(10), Duration::from_millis(100));
    let report = restarted.report.expect("the resumed coordinator finishes");
    assert_eq!(report.final_text, FINAL_TEXT);
    // The conversation is the one from before the crash, continued.
    assert!(matches!(
        &report.messages[0].content[0],
        ContentBlock::Text { text, .. } if text == PROMPT
    ));
    let envelopes = envelopes_in(&report.messages);
    assert_eq!(envelopes.len(), 2, "{envelopes:?}");
    assert_ne!(envelopes[0].task_id, envelopes[1].task_id);
    assert_eq!(envelopes[0].status, EnvelopeStatus::Completed);
    assert_eq!(envelopes[1].status, EnvelopeStatus::Failed);
    assert!(envelopes[1].summary.contains(HOST_RESTARTED));
    // The resumed boot delivered exactly one envelope: the died task's.
    assert_eq!(report.notifications_delivered, 1);
    let (died, renotified) = restored(&restarted.journal);
    assert_eq!(died, vec![envelopes[1].task_id.clone()]);
    assert!(renotified.is_empty(), "{renotified:?}");
    let tasks = restarted.session.tasks();
    assert_eq!(tasks.len(), 2);
    assert!(tasks
        .iter()
        .all(|t| t.status().is_terminal() && t.notified()));
    let slow = tasks
        .iter()
        .find(|t| t.id.as_str() == envelopes[1].task_id)
        .unwrap();
    assert_eq!(slow.status(), TaskStatus::Failed);
    assert_eq!(restarted.session.outstanding(), 0);
}

#[test]
fn a_task_that_ended_but_was_never_delivered_is_notified_once_after_the_restart() {
    // Goal: an envelope enqueued in memory but not yet in the coordinator's durable
    // conversation dies with the process; the restart notifies its task again, once.
    // Method: the coordinator's second call takes 30 s, so the fast job's envelope
    // (enqueued at ~1 s) is still queued when the power is cut at 10 s.
    let restarted = crash_and_resume(Duration::from_secs(10), Duration::from_secs(30));
    let report = restarted.report.expect("the resumed coordinator finishes");
    assert_eq!(report.final_text, FINAL_TEXT);
    let envelopes = envelopes_in(&report.messages);
    assert_eq!(envelopes.len(), 2, "{envelopes:?}");
    let (died, renotified) = restored(&restarted.journal);
    assert_eq!(died.len(), 1);
    assert_eq!(renotified.len(), 1);
    let renotified_envelope = envelopes
        .iter()
        .find(|e| e.task_id == renotified[0])
        .unwrap();
    assert_eq!(renotified_envelope.status, EnvelopeStatus::Completed);
    assert_eq!(report.notifications_delivered, 2);
}

#[test]
fn a_torn_last_line_of_the_coordinators_log_is_dropped_and_a_corrupt_one_is_an_error() {
    // Goal: reopening the log tolerates the one damage a crash can cause (a torn,
    // never-synced last line) and reports any other damage with its line.
    // Method: resume after appending half a line, then after corrupting a middle line.
    let disk = MemDisk::default();
    disk.create_dir_all(std::path::Path::new(SESSION_ROOT))
        .unwrap();
    let runtime = executor();
    runtime.block_on(async {
        let (world, effects, _) = boot(&disk, Duration::ZERO, 1, Duration::from_millis(100));
        let layout = SessionLayout::new(SESSION_ROOT);
        Session::create(world.clone(), effects, config(), layout.clone()).unwrap();
        let log = coordinator_log_path(&layout);
        let prompt_line = serde_json::json!({
            "type": "message",
            "message": { "role": "user", "content": [{ "type": "text", "text": PROMPT }] }
        });
        let mut bytes = serde_json::to_vec(&prompt_line).unwrap();
        bytes.push(b'\n');
        bytes.extend_from_slice(br#"{"type":"message","mess"#);
        world.disk.replace_atomic(&log, &bytes).unwrap();
        let (world, effects, _) = boot(&disk, Duration::ZERO, 2, Duration::from_millis(100));
        let session = Session::resume(world.clone(), effects, config(), layout.clone()).unwrap();
        let report = session.resume_coordinator(PROMPT, Vec::new()).await;
        // The torn line is gone and the conversation went on from the prompt.
        let report = report.expect("the coordinator resumes from the prompt");
        assert_eq!(report.final_text, FINAL_TEXT);
        assert!(!String::from_utf8_lossy(&world.disk.read(&log).unwrap()).contains("\"mess\n"));

        let mut corrupt = b"{not json}\n".to_vec();
        corrupt.extend_from_slice(&world.disk.read(&log).unwrap());
        world.disk.replace_atomic(&log, &corrupt).unwrap();
        let (world, effects, _) = boot(&disk, Duration::ZERO, 3, Duration::from_millis(100));
        let error = Session::resume(world, effects, config(), layout).unwrap_err();
        assert!(
            matches!(&error, SessionError::Conversation { detail, .. } if detail.starts_with("line 1:")),
            "{error}"
        );
    });
}

#[test]
fn an_unreadable_task_record_is_journaled_and_its_task_recovered_as_failed() {
    // Goal: a damaged task record is never skipped silently: the restart reports it
    // and, since its file name still names the task, fails and notifies that task.
    // Method: overwrite a running task's record with garbage before resuming.
    let disk = MemDisk::default();
    disk.create_dir_all(std::path::Path::new(SESSION_ROOT))
        .unwrap();
    let first = executor();
    let task_id = first.block_on(async {
        let (world, effects, _) = boot(&disk, Duration::ZERO, 1, Duration::from_millis(100));
        let session =
            Session::create(world, effects, config(), SessionLayout::new(SESSION_ROOT)).unwrap();
        let run = session.run_coordinator(PROMPT, Vec::new());
        tokio::select! {
            biased;
            _ = run => panic!("the plan ended early"),
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
        session
            .tasks()
            .into_iter()
            .find(|t| !t.status().is_terminal())
            .map(|t| t.id)
            .expect("the slow job runs")
    });
    drop(first);
    let record = PathBuf::from(format!("{SESSION_ROOT}/records/{task_id}.json"));
    disk.replace_atomic(&record, b"{\"version\": 1, \"id\": ")
        .unwrap();
    let second = executor();
    second.block_on(async {
        let (world, effects, journal) = boot(
            &disk,
            Duration::from_secs(10),
            2,
            Duration::from_millis(100),
        );
        let session =
            Session::resume(world, effects, config(), SessionLayout::new(SESSION_ROOT)).unwrap();
        let events = journal.events();
        assert!(events.iter().any(|e| matches!(
            e,
            RuntimeEvent::TaskRecordUnreadable { path, .. } if *path == record
        )));
        let task = session.task(&task_id).expect("the task is recovered");
        assert_eq!(task.status(), TaskStatus::Failed);
        let report = session
            .resume_coordinator(PROMPT, Vec::new())
            .await
            .unwrap();
        let envelopes = envelopes_in(&report.messages);
        assert_eq!(
            envelopes
                .iter()
                .filter(|e| e.task_id == task_id.as_str())
                .count(),
            1
        );
    });
}
