//! The economics comparison of a scenario: its `[economics] compare` names two
//! variants, each the scenario transformed; both run under one seed, and the table
//! shows what each cost and how much of its prompt it read from the cache.

use serde::Serialize;
use std::fmt::Write as _;

use super::RunCost;
use crate::cost::PriceTable;
use crate::run::{run_seed, RunError, RunOptions};
use crate::scenario::{Comparison, LoadedScenario, Scenario};
use crate::table::{self, Align};

/// One variant's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantCost {
    /// The variant's name (`fork`, `fresh`, `5m`, `1h`, …).
    pub variant: String,
    /// What its run cost.
    pub cost: RunCost,
    /// Invariants its run broke (the comparison is only as good as its runs).
    pub failures: Vec<String>,
}

/// A comparison's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EconomicsReport {
    /// The scenario's name.
    pub scenario: String,
    /// What was compared.
    pub compare: String,
    /// The seed both variants ran under.
    pub seed: u64,
    /// The price table's source.
    pub pricing: String,
    /// The variants, in the comparison's order.
    pub variants: Vec<VariantCost>,
}

/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EconomicsError {
    /// The scenario declares no comparison.
    #[error("{path}: no [economics] compare; expected one of fork-vs-fresh, ttl-5m-vs-1h, simultaneous-vs-staggered, intact-vs-edited, compact-earlier-vs-later")]
    NoComparison {
        /// The scenario file.
        path: String,
    },
    /// A variant could not be run.
    #[error("variant {variant}: {source}")]
    Run {
        /// The variant.
        variant: String,
        /// Why.
        source: RunError,
    },
}

/// Every Agent call of every script, made a fork or a fresh background spawn.
fn set_spawn_kind(scenario: &mut Scenario, fork: bool) {
    let scripts = std::iter::once(&mut scenario.coordinator).chain(&mut scenario.workers);
    for script in scripts {
        for turn in std::sync::Arc::make_mut(&mut script.turns) {
            for call in turn.tool_calls.iter_mut().filter(|c| c.name == "Agent") {
                let Some(input) = call.input.as_object_mut() else {
                    continue;
                };
                if fork {
                    input.insert("subagent_type".to_owned(), "fork".into());
                } else {
                    input.remove("subagent_type");
                    input.insert("run_in_background".to_owned(), true.into());
                }
            }
        }
    }
}

/// The two variants of `comparison` applied to `scenario`, named.
pub fn variants(scenario: &Scenario, comparison: Comparison) -> Vec<(String, Scenario)> {
    let with = |name: &str, change: &dyn Fn(&mut Scenario)| {
        let mut variant = scenario.clone();
        change(&mut variant);
        (name.to_owned(), variant)
    };
    use crate::scenario::TtlSetting;
    match comparison {
        Comparison::ForkVsFresh => vec![
            with("fork", &|s| set_spawn_kind(s, true)),
            with("fresh", &|s| set_spawn_kind(s, false)),
        ],
        Comparison::Ttl5mVs1h => vec![
            with("5m", &|s| s.economics.ttl = TtlSetting::FiveMinutes),
            with("1h", &|s| s.economics.ttl = TtlSetting::OneHour),
        ],
        Comparison::SimultaneousVsStaggered => vec![
            with("simultaneous", &|s| s.economics.stagger_ms = 0),
            with("staggered", &|_| {}),
        ],
        Comparison::IntactVsEdited => vec![
            with("intact", &|s| {
                // Without the edit there is no break for the file's experiment to find.
                s.economics.fork_system_edit = None;
                s.expect.violation = None;
            }),
            with("edited", &|_| {}),
        ],
        Comparison::CompactEarlierVsLater => vec![
            with("earlier", &|s| {
                s.settings.compact_threshold_tokens = s.economics.compact_earlier_threshold_tokens;
            }),
            with("later", &|_| {}),
        ],
    }
}

/// Runs `scenario`'s comparison under `seed` and prices it with `prices`.
pub fn compare(
    scenario: &LoadedScenario,
    seed: u64,
    prices: &PriceTable,
) -> Result<EconomicsReport, EconomicsError> {
    let Some(comparison) = scenario.scenario.economics.compare else {
        return Err(EconomicsError::NoComparison {
            path: scenario.path.display().to_string(),
        });
    };
    let mut report = EconomicsReport {
        scenario: scenario.scenario.name.clone(),
        compare: comparison.as_str().to_owned(),
        seed,
        pricing: prices.source().to_owned(),
        variants: Vec::new(),
    };
    for (variant, transformed) in variants(&scenario.scenario, comparison) {
        let loaded = LoadedScenario {
            path: scenario.path.clone(),
            scenario: transformed,
        };
        let run = run_seed(&loaded, seed, &RunOptions::default()).map_err(|source| {
            EconomicsError::Run {
                variant: variant.clone(),
                source,
            }
        })?;
        report.variants.push(VariantCost {
            variant,
            cost: RunCost::of(&run.trace, prices),
            failures: run
                .failures
                .iter()
                .map(|f| format!("{}: {}", f.invariant, f.detail))
                .collect(),
        });
    }
    Ok(report)
}

impl EconomicsReport {
    /// The comparison table, then each variant's cache breaks.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} ({}, seed {}, prices {})",
            self.scenario, self.compare, self.seed, self.pricing
        );
        let header = [
            "variant", "calls", "input", "write", "read", "output", "hit", "cost_usd", "breaks",
        ];
        let rows = self.variants.iter().map(|variant| {
            let total = &variant.cost.total;
            [
                variant.variant.clone(),
                total.calls.to_string(),
                total.usage.input_tokens.to_string(),
                total.usage.cache_creation_input_tokens.to_string(),
                total.usage.cache_read_input_tokens.to_string(),
                total.usage.output_tokens.to_string(),
                format!("{:.1}%", total.cache_hit_ratio * 100.0),
                format!("{:.6}", total.cost_usd),
                variant.cost.cache_breaks.len().to_string(),
            ]
        });
        out += &table::render(
            std::iter::once(header.map(str::to_owned)).chain(rows),
            &[Align::Left],
        );
        for variant in &self.variants {
            for found in &variant.cost.cache_breaks {
                let _ = writeln!(out, "{}: {}", variant.variant, found.line());
            }
            for failure in &variant.failures {
                let _ = writeln!(out, "{}: FAIL {failure}", variant.variant);
            }
        }
        out
    }
}
