//! The remote boundary over TCP: a coordinator's [`Remote`] that reaches a remote-worker
//! host through the network, and that host's server loop.
//!
//! `PROTOCOL.md` §2 says a remote worker "runs on another host and reports over the
//! network". Under simulation that other host is a turmoil host, so partitions, held
//! links and crashes between the coordinator and its remote worker are the network's
//! own faults rather than a scripted stand-in. The same code runs on real tokio
//! sockets: only the [`Connector`] (client) and [`RemoteListener`] (server) differ.
//!
//! # Wire protocol
//!
//! One exchange per TCP connection. Each message is a *frame*: a `u32` big-endian
//! length, then that many bytes of JSON. The client sends one [`RemoteLaunch`] frame,
//! the server answers with one [`RemoteReport`] frame, and the connection closes.
//! A frame longer than the cap ([`FRAME_SIZE_BYTES_MAX`] unless set otherwise) is
//! refused from its header alone, before its body is read or allocated.
//!
//! # How failures map to [`RemoteError`]
//!
//! The rule: a failure of the transport is [`RemoteError::Unreachable`] (the host may
//! be fine after a heal, and a retry may succeed); bytes that arrived but are not a
//! report are [`RemoteError::BadReport`] (the peer is misbehaving; a retry will not help).
//!
//! | what happened | error |
//! | --- | --- |
//! | connection refused, partitioned at connect, connect timeout | `Unreachable` |
//! | connection closed before or in the middle of the report frame | `Unreachable` |
//! | any other I/O error, no complete report within the read timeout | `Unreachable` |
//! | report frame header over the cap | `BadReport` |
//! | report body not JSON, or JSON that is not a report | `BadReport` |
//! | report for another task id | `BadReport` |
//! | the launch itself encodes to a frame over the cap | `BadReport` |
//!
//! A short read is `Unreachable` because under turmoil (and on real TCP) a crashed
//! peer's connection ends with a FIN or RST: a truncated frame means the host went
//! away, not that it answered garbage.
//!
//! # Timeouts
//!
//! [`TcpRemote`] bounds the connect ([`CONNECT_TIMEOUT_DEFAULT`]) and, optionally, the
//! wait for the report; both wait on the runtime's [`Clock`], never on the wall clock,
//! so under simulation they expire in virtual time. The report wait is off by default:
//! a remote worker may legitimately run for as long as its model takes, and the
//! runtime's spawn deadline already ends a worker whose remote never answers
//! (`PROTOCOL.md` §8, invariant 11).
//!
//! # Under turmoil
//!
//! What the network faults do to a call (pinned by `sim/tests/integration/remote.rs`):
//!
//! - `sim.partition(a, b)` drops messages. A connect across a partition fails at
//!   once (the dropped SYN takes the handshake with it: `ConnectionRefused`, zero
//!   virtual time). A report dropped on an established connection is never seen:
//!   only the read timeout (or the runtime's spawn deadline) ends that call.
//! - `sim.hold(a, b)` keeps messages on the link until `release`: calls wait, bounded
//!   by the same timeouts.
//! - `sim.crash(host)` drops the host's software inside the simulation, so its
//!   sockets close as a killed process's do: a call in flight reads end-of-stream at
//!   once (`Unreachable`). While the host is down turmoil delivers nothing to it, so a
//!   new connect waits for the connect timeout.
//!
//! The server's wait for a launch ([`LAUNCH_READ_TIMEOUT`]) is a tokio timer, which
//! under turmoil is the host's virtual clock.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use coord_runtime::world::{RemoteReport, SystemClock};
//! use coord_sim::world::{serve_remote_worker, TcpRemote};
//!
//! # async fn example() -> std::io::Result<()> {
//! // The remote-worker host.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7000").await?;
//! tokio::spawn(serve_remote_worker(listener, |launch| async move {
//!     RemoteReport {
//!         task_id: launch.task_id,
//!         succeeded: true,
//!         text: "done".into(),
//!         messages: Vec::new(),
//!     }
//! }));
//! // The coordinator.
//! let remote = TcpRemote::tokio("127.0.0.1:7000", Arc::new(SystemClock::new()))
//!     .with_read_timeout(Some(Duration::from_secs(600)));
//! # let _ = remote;
//! # Ok(())
//! # }
//! ```

use std::fmt::{self, Debug};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{BoxFuture, Clock, Remote, RemoteError, RemoteLaunch, RemoteReport};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The default cap on one frame's JSON body: 8 MiB.
pub const FRAME_SIZE_BYTES_MAX: u32 = 8 * 1024 * 1024;

/// The length of a frame's header: one big-endian `u32`.
pub const FRAME_HEADER_SIZE_BYTES: usize = 4;

/// How long [`TcpRemote`] waits for a connection by default: 10 s.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// How long [`serve_remote_worker`] waits for a connection's launch frame before it
/// drops the connection: 60 s. It keeps a client that connected and went silent (for
/// example, partitioned after its SYN) from holding a server task forever.
pub const LAUNCH_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// A byte stream in either direction: a turmoil or a tokio TCP stream.
pub trait RemoteIo: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> RemoteIo for T {}

/// A connected stream, whatever the transport.
pub type RemoteStream = Box<dyn RemoteIo>;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The peer closed the connection before sending any byte of a frame.
    #[error("connection closed before a frame")]
    Closed,
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed after {received_bytes} of {expected_bytes} bytes of a frame")]
    Truncated {
        /// Bytes of the frame (header included) that arrived.
        received_bytes: usize,
        /// Bytes the frame has (header included), as far as the header said.
        expected_bytes: usize,
    },
    /// A frame's body is longer than the cap.
    #[error("frame of {size_bytes} bytes exceeds the cap of {size_bytes_max} bytes")]
    Oversize {
        /// The body length the header announced (or the encoder produced).
        size_bytes: u64,
        /// The cap.
        size_bytes_max: u32,
    },
    /// The body is not JSON of the expected shape.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

impl From<FrameError> for RemoteError {
    /// Transport failures are `Unreachable`, bad bytes are `BadReport` (see the
    /// module docs).
    fn from(error: FrameError) -> Self {
        match error {
            FrameError::Closed | FrameError::Truncated { .. } | FrameError::Io(_) => {
                RemoteError::Unreachable(error.to_string())
            }
            FrameError::Oversize { .. } | FrameError::Malformed(_) => {
                RemoteError::BadReport(error.to_string())
            }
        }
    }
}

/// Writes `value` as one frame: its JSON length as a big-endian `u32`, then the JSON.
/// Refuses (without writing anything) a body over `size_bytes_max`.
pub async fn write_frame<W, T>(
    writer: &mut W,
    value: &T,
    size_bytes_max: u32,
) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin + ?Sized,
    T: Serialize + ?Sized,
{
    let body = serde_json::to_vec(value).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let size_bytes = u32::try_from(body.len())
        .ok()
        .filter(|size| *size <= size_bytes_max)
        .ok_or(FrameError::Oversize {
            size_bytes: body.len() as u64,
            size_bytes_max,
        })?;
    let mut frame = Vec::with_capacity(FRAME_HEADER_SIZE_BYTES + body.len());
    frame.extend_from_slice(&size_bytes.to_be_bytes());
    frame.extend_from_slice(&body);
    writer.write_all(&frame).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame and decodes its JSON as `T`. The header is checked against
/// `size_bytes_max` before any of the body is read or allocated.
pub async fn read_frame<R, T>(reader: &mut R, size_bytes_max: u32) -> Result<T, FrameError>
where
    R: AsyncRead + Unpin + ?Sized,
    T: DeserializeOwned,
{
    let mut header = [0_u8; FRAME_HEADER_SIZE_BYTES];
    let header_bytes = read_full(reader, &mut header).await?;
    if header_bytes == 0 {
        return Err(FrameError::Closed);
    }
    if header_bytes < FRAME_HEADER_SIZE_BYTES {
        return Err(FrameError::Truncated {
            received_bytes: header_bytes,
            expected_bytes: FRAME_HEADER_SIZE_BYTES,
        });
    }
    let size_bytes = u32::from_be_bytes(header);
    if size_bytes > size_bytes_max {
        return Err(FrameError::Oversize {
            size_bytes: u64::from(size_bytes),
            size_bytes_max,
        });
    }
    // Bounded by the cap just checked.
    let mut body = vec![0_u8; size_bytes as usize];
    let body_bytes = read_full(reader, &mut body).await?;
    if body_bytes < body.len() {
        return Err(FrameError::Truncated {
            received_bytes: FRAME_HEADER_SIZE_BYTES + body_bytes,
            expected_bytes: FRAME_HEADER_SIZE_BYTES + body.len(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Fills `buf` unless the stream ends first; returns how many bytes arrived.
async fn read_full<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut filled_bytes = 0;
    // Bounded: every iteration either ends the loop or fills at least one byte.
    while filled_bytes < buf.len() {
        let read_bytes = reader.read(&mut buf[filled_bytes..]).await?;
        if read_bytes == 0 {
            break;
        }
        filled_bytes += read_bytes;
    }
    Ok(filled_bytes)
}

/// Opens connections to one remote-worker host.
pub trait Connector: Send + Sync + Debug {
    /// The peer, as it appears in error messages (`host:port`).
    fn peer(&self) -> String;

    /// Opens a new connection to the peer.
    fn connect(&self) -> BoxFuture<'static, io::Result<RemoteStream>>;
}

/// Connects through turmoil's simulated network; works only inside a turmoil host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurmoilConnector {
    host: String,
    port: u16,
}

impl TurmoilConnector {
    /// A connector to turmoil host `host` (its name in the simulation) on `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl Connector for TurmoilConnector {
    fn peer(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn connect(&self) -> BoxFuture<'static, io::Result<RemoteStream>> {
        let (host, port) = (self.host.clone(), self.port);
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect((host.as_str(), port)).await?;
            Ok(Box::new(stream) as RemoteStream)
        })
    }
}

/// Connects through the operating system's network with tokio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokioConnector {
    address: String,
}

impl TokioConnector {
    /// A connector to `address` (`host:port`, resolved at each connect).
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
        }
    }
}

impl Connector for TokioConnector {
    fn peer(&self) -> String {
        self.address.clone()
    }

    fn connect(&self) -> BoxFuture<'static, io::Result<RemoteStream>> {
        let address = self.address.clone();
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(address.as_str()).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as RemoteStream)
        })
    }
}

/// The coordinator's [`Remote`] over TCP: one connection per launch, one launch frame
/// out, one report frame back (see the module docs for the protocol and error mapping).
///
/// Defaults: connect timeout [`CONNECT_TIMEOUT_DEFAULT`], no read timeout, frame cap
/// [`FRAME_SIZE_BYTES_MAX`].
#[derive(Clone)]
pub struct TcpRemote {
    connector: Arc<dyn Connector>,
    clock: Arc<dyn Clock>,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    frame_size_bytes_max: u32,
}

impl Debug for TcpRemote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpRemote")
            .field("peer", &self.connector.peer())
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("frame_size_bytes_max", &self.frame_size_bytes_max)
            .finish_non_exhaustive()
    }
}

impl TcpRemote {
    /// A remote reached through `connector`, whose timeouts wait on `clock`.
    pub fn new(connector: impl Connector + 'static, clock: Arc<dyn Clock>) -> Self {
        Self {
            connector: Arc::new(connector),
            clock,
            connect_timeout: Some(CONNECT_TIMEOUT_DEFAULT),
            read_timeout: None,
            frame_size_bytes_max: FRAME_SIZE_BYTES_MAX,
        }
    }

    /// A remote on turmoil host `host`, port `port` ([`TurmoilConnector`]).
    pub fn turmoil(host: impl Into<String>, port: u16, clock: Arc<dyn Clock>) -> Self {
        Self::new(TurmoilConnector::new(host, port), clock)
    }

    /// A remote at `address` (`host:port`) on the real network ([`TokioConnector`]).
    pub fn tokio(address: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self::new(TokioConnector::new(address), clock)
    }

    /// Bounds the connect; `None` waits for as long as the transport does.
    pub fn with_connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds sending the launch and receiving the whole report, that is, the remote
    /// worker's whole run; `None` (the default) waits until the connection ends.
    pub fn with_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Sets the cap on a frame's body, for the launch sent and the report received.
    pub fn with_frame_size_bytes_max(mut self, size_bytes_max: u32) -> Self {
        self.frame_size_bytes_max = size_bytes_max;
        self
    }

    /// Runs `launch` on the remote host and waits for its report.
    pub async fn call(&self, launch: RemoteLaunch) -> Result<RemoteReport, RemoteError> {
        let peer = self.connector.peer();
        let connect = within(&*self.clock, self.connect_timeout, self.connector.connect());
        let mut stream = match connect.await {
            None => {
                return Err(RemoteError::Unreachable(format!(
                    "connect to {peer}: no connection within {} ms",
                    millis(self.connect_timeout)
                )))
            }
            Some(Err(error)) => {
                return Err(RemoteError::Unreachable(format!(
                    "connect to {peer}: {}: {error}",
                    error.kind()
                )))
            }
            Some(Ok(stream)) => stream,
        };
        let exchange = exchange(&mut stream, &launch, self.frame_size_bytes_max);
        let report = match within(&*self.clock, self.read_timeout, exchange).await {
            None => {
                return Err(RemoteError::Unreachable(format!(
                    "{peer}: no report within {} ms",
                    millis(self.read_timeout)
                )))
            }
            Some(result) => result?,
        };
        if report.task_id != launch.task_id {
            return Err(RemoteError::BadReport(format!(
                "{peer}: report for task {:?}, launched task {:?}",
                report.task_id, launch.task_id
            )));
        }
        Ok(report)
    }
}

impl Remote for TcpRemote {
    fn run(&self, launch: RemoteLaunch) -> BoxFuture<'static, Result<RemoteReport, RemoteError>> {
        let remote = self.clone();
        Box::pin(async move { remote.call(launch).await })
    }
}

/// Sends the launch and reads the report on one connection.
async fn exchange(
    stream: &mut RemoteStream,
    launch: &RemoteLaunch,
    frame_size_bytes_max: u32,
) -> Result<RemoteReport, RemoteError> {
    match write_frame(stream, launch, frame_size_bytes_max).await {
        Ok(()) => {}
        // Not a report, but the same verdict: this launch can never succeed, and
        // retrying it would not help.
        Err(error @ FrameError::Oversize { .. }) => {
            return Err(RemoteError::BadReport(format!("launch not sent: {error}")))
        }
        Err(error) => return Err(error.into()),
    }
    Ok(read_frame(stream, frame_size_bytes_max).await?)
}

/// `future`'s output, or `None` once `timeout` has passed on `clock`.
///
/// `biased`: the future is polled first, so a result that is ready when the timer
/// fires wins, and tokio's random branch choice never enters a simulated run.
async fn within<F: Future>(
    clock: &dyn Clock,
    timeout: Option<Duration>,
    future: F,
) -> Option<F::Output> {
    let Some(timeout) = timeout else {
        return Some(future.await);
    };
    tokio::select! {
        biased;
        output = future => Some(output),
        () = clock.sleep(timeout) => None,
    }
}

/// A timeout's length in ms, for messages.
fn millis(timeout: Option<Duration>) -> u128 {
    timeout.unwrap_or_default().as_millis()
}

/// Accepts connections for [`serve_remote_worker`]: a turmoil or a tokio listener.
pub trait RemoteListener {
    /// Waits for the next connection.
    fn accept_stream(&self) -> impl Future<Output = io::Result<RemoteStream>> + Send;
}

impl RemoteListener for turmoil::net::TcpListener {
    async fn accept_stream(&self) -> io::Result<RemoteStream> {
        let (stream, _peer) = self.accept().await?;
        Ok(Box::new(stream) as RemoteStream)
    }
}

impl RemoteListener for tokio::net::TcpListener {
    async fn accept_stream(&self) -> io::Result<RemoteStream> {
        let (stream, _peer) = self.accept().await?;
        stream.set_nodelay(true)?;
        Ok(Box::new(stream) as RemoteStream)
    }
}

/// The remote-worker host's server loop: for each accepted connection, reads one
/// [`RemoteLaunch`] frame, runs `worker` on it, and writes the [`RemoteReport`] it
/// returns as one frame.
///
/// Each connection runs in its own tokio task, so a long worker does not hold up
/// other launches. A connection whose launch is malformed, over the cap, or does not
/// arrive within [`LAUNCH_READ_TIMEOUT`] is closed without a report (its client sees
/// `Unreachable`); so is one whose report cannot be written. Frames are capped at
/// [`FRAME_SIZE_BYTES_MAX`].
///
/// Returns only when accepting fails. Under turmoil, crashing the host ends it along
/// with every connection task, and the clients see their connections close.
pub async fn serve_remote_worker<L, F, Fut>(listener: L, worker: F) -> io::Result<()>
where
    L: RemoteListener,
    F: Fn(RemoteLaunch) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = RemoteReport> + Send + 'static,
{
    let worker = Arc::new(worker);
    loop {
        let stream = listener.accept_stream().await?;
        let worker = worker.clone();
        tokio::spawn(async move {
            // A failed connection has nobody to report to but its client, which
            // learns of it from the closed connection.
            let _ = serve_connection(stream, &*worker).await;
        });
    }
}

/// One connection of [`serve_remote_worker`].
async fn serve_connection<F, Fut>(mut stream: RemoteStream, worker: &F) -> Result<(), FrameError>
where
    F: Fn(RemoteLaunch) -> Fut,
    Fut: Future<Output = RemoteReport>,
{
    let launch: RemoteLaunch = tokio::select! {
        biased;
        launch = read_frame(&mut stream, FRAME_SIZE_BYTES_MAX) => launch?,
        () = tokio::time::sleep(LAUNCH_READ_TIMEOUT) => return Ok(()),
    };
    let report = worker(launch).await;
    write_frame(&mut stream, &report, FRAME_SIZE_BYTES_MAX).await?;
    stream.shutdown().await?;
    Ok(())
}
