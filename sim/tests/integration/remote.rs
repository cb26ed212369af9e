//! The remote boundary over TCP (`PROTOCOL.md` §2 remote isolation, §8 invariant 11):
//! `TcpRemote` and `serve_remote_worker` between a "coordinator" and a "remote" turmoil
//! host, under partitions, crashes and a misbehaving server, and the runtime's
//! `Session` running a remote worker through them.
//!
//! What turmoil does, as these tests pin it down:
//! - A partition drops messages. A SYN dropped at a partition drops the connect's
//!   handshake channel with it, so a connect across a partition fails at once with
//!   `ConnectionRefused`, in zero virtual time. Data on an established connection is
//!   dropped silently: the reader waits, and only the read timeout ends the call.
//! - A hold keeps messages on the link until release: the call waits, then succeeds.
//! - A crash drops the host's software inside the simulated world, so its sockets
//!   close as a killed process's do: the peer reads end-of-stream at once. While the
//!   host is down turmoil delivers nothing to it: a SYN waits on the link, so a
//!   connect hangs until the connect timeout (and the SYN reaches the host's next
//!   boot if it is still queued then).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::agent::{AgentInput, IsolationKind};
use coord_runtime::envelope::{Envelope, EnvelopeStatus};
use coord_runtime::ipc::SessionLayout;
use coord_runtime::profile::Profile;
use coord_runtime::session::{AgentRef, Effects, Session, SessionConfig, SpawnOutcome};
use coord_runtime::world::{
    BoxFuture, Clock, ContentBlock, MemoryJournal, Message, Model, ModelError, ModelRequest,
    ModelResponse, RemoteError, RemoteLaunch, RemoteReport, Role, StopReason, SystemClock,
    ToolCall, ToolContext, ToolOutput, Tools, Usage,
};
use coord_sim::world::{
    host_entropy_stream, read_frame, serve_remote_worker, sim_builder, MemDisk, Streams, TcpRemote,
    TurmoilBootClock, FRAME_SIZE_BYTES_MAX,
};
use serde_json::json;
use tokio::io::AsyncWriteExt;

const PORT: u16 = 7000;
const COORDINATOR: &str = "coordinator";
const REMOTE: &str = "remote";
/// How long the remote worker takes on a prompt that starts with "slow".
const SLOW_WORK: Duration = Duration::from_secs(60);
const STEPS_MAX: u32 = 200_000;

fn launch(task_id: &str, prompt: &str) -> RemoteLaunch {
    RemoteLaunch {
        task_id: task_id.into(),
        prompt: prompt.into(),
        model: "claude-sonnet-4-5".into(),
        messages: Vec::new(),
    }
}

/// A sim with room for the timeouts these tests wait out.
fn sim(seed: u64) -> turmoil::Sim<'static> {
    let streams = Streams::new(seed);
    let mut builder = sim_builder(&streams);
    builder.simulation_duration(Duration::from_secs(600));
    builder.build()
}

/// Starts the well-behaved remote-worker host: it answers `did: <prompt>` at once, or
/// after [`SLOW_WORK`] for a prompt starting with "slow". `received` lists the task
/// ids of the launches that arrived, in order, across boots.
fn remote_host(sim: &mut turmoil::Sim<'_>, received: Arc<Mutex<Vec<String>>>) {
    sim.host(REMOTE, move || {
        let received = received.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
            serve_remote_worker(listener, move |launch: RemoteLaunch| {
                let received = received.clone();
                async move {
                    received.lock().unwrap().push(launch.task_id.clone());
                    if launch.prompt.starts_with("slow") {
                        TurmoilBootClock::running().sleep(SLOW_WORK).await;
                    }
                    RemoteReport {
                        task_id: launch.task_id,
                        succeeded: true,
                        text: format!("did: {}", launch.prompt),
                        messages: Vec::new(),
                    }
                }
            })
            .await?;
            Ok(())
        }
    });
}

/// One call's outcome as a line: `ok <text>`, `unreachable <why>` or `bad <why>`.
fn outcome(result: &Result<RemoteReport, RemoteError>) -> String {
    match result {
        Ok(report) => format!("ok {}", report.text),
        Err(RemoteError::Unreachable(why)) => format!("unreachable {why}"),
        Err(RemoteError::BadReport(why)) => format!("bad {why}"),
        Err(other) => format!("other {other}"),
    }
}

/// A call and the virtual time it took.
async fn timed_call(remote: &TcpRemote, launch: RemoteLaunch) -> (String, Duration) {
    let clock = TurmoilBootClock::running();
    let started = clock.monotonic();
    let result = remote.call(launch).await;
    (outcome(&result), clock.monotonic() - started)
}

/// Hands control between a client host and the test body, which injects faults
/// between the client's steps.
#[derive(Default)]
struct Baton {
    client_at: AtomicU32,
    test_done: AtomicU32,
}

impl Baton {
    /// In the client: announces `step` and waits until the test has acted on it.
    async fn reach(&self, step: u32) {
        self.client_at.store(step, Ordering::SeqCst);
        for _ in 0..STEPS_MAX {
            if self.test_done.load(Ordering::SeqCst) >= step {
                return;
            }
            TurmoilBootClock::running()
                .sleep(Duration::from_millis(1))
                .await;
        }
        panic!("the test never released step {step}");
    }

    /// In the test: steps `sim` until the client reaches `step`, runs `act`, and
    /// releases the client.
    fn at(&self, sim: &mut turmoil::Sim<'_>, step: u32, act: impl FnOnce(&mut turmoil::Sim<'_>)) {
        step_until(sim, STEPS_MAX, |_| {
            self.client_at.load(Ordering::SeqCst) >= step
        });
        act(sim);
        self.test_done.store(step, Ordering::SeqCst);
    }
}

/// Steps `sim` until `done` holds, at most `steps_max` times.
fn step_until(
    sim: &mut turmoil::Sim<'_>,
    steps_max: u32,
    mut done: impl FnMut(&turmoil::Sim<'_>) -> bool,
) {
    for _ in 0..steps_max {
        if done(sim) {
            return;
        }
        sim.step().unwrap();
    }
    assert!(done(sim), "not done after {steps_max} steps");
}

/// Runs `sim` until the client sets `finished`, then checks it did.
fn finish(sim: &mut turmoil::Sim<'_>, finished: &AtomicBool) {
    step_until(sim, STEPS_MAX, |_| finished.load(Ordering::SeqCst));
}

#[test]
fn a_launch_round_trips_and_the_reports_text_comes_back() {
    // Goal: the wire protocol carries a launch to the remote host and its report back.
    // Method: two launches in a row from the coordinator host; then a launch over the
    // client's frame cap, which must be refused before anything is sent.
    let mut sim = sim(1);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let results: Arc<Mutex<Vec<Result<RemoteReport, RemoteError>>>> = Arc::default();
    let results_in = results.clone();
    sim.client(COORDINATOR, async move {
        let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()));
        for (id, prompt) in [("r1", "build it"), ("r2", "test it")] {
            let result = remote.call(launch(id, prompt)).await;
            results_in.lock().unwrap().push(result);
        }
        let capped = remote.clone().with_frame_size_bytes_max(64);
        let big = launch("r3", &"x".repeat(100));
        let result = capped.call(big).await;
        results_in.lock().unwrap().push(result);
        Ok(())
    });
    sim.run().unwrap();

    let results = results.lock().unwrap();
    assert_eq!(
        results[0],
        Ok(RemoteReport {
            task_id: "r1".into(),
            succeeded: true,
            text: "did: build it".into(),
            messages: Vec::new(),
        })
    );
    assert_eq!(results[1].as_ref().unwrap().text, "did: test it");
    let Err(RemoteError::BadReport(why)) = &results[2] else {
        panic!("an oversize launch is a BadReport: {:?}", results[2]);
    };
    assert!(why.contains("launch not sent"), "{why}");
    assert!(why.contains("exceeds the cap of 64 bytes"), "{why}");
    assert_eq!(*received.lock().unwrap(), ["r1", "r2"], "r3 never left");
}

#[test]
fn a_partition_refuses_a_connect_at_once_and_calls_succeed_after_repair() {
    // Goal: a partition is `Unreachable` without waiting, and healing restores calls
    // (liveness). Method: call, partition both directions, call, repair, call; time
    // each call in virtual time.
    let mut sim = sim(2);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let baton = Arc::new(Baton::default());
    let calls: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (baton, calls, finished) = (baton.clone(), calls.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
                .with_read_timeout(Some(Duration::from_secs(5)));
            for (step, id) in [(1, "r1"), (2, "r2")] {
                let call = timed_call(&remote, launch(id, "work")).await;
                calls.lock().unwrap().push(call);
                baton.reach(step).await;
            }
            let call = timed_call(&remote, launch("r3", "work")).await;
            calls.lock().unwrap().push(call);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    baton.at(&mut sim, 1, |sim| sim.partition(COORDINATOR, REMOTE));
    baton.at(&mut sim, 2, |sim| sim.repair(COORDINATOR, REMOTE));
    finish(&mut sim, &finished);

    let calls = calls.lock().unwrap();
    assert_eq!(calls[0].0, "ok did: work");
    assert_eq!(
        calls[1].0,
        "unreachable connect to remote:7000: connection refused: 192.168.0.1:7000"
    );
    // turmoil refuses across a partition at once: no timeout is involved.
    assert_eq!(calls[1].1, Duration::ZERO);
    assert_eq!(calls[2].0, "ok did: work");
    assert_eq!(*received.lock().unwrap(), ["r1", "r3"]);
}

#[test]
fn a_partition_mid_call_is_ended_by_the_read_timeout_and_repair_restores_calls() {
    // Goal: a report lost to a partition never hangs the caller. Method: a slow launch
    // reaches the remote host, the link is partitioned while it works, so its report
    // is dropped; the call must end at its 5 s read timeout. Then repair and call.
    let mut sim = sim(3);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let baton = Arc::new(Baton::default());
    let calls: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    let read_timeout = Duration::from_secs(5);
    {
        let (baton, calls, finished) = (baton.clone(), calls.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
                .with_read_timeout(Some(read_timeout));
            let call = timed_call(&remote, launch("r1", "slow job")).await;
            calls.lock().unwrap().push(call);
            baton.reach(1).await;
            let call = timed_call(&remote, launch("r2", "quick job")).await;
            calls.lock().unwrap().push(call);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    step_until(&mut sim, STEPS_MAX, |_| {
        !received.lock().unwrap().is_empty()
    });
    sim.partition(COORDINATOR, REMOTE);
    baton.at(&mut sim, 1, |sim| sim.repair(COORDINATOR, REMOTE));
    finish(&mut sim, &finished);

    let calls = calls.lock().unwrap();
    assert_eq!(
        calls[0].0,
        "unreachable remote:7000: no report within 5000 ms"
    );
    // The wait is bounded: the timeout plus the connect's link latency (at most
    // turmoil's default 100 ms each way), never the 60 s of work.
    assert!(calls[0].1 >= read_timeout, "{:?}", calls[0].1);
    assert!(
        calls[0].1 <= read_timeout + Duration::from_millis(200),
        "{:?}",
        calls[0].1
    );
    assert_eq!(calls[1].0, "ok did: quick job");
    assert_eq!(*received.lock().unwrap(), ["r1", "r2"]);
}

#[test]
fn a_held_link_makes_a_call_wait_until_release() {
    // Goal: turmoil's `hold` delays rather than drops: the call waits and then
    // succeeds. Method: hold the link, start a call, step 1 s of virtual time,
    // release, and time the call.
    let mut sim = sim(7);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let baton = Arc::new(Baton::default());
    let calls: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (baton, calls, finished) = (baton.clone(), calls.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
                .with_read_timeout(Some(Duration::from_secs(5)));
            baton.reach(1).await;
            let call = timed_call(&remote, launch("r1", "held")).await;
            calls.lock().unwrap().push(call);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    baton.at(&mut sim, 1, |sim| sim.hold(COORDINATOR, REMOTE));
    let held_at = sim.elapsed();
    step_until(&mut sim, STEPS_MAX, |sim| {
        sim.elapsed() >= held_at + Duration::from_secs(1)
    });
    assert!(
        received.lock().unwrap().is_empty(),
        "nothing crossed the held link"
    );
    sim.release(COORDINATOR, REMOTE);
    finish(&mut sim, &finished);

    let calls = calls.lock().unwrap();
    assert_eq!(calls[0].0, "ok did: held");
    assert!(calls[0].1 >= Duration::from_millis(990), "{:?}", calls[0].1);
    assert_eq!(*received.lock().unwrap(), ["r1"]);
}

#[test]
fn a_crash_of_the_remote_host_mid_call_is_a_typed_error_at_once_and_a_bounce_heals() {
    // Goal: a remote host that dies mid-call never hangs its caller. Method: a slow
    // launch reaches the remote host, which is crashed while it works; the call must
    // fail `Unreachable` well before its 30 s read timeout. A call while the host is
    // down ends at its 2 s connect timeout; after a bounce, calls succeed again.
    let mut sim = sim(4);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let baton = Arc::new(Baton::default());
    let calls: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (baton, calls, finished) = (baton.clone(), calls.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
                .with_connect_timeout(Some(Duration::from_secs(2)))
                .with_read_timeout(Some(Duration::from_secs(30)));
            let call = timed_call(&remote, launch("r1", "slow job")).await;
            calls.lock().unwrap().push(call);
            let call = timed_call(&remote, launch("r2", "while down")).await;
            calls.lock().unwrap().push(call);
            baton.reach(1).await;
            let call = timed_call(&remote, launch("r3", "after bounce")).await;
            calls.lock().unwrap().push(call);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    step_until(&mut sim, STEPS_MAX, |_| {
        !received.lock().unwrap().is_empty()
    });
    sim.crash(REMOTE);
    baton.at(&mut sim, 1, |sim| sim.bounce(REMOTE));
    finish(&mut sim, &finished);

    let calls = calls.lock().unwrap();
    assert_eq!(calls[0].0, "unreachable connection closed before a frame");
    assert!(calls[0].1 < Duration::from_secs(1), "{:?}", calls[0].1);
    // While down, turmoil holds the SYN on the link: only the connect timeout ends it.
    assert_eq!(
        calls[1].0,
        "unreachable connect to remote:7000: no connection within 2000 ms"
    );
    assert_eq!(calls[1].1, Duration::from_secs(2));
    assert_eq!(calls[2].0, "ok did: after bounce");
    assert_eq!(*received.lock().unwrap(), ["r1", "r3"]);
}

#[test]
fn a_misbehaving_servers_oversize_malformed_or_foreign_frames_are_bad_reports() {
    // Goal: bytes that are not a report are `BadReport`; a frame cut short is
    // `Unreachable`. Method: a raw server reads each launch properly, then answers
    // connection n with misbehaviour n; the client makes one call per case.
    let mut sim = sim(5);
    sim.host(REMOTE, || async {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
        for case in 0_u32.. {
            let (mut stream, _) = listener.accept().await?;
            let launch: RemoteLaunch = read_frame(&mut stream, FRAME_SIZE_BYTES_MAX).await?;
            let frame = |body: &[u8]| {
                let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
                bytes.extend_from_slice(body);
                bytes
            };
            let bytes = match case {
                // A header announcing one byte over the cap, and no body.
                0 => (FRAME_SIZE_BYTES_MAX + 1).to_be_bytes().to_vec(),
                1 => frame(b"<html>502 Bad Gateway</html>"),
                2 => frame(br#"{"hello": 1}"#),
                3 => frame(
                    json!({"task_id": "someone-else", "succeeded": true, "text": "hi"})
                        .to_string()
                        .as_bytes(),
                ),
                // A header for 100 bytes, then 10 bytes and a close.
                4 => {
                    let mut bytes = 100_u32.to_be_bytes().to_vec();
                    bytes.extend_from_slice(&[b' '; 10]);
                    bytes
                }
                _ => Vec::new(),
            };
            assert!(!launch.task_id.is_empty());
            stream.write_all(&bytes).await?;
            stream.shutdown().await?;
        }
        Ok(())
    });
    let outcomes: Arc<Mutex<Vec<String>>> = Arc::default();
    let outcomes_in = outcomes.clone();
    sim.client(COORDINATOR, async move {
        let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
            .with_read_timeout(Some(Duration::from_secs(5)));
        for case in 0..6 {
            let result = remote.call(launch(&format!("r{case}"), "work")).await;
            outcomes_in.lock().unwrap().push(outcome(&result));
        }
        Ok(())
    });
    sim.run().unwrap();

    let outcomes = outcomes.lock().unwrap();
    assert_eq!(
        outcomes[0],
        "bad frame of 8388609 bytes exceeds the cap of 8388608 bytes"
    );
    assert!(
        outcomes[1].starts_with("bad malformed frame: expected value"),
        "{}",
        outcomes[1]
    );
    assert!(
        outcomes[2].starts_with("bad malformed frame: missing field"),
        "{}",
        outcomes[2]
    );
    assert_eq!(
        outcomes[3],
        "bad remote:7000: report for task \"someone-else\", launched task \"r3\""
    );
    assert_eq!(
        outcomes[4],
        "unreachable connection closed after 14 of 104 bytes of a frame"
    );
    assert_eq!(outcomes[5], "unreachable connection closed before a frame");
}

/// One seeded run of calls under faults: each call's outcome and virtual duration,
/// the order the remote host received launches in, and the sim's final time.
fn faulted_run(seed: u64) -> Vec<String> {
    let mut sim = sim(seed);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    remote_host(&mut sim, received.clone());
    let baton = Arc::new(Baton::default());
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (baton, lines, finished) = (baton.clone(), lines.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let remote = TcpRemote::turmoil(REMOTE, PORT, Arc::new(TurmoilBootClock::running()))
                .with_read_timeout(Some(Duration::from_secs(5)));
            let record = |label: &str, (outcome, took): (String, Duration)| {
                let at = TurmoilBootClock::running().monotonic();
                lines.lock().unwrap().push(format!(
                    "{label} at={}us took={}us {outcome}",
                    at.as_micros(),
                    took.as_micros()
                ));
            };
            // Three launches at once: their order on the wire depends on latency draws.
            let (a, b, c) = tokio::join!(
                timed_call(&remote, launch("r1", "one")),
                timed_call(&remote, launch("r2", "two")),
                timed_call(&remote, launch("r3", "three")),
            );
            record("r1", a);
            record("r2", b);
            record("r3", c);
            baton.reach(1).await;
            record("r4", timed_call(&remote, launch("r4", "partitioned")).await);
            baton.reach(2).await;
            record("r5", timed_call(&remote, launch("r5", "slow crash")).await);
            baton.reach(3).await;
            record("r6", timed_call(&remote, launch("r6", "healed")).await);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    baton.at(&mut sim, 1, |sim| sim.partition(COORDINATOR, REMOTE));
    baton.at(&mut sim, 2, |sim| sim.repair(COORDINATOR, REMOTE));
    step_until(&mut sim, STEPS_MAX, |_| received.lock().unwrap().len() >= 4);
    sim.crash(REMOTE);
    baton.at(&mut sim, 3, |sim| sim.bounce(REMOTE));
    finish(&mut sim, &finished);

    let mut lines = lines.lock().unwrap().clone();
    lines.push(format!("received {:?}", received.lock().unwrap()));
    lines.push(format!("sim elapsed {}us", sim.elapsed().as_micros()));
    lines
}

#[test]
fn the_same_seed_gives_the_same_outcomes_at_the_same_virtual_times() {
    // Goal: the whole exchange under faults is a function of the seed. Method: run
    // the same faulted sequence (concurrent calls, partition, repair, crash mid-call,
    // bounce) twice with one seed and compare every outcome and virtual time.
    let first = faulted_run(11);
    let second = faulted_run(11);
    assert_eq!(first, second);
    // And the times are the seed's: another seed draws other link latencies.
    assert_ne!(first, faulted_run(12));
    assert_eq!(first.len(), 8, "{first:#?}");
    for ok in [0, 1, 2, 5] {
        assert!(first[ok].contains(" ok did: "), "{first:#?}");
    }
    assert!(
        first[3].contains(" unreachable connect to remote:7000"),
        "{first:#?}"
    );
    assert!(
        first[4].contains(" unreachable connection closed"),
        "{first:#?}"
    );
    // Link latency is drawn from the seed: the concurrent calls took virtual time.
    assert!(!first[0].contains("took=0us"), "{first:#?}");
}

/// A model that answers each request with `remote model: <first user text>`.
#[derive(Debug)]
struct EchoModel;

impl Model for EchoModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let prompt = request
            .messages
            .first()
            .and_then(|m| m.content.first())
            .map(|block| match block {
                ContentBlock::Text { text, .. } => text.clone(),
                _ => String::new(),
            })
            .unwrap_or_default();
        Box::pin(std::future::ready(Ok(ModelResponse {
            id: "msg_remote".into(),
            model: request.model.clone(),
            role: Role::Assistant,
            content: vec![ContentBlock::text(format!("remote model: {prompt}"))],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
        })))
    }
}

/// Tools the coordinator's own workers never reach in these tests.
#[derive(Debug)]
struct NoTools;

impl Tools for NoTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        Box::pin(std::future::ready(ToolOutput {
            content: format!("no tool {}", call.name),
            is_error: true,
        }))
    }
}

/// The remote worker: one model turn on the launch's prompt.
async fn model_worker(model: Arc<dyn Model>, launch: RemoteLaunch) -> RemoteReport {
    let request = ModelRequest {
        model: launch.model.clone(),
        max_tokens: 1024,
        tools: Default::default(),
        system: Default::default(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text(launch.prompt.clone())],
        }],
        thinking: None,
    };
    match model.send(Arc::new(request)).await {
        Ok(response) => RemoteReport {
            task_id: launch.task_id,
            succeeded: true,
            text: response
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
            messages: Vec::new(),
        },
        Err(error) => RemoteReport {
            task_id: launch.task_id,
            succeeded: false,
            text: error.to_string(),
            messages: Vec::new(),
        },
    }
}

/// Spawns a remote-isolated worker and waits (bounded) for its one envelope.
async fn spawn_remote(session: &Session, prompt: &str) -> Envelope {
    let mut input =
        AgentInput::parse(&json!({"description": "remote job", "prompt": prompt})).unwrap();
    input.isolation = Some(IsolationKind::Remote);
    let SpawnOutcome::Async(launched) = session.spawn(&AgentRef::Main, input, None).await.unwrap()
    else {
        panic!("a coordinator's spawn is async");
    };
    assert!(launched.agent_id.starts_with('r'), "{}", launched.agent_id);
    for _ in 0..10_000 {
        let change = session.next_change();
        let mut envelopes = session.take_notifications();
        if let Some(envelope) = envelopes.pop() {
            assert!(envelopes.is_empty(), "one worker, one envelope");
            assert_eq!(envelope.task_id, launched.agent_id);
            return envelope;
        }
        session
            .wait_for_change(change, Duration::from_millis(50))
            .await;
    }
    panic!("no envelope for {}", launched.agent_id);
}

#[test]
fn a_session_with_remote_isolation_gets_its_envelope_from_the_remote_hosts_report() {
    // Goal: the runtime's Session, unchanged, runs `isolation: remote` workers on
    // another turmoil host through TcpRemote. Method: a coordinator session on
    // a coordinator on a turmoil host spawns a remote worker (the remote host runs a model turn), then one
    // while partitioned, then one after repair; read each envelope.
    let streams = Streams::new(6);
    let mut sim = sim(6);
    sim.host(REMOTE, || async {
        let model: Arc<dyn Model> = Arc::new(EchoModel);
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
        serve_remote_worker(listener, move |launch| model_worker(model.clone(), launch)).await?;
        Ok(())
    });
    let baton = Arc::new(Baton::default());
    let envelopes: Arc<Mutex<Vec<Envelope>>> = Arc::default();
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (baton, envelopes, finished) = (baton.clone(), envelopes.clone(), finished.clone());
        sim.client(COORDINATOR, async move {
            let journal = Arc::new(MemoryJournal::new());
            let world = coord_runtime::World {
                clock: Arc::new(TurmoilBootClock::running()),
                entropy: Arc::new(streams.entropy(&host_entropy_stream(COORDINATOR, 0))),
                disk: Arc::new(MemDisk::new()),
                journal,
            };
            let remote = TcpRemote::turmoil(REMOTE, PORT, world.clock.clone())
                .with_read_timeout(Some(Duration::from_secs(30)));
            let effects = Effects {
                model: Arc::new(EchoModel),
                tools: Arc::new(NoTools),
                vcs: None,
                remote: Some(Arc::new(remote)),
                shell: None,
            };
            let mut config = SessionConfig::new(Profile::Hardened);
            config.coordinator_mode = true;
            let session = Session::create(world, effects, config, SessionLayout::new("/session"))?;
            for (step, prompt) in [(1, "build it"), (2, "while partitioned")] {
                let envelope = spawn_remote(&session, prompt).await;
                envelopes.lock().unwrap().push(envelope);
                baton.reach(step).await;
            }
            let envelope = spawn_remote(&session, "after repair").await;
            envelopes.lock().unwrap().push(envelope);
            finished.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    baton.at(&mut sim, 1, |sim| sim.partition(COORDINATOR, REMOTE));
    baton.at(&mut sim, 2, |sim| sim.repair(COORDINATOR, REMOTE));
    finish(&mut sim, &finished);

    let envelopes = envelopes.lock().unwrap();
    assert_eq!(envelopes[0].status, EnvelopeStatus::Completed);
    assert_eq!(
        envelopes[0].result.as_deref(),
        Some("remote model: build it")
    );
    assert_eq!(envelopes[1].status, EnvelopeStatus::Failed);
    assert!(
        envelopes[1].summary.contains("remote host unreachable"),
        "{}",
        envelopes[1].summary
    );
    assert_eq!(envelopes[2].status, EnvelopeStatus::Completed);
    assert_eq!(
        envelopes[2].result.as_deref(),
        Some("remote model: after repair")
    );
}

#[tokio::test]
async fn the_same_client_and_server_run_over_real_tokio_sockets() {
    // Goal: TcpRemote and serve_remote_worker are not tied to turmoil. Method: serve on
    // a real loopback listener and call it with TcpRemote::tokio on the system clock.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(serve_remote_worker(
        listener,
        |launch: RemoteLaunch| async move {
            RemoteReport {
                task_id: launch.task_id,
                succeeded: true,
                text: format!("real: {}", launch.prompt),
                messages: Vec::new(),
            }
        },
    ));
    let remote = TcpRemote::tokio(address, Arc::new(SystemClock::new()))
        .with_read_timeout(Some(Duration::from_secs(10)));
    let report = remote.call(launch("r1", "over loopback")).await.unwrap();
    assert_eq!(report.text, "real: over loopback");
    server.abort();
}
