//! Priced totals of a [`Ledger`]: per session, per agent within a session, and per model.
//!
//! Every request is priced at its model's rates, in the long-context tier when its prompt
//! exceeds the model's threshold. Sessions are sorted by id; within a session the main
//! thread comes first, then subagents by id; models are sorted by id. Token counts are
//! exact sums up to `u64::MAX`, where they are clamped and [`CostReport::warnings`]
//! says so; costs are sums of per-model, per-tier products, always finite since rates
//! are bounded ([`RATE_USD_PER_MTOK_MAX`](super::pricing::RATE_USD_PER_MTOK_MAX)).
//! `<synthetic>` responses cost nothing and are listed in [`CostReport::unpriced`].

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::ledger::Ledger;
use super::pricing::{PriceTable, Tier, SYNTHETIC_MODEL};
use super::transcript::Agent;
use super::usage::Usage;
use super::{CostError, UnknownModel};
use crate::table::{self, Align};

/// Tokens and cost of one model within a session, an agent, or the totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCost {
    /// The model id as the transcripts wrote it.
    pub model: String,
    /// Token counts.
    #[serde(flatten)]
    pub usage: Usage,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Deduplicated API responses.
    pub requests: u64,
    /// How many of them were priced in the long-context tier.
    pub long_context_requests: u64,
}

/// Tokens and cost of one agent (the main thread or a subagent) within a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentCost {
    /// `main`, or the subagent's id.
    pub agent: String,
    /// The models it used, sorted.
    pub models: Vec<String>,
    /// Token counts.
    #[serde(flatten)]
    pub usage: Usage,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Deduplicated API responses.
    pub requests: u64,
    /// Per model.
    pub by_model: Vec<ModelCost>,
}

/// Tokens and cost of one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionCost {
    /// The session id.
    pub session_id: String,
    /// The models it used, sorted.
    pub models: Vec<String>,
    /// Token counts.
    #[serde(flatten)]
    pub usage: Usage,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Deduplicated API responses.
    pub requests: u64,
    /// Per model.
    pub by_model: Vec<ModelCost>,
    /// Per agent: the main thread first, then subagents.
    pub agents: Vec<AgentCost>,
}

/// Tokens and cost over every session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    /// Token counts.
    #[serde(flatten)]
    pub usage: Usage,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Deduplicated API responses.
    pub requests: u64,
    /// Per model.
    pub by_model: Vec<ModelCost>,
}

/// A line that could not be read, by file name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedLine {
    /// The file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// What was wrong with it.
    pub error: String,
}

/// What reading produced besides the totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadStats {
    /// Transcript files read.
    pub files: usize,
    /// Non-blank lines read.
    pub lines: u64,
    /// Lines merged into an earlier line of the same response.
    pub duplicate_lines: u64,
    /// Lines that could not be read (listed in [`CostReport::malformed`]).
    pub malformed_lines: usize,
}

/// Responses counted but not priced, by model: Claude Code's `<synthetic>` messages,
/// written locally and never billed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnpricedModel {
    /// The model id, `<synthetic>`.
    pub model: String,
    /// Deduplicated responses with that model.
    pub requests: u64,
    /// Why they are not priced.
    pub reason: String,
}

/// The cost report of a set of transcripts; `--json` prints it as it serializes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    /// Per session, sorted by id.
    pub sessions: Vec<SessionCost>,
    /// Over all sessions.
    pub totals: Totals,
    /// Every line that could not be read, in file and line order.
    pub malformed: Vec<MalformedLine>,
    /// Counts of what was read.
    pub read: ReadStats,
    /// Responses counted at $0 because they were never billed, with why.
    pub unpriced: Vec<UnpricedModel>,
    /// What makes a figure less than exact (a token total clamped at `u64::MAX`).
    pub warnings: Vec<String>,
}

/// Per-model accumulator: usage split by tier, so each tier is priced once.
#[derive(Default)]
struct Bucket {
    standard: Usage,
    long_context: Usage,
    requests: u64,
    long_context_requests: u64,
}

type ModelBuckets = BTreeMap<String, Bucket>;

impl CostReport {
    /// Prices `ledger` with `prices`. Fails, naming every one, if any model is not in the
    /// table: a cost that silently omitted a model would look plausible and be wrong.
    pub fn build(ledger: &Ledger, prices: &PriceTable) -> Result<CostReport, CostError> {
        let files = ledger.files();
        // Keyed by the file name's bytes: two names that differ only in bytes that are
        // not UTF-8 are two sessions, not one.
        let mut sessions: BTreeMap<&std::ffi::OsStr, (&str, BTreeMap<&Agent, ModelBuckets>)> =
            BTreeMap::new();
        let mut exact = true;
        let mut synthetic_requests = 0u64;
        let mut unknown: BTreeMap<&str, UnknownModel> = BTreeMap::new();
        for request in ledger.requests() {
            let file = &files[request.file];
            let Some(model) = prices.lookup(&request.model) else {
                unknown
                    .entry(&request.model)
                    .or_insert_with(|| UnknownModel {
                        model: request.model.clone(),
                        requests: 0,
                        first_path: file.path.clone(),
                        first_line: request.line,
                    })
                    .requests += 1;
                continue;
            };
            if request.model == SYNTHETIC_MODEL {
                synthetic_requests += 1;
            }
            let tier = model.tier(request.usage.prompt_tokens());
            let bucket = sessions
                .entry(&file.session_key)
                .or_insert_with(|| (&file.session_id, BTreeMap::new()))
                .1
                .entry(&file.agent)
                .or_default()
                .entry(request.model.clone())
                .or_default();
            bucket.requests += 1;
            match tier {
                Tier::Standard => exact &= bucket.standard.add(&request.usage),
                Tier::LongContext => {
                    bucket.long_context_requests += 1;
                    exact &= bucket.long_context.add(&request.usage);
                }
            }
        }
        if !unknown.is_empty() {
            return Err(CostError::UnknownModels {
                models: unknown.into_values().collect(),
                price_table: prices.source().to_owned(),
            });
        }

        let mut session_costs = Vec::new();
        let mut total_by_model: BTreeMap<String, ModelCost> = BTreeMap::new();
        for (session_id, agents) in sessions.into_values() {
            let mut session_by_model: BTreeMap<String, ModelCost> = BTreeMap::new();
            let mut agent_costs = Vec::new();
            for (agent, buckets) in agents {
                let by_model: Vec<ModelCost> = buckets
                    .iter()
                    .map(|(model, bucket)| price(model, bucket, prices, &mut exact))
                    .collect();
                for model in &by_model {
                    merge(&mut session_by_model, model, &mut exact);
                    merge(&mut total_by_model, model, &mut exact);
                }
                let (usage, cost_usd, requests) = sum(&by_model, &mut exact);
                agent_costs.push(AgentCost {
                    agent: agent.to_string(),
                    models: by_model.iter().map(|model| model.model.clone()).collect(),
                    usage,
                    cost_usd,
                    requests,
                    by_model,
                });
            }
            let by_model: Vec<ModelCost> = session_by_model.into_values().collect();
            let (usage, cost_usd, requests) = sum(&by_model, &mut exact);
            session_costs.push(SessionCost {
                session_id: session_id.to_owned(),
                models: by_model.iter().map(|model| model.model.clone()).collect(),
                usage,
                cost_usd,
                requests,
                by_model,
                agents: agent_costs,
            });
        }
        let by_model: Vec<ModelCost> = total_by_model.into_values().collect();
        let (usage, cost_usd, requests) = sum(&by_model, &mut exact);
        let mut warnings = Vec::new();
        if !exact {
            warnings.push(format!(
                "some token totals exceed {} and are shown clamped at that value; \
                 the costs are computed from the per-model sums and are as clamped",
                u64::MAX
            ));
        }
        let unpriced = if synthetic_requests > 0 {
            vec![UnpricedModel {
                model: SYNTHETIC_MODEL.to_owned(),
                requests: synthetic_requests,
                reason: "written locally by Claude Code, never billed: counted at $0".to_owned(),
            }]
        } else {
            Vec::new()
        };
        let malformed: Vec<MalformedLine> = ledger
            .malformed()
            .iter()
            .map(|bad| MalformedLine {
                path: files[bad.file].path.display().to_string(),
                line: bad.line,
                error: bad.error.clone(),
            })
            .collect();
        Ok(CostReport {
            sessions: session_costs,
            totals: Totals {
                usage,
                cost_usd,
                requests,
                by_model,
            },
            read: ReadStats {
                files: files.len(),
                lines: ledger.lines_read(),
                duplicate_lines: ledger.duplicate_lines(),
                malformed_lines: malformed.len(),
            },
            malformed,
            unpriced,
            warnings,
        })
    }

    /// The report as pretty-printed JSON, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a report serializes");
        text.push('\n');
        text
    }

    /// The report as a table: one row per session, agent and model, then the totals.
    pub fn to_text(&self) -> String {
        let header = [
            "session / agent / model",
            "input",
            "output",
            "cache write 5m",
            "cache write 1h",
            "cache read",
            "cost $",
        ];
        let mut rows = vec![header.map(str::to_owned)];
        for session in &self.sessions {
            rows.push(cells(&session.session_id, &session.usage, session.cost_usd));
            for agent in &session.agents {
                rows.push(cells(
                    &format!("  {}", agent.agent),
                    &agent.usage,
                    agent.cost_usd,
                ));
                for model in &agent.by_model {
                    let name = format!("    {}", model.model);
                    rows.push(cells(&name, &model.usage, model.cost_usd));
                }
            }
        }
        rows.push(cells("total", &self.totals.usage, self.totals.cost_usd));
        for model in &self.totals.by_model {
            rows.push(cells(
                &format!("  {}", model.model),
                &model.usage,
                model.cost_usd,
            ));
        }
        let mut out = table::render(rows, &[Align::Left]);
        let read = &self.read;
        writeln!(
            out,
            "{} files, {} lines, {} API responses ({} duplicate lines merged), {} malformed lines",
            read.files,
            read.lines,
            self.totals.requests,
            read.duplicate_lines,
            read.malformed_lines
        )
        .expect("a String never fails");
        for unpriced in &self.unpriced {
            writeln!(
                out,
                "{} responses of model {} unpriced: {}",
                unpriced.requests, unpriced.model, unpriced.reason
            )
            .expect("a String never fails");
        }
        for warning in &self.warnings {
            writeln!(out, "warning: {warning}").expect("a String never fails");
        }
        out
    }
}

fn price(model: &str, bucket: &Bucket, prices: &PriceTable, exact: &mut bool) -> ModelCost {
    let table = prices.lookup(model).expect("unknown models were rejected");
    let mut usage = bucket.standard;
    *exact &= usage.add(&bucket.long_context);
    ModelCost {
        model: model.to_owned(),
        usage,
        cost_usd: table.rates(Tier::Standard).cost_usd(&bucket.standard)
            + table
                .rates(Tier::LongContext)
                .cost_usd(&bucket.long_context),
        requests: bucket.requests,
        long_context_requests: bucket.long_context_requests,
    }
}

fn merge(into: &mut BTreeMap<String, ModelCost>, model: &ModelCost, exact: &mut bool) {
    match into.get_mut(&model.model) {
        Some(sum) => {
            *exact &= sum.usage.add(&model.usage);
            sum.cost_usd += model.cost_usd;
            sum.requests += model.requests;
            sum.long_context_requests += model.long_context_requests;
        }
        None => {
            into.insert(model.model.clone(), model.clone());
        }
    }
}

fn sum(models: &[ModelCost], exact: &mut bool) -> (Usage, f64, u64) {
    let mut usage = Usage::default();
    let mut cost_usd = 0.0;
    let mut requests = 0;
    for model in models {
        *exact &= usage.add(&model.usage);
        cost_usd += model.cost_usd;
        requests += model.requests;
    }
    (usage, cost_usd, requests)
}

fn cells(name: &str, usage: &Usage, cost_usd: f64) -> [String; 7] {
    [
        name.to_owned(),
        thousands(usage.input_tokens),
        thousands(usage.output_tokens),
        thousands(usage.cache_creation_5m_input_tokens),
        thousands(usage.cache_creation_1h_input_tokens),
        thousands(usage.cache_read_input_tokens),
        format!("{cost_usd:.4}"),
    ]
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::transcript::TranscriptFile;
    use std::path::Path;

    const PRICES: &str = r#"
[models."m-big"]
input = 10.0
cache_write_5m = 12.5
cache_write_1h = 20.0
cache_read = 1.0
output = 50.0

[models."m-small"]
aliases = ["small"]
input = 1.0
cache_write_5m = 1.25
cache_write_1h = 2.0
cache_read = 0.1
output = 5.0

[models."m-small".long_context]
threshold_tokens = 1000
input = 2.0
cache_write_5m = 2.5
cache_write_1h = 4.0
cache_read = 0.2
output = 7.5
"#;

    fn line(id: &str, model: &str, input: u64, output: u64, cache_read: u64) -> String {
        format!(
            r#"{{"requestId":"r-{id}","message":{{"id":"{id}","model":"{model}","usage":{{"input_tokens":{input},"output_tokens":{output},"cache_read_input_tokens":{cache_read}}}}}}}"#
        )
    }

    fn ledger(files: &[(&str, Vec<String>)]) -> Ledger {
        let mut ledger = Ledger::new();
        for (path, lines) in files {
            ledger.add_transcript(
                TranscriptFile::at(Path::new(path)),
                lines.join("\n").as_bytes(),
            );
        }
        ledger
    }

    #[test]
    fn subagent_usage_is_attributed_to_its_session_and_agent() {
        // Goal: a subagent's tokens count in its session's totals and appear as its own agent.
        let ledger = ledger(&[
            ("p/s1.jsonl", vec![line("a", "m-big", 1, 2, 0)]),
            (
                "p/s1/subagents/agent-x7.jsonl",
                vec![line("b", "small", 10, 20, 0)],
            ),
            ("p/s2.jsonl", vec![line("c", "m-small", 100, 200, 0)]),
        ]);
        let table = PriceTable::parse("t.toml", PRICES).unwrap();
        let report = CostReport::build(&ledger, &table).unwrap();
        assert_eq!(report.sessions.len(), 2);
        let s1 = &report.sessions[0];
        assert_eq!(s1.session_id, "s1");
        assert_eq!(s1.usage.input_tokens, 11);
        assert_eq!(s1.models, ["m-big", "small"]);
        let agents: Vec<(&str, u64)> = s1
            .agents
            .iter()
            .map(|agent| (agent.agent.as_str(), agent.usage.output_tokens))
            .collect();
        assert_eq!(agents, [("main", 2), ("x7", 20)]);
        assert_eq!(report.totals.usage.input_tokens, 111);
        assert_eq!(report.totals.requests, 3);
        let cost_s1 = (1.0 * 10.0 + 2.0 * 50.0 + 10.0 * 1.0 + 20.0 * 5.0) / 1e6;
        assert!((s1.cost_usd - cost_s1).abs() < 1e-12);
    }

    #[test]
    fn long_context_requests_pay_the_higher_rates_for_all_their_tokens() {
        // Goal: only a request whose prompt exceeds the threshold moves to the long tier.
        let ledger = ledger(&[(
            "s.jsonl",
            vec![
                line("a", "m-small", 100, 10, 900),
                line("b", "m-small", 100, 10, 901),
            ],
        )]);
        let table = PriceTable::parse("t.toml", PRICES).unwrap();
        let report = CostReport::build(&ledger, &table).unwrap();
        let model = &report.totals.by_model[0];
        assert_eq!(model.long_context_requests, 1);
        let standard = 100.0 * 1.0 + 10.0 * 5.0 + 900.0 * 0.1;
        let long = 100.0 * 2.0 + 10.0 * 7.5 + 901.0 * 0.2;
        assert!((model.cost_usd - (standard + long) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn unknown_models_are_an_error_naming_each_with_its_first_line() {
        // Goal: no silent zero: every unpriced model is named, with where it first appears.
        let ledger = ledger(&[(
            "s.jsonl",
            vec![
                line("a", "m-big", 1, 1, 0),
                line("b", "mystery-2", 1, 1, 0),
                line("c", "mystery-1", 1, 1, 0),
                line("d", "mystery-2", 1, 1, 0),
            ],
        )]);
        let table = PriceTable::parse("t.toml", PRICES).unwrap();
        let error = CostReport::build(&ledger, &table).unwrap_err();
        let CostError::UnknownModels { models, .. } = &error else {
            panic!("expected UnknownModels, got {error:?}");
        };
        let names: Vec<(&str, u64, usize)> = models
            .iter()
            .map(|model| (model.model.as_str(), model.requests, model.first_line))
            .collect();
        assert_eq!(names, [("mystery-1", 1, 3), ("mystery-2", 2, 2)]);
        let message = error.to_string();
        assert!(
            message.contains("\"mystery-2\" (2 responses, first at s.jsonl:2)"),
            "{message}"
        );
        assert!(message.contains("--pricing"), "{message}");
    }

    #[test]
    fn synthetic_messages_cost_nothing_and_are_not_errors() {
        // Goal: Claude Code's `<synthetic>` model is accepted under any table, at zero cost.
        let ledger = ledger(&[(
            "s.jsonl",
            vec![
                line("a", "<synthetic>", 0, 0, 0),
                line("b", "m-big", 1, 0, 0),
            ],
        )]);
        let table = PriceTable::parse("t.toml", PRICES).unwrap();
        let report = CostReport::build(&ledger, &table).unwrap();
        assert_eq!(report.totals.by_model[0].model, "<synthetic>");
        assert_eq!(report.totals.by_model[0].cost_usd, 0.0);
        assert!((report.totals.cost_usd - 10.0 / 1e6).abs() < 1e-15);
    }

    #[test]
    fn pricing_override_changes_the_cost_not_the_tokens() {
        // Goal: a different table reprices the same ledger; token totals are unchanged.
        let ledger = ledger(&[("s.jsonl", vec![line("a", "claude-opus-4-6", 1000, 1000, 0)])]);
        let built_in = CostReport::build(&ledger, &PriceTable::built_in()).unwrap();
        let doubled = PRICES.replace("m-big", "claude-opus-4-6");
        let custom =
            CostReport::build(&ledger, &PriceTable::parse("t.toml", &doubled).unwrap()).unwrap();
        assert_eq!(built_in.totals.usage, custom.totals.usage);
        assert!((built_in.totals.cost_usd - (1000.0 * 5.0 + 1000.0 * 25.0) / 1e6).abs() < 1e-12);
        assert!((custom.totals.cost_usd - (1000.0 * 10.0 + 1000.0 * 50.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn text_table_has_a_row_per_session_agent_and_model() {
        // Goal: the table shows each level and groups digits.
        let ledger = ledger(&[("s.jsonl", vec![line("a", "m-big", 1234567, 2, 0)])]);
        let table = PriceTable::parse("t.toml", PRICES).unwrap();
        let text = CostReport::build(&ledger, &table).unwrap().to_text();
        assert!(text.contains("1,234,567"), "{text}");
        assert!(
            text.lines().any(|line| line.starts_with("  main ")),
            "{text}"
        );
        assert!(
            text.lines().any(|line| line.starts_with("    m-big ")),
            "{text}"
        );
        assert!(
            text.lines().any(|line| line.starts_with("total ")),
            "{text}"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1000), "1,000");
    }
}
