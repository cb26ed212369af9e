//! Whose conversation a request belongs to, named as a run's trace names it.

use coord_runtime::world::ModelRequest;

use crate::fault::COORDINATOR_LABEL;
use crate::model::ConversationView;

/// Labels requests by agent: `coordinator` for the conversation whose prompt is the
/// coordinator's, otherwise the conversation's prompt (its first user text; a
/// fork's directive). A recorder and a replay that label alike can replay each
/// agent's calls in order, whatever order the agents interleave in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLabels {
    coordinator_prompt: String,
}

impl AgentLabels {
    /// Labels with `coordinator_prompt` as the coordinator's prompt.
    pub fn new(coordinator_prompt: impl Into<String>) -> Self {
        Self {
            coordinator_prompt: coordinator_prompt.into(),
        }
    }

    /// The label of `request`.
    pub fn label(&self, request: &ModelRequest) -> String {
        self.label_viewed(&ConversationView::of(request))
    }

    /// The label of a request already read into `view`.
    pub fn label_viewed(&self, view: &ConversationView) -> String {
        if view.prompt == self.coordinator_prompt {
            COORDINATOR_LABEL.to_owned()
        } else {
            view.prompt.clone()
        }
    }
}
