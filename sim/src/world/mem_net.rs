//! An in-memory network between the coordinator host and a remote-worker host, for
//! runs on one executor without turmoil.
//!
//! The coordinator's [`TcpRemote`](super::TcpRemote) and the host's
//! [`serve_remote_worker`](super::serve_remote_worker) run unchanged over it: each
//! connection is a pair of in-memory byte pipes ([`tokio::io::duplex`]) carrying the
//! same length-prefixed frames as TCP. What the network does to a connection is
//! asked of a [`LinkPolicy`] when it opens:
//!
//! - [`LinkFate::Open`]: bytes flow both ways;
//! - [`LinkFate::Refused`]: the connect fails at once with `ConnectionRefused`, as a
//!   SYN dropped by a partition does under turmoil;
//! - [`LinkFate::HeldFor`]: the link is cut after the launch went out; what the host
//!   sends back is held until the partition heals, as TCP retransmits it then.
//!
//! Time is tokio's, which under simulation is the run's paused virtual clock.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use coord_runtime::world::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::sync::{mpsc, Mutex};

use super::remote::{Connector, RemoteListener, RemoteStream};

/// Bytes each direction of a connection buffers before its writer waits.
const PIPE_CAPACITY_BYTES: usize = 64 * 1024;

/// What the network does to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFate {
    /// Bytes flow both ways.
    Open,
    /// The connect is refused.
    Refused,
    /// The connection opens, but bytes from the host reach the caller only after
    /// this long.
    HeldFor(Duration),
}

/// Decides each connection's fate as it opens. `launch` counts connections from 1.
pub trait LinkPolicy: Send + Sync {
    /// The fate of the `launch`th connection.
    fn on_connect(&self, launch: u32) -> LinkFate;
}

/// Every connection opens.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysOpen;

impl LinkPolicy for AlwaysOpen {
    fn on_connect(&self, _launch: u32) -> LinkFate {
        LinkFate::Open
    }
}

/// The network: a [`MemConnector`] for the coordinator and a [`MemListener`] for the
/// remote-worker host.
pub fn mem_network(
    peer: impl Into<String>,
    policy: Arc<dyn LinkPolicy>,
) -> (MemConnector, MemListener) {
    let (accept_tx, accept_rx) = mpsc::unbounded_channel();
    (
        MemConnector {
            peer: peer.into(),
            accept_tx,
            policy,
            launches: Arc::new(std::sync::atomic::AtomicU32::new(0)),
        },
        MemListener {
            accept_rx: Mutex::new(accept_rx),
        },
    )
}

/// The coordinator's side of a [`mem_network`].
#[derive(Clone)]
pub struct MemConnector {
    peer: String,
    accept_tx: mpsc::UnboundedSender<DuplexStream>,
    policy: Arc<dyn LinkPolicy>,
    launches: Arc<std::sync::atomic::AtomicU32>,
}

impl fmt::Debug for MemConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemConnector")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl Connector for MemConnector {
    fn peer(&self) -> String {
        self.peer.clone()
    }

    fn connect(&self) -> BoxFuture<'static, io::Result<RemoteStream>> {
        let launch = 1 + self
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let fate = self.policy.on_connect(launch);
        let accept_tx = self.accept_tx.clone();
        let peer = self.peer.clone();
        Box::pin(async move {
            let held_for = match fate {
                LinkFate::Refused => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        format!("{peer}: partitioned"),
                    ))
                }
                LinkFate::Open => None,
                LinkFate::HeldFor(duration) => Some(duration),
            };
            let (client, server) = tokio::io::duplex(PIPE_CAPACITY_BYTES);
            accept_tx.send(server).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("{peer}: no host listens"),
                )
            })?;
            Ok(Box::new(HeldStream {
                inner: client,
                held: held_for.map(|duration| Box::pin(tokio::time::sleep(duration))),
            }) as RemoteStream)
        })
    }
}

/// The remote-worker host's side of a [`mem_network`].
#[derive(Debug)]
pub struct MemListener {
    accept_rx: Mutex<mpsc::UnboundedReceiver<DuplexStream>>,
}

impl RemoteListener for MemListener {
    async fn accept_stream(&self) -> io::Result<RemoteStream> {
        match self.accept_rx.lock().await.recv().await {
            Some(stream) => Ok(Box::new(stream) as RemoteStream),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the coordinator side of the network is gone",
            )),
        }
    }
}

/// The caller's end of a connection, whose reads wait until a partition heals.
struct HeldStream {
    inner: DuplexStream,
    held: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl AsyncRead for HeldStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(held) = self.held.as_mut() {
            if held.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.held = None;
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HeldStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
