//! team tests: the team file (durability, corruption, membership rules), colours,
//! exactly-once mailbox polling, idle transitions, the shutdown handshake, and
//! permission forwarding. Every test runs on the real disk in its own temporary
//! directory, with seeded entropy, a memory journal and, unless stated, a
//! [`ManualClock`] so that waits take no real time.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::agent::PermissionMode;
use coord_runtime::ipc::{LockError, MailboxError, MailboxMessage, SessionLayout};
use coord_runtime::profile::Profile;
use coord_runtime::route::{RequestId, RequestKind, StructuredError};
use coord_runtime::task::TaskId;
use coord_runtime::team::{
    color_for_join, needs_permission, take_unread, team_file_path, IdleMail, PermissionAnswer,
    Team, TeamError, TeamFile, TeamMessage, PALETTE,
};
use coord_runtime::tools::ToolName;
use coord_runtime::world::{
    ChaChaEntropy, Clock, ManualClock, MemoryJournal, RealDisk, SystemClock,
};
use coord_runtime::{RuntimeEvent, World};
use serde_json::json;

/// The manual clock's wall time at its origin.
const START_UNIX_MS: u64 = 1_700_000_000_000;

/// Retries of a poll whose lock stayed contended, before a racing test gives up.
const CONTENDED_RETRIES_MAX: u32 = 100;

/// A world on the real disk under a fresh temp dir.
struct Fixture {
    world: World,
    journal: Arc<MemoryJournal>,
    clock: Arc<ManualClock>,
    layout: SessionLayout,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new(seed: u64) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = Arc::new(MemoryJournal::new());
        let clock = Arc::new(ManualClock::new(START_UNIX_MS));
        let world = World {
            clock: clock.clone(),
            entropy: Arc::new(ChaChaEntropy::from_seed(seed)),
            disk: Arc::new(RealDisk::new()),
            journal: journal.clone(),
        };
        let layout = SessionLayout::new(dir.path());
        Fixture {
            world,
            journal,
            clock,
            layout,
            _dir: dir,
        }
    }

    /// Team `alpha` led by `lead` (`a0000lead`), with `bob` and `carol`.
    async fn team(&self, profile: Profile) -> Team {
        let mut team = Team::create(
            &self.world,
            &self.layout,
            profile,
            "alpha",
            "lead",
            id("a0000lead"),
        )
        .await
        .expect("create team");
        team.add_member("bob", id("a0000bob1"))
            .await
            .expect("add bob");
        team.add_member("carol", id("a000carol"))
            .await
            .expect("add carol");
        team
    }

    /// Another handle on team `alpha`, as another process would open it.
    async fn open(&self, profile: Profile) -> Team {
        Team::load(&self.world, &self.layout, profile, "alpha")
            .await
            .expect("load team")
    }

    fn team_path(&self) -> std::path::PathBuf {
        team_file_path(&self.layout, "alpha").expect("team path")
    }
}

fn id(text: &str) -> TaskId {
    TaskId::parse(text).expect("test task id")
}

fn texts(deliveries: &[coord_runtime::team::Delivery]) -> Vec<String> {
    deliveries
        .iter()
        .map(|delivery| delivery.message.text.clone())
        .collect()
}

#[tokio::test]
async fn team_file_survives_a_reload_from_the_same_path() {
    // Goal: the file is durable state. Method: change it, open a new Team, compare.
    let fixture = Fixture::new(1);
    let mut team = fixture.team(Profile::Hardened).await;
    team.mark_idle("bob").await.expect("idle");
    assert_eq!(
        team.path(),
        fixture.layout.root().join("teams/alpha/team.json")
    );
    let reopened = fixture.open(Profile::Hardened).await;
    assert_eq!(reopened.file(), team.file());
    let file = reopened.file();
    assert_eq!(file.lead, "lead");
    assert_eq!(file.member_names(), ["lead", "bob", "carol"]);
    let bob = reopened.member("BOB").expect("bob");
    assert_eq!(bob.agent_id, id("a0000bob1"));
    assert_eq!(bob.joined_at_unix_ms, START_UNIX_MS);
    assert!(bob.is_idle);
    assert!(!bob.shutdown_requested);
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture.team_path()).expect("read")).expect("json");
    let member = &raw["members"][1];
    for field in [
        "name",
        "agent_id",
        "color",
        "joined_at_unix_ms",
        "is_idle",
        "shutdown_requested",
    ] {
        assert!(
            member.get(field).is_some(),
            "member field {field} in {member}"
        );
    }
}

#[tokio::test]
async fn create_refuses_an_existing_team_and_load_a_missing_one() {
    // Goal: typed edge errors. Method: create twice, load missing, load a bad name.
    let fixture = Fixture::new(2);
    fixture.team(Profile::Nexo).await;
    let again = Team::create(
        &fixture.world,
        &fixture.layout,
        Profile::Nexo,
        "alpha",
        "x",
        id("a0000xxxx"),
    )
    .await;
    assert!(
        matches!(again, Err(TeamError::AlreadyExists { .. })),
        "{again:?}"
    );
    let missing = Team::load(&fixture.world, &fixture.layout, Profile::Nexo, "beta").await;
    assert!(
        matches!(missing, Err(TeamError::NotFound { .. })),
        "{missing:?}"
    );
    let bad = Team::load(&fixture.world, &fixture.layout, Profile::Nexo, "../up").await;
    assert!(matches!(bad, Err(TeamError::Name(_))), "{bad:?}");
    // The first team is intact.
    assert_eq!(fixture.open(Profile::Nexo).await.file().members.len(), 3);
}

#[tokio::test]
async fn a_corrupt_team_file_is_reported_with_its_position_and_left_untouched() {
    // Goal: corrupt → line/column, untouched. Method: broken JSON, load and mutate.
    let fixture = Fixture::new(3);
    let mut team = fixture.team(Profile::Hardened).await;
    let corrupt = b"{\n  \"name\": \"alpha\",\n  \"lead\": oops\n}\n";
    std::fs::write(fixture.team_path(), corrupt).expect("corrupt");
    let loaded = Team::load(&fixture.world, &fixture.layout, Profile::Hardened, "alpha").await;
    match loaded {
        Err(TeamError::Corrupt { line, column, .. }) => {
            assert_eq!(line, 3);
            assert_eq!(column, 11);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let added = team.add_member("dave", id("a000dave1")).await;
    assert!(matches!(added, Err(TeamError::Corrupt { .. })), "{added:?}");
    let idle = team.mark_idle("bob").await;
    assert!(matches!(idle, Err(TeamError::Corrupt { .. })), "{idle:?}");
    assert_eq!(std::fs::read(fixture.team_path()).expect("read"), corrupt);
}

#[tokio::test]
async fn an_inconsistent_team_file_is_reported_and_left_untouched() {
    // Goal: invariants checked on load. Method: lead not a member; names equal but case.
    let fixture = Fixture::new(4);
    let team = fixture.team(Profile::Hardened).await;
    let mut file: TeamFile = team.file().clone();
    file.lead = "nobody".into();
    let bytes = serde_json::to_vec(&file).expect("serialize");
    std::fs::write(fixture.team_path(), &bytes).expect("write");
    let loaded = Team::load(&fixture.world, &fixture.layout, Profile::Hardened, "alpha").await;
    assert!(
        matches!(loaded, Err(TeamError::Inconsistent { ref reason, .. }) if reason.contains("nobody")),
        "{loaded:?}"
    );
    assert_eq!(std::fs::read(fixture.team_path()).expect("read"), bytes);
    let mut file = team.file().clone();
    file.members[2].name = "BOB".into();
    std::fs::write(
        fixture.team_path(),
        serde_json::to_vec(&file).expect("json"),
    )
    .expect("write");
    let loaded = Team::load(&fixture.world, &fixture.layout, Profile::Hardened, "alpha").await;
    assert!(
        matches!(loaded, Err(TeamError::Inconsistent { .. })),
        "{loaded:?}"
    );
}

#[tokio::test]
async fn membership_changes_are_checked() {
    // Goal: add/remove refuse bad changes. Method: each refusal, then a valid removal.
    let fixture = Fixture::new(5);
    let mut team = fixture.team(Profile::Nexo).await;
    let duplicate = team.add_member("BOB", id("a0000new1")).await;
    assert!(
        matches!(duplicate, Err(TeamError::DuplicateMember { .. })),
        "{duplicate:?}"
    );
    let same_agent = team.add_member("robert", id("a0000bob1")).await;
    assert!(
        matches!(same_agent, Err(TeamError::DuplicateAgent { .. })),
        "{same_agent:?}"
    );
    let bad_name = team.add_member("bo b", id("a0000new1")).await;
    assert!(matches!(bad_name, Err(TeamError::Name(_))), "{bad_name:?}");
    let unknown = team.remove_member("zed").await;
    assert!(
        matches!(unknown, Err(TeamError::UnknownMember { .. })),
        "{unknown:?}"
    );
    let lead = team.remove_member("LEAD").await;
    assert!(
        matches!(lead, Err(TeamError::RemoveLead { .. })),
        "{lead:?}"
    );
    let removed = team.remove_member("Bob").await.expect("remove bob");
    assert_eq!(removed.name, "bob");
    assert_eq!(
        fixture.open(Profile::Nexo).await.file().member_names(),
        ["lead", "carol"]
    );
}

#[tokio::test]
async fn changes_from_two_handles_are_both_kept() {
    // Goal: no lost update. Method: two stale handles each add a member; both kept.
    let fixture = Fixture::new(6);
    let mut first = fixture.team(Profile::Hardened).await;
    let mut second = fixture.open(Profile::Hardened).await;
    first
        .add_member("dave", id("a000dave1"))
        .await
        .expect("dave");
    second
        .add_member("erin", id("a000erin1"))
        .await
        .expect("erin");
    let names = fixture.open(Profile::Hardened).await.file().member_names();
    assert_eq!(names, ["lead", "bob", "carol", "dave", "erin"]);
}

#[tokio::test]
async fn colours_follow_join_order_and_are_not_reused() {
    // Goal: deterministic colours. Method: joins, a leaver, a wrap; two runs compared.
    assert_eq!(color_for_join(0), PALETTE[0]);
    assert_eq!(color_for_join(8), PALETTE[0]);
    assert_eq!(color_for_join(9), PALETTE[1]);
    let mut colours_per_run = Vec::new();
    for seed in [7, 8] {
        let fixture = Fixture::new(seed);
        let mut team = fixture.team(Profile::Hardened).await;
        team.remove_member("bob").await.expect("remove");
        for index in 0..7 {
            team.add_member(&format!("m{index}"), id(&format!("a0000mm0{index}")))
                .await
                .expect("add");
        }
        let colours: Vec<String> = team
            .file()
            .members
            .iter()
            .map(|m| m.color.clone())
            .collect();
        colours_per_run.push(colours);
    }
    assert_eq!(colours_per_run[0], colours_per_run[1]);
    // lead=0, (bob=1 left), carol=2, m0..m6 = 3..9 → wraps at 8.
    let expected: Vec<String> = [0u64, 2, 3, 4, 5, 6, 7, 8, 9]
        .into_iter()
        .map(|join| color_for_join(join).to_owned())
        .collect();
    assert_eq!(colours_per_run[0], expected);
    assert_eq!(expected[0], "red");
    assert_eq!(expected[7], "red");
}

#[tokio::test]
async fn polling_delivers_each_message_exactly_once_in_order() {
    // Goal: exactly-once polls in both write modes. Method: poll, poll again, poll new.
    for profile in [Profile::ClaudeCode, Profile::Hardened] {
        let fixture = Fixture::new(9);
        let mut team = fixture.team(profile).await;
        let inbox = team.mailbox("bob").expect("inbox");
        for text in ["one", "two", "three"] {
            inbox
                .append(MailboxMessage::new(&fixture.world, "carol", text))
                .await
                .expect("append");
        }
        let first = team.poll("Bob").await.expect("poll");
        assert_eq!(texts(&first), ["one", "two", "three"], "{profile}");
        assert!(first
            .iter()
            .all(|d| d.message.read && d.team_message.is_none()));
        assert!(
            team.poll("bob").await.expect("poll again").is_empty(),
            "{profile}"
        );
        inbox
            .append(MailboxMessage::new(&fixture.world, "lead", "four"))
            .await
            .expect("append");
        assert_eq!(texts(&team.poll("bob").await.expect("poll")), ["four"]);
        let stored = inbox.read_all().await.expect("read");
        assert_eq!(stored.len(), 4);
        assert!(stored.iter().all(|message| message.read));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_polls_never_deliver_a_message_twice() {
    // Goal: exactly once under races. Method: 4 threaded pollers, 20 messages, no dup.
    let dir = tempfile::tempdir().expect("temp dir");
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(10)),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    };
    let layout = SessionLayout::new(dir.path());
    let mut team = Team::create(
        &world,
        &layout,
        Profile::Hardened,
        "alpha",
        "lead",
        id("a0000lead"),
    )
    .await
    .expect("create");
    team.add_member("bob", id("a0000bob1")).await.expect("bob");
    let inbox = team.mailbox("bob").expect("inbox");
    for index in 0..20 {
        inbox
            .append(MailboxMessage::new(&world, "lead", format!("m{index}")))
            .await
            .expect("append");
    }
    let mut pollers = Vec::new();
    for _ in 0..4 {
        let inbox = inbox.clone();
        pollers.push(tokio::spawn(async move {
            for _ in 0..CONTENDED_RETRIES_MAX {
                match take_unread(&inbox, "bob").await {
                    Ok(messages) => return messages,
                    Err(MailboxError::Lock(LockError::Contended { .. })) => continue,
                    Err(error) => panic!("poll failed: {error}"),
                }
            }
            panic!("poll still contended after {CONTENDED_RETRIES_MAX} retries");
        }));
    }
    let mut received = Vec::new();
    for poller in pollers {
        received.extend(poller.await.expect("poller").into_iter().map(|m| m.text));
    }
    assert_eq!(received.len(), 20, "{received:?}");
    let unique: BTreeSet<&String> = received.iter().collect();
    assert_eq!(unique.len(), 20);
}

#[tokio::test]
async fn on_idle_fires_once_per_transition() {
    // Goal: once per busy → idle. Method: idle/idle/busy/idle, then a fresh handle.
    let fixture = Fixture::new(11);
    let mut team = fixture.team(Profile::Hardened).await;
    let fired = Arc::new(AtomicUsize::new(0));
    let names = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counter = fired.clone();
    team.on_idle(Box::new(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    let seen = names.clone();
    team.on_idle(Box::new(move |member| {
        seen.lock().expect("names").push(member.to_owned())
    }));
    assert!(team.mark_idle("BOB").await.expect("idle"));
    assert!(!team.mark_idle("bob").await.expect("still idle"));
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(team.mark_busy("bob").await.expect("busy"));
    assert!(!team.mark_busy("bob").await.expect("still busy"));
    assert!(team.mark_idle("bob").await.expect("idle again"));
    assert_eq!(fired.load(Ordering::SeqCst), 2);
    assert_eq!(*names.lock().expect("names"), ["bob", "bob"]);
    let mut other = fixture.open(Profile::Hardened).await;
    let other_fired = Arc::new(AtomicUsize::new(0));
    let other_counter = other_fired.clone();
    other.on_idle(Box::new(move |_| {
        other_counter.fetch_add(1, Ordering::SeqCst);
    }));
    assert!(!other.mark_idle("bob").await.expect("already idle on disk"));
    assert_eq!(other_fired.load(Ordering::SeqCst), 0);
    let idle_events: Vec<RuntimeEvent> = fixture
        .journal
        .events()
        .into_iter()
        .filter(|event| matches!(event, RuntimeEvent::MemberIdle { .. }))
        .collect();
    let expected = RuntimeEvent::MemberIdle {
        team: "alpha".into(),
        member: "bob".into(),
    };
    assert_eq!(idle_events, [expected.clone(), expected]);
    assert!(matches!(
        team.mark_idle("zed").await,
        Err(TeamError::UnknownMember { .. })
    ));
}

#[tokio::test]
async fn approved_shutdown_removes_the_member() {
    // Goal: shutdown approve path. Method: request, member polls, approves, lead polls.
    let fixture = Fixture::new(12);
    let mut lead = fixture.team(Profile::Hardened).await;
    let mut bob = fixture.open(Profile::Hardened).await;
    let request_id = lead
        .request_shutdown("bob", Some("work is done".into()))
        .await
        .expect("request");
    assert_eq!(
        request_id.to_string(),
        format!("shutdown-{START_UNIX_MS}@a0000lead")
    );
    assert!(!bob.member("bob").expect("bob").shutdown_requested);
    let delivered = bob.poll("bob").await.expect("member polls");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].message.from, "lead");
    assert_eq!(
        delivered[0].team_message,
        Some(TeamMessage::ShutdownRequest {
            request_id: request_id.clone(),
            reason: Some("work is done".into())
        })
    );
    assert!(bob.member("bob").expect("bob").shutdown_requested);
    bob.respond_shutdown("bob", request_id.clone(), true, None)
        .await
        .expect("approve");
    let answers = lead.poll("lead").await.expect("lead polls");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].message.from, "bob");
    assert!(matches!(
        answers[0].team_message,
        Some(TeamMessage::ShutdownResponse { approve: true, .. })
    ));
    assert_eq!(lead.file().member_names(), ["lead", "carol"]);
    assert_eq!(
        fixture.open(Profile::Hardened).await.file().member_names(),
        ["lead", "carol"]
    );
}

#[tokio::test]
async fn only_the_leads_request_marks_a_member_asked_to_shut_down() {
    // Goal: a request handed over from a member's queue marks it as asked only
    // when the request is the lead's, as a mailbox request does. Method: carol's
    // request to bob, then the lead's.
    let fixture = Fixture::new(14);
    let mut bob = fixture.team(Profile::Hardened).await;
    let carols = RequestId::from_parts(RequestKind::Shutdown, 1, id("a000carol"));
    bob.note_shutdown_requested("bob", [&carols])
        .await
        .expect("noted");
    assert!(!bob.member("bob").expect("bob").shutdown_requested);
    let leads = RequestId::from_parts(RequestKind::Shutdown, 2, id("a0000lead"));
    bob.note_shutdown_requested("bob", [&carols, &leads])
        .await
        .expect("noted");
    assert!(bob.member("bob").expect("bob").shutdown_requested);
    assert!(
        fixture
            .open(Profile::Hardened)
            .await
            .member("bob")
            .expect("bob")
            .shutdown_requested
    );
}

#[tokio::test]
async fn rejected_shutdown_needs_a_reason_and_keeps_the_member() {
    // Goal: shutdown reject path. Method: reasonless refused; with a reason, bob stays.
    let fixture = Fixture::new(13);
    let mut lead = fixture.team(Profile::ClaudeCode).await;
    let mut bob = fixture.open(Profile::ClaudeCode).await;
    let request_id = lead.request_shutdown("bob", None).await.expect("request");
    bob.poll("bob").await.expect("member polls");
    let reasonless = bob
        .respond_shutdown("bob", request_id.clone(), false, None)
        .await;
    assert!(
        matches!(
            reasonless,
            Err(TeamError::Structured(
                StructuredError::RejectionWithoutReason { .. }
            ))
        ),
        "{reasonless:?}"
    );
    assert!(lead.poll("lead").await.expect("nothing yet").is_empty());
    bob.respond_shutdown(
        "bob",
        request_id.clone(),
        false,
        Some("mid-migration".into()),
    )
    .await
    .expect("reject");
    let answers = lead.poll("lead").await.expect("lead polls");
    assert_eq!(
        answers[0].team_message,
        Some(TeamMessage::ShutdownResponse {
            request_id,
            approve: false,
            reason: Some("mid-migration".into())
        })
    );
    assert_eq!(lead.file().member_names(), ["lead", "bob", "carol"]);
}

#[tokio::test]
async fn an_approval_nobody_asked_for_removes_no_one() {
    // Goal: only requested shutdowns remove. Method: carol approves bob's request.
    let fixture = Fixture::new(14);
    let mut lead = fixture.team(Profile::Hardened).await;
    let carol = fixture.open(Profile::Hardened).await;
    let request_id = lead.request_shutdown("bob", None).await.expect("request");
    carol
        .respond_shutdown("carol", request_id, true, None)
        .await
        .expect("send");
    lead.poll("lead").await.expect("lead polls");
    assert_eq!(lead.file().member_names(), ["lead", "bob", "carol"]);
}

#[tokio::test]
async fn permission_requests_round_trip_through_the_mailboxes() {
    // Goal: permission round trip by id. Method: request, lead answers amid decoys, wait.
    let fixture = Fixture::new(15);
    let mut lead = fixture.team(Profile::Hardened).await;
    let bob = fixture.open(Profile::Hardened).await;
    let input = json!({"command": "cargo test"});
    let request_id = bob
        .request_permission("bob", "Bash", input.clone(), Some("run the tests".into()))
        .await
        .expect("request");
    assert_eq!(request_id.kind(), RequestKind::Permission);
    assert_eq!(request_id.agent(), &id("a0000bob1"));
    assert!(fixture
        .journal
        .events()
        .contains(&RuntimeEvent::PermissionForwarded {
            team: "alpha".into(),
            member: "bob".into(),
            tool: "Bash".into(),
        }));
    let inbox = lead.poll("lead").await.expect("lead polls");
    assert_eq!(inbox.len(), 1);
    assert_eq!(
        inbox[0].team_message,
        Some(TeamMessage::PermissionRequest {
            request_id: request_id.clone(),
            tool: "Bash".into(),
            input,
            description: Some("run the tests".into()),
        })
    );
    let decoy = RequestId::from_parts(RequestKind::Permission, 1, id("a0000bob1"));
    lead.answer_permission("bob", decoy, false, Some("old".into()))
        .await
        .expect("decoy");
    lead.mailbox("bob")
        .expect("inbox")
        .append(MailboxMessage::new(&fixture.world, "carol", "fyi"))
        .await
        .expect("plain");
    lead.answer_permission("bob", request_id.clone(), true, None)
        .await
        .expect("answer");
    let answer = bob
        .wait_permission(
            "bob",
            &request_id,
            Duration::from_secs(5),
            Duration::from_millis(100),
        )
        .await
        .expect("answer arrives");
    assert_eq!(
        answer,
        PermissionAnswer {
            request_id,
            approve: true,
            reason: None
        }
    );
    let mut bob = bob;
    let rest = bob.poll("bob").await.expect("bob polls");
    assert_eq!(rest.len(), 2, "the decoy and the plain message stay unread");
    assert_eq!(rest[1].message.text, "fyi");
}

#[tokio::test]
async fn a_permission_wait_times_out_on_the_world_clock() {
    // Goal: the wait is bounded. Method: ManualClock, no answer; typed timeout at 5 s.
    let fixture = Fixture::new(16);
    let bob = {
        fixture.team(Profile::Nexo).await;
        fixture.open(Profile::Nexo).await
    };
    let request_id = bob
        .request_permission("bob", "Write", json!({"path": "/tmp/x"}), None)
        .await
        .expect("request");
    let started = fixture.clock.monotonic();
    let waited = bob
        .wait_permission(
            "bob",
            &request_id,
            Duration::from_secs(5),
            Duration::from_millis(300),
        )
        .await;
    match waited {
        Err(TeamError::PermissionTimeout {
            request_id: timed_out,
            waited_ms,
        }) => {
            assert_eq!(timed_out, request_id);
            assert_eq!(waited_ms, 5_000);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(fixture.clock.monotonic() - started, Duration::from_secs(5));
}

#[tokio::test]
async fn a_lead_cannot_answer_a_request_the_member_did_not_make() {
    // Goal: answers tied to askers. Method: wrong member's id, wrong kind of id.
    let fixture = Fixture::new(17);
    let team = fixture.team(Profile::Hardened).await;
    let carols = team
        .request_permission("carol", "Edit", json!({}), None)
        .await
        .expect("request");
    let wrong_member = team.answer_permission("bob", carols, true, None).await;
    assert!(
        matches!(wrong_member, Err(TeamError::RequestNotFrom { .. })),
        "{wrong_member:?}"
    );
    let shutdown = RequestId::from_parts(RequestKind::Shutdown, 1, id("a0000bob1"));
    let wrong_kind = team.answer_permission("bob", shutdown, true, None).await;
    assert!(
        matches!(wrong_kind, Err(TeamError::RequestNotFrom { .. })),
        "{wrong_kind:?}"
    );
}

#[tokio::test]
async fn the_roster_feeds_message_routing() {
    // Goal: team and route agree. Method: the roster, then `*` from bob via resolve.
    use coord_runtime::route::{
        resolve, MessageBody, NameRegistry, Route, RouteContext, SendMessageInput,
    };
    let fixture = Fixture::new(18);
    let team = fixture.team(Profile::Hardened).await;
    let roster = team.roster();
    assert_eq!(roster.lead_agent_id, id("a0000lead"));
    assert_eq!(roster.members, ["lead", "bob", "carol"]);
    let names = NameRegistry::new();
    let known = |_: &TaskId| false;
    let context = RouteContext {
        sender: "bob",
        profile: Profile::Hardened,
        names: &names,
        team: Some(&roster),
        bridge_consent: false,
        task_known: &known,
    };
    let input = SendMessageInput {
        to: "*".into(),
        summary: Some("status".into()),
        message: MessageBody::Text("done".into()),
    };
    assert_eq!(
        resolve(&input, &context),
        Ok(Route::Broadcast {
            recipients: vec!["lead".into(), "carol".into()]
        })
    );
}

#[tokio::test]
async fn an_idle_member_takes_its_mail_and_agrees_to_a_shutdown() {
    // Goal: what wakes an idle member: plain mail becomes its next turn, a shutdown
    // request is approved at once. Method: mail bob, poll idle; ask him to shut down,
    // poll idle; read the lead's mailbox.
    let fixture = Fixture::new(21);
    let mut lead = fixture.team(Profile::Hardened).await;
    let mut bob = fixture.open(Profile::Hardened).await;
    let mail = MailboxMessage::new(&fixture.world, "lead", "check the logs");
    lead.mailbox("bob").unwrap().append(mail).await.unwrap();
    assert_eq!(
        bob.poll_idle("bob", false).await.unwrap(),
        IdleMail::Messages(vec!["check the logs".to_owned()])
    );
    assert_eq!(
        bob.poll_idle("bob", false).await.unwrap(),
        IdleMail::Messages(Vec::new())
    );
    lead.request_shutdown("bob", None).await.unwrap();
    assert_eq!(
        bob.poll_idle("bob", false).await.unwrap(),
        IdleMail::Shutdown
    );
    let answers = lead.poll("lead").await.unwrap();
    assert!(matches!(
        answers[0].team_message,
        Some(TeamMessage::ShutdownResponse { approve: true, .. })
    ));
}

#[tokio::test]
async fn a_shutdown_request_that_arrives_twice_is_answered_once() {
    // Goal: a writer that retried an append which had landed leaves one request
    // twice in the inbox; the idle member agrees to it once. Method: ask bob to
    // shut down, append the request's message again byte for byte, poll idle,
    // and count the lead's answers.
    let fixture = Fixture::new(24);
    let mut lead = fixture.team(Profile::Hardened).await;
    let mut bob = fixture.open(Profile::Hardened).await;
    lead.request_shutdown("bob", None).await.unwrap();
    let inbox = lead.mailbox("bob").unwrap();
    let request = inbox.read_all().await.unwrap().remove(0);
    inbox.append(request).await.unwrap();
    assert_eq!(
        bob.poll_idle("bob", false).await.unwrap(),
        IdleMail::Shutdown
    );
    let answers = lead.poll("lead").await.unwrap();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(matches!(
        answers[0].team_message,
        Some(TeamMessage::ShutdownResponse { approve: true, .. })
    ));
}

#[tokio::test]
async fn a_shutdown_request_beside_other_mail_is_handed_over_with_it_not_answered() {
    // Goal: the mailbox marks what it hands out as read, so an idle member that
    // agreed to a shutdown request found beside other mail would lose that mail.
    // Method: mail bob and ask him to shut down, poll idle: both texts come back
    // and the lead has no answer; then a request alone while other work is queued
    // elsewhere: handed over too.
    let fixture = Fixture::new(23);
    let mut lead = fixture.team(Profile::Hardened).await;
    let mut bob = fixture.open(Profile::Hardened).await;
    let mail = MailboxMessage::new(&fixture.world, "lead", "check the logs");
    lead.mailbox("bob").unwrap().append(mail).await.unwrap();
    lead.request_shutdown("bob", None).await.unwrap();
    match bob.poll_idle("bob", false).await.unwrap() {
        IdleMail::MessagesWithShutdown { texts, requests } => {
            assert_eq!(texts.len(), 2, "{texts:?}");
            assert_eq!(texts[0], "check the logs");
            assert!(texts[1].contains("shutdown_request"), "{texts:?}");
            assert_eq!(requests.len(), 1);
        }
        other => panic!("expected the mail and the request together, got {other:?}"),
    }
    assert!(lead.poll("lead").await.unwrap().is_empty());

    lead.request_shutdown("bob", None).await.unwrap();
    assert!(matches!(
        bob.poll_idle("bob", true).await.unwrap(),
        IdleMail::MessagesWithShutdown { requests, .. } if requests.len() == 1
    ));
    assert!(lead.poll("lead").await.unwrap().is_empty());
}

#[tokio::test]
async fn load_or_create_makes_a_missing_team_and_loads_an_existing_one() {
    // Goal: a session's first teammate creates its team; later ones join it.
    let fixture = Fixture::new(22);
    let make = || {
        Team::load_or_create(
            &fixture.world,
            &fixture.layout,
            Profile::Hardened,
            "alpha",
            "lead",
            id("a0000lead"),
        )
    };
    let mut created = make().await.unwrap();
    created.add_member("bob", id("a0000bob1")).await.unwrap();
    let loaded = make().await.unwrap();
    assert_eq!(loaded.file().member_names(), ["lead", "bob"]);
}

#[test]
fn a_teammate_asks_the_lead_as_its_permission_mode_says() {
    // Goal: which tool calls wait for the lead's word, per permission mode.
    let asks = |mode, tool| needs_permission(mode, tool);
    assert!(!asks(PermissionMode::BypassPermissions, ToolName::Bash));
    assert!(asks(PermissionMode::AcceptEdits, ToolName::Bash));
    assert!(!asks(PermissionMode::AcceptEdits, ToolName::Edit));
    for mode in [PermissionMode::Default, PermissionMode::Plan] {
        for tool in [ToolName::Bash, ToolName::Edit, ToolName::Write] {
            assert!(asks(mode, tool), "{mode:?} {tool}");
        }
        assert!(!asks(mode, ToolName::Read), "{mode:?}");
    }
}
