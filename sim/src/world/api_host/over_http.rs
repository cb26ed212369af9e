//! The model API host of a run, for `[settings] model_transport = "http"` or
//! `"http-streaming"`.
//!
//! The runtime's model is then the production
//! [`AnthropicProvider`](coord_runtime::world::anthropic::AnthropicProvider): it
//! encodes every request as HTTP/1.1, sends it over an in-memory connection (a
//! [`tokio::io::duplex`] pipe on the run's executor, so on virtual time) to an
//! [`ApiHost`] that answers from the run's scripted model, decodes the JSON or SSE
//! answer, and times out on the run's clock. The scenario's model API faults (429,
//! 529, timeout, truncated response) reach the provider on the wire, through the
//! host's mapping of upstream errors, so its error handling runs in every seed; the
//! session's retry loop retries them.
//!
//! Each HTTP attempt is one call of the scripted model, so the trace shows a retried
//! request as the calls it took.

use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::anthropic::{
    AnthropicProvider, ApiKey, Connector, Endpoint, ProviderConfig, Scheme,
};
use coord_runtime::world::{Clock, Model};

use super::{ApiHost, PipeApiConnector};

/// The host name the provider connects to; it never leaves the run.
const API_HOST_NAME: &str = "api.sim.invalid";
/// The key the provider sends: the host requires one, and this one grants nothing.
const SIMULATED_API_KEY: &str = "simulated-key";

/// Whether the provider asks for SSE streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streaming {
    /// One JSON body per answer.
    Off,
    /// `"stream": true`: the answer is an SSE event stream.
    On,
}

/// The runtime's model for an HTTP run: the provider, reaching a host that answers
/// from `upstream` and draws how it reports errors from `host_seed`, waiting on
/// `clock`. `request_timeout` is the provider's per-attempt deadline, the client
/// timeout a direct run models.
pub fn over_http(
    upstream: Arc<dyn Model>,
    host_seed: u64,
    clock: Arc<dyn Clock>,
    streaming: Streaming,
    request_timeout: Duration,
) -> Arc<dyn Model> {
    let connector = PipeApiConnector::new(ApiHost::new(upstream).drawing_forms_from(host_seed));
    provider(
        Arc::new(connector),
        API_HOST_NAME,
        clock,
        streaming,
        request_timeout,
    )
}

/// The runtime's model for an HTTP run on the turmoil world: the provider, reaching
/// the turmoil host `api_host` on port 80 over turmoil TCP
/// ([`TurmoilApiConnector`](crate::world::TurmoilApiConnector)), with the same
/// settings as [`over_http`]. The API host is `ApiHost::serve(80)` there.
pub fn over_turmoil_http(
    api_host: &str,
    clock: Arc<dyn Clock>,
    streaming: Streaming,
    request_timeout: Duration,
) -> Arc<dyn Model> {
    provider(
        Arc::new(crate::world::TurmoilApiConnector::new()),
        api_host,
        clock,
        streaming,
        request_timeout,
    )
}

/// The provider with the run's settings, over `connector` to `host` on port 80.
fn provider(
    connector: Arc<dyn Connector>,
    host: &str,
    clock: Arc<dyn Clock>,
    streaming: Streaming,
    request_timeout: Duration,
) -> Arc<dyn Model> {
    let endpoint = Endpoint {
        scheme: Scheme::Http,
        host: host.to_owned(),
        port: 80,
    };
    let mut config = ProviderConfig::new(endpoint, ApiKey::new(SIMULATED_API_KEY));
    config.streaming = streaming == Streaming::On;
    config.request_timeout = request_timeout;
    Arc::new(AnthropicProvider::new(config, connector, clock))
}
