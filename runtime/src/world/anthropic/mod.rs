//! The Anthropic Messages API provider: the production [`Model`](super::Model).

mod connect;

pub use connect::{BoxConnection, Connection, Connector, Endpoint, Scheme};
