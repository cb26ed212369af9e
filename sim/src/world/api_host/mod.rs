//! A simulated Anthropic API host: an HTTP/1.1 server for a turmoil host that answers
//! `POST /v1/messages` in the Messages API's wire shapes, with injected faults.
//!
//! The production model client, [`AnthropicProvider`], then runs unchanged under
//! simulation: over a [`TurmoilApiConnector`](crate::world::TurmoilApiConnector) it
//! connects through turmoil's network to this host instead of the real API, and meets
//! rate limits, overload, dropped streams, broken JSON, slowness and silence on
//! virtual time.
//!
//! [`AnthropicProvider`]: coord_runtime::world::anthropic::AnthropicProvider
//!
//! # What it answers
//!
//! The answers come from an upstream [`Model`] (a scripted
//! [`SimulatedModel`](crate::model::SimulatedModel), a replay, any test model). For
//! each request the host:
//!
//! 1. numbers it (from 1, across connections) and asks its [`ApiFaultPlan`];
//!    [`ApiFault::Hang`], [`ApiFault::Latency`], [`ApiFault::RateLimited`] and
//!    [`ApiFault::Overloaded`] act here, before the request is looked at, as a gateway
//!    in front of the API would;
//! 2. routes it: only `POST /v1/messages` exists (`404 not_found_error`, `405`);
//! 3. checks its headers: `x-api-key` must be present (`401 authentication_error`),
//!    and `anthropic-version` too (`400 invalid_request_error`);
//! 4. parses its body as a [`ModelRequest`], plus the `stream` flag
//!    (`400 invalid_request_error` if either does not parse);
//! 5. asks the upstream model and answers with its [`ModelResponse`]: a `message` JSON
//!    object, or an SSE stream (`transfer-encoding: chunked`, one event per chunk) when
//!    the body says `"stream": true`. An upstream [`ModelError`] becomes what the API
//!    would do for it: 429 and 529 pass through, an API error keeps its status, a
//!    timeout is silence until the client gives up, a malformed response is a `200`
//!    whose body is cut off mid-message, anything else is `500 api_error`. So a
//!    model that fails the way a policy scripts it fails the same way on the wire.
//!
//! [`ApiFault::DisconnectMidStream`] and [`ApiFault::TruncatedJson`] then shape
//! whatever answer step 2 to 5 produced. Every error answer has the API's body,
//! `{"type":"error","error":{"type":…,"message":…}}`.
//!
//! Connections are HTTP/1.1 keep-alive unless the client sends `connection: close`;
//! an answer the host cuts short also ends its connection.
//!
//! # What it records
//!
//! [`ApiHost::received`] lists a [`ReceivedRequest`] per request: its number, its
//! virtual arrival time, method, path, header *names* (never the key's value), the
//! parsed request, the fault and the status answered.
//!
//! # Time
//!
//! Waits (latency faults) are `tokio::time::sleep`, which inside a turmoil host runs on
//! the simulation's virtual clock.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use coord_runtime::world::{BoxFuture, Model, ModelError, ModelRequest, ModelResponse};
//! use coord_sim::world::{ApiFault, ApiFaultPlan, ApiFaultRule, ApiHost, Streams};
//!
//! #[derive(Debug)]
//! struct Silent;
//! impl Model for Silent {
//!     fn send(&self, _: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
//!         Box::pin(async { Err(ModelError::Overloaded) })
//!     }
//! }
//!
//! let faults = ApiFaultPlan::new(&Streams::new(7))
//!     .with_rule(ApiFaultRule::nth(1, ApiFault::RateLimited { retry_after: Duration::from_secs(3) }))
//!     .unwrap();
//! let api = ApiHost::new(Arc::new(Silent)).with_faults(faults);
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
//!     assert!(response.contains("retry-after: 3\r\n"));
//!     Ok(())
//! });
//! sim.run().unwrap();
//! assert_eq!(api.received()[0].fault, Some(ApiFault::RateLimited { retry_after: Duration::from_secs(3) }));
//! ```

mod fault;
mod http;
mod over_http;
mod pipe;
mod wire;

pub use fault::{
    ApiFault, ApiFaultPlan, ApiFaultRule, ApiFaultRuleError, ApiFaultTrigger, API_FAULT_STREAM,
};
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

use self::http::{Connection, Request};
use self::wire::ErrorReply;
use crate::world::RemoteListener;

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
    /// The fault the plan drew for it.
    pub fault: Option<ApiFault>,
    /// The status the host answered with; `None` until it answers, and forever for a
    /// [`ApiFault::Hang`].
    pub status: Option<u16>,
}

#[derive(Debug, Default)]
struct HostState {
    faults: ApiFaultPlan,
    requests_count: u64,
    received: Vec<ReceivedRequest>,
}

/// The simulated API host. Cheap to clone: clones share the upstream model, the fault
/// plan and the record of requests, so a test keeps one clone to inspect while
/// another serves (see the module docs).
#[derive(Clone)]
pub struct ApiHost {
    upstream: Arc<dyn Model>,
    state: Arc<Mutex<HostState>>,
}

impl Debug for ApiHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiHost")
            .field("upstream", &self.upstream)
            .field("requests_count", &self.requests_count())
            .finish_non_exhaustive()
    }
}

/// What one request gets, before fault shaping.
enum Answer {
    Message {
        response: ModelResponse,
        streaming: bool,
    },
    Error(ErrorReply),
    /// Say nothing until the client gives up: an upstream timeout.
    Silence,
    /// Start a `200` answer and cut it off: an upstream malformed response.
    Cut {
        /// The request's model, for the cut message's `model` field.
        model: String,
        streaming: bool,
    },
}

/// Whether the connection carries on after an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    KeepAlive,
    Close,
}

impl ApiHost {
    /// A host answering from `upstream`, without faults.
    pub fn new(upstream: Arc<dyn Model>) -> Self {
        Self {
            upstream,
            state: Arc::default(),
        }
    }

    /// Replaces the fault plan. Request numbering carries on.
    pub fn with_faults(self, faults: ApiFaultPlan) -> Self {
        self.lock().faults = faults;
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
                        let _ = write_error(connection.stream(), &reply, None, Next::Close).await;
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
        let body = parse_body(&request.body);
        let (number, fault) = self.record(&request, body.as_ref().ok());
        let answer = match fault {
            Some(ApiFault::Hang) => {
                connection.drain_until_closed().await;
                return Next::Close;
            }
            Some(ApiFault::Latency { delay }) => {
                tokio::time::sleep(delay).await;
                self.answer(&request, body).await
            }
            Some(ApiFault::RateLimited { retry_after }) => {
                Answer::Error(ErrorReply::rate_limited(Some(retry_after)))
            }
            Some(ApiFault::Overloaded) => Answer::Error(ErrorReply::overloaded()),
            _ => self.answer(&request, body).await,
        };
        let status = match &answer {
            Answer::Message { .. } | Answer::Cut { .. } => 200,
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
            Answer::Error(reply) => write_error(stream, &reply, fault, next).await,
            Answer::Message {
                response,
                streaming: false,
            } => {
                let body = wire::message_json(&response);
                write_json(stream, 200, &[], &body, fault, next).await
            }
            Answer::Message {
                response,
                streaming: true,
            } => write_stream(stream, &response, fault, next).await,
            Answer::Cut { model, streaming } => {
                let response = cut_message(model);
                // The body stops after message_start and one block event (or halfway
                // through the JSON), and the connection drops with it.
                let cut = Some(ApiFault::DisconnectMidStream { after_events: 2 });
                if streaming {
                    write_stream(stream, &response, cut, next).await
                } else {
                    write_json(stream, 200, &[], &wire::message_json(&response), cut, next).await
                }
            }
            Answer::Silence => unreachable!("silence returned before writing"),
        };
        written.unwrap_or(Next::Close)
    }

    /// Numbers `request` (whose body parsed as `body`, if it did), draws its fault,
    /// and appends it to the record.
    fn record(
        &self,
        request: &Request,
        body: Option<&(ModelRequest, bool)>,
    ) -> (u64, Option<ApiFault>) {
        let mut state = self.lock();
        state.requests_count += 1;
        let number = state.requests_count;
        let fault = state.faults.decide(number);
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
                fault,
                status: None,
            });
        }
        (number, fault)
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
            Err(ModelError::Malformed { .. }) => Answer::Cut { model, streaming },
            Err(error) => Answer::Error(ErrorReply::from_upstream(&error)),
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
fn parse_body(body: &[u8]) -> Result<(ModelRequest, bool), String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|error| format!("body is not JSON: {error}"))?;
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

/// Writes an error answer, shaped by `fault`.
async fn write_error<S: AsyncWrite + Unpin>(
    stream: &mut S,
    reply: &ErrorReply,
    fault: Option<ApiFault>,
    next: Next,
) -> io::Result<Next> {
    let extra = reply.retry_headers();
    write_json(stream, reply.status, &extra, &reply.body(), fault, next).await
}

/// Writes a JSON answer, shaped by `fault`.
async fn write_json<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    extra_headers: &[(&'static str, String)],
    body: &[u8],
    fault: Option<ApiFault>,
    next: Next,
) -> io::Result<Next> {
    let half = &body[..body.len() / 2];
    let (sent_body, content_length, next) = match fault {
        Some(ApiFault::DisconnectMidStream { .. }) => (half, body.len(), Next::Close),
        Some(ApiFault::TruncatedJson) => (half, half.len(), next),
        _ => (body, body.len(), next),
    };
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

/// Writes a streaming answer, one SSE event per chunk, shaped by `fault`.
async fn write_stream<S: AsyncWrite + Unpin>(
    stream: &mut S,
    response: &ModelResponse,
    fault: Option<ApiFault>,
    next: Next,
) -> io::Result<Next> {
    let mut events = wire::sse_events(response);
    let events_max = match fault {
        Some(ApiFault::DisconnectMidStream { after_events }) => Some(after_events),
        _ => None,
    };
    if fault == Some(ApiFault::TruncatedJson) {
        let start = &mut events[0];
        assert_eq!(
            start.name, "message_start",
            "a stream opens with message_start"
        );
        start.data.truncate(start.data.len() / 2);
    }
    let mut headers = vec![
        (
            "content-type",
            "text/event-stream; charset=utf-8".to_owned(),
        ),
        ("cache-control", "no-cache".to_owned()),
        ("transfer-encoding", "chunked".to_owned()),
    ];
    let next = if events_max.is_some() {
        Next::Close
    } else {
        next
    };
    headers.extend(common_headers(next));
    http::send(stream, &http::response_head(200, &headers)).await?;
    for (index, event) in events.iter().enumerate() {
        if events_max.is_some_and(|events_max| index >= events_max) {
            // The connection drops with the body unfinished: no last chunk.
            return Ok(Next::Close);
        }
        http::send(stream, &http::chunk(&event.render())).await?;
    }
    if events_max.is_some() {
        return Ok(Next::Close);
    }
    http::send(stream, http::LAST_CHUNK).await?;
    Ok(next)
}
