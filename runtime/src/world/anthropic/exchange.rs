//! One attempt: connect, send `POST /v1/messages` over HTTP/1.1, read the response.
//!
//! Each attempt opens its own connection and drives it inside the attempt's own
//! future rather than on a spawned task, so dropping the attempt (on timeout) closes
//! the connection with it and nothing outlives the call.

use std::future::Future;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::failure;
use super::sse::SseParser;
use super::stream::MessageAssembler;
use super::wire::{decode_message, malformed, DecodedMessage};
use super::{Connector, ProviderConfig};
use crate::world::{Clock, ModelError};

/// The API version the request and response shapes follow.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The most of an error response's body read for its message.
const ERROR_BODY_BYTES_MAX: usize = 64 * 1024;

/// What one attempt needs. Borrowed from the provider for the attempt's duration.
pub(super) struct Exchange<'a> {
    pub(super) config: &'a ProviderConfig,
    pub(super) connector: &'a dyn Connector,
    pub(super) clock: &'a dyn Clock,
    /// The `x-api-key` header, marked sensitive.
    pub(super) api_key: &'a HeaderValue,
    /// The encoded request body.
    pub(super) body: Bytes,
}

impl Exchange<'_> {
    /// Runs the attempt to a decoded response or a classified failure. Has no
    /// deadline of its own: the caller races it against the request timeout.
    pub(super) async fn run(&self) -> Result<DecodedMessage, ModelError> {
        let request = self.request()?;
        let stream = self
            .connector
            .connect(&self.config.endpoint)
            .await
            .map_err(|error| {
                failure::transport(&format!("connect to {}", self.config.endpoint), &error)
            })?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| failure::transport("HTTP handshake", &error))?;
        let exchange = async move {
            let response = sender
                .send_request(request)
                .await
                .map_err(|error| failure::transport("send the request", &error))?;
            self.read_response(response).await
        };
        drive(connection, exchange).await
    }

    fn request(&self) -> Result<Request<Full<Bytes>>, ModelError> {
        let endpoint = &self.config.endpoint;
        let host = HeaderValue::from_str(&endpoint.host_header()).map_err(|_| {
            ModelError::Transport(format!(
                "endpoint host {:?} cannot be sent as a Host header",
                endpoint.host
            ))
        })?;
        let accept = if self.config.streaming {
            "text/event-stream"
        } else {
            "application/json"
        };
        Request::builder()
            .method(Method::POST)
            .uri("/v1/messages")
            .header(HOST, host)
            .header("x-api-key", self.api_key.clone())
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(Full::new(self.body.clone()))
            .map_err(|error| ModelError::Transport(format!("cannot build the request: {error}")))
    }

    async fn read_response(
        &self,
        response: Response<Incoming>,
    ) -> Result<DecodedMessage, ModelError> {
        let (head, mut body) = response.into_parts();
        if !head.status.is_success() {
            return Err(self
                .failed_status(head.status, &head.headers, &mut body)
                .await);
        }
        if self.is_event_stream(&head.headers) {
            self.read_stream(&mut body).await
        } else {
            let bytes = read_body(&mut body, self.config.response_bytes_max)
                .await?
                .ok_or_else(|| {
                    malformed(format!(
                        "response body exceeds {} bytes",
                        self.config.response_bytes_max
                    ))
                })?;
            decode_message(&bytes)
        }
    }

    /// Whether to read the body as server-sent events: by its `content-type` when it
    /// names one of the two formats, else by what was asked for.
    fn is_event_stream(&self, headers: &HeaderMap) -> bool {
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().to_ascii_lowercase());
        match content_type.as_deref() {
            Some(value) if value.starts_with("text/event-stream") => true,
            Some(value) if value.starts_with("application/json") => false,
            _ => self.config.streaming,
        }
    }

    async fn failed_status(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &mut Incoming,
    ) -> ModelError {
        // The body only explains the status; a broken one must not hide the status.
        let mut bytes = Vec::new();
        while bytes.len() < ERROR_BODY_BYTES_MAX {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        bytes.extend_from_slice(data);
                    }
                }
                Some(Err(_)) | None => break,
            }
        }
        failure::from_status(status, headers, &bytes, self.clock.unix_ms())
    }

    async fn read_stream(&self, body: &mut Incoming) -> Result<DecodedMessage, ModelError> {
        let mut parser = SseParser::new();
        let mut assembler = MessageAssembler::new();
        let mut bytes_read = 0usize;
        loop {
            let frame = match body.frame().await {
                None => break,
                Some(Err(error)) => {
                    return Err(failure::transport("read the event stream", &error));
                }
                Some(Ok(frame)) => frame,
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            bytes_read = bytes_read.saturating_add(data.len());
            if bytes_read > self.config.response_bytes_max {
                return Err(malformed(format!(
                    "event stream exceeds {} bytes",
                    self.config.response_bytes_max
                )));
            }
            for event in parser.push(data) {
                // The stream is done at `message_stop`; a server that keeps the
                // connection open afterwards must not hold the call.
                if let Some(response) = assembler.apply(&event)? {
                    return Ok(DecodedMessage {
                        response,
                        dropped_block_types: assembler.dropped_block_types().to_vec(),
                    });
                }
            }
        }
        let cut = if parser.is_mid_event() {
            " (inside an event)"
        } else {
            ""
        };
        // The connection ended early, as a cut transport does: the same request may
        // well succeed on another attempt.
        Err(ModelError::Transport(format!(
            "stream ended before message_stop after {bytes_read} bytes{cut}"
        )))
    }
}

/// Reads a whole body; `Ok(None)` when it exceeds `bytes_max`.
async fn read_body(body: &mut Incoming, bytes_max: usize) -> Result<Option<Vec<u8>>, ModelError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| failure::transport("read the response", &error))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len().saturating_add(data.len()) > bytes_max {
                return Ok(None);
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(Some(bytes))
}

/// Polls the connection alongside the exchange until the exchange is done.
///
/// hyper's client connection does the socket I/O; the exchange only sees it through
/// channels. When the connection finishes first (the server closed), the exchange
/// still runs to drain what was buffered and then sees the end or the error itself.
async fn drive<C, E>(connection: C, exchange: E) -> Result<DecodedMessage, ModelError>
where
    C: Future<Output = hyper::Result<()>>,
    E: Future<Output = Result<DecodedMessage, ModelError>>,
{
    tokio::pin!(connection);
    tokio::pin!(exchange);
    let mut connection_open = true;
    loop {
        // `biased`: tokio's default random branch order would draw from a
        // thread-local RNG and make simulated runs depend on it.
        tokio::select! {
            biased;
            outcome = &mut exchange => return outcome,
            closed = &mut connection, if connection_open => {
                connection_open = false;
                if let Err(error) = closed {
                    tracing::debug!(error = %super::failure::error_chain(&error), "model API connection failed");
                }
            }
        }
    }
}
