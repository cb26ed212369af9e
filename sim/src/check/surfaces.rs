//! The tool surfaces of PROTOCOL.md §7, as the protocol writes them: the judge's own
//! copy of the table, so that a tool that slips into (or out of) the runtime's
//! `ToolSurface::for_role` does not move the judge with it.
//!
//! - Coordinator: claude-code and hardened `Agent, SendMessage, TaskStop,
//!   SyntheticOutput`; nexo `TeamCreate, TeamDelete, SendToPeer, ListPeers,
//!   SendMessageToWorker, TaskStop, TaskList, TaskGet, TodoWrite`. No file or shell
//!   tool.
//! - The main thread outside coordinator mode: every tool.
//! - Worker: every tool except `TeamCreate, TeamDelete, SendMessage,
//!   SyntheticOutput`; a teammate (a worker launched into a team) also has
//!   `SendMessage`.
//! - An unsupervised fork (how the simulator runs every fork, the runtime's
//!   default, §6): a worker's tools without the destructive `Bash, Edit, Write`.
//!
//! A worker launched with a read-only definition (§2: `Explore` and `Plan`, which
//! look and report) narrows its surface further, to the tools that read, and Bash,
//! whose commands the definition's prompt keeps to looking: `Read, Glob, Grep,
//! ScratchpadRead, Bash` ([`read_only_definition_allows`]).

use coord_runtime::profile::Profile;
use coord_runtime::tools::ToolName;

/// Whose tools: the tap's name for an agent's role, and the main thread's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The main thread in coordinator mode.
    Coordinator,
    /// The main thread outside coordinator mode.
    Solo,
    /// A worker.
    Worker,
    /// A worker launched into a team.
    Teammate,
    /// A fork, run unsupervised.
    UnsupervisedFork,
}

impl Surface {
    /// The surface of an agent the tap names `role` (`coordinator`, `teammate`,
    /// `fork` or `worker`), in a run whose main thread is or is not in coordinator
    /// mode.
    pub fn of_role(role: &str, coordinator_mode: bool) -> Surface {
        match role {
            "coordinator" if coordinator_mode => Surface::Coordinator,
            "coordinator" => Surface::Solo,
            "teammate" => Surface::Teammate,
            "fork" => Surface::UnsupervisedFork,
            _ => Surface::Worker,
        }
    }

    /// Whether PROTOCOL.md §7 puts `tool` on this surface in `profile`.
    pub fn allows(self, tool: ToolName, profile: Profile) -> bool {
        use ToolName::*;
        let worker = !matches!(
            tool,
            TeamCreate | TeamDelete | SendMessage | SyntheticOutput
        );
        match self {
            Surface::Coordinator => match profile {
                Profile::ClaudeCode | Profile::Hardened => {
                    matches!(tool, Agent | SendMessage | TaskStop | SyntheticOutput)
                }
                Profile::Nexo => matches!(
                    tool,
                    TeamCreate
                        | TeamDelete
                        | SendToPeer
                        | ListPeers
                        | SendMessageToWorker
                        | TaskStop
                        | TaskList
                        | TaskGet
                        | TodoWrite
                ),
            },
            Surface::Solo => true,
            Surface::Worker => worker,
            Surface::Teammate => worker || tool == SendMessage,
            Surface::UnsupervisedFork => worker && !matches!(tool, Bash | Edit | Write),
        }
    }
}

/// The `subagent_type`s whose workers only look and report.
const READ_ONLY_DEFINITIONS: [&str; 2] = ["Explore", "Plan"];

/// Whether a worker launched as `agent_type` may be offered `tool`: any tool of its
/// surface unless the definition is read-only, and then only the tools that
/// read (and Bash, whose commands the definition's prompt keeps to looking).
pub fn read_only_definition_allows(agent_type: &str, tool: ToolName) -> bool {
    use ToolName::*;
    !READ_ONLY_DEFINITIONS.contains(&agent_type)
        || matches!(tool, Read | Glob | Grep | ScratchpadRead | Bash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_surfaces_are_the_protocols_lists() {
        // Goal: the judge's table says what PROTOCOL.md §7 says, tool by tool.
        let on = |surface: Surface, profile: Profile| -> Vec<&str> {
            ToolName::ALL
                .into_iter()
                .filter(|tool| surface.allows(*tool, profile))
                .map(ToolName::as_str)
                .collect()
        };
        let mut coordinator = on(Surface::Coordinator, Profile::ClaudeCode);
        coordinator.sort_unstable();
        assert_eq!(
            coordinator,
            ["Agent", "SendMessage", "SyntheticOutput", "TaskStop"]
        );
        assert_eq!(
            on(Surface::Coordinator, Profile::Hardened).len(),
            4,
            "hardened coordinates as claude-code does"
        );
        let mut nexo = on(Surface::Coordinator, Profile::Nexo);
        nexo.sort_unstable();
        assert_eq!(
            nexo,
            [
                "ListPeers",
                "SendMessageToWorker",
                "SendToPeer",
                "TaskGet",
                "TaskList",
                "TaskStop",
                "TeamCreate",
                "TeamDelete",
                "TodoWrite"
            ]
        );
        let worker = on(Surface::Worker, Profile::Hardened);
        for absent in ["TeamCreate", "TeamDelete", "SendMessage", "SyntheticOutput"] {
            assert!(!worker.contains(&absent), "{absent}");
        }
        assert_eq!(worker.len(), ToolName::ALL.len() - 4);
        assert!(on(Surface::Teammate, Profile::Hardened).contains(&"SendMessage"));
        let fork = on(Surface::UnsupervisedFork, Profile::Hardened);
        assert_eq!(fork.len(), worker.len() - 3);
        assert!(!fork.contains(&"Bash") && !fork.contains(&"Edit") && !fork.contains(&"Write"));
        assert_eq!(on(Surface::Solo, Profile::Nexo).len(), ToolName::ALL.len());
        for agent_type in ["Explore", "Plan"] {
            let granted: Vec<&str> = ToolName::ALL
                .into_iter()
                .filter(|tool| read_only_definition_allows(agent_type, *tool))
                .map(ToolName::as_str)
                .collect();
            assert_eq!(granted, ["Read", "Bash", "Glob", "Grep", "ScratchpadRead"]);
        }
        assert!(read_only_definition_allows(
            "general-purpose",
            ToolName::Edit
        ));
        assert_eq!(
            Surface::of_role("coordinator", false),
            Surface::Solo,
            "outside coordinator mode the main thread has every tool"
        );
    }
}
