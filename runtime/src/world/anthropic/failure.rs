//! How a failed request is classified: which [`ModelError`] it is. Whether trying
//! again can help is the error's own verdict, [`ModelError::is_transient`], which
//! the session's retry loop (the only one) reads; the provider itself makes one
//! attempt per call.
//!
//! | what happened | error | transient |
//! | --- | --- | --- |
//! | 429, or a stream's `rate_limit_error` | `RateLimited` | yes |
//! | 529, or a stream's `overloaded_error` | `Overloaded` | yes |
//! | 408, 5xx, or a stream's `api_error` | `Api` | yes |
//! | any other status (400, 401, 403, 404, 413, …) | `Api` | no |
//! | connect, handshake or body read failed | `Transport` | yes |
//! | a stream ended before `message_stop` | `Transport` | yes |
//! | no complete response within `request_timeout` | `Timeout` | yes |
//! | a complete body or stream that does not decode | `Malformed` | no |
//!
//! A 429's `retry-after-ms` or `retry-after` header travels in
//! [`ModelError::RateLimited`] and sets the session's wait before the next attempt.
//! The API's `x-should-retry` hint to its own SDKs is not consulted: the verdict
//! goes with the kind of error, so every [`Model`](crate::world::Model) gets the
//! same one.

use std::error::Error;

use http::{HeaderMap, StatusCode};

use super::retry;
use super::wire::{decode_error_body, ApiErrorBody};
use crate::world::ModelError;

/// The most of an unparsable error body quoted in the error message.
const ERROR_BODY_QUOTE_CHARS_MAX: usize = 300;

/// The connection failed while `doing` (e.g. "connect", "read the response").
pub(super) fn transport(doing: &str, error: &(dyn Error + 'static)) -> ModelError {
    ModelError::Transport(format!("{doing}: {}", error_chain(error)))
}

/// A non-success HTTP status with its headers and (possibly partial) body.
pub(super) fn from_status(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    now_unix_ms: u64,
) -> ModelError {
    match status.as_u16() {
        429 => ModelError::RateLimited {
            retry_after: retry::retry_after(headers, now_unix_ms),
        },
        529 => ModelError::Overloaded,
        code => {
            let message = match decode_error_body(body) {
                Some(ApiErrorBody { kind, message }) => describe(&kind, &message),
                None => describe_raw(status, body),
            };
            ModelError::Api {
                status: code,
                message,
            }
        }
    }
}

/// A stream's `error` event: the error the API reports for that error type as a
/// status.
pub(super) fn from_error_event(body: &ApiErrorBody) -> ModelError {
    match body.kind.as_str() {
        "rate_limit_error" => ModelError::RateLimited { retry_after: None },
        "overloaded_error" => ModelError::Overloaded,
        kind => ModelError::Api {
            status: status_of_error_type(kind),
            message: describe(kind, &body.message),
        },
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
    use std::time::Duration;

    fn classify(code: u16, headers: &[(&'static str, &'static str)], body: &str) -> ModelError {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        from_status(
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
            limited,
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert!(limited.is_transient());
        assert_eq!(classify(529, &[], ""), ModelError::Overloaded);
        assert!(classify(503, &[], "<html>").is_transient());
        assert!(classify(408, &[], "").is_transient());
        let bad = classify(
            400,
            &[("retry-after", "2")],
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#,
        );
        assert!(!bad.is_transient());
        assert_eq!(
            bad,
            ModelError::Api {
                status: 400,
                message: "invalid_request_error: max_tokens: too big".into()
            }
        );
    }

    #[test]
    fn raw_bodies_are_quoted_briefly() {
        let long = "x".repeat(1_000);
        let failure = classify(502, &[], &long);
        let ModelError::Api { message, .. } = failure else {
            panic!("expected an API error");
        };
        assert!(message.starts_with("Bad Gateway: xxx"));
        assert!(message.len() < 400);
    }
}
