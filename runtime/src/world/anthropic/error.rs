//! Why the provider could not be set up.
//!
//! These are configuration errors, met before any request is sent. Failures of a
//! model call itself are [`ModelError`](crate::world::ModelError)s.

/// A provider that cannot be built from the configuration it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// `ANTHROPIC_API_KEY` is unset, empty or only whitespace.
    #[error("ANTHROPIC_API_KEY is not set (or is empty)")]
    MissingApiKey,
    /// The API key cannot travel in an HTTP header.
    #[error("the API key is unusable: {reason}")]
    InvalidApiKey {
        /// What is wrong with it (never the key itself).
        reason: String,
    },
    /// The API base URL does not parse to an [`Endpoint`](super::Endpoint).
    #[error("invalid API base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: BaseUrlDefect,
    },
    /// The TLS client configuration could not be built.
    #[error("TLS setup failed: {reason}")]
    Tls {
        /// The TLS library's explanation.
        reason: String,
    },
}

/// What makes a base URL unusable as an [`Endpoint`](super::Endpoint).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BaseUrlDefect {
    /// No `scheme://` prefix.
    #[error("missing scheme (expected http:// or https://)")]
    MissingScheme,
    /// A scheme other than `http` or `https`.
    #[error("unsupported scheme {0:?} (expected http or https)")]
    UnsupportedScheme(String),
    /// Nothing between `://` and the port or path.
    #[error("missing host")]
    MissingHost,
    /// The host has characters no host name or IP literal can have.
    #[error("invalid host {0:?}")]
    InvalidHost(String),
    /// The port is not a number in 1..=65535.
    #[error("invalid port {0:?}")]
    InvalidPort(String),
    /// `user:password@` before the host; credentials go in the API key.
    #[error("user info before the host is not supported")]
    UserInfo,
    /// A path other than `/`; requests always go to `/v1/messages` at the root.
    #[error("path {0:?} is not supported (the base URL must be scheme://host[:port])")]
    Path(String),
    /// A `?query` or `#fragment`.
    #[error("query strings and fragments are not supported")]
    QueryOrFragment,
    /// Not a URI at all (a space or other character a URI cannot hold, unbalanced
    /// brackets): the URI parser's reason.
    #[error("not a URI: {0}")]
    Malformed(String),
}
