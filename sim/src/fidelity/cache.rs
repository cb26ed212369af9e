//! Cache fidelity: what the simulated prompt cache predicted for each replayed
//! request, against the usage the recording reported for it.
//!
//! A scripted turn carries its recorded usage, which the run bills; the meter's own
//! prediction for the same request is in the trace beside it (`model_billed`'s
//! `predicted_usage`). Requests without recorded usage (a waiting turn, a worker's
//! answer after its script ran out) have nothing to compare and are left out.
//!
//! The error of a total is `(predicted − recorded) / recorded`, in percent: for
//! cache reads, cache writes (5-minute and 1-hour together) and cost. Both costs
//! are priced at the built-in table for the model the recording names, so the cost
//! error is the usage error weighted by price, not a difference of models.

use coord_runtime::world::Usage;
use serde::Serialize;

use crate::economics::cost_micro_usd;
use std::collections::HashSet;

use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// One request's recorded and predicted usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsagePair {
    /// What the recording reported.
    pub recorded: Usage,
    /// What the simulated cache predicted.
    pub predicted: Usage,
}

/// An agent's usage pairs, its compaction requests apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplitPairs {
    /// Its own requests', in order.
    pub requests: Vec<UsagePair>,
    /// Its compaction requests', in order.
    pub compactions: Vec<UsagePair>,
    /// The model its requests named.
    pub model_named: Option<String>,
}

/// The usage pairs of the agent the trace labels `label`, in request order, with
/// its compaction requests (as its model received them) apart.
pub fn split_pairs(trace: &[TraceEntry], label: &str) -> SplitPairs {
    let compaction_calls: HashSet<u32> = trace
        .iter()
        .filter(|entry| entry.actor == label)
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::ModelCalled {
                call,
                compaction: true,
                ..
            }) => Some(*call),
            _ => None,
        })
        .collect();
    let mut billed: Vec<(Option<UsagePair>, bool)> = Vec::new();
    let mut model_named = None;
    for entry in trace {
        if let TraceEvent::Sim(SimEvent::ModelBilled {
            agent,
            call,
            model,
            usage,
            predicted_usage,
            ..
        }) = &entry.typed
        {
            if entry.actor != label || agent != label {
                continue;
            }
            let pair = predicted_usage.as_ref().map(|predicted| UsagePair {
                recorded: **usage,
                predicted: **predicted,
            });
            if pair.is_some() {
                model_named.get_or_insert_with(|| model.to_string());
            }
            billed.push((pair, compaction_calls.contains(call)));
        }
    }
    let mut split = SplitPairs {
        model_named,
        ..SplitPairs::default()
    };
    for (pair, compaction) in billed {
        let Some(pair) = pair else { continue };
        match compaction {
            true => split.compactions.push(pair),
            false => split.requests.push(pair),
        }
    }
    split
}

/// Token and cost totals of a set of requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UsageTotals {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Tokens written to the cache, 5-minute and 1-hour TTL together.
    pub cache_write_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The price at the built-in table, in micro-dollars.
    pub cost_micro_usd: u64,
}

impl UsageTotals {
    fn add(&mut self, usage: &Usage, model: &str) {
        self.input_tokens += usage.input_tokens;
        self.cache_read_tokens += usage.cache_read_input_tokens;
        self.cache_write_tokens += usage.cache_creation_input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cost_micro_usd += cost_micro_usd(model, usage);
    }
}

/// How a set of predictions compares with the recorded usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CacheFidelity {
    /// Requests compared.
    pub requests: usize,
    /// What the recording reported, in total.
    pub recorded: UsageTotals,
    /// What the simulated cache predicted, in total.
    pub predicted: UsageTotals,
    /// Error of the cache-read total, in percent; `None` when none was recorded.
    pub cache_read_error_percent: Option<f64>,
    /// Error of the cache-write total, in percent; `None` when none was recorded.
    pub cache_write_error_percent: Option<f64>,
    /// Error of the cost, in percent; `None` when the recording cost nothing.
    pub cost_error_percent: Option<f64>,
    /// Mean over requests of |predicted − recorded| cache-read tokens.
    pub cache_read_mean_absolute_error_tokens: f64,
    /// Mean over requests of |predicted − recorded| cache-write tokens.
    pub cache_write_mean_absolute_error_tokens: f64,
}

/// `(predicted − recorded) / recorded`, in percent.
pub fn error_percent(recorded: u64, predicted: u64) -> Option<f64> {
    (recorded > 0).then(|| (predicted as f64 - recorded as f64) / recorded as f64 * 100.0)
}

impl CacheFidelity {
    /// The fidelity of `pairs`, both sides priced as `model`.
    pub fn of(pairs: &[UsagePair], model: &str) -> CacheFidelity {
        let mut fidelity = CacheFidelity {
            requests: pairs.len(),
            ..CacheFidelity::default()
        };
        let (mut read_errors, mut write_errors) = (0u64, 0u64);
        for pair in pairs {
            fidelity.recorded.add(&pair.recorded, model);
            fidelity.predicted.add(&pair.predicted, model);
            read_errors += pair
                .predicted
                .cache_read_input_tokens
                .abs_diff(pair.recorded.cache_read_input_tokens);
            write_errors += pair
                .predicted
                .cache_creation_input_tokens
                .abs_diff(pair.recorded.cache_creation_input_tokens);
        }
        fidelity.finish(read_errors, write_errors);
        fidelity
    }

    /// The fidelity of several sets together (a session of several agents).
    pub fn total<'a>(parts: impl IntoIterator<Item = &'a CacheFidelity>) -> CacheFidelity {
        let mut total = CacheFidelity::default();
        let (mut read_errors, mut write_errors) = (0.0, 0.0);
        for part in parts {
            total.requests += part.requests;
            for (sum, add) in [
                (&mut total.recorded, &part.recorded),
                (&mut total.predicted, &part.predicted),
            ] {
                sum.input_tokens += add.input_tokens;
                sum.cache_read_tokens += add.cache_read_tokens;
                sum.cache_write_tokens += add.cache_write_tokens;
                sum.output_tokens += add.output_tokens;
                sum.cost_micro_usd += add.cost_micro_usd;
            }
            read_errors += part.cache_read_mean_absolute_error_tokens * part.requests as f64;
            write_errors += part.cache_write_mean_absolute_error_tokens * part.requests as f64;
        }
        total.finish(read_errors.round() as u64, write_errors.round() as u64);
        total
    }

    fn finish(&mut self, read_errors: u64, write_errors: u64) {
        let (recorded, predicted) = (&self.recorded, &self.predicted);
        self.cache_read_error_percent =
            error_percent(recorded.cache_read_tokens, predicted.cache_read_tokens);
        self.cache_write_error_percent =
            error_percent(recorded.cache_write_tokens, predicted.cache_write_tokens);
        self.cost_error_percent = error_percent(recorded.cost_micro_usd, predicted.cost_micro_usd);
        if self.requests > 0 {
            self.cache_read_mean_absolute_error_tokens = read_errors as f64 / self.requests as f64;
            self.cache_write_mean_absolute_error_tokens =
                write_errors as f64 / self.requests as f64;
        }
    }
}
