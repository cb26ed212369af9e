//! Recording a model's exchanges.
//!
//! A [`RecordingModel`] wraps any [`Model`]: it forwards every request unchanged,
//! and when the call ends appends the exchange to its [`Recording`] (so exchanges
//! are in completion order, each with the number of its call in call order). A call
//! whose future is dropped before it answers (a hung connection, a cancelled call,
//! a process that died) is kept as `no_response`. Several models may record into
//! one recording: a run's successive boots do.
//!
//! Every exchange is scrubbed of [`Secrets`] before it is kept, so not even the
//! recording in memory holds a key. The cassette file is written atomically by
//! [`Recording::finish`] or [`Recording::write`], and, with
//! [`Recording::writing_each_exchange`], after every exchange as well (a failed
//! write there is retried by the next one and by `finish`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use coord_runtime::world::{BoxFuture, Clock, Model, ModelError, ModelRequest, ModelResponse};

use super::error::CassetteError;
use super::format::{Cassette, Exchange, Outcome, RecordedError};
use super::label::AgentLabels;
use super::secrets::Secrets;
use crate::run::{run_seed_with_model_layer, RunError, RunOptions, SeedRun};
use crate::scenario::LoadedScenario;

/// What a recording holds so far.
#[derive(Debug)]
struct RecordingState {
    path: Option<PathBuf>,
    secrets: Secrets,
    write_each: bool,
    /// Calls begun so far: the last call's number.
    calls: u64,
    exchanges: Vec<Exchange>,
}

/// A recording in progress. Cheap to clone; clones share the exchanges.
#[derive(Debug, Clone)]
pub struct Recording {
    state: Arc<Mutex<RecordingState>>,
}

impl Recording {
    fn with_path(path: Option<PathBuf>) -> Self {
        Self {
            state: Arc::new(Mutex::new(RecordingState {
                path,
                secrets: Secrets::new(),
                write_each: false,
                calls: 0,
                exchanges: Vec::new(),
            })),
        }
    }

    /// A recording that [`Recording::finish`] writes to `path`.
    pub fn to_file(path: impl Into<PathBuf>) -> Self {
        Self::with_path(Some(path.into()))
    }

    /// A recording kept in memory only ([`Recording::cassette`] reads it).
    pub fn in_memory() -> Self {
        Self::with_path(None)
    }

    /// The recording scrubbing `secrets` (API-key-shaped strings are scrubbed in
    /// any case). Set it before the first call: earlier exchanges stay as they were.
    pub fn scrubbing(self, secrets: Secrets) -> Self {
        self.state().secrets = secrets;
        self
    }

    /// The recording writing its file after every exchange too, so that a session
    /// that dies keeps what it recorded. Each write is of the whole file.
    pub fn writing_each_exchange(self) -> Self {
        self.state().write_each = true;
        self
    }

    fn state(&self) -> MutexGuard<'_, RecordingState> {
        // A panic elsewhere while holding the lock leaves whole exchanges only.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The file the recording writes to, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.state().path.clone()
    }

    /// Exchanges recorded so far.
    pub fn len(&self) -> usize {
        self.state().exchanges.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of what has been recorded so far.
    pub fn cassette(&self) -> Cassette {
        snapshot(&self.state())
    }

    /// Writes what has been recorded so far to the recording's file.
    pub fn write(&self) -> Result<(), CassetteError> {
        let (path, cassette) = {
            let state = self.state();
            let path = state.path.clone().ok_or(CassetteError::NoPath)?;
            (path, snapshot(&state))
        };
        cassette.write(&path)
    }

    /// Ends the recording: writes the file (if the recording has one) and returns
    /// the cassette.
    pub fn finish(&self) -> Result<Cassette, CassetteError> {
        let cassette = self.cassette();
        if let Some(path) = self.path() {
            cassette.write(&path)?;
        }
        Ok(cassette)
    }

    /// Numbers a new call.
    fn begin_call(&self) -> u64 {
        let mut state = self.state();
        state.calls += 1;
        state.calls
    }

    /// Keeps `exchange`, scrubbed, and writes the file if asked to.
    fn append(&self, exchange: Exchange) {
        let mut state = self.state();
        let secrets = &state.secrets;
        let exchange = Exchange {
            call: exchange.call,
            agent: exchange.agent.map(|a| secrets.scrub_str(&a).into_owned()),
            request: secrets.scrub(&exchange.request),
            latency_ms: exchange.latency_ms,
            outcome: match exchange.outcome {
                Outcome::Response(response) => Outcome::Response(secrets.scrub(&response)),
                Outcome::Error(error) => Outcome::Error(secrets.scrub(&error)),
                Outcome::NoResponse => Outcome::NoResponse,
            },
        };
        state.exchanges.push(exchange);
        if let (true, Some(path)) = (state.write_each, state.path.clone()) {
            let cassette = snapshot(&state);
            drop(state);
            // A failure here is retried by the next exchange's write and by finish.
            let _ = cassette.write(&path);
        }
    }
}

/// A copy of what `state` holds.
fn snapshot(state: &RecordingState) -> Cassette {
    Cassette {
        exchanges: state.exchanges.clone(),
    }
}

/// A model that records every exchange of the model it wraps.
#[derive(Debug)]
pub struct RecordingModel {
    inner: Arc<dyn Model>,
    recording: Recording,
    clock: Option<Arc<dyn Clock>>,
    labels: Option<AgentLabels>,
}

impl RecordingModel {
    /// Records `inner`'s exchanges into `recording`, without timing or labels.
    pub fn new(inner: Arc<dyn Model>, recording: Recording) -> Self {
        Self {
            inner,
            recording,
            clock: None,
            labels: None,
        }
    }

    /// Records each call's latency as measured on `clock`.
    pub fn timed_by(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Labels each exchange with its agent.
    pub fn labelled_by(mut self, labels: AgentLabels) -> Self {
        self.labels = Some(labels);
        self
    }

    /// The recording it records into.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Ends the recording: see [`Recording::finish`].
    pub fn finish(&self) -> Result<Cassette, CassetteError> {
        self.recording.finish()
    }
}

/// Milliseconds of `duration`, rounded to the nearest.
fn rounded_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros().saturating_add(500) / 1000).unwrap_or(u64::MAX)
}

/// A call on its way: records itself when it ends, or as `no_response` when it is
/// dropped unanswered.
struct PendingCall {
    recording: Recording,
    call: u64,
    agent: Option<String>,
    request: Option<Arc<ModelRequest>>,
    clock: Option<Arc<dyn Clock>>,
    started: Option<Duration>,
}

impl PendingCall {
    fn end(&mut self, outcome: Outcome) {
        let Some(request) = self.request.take() else {
            return;
        };
        let latency_ms = match (&self.clock, self.started) {
            (Some(clock), Some(started)) => {
                Some(rounded_millis(clock.monotonic().saturating_sub(started)))
            }
            _ => None,
        };
        self.recording.append(Exchange {
            call: self.call,
            agent: self.agent.take(),
            // The model is done with its share by now: usually no copy is made.
            request: Arc::unwrap_or_clone(request),
            latency_ms,
            outcome,
        });
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        self.end(Outcome::NoResponse);
    }
}

impl Model for RecordingModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let mut pending = PendingCall {
            recording: self.recording.clone(),
            call: self.recording.begin_call(),
            agent: self.labels.as_ref().map(|labels| labels.label(&request)),
            request: Some(Arc::clone(&request)),
            started: self.clock.as_ref().map(|clock| clock.monotonic()),
            clock: self.clock.clone(),
        };
        let answer = self.inner.send(request);
        Box::pin(async move {
            let result = answer.await;
            pending.end(match &result {
                Ok(response) => Outcome::Response(response.clone()),
                Err(error) => Outcome::Error(RecordedError::from(error)),
            });
            result
        })
    }

    fn compaction_wanted(&self, messages: &[coord_runtime::world::Message]) -> Option<bool> {
        // Recording changes nothing in the run: a scripted compaction still happens.
        self.inner.compaction_wanted(messages)
    }
}

/// Runs `seed` of `scenario` with every model call recorded into `recording`: the
/// recorder wraps the model the runtime sees (after the run's tap and cost meter),
/// timed by the run's virtual clock and labelled by agent. The run is otherwise
/// exactly [`crate::run::run_seed`]'s: recording changes neither its trace nor
/// its outcome. Call [`Recording::finish`] afterwards to write the cassette.
pub fn record_seed(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
    recording: &Recording,
) -> Result<SeedRun, RunError> {
    let labels = AgentLabels::new(scenario.scenario.coordinator.prompt.clone());
    let layer = |model: Arc<dyn Model>, clock: Arc<dyn Clock>| -> Arc<dyn Model> {
        Arc::new(
            RecordingModel::new(model, recording.clone())
                .timed_by(clock)
                .labelled_by(labels.clone()),
        )
    };
    run_seed_with_model_layer(scenario, seed, options, &layer)
}
