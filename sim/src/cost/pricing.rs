//! Prices as data: a TOML table of per-model rates in US dollars per million tokens.
//!
//! The built-in table is `pricing/anthropic.toml` at the repository root, compiled into
//! the binary; [`PriceTable::load`] reads another file of the same shape, which replaces
//! the built-in table entirely (`coordsim cost --pricing FILE`). The format:
//!
//! ```toml
//! [models."claude-sonnet-4-5-20250929"]
//! aliases = ["claude-sonnet-4-5"]   # other ids transcripts may carry (optional)
//! input = 3.0                       # uncached input
//! cache_write_5m = 3.75             # cache writes, 5-minute TTL
//! cache_write_1h = 6.0              # cache writes, 1-hour TTL
//! cache_read = 0.3                  # cache hits
//! output = 15.0
//!
//! [models."claude-sonnet-4-5-20250929".long_context]   # optional
//! threshold_tokens = 200_000        # a request whose prompt exceeds this...
//! input = 6.0                       # ...pays these rates for all of its tokens
//! cache_write_5m = 7.5
//! cache_write_1h = 12.0
//! cache_read = 0.6
//! output = 22.5
//! ```
//!
//! Every rate must lie in `0 ..= RATE_USD_PER_MTOK_MAX` (one million US dollars per
//! million tokens): a price outside that range is refused at load time with its
//! `file:line:column`, so that no product of a rate and a token count (at most
//! `u64::MAX` tokens) can overflow to infinity.
//!
//! Models are matched by exact id or alias. A model the table does not know is an error
//! ([`PriceTable::lookup`] returns `None` and the report names it), never a silent zero;
//! the one exception is [`SYNTHETIC_MODEL`], which Claude Code writes for messages it
//! generates locally with zero usage, and which costs nothing under any table.

use crate::position::line_column;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::usage::Usage;

/// The highest rate a price table may give, in US dollars per million tokens. With
/// token counts below 2^64, every cost is then below 2^64 dollars: finite, and printed
/// as a number in text and JSON.
pub const RATE_USD_PER_MTOK_MAX: f64 = 1_000_000.0;

/// The model id Claude Code writes for locally generated messages; always free.
pub const SYNTHETIC_MODEL: &str = "<synthetic>";

/// The built-in table, `pricing/anthropic.toml`.
const BUILT_IN_TOML: &str = include_str!("../../../pricing/anthropic.toml");

/// Where the built-in table came from, for error messages.
const BUILT_IN_NAME: &str = "pricing/anthropic.toml (built in)";

/// A rate per million tokens for each kind of token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Uncached input tokens.
    pub input: f64,
    /// Cache writes with the 5-minute TTL.
    pub cache_write_5m: f64,
    /// Cache writes with the 1-hour TTL.
    pub cache_write_1h: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Output tokens.
    pub output: f64,
}

impl Rates {
    /// Zero for every kind of token.
    pub const FREE: Rates = Rates {
        input: 0.0,
        cache_write_5m: 0.0,
        cache_write_1h: 0.0,
        cache_read: 0.0,
        output: 0.0,
    };

    /// The cost in US dollars of `usage` at these rates.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        // One division at the end keeps the sum exact for whole-cent rates as long as possible.
        let micro_usd = usage.input_tokens as f64 * self.input
            + usage.cache_creation_5m_input_tokens as f64 * self.cache_write_5m
            + usage.cache_creation_1h_input_tokens as f64 * self.cache_write_1h
            + usage.cache_read_input_tokens as f64 * self.cache_read
            + usage.output_tokens as f64 * self.output;
        micro_usd / 1_000_000.0
    }
}

/// Higher rates for requests whose prompt exceeds a threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongContext {
    /// A request whose prompt (input + cache writes + cache reads) exceeds this many
    /// tokens pays [`LongContext::rates`] for all of its tokens.
    pub threshold_tokens: u64,
    /// The rates above the threshold.
    pub rates: Rates,
}

/// The prices of one model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPrices {
    /// Other ids that name this model.
    pub aliases: Vec<String>,
    /// The standard rates.
    pub rates: Rates,
    /// The long-context tier, for models that have one.
    pub long_context: Option<LongContext>,
}

impl ModelPrices {
    /// Which tier a request with `prompt_tokens` of prompt falls in.
    pub fn tier(&self, prompt_tokens: u64) -> Tier {
        match &self.long_context {
            Some(long) if prompt_tokens > long.threshold_tokens => Tier::LongContext,
            _ => Tier::Standard,
        }
    }

    /// The rates of `tier`.
    pub fn rates(&self, tier: Tier) -> &Rates {
        match (tier, &self.long_context) {
            (Tier::LongContext, Some(long)) => &long.rates,
            _ => &self.rates,
        }
    }
}

/// The price tier a request falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The model's standard rates.
    Standard,
    /// The model's long-context rates.
    LongContext,
}

/// The file as written: one table per model.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    models: BTreeMap<String, ModelEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelEntry {
    #[serde(default)]
    aliases: Vec<String>,
    input: Spanned<f64>,
    cache_write_5m: Spanned<f64>,
    cache_write_1h: Spanned<f64>,
    cache_read: Spanned<f64>,
    output: Spanned<f64>,
    #[serde(default)]
    long_context: Option<LongContextEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LongContextEntry {
    threshold_tokens: Spanned<u64>,
    input: Spanned<f64>,
    cache_write_5m: Spanned<f64>,
    cache_write_1h: Spanned<f64>,
    cache_read: Spanned<f64>,
    output: Spanned<f64>,
}

/// Where each rate of one tier was written, in bytes, for errors.
type RateSpans = [(&'static str, f64, std::ops::Range<usize>); 5];

impl ModelEntry {
    fn rate_spans(&self) -> RateSpans {
        let each = |name, rate: &Spanned<f64>| (name, *rate.get_ref(), rate.span());
        [
            each("input", &self.input),
            each("cache_write_5m", &self.cache_write_5m),
            each("cache_write_1h", &self.cache_write_1h),
            each("cache_read", &self.cache_read),
            each("output", &self.output),
        ]
    }
}

impl LongContextEntry {
    fn rate_spans(&self) -> RateSpans {
        let each = |name, rate: &Spanned<f64>| (name, *rate.get_ref(), rate.span());
        [
            each("input", &self.input),
            each("cache_write_5m", &self.cache_write_5m),
            each("cache_write_1h", &self.cache_write_1h),
            each("cache_read", &self.cache_read),
            each("output", &self.output),
        ]
    }
}

impl From<ModelEntry> for ModelPrices {
    fn from(entry: ModelEntry) -> ModelPrices {
        ModelPrices {
            aliases: entry.aliases,
            rates: Rates {
                input: entry.input.into_inner(),
                cache_write_5m: entry.cache_write_5m.into_inner(),
                cache_write_1h: entry.cache_write_1h.into_inner(),
                cache_read: entry.cache_read.into_inner(),
                output: entry.output.into_inner(),
            },
            long_context: entry.long_context.map(|long| LongContext {
                threshold_tokens: long.threshold_tokens.into_inner(),
                rates: Rates {
                    input: long.input.into_inner(),
                    cache_write_5m: long.cache_write_5m.into_inner(),
                    cache_write_1h: long.cache_write_1h.into_inner(),
                    cache_read: long.cache_read.into_inner(),
                    output: long.output.into_inner(),
                },
            }),
        }
    }
}

/// Per-model prices, looked up by model id or alias.
#[derive(Debug, Clone)]
pub struct PriceTable {
    models: BTreeMap<String, ModelPrices>,
    /// Every id and alias, to the canonical id in `models`.
    names: HashMap<String, String>,
    synthetic: ModelPrices,
    source: String,
}

impl PriceTable {
    /// The built-in table, `pricing/anthropic.toml`.
    pub fn built_in() -> PriceTable {
        PriceTable::parse(BUILT_IN_NAME, BUILT_IN_TOML).expect("the built-in price table is valid")
    }

    /// Reads the table at `path`.
    pub fn load(path: &Path) -> Result<PriceTable, PricingError> {
        let text = std::fs::read_to_string(path).map_err(|source| PricingError::Read {
            path: path.to_owned(),
            source,
        })?;
        PriceTable::parse(&path.display().to_string(), &text)
    }

    /// Parses `text`, reporting errors against `source` (a file name).
    pub fn parse(source: &str, text: &str) -> Result<PriceTable, PricingError> {
        let invalid = |offset: usize, message: String| {
            let (line, column) = line_column(text, offset);
            PricingError::Invalid {
                source_name: source.to_owned(),
                line,
                column,
                message,
            }
        };
        let file: PriceFile = toml::from_str(text).map_err(|error| {
            let offset = error.span().map_or(0, |span| span.start);
            invalid(offset, error.message().trim().to_owned())
        })?;
        // Rates are checked where they were written, so an error names their position.
        for (id, entry) in &file.models {
            let mut tiers = vec![("", entry.rate_spans())];
            if let Some(long) = &entry.long_context {
                if *long.threshold_tokens.get_ref() == 0 {
                    return Err(invalid(
                        long.threshold_tokens.span().start,
                        format!("model {id}: long_context.threshold_tokens must be positive"),
                    ));
                }
                tiers.push(("long_context.", long.rate_spans()));
            }
            for (prefix, spans) in tiers {
                for (name, rate, span) in spans {
                    if !(0.0..=RATE_USD_PER_MTOK_MAX).contains(&rate) {
                        return Err(invalid(
                            span.start,
                            format!(
                                "model {id}: {prefix}{name} must be a price per million tokens \
                                 from 0 to {RATE_USD_PER_MTOK_MAX}, not {rate}"
                            ),
                        ));
                    }
                }
            }
        }
        let models: BTreeMap<String, ModelPrices> = file
            .models
            .into_iter()
            .map(|(id, entry)| (id, entry.into()))
            .collect();
        let mut names = HashMap::new();
        for (id, prices) in &models {
            let at = |message: String| invalid(text.find(id.as_str()).unwrap_or(0), message);
            for name in std::iter::once(id).chain(&prices.aliases) {
                if name == SYNTHETIC_MODEL {
                    return Err(at(format!(
                        "model {id}: {SYNTHETIC_MODEL} is always free and cannot be priced"
                    )));
                }
                if let Some(other) = names.insert(name.clone(), id.clone()) {
                    return Err(at(format!(
                        "model id {name} is given twice (for {other} and for {id})"
                    )));
                }
            }
        }
        Ok(PriceTable {
            models,
            names,
            synthetic: ModelPrices {
                aliases: Vec::new(),
                rates: Rates::FREE,
                long_context: None,
            },
            source: source.to_owned(),
        })
    }

    /// The prices of `model` (an id or alias), or `None` if the table does not know it.
    /// [`SYNTHETIC_MODEL`] is always known, and free.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrices> {
        if model == SYNTHETIC_MODEL {
            return Some(&self.synthetic);
        }
        self.names.get(model).map(|id| &self.models[id])
    }

    /// The priced model ids (not aliases), sorted.
    pub fn model_ids(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The file the table was read from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// A price table that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PricingError {
    /// The file could not be read.
    #[error("cannot read price table {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid price table.
    #[error("{source_name}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        source_name: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_MODEL: &str = r#"
[models."m-1"]
aliases = ["m"]
input = 2.0
cache_write_5m = 2.5
cache_write_1h = 4.0
cache_read = 0.2
output = 10.0

[models."m-1".long_context]
threshold_tokens = 100
input = 4.0
cache_write_5m = 5.0
cache_write_1h = 8.0
cache_read = 0.4
output = 15.0
"#;

    #[test]
    fn built_in_table_prices_every_model_in_the_fixtures() {
        // Goal: the models the shared transcripts use are priced at the published rates.
        let table = PriceTable::built_in();
        let opus = table.lookup("claude-opus-4-6").unwrap();
        assert_eq!(opus.rates.input, 5.0);
        assert_eq!(opus.rates.output, 25.0);
        let sonnet = table.lookup("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(sonnet.rates.input, 3.0);
        assert_eq!(sonnet.long_context.unwrap().rates.output, 22.5);
        assert!(
            table.lookup("claude-haiku-4-5").is_some(),
            "aliases resolve"
        );
        assert_eq!(
            table.lookup("claude-opus-4-1").unwrap().rates.output,
            75.0,
            "opus 4.1 keeps the old price"
        );
    }

    #[test]
    fn built_in_cache_rates_follow_the_input_multipliers() {
        // Goal: every tier of every model obeys 5m = 1.25x, 1h = 2x, read = 0.1x input.
        let table = PriceTable::built_in();
        for id in table.model_ids() {
            let prices = table.lookup(id).unwrap();
            let mut tiers = vec![prices.rates];
            tiers.extend(prices.long_context.map(|long| long.rates));
            for rates in tiers {
                let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
                assert!(close(rates.cache_write_5m, rates.input * 1.25), "{id}");
                assert!(close(rates.cache_write_1h, rates.input * 2.0), "{id}");
                assert!(close(rates.cache_read, rates.input * 0.1), "{id}");
            }
        }
    }

    #[test]
    fn synthetic_model_is_free_under_any_table() {
        // Goal: `<synthetic>` never needs an entry and never costs anything.
        let table = PriceTable::parse("t.toml", ONE_MODEL).unwrap();
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 10,
            ..Usage::default()
        };
        assert_eq!(
            table
                .lookup(SYNTHETIC_MODEL)
                .unwrap()
                .rates
                .cost_usd(&usage),
            0.0
        );
    }

    #[test]
    fn unknown_models_are_not_found() {
        // Goal: lookups are exact; no prefix match can price a model silently.
        let table = PriceTable::parse("t.toml", ONE_MODEL).unwrap();
        assert!(table.lookup("m-1").is_some());
        assert!(table.lookup("m").is_some());
        assert!(table.lookup("m-1-20990101").is_none());
        assert!(table.lookup("").is_none());
    }

    #[test]
    fn long_context_tier_applies_above_the_threshold_only() {
        // Goal: a prompt of exactly the threshold is standard; one token more is long.
        let table = PriceTable::parse("t.toml", ONE_MODEL).unwrap();
        let prices = table.lookup("m").unwrap();
        assert_eq!(prices.tier(100), Tier::Standard);
        assert_eq!(prices.tier(101), Tier::LongContext);
        assert_eq!(prices.rates(Tier::LongContext).output, 15.0);
    }

    #[test]
    fn cost_uses_every_rate() {
        // Goal: each kind of token is charged at its own rate.
        let rates = PriceTable::parse("t.toml", ONE_MODEL).unwrap().models["m-1"].rates;
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_creation_input_tokens: 3_000_000,
            cache_creation_5m_input_tokens: 1_000_000,
            cache_creation_1h_input_tokens: 2_000_000,
            cache_read_input_tokens: 10_000_000,
        };
        assert_eq!(rates.cost_usd(&usage), 2.0 + 10.0 + 2.5 + 8.0 + 2.0);
    }

    #[test]
    fn bad_tables_are_errors_with_a_location() {
        // Goal: typos, negative prices and duplicate ids are reported, not accepted.
        let cases = [
            (
                ONE_MODEL.replace("output = 10.0", "outptu = 10.0"),
                "unknown field",
            ),
            (ONE_MODEL.replace("input = 2.0", "input = -2.0"), "from 0 to 1000000"),
            (ONE_MODEL.replace("threshold_tokens = 100", "threshold_tokens = 0"), "positive"),
            (
                format!("{ONE_MODEL}\n[models.m]\ninput = 1.0\ncache_write_5m = 1.0\ncache_write_1h = 1.0\ncache_read = 1.0\noutput = 1.0\n"),
                "given twice",
            ),
            (ONE_MODEL.replace("[\"m\"]", "[\"<synthetic>\"]"), "always free"),
        ];
        for (text, expected) in cases {
            let error = PriceTable::parse("t.toml", &text).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("t.toml:"), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn regression_prices_whose_products_overflow_are_refused_at_their_position() {
        // Goal: issue 24 priced at 1e308 and printed `inf` / `null`; a rate out of range
        // is refused with the line and column of the value. Method: 1e308, inf, nan
        // and just above the maximum, in the standard and the long-context tier.
        for (from, to, line, column) in [
            ("output = 10.0", "output = 1e308", 8, 10),
            ("output = 10.0", "output = inf", 8, 10),
            ("cache_read = 0.2", "cache_read = nan", 7, 14),
            ("output = 15.0", "output = 1000000.5", 16, 10),
        ] {
            let text = ONE_MODEL.replacen(from, to, 1);
            let error = PriceTable::parse("t.toml", &text).unwrap_err();
            let PricingError::Invalid {
                line: at_line,
                column: at_column,
                ..
            } = &error
            else {
                panic!("{error}")
            };
            assert_eq!((*at_line, *at_column), (line, column), "{to}: {error}");
            assert!(error.to_string().contains("from 0 to 1000000"), "{error}");
        }
        // The largest rate allowed, times the largest count, is finite.
        let max = Rates {
            output: RATE_USD_PER_MTOK_MAX,
            ..Rates::FREE
        };
        let usage = Usage {
            output_tokens: u64::MAX,
            ..Usage::default()
        };
        assert!(max.cost_usd(&usage).is_finite());
    }

    #[test]
    fn missing_price_file_is_a_read_error() {
        // Goal: `--pricing` with a wrong path names the path.
        let error = PriceTable::load(Path::new("no/such/prices.toml")).unwrap_err();
        assert!(matches!(error, PricingError::Read { .. }));
        assert!(error.to_string().contains("no/such/prices.toml"));
    }
}
