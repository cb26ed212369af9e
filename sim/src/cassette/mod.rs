//! Cassettes: model exchanges recorded at the model boundary and replayed.
//!
//! A cassette is a JSON file of the exchanges a run's model boundary saw: every
//! request the runtime sent, and its response, its API error, or the fact that no
//! answer came before the caller gave up. It is written for git: stable field order,
//! pretty-printed, one trailing newline, secrets replaced by `[redacted]`.
//!
//! - [`format`](mod@format): the file format ([`Cassette`], [`Exchange`]), read with
//!   `file:line:column` errors and written atomically.
//! - [`canonical`]: the canonical form of a request and its 64-bit
//!   [`RequestHash`], the replay key. `cache_control` markers are not part of it.
//! - [`secrets`]: what is scrubbed before anything is kept.
//! - [`record`]: [`RecordingModel`], a [`Model`](coord_runtime::world::Model)
//!   wrapper that records into a shared [`Recording`]; [`record_seed`] runs a
//!   scenario's seed under it.
//! - [`replay`]: [`ReplayModel`], a `Model` serving a cassette in order or by
//!   request hash. A request it cannot answer is a [`ReplayMiss`], kept with a
//!   unified diff against the nearest recorded request ([`miss`]).
//! - [`policy`]: [`CassettePolicy`], the replay as the simulated model's policy, so
//!   a scenario's `[model] cassette` drives a run through the same tap, cost meter
//!   and fault schedule as its scripts would.
//!
//! A round trip:
//!
//! ```
//! use std::sync::Arc;
//! use coord_runtime::world::{ContentBlock, Message, Model, ModelRequest, Role};
//! use coord_sim::cassette::{MatchMode, Recording, RecordingModel, ReplayModel};
//! use futures_util::FutureExt;
//! # use coord_runtime::world::{BoxFuture, ModelError, ModelResponse, StopReason, Usage};
//! # #[derive(Debug)]
//! # struct Echo;
//! # impl Model for Echo {
//! #     fn send(&self, r: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
//! #         Box::pin(std::future::ready(Ok(ModelResponse {
//! #             id: "msg_1".into(), model: r.model.clone(), role: Role::Assistant,
//! #             content: vec![ContentBlock::text("hi")], stop_reason: StopReason::EndTurn,
//! #             usage: Usage::default(),
//! #         })))
//! #     }
//! # }
//! let request = ModelRequest {
//!     model: "claude-sonnet-4-5".into(),
//!     max_tokens: 1024,
//!     tools: Default::default(),
//!     system: Default::default(),
//!     messages: vec![Message { role: Role::User, content: vec![ContentBlock::text("hello")] }],
//!     thinking: None,
//! };
//! let recording = Recording::in_memory();
//! let model = RecordingModel::new(Arc::new(Echo), recording.clone());
//! let request = Arc::new(request);
//! let answered = model.send(Arc::clone(&request)).now_or_never();
//! let cassette = recording.cassette();
//!
//! let replay = ReplayModel::new(cassette, MatchMode::ByRequestHash);
//! let replayed = replay.send(request).now_or_never();
//! assert_eq!(answered, replayed);
//! assert!(replay.report().is_clean());
//! ```

pub mod canonical;
mod error;
pub mod format;
mod label;
pub mod miss;
pub mod policy;
pub mod record;
pub mod replay;
pub mod secrets;

pub use canonical::{CanonicalRequest, RequestHash};
pub use error::CassetteError;
pub use format::{Cassette, Exchange, Outcome, RecordedError, FORMAT_NAME, FORMAT_VERSION};
pub use label::AgentLabels;
pub use miss::{NearestExchange, ReplayMiss};
pub use policy::{CassettePolicy, REPLAY_MISS, REPLAY_UNUSED};
pub use record::{record_seed, Recording, RecordingModel};
pub use replay::{MatchMode, ReplayModel, ReplayReport, Replayed, UnusedExchange};
pub use secrets::{Secrets, REDACTED};
