//! Agent definitions: the small, finite registry of worker types a spawn can name.

use crate::profile::Profile;
use crate::tools::{Role, ToolName, ToolSurface};

/// Which tools a definition grants, on top of the worker surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolGrant {
    /// The whole worker surface.
    All,
    /// The worker surface restricted to these tools.
    Only(Vec<ToolName>),
}

/// One agent type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// The `subagent_type` that names it.
    pub agent_type: &'static str,
    /// What it is for, as shown to the coordinator.
    pub when_to_use: &'static str,
    /// Its system prompt.
    pub system_prompt: &'static str,
    /// Its tools.
    pub tools: ToolGrant,
    /// Whether it always runs in the background.
    pub background: bool,
    /// One-shot agents answer once and cannot be continued: their result has no
    /// agent-id / continuation trailer.
    pub one_shot: bool,
}

impl AgentDefinition {
    /// The tool surface a worker of this type gets under `profile`.
    pub fn surface(&self, profile: Profile) -> ToolSurface {
        let worker = ToolSurface::for_role(Role::Worker, profile);
        match &self.tools {
            ToolGrant::All => worker,
            ToolGrant::Only(tools) => {
                let names: Vec<String> = tools.iter().map(|t| t.as_str().to_owned()).collect();
                worker.restricted_to(&names)
            }
        }
    }
}

const READ_ONLY: [ToolName; 5] = [
    ToolName::Read,
    ToolName::Glob,
    ToolName::Grep,
    ToolName::ScratchpadRead,
    ToolName::Bash,
];

/// The built-in definitions, in the order they are listed to the model.
pub fn builtin_definitions() -> Vec<AgentDefinition> {
    vec![
        AgentDefinition {
            agent_type: "general-purpose",
            when_to_use: "Research, multi-step tasks, and code changes.",
            system_prompt: "You are a worker agent. Complete the task you are given, then \
                            reply with a concise report of what you did and found.",
            tools: ToolGrant::All,
            background: false,
            one_shot: false,
        },
        AgentDefinition {
            agent_type: "Explore",
            when_to_use: "Fast, read-only exploration of a codebase.",
            system_prompt: "You explore code without changing it. Report file paths and \
                            line numbers for everything you find.",
            tools: ToolGrant::Only(READ_ONLY.to_vec()),
            background: false,
            one_shot: true,
        },
        AgentDefinition {
            agent_type: "Plan",
            when_to_use: "Designing an implementation plan before any change.",
            system_prompt: "You design implementation plans. Do not change files. Return \
                            numbered steps naming the files and functions involved.",
            tools: ToolGrant::Only(READ_ONLY.to_vec()),
            background: false,
            one_shot: true,
        },
        AgentDefinition {
            agent_type: "verification",
            when_to_use: "Independently checking that a change works.",
            system_prompt: "You verify work done by others. Run the tests and checks that \
                            prove or disprove it; report evidence, not opinions.",
            tools: ToolGrant::All,
            background: false,
            one_shot: false,
        },
        AgentDefinition {
            agent_type: "worker",
            when_to_use: "A coordinator's general worker.",
            system_prompt: "You are a worker spawned by a coordinator. Do exactly the task \
                            given; your final message is your report.",
            tools: ToolGrant::All,
            background: true,
            one_shot: false,
        },
        AgentDefinition {
            agent_type: crate::fork::FORK_AGENT_TYPE,
            when_to_use: "A copy of the current conversation that works on one directive.",
            system_prompt: "",
            tools: ToolGrant::All,
            background: true,
            one_shot: false,
        },
    ]
}

/// The registry of agent types a session knows.
#[derive(Debug, Clone)]
pub struct AgentRegistry {
    definitions: Vec<AgentDefinition>,
}

impl Default for AgentRegistry {
    fn default() -> Self {
        Self {
            definitions: builtin_definitions(),
        }
    }
}

impl AgentRegistry {
    /// The definition named `agent_type` (exact match).
    pub fn get(&self, agent_type: &str) -> Option<&AgentDefinition> {
        self.definitions
            .iter()
            .find(|definition| definition.agent_type == agent_type)
    }

    /// Every definition, in listing order.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.definitions.iter()
    }

    /// The names of every definition, for error messages.
    pub fn names(&self) -> Vec<&'static str> {
        self.definitions.iter().map(|d| d.agent_type).collect()
    }
}
