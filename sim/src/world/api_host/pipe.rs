//! An in-memory connection to an [`ApiHost`], for runs on one executor without
//! turmoil.

use std::fmt;
use std::io;

use coord_runtime::world::anthropic::{BoxConnection, Connector, Endpoint};
use coord_runtime::world::BoxFuture;

use super::ApiHost;

/// Bytes each direction of a connection buffers before its writer waits: a whole
/// conversation fits, so a request is one write.
const PIPE_CAPACITY_BYTES: usize = 1024 * 1024;

/// Opens each connection as an in-memory pipe ([`tokio::io::duplex`]) whose far end
/// the host serves in a task of its own on the current executor, whatever the
/// endpoint says. Dropping the executor drops the host's tasks with it: a crashed
/// process answers nothing more.
pub struct PipeApiConnector {
    host: ApiHost,
}

impl PipeApiConnector {
    /// Connections to `host`.
    pub fn new(host: ApiHost) -> Self {
        Self { host }
    }
}

impl fmt::Debug for PipeApiConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeApiConnector").finish_non_exhaustive()
    }
}

impl Connector for PipeApiConnector {
    fn connect(&self, _endpoint: &Endpoint) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let (client, server) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
        let host = self.host.clone();
        tokio::spawn(async move { host.serve_connection(server).await });
        Box::pin(async move { Ok(Box::new(client) as BoxConnection) })
    }
}
