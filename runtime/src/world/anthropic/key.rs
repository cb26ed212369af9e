//! The API key: a secret that prints as `[redacted]`.
//!
//! The key is kept out of every `Debug` and `Display` output so that no log line,
//! panic message or error chain can carry it. Only the request builder reads it.

use std::fmt;

use super::ProviderError;

/// The environment variable [`ApiKey::from_env`] reads.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// An Anthropic API key. `Debug` and `Display` print `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key as given. A key with characters an HTTP header cannot hold fails
    /// each model call with a transport error instead (see [`ApiKey::from_lookup`]
    /// for a checked constructor).
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key from `ANTHROPIC_API_KEY`, trimmed of surrounding whitespace.
    ///
    /// Unset, empty or whitespace-only gives [`ProviderError::MissingApiKey`]; a key
    /// with control characters gives [`ProviderError::InvalidApiKey`].
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`ApiKey::from_env`], reading variables through `lookup` instead of the
    /// process environment (so callers and tests need not mutate the environment).
    pub fn from_lookup(lookup: impl FnOnce(&str) -> Option<String>) -> Result<Self, ProviderError> {
        let raw = lookup(API_KEY_ENV).ok_or(ProviderError::MissingApiKey)?;
        // A key pasted from a file or a shell substitution often carries a newline.
        let key = raw.trim();
        if key.is_empty() {
            return Err(ProviderError::MissingApiKey);
        }
        if let Some(position) = key.find(|c: char| !c.is_ascii_graphic()) {
            return Err(ProviderError::InvalidApiKey {
                reason: format!(
                    "character {} is not printable ASCII, so it cannot be sent as a header",
                    position + 1
                ),
            });
        }
        Ok(Self(key.to_owned()))
    }

    /// The secret itself, for the `x-api-key` header only.
    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}
