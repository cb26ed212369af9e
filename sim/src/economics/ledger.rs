//! What a run's model calls cost, read from its trace: per agent and per run, the
//! tokens, the price and the cache-hit ratio, and every cache break.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::to_cost_usage;
use crate::cost::{PriceTable, Usage};
use crate::table::{self, Align};
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The tokens and price of some model calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spend {
    /// Calls billed.
    pub calls: u64,
    /// Their tokens, summed.
    pub usage: Usage,
    /// Their price in US dollars.
    pub cost_usd: f64,
    /// Cache reads over all prompt tokens (uncached input, cache writes and cache
    /// reads); 0 when nothing was sent.
    pub cache_hit_ratio: f64,
}

impl Spend {
    fn add(&mut self, usage: &Usage, cost_usd: f64) {
        self.calls += 1;
        self.usage.add(usage);
        self.cost_usd += cost_usd;
        let prompt_tokens = self.usage.prompt_tokens();
        self.cache_hit_ratio = if prompt_tokens == 0 {
            0.0
        } else {
            self.usage.cache_read_input_tokens as f64 / prompt_tokens as f64
        };
    }
}

/// One cache break, with where it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BreakRecord {
    /// Virtual time the request was sent, ms.
    pub time_ms: u64,
    /// The agent: `coordinator`, a worker's prompt, a fork's directive.
    pub agent: String,
    /// The agent's call number (from 1).
    pub call: u32,
    /// The first block that differs (tools, then system, then messages, from 0).
    pub block_index: u64,
    /// `tools`, `system` or `messages`.
    pub section: String,
    /// Bytes from the start of the prefix to the first differing byte.
    pub byte_offset: u64,
    /// `prefix`, `model`, `organization` or `thinking`.
    pub cause: String,
    /// Tokens the request would have read had its prefix matched.
    pub expected_read_tokens: u64,
}

/// The cost of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunCost {
    /// Per agent, by label.
    pub agents: BTreeMap<String, Spend>,
    /// The whole run.
    pub total: Spend,
    /// Every cache break, in trace order.
    pub cache_breaks: Vec<BreakRecord>,
    /// Models the price table did not price (their calls count zero dollars).
    pub unpriced_models: Vec<String>,
}

impl RunCost {
    /// The cost of the run traced in `trace`, priced with `prices`.
    pub fn of(trace: &[TraceEntry], prices: &PriceTable) -> RunCost {
        let mut cost = RunCost::default();
        for entry in trace {
            let TraceEvent::Sim(SimEvent::ModelBilled {
                agent,
                call,
                model,
                usage,
                cache_break,
                ..
            }) = &entry.typed
            else {
                continue;
            };
            let usage = to_cost_usage(usage);
            let cost_usd = match prices.lookup(model) {
                Some(model_prices) => model_prices
                    .rates(model_prices.tier(usage.prompt_tokens()))
                    .cost_usd(&usage),
                None => {
                    if !cost.unpriced_models.iter().any(|known| *known == **model) {
                        cost.unpriced_models.push(model.to_string());
                    }
                    0.0
                }
            };
            cost.agents
                .entry(agent.clone().into())
                .or_default()
                .add(&usage, cost_usd);
            cost.total.add(&usage, cost_usd);
            if let Some(found) = cache_break {
                cost.cache_breaks.push(BreakRecord {
                    time_ms: entry.time_ms,
                    agent: agent.clone().into(),
                    call: *call,
                    block_index: found.block_index,
                    section: found.section.clone(),
                    byte_offset: found.byte_offset,
                    cause: found.cause.clone(),
                    expected_read_tokens: found.expected_read_tokens,
                });
            }
        }
        cost
    }

    /// The per-agent table, the run's total and the cache breaks, as text.
    pub fn to_text(&self) -> String {
        let header = [
            "agent", "calls", "input", "write", "read", "output", "hit", "cost_usd",
        ];
        let rows = self
            .agents
            .iter()
            .map(|(agent, spend)| (agent.as_str(), spend))
            .chain(std::iter::once(("total", &self.total)))
            .map(|(agent, spend)| {
                // A worker is named by its prompt: a long one would push every
                // number off the screen.
                let label: String = if agent.chars().count() > 44 {
                    agent.chars().take(43).chain(std::iter::once('…')).collect()
                } else {
                    agent.to_owned()
                };
                [
                    label,
                    spend.calls.to_string(),
                    spend.usage.input_tokens.to_string(),
                    spend.usage.cache_creation_input_tokens.to_string(),
                    spend.usage.cache_read_input_tokens.to_string(),
                    spend.usage.output_tokens.to_string(),
                    format!("{:.1}%", spend.cache_hit_ratio * 100.0),
                    format!("{:.6}", spend.cost_usd),
                ]
            });
        let mut out = table::render(
            std::iter::once(header.map(str::to_owned)).chain(rows),
            &[Align::Left],
        );
        if self.cache_breaks.is_empty() {
            out += "no cache break\n";
        }
        for found in &self.cache_breaks {
            let _ = writeln!(out, "{}", found.line());
        }
        out
    }
}

impl BreakRecord {
    /// The break as one line: agent, request, block, byte offset and cause.
    pub fn line(&self) -> String {
        format!(
            "cache break: {} call {} at {} ms: block {} ({}) differs from byte offset {} \
             ({}); {} cached tokens not read",
            self.agent,
            self.call,
            self.time_ms,
            self.block_index,
            self.section,
            self.byte_offset,
            self.cause,
            self.expected_read_tokens
        )
    }
}
