//! How a failed attempt is classified: which [`ModelError`] it is, and whether
//! trying again can help.
//!
//! | what happened | error | retried |
//! | --- | --- | --- |
//! | 429, or a stream's `rate_limit_error` | `RateLimited` | yes |
//! | 529, or a stream's `overloaded_error` | `Overloaded` | yes |
//! | 408, 5xx, or a stream's `api_error` | `Api` | yes |
//! | any other status (400, 401, 403, 404, 413, …) | `Api` | no |
//! | connect, handshake or body read failed | `Transport` | yes |
//! | no complete response within `request_timeout` | `Timeout` | yes |
//! | a stream ended before `message_stop` | `Malformed` | yes |
//! | a complete body that does not decode | `Malformed` | no |
//!
//! An `x-should-retry: true|false` response header, which the API sends to steer
//! its own SDKs, overrides the status's verdict. A `retry-after-ms` or `retry-after`
//! header on a retried status sets the wait before the next attempt.

use std::error::Error;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::retry;
use super::wire::{decode_error_body, ApiErrorBody};
use crate::world::ModelError;

/// The most of an unparsable error body quoted in the error message.
const ERROR_BODY_QUOTE_CHARS_MAX: usize = 300;

/// One attempt's failure and what it means for the next attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AttemptFailure {
    /// The error the call returns if this was its last attempt.
    pub(super) error: ModelError,
    /// Whether another attempt may succeed.
    pub(super) retryable: bool,
    /// How long the server asked to wait before the next attempt.
    pub(super) retry_after: Option<Duration>,
}

impl AttemptFailure {
    /// A failure that the same request would meet again.
    pub(super) fn fatal(error: ModelError) -> Self {
        Self {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    /// A failure another attempt may not meet.
    pub(super) fn transient(error: ModelError) -> Self {
        Self {
            error,
            retryable: true,
            retry_after: None,
        }
    }

    /// The connection failed while `doing` (e.g. "connect", "read the response").
    pub(super) fn transport(doing: &str, error: &(dyn Error + 'static)) -> Self {
        Self::transient(ModelError::Transport(format!(
            "{doing}: {}",
            error_chain(error)
        )))
    }

    /// A non-success HTTP status with its headers and (possibly partial) body.
    pub(super) fn from_status(
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        now_unix_ms: u64,
    ) -> Self {
        let retry_after = retry::retry_after(headers, now_unix_ms);
        let code = status.as_u16();
        let (error, retryable) = match code {
            429 => (ModelError::RateLimited { retry_after }, true),
            529 => (ModelError::Overloaded, true),
            _ => {
                let message = match decode_error_body(body) {
                    Some(ApiErrorBody { kind, message }) => describe(&kind, &message),
                    None => describe_raw(status, body),
                };
                let error = ModelError::Api {
                    status: code,
                    message,
                };
                (error, code == 408 || status.is_server_error())
            }
        };
        let retryable = match headers.get("x-should-retry").map(|value| value.as_bytes()) {
            Some(b"true") => true,
            Some(b"false") => false,
            _ => retryable,
        };
        Self {
            error,
            retryable,
            retry_after: retry_after.filter(|_| retryable),
        }
    }

    /// A stream's `error` event: the same classification as the status the API
    /// uses for that error type.
    pub(super) fn from_error_event(body: &ApiErrorBody) -> Self {
        match body.kind.as_str() {
            "rate_limit_error" => Self::transient(ModelError::RateLimited { retry_after: None }),
            "overloaded_error" => Self::transient(ModelError::Overloaded),
            kind => {
                let status = status_of_error_type(kind);
                let error = ModelError::Api {
                    status,
                    message: describe(kind, &body.message),
                };
                if status >= 500 {
                    Self::transient(error)
                } else {
                    Self::fatal(error)
                }
            }
        }
    }
}

/// The HTTP status the API documents for an error type; 500 for types it does not.
fn status_of_error_type(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    }
}

fn describe(kind: &str, message: &str) -> String {
    if message.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {message}")
    }
}

/// An error message for a body that is not the API's error JSON (a proxy's HTML
/// page, plain text, nothing): the status's reason and the start of the body.
fn describe_raw(status: StatusCode, body: &[u8]) -> String {
    let reason = status.canonical_reason().unwrap_or("unknown status");
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return reason.to_owned();
    }
    let quoted: String = text.chars().take(ERROR_BODY_QUOTE_CHARS_MAX).collect();
    let ellipsis = if quoted.len() < text.len() { "…" } else { "" };
    format!("{reason}: {quoted}{ellipsis}")
}

/// An error and its sources, outermost first, joined with `: `.
pub(super) fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some wrappers repeat their source's message; say it once.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn classify(code: u16, headers: &[(&'static str, &'static str)], body: &str) -> AttemptFailure {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        AttemptFailure::from_status(
            StatusCode::from_u16(code).unwrap(),
            &map,
            body.as_bytes(),
            0,
        )
    }

    #[test]
    fn statuses_map_to_errors_and_verdicts() {
        let limited = classify(429, &[("retry-after", "2")], "");
        assert_eq!(
            limited.error,
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert!(limited.retryable);
        assert_eq!(limited.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(classify(529, &[], "").error, ModelError::Overloaded);
        assert!(classify(503, &[], "<html>").retryable);
        let bad = classify(
            400,
            &[("retry-after", "2")],
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#,
        );
        assert!(!bad.retryable);
        assert_eq!(bad.retry_after, None);
        assert_eq!(
            bad.error,
            ModelError::Api {
                status: 400,
                message: "invalid_request_error: max_tokens: too big".into()
            }
        );
        assert!(!classify(500, &[("x-should-retry", "false")], "").retryable);
        assert!(classify(409, &[("x-should-retry", "true")], "").retryable);
    }

    #[test]
    fn raw_bodies_are_quoted_briefly() {
        let long = "x".repeat(1_000);
        let failure = classify(502, &[], &long);
        let ModelError::Api { message, .. } = failure.error else {
            panic!("expected an API error");
        };
        assert!(message.starts_with("Bad Gateway: xxx"));
        assert!(message.len() < 400);
    }
}
