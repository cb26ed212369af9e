//! TLS to the real API: rustls with the ring backend and the Mozilla root store.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::connect::connect_tcp;
use super::{BoxConnection, Connector, Endpoint, ProviderError, Scheme};
use crate::world::BoxFuture;

/// TCP plus TLS (rustls, `webpki-roots` trust anchors, ALPN `http/1.1`) for
/// `https://` endpoints; plain TCP for `http://` ones.
#[derive(Clone)]
pub struct RustlsConnector {
    tls: TlsConnector,
}

impl RustlsConnector {
    /// A connector trusting the Mozilla root certificates bundled by `webpki-roots`,
    /// with rustls's safe default protocol versions (TLS 1.2 and 1.3).
    pub fn new() -> Result<Self, ProviderError> {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ProviderError::Tls {
                reason: error.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // The client speaks HTTP/1.1 only; say so, so the server never picks h2.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            tls: TlsConnector::from(Arc::new(config)),
        })
    }
}

impl fmt::Debug for RustlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RustlsConnector")
            .field("roots", &"webpki-roots")
            .field("alpn", &"http/1.1")
            .finish()
    }
}

impl Connector for RustlsConnector {
    fn connect(&self, endpoint: &Endpoint) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let endpoint = endpoint.clone();
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = connect_tcp(&endpoint).await?;
            match endpoint.scheme {
                Scheme::Http => Ok(Box::new(tcp) as BoxConnection),
                Scheme::Https => {
                    let server_name =
                        ServerName::try_from(endpoint.host.clone()).map_err(|error| {
                            io::Error::new(
                                io::ErrorKind::InvalidInput,
                                format!("{:?} is not a TLS server name: {error}", endpoint.host),
                            )
                        })?;
                    let stream = tls.connect(server_name, tcp).await?;
                    Ok(Box::new(stream) as BoxConnection)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_with_webpki_roots() {
        let connector = RustlsConnector::new().expect("ring supports the default versions");
        assert!(format!("{connector:?}").contains("webpki-roots"));
    }
}
