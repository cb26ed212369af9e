//! The tools each agent's model was offered, held to PROTOCOL.md §7's surfaces
//! ([`Surface`]): a coordinator offered a shell, or a worker offered SendMessage,
//! is a [`SimEvent::ToolsOfferedWrong`] whether or not the model ever calls it.
//!
//! An agent may be offered fewer tools than its surface (an agent definition such
//! as Explore narrows a worker's, a nexo binding a coordinator's), never more,
//! except the main thread outside coordinator mode, which has every tool; a
//! worker launched as a read-only definition (Explore, Plan) is held to the
//! tools that definition grants. A
//! fork is not judged here: it is offered its parent's tools byte for byte, so
//! that its prefix reads the parent's cache (§6), and its refusals of the
//! destructive ones are judged by the calls that succeed (`check::tool_surface`).
//!
//! An agent's tools are one shared list from request to request, so each list is
//! judged once per agent, when it first reaches the model.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use coord_runtime::profile::Profile;
use coord_runtime::tools::ToolName;
use coord_runtime::world::ToolDefinition;

use crate::check::{read_only_definition_allows, Surface};
use crate::trace::{Name, SimEvent, Trace};

/// Judges the tools offered to each agent.
#[derive(Debug)]
pub struct SurfaceWitness {
    profile: Profile,
    coordinator_mode: bool,
    trace: Trace,
    /// The address of the tool list each agent was last judged on.
    judged: Mutex<HashMap<String, usize>>,
}

impl SurfaceWitness {
    /// The witness of a run in `profile`, whose main thread is or is not in
    /// coordinator mode.
    pub fn new(profile: Profile, coordinator_mode: bool, trace: Trace) -> Self {
        Self {
            profile,
            coordinator_mode,
            trace,
            judged: Mutex::new(HashMap::new()),
        }
    }

    /// Judges `tools`, offered to `agent`, whose role the tap calls `role`, and
    /// which its launch asked to be of `agent_type`.
    pub fn offered(
        &self,
        agent: &str,
        role: &str,
        agent_type: Option<&str>,
        tools: &Arc<Vec<ToolDefinition>>,
    ) {
        if role == "fork" {
            return;
        }
        let address = Arc::as_ptr(tools) as usize;
        {
            let mut judged = self.judged.lock().expect("surface witness poisoned");
            if judged.get(agent) == Some(&address) {
                return;
            }
            judged.insert(agent.to_owned(), address);
        }
        let surface = Surface::of_role(role, self.coordinator_mode);
        let outside: Vec<&str> = tools
            .iter()
            .map(|tool| tool.name.as_str())
            .filter(|name| {
                !ToolName::parse(name).is_some_and(|tool| surface.allows(tool, self.profile))
            })
            .collect();
        // The coordinator's and a teammate's surfaces are their roles'; a worker's
        // is also its definition's.
        let agent_type = agent_type.filter(|_| role == "worker");
        let ungranted: Vec<&str> = agent_type
            .map(|agent_type| {
                tools
                    .iter()
                    .map(|tool| tool.name.as_str())
                    .filter(|name| !outside.contains(name))
                    .filter(|name| {
                        ToolName::parse(name)
                            .is_some_and(|tool| !read_only_definition_allows(agent_type, tool))
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A main thread outside coordinator mode does its own work, with every tool
        // (§7); offered fewer, it is a coordinator in all but name.
        let lacking: Vec<&str> = if surface == Surface::Solo {
            ToolName::ALL
                .into_iter()
                .map(ToolName::as_str)
                .filter(|name| !tools.iter().any(|tool| tool.name == *name))
                .collect()
        } else {
            Vec::new()
        };
        let detail = if !outside.is_empty() {
            format!(
                "the {role} {agent:?} was offered {}, which the {role} surface of {} does not have",
                outside.join(", "),
                self.profile
            )
        } else if !lacking.is_empty() {
            format!(
                "the main thread {agent:?}, outside coordinator mode, was offered no {}: outside coordinator mode it has every tool",
                lacking.join(", ")
            )
        } else if let (Some(agent_type), false) = (agent_type, ungranted.is_empty()) {
            format!(
                "the {role} {agent:?}, launched as {agent_type}, was offered {}, which a read-only definition does not grant",
                ungranted.join(", ")
            )
        } else {
            return;
        };
        self.trace.push(
            agent,
            SimEvent::ToolsOfferedWrong {
                agent: Name::new(agent),
                detail,
            },
        );
    }
}
