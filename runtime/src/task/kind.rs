//! The seven task types and their id prefixes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of work a task is. The kind fixes the first character of its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// A shell command (`b`).
    LocalBash,
    /// A subagent on this machine (`a`).
    LocalAgent,
    /// An agent on another host (`r`).
    RemoteAgent,
    /// A teammate in this process (`t`).
    InProcessTeammate,
    /// A workflow (`w`).
    LocalWorkflow,
    /// An MCP monitor (`m`).
    MonitorMcp,
    /// A background "dream" task (`d`).
    Dream,
}

impl TaskKind {
    /// Every kind, in declaration order.
    pub const ALL: [TaskKind; 7] = [
        TaskKind::LocalBash,
        TaskKind::LocalAgent,
        TaskKind::RemoteAgent,
        TaskKind::InProcessTeammate,
        TaskKind::LocalWorkflow,
        TaskKind::MonitorMcp,
        TaskKind::Dream,
    ];

    /// The id prefix of this kind.
    pub const fn id_prefix(self) -> char {
        match self {
            TaskKind::LocalBash => 'b',
            TaskKind::LocalAgent => 'a',
            TaskKind::RemoteAgent => 'r',
            TaskKind::InProcessTeammate => 't',
            TaskKind::LocalWorkflow => 'w',
            TaskKind::MonitorMcp => 'm',
            TaskKind::Dream => 'd',
        }
    }

    /// The kind an id prefix stands for.
    pub fn from_id_prefix(prefix: char) -> Option<TaskKind> {
        TaskKind::ALL
            .into_iter()
            .find(|kind| kind.id_prefix() == prefix)
    }

    /// The wire name (`local_bash`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskKind::LocalBash => "local_bash",
            TaskKind::LocalAgent => "local_agent",
            TaskKind::RemoteAgent => "remote_agent",
            TaskKind::InProcessTeammate => "in_process_teammate",
            TaskKind::LocalWorkflow => "local_workflow",
            TaskKind::MonitorMcp => "monitor_mcp",
            TaskKind::Dream => "dream",
        }
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
