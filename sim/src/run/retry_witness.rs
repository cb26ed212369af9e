//! How each agent retried a model call the API failed, judged from what the API
//! saw: which attempts it failed, with which error, and when the next one came.
//!
//! The runtime's documented policy (`runtime/src/session/retry.rs`): a
//! transient error (429, 529, a timeout, a failed connection, a 408 or 5xx) is tried
//! again, up to 10 times, after the server's `retry-after` when it gave one and
//! otherwise after 1 s doubling per attempt (at most 32 s); any other error is final.
//! The witness holds every attempt to it: a non-transient error retried, a retry sent
//! before its wait was over or long after it, or an attempt past the budget is
//! logged. The policy's
//! numbers are the simulator's own copy: a regression in the runtime's must not move
//! the yardstick.
//!
//! An attempt is a retry when it follows a failed one with the same request, byte
//! for byte: the retry loop sends one request again, while a new round, or a new
//! compaction request, sends another conversation. Requests are compared by digest,
//! taken only of a failed attempt and of the attempt after it, so a run without
//! failures pays nothing; the digest works the same whether the API reads the
//! runtime's request in memory or from the wire.
//!
//! Two launches of one prompt send the same first request, byte for byte, and the
//! API cannot tell the second from a retry of the first. So the witness counts the
//! launches a model asked for, by prompt: an agent's first request that the policy
//! would not allow as a retry is a new task's while an asked launch of that prompt
//! has not yet sent its first request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::digest::Fnv1a64;
use coord_runtime::world::{Clock, ModelError, ModelRequest};

use crate::trace::{AbandonedCall, Name, SimEvent, Trace};

/// Retries after a transient error, at most.
pub const MODEL_RETRIES_MAX: u32 = 10;
/// The first wait before a retry, when the server gave none.
pub const MODEL_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// How much earlier than the API host's failure the runtime may learn of it over
/// a network: more than any wire delay the simulated networks draw, far less than
/// the shortest wait.
const NETWORK_SLACK: Duration = Duration::from_millis(500);
/// The longest wait is this many first waits.
const BACKOFF_MULTIPLE_MAX: u32 = 32;
/// How much later than its wait a retry may reach an API answering in memory: the
/// runtime's sleep ends on time in virtual time, and the retry goes out at once.
/// Over a network, twice [`NETWORK_SLACK`] instead: the failure and the retry
/// each cross the wire.
const LATE_SLACK_IN_MEMORY: Duration = Duration::from_millis(1);

/// The digest of `request` as the API received it.
fn request_digest(request: &ModelRequest) -> u64 {
    let mut hasher = Fnv1a64::new();
    // A request that does not serialize cannot reach the API; it digests as nothing.
    hasher.update(&serde_json::to_vec(request).unwrap_or_default());
    hasher.finish()
}

/// Whether the policy retries `error`: the simulator's reading of the API's errors.
/// Over a network, the API host sends a malformed answer as a `500 api_error`, or
/// cuts the stream, and either is worth another attempt.
fn retried_by_policy(error: &ModelError, over_network: bool) -> bool {
    match error {
        ModelError::RateLimited { .. }
        | ModelError::Overloaded
        | ModelError::Timeout { .. }
        | ModelError::Transport(_) => true,
        ModelError::Api { status, .. } => *status == 408 || (500..600).contains(status),
        // A malformed answer, and whatever error the runtime adds later, is final
        // in memory until the policy says otherwise.
        _ => over_network,
    }
}

/// The wait the policy asks for after failed attempt number `attempts` (from 1)
/// of a request, with the server's `retry_after` if it gave one.
fn wait_required(attempts: u32, retry_after: Option<Duration>) -> Duration {
    retry_after.unwrap_or_else(|| {
        let multiple = 1u32
            .checked_shl(attempts.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(BACKOFF_MULTIPLE_MAX);
        MODEL_RETRY_BACKOFF * multiple
    })
}

/// An agent's latest request, as the API saw its attempts.
#[derive(Debug, Default)]
struct Attempts {
    /// Attempts of the request so far.
    sent: u32,
    /// How the latest attempt failed, if it did.
    failure: Option<Failure>,
}

/// A failed attempt.
#[derive(Debug)]
struct Failure {
    /// The failed request's digest: the next attempt is a retry if it matches.
    request_digest: u64,
    retried_by_policy: bool,
    retry_after: Option<Duration>,
    /// When the error reached the runtime.
    failed_at: Duration,
    error: String,
}

/// What the witness keeps of a run's calls.
#[derive(Debug, Default)]
struct Calls {
    /// Every agent's latest request, by label.
    latest: HashMap<String, Attempts>,
    /// Launches a model asked for, by the launched agent's label, whose first
    /// request has not come yet (some may never come: a launch can be refused).
    launches_unstarted: HashMap<String, u32>,
}

/// Every agent's latest request, kept across the boots of a run (the tap of each
/// boot shares it).
#[derive(Debug, Clone, Default)]
pub struct RetryRecord(Arc<Mutex<Calls>>);

impl RetryRecord {
    /// Forgets every failure: a restarted host's runtime starts its calls afresh,
    /// and the first request it sends, the same conversation from its durable log,
    /// is no retry of a call its earlier boot made.
    pub fn restart(&self) {
        *self.0.lock().expect("retry record poisoned") = Calls::default();
    }

    /// The calls whose latest attempt failed with an error the policy retries,
    /// with retries left, and that were never tried again: the closing
    /// `retries_abandoned` event's, sorted by agent.
    /// `ids_of(label)` names the runtime's ids for the agent of `label` (its task
    /// ids, or `coordinator`).
    pub fn abandoned(&self, ids_of: impl Fn(&str) -> Vec<String>) -> Vec<AbandonedCall> {
        let record = self.0.lock().expect("retry record poisoned");
        let mut abandoned: Vec<AbandonedCall> = record
            .latest
            .iter()
            .filter_map(|(agent, attempts)| {
                let failure = attempts.failure.as_ref()?;
                (failure.retried_by_policy && attempts.sent <= MODEL_RETRIES_MAX).then(|| {
                    AbandonedCall {
                        agent: agent.clone(),
                        agent_ids: ids_of(agent),
                        attempts: attempts.sent,
                        failed_at_ms: u64::try_from(failure.failed_at.as_millis())
                            .unwrap_or(u64::MAX),
                        error: failure.error.clone(),
                    }
                })
            })
            .collect();
        abandoned.sort_by(|a, b| a.agent.cmp(&b.agent));
        abandoned
    }
}

/// The retry witness of one boot, over the run's [`RetryRecord`].
#[derive(Debug, Clone)]
pub struct RetryWitness {
    clock: Arc<dyn Clock>,
    trace: Trace,
    record: RetryRecord,
    /// Whether the API host answers the runtime over a network transport.
    over_network: bool,
}

impl RetryWitness {
    /// A witness reading time from `clock`, logging into `trace`, keeping `record`.
    pub fn new(clock: Arc<dyn Clock>, trace: Trace, record: RetryRecord) -> Self {
        Self {
            clock,
            trace,
            record,
            over_network: false,
        }
    }

    /// The same witness, keeping `record` (the run's, shared by every boot).
    pub fn keeping(mut self, record: RetryRecord) -> Self {
        self.record = record;
        self
    }

    /// The witness of an API host that answers over a network transport.
    pub fn over_network(mut self) -> Self {
        self.over_network = true;
        self
    }

    /// Notes that a model asked to launch an agent labelled `agent`, whose first
    /// request may repeat the one an earlier launch of the same prompt sent.
    pub fn launch_asked(&self, agent: &str) {
        let mut record = self.record.0.lock().expect("retry record poisoned");
        *record
            .launches_unstarted
            .entry(agent.to_owned())
            .or_default() += 1;
    }

    /// Judges `agent`'s attempt, number `call`, of `request` as it reaches the API.
    pub fn requested(&self, agent: &str, call: u32, request: &ModelRequest) {
        let mut record = self.record.0.lock().expect("retry record poisoned");
        let Calls {
            latest,
            launches_unstarted,
        } = &mut *record;
        let unstarted = launches_unstarted.get_mut(agent);
        let attempts = latest.entry(agent.to_owned()).or_default();
        let retry = attempts
            .failure
            .as_ref()
            .is_some_and(|last| last.request_digest == request_digest(request));
        let start = || Attempts {
            sent: 1,
            failure: None,
        };
        if !retry {
            // A new request: the agent went on (or was stopped) after any failure.
            *attempts = start();
            if let (1, Some(unstarted)) = (call, unstarted) {
                *unstarted = unstarted.saturating_sub(1);
            }
            return;
        }
        attempts.sent += 1;
        let Some(last) = attempts.failure.take() else {
            return;
        };
        let attempt = attempts.sent;
        let waited = self.clock.monotonic().saturating_sub(last.failed_at);
        let required = wait_required(attempt - 1, last.retry_after);
        // Over a network the runtime may learn of a failure before the API host
        // sends it (its own client times the call out from when it sent it, a
        // wire's delay before the host received it), and its retry reaches the
        // host a wire's delay after it leaves.
        let (earliest, latest) = if self.over_network {
            (
                required.saturating_sub(NETWORK_SLACK),
                required + NETWORK_SLACK * 2,
            )
        } else {
            (required, required + LATE_SLACK_IN_MEMORY)
        };
        let detail = if !last.retried_by_policy {
            Some(format!(
                "{agent} sent call {call} again after {}, an error the policy never retries",
                last.error
            ))
        } else if attempt > 1 + MODEL_RETRIES_MAX {
            Some(format!(
                "{agent} sent attempt {attempt} of call {call}, past the budget of {MODEL_RETRIES_MAX} retries"
            ))
        } else if waited < earliest || waited > latest {
            Some(format!(
                "{agent} retried call {call} {} ms after attempt {} failed ({}), where the policy waits {} ms",
                waited.as_millis(),
                attempt - 1,
                last.error,
                required.as_millis()
            ))
        } else {
            None
        };
        // A first request the policy would not send again is a new launch's, while
        // one is still to start.
        if let (Some(_), 1, Some(unstarted)) = (&detail, call, unstarted) {
            if *unstarted > 0 {
                *unstarted -= 1;
                *attempts = start();
                return;
            }
        }
        if let Some(detail) = detail {
            self.trace.push(
                agent,
                SimEvent::ModelRetryWrong {
                    agent: Name::new(agent),
                    detail,
                },
            );
        }
    }

    /// Notes that the API failed `agent`'s attempt of `request` (the one
    /// [`Self::requested`] saw last) with `error`, which reaches the runtime
    /// `latency` from now.
    pub fn failed(
        &self,
        agent: &str,
        request: &ModelRequest,
        error: &ModelError,
        latency: Duration,
    ) {
        let mut record = self.record.0.lock().expect("retry record poisoned");
        let attempts = record.latest.entry(agent.to_owned()).or_default();
        attempts.sent = attempts.sent.max(1);
        attempts.failure = Some(Failure {
            request_digest: request_digest(request),
            retried_by_policy: retried_by_policy(error, self.over_network),
            retry_after: match error {
                ModelError::RateLimited { retry_after } => *retry_after,
                _ => None,
            },
            failed_at: self.clock.monotonic() + latency,
            error: error.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;
    use coord_runtime::world::ManualClock;

    /// A request of its own: `model` tells it from the others.
    fn request(model: &str) -> ModelRequest {
        ModelRequest {
            model: model.to_owned(),
            max_tokens: 0,
            tools: Default::default(),
            system: Default::default(),
            messages: Vec::new(),
            thinking: None,
        }
    }

    fn wrong(trace: &Trace) -> Vec<String> {
        trace
            .entries()
            .iter()
            .filter_map(|entry| match &entry.typed {
                TraceEvent::Sim(SimEvent::ModelRetryWrong { detail, .. }) => Some(detail.clone()),
                _ => None,
            })
            .collect()
    }

    fn witness() -> (Arc<ManualClock>, Trace, RetryRecord, RetryWitness) {
        let clock = Arc::new(ManualClock::new(0));
        let trace = Trace::new(clock.clone());
        let record = RetryRecord::default();
        let witness = RetryWitness::new(clock.clone(), trace.clone(), record.clone());
        (clock, trace, record, witness)
    }

    #[test]
    fn the_waits_double_from_one_second_and_a_retry_after_overrides_them() {
        assert_eq!(wait_required(1, None), Duration::from_secs(1));
        assert_eq!(wait_required(2, None), Duration::from_secs(2));
        assert_eq!(wait_required(6, None), Duration::from_secs(32));
        assert_eq!(wait_required(10, None), Duration::from_secs(32));
        assert_eq!(
            wait_required(3, Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn a_retry_is_held_to_its_wait_its_error_and_the_budget() {
        let (clock, trace, _, witness) = witness();
        let sent = request("a");
        // A 529 waited out for the full second, then one retried too soon.
        witness.requested("w", 1, &sent);
        witness.failed("w", &sent, &ModelError::Overloaded, Duration::ZERO);
        clock.advance(Duration::from_secs(1));
        witness.requested("w", 2, &sent);
        assert!(wrong(&trace).is_empty());
        witness.failed("w", &sent, &ModelError::Overloaded, Duration::ZERO);
        clock.advance(Duration::from_secs(1));
        witness.requested("w", 3, &sent);
        assert_eq!(wrong(&trace).len(), 1, "the second wait is two seconds");
        // A truncated answer is final.
        let other = request("b");
        let malformed = ModelError::Malformed {
            detail: "cut".to_owned(),
        };
        witness.requested("v", 1, &other);
        witness.failed("v", &other, &malformed, Duration::ZERO);
        clock.advance(Duration::from_secs(60));
        witness.requested("v", 2, &other);
        assert_eq!(wrong(&trace).len(), 2);
        assert!(wrong(&trace)[1].contains("never retries"));
    }

    #[test]
    fn a_second_launch_of_a_prompt_is_no_retry_of_the_first() {
        // Goal: a task launched with the prompt of one whose first call failed
        // for good sends the same first request, and is a new task; the same
        // request with no launch asked for is a retry the policy forbids.
        // Method: two launches asked, the first's call fails as truncated, and
        // the second's arrives; then a third attempt, with no launch left.
        let (clock, trace, _, witness) = witness();
        let first = request("a");
        let malformed = ModelError::Malformed {
            detail: "cut".to_owned(),
        };
        witness.launch_asked("w");
        witness.launch_asked("w");
        witness.requested("w", 1, &first);
        witness.failed("w", &first, &malformed, Duration::ZERO);
        clock.advance(Duration::from_millis(200));
        witness.requested("w", 1, &first);
        assert!(wrong(&trace).is_empty(), "{:?}", wrong(&trace));
        witness.failed("w", &first, &malformed, Duration::ZERO);
        clock.advance(Duration::from_millis(200));
        witness.requested("w", 1, &first);
        let details = wrong(&trace);
        assert_eq!(details.len(), 1, "{details:?}");
        assert!(details[0].contains("never retries"), "{details:?}");
    }

    #[test]
    fn a_retry_sent_long_after_its_wait_is_wrong_too() {
        // Goal: a backoff that grew too fast (or started too high) is held to the
        // policy as much as one too short; over a network, the wire's delay is
        // allowed on top. Method: a 529 retried 4 s later where the policy waits
        // 1 s, in memory and over a network; then 1.4 s later over a network.
        let (clock, trace, record, witness) = witness();
        let sent = request("a");
        witness.requested("w", 1, &sent);
        witness.failed("w", &sent, &ModelError::Overloaded, Duration::ZERO);
        clock.advance(Duration::from_secs(4));
        witness.requested("w", 2, &sent);
        let details = wrong(&trace);
        assert_eq!(details.len(), 1, "{details:?}");
        assert!(
            details[0].contains("4000 ms after attempt 1 failed"),
            "{details:?}"
        );
        assert!(
            details[0].contains("the policy waits 1000 ms"),
            "{details:?}"
        );
        let networked = witness.keeping(record).over_network();
        let other = request("b");
        for (late, flagged) in [
            (Duration::from_millis(1_400), 1),
            (Duration::from_secs(4), 2),
        ] {
            networked.requested("v", 1, &other);
            networked.failed("v", &other, &ModelError::Overloaded, Duration::ZERO);
            clock.advance(late);
            networked.requested("v", 2, &other);
            assert_eq!(wrong(&trace).len(), flagged, "{late:?}");
            // The next request is a new one.
            networked.requested("v", 3, &request("c"));
        }
    }

    #[test]
    fn a_call_left_failed_with_retries_to_spare_is_abandoned() {
        // Goal: the closing record names a call whose last attempt failed with an
        // error the policy retries, while retries were left; not one that used
        // them all, nor one whose error is final.
        let (clock, _, record, witness) = witness();
        let (early, spent, truncated) = (request("a"), request("b"), request("c"));
        for _ in 0..10 {
            witness.requested("early", 1, &early);
            witness.failed("early", &early, &ModelError::Overloaded, Duration::ZERO);
            clock.advance(Duration::from_secs(32));
        }
        for _ in 0..11 {
            witness.requested("spent", 1, &spent);
            witness.failed("spent", &spent, &ModelError::Overloaded, Duration::ZERO);
            clock.advance(Duration::from_secs(32));
        }
        let malformed = ModelError::Malformed {
            detail: "cut".to_owned(),
        };
        witness.requested("truncated", 1, &truncated);
        witness.failed("truncated", &truncated, &malformed, Duration::ZERO);
        let abandoned = record.abandoned(|label| vec![format!("id of {label}")]);
        assert_eq!(abandoned.len(), 1, "{abandoned:?}");
        assert_eq!(
            (abandoned[0].agent.as_str(), abandoned[0].attempts),
            ("early", 10)
        );
        assert_eq!(abandoned[0].agent_ids, vec!["id of early".to_owned()]);
    }

    #[test]
    fn eleven_attempts_are_the_budget_and_a_new_request_starts_over() {
        let (clock, trace, _, witness) = witness();
        let sent = request("a");
        let limited = ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(5)),
        };
        witness.requested("w", 1, &sent);
        for attempt in 1..=11 {
            witness.failed("w", &sent, &limited, Duration::ZERO);
            clock.advance(Duration::from_secs(5));
            witness.requested("w", attempt + 1, &sent);
        }
        let details = wrong(&trace);
        assert_eq!(details.len(), 1, "{details:?}");
        assert!(details[0].contains("attempt 12"), "{details:?}");
        // The agent's next request is a new one, whatever came before.
        witness.failed("w", &sent, &limited, Duration::ZERO);
        witness.requested("w", 13, &request("b"));
        assert_eq!(wrong(&trace).len(), 1);
    }
}
