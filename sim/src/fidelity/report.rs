//! A fidelity report as text: one table for sequences, one for the cache.

use std::fmt::Write as _;

use super::{AgentFidelity, CacheFidelity, FidelityReport};

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

fn cache_row(name: &str, cache: &CacheFidelity) -> String {
    let (recorded, predicted) = (&cache.recorded, &cache.predicted);
    format!(
        "{name:<10} {:>8} {:>11} {:>11} {:>8} {:>10} {:>10} {:>8} {:>9} {:>9} {:>8}\n",
        cache.requests,
        recorded.cache_read_tokens,
        predicted.cache_read_tokens,
        percent(cache.cache_read_error_percent),
        recorded.cache_write_tokens,
        predicted.cache_write_tokens,
        percent(cache.cache_write_error_percent),
        dollars(recorded.cost_micro_usd),
        dollars(predicted.cost_micro_usd),
        percent(cache.cost_error_percent),
    )
}

fn sequence_row(agent: &AgentFidelity) -> String {
    match &agent.sequence {
        Some(sequence) => format!(
            "{:<10} {:>8} {:>8} {:>13} {:>8}  {}\n",
            agent.name,
            sequence.recorded_items,
            sequence.replayed_items,
            sequence.continuations,
            sequence.matching_items,
            if sequence.matches() {
                "match"
            } else {
                "diverges"
            }
        ),
        None => format!(
            "{:<10} not compared: another subagent's script, with the same prompt, plays it\n",
            agent.name
        ),
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
        out += "agent      recorded replayed continuations matching  result\n";
        for agent in &self.agents {
            out += &sequence_row(agent);
        }
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
        out += "agent      requests    read rec   read pred    error  write rec write pred    \
                error  cost rec cost pred    error\n";
        for agent in &self.agents {
            out += &cache_row(&agent.name, &agent.cache);
        }
        out += &cache_row("total", &self.cache);
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
