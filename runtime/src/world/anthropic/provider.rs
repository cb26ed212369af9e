//! The provider: the [`Model`] that calls the Messages API.
//!
//! One call is one HTTP attempt. Retrying is the caller's: the session's retry loop
//! (`session/retry.rs`) is the only one, with one budget (`model_retries_max`), so a
//! transient error costs at most that many more attempts, not that many times a
//! budget of the provider's own. Whether an error is worth another attempt is
//! [`ModelError::is_transient`].
//!
//! The attempt's deadline goes through the world [`Clock`], so under simulation
//! virtual time drives it.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;

use super::exchange::Exchange;
use super::wire::encode_request;
use super::{ApiKey, Connector, Endpoint, ProviderConfig, ProviderError, RustlsConnector};
use crate::world::{BoxFuture, Clock, Model, ModelError, ModelRequest, ModelResponse};

/// The environment variable [`AnthropicProvider::from_env`] reads the base URL from.
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// The base URL of the real API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// A [`Model`] backed by the Anthropic Messages API over any [`Connector`].
///
/// `Debug` shows the endpoint and settings, never the key.
#[derive(Clone)]
pub struct AnthropicProvider {
    inner: Arc<Inner>,
}

struct Inner {
    config: ProviderConfig,
    connector: Arc<dyn Connector>,
    clock: Arc<dyn Clock>,
}

impl AnthropicProvider {
    /// A provider that reaches `config.endpoint` through `connector` and waits on
    /// `clock`.
    pub fn new(
        config: ProviderConfig,
        connector: Arc<dyn Connector>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                connector,
                clock,
            }),
        }
    }

    /// The production provider: base URL from `ANTHROPIC_BASE_URL` (default
    /// `https://api.anthropic.com`), key from `ANTHROPIC_API_KEY`, a
    /// [`RustlsConnector`], default settings, and the given clock.
    pub fn from_env(clock: Arc<dyn Clock>) -> Result<Self, ProviderError> {
        Self::from_lookup(|name| std::env::var(name).ok(), clock)
    }

    /// As [`AnthropicProvider::from_env`], reading variables through `lookup`.
    /// An empty `ANTHROPIC_BASE_URL` counts as unset.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ProviderError> {
        let api_key = ApiKey::from_lookup(&lookup)?;
        let base_url = lookup(BASE_URL_ENV)
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let endpoint = Endpoint::parse(&base_url)?;
        let connector = Arc::new(RustlsConnector::new()?);
        Ok(Self::new(
            ProviderConfig::new(endpoint, api_key),
            connector,
            clock,
        ))
    }

    /// The settings this provider runs with.
    pub fn config(&self) -> &ProviderConfig {
        &self.inner.config
    }
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.inner.config;
        f.debug_struct("AnthropicProvider")
            .field("endpoint", &config.endpoint)
            .field("streaming", &config.streaming)
            .field("request_timeout", &config.request_timeout)
            .field("connector", &self.inner.connector)
            .finish_non_exhaustive()
    }
}

impl Model for AnthropicProvider {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.send(&request).await })
    }
}

impl Inner {
    async fn send(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let config = &self.config;
        let mut api_key = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            ModelError::Transport(
                "the API key has characters an HTTP header cannot carry".to_owned(),
            )
        })?;
        // Keeps the value out of hyper's and http's own debug output.
        api_key.set_sensitive(true);
        let body = Bytes::from(encode_request(request, config.streaming)?);
        tracing::debug!(
            endpoint = %config.endpoint,
            model = %request.model,
            streaming = config.streaming,
            "model API attempt"
        );
        let exchange = Exchange {
            config,
            connector: self.connector.as_ref(),
            clock: self.clock.as_ref(),
            api_key: &api_key,
            body,
        };
        let started = self.clock.monotonic();
        let deadline = self.clock.sleep(config.request_timeout);
        let outcome = tokio::select! {
            // `biased`: a deterministic poll order (see `exchange::drive`), and a
            // response that is ready wins over a deadline that is also due.
            biased;
            outcome = exchange.run() => outcome,
            () = deadline => Err(ModelError::Timeout {
                elapsed: self.clock.monotonic().saturating_sub(started),
            }),
        };
        match outcome {
            Ok(decoded) => {
                tracing::debug!(
                    id = %decoded.response.id,
                    stop_reason = ?decoded.response.stop_reason,
                    dropped_block_types = ?decoded.dropped_block_types,
                    "model API response"
                );
                Ok(decoded.response)
            }
            Err(error) => {
                tracing::debug!(
                    %error,
                    transient = error.is_transient(),
                    "model API call failed"
                );
                Err(error)
            }
        }
    }
}
