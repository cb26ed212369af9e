//! A simulated Anthropic API host: an HTTP/1.1 server for a turmoil host that answers
//! `POST /v1/messages` in the Messages API's wire shapes, failing the way its upstream
//! model fails.
//!
//! The production model client, [`AnthropicProvider`], then runs unchanged under
//! simulation: over a [`TurmoilApiConnector`](crate::world::TurmoilApiConnector) it
//! connects through turmoil's network (or in-memory pipes) to this host instead of the
//! real API, and meets rate limits, overload, dropped streams and silence on virtual
//! time. The faults are the fault engine's: the run's upstream model is the scripted
//! model behind the engine's model adapter
//! ([`FaultyPolicy`](crate::fault::FaultyPolicy)), and this host turns each upstream
//! error into what the API would send for it.
//!
//! [`AnthropicProvider`]: coord_runtime::world::anthropic::AnthropicProvider
//!
//! # What it answers
//!
//! The answers come from an upstream [`Model`] (a scripted
//! [`SimulatedModel`](crate::model::SimulatedModel), a replay, any test model). For
//! each request the host:
//!
//! 1. numbers it (from 1, across connections);
//! 2. routes it: only `POST /v1/messages` exists (`404 not_found_error`, `405`);
//! 3. checks its headers: `x-api-key` must be present (`401 authentication_error`),
//!    and `anthropic-version` too (`400 invalid_request_error`);
//! 4. parses its body as a [`ModelRequest`], plus the `stream` flag
//!    (`400 invalid_request_error` if either does not parse), after rewriting the
//!    body's JSON with the host's [`BodyAdapter`] if it has one
//!    ([`ApiHost::adapting_bodies`]);
//! 5. asks the upstream model and answers with its [`ModelResponse`]: a `message` JSON
//!    object, or an SSE stream (`transfer-encoding: chunked`, one event per chunk, or
//!    two, in the run's SSE framing, `framing.rs`) when the body says
//!    `"stream": true`. An upstream [`ModelError`] becomes what the API
//!    would do for it: 429 and 529 pass through, an API error keeps its status, a
//!    timeout is silence until the client gives up, a malformed response is a `200`
//!    whose body is cut off mid-message (a stream either drops with its connection,
//!    or ends with its last chunk before `message_stop` as a proxy that gave up
//!    would, by another bit of the hash that picks the error forms below), anything
//!    else is `500 api_error`. So a
//!    model that fails the way a policy scripts it fails the same way on the wire.
//!
//! Every error answer has the API's body,
//! `{"type":"error","error":{"type":…,"message":…}}`. A 429 says its wait in
//! `retry-after` (whole seconds) and `retry-after-ms`, as the API does, for half the
//! request numbers, and in one of the two alone (as a gateway in front of the API
//! may) for a quarter each, drawn from the seed as below: a client that reads
//! either header in the wrong unit waits a thousand times too long or too short.
//!
//! The real API also reports errors inside a stream it has begun: a `200`, then
//! `message_start`, and an `error` event carrying that body (an overload, most
//! often). A client must read such an event as the error it names, by its type
//! alone: there is no status to go by and no `retry-after`. When the upstream error
//! carries no retry header, the host answers a streaming request so for about half
//! the request numbers, which ones drawn from its seed
//! ([`ApiHost::drawing_forms_from`]), so a sweep meets both forms at every call.
//!
//! Connections are HTTP/1.1 keep-alive unless the client sends `connection: close`;
//! an answer the host cuts short also ends its connection.
//!
//! # What it records
//!
//! [`ApiHost::received`] lists a [`ReceivedRequest`] per request: its number, its
//! virtual arrival time, method, path, header *names* (never the key's value), the
//! parsed request and the status answered.
//!
//! # Time
//!
//! The host never waits on its own: an upstream's latency is the upstream's sleep,
//! which inside a turmoil host runs on the simulation's virtual clock.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use coord_runtime::world::{BoxFuture, Model, ModelError, ModelRequest, ModelResponse};
//! use coord_sim::world::ApiHost;
//!
//! #[derive(Debug)]
//! struct Limited;
//! impl Model for Limited {
//!     fn send(&self, _: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
//!         let retry_after = Some(Duration::from_secs(3));
//!         Box::pin(async move { Err(ModelError::RateLimited { retry_after }) })
//!     }
//! }
//!
//! let api = ApiHost::new(Arc::new(Limited));
//! let mut sim = turmoil::Builder::new().build();
//! let host = api.clone();
//! sim.host("api", move || host.clone().serve(80));
//! sim.client("client", async {
//!     use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!     let mut stream = turmoil::net::TcpStream::connect(("api", 80)).await?;
//!     let body = r#"{"model":"m","max_tokens":8,"messages":[]}"#;
//!     let request = format!(
//!         "POST /v1/messages HTTP/1.1\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\n\
//!          content-length: {}\r\nconnection: close\r\n\r\n{body}",
//!         body.len()
//!     );
//!     stream.write_all(request.as_bytes()).await?;
//!     let mut response = String::new();
//!     stream.read_to_string(&mut response).await?;
//!     assert!(response.starts_with("HTTP/1.1 429 Too Many Requests\r\n"));
//!     // The wait in whole seconds, in milliseconds, or both, as the seed draws.
//!     assert!(response.contains("retry-after: 3\r\n") || response.contains("retry-after-ms: 3000\r\n"));
//!     Ok(())
//! });
//! sim.run().unwrap();
//! assert_eq!(api.received()[0].status, Some(429));
//! ```

mod framing;
mod http;
mod over_http;
mod pipe;
mod wire;

pub use over_http::{over_http, over_turmoil_http, Streaming};
pub use pipe::PipeApiConnector;

use std::fmt::{self, Debug};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use coord_runtime::world::{
    ContentBlock, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason, Usage,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use self::framing::SseFraming;
use self::http::{Connection, Request};
use self::wire::{ErrorReply, RetryHeaders};
use crate::world::RemoteListener;

/// How far a cut answer (an upstream malformed response) gets: `message_start` and
/// one block event of a stream, or half of a JSON body.
const CUT_AFTER_EVENTS: usize = 2;

/// The only route the host serves.
pub const MESSAGES_PATH: &str = "/v1/messages";

/// How many [`ReceivedRequest`]s the host keeps; later requests are only counted.
pub const RECEIVED_LOG_RECORDS_MAX: usize = 1 << 16;

/// One request as the host received it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// Its number, counting every request the host read from 1.
    pub number: u64,
    /// Virtual time since the simulation started when it was read (zero outside one).
    pub received_at: Duration,
    /// The HTTP method.
    pub method: String,
    /// The path, without its query.
    pub path: String,
    /// The header names in arrival order, lowercased. Values are not kept: one of them
    /// is the API key.
    pub header_names: Vec<String>,
    /// The `anthropic-version` header's value.
    pub anthropic_version: Option<String>,
    /// Whether the body asked for a stream.
    pub streaming: bool,
    /// The body, if it parsed as a request.
    pub request: Option<ModelRequest>,
    /// The status the host answered with; `None` until it answers, and forever for a
    /// request the host answers with silence (an upstream timeout).
    pub status: Option<u16>,
}

#[derive(Debug, Default)]
struct HostState {
    requests_count: u64,
    received: Vec<ReceivedRequest>,
}

/// The simulated API host. Cheap to clone: clones share the upstream model and the
/// record of requests, so a test keeps one clone to inspect while
/// another serves (see the module docs).
#[derive(Clone)]
pub struct ApiHost {
    upstream: Arc<dyn Model>,
    state: Arc<Mutex<HostState>>,
    /// Rewrites each body's JSON before it is parsed: a client that speaks a richer
    /// dialect of the Messages API than [`ModelRequest`] (`coordsim run --target`).
    body_adapter: Option<BodyAdapter>,
    /// Decides, with each request's number, whether an error goes into a begun
    /// stream.
    form_seed: u64,
    /// How every stream is framed: the API's own framing, or one drawn from the
    /// seed.
    framing: SseFraming,
}

/// A rewrite of a request body's JSON, applied before the host parses it.
pub type BodyAdapter = Arc<dyn Fn(serde_json::Value) -> serde_json::Value + Send + Sync>;

impl Debug for ApiHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiHost")
            .field("upstream", &self.upstream)
            .field("requests_count", &self.requests_count())
            .finish_non_exhaustive()
    }
}

/// What one request gets.
enum Answer {
    Message {
        response: ModelResponse,
        streaming: bool,
    },
    Error(ErrorReply),
    /// Say nothing until the client gives up: an upstream timeout.
    Silence,
    /// A `200` stream that reports `reply` in an `error` event after
    /// `message_start`, as the API does for an error met once a stream has begun.
    StreamError {
        /// The request's model, for the `message_start` event.
        model: String,
        reply: ErrorReply,
    },
    /// Start a `200` answer and cut it off: an upstream malformed response.
    Cut {
        /// The request's model, for the cut message's `model` field.
        model: String,
        streaming: bool,
        /// How a cut stream ends.
        end: CutEnd,
    },
}

/// How a stream cut before `message_stop` ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutEnd {
    /// The connection drops with the body unfinished: no last chunk.
    Dropped,
    /// The body ends as a finished one does, with its last chunk, and the
    /// connection closes: a proxy that gave up on its upstream answers so.
    Ended,
}

/// Whether the connection carries on after an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    KeepAlive,
    Close,
}

impl ApiHost {
    /// A host answering from `upstream`.
    pub fn new(upstream: Arc<dyn Model>) -> Self {
        Self {
            upstream,
            state: Arc::default(),
            body_adapter: None,
            form_seed: 0,
            framing: SseFraming::API,
        }
    }

    /// The same host, choosing which streaming errors to report inside a begun
    /// stream from `seed` (a run's stream for the host) instead of from 0, and
    /// framing every stream in one framing drawn from `seed` (see
    /// `framing.rs`) instead of the API's own.
    pub fn drawing_forms_from(mut self, seed: u64) -> Self {
        self.form_seed = seed;
        // Request numbers start at 1, so number 0's bits are the run's own.
        self.framing = SseFraming::drawn(self.form_bits(0));
        self
    }

    /// Whether request `number`'s error, if it is a streaming request's error with
    /// no retry header, goes into a begun stream: one bit of a hash of the seed and
    /// the number.
    fn errs_in_stream(&self, number: u64) -> bool {
        self.form_bits(number) & 1 == 1
    }

    /// How request `number`'s stream ends if it is cut: the second bit of the same
    /// hash, so a sweep meets both ends at every cut.
    fn cut_end(&self, number: u64) -> CutEnd {
        if self.form_bits(number) & 2 == 2 {
            CutEnd::Ended
        } else {
            CutEnd::Dropped
        }
    }

    /// Which headers carry request `number`'s wait if it is rate limited: the third
    /// and fourth bits of the same hash, both headers for half the numbers and each
    /// alone for a quarter, so a sweep meets every form.
    fn retry_headers(&self, number: u64) -> RetryHeaders {
        match (self.form_bits(number) >> 2) & 3 {
            0 => RetryHeaders::Seconds,
            1 => RetryHeaders::Milliseconds,
            _ => RetryHeaders::Both,
        }
    }

    /// A hash of the seed and request `number`, whose bits choose its forms.
    fn form_bits(&self, number: u64) -> u64 {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.form_seed.to_le_bytes());
        key[8..].copy_from_slice(&number.to_le_bytes());
        // xxh3 mixes every input bit into every output bit; FNV-1a's low bit is the
        // inputs' parity.
        xxhash_rust::xxh3::xxh3_64(&key)
    }

    /// The same host, rewriting each request body's JSON with `adapter` before
    /// parsing it.
    pub fn adapting_bodies(mut self, adapter: BodyAdapter) -> Self {
        self.body_adapter = Some(adapter);
        self
    }

    /// How many requests the host has read.
    pub fn requests_count(&self) -> u64 {
        self.lock().requests_count
    }

    /// The requests read so far, in order (at most [`RECEIVED_LOG_RECORDS_MAX`]).
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.lock().received.clone()
    }

    /// Binds turmoil's `0.0.0.0:port` and serves until accepting fails: the body of a
    /// turmoil host, `sim.host("api", move || api.clone().serve(443))`. Works only
    /// inside a turmoil simulation.
    pub async fn serve(self, port: u16) -> turmoil::Result {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
        self.serve_listener(listener).await?;
        Ok(())
    }

    /// Serves connections from `listener` (turmoil's or tokio's) until accepting fails,
    /// each connection in its own task.
    pub async fn serve_listener<L: RemoteListener>(self, listener: L) -> io::Result<()> {
        loop {
            let stream = listener.accept_stream().await?;
            let host = self.clone();
            tokio::spawn(async move { host.serve_connection(stream).await });
        }
    }

    /// Answers requests on one connection until either side ends it.
    pub async fn serve_connection<S>(&self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut connection = Connection::new(stream);
        // Bounded by the client: every round consumes one request from the stream.
        loop {
            let request = match connection.read_request().await {
                Ok(request) => request,
                Err(error) => {
                    if let Some(status) = error.status() {
                        let reply = ErrorReply::for_status(status, error.to_string());
                        // The connection closes either way; a failed write changes nothing.
                        let _ = write_error(connection.stream(), &reply, Next::Close).await;
                    }
                    break;
                }
            };
            if self.exchange(&mut connection, request).await == Next::Close {
                break;
            }
        }
        // A failed shutdown means the client already went: the connection is over.
        let _ = connection.stream().shutdown().await;
    }

    /// Handles one request on `connection`.
    async fn exchange<S>(&self, connection: &mut Connection<S>, request: Request) -> Next
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let body = parse_body(&request.body, self.body_adapter.as_ref());
        let number = self.record(&request, body.as_ref().ok());
        let answer = self.answer(&request, body, number).await;
        let status = match &answer {
            Answer::Message { .. } | Answer::Cut { .. } | Answer::StreamError { .. } => 200,
            Answer::Error(reply) => reply.status,
            Answer::Silence => {
                connection.drain_until_closed().await;
                return Next::Close;
            }
        };
        self.record_status(number, status);
        let next = if request.closes {
            Next::Close
        } else {
            Next::KeepAlive
        };
        let stream = connection.stream();
        let written = match answer {
            Answer::Error(reply) => write_error(stream, &reply, next).await,
            Answer::Message {
                response,
                streaming: false,
            } => {
                let body = wire::message_json(&response);
                write_json(stream, 200, &[], &body, None, next).await
            }
            Answer::Message {
                response,
                streaming: true,
            } => write_stream(stream, self.framing, &response, None, next).await,
            Answer::Cut {
                model,
                streaming,
                end,
            } => {
                let response = cut_message(model);
                // The body stops after message_start and one block event (or halfway
                // through the JSON), and the connection closes with it.
                if streaming {
                    let cut = Some((CUT_AFTER_EVENTS, end));
                    write_stream(stream, self.framing, &response, cut, next).await
                } else {
                    let cut = Some(CUT_AFTER_EVENTS);
                    write_json(stream, 200, &[], &wire::message_json(&response), cut, next).await
                }
            }
            Answer::StreamError { model, reply } => {
                write_stream_error(stream, self.framing, model, &reply, next).await
            }
            Answer::Silence => unreachable!("silence returned before writing"),
        };
        written.unwrap_or(Next::Close)
    }

    /// Numbers `request` (whose body parsed as `body`, if it did) and appends it to
    /// the record.
    fn record(&self, request: &Request, body: Option<&(ModelRequest, bool)>) -> u64 {
        let mut state = self.lock();
        state.requests_count += 1;
        let number = state.requests_count;
        if state.received.len() < RECEIVED_LOG_RECORDS_MAX {
            state.received.push(ReceivedRequest {
                number,
                received_at: turmoil::sim_elapsed().unwrap_or_default(),
                method: request.method.clone(),
                path: request.path.clone(),
                header_names: request
                    .headers
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect(),
                anthropic_version: request.header("anthropic-version").map(str::to_owned),
                streaming: body.is_some_and(|(_, streaming)| *streaming),
                request: body.map(|(request, _)| request.clone()),
                status: None,
            });
        }
        number
    }

    /// Notes the status request `number` was answered with.
    fn record_status(&self, number: u64, status: u16) {
        let mut state = self.lock();
        // Records are in number order from 1, so request n sits at index n - 1.
        let index = usize::try_from(number - 1).unwrap_or(usize::MAX);
        if let Some(record) = state.received.get_mut(index) {
            assert_eq!(record.number, number, "records are kept in number order");
            record.status = Some(status);
        }
    }

    /// Steps 2 to 5 of the module docs: route, headers, body (as [`parse_body`] read
    /// it), upstream.
    async fn answer(
        &self,
        request: &Request,
        body: Result<(ModelRequest, bool), String>,
        number: u64,
    ) -> Answer {
        if request.path != MESSAGES_PATH {
            return Answer::Error(ErrorReply::new(
                404,
                "not_found_error",
                format!("no route {} {}", request.method, request.path),
            ));
        }
        if request.method != "POST" {
            return Answer::Error(ErrorReply::new(
                405,
                "invalid_request_error",
                format!("method {} not allowed on {MESSAGES_PATH}", request.method),
            ));
        }
        if request.header("x-api-key").is_none_or(str::is_empty) {
            return Answer::Error(ErrorReply::new(
                401,
                "authentication_error",
                "x-api-key header is required",
            ));
        }
        if request
            .header("anthropic-version")
            .is_none_or(str::is_empty)
        {
            return Answer::Error(ErrorReply::invalid_request(
                "anthropic-version: header is required",
            ));
        }
        let (model_request, streaming) = match body {
            Ok(parsed) => parsed,
            Err(message) => return Answer::Error(ErrorReply::invalid_request(message)),
        };
        let model = model_request.model.clone();
        match self.upstream.send(Arc::new(model_request)).await {
            Ok(response) => match wire::check_sendable(&response) {
                Ok(()) => Answer::Message {
                    response,
                    streaming,
                },
                Err(error) => Answer::Error(ErrorReply::new(
                    500,
                    "api_error",
                    format!("upstream model's response is not sendable: {error}"),
                )),
            },
            Err(ModelError::Timeout { .. }) => Answer::Silence,
            Err(ModelError::Malformed { .. }) => Answer::Cut {
                model,
                streaming,
                end: self.cut_end(number),
            },
            Err(error) => {
                let reply = ErrorReply {
                    retry_headers: self.retry_headers(number),
                    ..ErrorReply::from_upstream(&error)
                };
                if streaming && reply.retry_after.is_none() && self.errs_in_stream(number) {
                    Answer::StreamError { model, reply }
                } else {
                    Answer::Error(reply)
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HostState> {
        // Held only for bookkeeping, never across an await: poisoning means a bug.
        self.state.lock().expect("API host state poisoned")
    }
}

/// The message an answer cut short would have carried; the client never reads it
/// whole.
fn cut_message(model: String) -> ModelResponse {
    ModelResponse {
        id: "msg_cut".to_owned(),
        model,
        role: Role::Assistant,
        content: vec![ContentBlock::text("this answer is cut off before it ends")],
        stop_reason: StopReason::EndTurn,
        usage: Usage::default(),
    }
}

/// The body as a request and its `stream` flag, or the message of a 400.
fn parse_body(body: &[u8], adapter: Option<&BodyAdapter>) -> Result<(ModelRequest, bool), String> {
    let mut value: serde_json::Value =
        serde_json::from_slice(body).map_err(|error| format!("body is not JSON: {error}"))?;
    if let Some(adapter) = adapter {
        value = adapter(value);
    }
    let streaming = match value.get("stream") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(streaming)) => *streaming,
        Some(other) => return Err(format!("stream: expected a boolean, got {other}")),
    };
    let request = serde_json::from_value(value)
        .map_err(|error| format!("body is not a messages request: {error}"))?;
    Ok((request, streaming))
}

/// The headers every answer has.
fn common_headers(next: Next) -> Vec<(&'static str, String)> {
    let connection = match next {
        Next::KeepAlive => "keep-alive",
        Next::Close => "close",
    };
    vec![("connection", connection.to_owned())]
}

/// Writes an error answer.
async fn write_error<S: AsyncWrite + Unpin>(
    stream: &mut S,
    reply: &ErrorReply,
    next: Next,
) -> io::Result<Next> {
    let extra = reply.retry_headers();
    write_json(stream, reply.status, &extra, &reply.body(), None, next).await
}

/// Writes a `200` stream that begins a message and then reports `reply` in an
/// `error` event, and ends.
async fn write_stream_error<S: AsyncWrite + Unpin>(
    stream: &mut S,
    framing: SseFraming,
    model: String,
    reply: &ErrorReply,
    next: Next,
) -> io::Result<Next> {
    let mut headers = vec![
        (
            "content-type",
            "text/event-stream; charset=utf-8".to_owned(),
        ),
        ("cache-control", "no-cache".to_owned()),
        ("transfer-encoding", "chunked".to_owned()),
    ];
    headers.extend(common_headers(next));
    http::send(stream, &http::response_head(200, &headers)).await?;
    // `message_start` and `ping` of an empty message, then the error.
    let mut events = wire::sse_events(&cut_message(model));
    events.truncate(2);
    events.push(reply.sse_event());
    for chunk in framing.chunks(&events) {
        http::send(stream, &http::chunk(&chunk)).await?;
    }
    http::send(stream, http::LAST_CHUNK).await?;
    Ok(next)
}

/// Writes a JSON answer; with `cut_after_events`, only the first half of its body
/// (under the full `content-length`) before the connection drops.
async fn write_json<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    extra_headers: &[(&'static str, String)],
    body: &[u8],
    cut_after_events: Option<usize>,
    next: Next,
) -> io::Result<Next> {
    let (sent_body, next) = match cut_after_events {
        Some(_) => (&body[..body.len() / 2], Next::Close),
        None => (body, next),
    };
    let content_length = body.len();
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("content-length", content_length.to_string()),
    ];
    headers.extend(extra_headers.iter().cloned());
    headers.extend(common_headers(next));
    let mut bytes = http::response_head(status, &headers);
    bytes.extend_from_slice(sent_body);
    http::send(stream, &bytes).await?;
    Ok(next)
}

/// Writes a streaming answer in `framing`; with `cut`, only the first that many of
/// the API's events before the connection closes, ended as the cut says.
async fn write_stream<S: AsyncWrite + Unpin>(
    stream: &mut S,
    framing: SseFraming,
    response: &ModelResponse,
    cut: Option<(usize, CutEnd)>,
    next: Next,
) -> io::Result<Next> {
    let mut events = wire::sse_events(response);
    let mut headers = vec![
        (
            "content-type",
            "text/event-stream; charset=utf-8".to_owned(),
        ),
        ("cache-control", "no-cache".to_owned()),
        ("transfer-encoding", "chunked".to_owned()),
    ];
    let next = if cut.is_some() { Next::Close } else { next };
    headers.extend(common_headers(next));
    http::send(stream, &http::response_head(200, &headers)).await?;
    if let Some((events_max, _)) = cut {
        events.truncate(events_max);
    }
    for chunk in framing.chunks(&events) {
        http::send(stream, &http::chunk(&chunk)).await?;
    }
    if cut.is_none_or(|(_, end)| end == CutEnd::Ended) {
        http::send(stream, http::LAST_CHUNK).await?;
    }
    Ok(next)
}
