//! How the provider talks to the API: where, with which key, and how patiently.

use std::time::Duration;

use super::{retry, ApiKey, Endpoint};

/// The provider's settings. Build with [`ProviderConfig::new`], then set fields.
///
/// Defaults: `streaming` on, `max_retries` 3 (up to 4 attempts), `request_timeout`
/// 600 s per attempt, `backoff_base` 500 ms doubled per retry, `backoff_max` 30 s,
/// `response_bytes_max` 64 MiB.
///
/// `Debug` prints the key as `[redacted]`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Where the API lives.
    pub endpoint: Endpoint,
    /// Sent as `x-api-key`; never logged.
    pub api_key: ApiKey,
    /// Ask for a server-sent-event stream (`"stream": true`) rather than one JSON
    /// body. On by default: the API recommends streaming for long generations, and
    /// a stream keeps the connection busy where an idle one may be cut by a proxy.
    pub streaming: bool,
    /// Retries after the first attempt; `3` means up to 4 attempts.
    pub max_retries: u32,
    /// How long one attempt may take, from connecting to the last byte of the
    /// response. An attempt that runs out of time is retried, and the call fails
    /// with [`ModelError::Timeout`](crate::world::ModelError::Timeout) when none is left.
    pub request_timeout: Duration,
    /// The wait before the first retry; doubled for each retry after that.
    pub backoff_base: Duration,
    /// The longest computed backoff. A server's `retry-after` is honoured even when
    /// it asks for longer.
    pub backoff_max: Duration,
    /// The largest response body read before the attempt fails as malformed, so a
    /// runaway server cannot exhaust memory.
    pub response_bytes_max: usize,
}

impl ProviderConfig {
    /// The defaults listed on [`ProviderConfig`] for this endpoint and key.
    pub fn new(endpoint: Endpoint, api_key: ApiKey) -> Self {
        Self {
            endpoint,
            api_key,
            streaming: true,
            max_retries: 3,
            request_timeout: Duration::from_secs(600),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            response_bytes_max: 64 * 1024 * 1024,
        }
    }

    /// How long to wait before retry number `retry` (0 for the first retry).
    ///
    /// A server-given `retry_after` is used exactly, even beyond `backoff_max`.
    /// Otherwise the wait is `backoff_base * 2^retry`, capped at `backoff_max`. There
    /// is no jitter, so the schedule is the same in every run.
    pub fn retry_delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        retry::retry_delay(retry, retry_after, self.backoff_base, self.backoff_max)
    }
}
