//! Just enough HTTP/1.1 for the API host, over a raw byte stream.
//!
//! The host writes its responses byte by byte rather than through an HTTP server
//! library because its faults are byte-level: a connection dropped after some SSE
//! events, a body cut short under an honest `content-length`. Requests are parsed
//! strictly but completely: case-insensitive header names, `content-length` or
//! `chunked` bodies, `expect: 100-continue`, keep-alive by default in HTTP/1.1 and
//! `connection: close` honoured, pipelined requests kept in the buffer for the next read.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most bytes a request's line and headers may take.
pub(crate) const HEAD_SIZE_BYTES_MAX: usize = 64 * 1024;

/// The most bytes a request's body may take (the real API's limit is 32 MB).
pub(crate) const BODY_SIZE_BYTES_MAX: usize = 32 * 1024 * 1024;

/// How many bytes one read asks the stream for.
const READ_SIZE_BYTES: usize = 16 * 1024;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// `POST`, `GET`, ….
    pub(crate) method: String,
    /// The request target's path, without its query.
    pub(crate) path: String,
    /// The headers in arrival order, names lowercased.
    pub(crate) headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub(crate) body: Vec<u8>,
    /// Whether the connection ends after this exchange (`connection: close`, or
    /// HTTP/1.0 without `connection: keep-alive`).
    pub(crate) closes: bool,
}

impl Request {
    /// The first value of header `name` (lowercase).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        debug_assert_eq!(name, name.to_ascii_lowercase());
        self.headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Why no request could be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The client closed the connection between requests: the normal end.
    #[error("connection closed")]
    Closed,
    /// The client closed the connection in the middle of a request.
    #[error("connection closed in the middle of a request")]
    Truncated,
    /// The bytes are not an HTTP/1.x request.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The line and headers exceed [`HEAD_SIZE_BYTES_MAX`].
    #[error("request head over {HEAD_SIZE_BYTES_MAX} bytes")]
    HeadTooLarge,
    /// The body exceeds [`BODY_SIZE_BYTES_MAX`].
    #[error("request body over {BODY_SIZE_BYTES_MAX} bytes")]
    BodyTooLarge,
    /// A transfer coding other than `chunked`.
    #[error("unsupported transfer-encoding {0:?}")]
    UnsupportedTransferEncoding(String),
    /// The transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

impl RequestError {
    /// The status to answer with before closing, for errors a client should hear about.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            RequestError::Closed | RequestError::Truncated | RequestError::Io(_) => None,
            RequestError::Malformed(_) => Some(400),
            RequestError::BodyTooLarge => Some(413),
            RequestError::HeadTooLarge => Some(431),
            RequestError::UnsupportedTransferEncoding(_) => Some(501),
        }
    }
}

/// One connection's byte stream and the bytes read from it but not yet parsed.
pub(crate) struct Connection<S> {
    stream: S,
    buffer: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// A connection over `stream`, nothing read yet.
    pub(crate) fn new(stream: S) -> Self {
        Self {
            stream,
            buffer: Vec::new(),
        }
    }

    /// The stream, for writing responses.
    pub(crate) fn stream(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Reads the next request.
    pub(crate) async fn read_request(&mut self) -> Result<Request, RequestError> {
        let head_len = self.read_head().await?;
        let head = std::str::from_utf8(&self.buffer[..head_len])
            .map_err(|_| RequestError::Malformed("request head is not UTF-8".into()))?;
        let mut request = parse_head(head)?;
        self.buffer.drain(..head_len);
        let framing = body_framing(&request)?;
        if !matches!(framing, BodyFraming::Empty)
            && request
                .header("expect")
                .is_some_and(|expect| expect.eq_ignore_ascii_case("100-continue"))
        {
            self.stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await?;
            self.stream.flush().await?;
        }
        request.body = match framing {
            BodyFraming::Empty => Vec::new(),
            BodyFraming::Length(len) => self.take_exact(len).await?,
            BodyFraming::Chunked => self.read_chunked().await?,
        };
        Ok(request)
    }

    /// Reads and discards until the client closes the connection.
    pub(crate) async fn drain_until_closed(&mut self) {
        self.buffer.clear();
        let mut sink = tokio::io::sink();
        // The client's close (or a transport error) is the only way out, by design:
        // this is what a server that never answers looks like from outside.
        let _ = tokio::io::copy(&mut self.stream, &mut sink).await;
    }

    /// Reads until the buffer holds a whole head; returns its length, blank line included.
    async fn read_head(&mut self) -> Result<usize, RequestError> {
        // Bounded: each round reads at least one byte or returns, and the buffer is
        // capped at HEAD_SIZE_BYTES_MAX before a head is found.
        loop {
            let searched = &self.buffer[..self.buffer.len().min(HEAD_SIZE_BYTES_MAX)];
            if let Some(end) = find(searched, b"\r\n\r\n") {
                return Ok(end + 4);
            }
            if self.buffer.len() >= HEAD_SIZE_BYTES_MAX {
                return Err(RequestError::HeadTooLarge);
            }
            if self.fill().await? == 0 {
                return Err(if self.buffer.is_empty() {
                    RequestError::Closed
                } else {
                    RequestError::Truncated
                });
            }
        }
    }

    /// Reads more bytes into the buffer; returns how many (0 at end of stream).
    async fn fill(&mut self) -> io::Result<usize> {
        let start = self.buffer.len();
        self.buffer.resize(start + READ_SIZE_BYTES, 0);
        let read = self.stream.read(&mut self.buffer[start..]).await;
        let read_bytes = *read.as_ref().unwrap_or(&0);
        self.buffer.truncate(start + read_bytes);
        read
    }

    /// Takes exactly `len` bytes off the front of the stream.
    async fn take_exact(&mut self, len: usize) -> Result<Vec<u8>, RequestError> {
        // Bounded: each round reads at least one byte or returns.
        while self.buffer.len() < len {
            if self.fill().await? == 0 {
                return Err(RequestError::Truncated);
            }
        }
        Ok(self.buffer.drain(..len).collect())
    }

    /// Takes one CRLF-terminated line off the front of the stream, without its CRLF.
    async fn take_line(&mut self) -> Result<Vec<u8>, RequestError> {
        // Bounded like read_head: a line longer than a head is refused.
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n") {
                let line = self.buffer[..end].to_vec();
                self.buffer.drain(..end + 2);
                return Ok(line);
            }
            if self.buffer.len() > HEAD_SIZE_BYTES_MAX {
                return Err(RequestError::Malformed("chunk line too long".into()));
            }
            if self.fill().await? == 0 {
                return Err(RequestError::Truncated);
            }
        }
    }

    /// Reads a `chunked` body, trailers discarded.
    async fn read_chunked(&mut self) -> Result<Vec<u8>, RequestError> {
        let mut body = Vec::new();
        // Bounded: every chunk adds its size to the body, which is capped, and the
        // zero-size chunk ends the loop.
        loop {
            let line = self.take_line().await?;
            let line = std::str::from_utf8(&line)
                .map_err(|_| RequestError::Malformed("chunk size is not UTF-8".into()))?;
            // Chunk extensions (`;name=value`) carry nothing the host uses.
            let size_hex = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_hex, 16)
                .map_err(|_| RequestError::Malformed(format!("bad chunk size {size_hex:?}")))?;
            if size == 0 {
                break;
            }
            if body.len().saturating_add(size) > BODY_SIZE_BYTES_MAX {
                return Err(RequestError::BodyTooLarge);
            }
            body.extend(self.take_exact(size).await?);
            if !self.take_line().await?.is_empty() {
                return Err(RequestError::Malformed(
                    "chunk data longer than its size".into(),
                ));
            }
        }
        // Bounded: each trailer line is consumed; the empty line ends the body.
        while !self.take_line().await?.is_empty() {}
        Ok(body)
    }
}

/// How a request's body is delimited.
enum BodyFraming {
    Empty,
    Length(usize),
    Chunked,
}

/// The request line and headers of `head` (which ends with the blank line).
fn parse_head(head: &str) -> Result<Request, RequestError> {
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::Malformed(format!(
            "bad request line {request_line:?}"
        )));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(RequestError::Malformed(format!("bad method {method:?}")));
    }
    let http_10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => {
            return Err(RequestError::Malformed(format!(
                "unsupported version {version:?}"
            )))
        }
    };
    if !target.starts_with('/') {
        return Err(RequestError::Malformed(format!("bad target {target:?}")));
    }
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        if line.starts_with([' ', '\t']) {
            return Err(RequestError::Malformed(
                "obsolete header line folding".into(),
            ));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(RequestError::Malformed(format!("bad header line {line:?}")));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(RequestError::Malformed(format!("bad header name {name:?}")));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let connection_has = |token: &str| {
        headers
            .iter()
            .filter(|(name, _)| name == "connection")
            .flat_map(|(_, value)| value.split(','))
            .any(|option| option.trim().eq_ignore_ascii_case(token))
    };
    let closes = connection_has("close") || (http_10 && !connection_has("keep-alive"));
    Ok(Request {
        method: method.to_owned(),
        path,
        headers,
        body: Vec::new(),
        closes,
    })
}

/// How `request`'s body is delimited (RFC 9112 §6.3): `transfer-encoding` wins over
/// `content-length`; conflicting lengths are refused.
fn body_framing(request: &Request) -> Result<BodyFraming, RequestError> {
    if let Some(coding) = request.header("transfer-encoding") {
        return if coding.eq_ignore_ascii_case("chunked") {
            Ok(BodyFraming::Chunked)
        } else {
            Err(RequestError::UnsupportedTransferEncoding(coding.to_owned()))
        };
    }
    let mut length = None;
    for (_, value) in request
        .headers
        .iter()
        .filter(|(n, _)| n == "content-length")
    {
        let parsed: usize = value
            .parse()
            .map_err(|_| RequestError::Malformed(format!("bad content-length {value:?}")))?;
        if length.is_some_and(|known| known != parsed) {
            return Err(RequestError::Malformed("conflicting content-length".into()));
        }
        length = Some(parsed);
    }
    match length {
        None | Some(0) => Ok(BodyFraming::Empty),
        Some(len) if len > BODY_SIZE_BYTES_MAX => Err(RequestError::BodyTooLarge),
        Some(len) => Ok(BodyFraming::Length(len)),
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// A response's status line and headers, ready to write.
pub(crate) fn response_head(status: u16, headers: &[(&str, String)]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// `bytes` as one chunk of a `chunked` body.
pub(crate) fn chunk(bytes: &[u8]) -> Vec<u8> {
    assert!(!bytes.is_empty(), "an empty chunk would end the body");
    let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
    framed.extend_from_slice(bytes);
    framed.extend_from_slice(b"\r\n");
    framed
}

/// The last chunk of a `chunked` body, without trailers.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Writes `bytes` and flushes them onto the wire.
pub(crate) async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// The reason phrase of the statuses the host answers with.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Parses every request in `bytes`, delivered through a pipe of `pipe_bytes`
    /// capacity (1 forces a read per byte), until the first error.
    fn parse_all(bytes: &[u8], pipe_bytes: usize) -> (Vec<Request>, RequestError) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
        runtime.block_on(async {
            let (mut client, server) = tokio::io::duplex(pipe_bytes);
            let bytes = bytes.to_vec();
            let writer = async move {
                // A write fails only once the server stopped reading; that is its answer.
                let _ = client.write_all(&bytes).await;
                let _ = client.shutdown().await;
                client
            };
            let reader = async move {
                let mut connection = Connection::new(server);
                let mut requests = Vec::new();
                // Bounded: each round consumes at least one request's bytes or ends.
                loop {
                    match connection.read_request().await {
                        Ok(request) => requests.push(request),
                        Err(error) => return (requests, error),
                    }
                }
            };
            let (_client, parsed) = tokio::join!(writer, reader);
            parsed
        })
    }

    const VALID: &[u8] = b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: api\r\n\
        Content-Length: 5\r\nX-Api-Key: k\r\n\r\nhello\
        POST /v1/messages HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n\
        3\r\nabc\r\n2;x=y\r\nde\r\n0\r\ntrailer: t\r\n\r\n";

    #[test]
    fn pipelined_requests_parse_whole_however_the_bytes_arrive() {
        // Goal: framing never depends on read boundaries.
        // Method: the same two requests through a 1-byte pipe and a roomy one.
        for pipe_bytes in [1, 4096] {
            let (requests, end) = parse_all(VALID, pipe_bytes);
            assert!(matches!(end, RequestError::Closed), "{end:?}");
            assert_eq!(requests.len(), 2);
            assert_eq!(requests[0].path, "/v1/messages");
            assert_eq!(requests[0].header("x-api-key"), Some("k"));
            assert_eq!(requests[0].body, b"hello");
            assert_eq!(requests[1].body, b"abcde");
            assert!(!requests[1].closes);
        }
    }

    #[test]
    fn conflicting_lengths_and_http_10_are_handled() {
        // Goal: request smuggling shapes are refused, and HTTP/1.0 closes by default.
        // Method: two different content-lengths; an HTTP/1.0 request.
        let (_, end) = parse_all(
            b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
            64,
        );
        assert!(matches!(end, RequestError::Malformed(_)), "{end:?}");
        let (requests, _) = parse_all(b"GET / HTTP/1.0\r\n\r\n", 64);
        assert!(requests[0].closes);
    }

    proptest! {
        #[test]
        fn any_bytes_end_in_requests_or_an_error_never_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            pipe_bytes in 1_usize..64,
        ) {
            let (requests, _) = parse_all(&bytes, pipe_bytes);
            prop_assert!(requests.len() <= bytes.len() / 16 + 1);
        }

        #[test]
        fn a_cut_stream_yields_its_whole_requests_then_ends(cut in 0..VALID.len()) {
            let first_end = find(VALID, b"hello").expect("the first body") + 5;
            let (requests, end) = parse_all(&VALID[..cut], 7);
            prop_assert_eq!(requests.len(), usize::from(cut >= first_end));
            if cut == 0 || cut == first_end {
                prop_assert!(matches!(end, RequestError::Closed), "{:?}", end);
            } else {
                prop_assert!(matches!(end, RequestError::Truncated), "{:?}", end);
            }
        }
    }
}
