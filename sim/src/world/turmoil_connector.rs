//! The Anthropic provider's connector under simulation: plain TCP over turmoil's network.
//!
//! The provider, [`AnthropicProvider`], reaches its API host through a [`Connector`].
//! In production that is TCP and TLS to the real API; under simulation it is
//! [`TurmoilApiConnector`], which opens a turmoil TCP stream to a turmoil host,
//! typically one running an [`ApiHost`](crate::world::ApiHost). Everything above the
//! byte stream (HTTP, SSE, retries, timeouts) is the provider's production code, and
//! turmoil's partitions, holds and crashes act on its connections.
//!
//! [`AnthropicProvider`]: coord_runtime::world::anthropic::AnthropicProvider
//!
//! The simulated network has no TLS, so only [`Scheme::Http`] endpoints connect.

use std::io;

use coord_runtime::world::anthropic::{BoxConnection, Connector, Endpoint, Scheme};
use coord_runtime::world::BoxFuture;

/// Opens the provider's connections over turmoil's simulated TCP.
///
/// The endpoint's `host` is a turmoil host name (or address) and `port` its port.
/// Works only inside a turmoil simulation, from a host's or client's software:
/// elsewhere turmoil's network does not exist, and connecting fails or panics as
/// turmoil decides. An [`Scheme::Https`] endpoint fails with
/// [`io::ErrorKind::Unsupported`]: the simulated network has no TLS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurmoilApiConnector {
    _private: (),
}

impl TurmoilApiConnector {
    /// A connector over the turmoil network of whichever host uses it.
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

impl Connector for TurmoilApiConnector {
    fn connect(&self, endpoint: &Endpoint) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let endpoint = endpoint.clone();
        Box::pin(async move {
            if endpoint.scheme == Scheme::Https {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{endpoint}: the simulated network has no TLS; use an http endpoint"),
                ));
            }
            let stream =
                turmoil::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
            Ok(Box::new(stream) as BoxConnection)
        })
    }
}
