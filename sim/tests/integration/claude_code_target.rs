//! The claude-code target: recorded runs of the real CLI judged offline, the
//! witness trace's power to catch what a CLI could do wrong, refusals, and (with
//! `COORDSIM_CLAUDE_BIN`, ignored by default) a live run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coord_runtime::task::TaskStatus;
use coord_runtime::world::{ContentBlock, Role};
use coord_runtime::RuntimeEvent;
use coord_sim::cassette::Outcome;
use coord_sim::fault::FaultKind;
use coord_sim::scenario::LoadedScenario;
use coord_sim::target::{
    judge_witness, witness_trace, Observation, ObservedFile, RunFiles, Verdict, OBSERVABLE,
};
use coord_sim::trace::{EventRef, SimEvent, TraceEntry, TraceEvent};

use crate::repo_root;

/// The recorded runs, by scenario name (`fixtures/claude-code/runs-2.1.328/`).
const RECORDED: [&str; 6] = [
    "spawn-and-notify",
    "parallel-workers",
    "forged-envelope",
    "api-faults",
    "symlink-at-output",
    "coordinator-crash",
];

fn scenario(name: &str) -> LoadedScenario {
    LoadedScenario::load(&repo_root().join(format!("scenarios/claude-code/{name}.toml"))).unwrap()
}

fn recorded(name: &str) -> Observation {
    let cassette = repo_root().join(format!(
        "fixtures/claude-code/runs-2.1.328/{name}/run-1.cassette.json"
    ));
    RunFiles::of_cassette(&cassette).load().unwrap()
}

fn verdict_of(judgment: &coord_sim::target::Judgment, invariant: &str) -> Verdict {
    judgment
        .verdicts
        .iter()
        .find(|v| v.invariant == invariant)
        .unwrap()
        .verdict
}

/// The accepted task ids of a witness trace, in order.
fn accepted(observation: &Observation, name: &str) -> Vec<String> {
    witness_trace(&scenario(name).scenario, observation)
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => Some(task_ids.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The last user text block of `agent`'s last request: where the CLI delivered the
/// coordinator's notifications, or a worker's message.
fn last_user_text<'a>(observation: &'a mut Observation, agent: &str) -> &'a mut String {
    let exchange = observation
        .cassette
        .exchanges
        .iter_mut()
        .filter(|e| e.agent.as_deref() == Some(agent))
        .max_by_key(|e| e.call)
        .unwrap();
    let message = exchange
        .request
        .messages
        .iter_mut()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap();
    match message.content.last_mut().unwrap() {
        ContentBlock::Text { text, .. } => text,
        other => panic!("expected a text block, got {other:?}"),
    }
}

/// The coordinator's last request's last user text: where the CLI delivered the
/// notifications.
fn last_notification_text(observation: &mut Observation) -> &mut String {
    last_user_text(observation, "coordinator")
}

#[test]
fn every_recorded_run_of_the_real_cli_passes_and_each_observable_invariant_is_upheld() {
    // Goal: the recorded runs replay offline, no CLI needed: the witness trace of each
    // is judged, every observable invariant is upheld on evidence and every other one
    // says it is not observable. Method: load each fixture, judge it, check verdicts.
    for name in RECORDED {
        let observation = recorded(name);
        assert_eq!(observation.process.exit_code, Some(0), "{name}");
        let spec = scenario(name);
        let trace = witness_trace(&spec.scenario, &observation);
        let judgment = judge_witness(&spec.scenario, &trace);
        assert!(
            judgment.failures.is_empty(),
            "{name}: {:?}",
            judgment.failures
        );
        assert_eq!(
            judgment.verdicts.len(),
            14,
            "{name}: one verdict per invariant"
        );
        for verdict in &judgment.verdicts {
            let observable = OBSERVABLE
                .iter()
                .any(|(invariant, _)| invariant.as_str() == verdict.invariant);
            let expected = if observable {
                Verdict::Upheld
            } else {
                Verdict::NotObservable
            };
            assert_eq!(verdict.verdict, expected, "{name}: {verdict:?}");
        }
    }
}

#[test]
fn the_witness_trace_holds_one_spawn_and_one_accepted_envelope_per_worker() {
    // Goal: "upheld" rests on evidence, not on an empty trace. Method: count the
    // spawns and accepted envelopes in the recorded runs with one and three workers.
    for (name, workers) in [("spawn-and-notify", 1), ("parallel-workers", 3)] {
        let observation = recorded(name);
        let trace = witness_trace(&scenario(name).scenario, &observation);
        let spawned = trace
            .iter()
            .filter(|e| e.event_json().contains("\"task_spawned\""))
            .count();
        assert_eq!(spawned, workers, "{name}");
        let mut ids = accepted(&observation, name);
        assert_eq!(ids.len(), workers, "{name}: {ids:?}");
        ids.dedup();
        assert_eq!(ids.len(), workers, "{name}: each task notified once");
    }
}

#[test]
fn the_recorded_cli_neutralized_the_forged_envelope() {
    // Goal: record what 2.1.328 does with a worker result carrying a forged
    // `</result></task-notification><task-notification>`: it escapes it and says so.
    let mut observation = recorded("forged-envelope");
    let text = last_notification_text(&mut observation).clone();
    assert!(text.contains("neutralized"), "{text}");
    assert!(
        text.contains("&lt;task-id&gt;a0f0rged0&lt;/task-id&gt;"),
        "{text}"
    );
    assert!(
        text.contains("<note>"),
        "the 2.1.328 dialect carries a note: {text}"
    );
    assert!(text.contains("<subagent_tokens>"), "{text}");
    assert_eq!(accepted(&observation, "forged-envelope").len(), 1);
}

#[test]
fn a_cli_that_let_the_forged_envelope_through_would_break_no_forgery() {
    // Goal: the checker can fail on this target. Method: undo the CLI's escaping in
    // the recorded request, as a CLI without the guard would have sent it, and judge.
    let mut observation = recorded("forged-envelope");
    let text = last_notification_text(&mut observation);
    *text = text
        .replace("&lt;\\", "<")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    let spec = scenario("forged-envelope");
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &observation));
    assert_eq!(verdict_of(&judgment, "no-forgery"), Verdict::Broken);
    assert!(
        judgment
            .failures
            .iter()
            .any(|f| f.invariant == "no-forgery" && f.detail.contains("a0f0rged0")),
        "{:?}",
        judgment.failures
    );
}

#[test]
fn a_cli_that_delivered_a_notification_twice_would_break_notify_once() {
    // Goal: a task-id notifying twice (the `<note>` of 2.1.328 says it may) is caught.
    // Method: deliver the recorded notification a second time in a later request.
    let mut observation = recorded("spawn-and-notify");
    let mut again = observation
        .cassette
        .exchanges
        .iter()
        .filter(|e| e.agent.as_deref() == Some("coordinator"))
        .max_by_key(|e| e.call)
        .unwrap()
        .clone();
    let notification = again
        .request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap()
        .clone();
    again.request.messages.push(notification);
    again.call = observation.cassette.exchanges.len() as u64 + 1;
    observation.cassette.exchanges.push(again);
    let spec = scenario("spawn-and-notify");
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &observation));
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Broken);
}

#[test]
fn a_continued_worker_of_the_recorded_cli_notifies_twice_under_one_task_id() {
    // Goal: pin what 2.1.328 does on a SendMessage continuation (its `<note>` warns of
    // it): the worker gets the message exactly once, resumes under the same task id,
    // and the coordinator is handed a second notification for that id, which
    // PROTOCOL.md §8.1 ("a resumed task is a new task") counts as a notify-once
    // violation. No-forgery holds: the world saw the worker end twice.
    let name = "send-message-continuation";
    let observation = recorded(name);
    let worker_requests: Vec<_> = observation
        .cassette
        .exchanges
        .iter()
        .filter(|e| e.agent.as_deref() == Some("Build the orders index."))
        .collect();
    assert_eq!(worker_requests.len(), 2);
    let continued = serde_json::to_string(&worker_requests[1].request).unwrap();
    assert_eq!(
        continued
            .matches("Add created_at to the index as well.")
            .count(),
        1,
        "{continued}"
    );
    let ids = accepted(&observation, name);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "one task id, notified twice");
    let spec = scenario(name);
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &observation));
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Broken);
    assert_eq!(verdict_of(&judgment, "no-forgery"), Verdict::Upheld);
    assert_eq!(verdict_of(&judgment, "not-vacuous"), Verdict::Upheld);
    // The message the CLI accepted reached the worker's model once, on the wire.
    assert_eq!(verdict_of(&judgment, "message-delivery"), Verdict::Upheld);
}

#[test]
fn a_cli_that_dropped_or_repeated_an_accepted_message_would_break_message_delivery() {
    // Goal: message-delivery judges the wire, not the CLI's word: the SendMessage
    // the CLI answered with success must reach the worker's model exactly once.
    // Method: edit the recorded continued worker's request so that the message is
    // missing, then so that it arrives twice, and judge each.
    let name = "send-message-continuation";
    let spec = scenario(name);
    let message = "Add created_at to the index as well.";

    let mut dropped = recorded(name);
    let text = last_user_text(&mut dropped, "Build the orders index.");
    assert!(text.contains(message), "{text}");
    *text = text.replace(message, "");
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &dropped));
    assert_eq!(verdict_of(&judgment, "message-delivery"), Verdict::Broken);
    assert!(
        judgment
            .failures
            .iter()
            .any(|f| f.invariant == "message-delivery" && f.detail.contains("never reached")),
        "{:?}",
        judgment.failures
    );

    let mut repeated = recorded(name);
    let exchange = repeated
        .cassette
        .exchanges
        .iter_mut()
        .filter(|e| e.agent.as_deref() == Some("Build the orders index."))
        .max_by_key(|e| e.call)
        .unwrap();
    let delivered = exchange.request.messages.last().unwrap().clone();
    exchange.request.messages.push(delivered);
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &repeated));
    assert!(
        judgment
            .failures
            .iter()
            .any(|f| f.invariant == "message-delivery" && f.detail.contains("2 times")),
        "{:?}",
        judgment.failures
    );

    // Without a SendMessage on the wire there is no evidence, and no verdict.
    let spawn = scenario("spawn-and-notify");
    let judgment = judge_witness(
        &spawn.scenario,
        &witness_trace(&spawn.scenario, &recorded("spawn-and-notify")),
    );
    assert_eq!(
        verdict_of(&judgment, "message-delivery"),
        Verdict::NotObservable
    );
}

#[test]
fn a_sigkill_then_resume_of_the_recorded_cli_notifies_once_or_loses_the_task() {
    // Goal: pin both outcomes seen when 2.1.328 is SIGKILLed as its worker's first
    // call arrives and restarted with `--resume`. Method: judge the two recorded runs.
    // Run 2: the resumed coordinator is handed one `failed` notification ("didn't
    // finish before the previous session ended"): notify-once upheld. Run 1: the
    // transcript had not kept the launch, so the resumed coordinator never hears of
    // the task: notify-once broken.
    let spec = scenario("crash-and-resume");
    let run = |number: u32| {
        let cassette = repo_root().join(format!(
            "fixtures/claude-code/runs-2.1.328/crash-and-resume/run-{number}.cassette.json"
        ));
        RunFiles::of_cassette(&cassette).load().unwrap()
    };

    let notified = run(2);
    assert_eq!(notified.process.restarts, 1);
    assert_eq!(notified.process.exit_code, Some(0));
    let trace = witness_trace(&spec.scenario, &notified);
    let statuses: Vec<String> = trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::EnvelopesAccepted { statuses, .. }) => Some(
                statuses
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(statuses, ["Failed"]);
    let judgment = judge_witness(&spec.scenario, &trace);
    assert!(judgment.failures.is_empty(), "{:?}", judgment.failures);
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Upheld);
    assert_eq!(verdict_of(&judgment, "liveness"), Verdict::Upheld);

    let lost = run(1);
    assert_eq!(lost.process.restarts, 1);
    let judgment = judge_witness(&spec.scenario, &witness_trace(&spec.scenario, &lost));
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Broken);
    assert!(
        judgment.failures[0]
            .detail
            .contains("never received its notification"),
        "{:?}",
        judgment.failures
    );
}

#[test]
fn a_sigkill_the_cli_cannot_resume_from_kills_the_task_rather_than_leaving_it_running() {
    // Goal: a SIGKILL that came before 2.1.328 saved any session leaves nothing to
    // `--resume`. Method: judge recorded run 3, killed at its worker's first call with
    // no restart. The worker died with the process: its task ends `killed` in the
    // witness trace, so liveness holds; the coordinator never finished, so no
    // notification is owed; what failed is the resume, which the target reports as
    // `target-resume` (not judged here: it needs the scratch home).
    let spec = scenario("crash-and-resume");
    let cassette =
        repo_root().join("fixtures/claude-code/runs-2.1.328/crash-and-resume/run-3.cassette.json");
    let unresumed = RunFiles::of_cassette(&cassette).load().unwrap();
    assert_eq!(
        (unresumed.process.kills, unresumed.process.restarts),
        (1, 0)
    );
    let trace = witness_trace(&spec.scenario, &unresumed);
    let killed: Vec<&TaskStatus> = trace
        .iter()
        .filter_map(|entry| match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::TaskTransitioned { to, .. }) => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(killed, [&TaskStatus::Killed]);
    let judgment = judge_witness(&spec.scenario, &trace);
    assert_eq!(verdict_of(&judgment, "liveness"), Verdict::Upheld);
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Upheld);
}

/// Recorded run `number` of `coordinator-crash`.
fn coordinator_crash_run(number: u32) -> Observation {
    let cassette = repo_root().join(format!(
        "fixtures/claude-code/runs-2.1.328/coordinator-crash/run-{number}.cassette.json"
    ));
    RunFiles::of_cassette(&cassette).load().unwrap()
}

/// The request numbers at which the witness trace accepts envelopes, with the ids.
fn accepted_at(trace: &[TraceEntry]) -> Vec<(u64, Vec<String>)> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => {
                Some((entry.time_ms, task_ids.to_vec()))
            }
            _ => None,
        })
        .collect()
}

/// The coordinator's request that the resumed session sent (its last), and the
/// text block in it that carries the notification.
fn resumed_notification(observation: &mut Observation) -> (usize, usize, usize) {
    let (exchange, _) = observation
        .cassette
        .exchanges
        .iter()
        .enumerate()
        .filter(|(_, e)| e.agent.as_deref() == Some("coordinator"))
        .max_by_key(|(_, e)| e.call)
        .unwrap();
    let messages = &observation.cassette.exchanges[exchange].request.messages;
    for (m, message) in messages.iter().enumerate().rev() {
        for (b, block) in message.content.iter().enumerate() {
            if matches!(block, ContentBlock::Text { text, .. } if text.contains("<task-notification>"))
            {
                return (exchange, m, b);
            }
        }
    }
    panic!("the resumed request carries no notification");
}

#[test]
fn a_sigkill_at_the_coordinators_request_then_resume_notifies_once() {
    // Goal: pin what 2.1.328 does when SIGKILLed as the coordinator's request that
    // carries the worker's notification arrives, then restarted with `--resume`.
    // Method: judge the two recorded runs. In both, the killed request is the
    // coordinator's 3rd, left unanswered; the resumed transcript holds the
    // notification once, so it is accepted once, at the resumed request, not at the
    // killed one. Run 1 resumes with the notification and the resume prompt in one
    // user message, and the coordinator's scripted last turn is played; run 2 holds
    // the CLI's "No response requested." placeholder for the interrupted turn, which
    // takes the place of the script's last turn (the coordinator ends with the
    // fallback "done").
    let spec = scenario("coordinator-crash");
    for number in [1, 2] {
        let observation = coordinator_crash_run(number);
        assert_eq!(
            (
                observation.process.kills,
                observation.process.restarts,
                observation.process.exit_code
            ),
            (1, 1, Some(0)),
            "run {number}"
        );
        let coordinator: Vec<_> = {
            let mut calls: Vec<_> = observation
                .cassette
                .exchanges
                .iter()
                .filter(|e| e.agent.as_deref() == Some("coordinator"))
                .collect();
            calls.sort_by_key(|e| e.call);
            calls
        };
        assert_eq!(coordinator.len(), 4, "run {number}");
        assert!(
            matches!(coordinator[2].outcome, Outcome::NoResponse),
            "run {number}: the 3rd coordinator call is the one the process died holding"
        );
        let trace = witness_trace(&spec.scenario, &observation);
        let accepted = accepted_at(&trace);
        assert_eq!(accepted.len(), 1, "run {number}: {accepted:?}");
        assert_eq!(accepted[0].0, coordinator[3].call, "run {number}");
        let judgment = judge_witness(&spec.scenario, &trace);
        assert!(
            judgment.failures.is_empty(),
            "run {number}: {:?}",
            judgment.failures
        );
        for invariant in ["notify-once", "no-forgery", "liveness", "not-vacuous"] {
            assert_eq!(
                verdict_of(&judgment, invariant),
                Verdict::Upheld,
                "run {number}: {invariant}"
            );
        }
        let resumed = serde_json::to_string(&coordinator[3].request).unwrap();
        let answer = match &coordinator[3].outcome {
            Outcome::Response(response) => serde_json::to_string(response).unwrap(),
            other => panic!("run {number}: the resumed call was answered, got {other:?}"),
        };
        if number == 1 {
            assert!(!resumed.contains("No response requested."));
            assert!(answer.contains("one breaking change"), "{answer}");
        } else {
            assert!(resumed.contains("No response requested."));
            assert!(answer.contains("\"done\""), "{answer}");
        }
    }
}

#[test]
fn a_resumed_coordinator_that_lost_or_repeated_the_notification_would_break_notify_once() {
    // Goal: the witness judges what the resumed coordinator was handed, not what the
    // killed request carried: a transcript that lost the notification leaves the task
    // never notified, and one that holds it twice notifies twice. Method: edit the
    // resumed request of recorded run 1 both ways.
    let spec = scenario("coordinator-crash");
    let judge = |observation: &Observation| {
        judge_witness(&spec.scenario, &witness_trace(&spec.scenario, observation))
    };

    let mut lost = coordinator_crash_run(1);
    let (exchange, message, block) = resumed_notification(&mut lost);
    lost.cassette.exchanges[exchange].request.messages[message]
        .content
        .remove(block);
    let judgment = judge(&lost);
    assert_eq!(verdict_of(&judgment, "notify-once"), Verdict::Broken);
    assert!(
        judgment
            .failures
            .iter()
            .any(|f| f.detail.contains("never received its notification")),
        "{:?}",
        judgment.failures
    );

    let mut twice = coordinator_crash_run(1);
    let (exchange, message, block) = resumed_notification(&mut twice);
    let content = &mut twice.cassette.exchanges[exchange].request.messages[message].content;
    let again = content[block].clone();
    content.insert(block, again);
    assert_eq!(verdict_of(&judge(&twice), "notify-once"), Verdict::Broken);
}

#[test]
fn a_coordinator_crash_in_virtual_milliseconds_is_refused_on_the_target() {
    // Goal: only a coordinator crash placed at a model call has a moment on real
    // time; one placed at `at_ms` is refused before any process starts (exit 2).
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(repo_root().join("scenarios/claude-code/coordinator-crash.toml"))
            .unwrap()
            .replace("at = { point = \"model-call\", call = 3 }", "at_ms = 1500");
    let path = dir.path().join("timed-crash.toml");
    std::fs::write(&path, text).unwrap();
    let output = coordsim(&[
        "run",
        path.to_str().unwrap(),
        "--target",
        "claude-code",
        "--claude-bin",
        "/nonexistent/claude",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fault coordinator-crash is not supported on target claude-code"),
        "{stderr}"
    );
    assert!(
        stderr.contains("coordinator-crash at a model call"),
        "{stderr}"
    );
}

/// `trace` with the `symlink-at-output` plant stamped at its start, as the live
/// target stamps the faults its host fired.
fn with_plant_fired(mut trace: Vec<TraceEntry>) -> Vec<TraceEntry> {
    trace.insert(
        0,
        TraceEntry {
            time_ms: 0,
            actor: "sim".into(),
            typed: TraceEvent::Sim(SimEvent::FaultFired {
                fault: 0,
                kind: FaultKind::SymlinkAtOutput,
                detail: "tasks is a symlink to outside".into(),
                agent: None,
            }),
        },
    );
    trace
}

#[test]
fn the_recorded_cli_writes_nothing_through_a_planted_task_directory() {
    // Goal: with its task directory planted as a symlink out of the session before
    // the first launch, 2.1.328 writes nothing through it, and no-escape is judged
    // on that evidence rather than reported unobservable. Method: judge the recorded
    // run; then edit its observation as if the CLI had made its output link through
    // the planted directory, which must break no-escape.
    let spec = scenario("symlink-at-output");
    let mut observation = recorded("symlink-at-output");
    let planted = observation
        .process
        .files
        .iter()
        .find(|file| file.symlink_to.as_deref() == Some("outside"))
        .expect("the planted task directory is observed")
        .path
        .clone();
    assert!(planted.ends_with("/tasks"), "{planted}");
    assert!(observation
        .process
        .files
        .iter()
        .all(|file| !file.path.starts_with("outside/")));
    let trace = with_plant_fired(witness_trace(&spec.scenario, &observation));
    let judgment = judge_witness(&spec.scenario, &trace);
    assert!(judgment.failures.is_empty(), "{:?}", judgment.failures);
    assert_eq!(verdict_of(&judgment, "no-escape"), Verdict::Upheld);

    let escaped = observation.process.files[0].clone();
    observation.process.files.push(ObservedFile {
        path: "outside/a1.output".into(),
        role: "outside".into(),
        ..escaped
    });
    let trace = with_plant_fired(witness_trace(&spec.scenario, &observation));
    let judgment = judge_witness(&spec.scenario, &trace);
    assert_eq!(verdict_of(&judgment, "no-escape"), Verdict::Broken);
    assert!(
        judgment.failures[0]
            .detail
            .contains(&format!("{planted}/a1.output")),
        "{:?}",
        judgment.failures
    );
    // Without the plant, the same run has no evidence for no-escape.
    let judgment = judge_witness(
        &spec.scenario,
        &witness_trace(&spec.scenario, &recorded("spawn-and-notify")),
    );
    assert_eq!(verdict_of(&judgment, "no-escape"), Verdict::NotObservable);
}

#[test]
fn the_api_faults_run_shows_each_http_error_and_the_retry_after_it() {
    // Goal: the fault engine's model faults reached the real CLI as HTTP errors, and
    // it retried each. Method: read the recorded outcomes per agent in call order.
    let observation = recorded("api-faults");
    let mut exchanges = observation.cassette.exchanges.clone();
    exchanges.sort_by_key(|e| e.call);
    let kinds: Vec<(String, String)> = exchanges
        .iter()
        .map(|e| {
            let outcome = match &e.outcome {
                Outcome::Response(_) => "response".to_owned(),
                Outcome::Error(error) => format!("{error:?}"),
                Outcome::NoResponse => "none".to_owned(),
            };
            (e.agent.clone().unwrap(), outcome)
        })
        .collect();
    let errors: Vec<&str> = kinds
        .iter()
        .filter(|(_, outcome)| outcome != "response")
        .map(|(_, outcome)| outcome.as_str())
        .collect();
    assert_eq!(errors.len(), 3, "{kinds:?}");
    assert!(errors[0].starts_with("RateLimited"), "{errors:?}");
    assert!(
        errors.iter().any(|e| e.starts_with("Overloaded")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("Malformed")),
        "{errors:?}"
    );
    assert_eq!(kinds.last().unwrap().1, "response");
    // The 429 said retry after 5 s, and the CLI waited: the run took at least that.
    assert!(
        observation.process.wall_ms >= 5_000,
        "{}",
        observation.process.wall_ms
    );
}

#[test]
fn a_recorded_task_output_file_is_a_symlink_to_the_subagent_transcript() {
    // Goal: the files observation tells what 2.1.328 leaves: the output file named in
    // the notification is a symlink into the subagent's transcript.
    let observation = recorded("spawn-and-notify");
    let outputs: Vec<_> = observation
        .process
        .files
        .iter()
        .filter(|f| f.role == "task-output")
        .collect();
    assert_eq!(outputs.len(), 1, "{:?}", observation.process.files);
    let target = outputs[0].symlink_to.as_deref().unwrap();
    assert!(target.contains("/subagents/agent-"), "{target}");
    assert!(target.ends_with(".jsonl"), "{target}");
}

/// A request body as Claude Code 2.1.328 sends it, cut down: a `system` message in
/// `messages`, a reminder before the prompt, tools, thinking, metadata.
fn cli_shaped_body(prompt: &str) -> String {
    serde_json::json!({
        "model": "claude-opus-5-5", "max_tokens": 128000, "stream": true,
        "system": [{ "type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328;" }],
        "tools": [{ "name": "Agent", "description": "Launch a new agent", "input_schema": { "type": "object" } }],
        "metadata": { "user_id": "{\"device_id\":\"d\"}" },
        "thinking": { "type": "adaptive", "display": "omitted" },
        "context_management": { "edits": [] },
        "output_config": { "effort": "medium" },
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>\nAttribution\n</system-reminder>\n" },
                { "type": "text", "text": prompt } ] },
            { "role": "system", "content": [{ "type": "text", "text": "# Environment" }] }
        ]
    })
    .to_string()
}

/// POSTs `body` to `/v1/messages?beta=true` on `address` and returns the whole
/// answer (the connection closes after it).
fn post(address: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let head = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: {address}\r\nx-api-key: k\r\n\
         anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_loopback_host_answers_the_clis_dialect_from_the_scripts() {
    // Goal: the CLI's request shape, which the plain API host refuses (a `system`
    // role is no Messages API role it parses), is answered from the scenario's
    // coordinator script once the host reads the dialect. Method: send the same
    // CLI-shaped body to a plain host and to the run's loopback host.
    use coord_sim::cassette::Recording;
    use coord_sim::target::loopback::{fault_book, LoopbackApi};
    use coord_sim::world::ApiHost;
    use std::sync::Arc;

    let spec = scenario("spawn-and-notify").scenario;
    let body = cli_shaped_body(&spec.coordinator.prompt);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
        .unwrap();
    let plain_address = listener.local_addr().unwrap().to_string();
    let trace = coord_sim::trace::Trace::new(Arc::new(coord_runtime::world::ManualClock::new(0)));
    let plain = ApiHost::new(Arc::new(coord_sim::model::SimulatedModel::new(
        Arc::new(coord_sim::model::ScriptPolicy::new(
            [spec.coordinator.clone()],
            "done",
        )),
        Arc::new(coord_runtime::world::ManualClock::new(0)),
        <rand_chacha::ChaCha8Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(0),
    )));
    runtime.spawn(plain.serve_listener(listener));
    let refused = post(&plain_address, &body);
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");

    let recording = Recording::in_memory();
    let api = LoopbackApi::start(&spec, fault_book(&spec, trace), recording.clone(), None).unwrap();
    let address = api.base_url().trim_start_matches("http://").to_owned();
    let answered = post(&address, &body);
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(answered.contains("text/event-stream"), "{answered}");
    assert!(answered.contains("\"name\":\"Agent\""), "{answered}");
    let received = api.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].path, "/v1/messages",
        "the query string is not part of the path"
    );
    drop(api);
    let cassette = recording.cassette();
    assert_eq!(cassette.exchanges.len(), 1);
    assert_eq!(cassette.exchanges[0].agent.as_deref(), Some("coordinator"));
    let recorded = serde_json::to_string(&cassette.exchanges[0].request).unwrap();
    assert!(
        !recorded.contains("billing-header"),
        "the CLI's system prompt is not kept"
    );
    assert!(
        !recorded.contains("# Environment"),
        "nor its system message"
    );
}

fn coordsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

#[test]
fn a_fault_the_target_cannot_inject_is_refused_naming_the_kind_and_the_target() {
    // Goal: a scenario asking for a fault that needs the runtime's insides is a
    // usage error (exit 2) before any process starts, naming the fault and target.
    // Method: a scenario with a worker crash; a claude binary that does not exist.
    let output = coordsim(&[
        "run",
        "scenarios/core/notify-once.toml",
        "--target",
        "claude-code",
        "--claude-bin",
        "/nonexistent/claude",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not supported on target claude-code"),
        "{stderr}"
    );
    assert!(stderr.contains("fault "), "{stderr}");
}

#[test]
fn the_claude_code_target_without_a_binary_is_a_usage_error() {
    // Goal: `--target claude-code` without `--claude-bin` says what is missing (exit
    // 2); a binary that does not exist names it and the install script.
    let missing = coordsim(&[
        "run",
        "scenarios/claude-code/spawn-and-notify.toml",
        "--target",
        "claude-code",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--claude-bin"));
    let absent = coordsim(&[
        "run",
        "scenarios/claude-code/spawn-and-notify.toml",
        "--target",
        "claude-code",
        "--claude-bin",
        "/nonexistent/claude",
    ]);
    assert_eq!(absent.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&absent.stderr);
    assert!(stderr.contains("/nonexistent/claude"), "{stderr}");
    assert!(stderr.contains("install-claude-code"), "{stderr}");
}

#[test]
fn claude_code_flags_without_the_claude_code_target_are_a_usage_error() {
    // Goal: `--claude-bin` or `--runs` on the simulator would be silently ignored;
    // they are refused instead (exit 2), naming the flag that needs the target.
    let output = coordsim(&[
        "run",
        "scenarios/claude-code/spawn-and-notify.toml",
        "--runs",
        "3",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--target claude-code"), "{stderr}");
}

#[test]
fn every_claude_code_scenario_also_passes_on_the_simulator() {
    // Goal: the two targets can be compared side by side: each scenario of the
    // claude-code folder runs and passes on the simulated runtime too.
    let output = coordsim(&["run", "scenarios/claude-code/", "--seeds", "0..5"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
#[ignore = "runs the real CLI: COORDSIM_CLAUDE_BIN=\"$(scripts/install-claude-code)\" cargo test -- --ignored"]
fn the_real_cli_runs_every_claude_code_scenario() {
    // Goal: end to end on the installed CLI: every scenario runs, the JSON report has
    // the simulator's keys, and each run's verdicts are given (exit 0 or 1, never 2).
    let claude_bin = std::env::var("COORDSIM_CLAUDE_BIN")
        .expect("set COORDSIM_CLAUDE_BIN to the CLI (scripts/install-claude-code prints it)");
    assert!(Path::new(&claude_bin).exists(), "{claude_bin}");
    let runs_dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["run", "scenarios/claude-code/", "--target", "claude-code"])
        .args(["--claude-bin", &claude_bin, "--runs", "1", "--json"])
        .env("COORDSIM_RUNS_DIR", runs_dir.path())
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for key in [
        "scenarios",
        "seeds_run",
        "seeds_failed",
        "failures",
        "wall_seconds",
    ] {
        assert!(report.get(key).is_some(), "{key} missing: {stdout}");
    }
    let scenarios = report["scenarios"].as_u64().unwrap();
    assert_eq!(report["seeds_run"].as_u64(), Some(scenarios));
    assert_eq!(report["conformance"].as_object().unwrap().len(), 14);
    // One folder per scenario, holding the files of its failed runs.
    let kept: Vec<PathBuf> = std::fs::read_dir(runs_dir.path())
        .unwrap()
        .flat_map(|folder| std::fs::read_dir(folder.unwrap().path()).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(kept.is_empty(), report["seeds_failed"] == 0, "{kept:?}");
}
