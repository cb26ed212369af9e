//! The workers' tool context given to the coordinator (PROTOCOL.md §7).
//!
//! A coordinator writes instructions for workers whose tools it does not have. To
//! write instructions a worker can follow, it must know what a worker can call and
//! where the shared scratchpad is. This renders that as one text block, listing the
//! worker surface of the profile sorted by name, so the bytes are deterministic.

use std::path::Path;

use crate::profile::Profile;
use crate::tools::{Role, ToolSurface};

/// The text block telling a coordinator what its workers can call and, when the
/// session has one, where the scratchpad directory is.
pub fn worker_tools_context(profile: Profile, scratchpad_dir: Option<&Path>) -> String {
    let mut names: Vec<&str> = ToolSurface::for_role(Role::Worker, profile)
        .tools()
        .map(|tool| tool.as_str())
        .collect();
    names.sort_unstable();
    let mut text = format!(
        "Workers you start can call these tools: {}.",
        names.join(", ")
    );
    if let Some(dir) = scratchpad_dir {
        text.push_str(&format!(
            "\n\nScratchpad directory: {}\nWorkers read and write it without asking for \
             permission. Use it for knowledge that must outlive one worker, under keys of \
             the form `<agentId>/<key>`; there is no lock, so give each worker its own keys.",
            dir.display()
        ));
    }
    text
}
