//! Task ids, the status machine, the registry and progress (PROTOCOL.md §1).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::envelope::{Envelope, EnvelopeStatus};
use coord_runtime::task::{
    Lookup, NotifyOutcome, Progress, RegistryError, TaskId, TaskIdError, TaskKind, TaskRegistry,
    TaskState, TaskStatus,
};
use coord_runtime::world::{ChaChaEntropy, Entropy, MemoryJournal};
use coord_runtime::RuntimeEvent;
use proptest::prelude::*;

fn registry() -> (TaskRegistry, Arc<MemoryJournal>) {
    let journal = Arc::new(MemoryJournal::new());
    (TaskRegistry::new(journal.clone()), journal)
}

fn task(id: &TaskId) -> TaskState {
    TaskState::new(
        id.clone(),
        "Find auth bug",
        PathBuf::from(format!("/s/tasks/{id}.output")),
        1_000,
    )
}

fn envelope_for(task: &TaskState) -> Envelope {
    Envelope {
        task_id: task.id.to_string(),
        tool_use_id: task.tool_use_id.clone(),
        output_file: Some(task.output_path.display().to_string()),
        status: EnvelopeStatus::Completed,
        summary: format!("Agent \"{}\" completed", task.description),
        result: None,
        usage: None,
        worktree: None,
        note: None,
        extra: Default::default(),
    }
}

/// Replays a fixed list of draws, then counts up: lets a test force id collisions.
#[derive(Debug)]
struct ScriptedEntropy {
    draws: Vec<u64>,
    next: AtomicU64,
}

impl Entropy for ScriptedEntropy {
    fn next_u64(&self) -> u64 {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        self.draws
            .get(index as usize)
            .copied()
            .unwrap_or(index * 7919)
    }
}

#[test]
fn starting_a_task_that_already_ended_leaves_it_ended() {
    // Goal: a task killed before its runner first runs (a zero spawn deadline
    // expires at the spawn's own instant) is not started, and nothing panics; a
    // pending task starts once.
    let (mut registry, _) = registry();
    let id = TaskId::parse("a00000002").unwrap();
    registry.insert(task(&id));
    registry.transition(&id, TaskStatus::Killed, 5).unwrap();
    assert!(!registry.start(&id, 6).unwrap());
    assert_eq!(registry.get(&id).unwrap().status(), TaskStatus::Killed);
    let pending = TaskId::parse("a00000003").unwrap();
    registry.insert(task(&pending));
    assert!(registry.start(&pending, 7).unwrap());
    assert_eq!(
        registry.get(&pending).unwrap().status(),
        TaskStatus::Running
    );
    assert!(registry.start(&pending, 8).is_err());
    let unknown = TaskId::parse("a00000004").unwrap();
    assert!(matches!(
        registry.start(&unknown, 9),
        Err(RegistryError::UnknownTask(_))
    ));
}

#[test]
fn generated_ids_have_the_kind_prefix_and_eight_base36_characters() {
    // Goal: every kind's generated id is prefix + 8 of [0-9a-z] and parses back to its kind.
    let entropy = ChaChaEntropy::from_seed(7);
    for kind in TaskKind::ALL {
        for _ in 0..100 {
            let id = TaskId::generate(kind, &entropy);
            let text = id.as_str();
            assert_eq!(text.len(), 9, "{text}");
            assert!(text.starts_with(kind.id_prefix()));
            assert!(text[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
            assert_eq!(TaskId::parse(text).unwrap(), id);
            assert_eq!(id.kind(), kind);
        }
    }
}

#[test]
fn ids_are_a_function_of_the_entropy_seed() {
    // Goal: the same seed draws the same ids; another seed draws others.
    let draw = |seed| {
        let entropy = ChaChaEntropy::from_seed(seed);
        (0..5)
            .map(|_| TaskId::generate(TaskKind::LocalAgent, &entropy).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(1), draw(1));
    assert_ne!(draw(1), draw(2));
}

#[test]
fn parsing_accepts_the_canonical_agent_and_recorded_forms() {
    // Goal: ids from this runtime and from real Claude Code sessions parse, with their kind.
    let accepted = [
        ("a3kx9zq2", TaskKind::LocalAgent),
        ("b0be39e", TaskKind::LocalBash),
        ("a881341", TaskKind::LocalAgent),
        ("acompact-fffbd0", TaskKind::LocalAgent),
        ("a0123456789abcdef", TaskKind::LocalAgent),
        ("aexplore-0123456789abcdef", TaskKind::LocalAgent),
        ("r00000000", TaskKind::RemoteAgent),
        ("tzzzzzzzz", TaskKind::InProcessTeammate),
        ("w12345678", TaskKind::LocalWorkflow),
        ("m12345678", TaskKind::MonitorMcp),
        ("d12345678", TaskKind::Dream),
    ];
    for (text, kind) in accepted {
        let id = TaskId::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(id.kind(), kind, "{text}");
    }
}

#[test]
fn parsing_rejects_malformed_ids_with_typed_errors() {
    // Goal: each way an id can be wrong gives the matching error.
    assert_eq!(TaskId::parse(""), Err(TaskIdError::Empty));
    assert!(matches!(
        TaskId::parse("x12345678"),
        Err(TaskIdError::UnknownPrefix { prefix: 'x', .. })
    ));
    for bad in [
        "a",
        "a12345",
        "aABCDEFGH",
        "a1234567/",
        "a-12345678",
        "b12345678901234567",
        "bcompact-123456",
        "a../../etc",
        "a1234 5678",
    ] {
        assert!(
            matches!(TaskId::parse(bad), Err(TaskIdError::BadBody { .. })),
            "{bad} should be rejected"
        );
    }
}

#[test]
fn task_ids_serialize_as_strings_and_validate_on_deserialize() {
    // Goal: serde goes through TaskId::parse, so JSON cannot smuggle a bad id in.
    let id = TaskId::parse("a3kx9zq2").unwrap();
    assert_eq!(serde_json::to_string(&id).unwrap(), "\"a3kx9zq2\"");
    assert_eq!(serde_json::from_str::<TaskId>("\"a3kx9zq2\"").unwrap(), id);
    assert!(serde_json::from_str::<TaskId>("\"../etc\"").is_err());
}

#[test]
fn the_status_machine_allows_exactly_its_edges() {
    // Goal: the allowed edges succeed and every other non-terminal edge is refused.
    use TaskStatus::*;
    let all = [Pending, Running, Completed, Failed, Killed];
    let allowed = [
        (Pending, Running),
        (Pending, Failed),
        (Pending, Killed),
        (Running, Completed),
        (Running, Failed),
        (Running, Killed),
    ];
    for from in [Pending, Running] {
        for to in all {
            let result = from.check_transition(to);
            assert_eq!(
                result.is_ok(),
                allowed.contains(&(from, to)),
                "{from} -> {to}"
            );
        }
    }
    assert!(Completed.is_terminal() && Failed.is_terminal() && Killed.is_terminal());
    assert!(!Pending.is_terminal() && !Running.is_terminal());
}

#[test]
#[should_panic(expected = "out of terminal state")]
fn leaving_a_terminal_state_asserts() {
    // Goal: a transition out of a terminal state is a bug, so it panics.
    let _ = TaskStatus::Completed.check_transition(TaskStatus::Running);
}

proptest! {
    #[test]
    fn random_transition_sequences_never_leave_a_terminal_state(
        steps in proptest::collection::vec(0usize..5, 0..20)
    ) {
        // Goal: driving the registry with random requests keeps the machine's laws:
        // it ends in at most one terminal state, stamped once, and never moves after.
        use TaskStatus::*;
        let all = [Pending, Running, Completed, Failed, Killed];
        let (mut registry, _) = registry();
        let id = TaskId::parse("a00000001").unwrap();
        registry.insert(task(&id));
        let mut terminal_at = None;
        for (now, step) in steps.into_iter().enumerate() {
            let current = registry.get(&id).unwrap().status();
            if current.is_terminal() {
                break;
            }
            let to = all[step];
            match registry.transition(&id, to, now as u64) {
                Ok(from) => {
                    prop_assert_eq!(from, current);
                    if to.is_terminal() {
                        terminal_at = Some(now as u64);
                    }
                }
                Err(RegistryError::Transition { .. }) => {
                    prop_assert_eq!(registry.get(&id).unwrap().status(), current);
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
        prop_assert_eq!(registry.get(&id).unwrap().ended_at_unix_ms, terminal_at);
    }
}

#[test]
fn allocation_retries_a_colliding_id() {
    // Goal: an id already in use is drawn again, not reused. Method: entropy that
    // repeats its first 8 draws, so the second allocation collides once.
    let first_draws: Vec<u64> = (0..8).collect();
    let mut draws = first_draws.clone();
    draws.extend(&first_draws);
    let entropy = ScriptedEntropy {
        draws,
        next: AtomicU64::new(0),
    };
    let (mut registry, _) = registry();
    let journal = MemoryJournal::new();
    let first = registry.allocate_id(TaskKind::LocalAgent, &entropy, &journal);
    registry.insert(task(&first));
    let second = registry.allocate_id(TaskKind::LocalAgent, &entropy, &journal);
    assert_ne!(first, second);
    assert_eq!(
        entropy.next.load(Ordering::Relaxed),
        24,
        "one collision, one redraw"
    );
    assert_eq!(
        journal.events(),
        vec![RuntimeEvent::ProbeReached {
            probe: coord_runtime::probe::Probe::TaskIdRedrawn
        }],
        "the redraw reached its probe, once"
    );
}

#[test]
fn the_registry_iterates_in_id_order() {
    // Goal: iteration order depends only on the ids, not on insertion order.
    let (mut registry, _) = registry();
    for text in ["bzzzzzzzz", "a00000000", "b00000000", "azzzzzzzz"] {
        registry.insert(task(&TaskId::parse(text).unwrap()));
    }
    let order: Vec<_> = registry.iter().map(|t| t.id.to_string()).collect();
    assert_eq!(order, ["a00000000", "azzzzzzzz", "b00000000", "bzzzzzzzz"]);
}

#[test]
fn a_task_notifies_exactly_once() {
    // Goal: the first notify enqueues and sets notified; a second enqueues nothing.
    let (mut registry, journal) = registry();
    let id = TaskId::parse("a3kx9zq2").unwrap();
    registry.insert(task(&id));
    registry
        .transition(&id, TaskStatus::Running, 1_100)
        .unwrap();
    registry
        .transition(&id, TaskStatus::Completed, 1_500)
        .unwrap();
    assert!(!registry.get(&id).unwrap().notified());
    assert_eq!(
        registry.notify(&id, envelope_for),
        Ok(NotifyOutcome::Enqueued)
    );
    assert!(registry.get(&id).unwrap().notified());
    assert_eq!(
        registry.notify(&id, |_| panic!("must not build a second envelope")),
        Ok(NotifyOutcome::AlreadyNotified)
    );
    let delivered = registry.take_notifications();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].task_id, "a3kx9zq2");
    assert!(registry.take_notifications().is_empty());
    let enqueued = journal
        .events()
        .into_iter()
        .filter(|e| matches!(e, RuntimeEvent::NotificationEnqueued { .. }))
        .count();
    assert_eq!(enqueued, 1);
}

#[test]
#[should_panic(expected = "non-terminal")]
fn notifying_a_running_task_asserts() {
    // Goal: a notification reports an ending; one for a running task is a bug.
    let (mut registry, _) = registry();
    let id = TaskId::parse("a3kx9zq2").unwrap();
    registry.insert(task(&id));
    registry
        .transition(&id, TaskStatus::Running, 1_100)
        .unwrap();
    let _ = registry.notify(&id, envelope_for);
}

#[test]
fn a_suppressed_notification_is_never_sent() {
    // Goal: TaskStop of a background shell marks it notified first, so it sends none.
    let (mut registry, _) = registry();
    let id = TaskId::parse("b0be39e").unwrap();
    registry.insert(task(&id));
    registry
        .transition(&id, TaskStatus::Running, 1_100)
        .unwrap();
    assert_eq!(registry.suppress_notification(&id), Ok(true));
    registry.transition(&id, TaskStatus::Killed, 1_200).unwrap();
    assert_eq!(
        registry.notify(&id, envelope_for),
        Ok(NotifyOutcome::AlreadyNotified)
    );
    assert_eq!(registry.notifications_pending(), 0);
}

#[test]
fn notifications_are_delivered_in_enqueue_order() {
    // Goal: the queue is FIFO across tasks.
    let (mut registry, _) = registry();
    let ids: Vec<TaskId> = ["a00000003", "a00000001", "a00000002"]
        .iter()
        .map(|t| TaskId::parse(t).unwrap())
        .collect();
    for id in &ids {
        registry.insert(task(id));
        registry.transition(id, TaskStatus::Running, 1).unwrap();
        registry.transition(id, TaskStatus::Completed, 2).unwrap();
        registry.notify(id, envelope_for).unwrap();
    }
    let order: Vec<_> = registry
        .take_notifications()
        .into_iter()
        .map(|e| e.task_id)
        .collect();
    assert_eq!(order, ["a00000003", "a00000001", "a00000002"]);
}

#[test]
fn eviction_drops_only_terminal_notified_tasks_after_the_grace_period() {
    // Goal: running, unnotified, and recently ended tasks stay; expired ones are evicted
    // and still known as evicted.
    let (mut registry, _) = registry();
    let grace = Duration::from_secs(30);
    let running = TaskId::parse("a00000001").unwrap();
    let unnotified = TaskId::parse("a00000002").unwrap();
    let done = TaskId::parse("a00000003").unwrap();
    for id in [&running, &unnotified, &done] {
        registry.insert(task(id));
        registry.transition(id, TaskStatus::Running, 1_000).unwrap();
    }
    registry
        .transition(&unnotified, TaskStatus::Failed, 2_000)
        .unwrap();
    registry
        .transition(&done, TaskStatus::Completed, 2_000)
        .unwrap();
    registry.notify(&done, envelope_for).unwrap();

    assert!(registry.evict_expired(2_000 + 29_999, grace).is_empty());
    assert_eq!(
        registry.evict_expired(2_000 + 30_000, grace),
        vec![done.clone()]
    );
    assert_eq!(registry.lookup(&done), Lookup::Evicted);
    assert!(matches!(registry.lookup(&running), Lookup::Live(_)));
    assert!(matches!(registry.lookup(&unnotified), Lookup::Live(_)));
    assert_eq!(
        registry.lookup(&TaskId::parse("a00000009").unwrap()),
        Lookup::Unknown
    );
    assert!(matches!(
        registry.transition(&done, TaskStatus::Killed, 3),
        Err(RegistryError::UnknownTask(_))
    ));
}

#[test]
fn progress_keeps_latest_input_summed_output_and_five_activities() {
    // Goal: input tokens are the latest value (each request resends the prefix),
    // output tokens add up, and only the last five activities are kept.
    let mut progress = Progress::default();
    progress.record_turn(1_000, 50);
    progress.record_turn(1_400, 70);
    assert_eq!(progress.input_tokens_latest, 1_400);
    assert_eq!(progress.output_tokens_total, 120);
    assert_eq!(progress.total_tokens(), 1_520);
    for n in 0..7 {
        progress.record_tool_use(format!("Read file{n}.rs"));
    }
    assert_eq!(progress.tool_uses, 7);
    let recent: Vec<_> = progress.recent_activities().collect();
    assert_eq!(
        recent,
        [
            "Read file2.rs",
            "Read file3.rs",
            "Read file4.rs",
            "Read file5.rs",
            "Read file6.rs"
        ]
    );
}

#[test]
fn active_duration_excludes_pauses() {
    // Goal: the duration reported for a task leaves out time spent paused.
    let id = TaskId::parse("a00000001").unwrap();
    let mut state = task(&id);
    state.paused_total = Duration::from_millis(300);
    assert_eq!(state.active_duration(2_000), Duration::from_millis(700));
    state.ended_at_unix_ms = Some(1_500);
    assert_eq!(state.active_duration(9_999), Duration::from_millis(200));
}
