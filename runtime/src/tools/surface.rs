//! Tool names, roles, and which tools each role may call (PROTOCOL.md §7).
//!
//! A call outside the caller's surface never succeeds (invariant 9): the gate
//! refuses it before any effect.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

use crate::profile::Profile;

/// Every tool the runtime knows. Names match the published tools; parsing ignores
/// ASCII case (nexo matches allowed-tool lists case-insensitively).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ToolName {
    /// Spawn a worker.
    Agent,
    /// Message an agent, a team, or another process (Claude Code).
    SendMessage,
    /// Stop a task.
    TaskStop,
    /// Wait for a task's output.
    TaskOutput,
    /// Emit structured output (Claude Code coordinator).
    SyntheticOutput,
    /// Create a team (nexo).
    TeamCreate,
    /// Delete a team (nexo).
    TeamDelete,
    /// Message a peer (nexo).
    SendToPeer,
    /// List peers (nexo).
    ListPeers,
    /// Continue a finished worker (nexo).
    SendMessageToWorker,
    /// List tasks (nexo).
    TaskList,
    /// Get one task (nexo).
    TaskGet,
    /// The todo list / scratchpad plan.
    TodoWrite,
    /// Read a file.
    Read,
    /// Write a file.
    Write,
    /// Edit a file in place.
    Edit,
    /// Run a shell command.
    Bash,
    /// Find files by pattern.
    Glob,
    /// Search file contents.
    Grep,
    /// Read a scratchpad key.
    ScratchpadRead,
    /// Write a scratchpad key.
    ScratchpadWrite,
}

impl ToolName {
    /// Every tool, in declaration order.
    pub const ALL: [ToolName; 21] = [
        ToolName::Agent,
        ToolName::SendMessage,
        ToolName::TaskStop,
        ToolName::TaskOutput,
        ToolName::SyntheticOutput,
        ToolName::TeamCreate,
        ToolName::TeamDelete,
        ToolName::SendToPeer,
        ToolName::ListPeers,
        ToolName::SendMessageToWorker,
        ToolName::TaskList,
        ToolName::TaskGet,
        ToolName::TodoWrite,
        ToolName::Read,
        ToolName::Write,
        ToolName::Edit,
        ToolName::Bash,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::ScratchpadRead,
        ToolName::ScratchpadWrite,
    ];

    /// The tool's name as the model calls it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::Agent => "Agent",
            ToolName::SendMessage => "SendMessage",
            ToolName::TaskStop => "TaskStop",
            ToolName::TaskOutput => "TaskOutput",
            ToolName::SyntheticOutput => "SyntheticOutput",
            ToolName::TeamCreate => "TeamCreate",
            ToolName::TeamDelete => "TeamDelete",
            ToolName::SendToPeer => "SendToPeer",
            ToolName::ListPeers => "ListPeers",
            ToolName::SendMessageToWorker => "SendMessageToWorker",
            ToolName::TaskList => "TaskList",
            ToolName::TaskGet => "TaskGet",
            ToolName::TodoWrite => "TodoWrite",
            ToolName::Read => "Read",
            ToolName::Write => "Write",
            ToolName::Edit => "Edit",
            ToolName::Bash => "Bash",
            ToolName::Glob => "Glob",
            ToolName::Grep => "Grep",
            ToolName::ScratchpadRead => "ScratchpadRead",
            ToolName::ScratchpadWrite => "ScratchpadWrite",
        }
    }

    /// The tool named `name`, ignoring ASCII case.
    pub fn parse(name: &str) -> Option<ToolName> {
        // Names nearly always come spelled as `as_str` spells them: an exact match
        // rejects most tools on their length alone.
        let spelled = |exact: bool| {
            ToolName::ALL.into_iter().find(move |tool| {
                if exact {
                    tool.as_str() == name
                } else {
                    tool.as_str().eq_ignore_ascii_case(name)
                }
            })
        };
        spelled(true).or_else(|| spelled(false))
    }

    /// Whether the tool can change files or run arbitrary commands. Unsupervised
    /// forks do not get these by default.
    pub const fn is_destructive(self) -> bool {
        matches!(self, ToolName::Bash | ToolName::Edit | ToolName::Write)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The main thread in coordinator mode: it delegates, it has no file or shell tools.
    Coordinator,
    /// The main thread outside coordinator mode: every tool.
    Solo,
    /// A spawned worker (a subagent).
    Worker,
    /// A spawned teammate: a worker that also talks to its team with SendMessage
    /// (it answers its lead's shutdown requests that way, PROTOCOL.md §5).
    Teammate,
    /// A fork subagent running unsupervised: a worker without destructive tools.
    UnsupervisedFork,
}

/// The set of tools a caller may use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolSurface {
    tools: BTreeSet<ToolName>,
}

impl ToolSurface {
    /// The surface of `role` under `profile`.
    pub fn for_role(role: Role, profile: Profile) -> ToolSurface {
        use ToolName::*;
        let tools: BTreeSet<ToolName> = match role {
            Role::Coordinator => match profile {
                Profile::ClaudeCode | Profile::Hardened => {
                    [Agent, SendMessage, TaskStop, SyntheticOutput].into()
                }
                Profile::Nexo => [
                    TeamCreate,
                    TeamDelete,
                    SendToPeer,
                    ListPeers,
                    SendMessageToWorker,
                    TaskStop,
                    TaskList,
                    TaskGet,
                    TodoWrite,
                ]
                .into(),
            },
            Role::Solo => ToolName::ALL.into_iter().collect(),
            Role::Worker => worker_tools().collect(),
            Role::Teammate => worker_tools().chain([SendMessage]).collect(),
            Role::UnsupervisedFork => worker_tools().filter(|t| !t.is_destructive()).collect(),
        };
        ToolSurface { tools }
    }

    /// A surface of exactly `tools`.
    pub fn of(tools: impl IntoIterator<Item = ToolName>) -> ToolSurface {
        ToolSurface {
            tools: tools.into_iter().collect(),
        }
    }

    /// Whether `tool` is on the surface.
    pub fn allows(&self, tool: ToolName) -> bool {
        self.tools.contains(&tool)
    }

    /// The tools, in declaration order (see [`ToolName::ALL`]).
    pub fn tools(&self) -> impl Iterator<Item = ToolName> + '_ {
        self.tools.iter().copied()
    }

    /// This surface narrowed to `allowed` (tool names matched ignoring ASCII case;
    /// `*` allows everything; unknown names are ignored).
    pub fn restricted_to(&self, allowed: &[String]) -> ToolSurface {
        if allowed.iter().any(|name| name == "*") {
            return self.clone();
        }
        let allowed: BTreeSet<ToolName> = allowed
            .iter()
            .filter_map(|name| ToolName::parse(name))
            .collect();
        ToolSurface {
            tools: self.tools.intersection(&allowed).copied().collect(),
        }
    }

    /// This surface without `tool`.
    pub fn without(mut self, tool: ToolName) -> ToolSurface {
        self.tools.remove(&tool);
        self
    }
}

/// Workers get everything except the team and coordinator-only messaging tools.
fn worker_tools() -> impl Iterator<Item = ToolName> {
    ToolName::ALL.into_iter().filter(|tool| {
        !matches!(
            tool,
            ToolName::TeamCreate
                | ToolName::TeamDelete
                | ToolName::SendMessage
                | ToolName::SyntheticOutput
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_parses_in_any_ascii_case_and_no_two_names_differ_only_in_case() {
        for tool in ToolName::ALL {
            let name = tool.as_str();
            assert_eq!(ToolName::parse(name), Some(tool));
            assert_eq!(ToolName::parse(&name.to_ascii_lowercase()), Some(tool));
            assert_eq!(ToolName::parse(&name.to_ascii_uppercase()), Some(tool));
            let same_ignoring_case = ToolName::ALL
                .into_iter()
                .filter(|other| other.as_str().eq_ignore_ascii_case(name))
                .count();
            assert_eq!(same_ignoring_case, 1, "{name}");
        }
        assert_eq!(ToolName::parse("Rea"), None);
        assert_eq!(ToolName::parse(""), None);
    }
}
