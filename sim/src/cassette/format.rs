//! The cassette file format.
//!
//! ```json
//! {
//!   "format": "coordsim-cassette",
//!   "version": 1,
//!   "exchanges": [
//!     {
//!       "call": 1,
//!       "agent": "coordinator",
//!       "request_hash": "5f0c6a1e9b2d4c33",
//!       "latency_ms": 1250,
//!       "request": { "model": "…", "max_tokens": 8192, "messages": [ … ] },
//!       "response": { "id": "msg_…", "content": [ … ], "usage": { … } }
//!     },
//!     { "call": 2, "request_hash": "…", "request": { … }, "error": { "kind": "overloaded" } },
//!     { "call": 3, "request_hash": "…", "request": { … }, "no_response": true }
//!   ]
//! }
//! ```
//!
//! - `exchanges` are in the order they completed; `call` numbers the calls in the
//!   order they were made, from 1 (absent, it is the exchange's place in the file).
//! - `agent` labels whose conversation the request is (`coordinator`, or a worker's
//!   prompt); optional.
//! - `request` and `response` are in the Messages API's JSON shape.
//! - `request_hash` is the request's [canonical hash](super::canonical), written for
//!   readers (grep, diffs). Reading recomputes it from `request`, which is the
//!   truth: a request edited by hand needs no new hash.
//! - `latency_ms` is how long the call took, when the recorder had a clock.
//! - Exactly one outcome: `response`; `error`, an API failure (`kind` is
//!   `rate_limited`, `overloaded`, `timeout`, `malformed`, `api` or `transport`);
//!   or `no_response`, a call the caller gave up on before any answer came.
//!
//! Files are written with a stable field order (what identifies an exchange first,
//! its outcome last), pretty-printed with a trailing
//! newline, so a re-recording diffs readably in git; and atomically, to a
//! temporary file in the same folder renamed over the target, so a reader never
//! sees half a cassette.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use coord_runtime::world::{ModelError, ModelRequest, ModelResponse};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::canonical::{request_hash, RequestHash};
use super::error::CassetteError;

/// The `format` every cassette file names.
pub const FORMAT_NAME: &str = "coordsim-cassette";
/// The file format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A recorded API failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RecordedError {
    /// HTTP 429.
    RateLimited {
        /// What the `retry-after` header asked for, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// HTTP 529.
    Overloaded,
    /// No complete response within the client's deadline.
    Timeout {
        /// How long the call ran, in milliseconds.
        elapsed_ms: u64,
    },
    /// The response ended early or did not parse.
    Malformed {
        /// What was wrong.
        detail: String,
    },
    /// Any other API error status.
    Api {
        /// The HTTP status.
        status: u16,
        /// The API's error message.
        message: String,
    },
    /// The connection failed.
    Transport {
        /// What failed.
        message: String,
    },
}

/// Milliseconds of `duration`, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl From<&ModelError> for RecordedError {
    fn from(error: &ModelError) -> Self {
        match error {
            ModelError::RateLimited { retry_after } => RecordedError::RateLimited {
                retry_after_ms: retry_after.map(millis),
            },
            ModelError::Overloaded => RecordedError::Overloaded,
            ModelError::Timeout { elapsed } => RecordedError::Timeout {
                elapsed_ms: millis(*elapsed),
            },
            ModelError::Malformed { detail } => RecordedError::Malformed {
                detail: detail.clone(),
            },
            ModelError::Api { status, message } => RecordedError::Api {
                status: *status,
                message: message.clone(),
            },
            ModelError::Transport(message) => RecordedError::Transport {
                message: message.clone(),
            },
            // A kind this build does not know is kept as what it says.
            other => RecordedError::Transport {
                message: other.to_string(),
            },
        }
    }
}

impl RecordedError {
    /// The error as the runtime's model boundary returns it.
    pub fn to_model_error(&self) -> ModelError {
        match self {
            RecordedError::RateLimited { retry_after_ms } => ModelError::RateLimited {
                retry_after: retry_after_ms.map(Duration::from_millis),
            },
            RecordedError::Overloaded => ModelError::Overloaded,
            RecordedError::Timeout { elapsed_ms } => ModelError::Timeout {
                elapsed: Duration::from_millis(*elapsed_ms),
            },
            RecordedError::Malformed { detail } => ModelError::Malformed {
                detail: detail.clone(),
            },
            RecordedError::Api { status, message } => ModelError::Api {
                status: *status,
                message: message.clone(),
            },
            RecordedError::Transport { message } => ModelError::Transport(message.clone()),
        }
    }
}

/// How a recorded call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The model answered.
    Response(ModelResponse),
    /// The API failed.
    Error(RecordedError),
    /// No answer came before the caller gave up (a hung connection, a cancelled
    /// call, a process that died).
    NoResponse,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The call's number in the order calls were made, from 1.
    pub call: u64,
    /// Whose conversation the request is, if the recorder knew.
    pub agent: Option<String>,
    /// What was sent.
    pub request: ModelRequest,
    /// How long the call took, if the recorder had a clock.
    pub latency_ms: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
}

impl Exchange {
    /// The canonical hash of the request: the key a by-hash replay finds it by.
    pub fn request_hash(&self) -> RequestHash {
        request_hash(&self.request)
    }
}

/// A recording: exchanges in the order they completed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cassette {
    /// The exchanges.
    pub exchanges: Vec<Exchange>,
}

/// The `format` field, which must name [`FORMAT_NAME`].
#[derive(Debug, Clone, Copy)]
struct FormatName;

impl Serialize for FormatName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(FORMAT_NAME)
    }
}

impl<'de> Deserialize<'de> for FormatName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == FORMAT_NAME {
            Ok(FormatName)
        } else {
            Err(serde::de::Error::custom(format!(
                "expected \"format\": \"{FORMAT_NAME}\", found {name:?}"
            )))
        }
    }
}

/// The `version` field, which must be [`FORMAT_VERSION`].
#[derive(Debug, Clone, Copy)]
struct FormatVersion;

impl Serialize for FormatVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(FORMAT_VERSION)
    }
}

impl<'de> Deserialize<'de> for FormatVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let version = u64::deserialize(deserializer)?;
        if version == u64::from(FORMAT_VERSION) {
            Ok(FormatVersion)
        } else {
            Err(serde::de::Error::custom(format!(
                "unsupported cassette version {version}; this coordsim reads version {FORMAT_VERSION}"
            )))
        }
    }
}

/// A cassette file as written.
#[derive(Serialize)]
struct CassetteOut<'a> {
    format: FormatName,
    version: FormatVersion,
    exchanges: Vec<ExchangeOut<'a>>,
}

/// An exchange as written: fields in this order.
#[derive(Serialize)]
struct ExchangeOut<'a> {
    call: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    request_hash: RequestHash,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    request: &'a ModelRequest,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<&'a ModelResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RecordedError>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    no_response: bool,
}

/// A cassette file as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CassetteIn {
    #[allow(dead_code)]
    format: FormatName,
    #[allow(dead_code)]
    version: FormatVersion,
    exchanges: Vec<ExchangeIn>,
}

/// An exchange as read: the outcome's three fields are checked to be exactly one.
#[derive(Deserialize)]
#[serde(try_from = "ExchangeFields")]
struct ExchangeIn {
    call: Option<u64>,
    agent: Option<String>,
    request: ModelRequest,
    latency_ms: Option<u64>,
    outcome: Outcome,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExchangeFields {
    #[serde(default)]
    call: Option<u64>,
    #[serde(default)]
    agent: Option<String>,
    request: ModelRequest,
    /// Checked to be a well-formed hash; the replay recomputes it.
    #[allow(dead_code)]
    request_hash: RequestHash,
    #[serde(default)]
    latency_ms: Option<u64>,
    #[serde(default)]
    response: Option<ModelResponse>,
    #[serde(default)]
    error: Option<RecordedError>,
    #[serde(default)]
    no_response: bool,
}

impl TryFrom<ExchangeFields> for ExchangeIn {
    type Error = String;

    fn try_from(fields: ExchangeFields) -> Result<Self, Self::Error> {
        let outcome = match (fields.response, fields.error, fields.no_response) {
            (Some(response), None, false) => Outcome::Response(response),
            (None, Some(error), false) => Outcome::Error(error),
            (None, None, true) => Outcome::NoResponse,
            _ => return Err(
                "an exchange needs exactly one of \"response\", \"error\" or \"no_response\": true"
                    .to_owned(),
            ),
        };
        if fields.call == Some(0) {
            return Err("\"call\" numbers start at 1".to_owned());
        }
        Ok(ExchangeIn {
            call: fields.call,
            agent: fields.agent,
            request: fields.request,
            latency_ms: fields.latency_ms,
            outcome,
        })
    }
}

/// The 1-based character column of 1-based byte column `byte_column` on 1-based
/// `line` of `text` (serde_json counts bytes; the scenario loader counts characters).
fn char_column(text: &str, line: usize, byte_column: usize) -> usize {
    let Some(line_text) = text.split('\n').nth(line.saturating_sub(1)) else {
        return byte_column;
    };
    let mut end = byte_column.saturating_sub(1).min(line_text.len());
    while !line_text.is_char_boundary(end) {
        end -= 1;
    }
    line_text[..end].chars().count() + 1
}

impl Cassette {
    /// Reads the cassette at `path`.
    pub fn load(path: &Path) -> Result<Cassette, CassetteError> {
        let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses cassette `text`, reporting errors against `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Cassette, CassetteError> {
        let file: CassetteIn = serde_json::from_str(text).map_err(|error| {
            let (line, byte_column) = (error.line().max(1), error.column().max(1));
            let suffix = format!(" at line {} column {}", error.line(), error.column());
            let message = error.to_string();
            let message = message.strip_suffix(&suffix).unwrap_or(&message).to_owned();
            CassetteError::Invalid {
                path: path.to_owned(),
                line,
                column: char_column(text, line, byte_column),
                message,
            }
        })?;
        let exchanges = file
            .exchanges
            .into_iter()
            .enumerate()
            .map(|(index, exchange)| Exchange {
                call: exchange.call.unwrap_or(index as u64 + 1),
                agent: exchange.agent,
                request: exchange.request,
                latency_ms: exchange.latency_ms,
                outcome: exchange.outcome,
            })
            .collect();
        Ok(Cassette { exchanges })
    }

    /// The file text: pretty-printed JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let file = CassetteOut {
            format: FormatName,
            version: FormatVersion,
            exchanges: self
                .exchanges
                .iter()
                .map(|exchange| {
                    let (response, error, no_response) = match &exchange.outcome {
                        Outcome::Response(response) => (Some(response), None, false),
                        Outcome::Error(error) => (None, Some(error), false),
                        Outcome::NoResponse => (None, None, true),
                    };
                    ExchangeOut {
                        call: exchange.call,
                        agent: exchange.agent.as_deref(),
                        request: &exchange.request,
                        request_hash: exchange.request_hash(),
                        latency_ms: exchange.latency_ms,
                        response,
                        error,
                        no_response,
                    }
                })
                .collect(),
        };
        // The API types serialize to plain JSON: strings, numbers, string-keyed maps.
        let mut text = serde_json::to_string_pretty(&file).expect("a cassette serializes");
        text.push('\n');
        text
    }

    /// Writes the cassette to `path` atomically: to a temporary file in the same
    /// folder, synced, then renamed over `path`.
    pub fn write(&self, path: &Path) -> Result<(), CassetteError> {
        let failed = |source: std::io::Error| CassetteError::Write {
            path: path.to_owned(),
            source,
        };
        let folder = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".cassette-").suffix(".tmp");
        // A temporary file is private (0600); a cassette is a file to commit.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
        let mut temporary = builder.tempfile_in(&folder).map_err(failed)?;
        temporary
            .write_all(self.to_json().as_bytes())
            .and_then(|()| temporary.as_file().sync_all())
            .map_err(failed)?;
        temporary
            .persist(path)
            .map_err(|error| failed(error.error))?;
        // The rename is durable once the folder is synced; a folder that cannot be
        // opened for syncing (some platforms) still has the renamed file.
        if let Ok(folder) = std::fs::File::open(&folder) {
            let _ = folder.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_columns_become_character_columns() {
        // Goal: columns count characters, as the scenario loader's do.
        assert_eq!(char_column("ab\n\u{e9}x", 2, 3), 2);
        assert_eq!(char_column("abc", 1, 1), 1);
        assert_eq!(char_column("abc", 9, 4), 4);
    }

    #[test]
    fn errors_round_trip_through_their_recorded_form() {
        // Goal: every error kind the runtime can meet replays as itself.
        let errors = [
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(5)),
            },
            ModelError::RateLimited { retry_after: None },
            ModelError::Overloaded,
            ModelError::Timeout {
                elapsed: Duration::from_secs(60),
            },
            ModelError::Malformed {
                detail: "cut".to_owned(),
            },
            ModelError::Api {
                status: 400,
                message: "bad".to_owned(),
            },
            ModelError::Transport("reset".to_owned()),
        ];
        for error in errors {
            assert_eq!(RecordedError::from(&error).to_model_error(), error);
        }
    }
}
