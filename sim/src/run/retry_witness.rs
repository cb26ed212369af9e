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

use crate::trace::{AbandonedCall, Name, SimEvent, Trace};

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

/// An agent's latest request, as the API saw its attempts.
#[derive(Debug)]
struct Attempts {
    request: RequestKey,
    /// Attempts of the request so far.
    sent: u32,
    /// How the latest attempt failed, if it did.
    failure: Option<Failure>,
}

/// A failed attempt.
#[derive(Debug)]
struct Failure {
    retried_by_policy: bool,
    retry_after: Option<Duration>,
    /// When the error reached the runtime.
    failed_at: Duration,
    error: String,
}

/// Every agent's latest request, kept across the boots of a run (the tap of each
/// boot shares it).
#[derive(Debug, Clone, Default)]
pub struct RetryRecord(Arc<Mutex<HashMap<String, Attempts>>>);

impl RetryRecord {
    /// The calls whose latest attempt failed with an error the policy retries,
    /// with retries left, and that were never tried again: the closing
    /// `retries_abandoned` event's, sorted by agent.
    pub fn abandoned(&self) -> Vec<AbandonedCall> {
        let record = self.0.lock().expect("retry record poisoned");
        let mut abandoned: Vec<AbandonedCall> = record
            .iter()
            .filter_map(|(agent, attempts)| {
                let failure = attempts.failure.as_ref()?;
                (failure.retried_by_policy && attempts.sent <= MODEL_RETRIES_MAX).then(|| {
                    AbandonedCall {
                        agent: agent.clone(),
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
}

impl RetryWitness {
    /// A witness reading time from `clock`, logging into `trace`, keeping `record`.
    pub fn new(clock: Arc<dyn Clock>, trace: Trace, record: RetryRecord) -> Self {
        Self {
            clock,
            trace,
            record,
        }
    }

    /// Judges `agent`'s attempt, number `call`, of `request` as it reaches the API.
    pub fn requested(&self, agent: &str, call: u32, request: &RequestKey) {
        let mut record = self.record.0.lock().expect("retry record poisoned");
        let attempts = match record.get_mut(agent) {
            Some(attempts) if attempts.request.is(request) => attempts,
            _ => {
                record.insert(
                    agent.to_owned(),
                    Attempts {
                        request: request.clone(),
                        sent: 1,
                        failure: None,
                    },
                );
                return;
            }
        };
        attempts.sent += 1;
        let Some(last) = attempts.failure.take() else {
            return;
        };
        let attempt = attempts.sent;
        let waited = self.clock.monotonic().saturating_sub(last.failed_at);
        let required = wait_required(attempt - 1, last.retry_after);
        let detail = if !last.retried_by_policy {
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
                attempt - 1,
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
        let mut record = self.record.0.lock().expect("retry record poisoned");
        let attempts = record.entry(agent.to_owned()).or_insert_with(|| Attempts {
            request: request.clone(),
            sent: 1,
            failure: None,
        });
        if !attempts.request.is(request) {
            *attempts = Attempts {
                request: request.clone(),
                sent: 1,
                failure: None,
            };
        }
        attempts.failure = Some(Failure {
            retried_by_policy: retried_by_policy(error),
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
        let witness = RetryWitness::new(clock.clone(), trace.clone(), RetryRecord::default());
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
    fn a_call_left_failed_with_retries_to_spare_is_abandoned() {
        // Goal: the closing record names a call whose last attempt failed with an
        // error the policy retries, while retries were left; not one that used
        // them all, nor one whose error is final.
        let clock = Arc::new(ManualClock::new(0));
        let trace = Trace::new(clock.clone());
        let record = RetryRecord::default();
        let witness = RetryWitness::new(clock.clone(), trace.clone(), record.clone());
        let (early, spent, truncated) = (request(), request(), request());
        let keys = [
            RequestKey::of(&early),
            RequestKey::of(&spent),
            RequestKey::of(&truncated),
        ];
        for _ in 0..10 {
            witness.requested("early", 1, &keys[0]);
            witness.failed("early", &keys[0], &ModelError::Overloaded, Duration::ZERO);
        }
        for _ in 0..11 {
            witness.requested("spent", 1, &keys[1]);
            witness.failed("spent", &keys[1], &ModelError::Overloaded, Duration::ZERO);
        }
        let malformed = ModelError::Malformed {
            detail: "cut".to_owned(),
        };
        witness.requested("truncated", 1, &keys[2]);
        witness.failed("truncated", &keys[2], &malformed, Duration::ZERO);
        let abandoned = record.abandoned();
        assert_eq!(abandoned.len(), 1, "{abandoned:?}");
        assert_eq!(
            (abandoned[0].agent.as_str(), abandoned[0].attempts),
            ("early", 10)
        );
    }

    #[test]
    fn eleven_attempts_are_the_budget_and_a_new_request_starts_over() {
        let clock = Arc::new(ManualClock::new(0));
        let trace = Trace::new(clock.clone());
        let witness = RetryWitness::new(clock.clone(), trace.clone(), RetryRecord::default());
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
