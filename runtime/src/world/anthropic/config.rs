//! How the provider talks to the API: where, with which key, and how patiently.

use std::time::Duration;

use super::{ApiKey, Endpoint};

/// The provider's settings. Build with [`ProviderConfig::new`], then set fields.
///
/// Defaults: `streaming` on, `request_timeout` 600 s, `response_bytes_max` 64 MiB.
/// There is no retry setting: the provider makes one attempt per call, and the
/// session retries transient errors within its `model_retries_max`.
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
    /// How long one call may take, from connecting to the last byte of the
    /// response. A call that runs out of time fails with
    /// [`ModelError::Timeout`](crate::world::ModelError::Timeout), which is transient.
    pub request_timeout: Duration,
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
            request_timeout: Duration::from_secs(600),
            response_bytes_max: 64 * 1024 * 1024,
        }
    }
}
