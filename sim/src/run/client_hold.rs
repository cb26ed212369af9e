//! The client's side of a network transport: the hold of each request, and the
//! recording's compactions.
//!
//! A recorded session's client held each request for a while before sending it
//! (its tools ran, its user paused: a turn's `send_delay_ms`), and compacted where
//! the recording did. On a direct transport the tap does both, in front of the
//! simulated model. Over HTTP the tap sits behind the API host, where a hold reads
//! as an answer that is slow to come and runs into the client's timeout, and the
//! production provider cannot carry [`Model::compaction_wanted`] over the wire. This
//! layer, in front of the provider, holds each request before it reaches the wire
//! and answers the compaction question from the tap, whose own hold is then none
//! ([`TappedModel::held_by_client`]).

use std::sync::Arc;

use coord_runtime::world::{
    BoxFuture, Clock, Message, Model, ModelError, ModelRequest, ModelResponse,
};

use super::TappedModel;

/// `transport` (the provider, reaching the API host behind which `tap` sits), with
/// each request held on `clock` as long as the recording held it.
#[derive(Debug)]
pub struct ClientHold {
    tap: Arc<TappedModel>,
    transport: Arc<dyn Model>,
    clock: Arc<dyn Clock>,
}

impl ClientHold {
    /// Holds the requests sent through `transport` as `tap`, which must be
    /// [`TappedModel::held_by_client`], says.
    pub fn new(tap: Arc<TappedModel>, transport: Arc<dyn Model>, clock: Arc<dyn Clock>) -> Self {
        Self {
            tap,
            transport,
            clock,
        }
    }
}

impl Model for ClientHold {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let hold = self.tap.client_hold(&request);
        let transport = self.transport.clone();
        let clock = self.clock.clone();
        Box::pin(async move {
            if !hold.is_zero() {
                clock.sleep(hold).await;
            }
            transport.send(request).await
        })
    }

    fn compaction_wanted(&self, messages: &[Message]) -> Option<bool> {
        self.tap.compaction_wanted(messages)
    }
}
