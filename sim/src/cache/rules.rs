//! The cache's rules as data: breakpoint limit, lookback, TTLs and the per-model
//! minimum cacheable length, read from `rules.toml` next to this file.

use coord_runtime::world::CacheTtl;
use serde::Deserialize;
use std::time::Duration;

/// The documented rules, compiled in so a simulator never depends on a file at run
/// time.
const RULES_TOML: &str = include_str!("rules.toml");

/// The rules a [`PromptCache`](super::PromptCache) applies.
///
/// [`CacheRules::documented`] (also the `Default`) is Anthropic's published rule set,
/// kept in `sim/src/cache/rules.toml`:
///
/// | field | documented value |
/// | --- | --- |
/// | `breakpoints_max` | 4 |
/// | `lookback_blocks` | 20 |
/// | `ttl_5m_seconds` | 300 |
/// | `ttl_1h_seconds` | 3600 |
/// | `minimum_tokens_default` | 1024 |
/// | `minimum_tokens` | 4096 for Opus 4.5/4.6 and Haiku 4.5, 2048 for Haiku 3/3.5 |
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CacheRules {
    /// The most `cache_control` blocks one request may carry.
    pub breakpoints_max: usize,
    /// How many block boundaries before a breakpoint are searched for an entry, in
    /// addition to the breakpoint's own boundary.
    pub lookback_blocks: usize,
    /// Lifetime of a five-minute entry, refreshed on every hit.
    pub ttl_5m_seconds: u64,
    /// Lifetime of a one-hour entry, refreshed on every hit.
    pub ttl_1h_seconds: u64,
    /// Minimum cacheable prefix for models no pattern matches.
    pub minimum_tokens_default: u64,
    /// Per-model minimums; the first pattern contained in the model id wins.
    #[serde(default)]
    pub minimum_tokens: Vec<MinimumTokens>,
}

/// One row of the per-model minimum cacheable length.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinimumTokens {
    /// A substring of the model id, e.g. `haiku-4-5`.
    pub model_contains: String,
    /// The shortest prefix, in tokens, that is written to the cache.
    pub tokens: u64,
}

impl CacheRules {
    /// Anthropic's documented rules (`rules.toml`).
    pub fn documented() -> Self {
        // Parsed once per process: every seed's cost meter starts from these rules,
        // and parsing them costs more than a short seed's cache simulation.
        static DOCUMENTED: std::sync::OnceLock<CacheRules> = std::sync::OnceLock::new();
        DOCUMENTED
            .get_or_init(|| {
                // The file is compiled in and a unit test parses it, so failure here
                // is a build defect, not a condition a caller can meet.
                toml::from_str(RULES_TOML).expect("sim/src/cache/rules.toml is valid")
            })
            .clone()
    }

    /// Parses a rule set in the `rules.toml` format.
    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// The shortest prefix `model` writes to the cache, in tokens.
    pub fn minimum_tokens(&self, model: &str) -> u64 {
        self.minimum_tokens
            .iter()
            .find(|row| model.contains(row.model_contains.as_str()))
            .map_or(self.minimum_tokens_default, |row| row.tokens)
    }

    /// How long an entry with `ttl` lives after its last write or hit.
    pub fn ttl(&self, ttl: CacheTtl) -> Duration {
        match ttl {
            CacheTtl::FiveMinutes => Duration::from_secs(self.ttl_5m_seconds),
            CacheTtl::OneHour => Duration::from_secs(self.ttl_1h_seconds),
        }
    }
}

impl Default for CacheRules {
    fn default() -> Self {
        Self::documented()
    }
}
