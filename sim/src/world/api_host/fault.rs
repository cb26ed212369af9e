//! What can go wrong at the simulated API host, and when it does.
//!
//! An [`ApiFaultPlan`] is a list of [`ApiFaultRule`]s, each a trigger and a fault.
//! The host numbers every HTTP request it reads from 1, across connections, and asks
//! the plan once per request. Rules are evaluated in install order and the first rule
//! that fires wins; a request no rule fires for is answered normally. Every rate rule
//! that matches a request draws from its own seeded stream whether or not an earlier
//! rule already fired, so adding a rule never shifts another rule's draws (the same
//! discipline as [`DiskFaults`](crate::world::DiskFaults)).

use std::time::Duration;

use rand_chacha::ChaCha8Rng;

use crate::world::{Ratio, Streams};

/// The stream family of the API host's rate rules: rule `i` draws from
/// `api-faults/<i>` of the run's [`Streams`].
pub const API_FAULT_STREAM: &str = "api-faults";

/// A fault the API host injects into one request's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiFault {
    /// Answer `429` with a `rate_limit_error` body, a `retry-after` header in whole
    /// seconds (rounded up) and a `retry-after-ms` header in milliseconds (rounded up).
    RateLimited {
        /// How long the client is asked to wait.
        retry_after: Duration,
    },
    /// Answer `529` with an `overloaded_error` body.
    Overloaded,
    /// Start the answer and drop the connection part-way. A streaming answer sends its
    /// headers and its first `after_events` events (at most all of them, never the end
    /// of the chunked body); a JSON answer sends its headers, with the full
    /// `content-length`, and the first half of its body.
    DisconnectMidStream {
        /// How many SSE events reach the client before the connection drops.
        after_events: usize,
    },
    /// Answer with well-framed but broken JSON. A JSON answer's body is cut in half and
    /// its `content-length` is the length of the cut body; a streaming answer's
    /// `message_start` event carries the first half of its JSON, and the stream
    /// otherwise completes normally.
    TruncatedJson,
    /// Wait `delay` of virtual time before handling the request, then answer normally.
    Latency {
        /// How long the host waits before answering.
        delay: Duration,
    },
    /// Read the request and never answer; the connection stays open until the client
    /// closes it.
    Hang,
}

/// When a rule fires, by request number (the host counts requests from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiFaultTrigger {
    /// Only request number `n`.
    Nth(u64),
    /// Request number `n` and every one after it.
    From(u64),
    /// Each request independently, with this probability, drawn from the rule's stream.
    Rate(Ratio),
}

/// One fault rule: when it fires and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiFaultRule {
    /// When it fires.
    pub trigger: ApiFaultTrigger,
    /// What it does.
    pub fault: ApiFault,
}

impl ApiFaultRule {
    /// A rule that injects `fault` into request number `n` only (counting from 1).
    pub fn nth(n: u64, fault: ApiFault) -> Self {
        Self {
            trigger: ApiFaultTrigger::Nth(n),
            fault,
        }
    }

    /// A rule that injects `fault` into request number `n` and every later request.
    pub fn from(n: u64, fault: ApiFault) -> Self {
        Self {
            trigger: ApiFaultTrigger::From(n),
            fault,
        }
    }

    /// A rule that injects `fault` into every request.
    pub fn always(fault: ApiFault) -> Self {
        Self::from(1, fault)
    }

    /// A rule that injects `fault` into each request with probability `rate`.
    pub fn rate(rate: Ratio, fault: ApiFault) -> Self {
        Self {
            trigger: ApiFaultTrigger::Rate(rate),
            fault,
        }
    }
}

/// Why [`ApiFaultPlan::install`] refused a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiFaultRuleError {
    /// A request-number trigger of 0: requests are counted from 1.
    #[error("request numbers count from 1; a trigger at request 0 would never fire")]
    RequestZero,
}

#[derive(Debug)]
struct InstalledRule {
    rule: ApiFaultRule,
    rng: ChaCha8Rng,
}

/// The API host's faults: rules in install order, first to fire wins, each rate rule on
/// its own seeded stream. An empty plan answers every request normally.
#[derive(Debug)]
pub struct ApiFaultPlan {
    streams: Streams,
    rules: Vec<InstalledRule>,
}

impl Default for ApiFaultPlan {
    /// A plan without rules (its streams are those of seed 0, and unused).
    fn default() -> Self {
        Self::new(&Streams::new(0))
    }
}

impl ApiFaultPlan {
    /// A plan without rules whose rate rules will draw from `streams`.
    pub fn new(streams: &Streams) -> Self {
        Self {
            streams: *streams,
            rules: Vec::new(),
        }
    }

    /// The stream name of rule `rule_index`: `api-faults/<index>`.
    pub fn rule_stream_name(rule_index: usize) -> String {
        format!("{API_FAULT_STREAM}/{rule_index}")
    }

    /// Adds `rule` after the installed ones and returns its index.
    pub fn install(&mut self, rule: ApiFaultRule) -> Result<usize, ApiFaultRuleError> {
        if matches!(
            rule.trigger,
            ApiFaultTrigger::Nth(0) | ApiFaultTrigger::From(0)
        ) {
            return Err(ApiFaultRuleError::RequestZero);
        }
        let index = self.rules.len();
        let rng = self.streams.rng(&Self::rule_stream_name(index));
        self.rules.push(InstalledRule { rule, rng });
        Ok(index)
    }

    /// [`ApiFaultPlan::install`], builder style.
    pub fn with_rule(mut self, rule: ApiFaultRule) -> Result<Self, ApiFaultRuleError> {
        self.install(rule)?;
        Ok(self)
    }

    /// The installed rules, in install order.
    pub fn rules(&self) -> impl Iterator<Item = &ApiFaultRule> {
        self.rules.iter().map(|installed| &installed.rule)
    }

    /// The fault for request number `request_number` (from 1), if any rule fires.
    pub fn decide(&mut self, request_number: u64) -> Option<ApiFault> {
        assert!(request_number > 0, "the host counts requests from 1");
        let mut decided = None;
        for installed in &mut self.rules {
            // Every rate rule draws, fired or not, so that its stream advances with
            // the requests alone and not with what the other rules decided.
            let fires = match installed.rule.trigger {
                ApiFaultTrigger::Nth(n) => request_number == n,
                ApiFaultTrigger::From(n) => request_number >= n,
                ApiFaultTrigger::Rate(rate) => rate.sample(&mut installed.rng),
            };
            if fires && decided.is_none() {
                decided = Some(installed.rule.fault);
            }
        }
        decided
    }
}
