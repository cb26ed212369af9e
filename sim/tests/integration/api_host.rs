//! The simulated Anthropic API host (`ApiHost`) and the provider's turmoil connector
//! (`TurmoilApiConnector`), on the wire.
//!
//! Every test runs an "api" turmoil host and a client that speaks raw HTTP/1.1 to it
//! over a connection from `TurmoilApiConnector`, so each assertion is about bytes a real
//! HTTP client would see: status lines, headers, framing, SSE events, and where a
//! fault cuts them. Every simulation has a `simulation_duration`, so a test that went
//! wrong fails instead of hanging.
//!
//! The `provider` tests then run the production `AnthropicProvider` against the
//! host, end to end, on virtual time.

use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::world::anthropic::{Connector, Endpoint, Scheme, SseParser};
use coord_runtime::world::{
    BoxFuture, CacheCreation, ContentBlock, Model, ModelError, ModelRequest, ModelResponse, Role,
    StopReason, Usage,
};
use coord_sim::world::{sim_builder, ApiHost, Streams, TurmoilApiConnector};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod provider;

const API: &str = "api";
const CLIENT: &str = "client";
const PORT: u16 = 8080;

/// The response every test's upstream model gives: text, then a tool call.
fn fixed_response() -> ModelResponse {
    ModelResponse {
        id: "msg_sim_01".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Reading the file first, then I will summarise it."),
            ContentBlock::ToolUse {
                id: "toolu_01".into(),
                name: "Read".into(),
                input: json!({"file_path": "/work/src/main.rs", "limit": 200}).into(),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 1200,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 45000,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: 3000,
                ephemeral_1h_input_tokens: 0,
            },
            output_tokens: 87,
        },
    }
}

/// An upstream model that always gives the same answer.
#[derive(Debug)]
struct FixedModel {
    answer: Result<ModelResponse, ModelError>,
    /// How long it thinks before answering, on the host's (virtual) clock.
    delay: Duration,
}

impl FixedModel {
    fn ok() -> Arc<Self> {
        Self::answering(Ok(fixed_response()))
    }

    fn failing(error: ModelError) -> Arc<Self> {
        Self::answering(Err(error))
    }

    fn answering(answer: Result<ModelResponse, ModelError>) -> Arc<Self> {
        Arc::new(Self {
            answer,
            delay: Duration::ZERO,
        })
    }

    fn slow(delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            answer: Ok(fixed_response()),
            delay,
        })
    }
}

impl Model for FixedModel {
    fn send(&self, _: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let (answer, delay) = (self.answer.clone(), self.delay);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            answer
        })
    }
}

/// A well-formed request body.
fn request_body(stream: bool) -> String {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a worker."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Summarise main.rs"}]}],
        "stream": stream,
    })
    .to_string()
}

/// A request's bytes: `POST /v1/messages` with the API's headers, the body's length,
/// `connection: close`, then `headers` (which replace same-named defaults; an empty
/// value drops the header).
fn http_request(body: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let length = body.len().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("host", API),
        ("content-type", "application/json"),
        ("x-api-key", "sk-ant-sim-secret"),
        ("anthropic-version", "2023-06-01"),
        ("content-length", &length),
        ("connection", "close"),
    ];
    for (name, value) in headers {
        all.retain(|(known, _)| !known.eq_ignore_ascii_case(name));
        if !value.is_empty() {
            all.push((name, value));
        }
    }
    let mut bytes = b"POST /v1/messages HTTP/1.1\r\n".to_vec();
    for (name, value) in all {
        bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// A response as a client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawResponse {
    status: u16,
    /// Names lowercased.
    headers: Vec<(String, String)>,
    /// De-chunked; as much as arrived.
    body: Vec<u8>,
    /// Whether the body's framing completed (content-length reached, or the last chunk).
    complete: bool,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("body is JSON")
    }

    fn body_text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("body is UTF-8")
    }

    /// `(error.type, error.message)` of an API error body.
    fn api_error(&self) -> (String, String) {
        let body = self.json();
        assert_eq!(body["type"], "error", "{body}");
        let kind = body["error"]["type"]
            .as_str()
            .expect("error.type")
            .to_owned();
        let message = body["error"]["message"]
            .as_str()
            .expect("error.message")
            .to_owned();
        (kind, message)
    }
}

/// Parses one response off the front of `bytes`. `None` while more bytes could finish
/// it; at end of stream (`eof`) whatever arrived, marked incomplete.
fn parse_response(bytes: &[u8], eof: bool) -> Option<(RawResponse, usize)> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..head_end]).expect("head is UTF-8");
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    let mut response = RawResponse {
        status,
        headers,
        body: Vec::new(),
        complete: false,
    };
    let rest = &bytes[head_end..];
    if response.header("transfer-encoding") == Some("chunked") {
        let mut at = 0;
        while let Some(line_end) = rest[at..].windows(2).position(|w| w == b"\r\n") {
            let size_hex = std::str::from_utf8(&rest[at..at + line_end]).unwrap();
            let size = usize::from_str_radix(size_hex, 16).unwrap();
            let data_start = at + line_end + 2;
            if size == 0 {
                if rest.len() >= data_start + 2 {
                    response.complete = true;
                    return Some((response, head_end + data_start + 2));
                }
                break;
            }
            if rest.len() < data_start + size + 2 {
                response
                    .body
                    .extend_from_slice(&rest[data_start..rest.len().min(data_start + size)]);
                break;
            }
            response
                .body
                .extend_from_slice(&rest[data_start..data_start + size]);
            at = data_start + size + 2;
        }
        return eof.then_some((response, bytes.len()));
    }
    let length: usize = response
        .header("content-length")
        .unwrap_or("0")
        .parse()
        .unwrap();
    if rest.len() >= length {
        response.body = rest[..length].to_vec();
        response.complete = true;
        return Some((response, head_end + length));
    }
    response.body = rest.to_vec();
    eof.then_some((response, bytes.len()))
}

/// A client connection to the API host, from `TurmoilApiConnector`.
struct Client {
    stream: coord_runtime::world::anthropic::BoxConnection,
    buffer: Vec<u8>,
    eof: bool,
}

impl Client {
    async fn connect() -> io::Result<Self> {
        let endpoint = Endpoint {
            scheme: Scheme::Http,
            host: API.into(),
            port: PORT,
        };
        Ok(Self {
            stream: TurmoilApiConnector::new().connect(&endpoint).await?,
            buffer: Vec::new(),
            eof: false,
        })
    }

    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Reads the next response, or `None` if the connection ended before one started.
    async fn response(&mut self) -> io::Result<Option<RawResponse>> {
        // Bounded by the simulation's duration: the host either answers or the
        // connection ends, and a test that waits on a hang has its own timeout.
        loop {
            if let Some((response, used)) = parse_response(&self.buffer, self.eof) {
                self.buffer.drain(..used);
                return Ok(Some(response));
            }
            if self.eof {
                return Ok(None);
            }
            let mut chunk = [0_u8; 4096];
            let read = self.stream.read(&mut chunk).await?;
            self.eof = read == 0;
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    /// Whether the host has closed the connection (reads end of stream).
    async fn closed_by_host(&mut self) -> io::Result<bool> {
        let mut chunk = [0_u8; 1];
        Ok(self.stream.read(&mut chunk).await? == 0)
    }
}

/// One request on a fresh connection, and its response.
async fn exchange(request: Vec<u8>) -> io::Result<RawResponse> {
    let mut client = Client::connect().await?;
    client.send(&request).await?;
    Ok(client.response().await?.expect("the host answered"))
}

/// Runs `client` against `api` in a simulation bounded to `limit` of virtual time.
fn run(api: &ApiHost, limit: Duration, client: impl Future<Output = turmoil::Result> + 'static) {
    let mut builder = sim_builder(&Streams::new(11));
    builder.simulation_duration(limit);
    let mut sim = builder.build();
    let host = api.clone();
    sim.host(API, move || host.clone().serve(PORT));
    sim.client(CLIENT, client);
    sim.run().unwrap();
}

/// The SSE events of a stream body, as `(event name, data JSON)`, read with the
/// runtime's parser, since a seeded host frames its streams in any way the grammar
/// allows: an event without an `event:` line is named by its data's type, and the
/// event type the host adds, which no client knows, is left out.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    SseParser::new()
        .push(body.as_bytes())
        .into_iter()
        .map(|event| {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            let name = match event.event.as_str() {
                "message" => data["type"].as_str().unwrap().to_owned(),
                _ => event.event,
            };
            (name, data)
        })
        .filter(|(name, _)| name != "unannounced_event")
        .collect()
}

/// Rebuilds the message an SSE stream carries, as a client accumulating it would.
fn accumulate(events: &[(String, Value)]) -> ModelResponse {
    let mut message: Value = Value::Null;
    let mut partial_json: Vec<String> = Vec::new();
    for (name, data) in events {
        assert_eq!(
            data["type"],
            name.as_str(),
            "event name matches its data's type"
        );
        match name.as_str() {
            "message_start" => message = data["message"].clone(),
            "content_block_start" => {
                let index = data["index"].as_u64().unwrap() as usize;
                let content = message["content"].as_array_mut().unwrap();
                assert_eq!(content.len(), index, "blocks start in order");
                content.push(data["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap() as usize;
                let delta = &data["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => {
                        let block = &mut message["content"][index]["text"];
                        *block = Value::String(
                            block.as_str().unwrap().to_owned() + delta["text"].as_str().unwrap(),
                        );
                    }
                    "input_json_delta" => {
                        partial_json[index].push_str(delta["partial_json"].as_str().unwrap())
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap() as usize;
                if !partial_json[index].is_empty() {
                    message["content"][index]["input"] =
                        serde_json::from_str(&partial_json[index]).unwrap();
                }
            }
            "message_delta" => {
                message["stop_reason"] = data["delta"]["stop_reason"].clone();
                message["usage"]["output_tokens"] = data["usage"]["output_tokens"].clone();
            }
            "message_stop" | "ping" => {}
            other => panic!("unexpected event {other}"),
        }
    }
    serde_json::from_value(message).unwrap()
}

const LIMIT: Duration = Duration::from_secs(120);

/// The answer `api` gives `request`, sent on a fresh connection in a bounded simulation.
fn exchange_with(api: &ApiHost, request: Vec<u8>) -> RawResponse {
    let seen: Arc<Mutex<Option<RawResponse>>> = Arc::default();
    let seen_in = seen.clone();
    run(api, LIMIT, async move {
        *seen_in.lock().unwrap() = Some(exchange(request).await?);
        Ok(())
    });
    let response = seen.lock().unwrap().clone();
    response.expect("the client finished within the limit")
}

#[test]
fn a_json_answer_is_the_upstream_message_in_the_api_shape() {
    // Goal: a non-streaming request gets the upstream response as a `message` object,
    // and the host records what it received without the key's value.
    // Method: one request; compare the body to the upstream response and snapshot it.
    let api = ApiHost::new(FixedModel::ok());
    let response = exchange_with(&api, http_request(&request_body(false), &[]));
    assert_eq!(response.status, 200);
    assert!(response.complete);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.header("connection"), Some("close"));
    let parsed: ModelResponse = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(parsed, fixed_response());
    let body = response.json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["stop_sequence"], Value::Null);
    insta::assert_snapshot!(response.body_text());

    let received = api.received();
    assert_eq!(received.len(), 1);
    let record = &received[0];
    assert_eq!(record.number, 1);
    assert_eq!(
        (record.method.as_str(), record.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(
        record.header_names,
        [
            "host",
            "content-type",
            "x-api-key",
            "anthropic-version",
            "content-length",
            "connection"
        ]
    );
    assert_eq!(record.anthropic_version.as_deref(), Some("2023-06-01"));
    assert!(!record.streaming);
    assert_eq!(record.request.as_ref().unwrap().messages.len(), 1);
    assert_eq!(record.status, Some(200));
    assert!(
        !format!("{record:?}").contains("sk-ant-sim-secret"),
        "the key's value is never recorded"
    );
}

#[test]
fn a_streaming_answer_is_the_api_event_stream() {
    // Goal: `"stream": true` gets the Messages API's SSE events, chunked, and a client
    // accumulating them rebuilds the upstream response exactly.
    // Method: one streaming request; snapshot the de-chunked event stream, check the
    // event order, and accumulate it.
    let api = ApiHost::new(FixedModel::ok());
    let response = exchange_with(&api, http_request(&request_body(true), &[]));
    assert_eq!(response.status, 200);
    assert!(response.complete, "the stream ends with the last chunk");
    assert_eq!(
        response.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    let body = response.body_text();
    insta::assert_snapshot!(body);

    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..3], ["message_start", "ping", "content_block_start"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let tool_deltas = events
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
        .count();
    assert!(
        tool_deltas >= 3,
        "tool input arrives in several pieces: {tool_deltas}"
    );
    let start_usage = &events[0].1["message"]["usage"];
    assert_eq!(start_usage["cache_read_input_tokens"], 45000);
    assert_eq!(
        start_usage["cache_creation"]["ephemeral_5m_input_tokens"],
        3000
    );
    assert_eq!(accumulate(&events), fixed_response());
    assert!(api.received()[0].streaming);
}

/// Asserts that a 429 says its wait as `seconds` in `retry-after` or, without that
/// header, as `milliseconds` in `retry-after-ms`.
fn assert_waits(response: &RawResponse, seconds: &str, milliseconds: &str) {
    let wait = (
        response.header("retry-after"),
        response.header("retry-after-ms"),
    );
    let said = match wait {
        (Some(value), _) => value == seconds,
        (None, Some(value)) => value == milliseconds,
        (None, None) => false,
    };
    assert!(said, "{wait:?}");
}

#[test]
fn an_upstream_rate_limit_answers_429_with_retry_after_rounded_up() {
    // Goal: a rate-limited upstream gives 429, rate_limit_error, and its wait in
    // `retry-after` (whole seconds rounded up) and `retry-after-ms`, or in one of
    // them alone, as the seed draws: a sweep meets all three.
    // Method: an upstream rate limited for 2.5 s, behind hosts of 32 seeds.
    let mut forms = BTreeSet::new();
    for seed in 0..32 {
        let api = ApiHost::new(FixedModel::failing(ModelError::RateLimited {
            retry_after: Some(Duration::from_millis(2500)),
        }))
        .drawing_forms_from(seed);
        let response = exchange_with(&api, http_request(&request_body(false), &[]));
        assert_eq!(response.status, 429);
        assert_eq!(response.api_error().0, "rate_limit_error");
        assert_eq!(api.received()[0].status, Some(429));
        let (seconds, milliseconds) = (
            response.header("retry-after"),
            response.header("retry-after-ms"),
        );
        assert!(seconds.is_none_or(|value| value == "3"), "{seconds:?}");
        assert!(
            milliseconds.is_none_or(|value| value == "2500"),
            "{milliseconds:?}"
        );
        forms.insert((seconds.is_some(), milliseconds.is_some()));
    }
    let every_form = BTreeSet::from([(true, true), (true, false), (false, true)]);
    assert_eq!(forms, every_form);
}

#[test]
fn a_malformed_upstream_answer_drops_a_json_answer_after_half_its_body() {
    // Goal: a cut JSON answer announces the full content-length, sends half the body
    // and closes, on a connection the client wanted kept alive.
    // Method: a keep-alive request to a malformed upstream; read to end of stream.
    let api = ApiHost::new(FixedModel::failing(ModelError::Malformed {
        detail: "cut".into(),
    }));
    let seen: Arc<Mutex<Option<RawResponse>>> = Arc::default();
    let seen_in = seen.clone();
    run(&api, LIMIT, async move {
        let request = http_request(&request_body(false), &[("connection", "keep-alive")]);
        *seen_in.lock().unwrap() = Some(exchange(request).await?);
        Ok(())
    });
    let response = seen.lock().unwrap().clone().unwrap();
    let announced: usize = response.header("content-length").unwrap().parse().unwrap();
    assert_eq!(response.body.len(), announced / 2);
    assert!(!response.complete);
    assert_eq!(response.header("connection"), Some("close"));
}

#[test]
fn a_bad_body_is_a_400_invalid_request_error() {
    // Goal: bodies that are not a messages request get 400 with the API's error body.
    // Method: not JSON, JSON missing `messages`, and a non-boolean `stream`.
    let api = ApiHost::new(FixedModel::ok());
    let seen: Arc<Mutex<Vec<RawResponse>>> = Arc::default();
    let seen_in = seen.clone();
    run(&api, LIMIT, async move {
        let bodies = [
            "{not json".to_owned(),
            json!({"model": "claude-sonnet-4-5", "max_tokens": 10}).to_string(),
            json!({"model": "m", "max_tokens": 10, "messages": [], "stream": "yes"}).to_string(),
        ];
        for body in bodies {
            let response = exchange(http_request(&body, &[])).await?;
            seen_in.lock().unwrap().push(response);
        }
        Ok(())
    });
    let seen = seen.lock().unwrap();
    let errors: Vec<(u16, String, String)> = seen
        .iter()
        .map(|response| {
            let (kind, message) = response.api_error();
            (response.status, kind, message)
        })
        .collect();
    for (status, kind, _) in &errors {
        assert_eq!((*status, kind.as_str()), (400, "invalid_request_error"));
    }
    assert!(
        errors[0].2.starts_with("body is not JSON"),
        "{}",
        errors[0].2
    );
    assert!(
        errors[1].2.contains("missing field `messages`"),
        "{}",
        errors[1].2
    );
    assert!(
        errors[2].2.starts_with("stream: expected a boolean"),
        "{}",
        errors[2].2
    );
    assert!(api.received().iter().all(|record| record.request.is_none()));
}

#[test]
fn headers_are_checked_before_the_model_is_asked() {
    // Goal: a missing key is 401 authentication_error, a missing version 400, another
    // path 404 and another method 405, all with the API's error body.
    // Method: four requests that each break one rule; header names in odd case still
    // count (`X-Api-Key`).
    let api = ApiHost::new(FixedModel::ok());
    let seen: Arc<Mutex<Vec<RawResponse>>> = Arc::default();
    let seen_in = seen.clone();
    run(&api, LIMIT, async move {
        let body = request_body(false);
        let no_key = http_request(&body, &[("x-api-key", "")]);
        let no_version = http_request(&body, &[("anthropic-version", "")]);
        let odd_case = http_request(&body, &[("x-api-key", ""), ("X-Api-Key", "sk-ant-sim")]);
        let other_path = String::from_utf8(http_request(&body, &[]))
            .unwrap()
            .replacen("/v1/messages", "/v1/complete", 1)
            .into_bytes();
        let get = String::from_utf8(http_request("", &[]))
            .unwrap()
            .replacen("POST", "GET", 1)
            .into_bytes();
        for request in [no_key, no_version, odd_case, other_path, get] {
            let response = exchange(request).await?;
            seen_in.lock().unwrap().push(response);
        }
        Ok(())
    });
    let seen = seen.lock().unwrap();
    let outcomes: Vec<(u16, String)> = seen
        .iter()
        .map(|response| {
            let kind = if response.status == 200 {
                "ok".to_owned()
            } else {
                response.api_error().0
            };
            (response.status, kind)
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            (401, "authentication_error".into()),
            (400, "invalid_request_error".into()),
            (200, "ok".into()),
            (404, "not_found_error".into()),
            (405, "invalid_request_error".into()),
        ]
    );
}

#[test]
fn keep_alive_chunked_and_pipelined_requests_are_each_answered() {
    // Goal: the host parses requests robustly: several on one connection, a chunked
    // request body, and two requests written in one go.
    // Method: a chunked request, then two pipelined requests, on one connection; the
    // last asks to close, and the host then closes.
    let api = ApiHost::new(FixedModel::ok());
    let seen: Arc<Mutex<Vec<RawResponse>>> = Arc::default();
    let closed = Arc::new(Mutex::new(false));
    let (seen_in, closed_in) = (seen.clone(), closed.clone());
    run(&api, LIMIT, async move {
        let body = request_body(false);
        let (first, second) = body.split_at(body.len() / 3);
        let chunked = format!(
            "POST /v1/messages HTTP/1.1\r\nHost: api\r\nX-API-Key: k\r\nAnthropic-Version: 2023-06-01\r\n\
             Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n{:x};ext=1\r\n{second}\r\n0\r\n\r\n",
            first.len(),
            second.len()
        );
        let mut pipelined = http_request(&body, &[("connection", "")]);
        pipelined.extend(http_request(&request_body(true), &[]));
        let mut client = Client::connect().await?;
        client.send(chunked.as_bytes()).await?;
        let response = client.response().await?.expect("answered");
        seen_in.lock().unwrap().push(response);
        client.send(&pipelined).await?;
        for _ in 0..2 {
            let response = client.response().await?.expect("answered");
            seen_in.lock().unwrap().push(response);
        }
        *closed_in.lock().unwrap() = client.closed_by_host().await?;
        Ok(())
    });
    let seen = seen.lock().unwrap();
    let statuses: Vec<u16> = seen.iter().map(|response| response.status).collect();
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(seen[0].header("connection"), Some("keep-alive"));
    assert_eq!(seen[1].header("connection"), Some("keep-alive"));
    assert_eq!(seen[2].header("connection"), Some("close"));
    assert_eq!(seen[2].header("transfer-encoding"), Some("chunked"));
    assert!(
        *closed.lock().unwrap(),
        "the host closes after `connection: close`"
    );
    let received = api.received();
    assert_eq!(received.len(), 3);
    assert_eq!(
        received[0].request, received[1].request,
        "the chunked body parsed whole"
    );
    assert!(received[0].header_names.contains(&"x-api-key".to_owned()));
}

#[test]
fn malformed_http_is_refused_with_a_status_and_a_close() {
    // Goal: bytes that are not HTTP/1.1 get an error status and a closed connection,
    // never a panic or a hang.
    // Method: a bad request line, an oversized head, and an unknown transfer coding.
    let api = ApiHost::new(FixedModel::ok());
    let seen: Arc<Mutex<Vec<RawResponse>>> = Arc::default();
    let seen_in = seen.clone();
    run(&api, LIMIT, async move {
        let huge_header = format!(
            "POST /v1/messages HTTP/1.1\r\nx-filler: {}\r\n\r\n",
            "a".repeat(70 * 1024)
        );
        let requests = [
            "BREW /pot HTCPCP/1.0\r\n\r\n".to_owned(),
            huge_header,
            "POST /v1/messages HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n".to_owned(),
        ];
        for request in requests {
            let mut client = Client::connect().await?;
            client.send(request.as_bytes()).await?;
            let response = client.response().await?.expect("answered");
            assert!(client.closed_by_host().await?, "closed after the error");
            seen_in.lock().unwrap().push(response);
        }
        Ok(())
    });
    let statuses: Vec<u16> = seen.lock().unwrap().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [400, 431, 501]);
    assert_eq!(api.requests_count(), 0, "none of them was a request");
}

#[test]
fn upstream_errors_become_the_errors_the_api_would_send() {
    // Goal: an upstream ModelError reaches the client as the API's error for it.
    // Method: one host per upstream error; compare status, error type and headers.
    let cases = [
        (
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(7)),
            },
            429,
            "rate_limit_error",
        ),
        (ModelError::Overloaded, 529, "overloaded_error"),
        (
            ModelError::Api {
                status: 403,
                message: "not allowed".into(),
            },
            403,
            "permission_error",
        ),
        (
            ModelError::Transport("connection reset".into()),
            500,
            "api_error",
        ),
    ];
    for (error, status, kind) in cases {
        let api = ApiHost::new(FixedModel::failing(error.clone()));
        let seen: Arc<Mutex<Option<RawResponse>>> = Arc::default();
        let seen_in = seen.clone();
        run(&api, LIMIT, async move {
            // A JSON request: a streaming one may meet its error in a begun stream.
            *seen_in.lock().unwrap() =
                Some(exchange(http_request(&request_body(false), &[])).await?);
            Ok(())
        });
        let response = seen.lock().unwrap().clone().unwrap();
        assert_eq!(response.status, status, "{error:?}");
        assert_eq!(response.api_error().0, kind, "{error:?}");
        if status == 429 {
            assert_waits(&response, "7", "7000");
        }
    }
}

#[test]
fn some_streaming_errors_are_error_events_in_a_begun_stream() {
    // Goal: as the API does, an error met once a stream has begun is a `200` whose
    // stream reports it in an `error` event after `message_start`; the host does
    // so for some request numbers, drawn from its seed, for errors with no retry
    // header, and never for a rate limit, whose wait only a header can carry.
    // Method: eight streaming requests to an overloaded upstream under two seeds,
    // then two to a rate-limited one.
    let forms = |seed: u64| -> Vec<u16> {
        let api =
            ApiHost::new(FixedModel::failing(ModelError::Overloaded)).drawing_forms_from(seed);
        (0..8)
            .map(|_| {
                let response = exchange_with(&api, http_request(&request_body(true), &[]));
                if response.status == 200 {
                    assert!(response.complete, "the stream ends with the last chunk");
                    let events = sse_events(&response.body_text());
                    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
                    assert_eq!(names, ["message_start", "ping", "error"]);
                    assert_eq!(events[2].1["error"]["type"], "overloaded_error");
                } else {
                    assert_eq!(response.status, 529);
                }
                response.status
            })
            .collect()
    };
    let (first, second) = (forms(1), forms(2));
    for statuses in [&first, &second] {
        assert!(
            statuses.contains(&200) && statuses.contains(&529),
            "{statuses:?}"
        );
    }
    assert_ne!(first, second, "the seed chooses the forms");
    assert_eq!(forms(1), first, "the same seed, the same forms");

    let limited = ApiHost::new(FixedModel::failing(ModelError::RateLimited {
        retry_after: Some(Duration::from_secs(2)),
    }));
    for _ in 0..2 {
        let response = exchange_with(&limited, http_request(&request_body(true), &[]));
        assert_eq!(response.status, 429);
        assert_waits(&response, "2", "2000");
    }
}

#[test]
fn an_upstream_timeout_is_silence_and_a_malformed_answer_is_cut_off() {
    // Goal: the two upstream failures without a status of their own reach the client
    // as the API shows them: a 200 stream that stops mid-message, and no answer.
    // Method: one host per failure; a raw client reads what arrives, bounded.
    let api = ApiHost::new(FixedModel::failing(ModelError::Malformed {
        detail: "cut".into(),
    }));
    let response = exchange_with(&api, http_request(&request_body(true), &[]));
    assert_eq!(response.status, 200);
    assert!(!response.complete);
    let body = String::from_utf8_lossy(&response.body);
    assert!(body.contains("message_start"), "{body}");
    assert!(!body.contains("message_stop"), "{body}");

    let api = ApiHost::new(FixedModel::failing(ModelError::Timeout {
        elapsed: Duration::from_secs(60),
    }));
    let answered: Arc<Mutex<Option<bool>>> = Arc::default();
    let answered_in = answered.clone();
    run(&api, LIMIT, async move {
        let request = exchange(http_request(&request_body(false), &[]));
        let waited = tokio::time::timeout(Duration::from_secs(90), request).await;
        *answered_in.lock().unwrap() = Some(waited.is_ok());
        Ok(())
    });
    assert_eq!(*answered.lock().unwrap(), Some(false));
}

#[test]
fn an_unsendable_upstream_response_is_a_500() {
    // Goal: an upstream answer the API could never send (a tool_result block in an
    // assistant message) is refused as an api_error, not streamed as nonsense.
    // Method: a model whose response holds a tool_result block.
    let mut response = fixed_response();
    response.content.push(ContentBlock::ToolResult {
        tool_use_id: "toolu_01".into(),
        content: "x".into(),
        is_error: false,
        cache_control: None,
    });
    let api = ApiHost::new(FixedModel::answering(Ok(response)));
    let response = exchange_with(&api, http_request(&request_body(true), &[]));
    assert_eq!(response.status, 500);
    let (kind, message) = response.api_error();
    assert_eq!(kind, "api_error");
    assert!(
        message.contains("content block 2 is a tool_result block"),
        "{message}"
    );
}

#[test]
fn the_connector_refuses_https_because_the_simulated_network_has_no_tls() {
    // Goal: an https endpoint fails with a clear io error instead of speaking plain
    // bytes to a TLS endpoint.
    // Method: connect to an https endpoint inside the simulation.
    let api = ApiHost::new(FixedModel::ok());
    let error: Arc<Mutex<Option<io::Error>>> = Arc::default();
    let error_in = error.clone();
    run(&api, LIMIT, async move {
        let endpoint = Endpoint {
            scheme: Scheme::Https,
            host: API.into(),
            port: PORT,
        };
        let result = TurmoilApiConnector::new().connect(&endpoint).await;
        *error_in.lock().unwrap() = result.err();
        Ok(())
    });
    let error = error.lock().unwrap().take().expect("https fails");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(error.to_string().contains("no TLS"), "{error}");
    assert_eq!(api.requests_count(), 0);
}
