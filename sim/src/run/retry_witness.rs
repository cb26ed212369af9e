//! How each agent retried a model call the API failed, judged from what the API
//! saw: which attempts it failed, with which error, and when the next one came.
//!
//! The runtime's documented policy (`session/retry.rs`, README "Faults"): a
//! transient error (429, 529, a timeout, a failed connection, a 408 or 5xx) is tried
//! again, up to 10 times, after the server's `retry-after` when it gave one and
//! otherwise after 1 s doubling per attempt (at most 32 s); any other error is final.
//! The witness holds every attempt to it: a non-transient error retried, a retry sent
//! before its wait was over, or an attempt past the budget is logged. The policy's
//! numbers are the simulator's own copy: a regression in the runtime's must not move
//! the yardstick.
//!
//! An attempt is a retry when it is the same request, the very allocation the
//! runtime handed the model before: the retry loop sends one request again, and a
//! new round, or a new compaction request, builds a new one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use coord_runtime::world::{Clock, ModelError, ModelRequest};

use crate::trace::{Name, SimEvent, Trace};

/// Retries after a transient error, at most.
pub const MODEL_RETRIES_MAX: u32 = 10;
/// The first wait before a retry, when the server gave none.
pub const MODEL_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait is this many first waits.
const BACKOFF_MULTIPLE_MAX: u32 = 32;

/// Which request an attempt sends: a weak handle on the allocation the runtime
/// handed the model. Holding it keeps the allocation from being reused by a later
/// request, so two keys are the same request exactly when they point at the same
/// allocation, whichever allocator the build uses.
#[derive(Debug, Clone)]
pub struct RequestKey(Weak<ModelRequest>);

impl RequestKey {
    /// The key of `request` as the runtime handed it to the model.
    pub fn of(request: &Arc<ModelRequest>) -> Self {
        Self(Arc::downgrade(request))
    }

    fn is(&self, other: &RequestKey) -> bool {
        Weak::ptr_eq(&self.0, &other.0)
    }
}

/// Whether the policy retries `error`: the simulator's reading of the API's errors.
fn retried_by_policy(error: &ModelError) -> bool {
    match error {
        ModelError::RateLimited { .. }
        | ModelError::Overloaded
        | ModelError::Timeout { .. }
        | ModelError::Transport(_) => true,
        ModelError::Api { status, .. } => *status == 408 || (500..600).contains(status),
        // A malformed answer, and whatever error the runtime adds later, is final
        // until the policy says otherwise.
        _ => false,
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

/// The last failed attempt of one agent's request.
#[derive(Debug)]
struct Failure {
    request: RequestKey,
    /// Attempts of the request so far, this one included.
    attempts: u32,
    retried: bool,
    retry_after: Option<Duration>,
    /// When the error reached the runtime.
    failed_at: Duration,
    error: String,
}

/// The retry witness of one boot.
#[derive(Debug, Clone)]
pub struct RetryWitness {
    clock: Arc<dyn Clock>,
    trace: Trace,
    failures: Arc<Mutex<HashMap<String, Failure>>>,
}

impl RetryWitness {
    /// A witness reading time from `clock`, logging into `trace`.
    pub fn new(clock: Arc<dyn Clock>, trace: Trace) -> Self {
        Self {
            clock,
            trace,
            failures: Arc::default(),
        }
    }

    /// Judges `agent`'s attempt, number `call`, of `request` as it reaches the API.
    pub fn requested(&self, agent: &str, call: u32, request: &RequestKey) {
        let mut failures = self.failures.lock().expect("retry witness poisoned");
        let Some(last) = failures.get(agent) else {
            return;
        };
        if !last.request.is(request) {
            // A new request: the agent went on (or was stopped) after the failure.
            failures.remove(agent);
            return;
        }
        let attempt = last.attempts + 1;
        let waited = self.clock.monotonic().saturating_sub(last.failed_at);
        let required = wait_required(last.attempts, last.retry_after);
        let detail = if !last.retried {
            Some(format!(
                "{agent} sent call {call} again after {}, an error the policy never retries",
                last.error
            ))
        } else if attempt > 1 + MODEL_RETRIES_MAX {
            Some(format!(
                "{agent} sent attempt {attempt} of call {call}, past the budget of {MODEL_RETRIES_MAX} retries"
            ))
        } else if waited < required {
            Some(format!(
                "{agent} retried call {call} {} ms after attempt {} failed ({}), where the policy waits {} ms",
                waited.as_millis(),
                last.attempts,
                last.error,
                required.as_millis()
            ))
        } else {
            None
        };
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

    /// Notes that the API failed `agent`'s attempt of `request` with `error`, which
    /// reaches the runtime `latency` from now.
    pub fn failed(&self, agent: &str, request: &RequestKey, error: &ModelError, latency: Duration) {
        let mut failures = self.failures.lock().expect("retry witness poisoned");
        let attempts = match failures.get(agent) {
            Some(last) if last.request.is(request) => last.attempts + 1,
            _ => 1,
        };
        let retry_after = match error {
            ModelError::RateLimited { retry_after } => *retry_after,
            _ => None,
        };
        failures.insert(
            agent.to_owned(),
            Failure {
                request: request.clone(),
                attempts,
                retried: retried_by_policy(error),
                retry_after,
                failed_at: self.clock.monotonic() + latency,
                error: error.to_string(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;
    use coord_runtime::world::ManualClock;

    fn request() -> Arc<ModelRequest> {
        Arc::new(ModelRequest {
            model: String::new(),
            max_tokens: 0,
            tools: Default::default(),
            system: Default::default(),
            messages: Vec::new(),
            thinking: None,
        })
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
        let clock = Arc::new(ManualClock::new(0));
        let trace = Trace::new(clock.clone());
        let witness = RetryWitness::new(clock.clone(), trace.clone());
        let sent = request();
        let key = RequestKey::of(&sent);
        // A 529 waited out for the full second, then one retried too soon.
        witness.failed("w", &key, &ModelError::Overloaded, Duration::ZERO);
        clock.advance(Duration::from_secs(1));
        witness.requested("w", 2, &key);
        assert!(wrong(&trace).is_empty());
        witness.failed("w", &key, &ModelError::Overloaded, Duration::ZERO);
        clock.advance(Duration::from_secs(1));
        witness.requested("w", 3, &key);
        assert_eq!(wrong(&trace).len(), 1, "the second wait is two seconds");
        // A truncated answer is final.
        let other = request();
        let other_key = RequestKey::of(&other);
        let malformed = ModelError::Malformed {
            detail: "cut".to_owned(),
        };
        witness.failed("v", &other_key, &malformed, Duration::ZERO);
        clock.advance(Duration::from_secs(60));
        witness.requested("v", 2, &other_key);
        assert_eq!(wrong(&trace).len(), 2);
        assert!(wrong(&trace)[1].contains("never retries"));
    }

    #[test]
    fn eleven_attempts_are_the_budget_and_a_new_request_starts_over() {
        let clock = Arc::new(ManualClock::new(0));
        let trace = Trace::new(clock.clone());
        let witness = RetryWitness::new(clock.clone(), trace.clone());
        let sent = request();
        let key = RequestKey::of(&sent);
        let limited = ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(5)),
        };
        for attempt in 1..=11 {
            witness.failed("w", &key, &limited, Duration::ZERO);
            clock.advance(Duration::from_secs(5));
            witness.requested("w", attempt + 1, &key);
        }
        let details = wrong(&trace);
        assert_eq!(details.len(), 1, "{details:?}");
        assert!(details[0].contains("attempt 12"), "{details:?}");
        // The agent's next request is a new one, whatever came before.
        let next = request();
        witness.requested("w", 13, &RequestKey::of(&next));
        assert_eq!(wrong(&trace).len(), 1);
    }
}
