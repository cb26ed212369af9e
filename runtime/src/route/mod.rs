//! Message routing: SendMessage addressing and validation, structured messages, the
//! name registry, and SendMessageToWorker (PROTOCOL.md §5).
//!
//! Everything here is pure: it parses, validates and resolves, and returns a typed
//! answer ([`Route`], [`Continued`]) or a typed refusal. The session layer acts on the
//! answer (queue for a running agent, resume a stopped one, write a mailbox), so the
//! rules can be tested without a session and stay the same in every dialect. The
//! one piece of state here is [`MessageQueue`], which holds a running agent's
//! messages until its next tool-round boundary.
//!
//! - `names`: the name registry (name → agent id, unique ignoring case).
//! - `queue`: messages waiting for a running agent's next tool-round boundary.
//! - `request_id`: `<type>-<millis>@<agentId>` ids for structured requests.
//! - `structured`: `shutdown_request`, `shutdown_response`, `plan_approval_response`.
//! - `send`: SendMessage input, validation and resolution.
//! - `worker`: SendMessageToWorker's ordered checks and the per-binding registry.

mod names;
mod queue;
mod request_id;
mod send;
mod structured;
mod worker;

pub use names::{NameRegistry, NameRegistryError};
pub use queue::{MessageQueue, QueuedMessage};
pub use request_id::{RequestId, RequestIdError, RequestKind};
pub use send::{
    parse_address, resolve, validate, Address, MessageBody, Route, RouteContext, RouteError,
    SendMessageInput, TeamRoster,
};
pub use structured::{StructuredError, StructuredKind, StructuredMessage};
pub use worker::{
    BindingKey, Continued, SendMessageToWorkerInput, WireError, WorkerBindings, WorkerCaller,
    WorkerSendError, WorkerState, WorkerStatusSource, DEFAULT_ACCOUNT, MESSAGE_BYTES_MAX,
};
