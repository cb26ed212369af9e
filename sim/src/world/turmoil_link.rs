//! The link between the coordinator and the remote-worker host on the turmoil world,
//! with the fault engine's partition verdicts applied to turmoil's network.
//!
//! Each connection asks the run's [`LinkPolicy`] (the fault engine's
//! `ScheduledPartitions`) for its fate as it opens, as the in-memory network does,
//! and the verdict becomes turmoil's own network fault, so the failure the runtime
//! meets is the simulated network's:
//!
//! - [`LinkFate::Open`]: a plain turmoil TCP connect.
//! - [`LinkFate::Refused`]: the two hosts are partitioned for the connect, whose SYN
//!   turmoil then drops (`ConnectionRefused` at once), and repaired after it. The
//!   policy keeps refusing connects for as long as its partition lasts. While
//!   another connection is open on the link, or a hold is on it, the connector
//!   refuses the connect itself: turmoil's partition drops every segment in flight
//!   on the link, and turmoil's TCP does not retransmit, so it would also break
//!   connections the fault engine's verdict does not touch.
//! - [`LinkFate::HeldFor`]: the connection opens and the launch goes out; when the
//!   host answers, turmoil holds every segment between the two hosts, both ways,
//!   until the partition heals (its duration counted from the connect), and the
//!   report crosses the link then, as TCP retransmits it after a partition. The
//!   hold is set by the host's side of the connection ([`HoldingListener`]), which
//!   is where the report is sent from.
//!
//! Turmoil's links are per pair of hosts, not per connection: a hold also holds the
//! other launches' traffic while it lasts, as a real partition would.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use coord_runtime::world::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::remote::{Connector, RemoteListener, RemoteStream, TurmoilConnector};
use super::{LinkFate, LinkPolicy};

/// What the two ends of the link share: the holds armed for connections whose
/// report the partition holds, and the hold in force.
#[derive(Debug, Default)]
struct LinkState {
    /// Connections whose report is to be held, by the coordinator's port, to when
    /// (turmoil's elapsed time) their partition heals.
    armed: BTreeMap<u16, Duration>,
    /// When the hold in force on the link is released, if one is.
    held_until: Option<Duration>,
    /// Connections the coordinator has open on the link.
    open_connections: usize,
}

/// The shared state of one boot's link between `local` (the coordinator) and
/// `peer_host` (the remote-worker host).
#[derive(Debug, Clone)]
pub struct TurmoilLink {
    local: Arc<str>,
    peer_host: Arc<str>,
    state: Arc<Mutex<LinkState>>,
}

impl TurmoilLink {
    /// The link between turmoil hosts `local` and `peer_host`.
    pub fn new(local: &str, peer_host: &str) -> Self {
        Self {
            local: local.into(),
            peer_host: peer_host.into(),
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().expect("link state poisoned")
    }

    /// Whether a partition would touch traffic besides the connect it is for: a
    /// hold is on the link at turmoil time `now`, or a connection is open.
    fn is_busy(&self, now: Duration) -> bool {
        let state = self.lock();
        state.open_connections > 0 || state.held_until.is_some_and(|until| now < until)
    }

    /// Counts a connection open from its connect on, until the returned guard (or
    /// the stream it becomes) is dropped: a SYN-ACK in flight is traffic too.
    fn opening(&self) -> Opening {
        self.lock().open_connections += 1;
        Opening { link: self.clone() }
    }

    /// Holds the link until turmoil time `until`, from the current host's software.
    fn hold_until(&self, until: Duration) {
        let now = turmoil_now();
        if now >= until {
            return;
        }
        {
            let mut state = self.lock();
            state.held_until = Some(state.held_until.map_or(until, |held| held.max(until)));
        }
        turmoil::hold(&*self.local, &*self.peer_host);
        let link = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(until - now).await;
            let release = {
                let mut state = link.lock();
                // A later hold extended this one: its own task releases the link.
                let last = state.held_until.is_some_and(|held| held <= turmoil_now());
                if last {
                    state.held_until = None;
                }
                last
            };
            if release {
                turmoil::release(&*link.local, &*link.peer_host);
            }
        });
    }
}

/// Turmoil's elapsed time on the current host.
fn turmoil_now() -> Duration {
    turmoil::sim_elapsed().expect("the turmoil link is used outside a turmoil host")
}

/// Connects from the coordinator to the remote-worker host over turmoil TCP, through
/// the partitions `policy` decides. Works only inside the coordinator's software.
#[derive(Clone)]
pub struct PartitionedTurmoilConnector {
    link: TurmoilLink,
    port: u16,
    inner: TurmoilConnector,
    policy: Arc<dyn LinkPolicy>,
    /// Connections opened so far: the policy counts launches from 1.
    launches: Arc<AtomicU32>,
}

impl std::fmt::Debug for PartitionedTurmoilConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedTurmoilConnector")
            .field("local", &self.link.local)
            .field("peer", &self.inner.peer())
            .finish_non_exhaustive()
    }
}

impl PartitionedTurmoilConnector {
    /// A connector over `link` to its peer host's `port`, asking `policy`.
    pub fn new(link: TurmoilLink, port: u16, policy: Arc<dyn LinkPolicy>) -> Self {
        Self {
            inner: TurmoilConnector::new(&*link.peer_host, port),
            link,
            port,
            policy,
            launches: Arc::new(AtomicU32::new(0)),
        }
    }
}

impl Connector for PartitionedTurmoilConnector {
    fn peer(&self) -> String {
        self.inner.peer()
    }

    fn connect(&self) -> BoxFuture<'static, io::Result<RemoteStream>> {
        // SeqCst: one seed's hosts share one thread; the order is the call order.
        let launch = 1 + self.launches.fetch_add(1, Ordering::SeqCst);
        let fate = self.policy.on_connect(launch);
        let (link, port, peer) = (self.link.clone(), self.port, self.inner.peer());
        Box::pin(async move {
            let address = (&*link.peer_host, port);
            match fate {
                LinkFate::Open => {
                    let opening = link.opening();
                    let stream = turmoil::net::TcpStream::connect(address).await?;
                    Ok(opening.opened(stream))
                }
                LinkFate::Refused if link.is_busy(turmoil_now()) => Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("{peer}: partitioned"),
                )),
                LinkFate::Refused => {
                    let opening = link.opening();
                    turmoil::partition(&*link.local, &*link.peer_host);
                    let connected = turmoil::net::TcpStream::connect(address).await;
                    turmoil::repair(&*link.local, &*link.peer_host);
                    Ok(opening.opened(connected?))
                }
                LinkFate::HeldFor(duration) => {
                    let heals_at = turmoil_now() + duration;
                    let opening = link.opening();
                    let stream = turmoil::net::TcpStream::connect(address).await?;
                    let port = stream.local_addr()?.port();
                    link.lock().armed.insert(port, heals_at);
                    Ok(opening.opened(stream))
                }
            }
        })
    }
}

/// The remote-worker host's listener on a [`TurmoilLink`]: a connection whose
/// report the partition holds puts the hold on the link when the host first writes
/// to it. The connection is looked up then, not at the accept: the coordinator
/// learns its own port, and arms the hold, only once the handshake is done.
pub struct HoldingListener {
    inner: turmoil::net::TcpListener,
    link: TurmoilLink,
}

impl std::fmt::Debug for HoldingListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldingListener")
            .field("link", &self.link)
            .finish_non_exhaustive()
    }
}

impl HoldingListener {
    /// Accepts on `inner`, holding reports as `link`'s connector armed them.
    pub fn new(inner: turmoil::net::TcpListener, link: TurmoilLink) -> Self {
        Self { inner, link }
    }
}

impl RemoteListener for HoldingListener {
    async fn accept_stream(&self) -> io::Result<RemoteStream> {
        let (stream, peer) = self.inner.accept().await?;
        Ok(Box::new(HeldReply {
            inner: stream,
            link: self.link.clone(),
            peer_port: Some(peer.port()),
        }))
    }
}

/// The host's end of a connection, whose report may wait out a partition.
struct HeldReply {
    inner: turmoil::net::TcpStream,
    link: TurmoilLink,
    /// The coordinator's port, until the first write looks its hold up.
    peer_port: Option<u16>,
}

impl AsyncRead for HeldReply {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HeldReply {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(port) = self.peer_port.take() {
            let heals_at = self.link.lock().armed.remove(&port);
            if let Some(heals_at) = heals_at {
                self.link.hold_until(heals_at);
            }
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A connection of the coordinator's being opened on a [`TurmoilLink`].
struct Opening {
    link: TurmoilLink,
}

impl Opening {
    /// The connection, opened as `stream`: it stays counted while the stream lives.
    fn opened(self, stream: turmoil::net::TcpStream) -> RemoteStream {
        Box::new(Tracked {
            inner: stream,
            _open: self,
        })
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.link.lock().open_connections -= 1;
    }
}

/// The coordinator's end of a connection on a [`TurmoilLink`], counted open.
struct Tracked {
    inner: turmoil::net::TcpStream,
    _open: Opening,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
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
