//! The Anthropic provider against a scripted loopback HTTP server.
//!
//! Method: each test starts a raw TCP server on 127.0.0.1 that records every request
//! (head and body) and answers each connection with the next scripted reply, written
//! byte for byte, so faults (cut streams, truncated bodies, silence) are exact. The
//! provider runs with the real `SystemClock` and small timeouts, and every call is
//! also bounded by an outer timeout so a regression fails instead of hanging.
//!
//! The provider makes one attempt per call; the retries are the session's. The
//! retry tests therefore run a session over the provider and count the attempts the
//! server saw: never more than `model_retries_max + 1` for one call.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::ipc::SessionLayout;
use coord_runtime::profile::Profile;
use coord_runtime::session::{Effects, Session, SessionConfig, SessionError};
use coord_runtime::world::anthropic::{
    AnthropicProvider, ApiKey, BaseUrlDefect, Endpoint, ProviderConfig, ProviderError, Scheme,
    SseEvent, SseParser, TcpConnector, ANTHROPIC_VERSION,
};
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, Clock, MemoryJournal, RealDisk, SystemClock, ToolCall, ToolContext,
    ToolOutput, Tools,
};
use coord_runtime::world::{
    CacheControl, CacheTtl, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse,
    Role, StopReason, SystemBlock, ThinkingConfig, ToolDefinition, Usage,
};
use coord_runtime::World;
use proptest::prelude::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const KEY: &str = "sk-ant-test-0123456789abcdef";

/// The outer bound on any one provider call in these tests.
const CALL_BOUND: Duration = Duration::from_secs(30);

/// How long the server waits on a client before giving up on the connection.
const SERVER_READ_BOUND: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// The loopback server

/// What the server does with one connection once it has read the request.
#[derive(Debug, Clone)]
enum Reply {
    /// Writes these bytes, then closes.
    Send(Vec<u8>),
    /// Never answers; holds the connection until the client closes it.
    Silent,
}

/// A request as the server read it.
#[derive(Debug, Clone)]
struct SeenRequest {
    method: String,
    path: String,
    /// Header names lowercased.
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    accept_task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl Server {
    /// Answers the n-th connection with `replies[n]`, and every later one with the last.
    async fn start(replies: Vec<Reply>) -> Server {
        assert!(!replies.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let accept_seen = Arc::clone(&seen);
        let accept_task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let index = connections.fetch_add(1, Ordering::SeqCst);
                let reply = replies[index.min(replies.len() - 1)].clone();
                tokio::spawn(handle(socket, reply, Arc::clone(&accept_seen)));
            }
        });
        Server {
            addr,
            seen,
            accept_task,
        }
    }

    fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::parse(&format!("http://{}", self.addr)).unwrap()
    }
}

async fn handle(mut socket: TcpStream, reply: Reply, seen: Arc<Mutex<Vec<SeenRequest>>>) {
    let Ok(Some(request)) =
        tokio::time::timeout(SERVER_READ_BOUND, read_request(&mut socket)).await
    else {
        return;
    };
    seen.lock().unwrap().push(request);
    match reply {
        Reply::Send(bytes) => {
            // The client may already have given up; a failed write is its business.
            let _ = socket.write_all(&bytes).await;
            let _ = socket.shutdown().await;
        }
        Reply::Silent => {
            let mut sink = [0u8; 1024];
            let _ = tokio::time::timeout(SERVER_READ_BOUND, async {
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<SeenRequest> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(position) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break position;
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(SeenRequest {
        method,
        path,
        headers,
        body,
    })
}

// ---------------------------------------------------------------------------
// Scripted responses

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        429 => "Too Many Requests",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A response with a `content-length` body.
fn http_response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn json_response(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    Reply::Send(http_response(status, &all, body.as_bytes()))
}

fn api_error(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

/// An event stream in chunked encoding, cut into 7-byte chunks so that events and
/// even line endings straddle chunk boundaries. `terminate` writes the final chunk.
fn sse_chunked(stream: &str, terminate: bool) -> Vec<u8> {
    let mut bytes = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                      cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        .to_vec();
    for chunk in stream.as_bytes().chunks(7) {
        bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        bytes.extend_from_slice(chunk);
        bytes.extend_from_slice(b"\r\n");
    }
    if terminate {
        bytes.extend_from_slice(b"0\r\n\r\n");
    }
    bytes
}

/// An event stream delimited by closing the connection (no length, not chunked).
fn sse_close_delimited(stream: &str) -> Vec<u8> {
    let mut bytes =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    bytes.extend_from_slice(stream.as_bytes());
    bytes
}

fn sse(events: &[(&str, serde_json::Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

// ---------------------------------------------------------------------------
// Fixtures

fn request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 1024,
        tools: vec![ToolDefinition {
            name: "Read".into(),
            description: "Reads a file".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            })
            .into(),
            cache_control: None,
        }]
        .into(),
        system: vec![SystemBlock {
            cache_control: Some(CacheControl::ephemeral(Some(CacheTtl::OneHour))),
            ..SystemBlock::text("You are a worker.")
        }]
        .into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::text("Read src/lib.rs")],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "toolu_01".into(),
                    name: "Read".into(),
                    input: json!({"path": "src/lib.rs"}).into(),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "toolu_01".into(),
                    content: "fn main() {}".into(),
                    is_error: false,
                    cache_control: Some(CacheControl::ephemeral(None)),
                }],
            },
        ],
        thinking: Some(ThinkingConfig::Enabled {
            budget_tokens: 2048,
        }),
    }
}

fn message_json() -> String {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "The file is short.", "signature": "sig"},
            {"type": "text", "text": "It is an empty main."}
        ],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100},
            "output_tokens": 8,
            "service_tier": "standard"
        }
    })
    .to_string()
}

fn expected_message() -> ModelResponse {
    ModelResponse {
        id: "msg_01".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content: vec![ContentBlock::text("It is an empty main.")],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 12,
            cache_creation_input_tokens: 100,
            cache_read_input_tokens: 0,
            cache_creation: coord_runtime::world::CacheCreation {
                ephemeral_5m_input_tokens: 0,
                ephemeral_1h_input_tokens: 100,
            },
            output_tokens: 8,
        },
    }
}

/// A full stream: a thinking block (dropped), text in two deltas, and a tool call
/// whose input arrives in four `input_json_delta`s, with pings and a comment.
fn tool_stream() -> String {
    let mut stream = String::from(": stream opened\n\n");
    stream.push_str(&sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_02", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 300, "output_tokens": 1}
            }}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "thinking_delta", "thinking": "Read it first."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "signature_delta", "signature": "EqQB"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": "Let me "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": "look — ünïcode."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "toolu_02", "name": "Read",
                                     "input": {}}}),
        ),
    ]));
    for partial in ["", "{\"path\": \"src/", "lib.rs\", \"lim", "it\": 20}"] {
        stream.push_str(&sse(&[(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
                   "delta": {"type": "input_json_delta", "partial_json": partial}}),
        )]));
    }
    stream.push_str(&sse(&[
        ("ping", json!({"type": "ping"})),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": 42}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]));
    stream
}

fn expected_tool_response() -> ModelResponse {
    ModelResponse {
        id: "msg_02".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Let me look — ünïcode."),
            ContentBlock::ToolUse {
                id: "toolu_02".into(),
                name: "Read".into(),
                input: json!({"path": "src/lib.rs", "limit": 20}).into(),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 20,
            cache_read_input_tokens: 300,
            output_tokens: 42,
            ..Usage::default()
        },
    }
}

/// [`tool_stream`] cut in the middle of an event inside the tool call.
fn cut_stream() -> String {
    let stream = tool_stream();
    let cut = stream.find("lib.rs").expect("the stream has a tool input");
    stream[..cut].to_owned()
}

/// The whole events of [`tool_stream`] before the tool call's second input delta.
fn events_before_tool_input() -> String {
    let cut = cut_stream();
    let boundary = cut.rfind("\n\n").expect("whole events precede the cut");
    cut[..boundary + 2].to_owned()
}

fn config(server: &Server, streaming: bool) -> ProviderConfig {
    let mut config = ProviderConfig::new(server.endpoint(), ApiKey::new(KEY));
    config.streaming = streaming;
    config.request_timeout = Duration::from_secs(2);
    config
}

fn provider(config: ProviderConfig) -> AnthropicProvider {
    AnthropicProvider::new(config, Arc::new(TcpConnector), Arc::new(SystemClock::new()))
}

async fn send(provider: &AnthropicProvider) -> Result<ModelResponse, ModelError> {
    tokio::time::timeout(CALL_BOUND, provider.send(Arc::new(request())))
        .await
        .expect("the provider call is bounded by its own timeouts")
}

// ---------------------------------------------------------------------------
// Success paths

#[tokio::test]
async fn non_streaming_success_sends_the_request_as_json() {
    let server = Server::start(vec![json_response(200, &[], &message_json())]).await;
    let response = send(&provider(config(&server, false))).await;
    assert_eq!(response, Ok(expected_message()));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let seen = &requests[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], KEY);
    assert_eq!(seen.headers["anthropic-version"], ANTHROPIC_VERSION);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(seen.headers["host"], server.addr.to_string());
    let sent: ModelRequest = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(sent, request());
    insta::assert_snapshot!(
        "non_streaming_request_body",
        String::from_utf8(seen.body.clone()).unwrap()
    );
}

#[tokio::test]
async fn streaming_success_assembles_text_and_tool_input() {
    let server = Server::start(vec![Reply::Send(sse_chunked(&tool_stream(), true))]).await;
    let response = send(&provider(config(&server, true))).await;
    assert_eq!(response, Ok(expected_tool_response()));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = String::from_utf8(requests[0].body.clone()).unwrap();
    assert!(body.ends_with(r#","stream":true}"#), "{body}");
    let sent: ModelRequest = serde_json::from_str(&body).unwrap();
    assert_eq!(sent, request());
}

#[tokio::test]
async fn streaming_success_with_crlf_lines_and_close_delimited_body() {
    let stream = tool_stream().replace('\n', "\r\n");
    let server = Server::start(vec![Reply::Send(sse_close_delimited(&stream))]).await;
    let response = send(&provider(config(&server, true))).await;
    assert_eq!(response, Ok(expected_tool_response()));
}

// ---------------------------------------------------------------------------
// Retries: one layer, the session's

/// The session's retry budget in these tests.
const MODEL_RETRIES_MAX: u32 = 3;

/// A coordinator session whose model is `provider`, retrying transient errors up
/// to [`MODEL_RETRIES_MAX`] times after 10 ms, 20 ms, 40 ms.
fn session_over(provider: AnthropicProvider, dir: &tempfile::TempDir) -> Session {
    let world = World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(7)),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    };
    let effects = Effects {
        model: Arc::new(provider),
        tools: Arc::new(NoTools),
        vcs: None,
        remote: None,
        shell: None,
    };
    let mut config = SessionConfig::new(Profile::Hardened);
    config.model = request().model;
    config.model_retries_max = MODEL_RETRIES_MAX;
    config.model_retry_backoff = Duration::from_millis(10);
    Session::create(world, effects, config, SessionLayout::new(dir.path())).unwrap()
}

/// No tool is ever called: the scripted replies hold none.
#[derive(Debug)]
struct NoTools;

impl Tools for NoTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        panic!("no tool call expected, got {}", call.name)
    }
}

/// Runs the coordinator once over `server` and returns its final text or error.
async fn coordinator_turn(server: &Server) -> Result<String, SessionError> {
    let dir = tempfile::tempdir().unwrap();
    let session = session_over(provider(config(server, false)), &dir);
    let report = tokio::time::timeout(CALL_BOUND, session.run_coordinator("lead", vec![]))
        .await
        .expect("the session's retries are bounded");
    report.map(|report| report.final_text)
}

#[tokio::test]
async fn the_provider_makes_one_attempt_per_call() {
    // Goal: the provider does not retry on its own, so its attempts never multiply
    // the session's. Method: an endless 529; one provider call; count requests.
    let server = Server::start(vec![json_response(
        529,
        &[],
        &api_error("overloaded_error", "Overloaded"),
    )])
    .await;
    let response = send(&provider(config(&server, false))).await;
    assert_eq!(response, Err(ModelError::Overloaded));
    assert!(response.unwrap_err().is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limited_carries_retry_after_and_the_session_waits_it_out() {
    // Goal: a 429's retry-after reaches the session's loop, which waits it out on
    // the world clock, far above its own 10 ms backoff. Method: a 429 with
    // retry-after 1 to the provider alone, then 429 and success under a session.
    let limited = json_response(
        429,
        &[("retry-after", "1")],
        &api_error("rate_limit_error", "slow down"),
    );
    let server = Server::start(vec![limited.clone()]).await;
    let response = send(&provider(config(&server, false))).await;
    assert_eq!(
        response,
        Err(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(1))
        })
    );
    assert_eq!(server.requests().len(), 1);

    let server = Server::start(vec![limited, json_response(200, &[], &message_json())]).await;
    let clock = SystemClock::new();
    let started = clock.monotonic();
    let text = coordinator_turn(&server).await.unwrap();
    assert_eq!(text, "It is an empty main.");
    assert_eq!(server.requests().len(), 2);
    assert!(clock.monotonic() - started >= Duration::from_secs(1));
}

#[tokio::test]
async fn overloaded_twice_then_success_under_the_session() {
    let overloaded = json_response(529, &[], &api_error("overloaded_error", "Overloaded"));
    let server = Server::start(vec![
        overloaded.clone(),
        overloaded,
        json_response(200, &[], &message_json()),
    ])
    .await;
    assert_eq!(
        coordinator_turn(&server).await.unwrap(),
        "It is an empty main."
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_transient_error_sequence_costs_at_most_the_session_budget_plus_one() {
    // Goal: with one retry layer, one call meeting only transient errors makes
    // `model_retries_max + 1` attempts in total, not the product of two budgets.
    // Method: endless 529, 503 and a cut stream, each under a session; count the
    // requests the server saw.
    let cut = Reply::Send(sse_chunked(&cut_stream(), false));
    let page = Reply::Send(http_response(
        503,
        &[("content-type", "text/html")],
        b"<html>upstream unavailable</html>",
    ));
    let overloaded = json_response(529, &[], &api_error("overloaded_error", "Overloaded"));
    for (reply, streaming) in [(overloaded, false), (page, false), (cut, true)] {
        let server = Server::start(vec![reply]).await;
        let dir = tempfile::tempdir().unwrap();
        let session = session_over(provider(config(&server, streaming)), &dir);
        let outcome = tokio::time::timeout(CALL_BOUND, session.run_coordinator("lead", vec![]))
            .await
            .expect("the session's retries are bounded");
        assert!(outcome.is_err(), "{outcome:?}");
        assert_eq!(
            server.requests().len(),
            MODEL_RETRIES_MAX as usize + 1,
            "{outcome:?}"
        );
    }
}

#[tokio::test]
async fn server_error_with_html_body_is_reported_as_transient() {
    let page = Reply::Send(http_response(
        503,
        &[("content-type", "text/html")],
        b"<html>upstream unavailable</html>",
    ));
    let server = Server::start(vec![page]).await;
    let response = send(&provider(config(&server, false))).await;
    assert_eq!(
        response,
        Err(ModelError::Api {
            status: 503,
            message: "Service Unavailable: <html>upstream unavailable</html>".into()
        })
    );
    assert!(response.unwrap_err().is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn overloaded_error_event_mid_stream_is_retried_by_the_session() {
    let mut failing = events_before_tool_input();
    failing.push_str(&sse(&[(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )]));
    let server = Server::start(vec![
        Reply::Send(sse_chunked(&failing, true)),
        Reply::Send(sse_chunked(&tool_stream(), true)),
    ])
    .await;
    let response = send(&provider(config(&server, true))).await;
    assert_eq!(response, Err(ModelError::Overloaded));
    let response = send(&provider(config(&server, true))).await;
    assert_eq!(response, Ok(expected_tool_response()));
    assert_eq!(server.requests().len(), 2);
}

// ---------------------------------------------------------------------------
// Faults

#[tokio::test]
async fn mid_stream_disconnect_in_chunked_body_is_a_transport_error() {
    let server = Server::start(vec![Reply::Send(sse_chunked(&cut_stream(), false))]).await;
    let response = send(&provider(config(&server, true))).await;
    assert!(
        matches!(&response, Err(ModelError::Transport(detail)) if detail.contains("event stream")),
        "{response:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn mid_stream_disconnect_in_close_delimited_body_is_a_transport_error() {
    // A stream that ends before `message_stop` ended with its connection: another
    // attempt may well succeed, so the error is transient, as a cut chunk is.
    let server = Server::start(vec![Reply::Send(sse_close_delimited(&cut_stream()))]).await;
    let response = send(&provider(config(&server, true))).await;
    assert!(
        matches!(&response, Err(ModelError::Transport(detail))
            if detail.contains("stream ended before message_stop")),
        "{response:?}"
    );
    assert!(response.unwrap_err().is_transient());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn truncated_json_body_is_malformed_and_not_retried() {
    let body = message_json();
    let truncated = &body[..body.len() / 2];
    let server = Server::start(vec![json_response(200, &[], truncated)]).await;
    let response = send(&provider(config(&server, false))).await;
    assert!(
        matches!(&response, Err(ModelError::Malformed { detail })
            if detail.contains("not a Messages API message") && detail.contains("EOF")),
        "{response:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn silent_server_times_out() {
    let server = Server::start(vec![Reply::Silent]).await;
    let mut config = config(&server, false);
    config.request_timeout = Duration::from_millis(200);
    let response = send(&provider(config)).await;
    match response {
        Err(ModelError::Timeout { elapsed }) => assert!(elapsed >= Duration::from_millis(200)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn bad_request_is_an_api_error_without_retry() {
    let server = Server::start(vec![json_response(
        400,
        &[("retry-after", "1")],
        &api_error("invalid_request_error", "max_tokens: must be at most 64000"),
    )])
    .await;
    let response = send(&provider(config(&server, true))).await;
    assert_eq!(
        response,
        Err(ModelError::Api {
            status: 400,
            message: "invalid_request_error: max_tokens: must be at most 64000".into()
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    // Bind then drop to get a port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let config = ProviderConfig::new(endpoint, ApiKey::new(KEY));
    let response = tokio::time::timeout(CALL_BOUND, provider(config).send(Arc::new(request())))
        .await
        .unwrap();
    assert!(
        matches!(&response, Err(ModelError::Transport(detail)) if detail.starts_with("connect to")),
        "{response:?}"
    );
}

// ---------------------------------------------------------------------------
// The key

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    }
}

#[test]
fn the_key_never_appears_in_debug_or_display() {
    let key = ApiKey::new(KEY);
    assert_eq!(format!("{key:?}"), "[redacted]");
    assert_eq!(format!("{key}"), "[redacted]");
    let endpoint = Endpoint::parse("http://127.0.0.1:9").unwrap();
    let config = ProviderConfig::new(endpoint, key);
    let config_debug = format!("{config:?} {config:#?}");
    assert!(!config_debug.contains(KEY), "{config_debug}");
    assert!(config_debug.contains("[redacted]"));
    let provider = provider(config);
    let provider_debug = format!("{provider:?} {provider:#?} {:?}", provider.config());
    assert!(!provider_debug.contains(KEY), "{provider_debug}");
    assert!(!provider_debug.contains("sk-ant"), "{provider_debug}");
}

#[test]
fn api_key_from_the_environment() {
    assert_eq!(
        ApiKey::from_lookup(env(&[])),
        Err(ProviderError::MissingApiKey)
    );
    assert_eq!(
        ApiKey::from_lookup(env(&[("ANTHROPIC_API_KEY", "")])),
        Err(ProviderError::MissingApiKey)
    );
    assert_eq!(
        ApiKey::from_lookup(env(&[("ANTHROPIC_API_KEY", " \n")])),
        Err(ProviderError::MissingApiKey)
    );
    assert_eq!(
        ApiKey::from_lookup(env(&[("ANTHROPIC_API_KEY", "  sk-ant-x\n")])),
        Ok(ApiKey::new("sk-ant-x"))
    );
    let invalid = ApiKey::from_lookup(env(&[("ANTHROPIC_API_KEY", "sk-ant\u{7}secret")]));
    let Err(error @ ProviderError::InvalidApiKey { .. }) = invalid else {
        panic!("expected InvalidApiKey, got {invalid:?}");
    };
    assert!(!error.to_string().contains("secret"), "{error}");
}

#[test]
fn provider_from_the_environment() {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let missing = AnthropicProvider::from_lookup(env(&[]), Arc::clone(&clock));
    assert_eq!(missing.unwrap_err(), ProviderError::MissingApiKey);

    let default = AnthropicProvider::from_lookup(
        env(&[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", "")]),
        Arc::clone(&clock),
    )
    .unwrap();
    assert_eq!(
        default.config().endpoint,
        Endpoint {
            scheme: Scheme::Https,
            host: "api.anthropic.com".into(),
            port: 443
        }
    );
    assert!(default.config().streaming);

    let proxied = AnthropicProvider::from_lookup(
        env(&[
            ("ANTHROPIC_API_KEY", KEY),
            ("ANTHROPIC_BASE_URL", "http://localhost:8080/"),
        ]),
        Arc::clone(&clock),
    )
    .unwrap();
    assert_eq!(proxied.config().endpoint.host, "localhost");
    assert_eq!(proxied.config().endpoint.port, 8080);

    let bad = AnthropicProvider::from_lookup(
        env(&[
            ("ANTHROPIC_API_KEY", KEY),
            ("ANTHROPIC_BASE_URL", "api.anthropic.com"),
        ]),
        clock,
    );
    assert_eq!(
        bad.unwrap_err(),
        ProviderError::InvalidBaseUrl {
            url: "api.anthropic.com".into(),
            reason: BaseUrlDefect::MissingScheme
        }
    );
}

// ---------------------------------------------------------------------------
// Endpoints

#[test]
fn endpoint_parse_accepts_origins() {
    let cases = [
        (
            "https://api.anthropic.com",
            Scheme::Https,
            "api.anthropic.com",
            443,
        ),
        (
            "https://api.anthropic.com/",
            Scheme::Https,
            "api.anthropic.com",
            443,
        ),
        (
            "HTTPS://API.Anthropic.com:8443",
            Scheme::Https,
            "api.anthropic.com",
            8443,
        ),
        ("http://127.0.0.1:8080", Scheme::Http, "127.0.0.1", 8080),
        ("http://localhost", Scheme::Http, "localhost", 80),
        ("http://[::1]:3000", Scheme::Http, "::1", 3000),
        ("  http://sim-api:80  ", Scheme::Http, "sim-api", 80),
    ];
    for (url, scheme, host, port) in cases {
        let endpoint = Endpoint::parse(url).unwrap_or_else(|error| panic!("{url}: {error}"));
        assert_eq!(
            endpoint,
            Endpoint {
                scheme,
                host: host.into(),
                port
            },
            "{url}"
        );
    }
}

#[test]
fn endpoint_parse_rejects_what_it_cannot_honour() {
    let cases = [
        ("", BaseUrlDefect::MissingScheme),
        ("api.anthropic.com", BaseUrlDefect::MissingScheme),
        ("ftp://host", BaseUrlDefect::UnsupportedScheme("ftp".into())),
        ("https://", BaseUrlDefect::MissingHost),
        ("https://:443", BaseUrlDefect::MissingHost),
        ("http://host:0", BaseUrlDefect::InvalidPort("0".into())),
        (
            "http://host:65536",
            BaseUrlDefect::InvalidPort("65536".into()),
        ),
        ("http://host:", BaseUrlDefect::InvalidPort(String::new())),
        ("http://host:+80", BaseUrlDefect::InvalidPort("+80".into())),
        (
            "http://ho st",
            BaseUrlDefect::Malformed("invalid uri character".into()),
        ),
        ("http://ho!st", BaseUrlDefect::InvalidHost("ho!st".into())),
        ("http://-host", BaseUrlDefect::InvalidHost("-host".into())),
        ("https:///", BaseUrlDefect::MissingHost),
        ("http://[zz]:80", BaseUrlDefect::InvalidHost("zz".into())),
        ("http://user:pw@host", BaseUrlDefect::UserInfo),
        (
            "https://proxy/anthropic",
            BaseUrlDefect::Path("/anthropic".into()),
        ),
        (
            "https://host/v1/messages",
            BaseUrlDefect::Path("/v1/messages".into()),
        ),
        ("https://host?x=1", BaseUrlDefect::QueryOrFragment),
        ("https://host/#top", BaseUrlDefect::QueryOrFragment),
    ];
    for (url, reason) in cases {
        assert_eq!(
            Endpoint::parse(url),
            Err(ProviderError::InvalidBaseUrl {
                url: url.into(),
                reason
            }),
            "{url}"
        );
    }
}

proptest! {
    /// Any string parses or fails with a typed error; a success prints back as an
    /// origin that parses to the same endpoint.
    #[test]
    fn endpoint_parse_never_panics_and_round_trips(url in ".{0,40}") {
        if let Ok(endpoint) = Endpoint::parse(&url) {
            if !endpoint.host.contains(':') {
                prop_assert_eq!(Endpoint::parse(&endpoint.to_string()), Ok(endpoint));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The SSE parser

fn parse_whole(bytes: &[u8]) -> Vec<SseEvent> {
    SseParser::new().push(bytes)
}

fn parse_in_chunks(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        events.extend(parser.push(&bytes[start..cut]));
        start = cut;
    }
    events
}

/// Event-stream text: fields, comments, blank lines and arbitrary values, with all
/// three line endings.
fn sse_text() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just(String::new()),
        Just(String::new()),
        "[a-z_]{0,12}".prop_map(|name| format!("event: {name}")),
        "\\PC{0,20}".prop_map(|data| format!("data: {data}")),
        "\\PC{0,20}".prop_map(|data| format!("data:{data}")),
        Just("data".to_owned()),
        "\\PC{0,10}".prop_map(|comment| format!(":{comment}")),
        "[0-9]{0,4}".prop_map(|id| format!("id: {id}")),
        Just("retry: 1000".to_owned()),
        "[a-z]{1,6}: \\PC{0,8}".prop_map(|field| field),
    ];
    let ending = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
    proptest::collection::vec((line, ending), 0..40).prop_map(|lines| {
        lines
            .into_iter()
            .flat_map(|(line, ending)| format!("{line}{ending}").into_bytes())
            .collect()
    })
}

proptest! {
    /// Any chunking of the same bytes gives the same events.
    #[test]
    fn sse_events_do_not_depend_on_chunking(
        bytes in sse_text(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        prop_assert_eq!(parse_in_chunks(&bytes, &cuts), parse_whole(&bytes));
    }

    /// The same holds for arbitrary bytes (invalid UTF-8, stray `\r`), and the
    /// parser never panics on them.
    #[test]
    fn sse_arbitrary_bytes_do_not_depend_on_chunking(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        prop_assert_eq!(parse_in_chunks(&bytes, &cuts), parse_whole(&bytes));
    }

    /// Events written in the canonical form parse back to themselves.
    #[test]
    fn sse_round_trips_written_events(
        events in proptest::collection::vec(("[a-z_]{1,12}", "[^\r\n]{0,20}(\n[^\r\n]{0,20}){0,3}"), 0..10),
    ) {
        let mut text = String::new();
        for (name, data) in &events {
            text.push_str(&format!("event: {name}\n"));
            for line in data.split('\n') {
                text.push_str(&format!("data: {line}\n"));
            }
            text.push('\n');
        }
        let parsed = parse_whole(text.as_bytes());
        let pairs: Vec<(String, String)> = parsed.into_iter().map(|e| (e.event, e.data)).collect();
        prop_assert_eq!(pairs, events);
    }
}
