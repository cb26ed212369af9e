//! The simulated API host on a loopback port, answering a real process from the
//! scenario's scripts.
//!
//! A [`LoopbackApi`] runs the [`ApiHost`] on `127.0.0.1:0` in a thread of its own
//! (a current-thread tokio runtime), for as long as the value lives. Its upstream is
//! the same stack a simulated run uses, minus the runtime: the scenario's scripts
//! ([`ScriptPolicy`]: the coordinator's by default, workers matched by their spawn
//! prompt) under the fault engine's model adapter ([`FaultyPolicy`]), so a
//! `model-api` fault becomes the HTTP error the host sends for it (429 with
//! `retry-after`, 529, a stream cut short, silence). Each exchange is recorded into
//! the run's [`Recording`] (see [`super::recording`]).
//!
//! Launches are learned from each request, as the simulator's model tap learns them,
//! so a script's `{{task:<pattern>}}` placeholder names the task id the CLI drew.
//!
//! Scripted latencies are not slept: the process runs on real time, and waiting
//! would only make each run slower without changing what the CLI sees. The host
//! reads the CLI's dialect through [`super::dialect::simulator_request`].

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use coord_runtime::world::{Clock, ManualClock, Model, ModelRequest, SystemClock};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::oneshot;

use super::dialect::simulator_request;
use super::plant::TaskDirPlant;
use crate::cassette::{AgentLabels, Recording, RecordingModel};
use crate::fault::{FaultBook, FaultyPolicy};
use crate::model::{ConversationView, ScriptPolicy, SimulatedModel};
use crate::scenario::Scenario;
use crate::trace::Trace;
use crate::world::{ApiHost, ReceivedRequest};

/// What an agent whose script is used up says (a continuation past its end).
const FALLBACK_TEXT: &str = "done";

/// The API host serving one run, on a loopback port.
#[derive(Debug)]
pub struct LoopbackApi {
    address: SocketAddr,
    host: ApiHost,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LoopbackApi {
    /// Starts a host answering from `scenario`'s scripts with the model faults of
    /// `book`, recording every exchange into `recording`.
    /// `plant`, if given, is carried out on the first request that names the session.
    pub fn start(
        scenario: &Scenario,
        book: FaultBook,
        recording: Recording,
        plant: Option<TaskDirPlant>,
    ) -> io::Result<Self> {
        let upstream = scripted_model(scenario, book.clone(), recording);
        let host = ApiHost::new(upstream).adapting_bodies(Arc::new(move |body| {
            // Before the answer to this request can launch a worker.
            if let Some(plant) = &plant {
                plant.on_request(&body, &book);
            }
            let body = simulator_request(body);
            learn_launches(&body, &book);
            body
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))?;
        let address = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = host.clone();
        let thread = std::thread::Builder::new()
            .name("coordsim-loopback-api".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        biased;
                        _ = stopped => {}
                        // Accepting fails only when the socket breaks; the run then
                        // sees connection errors, which its observation records.
                        _ = serving.serve_listener(listener) => {}
                    }
                });
            })?;
        Ok(Self {
            address,
            host,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The base URL to hand the process (`ANTHROPIC_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every request the host read, with its path and status.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.host.received()
    }
}

impl Drop for LoopbackApi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may already be gone; nothing is left to stop then.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the host thread was already reported on stderr.
            let _ = thread.join();
        }
    }
}

/// Tells `book` every launch the request `body` shows (an Agent call and its
/// result's `agentId`), as the simulator's model tap does, so a script's
/// `{{task:<pattern>}}` placeholder resolves to the id the CLI drew.
fn learn_launches(body: &serde_json::Value, book: &FaultBook) {
    // A body that does not parse is refused by the host; it launched nothing.
    let Ok(request) = serde_json::from_value::<ModelRequest>(body.clone()) else {
        return;
    };
    for (task_id, description) in ConversationView::of(&request).launched {
        book.learn_launch(&task_id, &description);
    }
}

/// The scenario's answers as a model: scripts, model faults, no latency, recorded.
fn scripted_model(scenario: &Scenario, book: FaultBook, recording: Recording) -> Arc<dyn Model> {
    let coordinator_prompt = scenario.coordinator.prompt.clone();
    let scripts = ScriptPolicy::new(
        std::iter::once(scenario.coordinator.clone()).chain(scenario.workers.iter().cloned()),
        FALLBACK_TEXT,
    );
    let policy = FaultyPolicy::new(Arc::new(scripts), book, coordinator_prompt.clone());
    // A manual clock completes every sleep at once: see the module docs.
    let no_wait: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
    let model = SimulatedModel::new(Arc::new(policy), no_wait, ChaCha8Rng::seed_from_u64(0));
    let wall: Arc<dyn Clock> = Arc::new(SystemClock::new());
    Arc::new(
        RecordingModel::new(Arc::new(model), recording)
            .timed_by(wall)
            .labelled_by(AgentLabels::new(coordinator_prompt)),
    )
}

/// The fault book of a target run: the scenario's explicit faults (the target
/// draws no swarm faults), keyed as the simulator keys them, firing into `trace`.
pub fn fault_book(scenario: &Scenario, trace: Trace) -> FaultBook {
    FaultBook::new(
        scenario.faults.clone(),
        crate::run::description_prompts(scenario),
        trace,
    )
}
