//! How the provider reaches the API host: a pluggable byte-stream connector.
//!
//! The HTTP client only needs a bidirectional byte stream to an endpoint. Real use
//! connects over TCP and TLS (rustls); the simulator connects over turmoil's
//! simulated TCP to a simulated API host; loopback tests connect over plain TCP to a
//! local server. The provider code above the connector is the same in all three.

use std::fmt::{self, Debug};
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::world::BoxFuture;

/// A byte stream to the API host.
pub trait Connection: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Connection for T {}

/// An open connection, boxed so that connectors of any stream type are interchangeable.
pub type BoxConnection = Box<dyn Connection>;

/// Whether the connection speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http://`: loopback tests and the simulated host.
    Http,
    /// `https://`: the real API.
    Https,
}

/// Where the API lives: scheme, host and port of the base URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// TLS or not.
    pub scheme: Scheme,
    /// Host name (also the TLS server name and the `Host` header).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// Opens connections to an [`Endpoint`].
pub trait Connector: Send + Sync + Debug {
    /// Opens one connection. TLS connectors finish the handshake before returning.
    fn connect(&self, endpoint: &Endpoint) -> BoxFuture<'static, io::Result<BoxConnection>>;
}

/// Plain TCP via `tokio::net::TcpStream`, for `http://` endpoints (loopback tests, a
/// local proxy). Refuses `https://` endpoints rather than send the key in clear to a
/// TLS port; use [`RustlsConnector`](super::RustlsConnector) for those.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connector for TcpConnector {
    fn connect(&self, endpoint: &Endpoint) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let endpoint = endpoint.clone();
        Box::pin(async move {
            if endpoint.scheme == Scheme::Https {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("TcpConnector does not speak TLS, which {endpoint} needs"),
                ));
            }
            let stream = connect_tcp(&endpoint).await?;
            Ok(Box::new(stream) as BoxConnection)
        })
    }
}

/// Opens a TCP connection to the endpoint's host and port, resolving the host name.
pub(super) async fn connect_tcp(endpoint: &Endpoint) -> io::Result<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
    // Requests are written whole and then awaited: Nagle's delay only adds latency.
    stream.set_nodelay(true)?;
    Ok(stream)
}
