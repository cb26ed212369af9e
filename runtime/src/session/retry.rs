//! Model calls with retries: a transient API error (429, 529, a timeout, a failed
//! connection) is waited out rather than failing the agent, as the published
//! harnesses do.
//!
//! This is the runtime's only retry layer: a [`Model`](crate::world::Model),
//! the Anthropic provider included, makes one attempt per call, so one transient
//! error sequence costs at most `model_retries_max + 1` attempts. The waits go
//! through the world clock, so under simulation virtual time drives them.

use std::sync::Arc;
use std::time::Duration;

use crate::event::RuntimeEvent;
use crate::probe::Probe;
use crate::world::{ModelError, ModelRequest, ModelResponse};

use super::{AgentRef, Session};

/// The longest delay, as a multiple of the first.
const BACKOFF_MULTIPLE_MAX: u32 = 32;

impl Session {
    /// Sends `request` for `agent`, retrying transient errors up to the configured
    /// number of times with doubling delays (a `retry-after` the API sent wins).
    /// Every attempt shares the caller's request, which the caller keeps (an agent
    /// forks from it, and takes its messages back for the next turn).
    /// The last error is returned when the retries run out or the error is not
    /// transient.
    pub(crate) async fn send_with_retry(
        &self,
        agent: &AgentRef,
        request: &Arc<ModelRequest>,
    ) -> Result<ModelResponse, ModelError> {
        let config = &self.inner.config;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let error = match self.inner.effects.model.send(Arc::clone(request)).await {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            if attempt > config.model_retries_max || !error.is_transient() {
                Probe::ModelCallGivenUp.reach(&*self.inner.world.journal);
                return Err(error);
            }
            let multiple = 1u32 << (attempt - 1).min(5);
            let backoff = config.model_retry_backoff * multiple.min(BACKOFF_MULTIPLE_MAX);
            let delay = match error {
                ModelError::RateLimited {
                    retry_after: Some(after),
                } => after,
                _ => backoff,
            };
            self.inner
                .world
                .journal
                .record(RuntimeEvent::ModelCallRetried {
                    agent: agent.to_string(),
                    attempt,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    error: error.to_string(),
                });
            Probe::ModelCallRetried.reach(&*self.inner.world.journal);
            self.inner
                .world
                .clock
                .sleep(delay.max(Duration::ZERO))
                .await;
        }
    }
}
