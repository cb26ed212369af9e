//! A fidelity report as text: one table for sequences, one for the cache.

use std::fmt::Write as _;

use super::{AgentFidelity, CacheFidelity, FidelityReport};
use crate::table::{self, Align};

/// An error in percent with its sign and one decimal; `n/a` without a recorded
/// total to divide by.
pub fn percent(error: Option<f64>) -> String {
    match error {
        Some(error) => format!("{error:+.1}%"),
        None => "n/a".to_owned(),
    }
}

/// Micro-dollars as dollars with four decimals.
fn dollars(micro_usd: u64) -> String {
    format!(
        "{}.{:04}",
        micro_usd / 1_000_000,
        (micro_usd % 1_000_000) / 100
    )
}

fn cache_row(name: &str, cache: &CacheFidelity) -> [String; 11] {
    let (recorded, predicted) = (&cache.recorded, &cache.predicted);
    [
        name.to_owned(),
        cache.requests.to_string(),
        recorded.cache_read_tokens.to_string(),
        predicted.cache_read_tokens.to_string(),
        percent(cache.cache_read_error_percent),
        recorded.cache_write_tokens.to_string(),
        predicted.cache_write_tokens.to_string(),
        percent(cache.cache_write_error_percent),
        dollars(recorded.cost_micro_usd),
        dollars(predicted.cost_micro_usd),
        percent(cache.cost_error_percent),
    ]
}

fn sequence_row(agent: &AgentFidelity) -> [String; 6] {
    match &agent.sequence {
        Some(sequence) => [
            agent.name.clone(),
            sequence.recorded_items.to_string(),
            sequence.replayed_items.to_string(),
            sequence.continuations.to_string(),
            sequence.matching_items.to_string(),
            if sequence.matches() {
                "match"
            } else {
                "diverges"
            }
            .to_owned(),
        ],
        None => [
            agent.name.clone(),
            "-".to_owned(),
            "-".to_owned(),
            "-".to_owned(),
            "-".to_owned(),
            "not compared: another subagent's script, with the same prompt, plays it".to_owned(),
        ],
    }
}

impl FidelityReport {
    /// The report as two tables and the first divergences.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "Fidelity of {} (seed {}) to the recording {}\n\n",
            self.scenario, self.seed, self.recording
        );
        out += "Sequence: spawns, tool calls and notification deliveries, in order\n";
        let header = [
            "agent",
            "recorded",
            "replayed",
            "continuations",
            "matching",
            "result",
        ];
        let rows = self.agents.iter().map(sequence_row);
        out += &table::render(
            std::iter::once(header.map(str::to_owned)).chain(rows),
            &[
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
        );
        for agent in &self.agents {
            let Some(divergence) = agent
                .sequence
                .as_ref()
                .and_then(|s| s.first_divergence.as_ref())
            else {
                continue;
            };
            let item = |item: &Option<super::Item>, end: &str| {
                item.as_ref()
                    .map_or_else(|| end.to_owned(), ToString::to_string)
            };
            let _ = writeln!(
                out,
                "first divergence of {} at item {}: recorded {}, replayed {}",
                agent.name,
                divergence.position,
                item(&divergence.recorded, "nothing more"),
                item(&divergence.replayed, "nothing more"),
            );
        }
        out += "\nCache: the simulated cache's prediction against the recorded usage\n";
        let header = [
            "agent",
            "requests",
            "read rec",
            "read pred",
            "error",
            "write rec",
            "write pred",
            "error",
            "cost rec",
            "cost pred",
            "error",
        ];
        let rows = self
            .agents
            .iter()
            .map(|agent| cache_row(&agent.name, &agent.cache))
            .chain(std::iter::once(cache_row("total", &self.cache)));
        out += &table::render(
            std::iter::once(header.map(str::to_owned)).chain(rows),
            &[Align::Left],
        );
        let _ = writeln!(
            out,
            "mean absolute error per request: cache read {:.0} tokens, cache write {:.0} tokens",
            self.cache.cache_read_mean_absolute_error_tokens,
            self.cache.cache_write_mean_absolute_error_tokens
        );
        let priced: Vec<String> = self
            .agents
            .iter()
            .map(|a| format!("{} as {}", a.name, a.priced_as))
            .collect();
        let _ = writeln!(out, "priced at the built-in table: {}", priced.join(", "));
        let _ = writeln!(
            out,
            "tokens counted at {} bytes a token ([economics] bytes_per_token)",
            self.bytes_per_token
        );
        if self.violations.is_empty() {
            out += "no violation\n";
        }
        for violation in &self.violations {
            let _ = writeln!(out, "violation {violation}");
        }
        out
    }
}
