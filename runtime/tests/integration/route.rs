//! route tests: SendMessage parsing, validation and resolution; the name registry;
//! structured messages and their lead-only rules; request ids; SendMessageToWorker's
//! ordered checks, including the no-existence-oracle property.

use std::path::PathBuf;
use std::sync::Arc;

use coord_runtime::ipc::NameError;
use coord_runtime::profile::Profile;
use coord_runtime::route::{
    parse_address, resolve, validate, Address, BindingKey, Continued, MessageBody, NameRegistry,
    NameRegistryError, RequestId, RequestIdError, RequestKind, Route, RouteContext, RouteError,
    SendMessageInput, SendMessageToWorkerInput, StructuredError, StructuredKind, StructuredMessage,
    TeamRoster, WireError, WorkerBindings, WorkerCaller, WorkerSendError, WorkerState,
    MESSAGE_BYTES_MAX,
};
use coord_runtime::task::{TaskId, TaskRegistry, TaskState, TaskStatus};
use coord_runtime::tools::{Role, ToolName, ToolSurface};
use coord_runtime::world::{Clock, ManualClock, MemoryJournal};
use proptest::prelude::*;
use serde_json::json;

/// The lead's agent id in every roster here.
const LEAD_ID: &str = "a0000lead";

fn id(text: &str) -> TaskId {
    TaskId::parse(text).expect("test task id")
}

fn text_input(to: &str) -> SendMessageInput {
    SendMessageInput {
        to: to.into(),
        summary: Some("hello".into()),
        message: MessageBody::Text("hi there".into()),
    }
}

fn structured_input(to: &str, message: StructuredMessage) -> SendMessageInput {
    SendMessageInput {
        to: to.into(),
        summary: None,
        message: MessageBody::Structured(message),
    }
}

fn shutdown_id() -> RequestId {
    RequestId::from_parts(RequestKind::Shutdown, 1_700_000_000_000, id(LEAD_ID))
}

fn plan_id() -> RequestId {
    RequestId::from_parts(
        RequestKind::PlanApproval,
        1_700_000_000_000,
        id("a0000bob1"),
    )
}

/// Team `alpha`: lead `lead`, members `Bob` and `carol`.
fn roster() -> TeamRoster {
    TeamRoster {
        team: "alpha".into(),
        lead: "lead".into(),
        lead_agent_id: id(LEAD_ID),
        members: vec!["lead".into(), "Bob".into(), "carol".into()],
    }
}

/// Resolves `input` as `sender` under `profile`, with `names`, optionally `team`,
/// and task `a1known01` known to the session.
fn resolve_as(
    input: &SendMessageInput,
    sender: &str,
    profile: Profile,
    names: &NameRegistry,
    team: Option<&TeamRoster>,
) -> Result<Route, RouteError> {
    let known = |task: &TaskId| task.as_str() == "a1known01";
    let context = RouteContext {
        sender,
        profile,
        names,
        team,
        bridge_consent: false,
        task_known: &known,
    };
    resolve(input, &context)
}

#[test]
fn send_message_input_parses_text_and_structured_messages() {
    // Goal: both message forms parse. Method: JSON with a string and with a typed object.
    let text = SendMessageInput::from_json(json!({"to": "bob", "summary": "s", "message": "hi"}))
        .expect("text input");
    assert_eq!(text.message, MessageBody::Text("hi".into()));
    assert_eq!(text.summary.as_deref(), Some("s"));
    let structured = SendMessageInput::from_json(json!({
        "to": "lead",
        "message": {"type": "shutdown_response", "request_id": "shutdown-5@a0000lead",
                    "approve": false, "reason": "busy"}
    }))
    .expect("structured input");
    assert_eq!(
        structured.message,
        MessageBody::Structured(StructuredMessage::ShutdownResponse {
            request_id: RequestId::from_parts(RequestKind::Shutdown, 5, id(LEAD_ID)),
            approve: false,
            reason: Some("busy".into()),
        })
    );
    let request = SendMessageInput::from_json(json!({
        "to": "bob", "message": {"type": "shutdown_request"}
    }))
    .expect("shutdown request");
    assert_eq!(
        request.message,
        MessageBody::Structured(StructuredMessage::ShutdownRequest { reason: None })
    );
}

#[test]
fn send_message_input_is_parsed_strictly() {
    // Goal: nothing unknown slips in. Method: six malformed inputs, each an Input error.
    let cases = [
        json!({"to": "bob", "summary": "s", "message": "hi", "cc": "carol"}),
        json!({"to": "bob", "message": {"type": "shutdown_request", "reasn": "x"}}),
        json!({"to": "bob", "message": {"type": "dance"}}),
        json!({"to": "bob", "summary": "s", "message": 42}),
        json!({"to": "bob", "message": {"type": "shutdown_response", "request_id": "nope",
                                        "approve": true}}),
        json!({"summary": "s", "message": "hi"}),
    ];
    for case in cases {
        let error = SendMessageInput::from_json(case.clone()).expect_err("strict parse");
        assert!(
            matches!(error, RouteError::Input { .. }),
            "{case}: {error:?}"
        );
    }
    let error = SendMessageInput::from_json(json!({"to": "b", "summary": "s", "message": 1}))
        .expect_err("number message");
    assert!(
        error
            .to_string()
            .contains("string or a structured message object"),
        "{error}"
    );
}

#[test]
fn every_address_kind_parses() {
    // Goal: the five address forms. Method: parse_address on each, with consent for bridge.
    assert_eq!(parse_address("bob", false), Ok(Address::Name("bob".into())));
    assert_eq!(
        parse_address("a3kx9zq2", false),
        Ok(Address::Id(id("a3kx9zq2")))
    );
    assert_eq!(parse_address("*", false), Ok(Address::Broadcast));
    assert_eq!(
        parse_address("uds:/tmp/peer.sock", false),
        Ok(Address::Uds("/tmp/peer.sock".into()))
    );
    assert_eq!(
        parse_address("bridge:session-7", true),
        Ok(Address::Bridge("session-7".into()))
    );
}

#[test]
fn every_validation_rule_has_its_error() {
    // Goal: one typed error per rule. Method: a minimal breaking input per rule.
    let cases: Vec<(SendMessageInput, RouteError)> = vec![
        (text_input(""), RouteError::EmptyRecipient),
        (text_input("  "), RouteError::EmptyRecipient),
        (
            text_input("bob@team"),
            RouteError::RecipientHasAt {
                to: "bob@team".into(),
            },
        ),
        (text_input("uds:"), RouteError::EmptyUdsSocket),
        (text_input("bridge:"), RouteError::EmptyBridgeSession),
        (
            text_input("bridge:remote-1"),
            RouteError::BridgeNeedsConsent {
                session: "remote-1".into(),
            },
        ),
        (
            text_input("a/b"),
            RouteError::InvalidRecipient(NameError::BadCharacter {
                what: "recipient name",
                name: "a/b".into(),
                character: '/',
            }),
        ),
        (
            SendMessageInput {
                summary: None,
                ..text_input("bob")
            },
            RouteError::SummaryRequired,
        ),
        (
            SendMessageInput {
                summary: Some(" ".into()),
                ..text_input("bob")
            },
            RouteError::SummaryRequired,
        ),
        (
            structured_input("*", StructuredMessage::ShutdownRequest { reason: None }),
            RouteError::StructuredBroadcast {
                kind: StructuredKind::ShutdownRequest,
            },
        ),
        (
            structured_input(
                "lead",
                StructuredMessage::ShutdownResponse {
                    request_id: shutdown_id(),
                    approve: false,
                    reason: Some("   ".into()),
                },
            ),
            RouteError::Structured(StructuredError::RejectionWithoutReason {
                request_id: shutdown_id(),
            }),
        ),
        (
            structured_input(
                "lead",
                StructuredMessage::ShutdownResponse {
                    request_id: plan_id(),
                    approve: true,
                    reason: None,
                },
            ),
            RouteError::Structured(StructuredError::RequestKindMismatch {
                kind: StructuredKind::ShutdownResponse,
                expected: RequestKind::Shutdown,
                actual: RequestKind::PlanApproval,
                request_id: plan_id(),
            }),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(validate(&input, false), Err(expected), "input {input:?}");
    }
    // The same inputs pass once the rule is satisfied.
    assert_eq!(
        validate(&text_input("bridge:remote-1"), true),
        Ok(Address::Bridge("remote-1".into()))
    );
    assert_eq!(
        validate(&text_input("bob"), false),
        Ok(Address::Name("bob".into()))
    );
}

#[test]
fn name_registry_registers_resolves_and_unregisters() {
    // Goal: name → id, unique ignoring case. Method: register, clash, bad names, unregister.
    let mut names = NameRegistry::new();
    names.register("Alice", id("a1alice01")).expect("register");
    assert_eq!(names.resolve("alice"), Some(&id("a1alice01")));
    assert_eq!(names.resolve("ALICE"), Some(&id("a1alice01")));
    assert_eq!(names.canonical_name("aLiCe"), Some("Alice"));
    assert_eq!(
        names.register("alice", id("a1other01")),
        Err(NameRegistryError::Taken {
            name: "alice".into(),
            registered: "Alice".into(),
            holder: id("a1alice01"),
        })
    );
    assert_eq!(
        names.register("../x", id("a1other01")),
        Err(NameRegistryError::Invalid(NameError::BadCharacter {
            what: "agent name",
            name: "../x".into(),
            character: '/',
        }))
    );
    assert!(matches!(
        names.register("", id("a1other01")),
        Err(NameRegistryError::Invalid(NameError::Empty { .. }))
    ));
    assert_eq!(names.len(), 1);
    assert_eq!(names.unregister("ALICE"), Some(id("a1alice01")));
    assert_eq!(names.unregister("alice"), None);
    assert!(names.is_empty());
    names
        .register("alice", id("a1other01"))
        .expect("name free again");
    assert_eq!(names.resolve("Alice"), Some(&id("a1other01")));
}

#[test]
fn name_registry_iterates_in_name_order_whatever_the_insert_order() {
    // Goal: deterministic iteration. Method: two registries filled in opposite orders.
    let entries = [
        ("zed", "a1zed0001"),
        ("Bob", "a1bob0001"),
        ("amy", "a1amy0001"),
    ];
    let mut forward = NameRegistry::new();
    let mut backward = NameRegistry::new();
    for (name, task) in entries {
        forward.register(name, id(task)).expect("register");
    }
    for (name, task) in entries.iter().rev() {
        backward.register(name, id(task)).expect("register");
    }
    let order: Vec<&str> = forward.iter().map(|(name, _)| name).collect();
    assert_eq!(order, ["amy", "Bob", "zed"]);
    assert!(forward.iter().eq(backward.iter()));
}

#[test]
fn a_registered_name_wins_over_an_id_of_the_same_text() {
    // Goal: registry before ids. Method: an id-shaped name owned by another agent wins.
    let mut names = NameRegistry::new();
    names
        .register("a1known01", id("a1named01"))
        .expect("register");
    let route = resolve_as(
        &text_input("a1known01"),
        "lead",
        Profile::Hardened,
        &names,
        None,
    );
    assert_eq!(route, Ok(Route::Agent(id("a1named01"))));
    let empty = NameRegistry::new();
    let route = resolve_as(
        &text_input("a1known01"),
        "lead",
        Profile::Hardened,
        &empty,
        None,
    );
    assert_eq!(route, Ok(Route::Agent(id("a1known01"))));
}

#[test]
fn resolution_covers_every_route_kind() {
    // Goal: each Route variant. Method: resolve one input per kind, with a team.
    let mut names = NameRegistry::new();
    names.register("carol", id("a1carol01")).expect("register");
    let team = roster();
    let resolve_text = |to: &str| {
        resolve_as(
            &text_input(to),
            "lead",
            Profile::ClaudeCode,
            &names,
            Some(&team),
        )
    };
    assert_eq!(resolve_text("CAROL"), Ok(Route::Agent(id("a1carol01"))));
    assert_eq!(
        resolve_text("bob"),
        Ok(Route::Mailbox {
            team: "alpha".into(),
            agent: "Bob".into()
        })
    );
    assert_eq!(
        resolve_text("uds:/run/x.sock"),
        Ok(Route::Uds("/run/x.sock".into()))
    );
    assert_eq!(
        resolve_text("*"),
        Ok(Route::Broadcast {
            recipients: vec!["Bob".into(), "carol".into()]
        })
    );
    let known = |_: &TaskId| false;
    let context = RouteContext {
        sender: "lead",
        profile: Profile::ClaudeCode,
        names: &names,
        team: Some(&team),
        bridge_consent: true,
        task_known: &known,
    };
    assert_eq!(
        resolve(&text_input("bridge:far-1"), &context),
        Ok(Route::Bridge("far-1".into()))
    );
}

#[test]
fn broadcast_excludes_the_sender_ignoring_case_and_needs_a_team() {
    // Goal: `*` reaches everyone else. Method: sender "BOB" vs member "Bob"; no team.
    let names = NameRegistry::new();
    let team = roster();
    let route = resolve_as(&text_input("*"), "BOB", Profile::Nexo, &names, Some(&team));
    assert_eq!(
        route,
        Ok(Route::Broadcast {
            recipients: vec!["lead".into(), "carol".into()]
        })
    );
    let route = resolve_as(&text_input("*"), "bob", Profile::Nexo, &names, None);
    assert_eq!(route, Err(RouteError::BroadcastWithoutTeam));
}

#[test]
fn unknown_recipients_follow_the_profile() {
    // Goal: unknown `to` per profile. Method: unknown name and id, each profile, team or not.
    let names = NameRegistry::new();
    let team = roster();
    for to in ["dave", "a9zzzzzz"] {
        let unknown = Err(RouteError::UnknownRecipient { to: to.into() });
        assert_eq!(
            resolve_as(
                &text_input(to),
                "lead",
                Profile::Hardened,
                &names,
                Some(&team)
            ),
            unknown
        );
        for profile in [Profile::ClaudeCode, Profile::Nexo] {
            assert_eq!(
                resolve_as(&text_input(to), "lead", profile, &names, Some(&team)),
                Ok(Route::Mailbox {
                    team: "alpha".into(),
                    agent: to.into()
                })
            );
            assert_eq!(
                resolve_as(&text_input(to), "lead", profile, &names, None),
                unknown
            );
        }
    }
}

#[test]
fn shutdown_response_goes_only_to_the_team_lead() {
    // Goal: responses go only to the lead. Method: lead by name/id/mailbox vs others.
    let mut names = NameRegistry::new();
    names.register("lead", id(LEAD_ID)).expect("register");
    let team = roster();
    let response = StructuredMessage::ShutdownResponse {
        request_id: shutdown_id(),
        approve: true,
        reason: None,
    };
    let send = |to: &str, names: &NameRegistry, team: Option<&TeamRoster>| {
        resolve_as(
            &structured_input(to, response.clone()),
            "Bob",
            Profile::Nexo,
            names,
            team,
        )
    };
    assert_eq!(
        send("LEAD", &names, Some(&team)),
        Ok(Route::Agent(id(LEAD_ID)))
    );
    assert_eq!(
        send(LEAD_ID, &names, Some(&team)),
        Ok(Route::Agent(id(LEAD_ID)))
    );
    let no_names = NameRegistry::new();
    assert_eq!(
        send("lead", &no_names, Some(&team)),
        Ok(Route::Mailbox {
            team: "alpha".into(),
            agent: "lead".into()
        })
    );
    let not_lead = Err(RouteError::Structured(
        StructuredError::ShutdownResponseNotToLead,
    ));
    assert_eq!(send("carol", &names, Some(&team)), not_lead);
    assert_eq!(send("uds:/tmp/s", &names, Some(&team)), not_lead);
    assert_eq!(
        send("lead", &names, None),
        Err(RouteError::Structured(StructuredError::NoTeam {
            kind: StructuredKind::ShutdownResponse
        }))
    );
}

#[test]
fn plan_approval_response_comes_only_from_the_team_lead() {
    // Goal: only the lead approves plans. Method: lead, member, no-team senders.
    let names = NameRegistry::new();
    let team = roster();
    let approval = structured_input(
        "bob",
        StructuredMessage::PlanApprovalResponse {
            request_id: plan_id(),
            approve: false,
            feedback: Some("split the migration".into()),
        },
    );
    let mailbox = Ok(Route::Mailbox {
        team: "alpha".into(),
        agent: "Bob".into(),
    });
    assert_eq!(
        resolve_as(&approval, "Lead", Profile::Nexo, &names, Some(&team)),
        mailbox
    );
    assert_eq!(
        resolve_as(&approval, LEAD_ID, Profile::Nexo, &names, Some(&team)),
        mailbox
    );
    assert_eq!(
        resolve_as(&approval, "carol", Profile::Nexo, &names, Some(&team)),
        Err(RouteError::Structured(
            StructuredError::PlanApprovalNotFromLead
        ))
    );
    assert_eq!(
        resolve_as(&approval, "lead", Profile::Nexo, &names, None),
        Err(RouteError::Structured(StructuredError::NoTeam {
            kind: StructuredKind::PlanApprovalResponse
        }))
    );
}

#[test]
fn shutdown_request_and_approved_responses_validate() {
    // Goal: no over-refusal. Method: four valid messages validate and round-trip serde.
    let valid = [
        StructuredMessage::ShutdownRequest { reason: None },
        StructuredMessage::ShutdownResponse {
            request_id: shutdown_id(),
            approve: true,
            reason: None,
        },
        StructuredMessage::ShutdownResponse {
            request_id: shutdown_id(),
            approve: false,
            reason: Some("mid-migration".into()),
        },
        StructuredMessage::PlanApprovalResponse {
            request_id: plan_id(),
            approve: true,
            feedback: None,
        },
    ];
    for message in valid {
        assert_eq!(message.validate(), Ok(()), "{message:?}");
        let json = serde_json::to_value(&message).expect("serialize");
        assert_eq!(json["type"], message.kind().as_str());
        let back: StructuredMessage = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, message);
    }
}

#[test]
fn request_ids_use_the_world_clock_and_round_trip() {
    // Goal: ids from world.clock. Method: ManualClock ids, exact text, parse round trip.
    let clock = ManualClock::new(1_700_000_000_123);
    let agent = id("a3kx9zq2");
    let first = RequestId::generate(RequestKind::Shutdown, &agent, &clock);
    assert_eq!(first.to_string(), "shutdown-1700000000123@a3kx9zq2");
    clock.advance(std::time::Duration::from_millis(7));
    let second = RequestId::generate(RequestKind::PlanApproval, &agent, &clock);
    assert_eq!(second.to_string(), "plan_approval-1700000000130@a3kx9zq2");
    assert_eq!(second.unix_ms(), clock.unix_ms());
    for kind in RequestKind::ALL {
        let generated = RequestId::generate(kind, &id("aworker-0123abcd"), &clock);
        let text = generated.to_string();
        assert_eq!(RequestId::parse(&text), Ok(generated.clone()), "{text}");
        assert_eq!(generated.kind(), kind);
        assert_eq!(generated.agent(), &id("aworker-0123abcd"));
        let json = serde_json::to_string(&generated).expect("serialize");
        assert_eq!(json, format!("\"{text}\""));
    }
}

#[test]
fn malformed_request_ids_are_refused_with_the_reason() {
    // Goal: the validator names what is wrong. Method: one malformed id per error kind.
    assert!(matches!(
        RequestId::parse("shutdown-12"),
        Err(RequestIdError::MissingAgent { .. })
    ));
    assert!(matches!(
        RequestId::parse("shutdown@a3kx9zq2"),
        Err(RequestIdError::MissingMillis { .. })
    ));
    assert!(matches!(
        RequestId::parse("reboot-12@a3kx9zq2"),
        Err(RequestIdError::UnknownKind { kind, .. }) if kind == "reboot"
    ));
    for millis in ["", "12x", "012", "+12", "99999999999999999999"] {
        let text = format!("shutdown-{millis}@a3kx9zq2");
        assert!(
            matches!(
                RequestId::parse(&text),
                Err(RequestIdError::BadMillis { .. })
            ),
            "{text}"
        );
    }
    assert!(matches!(
        RequestId::parse("shutdown-12@bob"),
        Err(RequestIdError::BadAgent { .. })
    ));
    assert!(matches!(
        RequestId::parse("shutdown-12@a3kx9zq2@a3kx9zq2"),
        Err(RequestIdError::BadMillis { .. })
    ));
}

proptest! {
    #[test]
    fn request_ids_round_trip(kind_index in 0usize..3, unix_ms: u64, body in "[0-9a-z]{8}") {
        // Goal: print-then-parse is the identity. Method: random kind, millis, agent id.
        let kind = RequestKind::ALL[kind_index];
        let request_id = RequestId::from_parts(kind, unix_ms, id(&format!("t{body}")));
        let text = request_id.to_string();
        prop_assert_eq!(RequestId::parse(&text), Ok(request_id), "repro: {}", text);
    }
}

// ---- SendMessageToWorker ----

/// The binding most calls use.
fn binding_a() -> BindingKey {
    BindingKey::new("telegram", Some("ops"))
}

/// Another binding.
fn binding_b() -> BindingKey {
    BindingKey::new("slack", None)
}

fn worker_input(worker_id: &str, message: &str) -> SendMessageToWorkerInput {
    SendMessageToWorkerInput {
        worker_id: worker_id.into(),
        message: message.into(),
    }
}

fn coordinator(binding: Option<&BindingKey>) -> WorkerCaller<'_> {
    WorkerCaller {
        role: Role::Coordinator,
        binding,
    }
}

/// Workers: `a1done001` (completed) and `a1busy001` (running) under binding A,
/// `a1othr001` (completed) under binding B.
fn bindings() -> WorkerBindings {
    let mut bindings = WorkerBindings::new();
    assert!(bindings.bind(binding_a(), id("a1done001")));
    assert!(bindings.bind(binding_a(), id("a1busy001")));
    assert!(bindings.bind(binding_b(), id("a1othr001")));
    assert!(!bindings.bind(binding_b(), id("a1othr001")));
    bindings
}

fn status(task: &TaskId) -> WorkerState {
    match task.as_str() {
        "a1busy001" => WorkerState::Live(TaskStatus::Running),
        "a1pend001" => WorkerState::Live(TaskStatus::Pending),
        "a1evic001" => WorkerState::Evicted,
        "a1gone001" => WorkerState::Unknown,
        _ => WorkerState::Live(TaskStatus::Completed),
    }
}

#[test]
fn a_worker_is_visible_only_from_the_binding_that_spawned_it() {
    // Goal: invariant 10 for TaskList and TaskGet: a bound worker is its binding's
    // alone, an unbound task (a shell) everyone's. Method: the fixture's bindings,
    // seen from A, from B and from no binding.
    let bindings = bindings();
    let (a, b) = (binding_a(), binding_b());
    assert!(bindings.visible_from(Some(&a), &id("a1done001")));
    assert!(!bindings.visible_from(Some(&b), &id("a1done001")));
    assert!(!bindings.visible_from(None, &id("a1done001")));
    assert!(bindings.visible_from(Some(&b), &id("a1othr001")));
    assert!(!bindings.visible_from(Some(&a), &id("a1othr001")));
    for current in [Some(&a), Some(&b), None] {
        assert!(bindings.visible_from(current, &id("b1shel001")));
    }
}

#[test]
fn binding_keys_fill_in_the_default_account() {
    // Goal: `<channel>:<account|default>`. Method: with and without an account.
    assert_eq!(binding_a().as_str(), "telegram:ops");
    assert_eq!(binding_b().as_str(), "slack:default");
    assert_eq!(BindingKey::new("slack", Some("default")), binding_b());
}

#[test]
fn step_1_a_non_coordinator_is_refused_first() {
    // Goal: role first. Method: non-coordinators with inputs breaking every later rule.
    let mut bindings = bindings();
    for role in [Role::Solo, Role::Worker, Role::UnsupervisedFork] {
        let caller = WorkerCaller {
            role,
            binding: None,
        };
        let input = worker_input("", &"x".repeat(MESSAGE_BYTES_MAX + 1));
        assert_eq!(
            bindings.continue_worker(caller, &input, &status),
            Err(WorkerSendError::RoleRefused { role })
        );
        let raw = json!({"worker_id": 3, "bogus": true});
        assert_eq!(
            bindings.continue_worker_json(caller, raw, &status),
            Err(WorkerSendError::RoleRefused { role })
        );
    }
}

#[test]
fn step_1_holds_even_when_allowed_tools_are_a_wildcard() {
    // Goal: `*` does not bypass the role. Method: a `*` worker surface, still refused.
    let surface = ToolSurface::for_role(Role::Worker, Profile::Nexo).restricted_to(&["*".into()]);
    assert!(surface.allows(ToolName::SendMessageToWorker));
    let mut bindings = bindings();
    let binding = binding_a();
    let caller = WorkerCaller {
        role: Role::Worker,
        binding: Some(&binding),
    };
    assert_eq!(
        bindings.continue_worker(caller, &worker_input("a1done001", "go on"), &status),
        Err(WorkerSendError::RoleRefused { role: Role::Worker })
    );
    assert_eq!(bindings.messages_count(&binding, &id("a1done001")), Some(0));
}

#[test]
fn step_2_blank_fields_and_bad_input_are_wire_errors() {
    // Goal: wire errors second. Method: blank id/message and bad JSON beat a huge message.
    let mut bindings = bindings();
    let huge = "x".repeat(MESSAGE_BYTES_MAX + 1);
    assert_eq!(
        bindings.continue_worker(coordinator(None), &worker_input(" \t", &huge), &status),
        Err(WorkerSendError::Wire {
            source: WireError::BlankWorkerId
        })
    );
    assert_eq!(
        bindings.continue_worker(
            coordinator(None),
            &worker_input("a1done001", "\n "),
            &status
        ),
        Err(WorkerSendError::Wire {
            source: WireError::BlankMessage
        })
    );
    let raw = json!({"worker_id": "a1done001", "message": "hi", "priority": 1});
    assert!(matches!(
        bindings.continue_worker_json(coordinator(None), raw, &status),
        Err(WorkerSendError::Wire {
            source: WireError::Input { .. }
        })
    ));
}

#[test]
fn step_3_a_message_over_32_kib_is_too_large() {
    // Goal: the 32 KiB cap, third. Method: exactly 32 KiB passes it, one byte more fails.
    let mut bindings = bindings();
    assert_eq!(MESSAGE_BYTES_MAX, 32 * 1024);
    let at_cap = "é".repeat(MESSAGE_BYTES_MAX / 2);
    assert_eq!(at_cap.len(), MESSAGE_BYTES_MAX);
    assert_eq!(
        bindings.continue_worker(
            coordinator(None),
            &worker_input("a1done001", &at_cap),
            &status
        ),
        Err(WorkerSendError::BindingUnresolved)
    );
    let over = format!("{at_cap}!");
    assert_eq!(
        bindings.continue_worker(
            coordinator(None),
            &worker_input("a1done001", &over),
            &status
        ),
        Err(WorkerSendError::MessageTooLarge {
            message_bytes: MESSAGE_BYTES_MAX + 1,
            message_bytes_max: MESSAGE_BYTES_MAX,
        })
    );
}

#[test]
fn step_4_no_binding_is_binding_unresolved() {
    // Goal: binding fourth. Method: an existing worker asked with no binding.
    let mut bindings = bindings();
    assert_eq!(
        bindings.continue_worker(coordinator(None), &worker_input("a1done001", "hi"), &status),
        Err(WorkerSendError::BindingUnresolved)
    );
}

#[test]
fn step_5_unknown_workers_are_unknown() {
    // Goal: not found → UnknownWorker. Method: missing id, non-id, bound but gone.
    let mut bindings = bindings();
    assert!(bindings.bind(binding_a(), id("a1gone001")));
    let binding = binding_a();
    for worker_id in ["a1none001", "not-an-id", "a1gone001"] {
        assert_eq!(
            bindings.continue_worker(
                coordinator(Some(&binding)),
                &worker_input(worker_id, "hi"),
                &status
            ),
            Err(WorkerSendError::UnknownWorker {
                worker_id: worker_id.into()
            })
        );
    }
}

#[test]
fn step_6_running_or_pending_workers_are_still_running() {
    // Goal: a live worker is not continued. Method: running and pending workers.
    let mut bindings = bindings();
    assert!(bindings.bind(binding_a(), id("a1pend001")));
    let binding = binding_a();
    for (worker_id, state) in [
        ("a1busy001", TaskStatus::Running),
        ("a1pend001", TaskStatus::Pending),
    ] {
        assert_eq!(
            bindings.continue_worker(
                coordinator(Some(&binding)),
                &worker_input(worker_id, "hi"),
                &status
            ),
            Err(WorkerSendError::WorkerStillRunning {
                worker_id: id(worker_id),
                status: state,
            })
        );
        assert_eq!(bindings.messages_count(&binding, &id(worker_id)), Some(0));
    }
}

#[test]
fn step_7_finished_workers_continue_and_count_messages() {
    // Goal: Continued's fields. Method: two continuations of a done worker, one evicted.
    let mut bindings = bindings();
    assert!(bindings.bind(binding_a(), id("a1evic001")));
    let binding = binding_a();
    let caller = coordinator(Some(&binding));
    let first = bindings.continue_worker(caller, &worker_input("a1done001", "next"), &status);
    assert_eq!(
        first,
        Ok(Continued {
            worker_id: id("a1done001"),
            prior_status: Some(TaskStatus::Completed),
            messages_count: 1,
            message_bytes: 4,
        })
    );
    let second = bindings
        .continue_worker(caller, &worker_input("a1done001", "and then"), &status)
        .expect("second continuation");
    assert_eq!(second.messages_count, 2);
    assert_eq!(second.message_bytes, 8);
    let evicted = bindings
        .continue_worker_json(
            caller,
            json!({"worker_id": "a1evic001", "message": "wake"}),
            &status,
        )
        .expect("evicted continuation");
    assert_eq!(evicted.prior_status, None);
    assert_eq!(evicted.messages_count, 1);
}

#[test]
fn worker_status_can_come_from_the_task_registry() {
    // Goal: the TaskRegistry adapter. Method: a real registry, one running, one failed.
    let mut registry = TaskRegistry::new(Arc::new(MemoryJournal::new()));
    for task in ["a1busy002", "a1fail002"] {
        registry.insert(TaskState::new(id(task), "work", PathBuf::from("/tmp/x"), 0));
        registry
            .transition(&id(task), TaskStatus::Running, 1)
            .expect("start");
    }
    registry
        .transition(&id("a1fail002"), TaskStatus::Failed, 2)
        .expect("fail");
    let mut bindings = WorkerBindings::new();
    let binding = binding_a();
    bindings.bind(binding.clone(), id("a1busy002"));
    bindings.bind(binding.clone(), id("a1fail002"));
    let caller = coordinator(Some(&binding));
    assert!(matches!(
        bindings.continue_worker(caller, &worker_input("a1busy002", "hi"), &registry),
        Err(WorkerSendError::WorkerStillRunning { .. })
    ));
    let continued = bindings
        .continue_worker(caller, &worker_input("a1fail002", "retry"), &registry)
        .expect("failed worker continues");
    assert_eq!(continued.prior_status, Some(TaskStatus::Failed));
}

/// The error's `Display` text and serialized JSON.
fn error_bytes(error: &WorkerSendError) -> (String, String) {
    (
        error.to_string(),
        serde_json::to_string(error).expect("serialize"),
    )
}

#[test]
fn another_bindings_worker_is_byte_identical_to_a_missing_one() {
    // Goal: no existence oracle. Method: B's worker asked from A vs never bound; same bytes.
    let binding = binding_a();
    let mut with_other = bindings();
    let mut without = WorkerBindings::new();
    let input = worker_input("a1othr001", "hi");
    let cross = with_other
        .continue_worker(coordinator(Some(&binding)), &input, &status)
        .expect_err("cross-binding");
    let missing = without
        .continue_worker(coordinator(Some(&binding)), &input, &status)
        .expect_err("missing");
    assert_eq!(error_bytes(&cross), error_bytes(&missing));
    assert_eq!(
        error_bytes(&cross).1,
        r#"{"error":"unknown_worker","worker_id":"a1othr001"}"#
    );
}

/// One generated SendMessageToWorker call.
#[derive(Debug, Clone)]
struct Call {
    role: Role,
    /// Index into the bindings, or `None` for an unresolved binding.
    binding: Option<usize>,
    worker_id: String,
    message: String,
}

/// The workers of a generated registry: `(binding index, id, status)`.
type Setup = Vec<(usize, String, WorkerState)>;

const BINDING_POOL: [(&str, Option<&str>); 3] = [
    ("telegram", Some("ops")),
    ("telegram", None),
    ("slack", Some("ops")),
];

const WORKER_POOL: [&str; 5] = [
    "a1wrk0001",
    "a1wrk0002",
    "t1wrk0003",
    "a1wrk0004",
    "a1wrk0005",
];

fn state_strategy() -> impl Strategy<Value = WorkerState> {
    prop_oneof![
        Just(WorkerState::Live(TaskStatus::Pending)),
        Just(WorkerState::Live(TaskStatus::Running)),
        Just(WorkerState::Live(TaskStatus::Completed)),
        Just(WorkerState::Live(TaskStatus::Failed)),
        Just(WorkerState::Live(TaskStatus::Killed)),
        Just(WorkerState::Evicted),
        Just(WorkerState::Unknown),
    ]
}

fn call_strategy() -> impl Strategy<Value = Call> {
    let role = prop_oneof![
        3 => Just(Role::Coordinator),
        1 => Just(Role::Worker),
        1 => Just(Role::Solo),
        1 => Just(Role::UnsupervisedFork),
    ];
    let worker_id = prop_oneof![
        4 => (0..WORKER_POOL.len()).prop_map(|index| WORKER_POOL[index].to_owned()),
        1 => Just(String::new()),
        1 => Just("  ".to_owned()),
        1 => "[a-z0-9 ]{1,12}",
    ];
    let message = prop_oneof![
        4 => "[a-z ]{1,40}",
        1 => Just(" \n".to_owned()),
        1 => Just("m".repeat(MESSAGE_BYTES_MAX)),
        1 => Just("m".repeat(MESSAGE_BYTES_MAX + 1)),
    ];
    (
        role,
        proptest::option::weighted(0.85, 0..BINDING_POOL.len()),
        worker_id,
        message,
    )
        .prop_map(|(role, binding, worker_id, message)| Call {
            role,
            binding,
            worker_id,
            message,
        })
}

fn setup_strategy() -> impl Strategy<Value = Setup> {
    proptest::collection::vec(
        (
            0..BINDING_POOL.len(),
            0..WORKER_POOL.len(),
            state_strategy(),
        ),
        0..8,
    )
    .prop_map(|entries| {
        // A worker belongs to one binding and has one state: keep the first draw of each.
        let mut seen = std::collections::BTreeSet::new();
        entries
            .into_iter()
            .filter(|(_, worker, _)| seen.insert(*worker))
            .map(|(binding, worker, state)| (binding, WORKER_POOL[worker].to_owned(), state))
            .collect()
    })
}

fn pool_binding(index: usize) -> BindingKey {
    let (channel, account) = BINDING_POOL[index];
    BindingKey::new(channel, account)
}

/// The ordered rule list, written independently of the implementation.
fn predict(setup: &Setup, call: &Call) -> Result<(Option<TaskStatus>, u64), WorkerSendError> {
    if call.role != Role::Coordinator {
        return Err(WorkerSendError::RoleRefused { role: call.role });
    }
    if call.worker_id.trim().is_empty() {
        return Err(WorkerSendError::Wire {
            source: WireError::BlankWorkerId,
        });
    }
    if call.message.trim().is_empty() {
        return Err(WorkerSendError::Wire {
            source: WireError::BlankMessage,
        });
    }
    if call.message.len() > 32 * 1024 {
        return Err(WorkerSendError::MessageTooLarge {
            message_bytes: call.message.len(),
            message_bytes_max: 32 * 1024,
        });
    }
    let Some(binding) = call.binding else {
        return Err(WorkerSendError::BindingUnresolved);
    };
    let unknown = WorkerSendError::UnknownWorker {
        worker_id: call.worker_id.clone(),
    };
    let binding_key = pool_binding(binding).to_string();
    let entry = setup.iter().find(|(owner, worker, _)| {
        pool_binding(*owner).to_string() == binding_key && *worker == call.worker_id
    });
    match entry {
        None | Some((_, _, WorkerState::Unknown)) => Err(unknown),
        Some((
            _,
            worker,
            WorkerState::Live(status @ (TaskStatus::Pending | TaskStatus::Running)),
        )) => Err(WorkerSendError::WorkerStillRunning {
            worker_id: id(worker),
            status: *status,
        }),
        Some((_, _, WorkerState::Live(status))) => Ok((Some(*status), 1)),
        Some((_, _, WorkerState::Evicted)) => Ok((None, 1)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn worker_calls_follow_the_ordered_rules(setup in setup_strategy(), call in call_strategy()) {
        // Goal: outcomes match the ordered rules, no oracle. Method: random setups vs `predict`.
        let mut bindings = WorkerBindings::new();
        for (binding, worker, _) in &setup {
            bindings.bind(pool_binding(*binding), id(worker));
        }
        let states: std::collections::BTreeMap<String, WorkerState> = setup
            .iter()
            .map(|(_, worker, state)| (worker.clone(), *state))
            .collect();
        let status = |task: &TaskId| states.get(task.as_str()).copied().unwrap_or(WorkerState::Unknown);
        let binding = call.binding.map(pool_binding);
        let caller = WorkerCaller { role: call.role, binding: binding.as_ref() };
        let input = worker_input(&call.worker_id, &call.message);
        let outcome = bindings.continue_worker(caller, &input, &status);
        let predicted = predict(&setup, &call);
        match (&outcome, &predicted) {
            (Ok(continued), Ok((prior_status, messages_count))) => {
                prop_assert_eq!(continued.worker_id.as_str(), call.worker_id.as_str());
                prop_assert_eq!(continued.prior_status, *prior_status);
                prop_assert_eq!(continued.messages_count, *messages_count);
                prop_assert_eq!(continued.message_bytes, call.message.len());
            }
            (Err(error), Err(expected)) => {
                prop_assert_eq!(error_bytes(error), error_bytes(expected), "call {:?}", call);
            }
            _ => prop_assert!(false, "call {:?}: got {:?}, predicted {:?}", call, outcome, predicted),
        }
        let in_other_binding = setup.iter().any(|(owner, worker, _)| {
            *worker == call.worker_id && Some(pool_binding(*owner)) != binding
        });
        if in_other_binding {
            if let Err(error @ WorkerSendError::UnknownWorker { .. }) = &outcome {
                let missing = WorkerBindings::new()
                    .continue_worker(caller, &input, &status)
                    .expect_err("an empty registry knows no worker");
                prop_assert_eq!(error_bytes(error), error_bytes(&missing));
            }
        }
    }
}
