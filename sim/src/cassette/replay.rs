//! Replaying a cassette.
//!
//! A [`ReplayModel`] answers each request with a recorded exchange, found one of
//! two ways ([`MatchMode`]):
//!
//! - **By request hash**: the request's [canonical hash](super::canonical) finds
//!   the exchange recorded for the same request. A request recorded several times
//!   replays its exchanges in call order. This holds however the calls interleave,
//!   and proves the runtime sends what it sent when the cassette was recorded.
//! - **In order**: the n-th request gets the n-th exchange in call order, whatever
//!   it asks; per agent, the n-th request of each agent gets that agent's n-th
//!   exchange. This replays a cassette whose requests differ in detail (ids drawn
//!   from another seed), and does not check them.
//!
//! A request that finds nothing **fails loudly**: the caller gets an API error
//! (status 400, so the runtime does not retry it), and the replay keeps a
//! [`ReplayMiss`] naming the nearest recorded request with a diff. Exchanges never
//! replayed are a divergence too; [`ReplayModel::report`] lists both.
//!
//! Incoming requests are scrubbed of the same [`Secrets`] a recorder scrubs, so a
//! request holding a key finds the exchange recorded with `[redacted]` in its place.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use coord_runtime::world::{BoxFuture, Clock, Model, ModelError, ModelRequest, ModelResponse};

use super::canonical::{CanonicalRequest, RequestHash};
use super::format::{Cassette, Exchange, Outcome};
use super::label::AgentLabels;
use super::miss::{nearest, unified_diff, MissReason, NearestExchange, ReplayMiss};
use super::secrets::Secrets;

/// The status of the API error a miss returns: a client error, which the runtime
/// does not retry.
pub const MISS_STATUS: u16 = 400;

/// How a request finds its recorded exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    /// The n-th request gets the n-th exchange (in call order).
    InOrder {
        /// Count per agent label instead of across all calls.
        per_agent: bool,
    },
    /// The request's canonical hash finds its exchange.
    ByRequestHash,
}

/// What the replay answers one request with.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// The recorded response, after the recorded latency.
    Response {
        /// The response.
        response: ModelResponse,
        /// How long the recorded call took (zero if not recorded).
        latency: Duration,
    },
    /// The recorded API error, after the recorded latency.
    Error {
        /// The error.
        error: ModelError,
        /// How long the recorded call took (zero if not recorded).
        latency: Duration,
    },
    /// The recorded call never answered; neither does this one.
    NoResponse,
    /// Nothing recorded answers the request: the error to return at once. The
    /// replay keeps the miss for its report.
    Miss(ModelError),
}

/// An exchange no request replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedExchange {
    /// Its call number.
    pub call: u64,
    /// Its agent, if labelled.
    pub agent: Option<String>,
    /// Its request's hash.
    pub request_hash: RequestHash,
}

/// Everything a replay did not match: misses, then exchanges left over.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayReport {
    /// Exchanges in the cassette.
    pub exchanges: usize,
    /// Requests answered from the cassette.
    pub replayed: usize,
    /// Requests nothing answered, in the order they came.
    pub misses: Vec<ReplayMiss>,
    /// Exchanges never replayed, in call order.
    pub unused: Vec<UnusedExchange>,
}

impl ReplayReport {
    /// Whether every request was answered and every exchange replayed.
    pub fn is_clean(&self) -> bool {
        self.misses.is_empty() && self.unused.is_empty()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replayed {} of {} exchanges; {} miss(es); {} unused",
            self.replayed,
            self.exchanges,
            self.misses.len(),
            self.unused.len()
        )?;
        for miss in &self.misses {
            write!(f, "\nmiss: {miss}")?;
        }
        for unused in &self.unused {
            write!(f, "\nunused: {unused}")?;
        }
        Ok(())
    }
}

impl fmt::Display for UnusedExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call {}", self.call)?;
        if let Some(agent) = &self.agent {
            write!(f, " ({agent})")?;
        }
        write!(f, ", request {}", self.request_hash)
    }
}

/// A recorded exchange and its canonical request, computed once.
#[derive(Debug)]
struct Recorded {
    exchange: Exchange,
    canonical: CanonicalRequest,
}

/// Which queue of exchanges a request draws from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum QueueKey {
    All,
    Agent(Option<String>),
    Hash(RequestHash),
}

#[derive(Debug)]
struct ReplayState {
    /// Exchanges not yet replayed, by queue, in call order.
    queues: BTreeMap<QueueKey, VecDeque<usize>>,
    used: Vec<bool>,
    calls: u64,
    misses: Vec<ReplayMiss>,
}

/// A model that answers from a cassette.
#[derive(Debug)]
pub struct ReplayModel {
    /// The cassette's exchanges in call order.
    recorded: Vec<Recorded>,
    mode: MatchMode,
    labels: Option<AgentLabels>,
    secrets: Secrets,
    clock: Option<Arc<dyn Clock>>,
    state: Mutex<ReplayState>,
}

impl ReplayModel {
    /// A replay of `cassette` matching by `mode`: no labels (per-agent order then
    /// puts every call in one queue), API-key-shaped secrets scrubbed, answers
    /// returned at once.
    pub fn new(cassette: Cassette, mode: MatchMode) -> Self {
        let mut exchanges = cassette.exchanges;
        // Stable: exchanges with one call number keep their file order.
        exchanges.sort_by_key(|exchange| exchange.call);
        let recorded: Vec<Recorded> = exchanges
            .into_iter()
            .map(|exchange| Recorded {
                canonical: CanonicalRequest::of(&exchange.request),
                exchange,
            })
            .collect();
        let mut queues: BTreeMap<QueueKey, VecDeque<usize>> = BTreeMap::new();
        for (index, recorded) in recorded.iter().enumerate() {
            let key = match mode {
                MatchMode::InOrder { per_agent: false } => QueueKey::All,
                MatchMode::InOrder { per_agent: true } => {
                    QueueKey::Agent(recorded.exchange.agent.clone())
                }
                MatchMode::ByRequestHash => QueueKey::Hash(recorded.canonical.hash()),
            };
            queues.entry(key).or_default().push_back(index);
        }
        let used = vec![false; recorded.len()];
        Self {
            recorded,
            mode,
            labels: None,
            secrets: Secrets::new(),
            clock: None,
            state: Mutex::new(ReplayState {
                queues,
                used,
                calls: 0,
                misses: Vec::new(),
            }),
        }
    }

    /// Labels requests with `labels`, as the recorder did, for per-agent order and
    /// for the report.
    pub fn labelled_by(mut self, labels: AgentLabels) -> Self {
        self.labels = Some(labels);
        self
    }

    /// Scrubs `secrets` from requests before matching them, as the recorder did.
    pub fn scrubbing(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// Waits out each exchange's recorded latency on `clock` before answering
    /// (as a [`Model`]).
    pub fn timed_by(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// How requests find their exchange.
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// The cassette's exchanges, in call order.
    pub fn exchanges(&self) -> impl Iterator<Item = &Exchange> {
        self.recorded.iter().map(|recorded| &recorded.exchange)
    }

    fn state(&self) -> MutexGuard<'_, ReplayState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers `request`, labelled with this replay's labels.
    pub fn answer(&self, request: &ModelRequest) -> Replayed {
        let agent = self.labels.as_ref().map(|labels| labels.label(request));
        self.answer_labelled(request, agent)
    }

    /// Answers `request` of agent `agent` (a caller that labelled it already).
    pub fn answer_labelled(&self, request: &ModelRequest, agent: Option<String>) -> Replayed {
        let mut canonical = CanonicalRequest::of(request);
        let scrubbed;
        let mut request = request;
        if self.secrets.may_occur_in(canonical.as_str()) {
            scrubbed = self.secrets.scrub(request);
            request = &scrubbed;
            canonical = CanonicalRequest::of(request);
        }
        let agent = agent.map(|a| self.secrets.scrub_str(&a).into_owned());
        let mut state = self.state();
        state.calls += 1;
        let call = state.calls;
        let key = match self.mode {
            MatchMode::InOrder { per_agent: false } => QueueKey::All,
            MatchMode::InOrder { per_agent: true } => QueueKey::Agent(agent.clone()),
            MatchMode::ByRequestHash => QueueKey::Hash(canonical.hash()),
        };
        if let Some(index) = state.queues.get_mut(&key).and_then(VecDeque::pop_front) {
            state.used[index] = true;
            let exchange = &self.recorded[index].exchange;
            let latency = Duration::from_millis(exchange.latency_ms.unwrap_or(0));
            return match &exchange.outcome {
                Outcome::Response(response) => Replayed::Response {
                    response: response.clone(),
                    latency,
                },
                Outcome::Error(error) => Replayed::Error {
                    error: error.to_model_error(),
                    latency,
                },
                Outcome::NoResponse => Replayed::NoResponse,
            };
        }
        let reason = match (self.mode, &key) {
            (MatchMode::ByRequestHash, QueueKey::Hash(hash)) => {
                let recorded = self
                    .recorded
                    .iter()
                    .filter(|r| r.canonical.hash() == *hash)
                    .count();
                if recorded == 0 {
                    MissReason::Unrecorded
                } else {
                    MissReason::Exhausted { recorded }
                }
            }
            _ => MissReason::NoneLeft,
        };
        let miss = self.miss(call, agent, request, &canonical, reason);
        let error = ModelError::Api {
            status: MISS_STATUS,
            message: format!(
                "cassette miss: call {call}, request {}: {}",
                canonical.hash(),
                match miss.reason {
                    MissReason::Unrecorded => "not in the cassette",
                    MissReason::Exhausted { .. } => "every recorded exchange for it was replayed",
                    MissReason::NoneLeft => "no exchange left",
                }
            ),
        };
        state.misses.push(miss);
        Replayed::Miss(error)
    }

    /// The miss of call `call`, with the nearest recorded request and the diff.
    fn miss(
        &self,
        call: u64,
        agent: Option<String>,
        request: &ModelRequest,
        canonical: &CanonicalRequest,
        reason: MissReason,
    ) -> ReplayMiss {
        let found = nearest(
            canonical.as_str(),
            self.recorded
                .iter()
                .enumerate()
                .map(|(index, recorded)| (index, recorded.canonical.as_str())),
        );
        let (nearest, diff) = match found {
            None => (None, String::new()),
            Some((index, common_prefix_bytes)) => {
                let exchange = &self.recorded[index].exchange;
                let nearest = NearestExchange {
                    call: exchange.call,
                    agent: exchange.agent.clone(),
                    request_hash: self.recorded[index].canonical.hash(),
                    common_prefix_bytes,
                };
                let diff = unified_diff(
                    &format!(
                        "recorded call {} request {}",
                        nearest.call, nearest.request_hash
                    ),
                    &format!("actual call {call} request {}", canonical.hash()),
                    &CanonicalRequest::pretty(&exchange.request),
                    &CanonicalRequest::pretty(request),
                );
                (Some(nearest), diff)
            }
        };
        ReplayMiss {
            call,
            agent,
            request_hash: canonical.hash(),
            reason,
            nearest,
            diff,
        }
    }

    /// The misses so far and the exchanges not replayed yet. Ask at the end of a
    /// run: an exchange not replayed by then never was.
    pub fn report(&self) -> ReplayReport {
        let state = self.state();
        let unused: Vec<UnusedExchange> = self
            .recorded
            .iter()
            .zip(&state.used)
            .filter(|(_, used)| !**used)
            .map(|(recorded, _)| UnusedExchange {
                call: recorded.exchange.call,
                agent: recorded.exchange.agent.clone(),
                request_hash: recorded.canonical.hash(),
            })
            .collect();
        ReplayReport {
            exchanges: self.recorded.len(),
            replayed: self.recorded.len() - unused.len(),
            misses: state.misses.clone(),
            unused,
        }
    }
}

impl Model for ReplayModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let (result, latency) = match self.answer(&request) {
            Replayed::Response { response, latency } => (Ok(response), latency),
            Replayed::Error { error, latency } => (Err(error), latency),
            Replayed::Miss(error) => (Err(error), Duration::ZERO),
            Replayed::NoResponse => return Box::pin(std::future::pending()),
        };
        match &self.clock {
            Some(clock) if !latency.is_zero() => {
                let sleep = clock.sleep(latency);
                Box::pin(async move {
                    sleep.await;
                    result
                })
            }
            _ => Box::pin(std::future::ready(result)),
        }
    }
}
