//! The Anthropic Messages API provider: the production [`Model`](super::Model).
//!
//! [`AnthropicProvider`] posts each [`ModelRequest`](super::ModelRequest) to
//! `/v1/messages` over HTTP/1.1 and returns the whole
//! [`ModelResponse`](super::ModelResponse), from one JSON body or assembled from a
//! server-sent-event stream. It reaches the host through a [`Connector`]
//! ([`RustlsConnector`] for the real API, [`TcpConnector`] for loopback tests, a
//! turmoil connector in the simulator) and waits only on the world
//! [`Clock`](super::Clock), so the same code runs in production and under
//! simulation.
//!
//! The map:
//!
//! - `connect`: the [`Connector`] interface and [`TcpConnector`]; `tls`:
//!   [`RustlsConnector`]; `url`: [`Endpoint::parse`].
//! - `key`: [`ApiKey`], which never prints; `config`: [`ProviderConfig`];
//!   `error`: [`ProviderError`] for setup.
//! - `exchange`: one HTTP attempt; `provider`: the [`Model`](super::Model) impl, one
//!   attempt per call under a deadline (the session's loop retries); `failure`:
//!   which [`ModelError`](super::ModelError) a failure is; `retry`: `retry-after`.
//! - `wire`: lenient decoding of the API's JSON; `sse`: the event-stream parser;
//!   `stream`: stream events assembled into a response.
//!
//! ```no_run
//! use std::sync::Arc;
//! use coord_runtime::world::anthropic::AnthropicProvider;
//! use coord_runtime::world::SystemClock;
//!
//! # fn main() -> Result<(), coord_runtime::world::anthropic::ProviderError> {
//! let provider = AnthropicProvider::from_env(Arc::new(SystemClock::new()))?;
//! # let _ = provider;
//! # Ok(())
//! # }
//! ```

mod config;
mod connect;
mod error;
mod exchange;
mod failure;
mod key;
mod provider;
mod retry;
mod sse;
mod stream;
mod tls;
mod url;
mod wire;

pub use config::ProviderConfig;
pub use connect::{BoxConnection, Connection, Connector, Endpoint, Scheme, TcpConnector};
pub use error::{BaseUrlDefect, ProviderError};
pub use exchange::ANTHROPIC_VERSION;
pub use key::{ApiKey, API_KEY_ENV};
pub use provider::{AnthropicProvider, BASE_URL_ENV, DEFAULT_BASE_URL};
pub use sse::{SseEvent, SseParser};
pub use tls::RustlsConnector;
