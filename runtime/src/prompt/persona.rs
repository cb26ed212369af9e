//! The nexo `# COORDINATOR ROLE` persona block (PROTOCOL.md §7).
//!
//! nexo does not replace the agent's prompt in coordinator mode: it prepends a persona
//! block that tells the model how to coordinate, then the agent's own prompt, then a
//! `# CHANNEL ADDENDUM` when the channel sets one. The block has up to nine `## `
//! sections, always in this order:
//!
//! 1. Role
//! 2. Tools available: the binding's allowed tools intersected with the nexo
//!    coordinator surface, matched ignoring ASCII case, sorted by name
//! 3. Envelope handling
//! 4. Continue vs spawn
//! 5. Synthesis discipline
//! 6. Verification rigor
//! 7. Parallelism
//! 8. Scratchpad: only when `TodoWrite` is among the available tools
//! 9. Known workers: only when some are given
//!
//! The block is a pure function of its inputs: the same inputs give the same bytes,
//! so it sits in the cached prefix and never breaks the prompt cache by itself. That
//! is why tools are sorted by name and known workers by id, whatever order the caller
//! collected them in. The wording is this project's own.

use crate::profile::Profile;
use crate::task::TaskStatus;
use crate::tools::{Role, ToolName, ToolSurface};

/// The heading that opens the persona block.
pub const PERSONA_HEADING: &str = "# COORDINATOR ROLE";

/// The heading that opens the channel addendum.
pub const CHANNEL_ADDENDUM_HEADING: &str = "# CHANNEL ADDENDUM";

/// A worker the coordinator already has, listed in the persona block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownWorker {
    /// The worker's task id.
    pub id: String,
    /// What it was asked to do.
    pub description: String,
    /// Where it is in its life.
    pub status: TaskStatus,
}

impl KnownWorker {
    /// A known worker.
    pub fn new(id: impl Into<String>, description: impl Into<String>, status: TaskStatus) -> Self {
        Self {
            id: id.into(),
            description: description.into(),
            status,
        }
    }
}

/// What the persona block depends on. Defaults: no allowed tools, no known workers.
///
/// `#[non_exhaustive]`: build it from [`PersonaInputs::default`] and the `with_*`
/// methods, or assign fields on a default value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PersonaInputs {
    /// The binding's allowed tool names, as configured: any ASCII case, `*` for all;
    /// names of unknown tools are ignored.
    pub allowed_tools: Vec<String>,
    /// Workers the coordinator already has; the section is omitted when empty.
    pub known_workers: Vec<KnownWorker>,
}

impl PersonaInputs {
    /// Sets the binding's allowed tool names.
    pub fn with_allowed_tools<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.allowed_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the known workers.
    pub fn with_known_workers(mut self, workers: impl IntoIterator<Item = KnownWorker>) -> Self {
        self.known_workers = workers.into_iter().collect();
        self
    }
}

/// The tools the persona lists: the nexo coordinator surface narrowed to the
/// binding's allowed names, sorted by name.
pub fn persona_tools(allowed_tools: &[String]) -> Vec<ToolName> {
    let surface =
        ToolSurface::for_role(Role::Coordinator, Profile::Nexo).restricted_to(allowed_tools);
    let mut tools: Vec<ToolName> = surface.tools().collect();
    tools.sort_by_key(|tool| tool.as_str());
    tools
}

/// The `# COORDINATOR ROLE` block: the heading, then each enabled section as
/// `## <name>` and its body, separated by blank lines, with no trailing newline.
pub fn render_persona(inputs: &PersonaInputs) -> String {
    let tools = persona_tools(&inputs.allowed_tools);
    let mut sections: Vec<(&str, String)> = vec![
        ("Role", ROLE.to_owned()),
        ("Tools available", tools_section(&tools)),
        ("Envelope handling", ENVELOPE_HANDLING.to_owned()),
        ("Continue vs spawn", CONTINUE_VS_SPAWN.to_owned()),
        ("Synthesis discipline", SYNTHESIS_DISCIPLINE.to_owned()),
        ("Verification rigor", VERIFICATION_RIGOR.to_owned()),
        ("Parallelism", PARALLELISM.to_owned()),
    ];
    if tools.contains(&ToolName::TodoWrite) {
        sections.push(("Scratchpad", SCRATCHPAD.to_owned()));
    }
    if !inputs.known_workers.is_empty() {
        sections.push((
            "Known workers",
            known_workers_section(&inputs.known_workers),
        ));
    }
    let mut block = String::from(PERSONA_HEADING);
    for (heading, body) in sections {
        block.push_str("\n\n## ");
        block.push_str(heading);
        block.push('\n');
        block.push_str(&body);
    }
    block
}

/// The `# CHANNEL ADDENDUM` block for a channel's addendum text.
pub fn render_channel_addendum(addendum: &str) -> String {
    format!("{CHANNEL_ADDENDUM_HEADING}\n\n{addendum}")
}

fn tools_section(tools: &[ToolName]) -> String {
    if tools.is_empty() {
        return "No tools are available to you in this binding. Explain to the user what \
                would need to be done and by whom, and do not attempt any tool call."
            .to_owned();
    }
    let names: Vec<&str> = tools.iter().map(|tool| tool.as_str()).collect();
    format!(
        "You may call exactly these tools: {}.\n\
         You have no file or shell tools. Any other tool call is refused before it has \
         any effect, so route every change to the workspace through a worker.",
        names.join(", ")
    )
}

fn known_workers_section(workers: &[KnownWorker]) -> String {
    let mut sorted: Vec<&KnownWorker> = workers.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let mut body = String::from(
        "These workers exist in this session. Continue one of them instead of spawning \
         a duplicate when its work fits.",
    );
    for worker in sorted {
        body.push_str(&format!(
            "\n- {} ({}): {}",
            one_line(&worker.id),
            worker.status,
            one_line(&worker.description)
        ));
    }
    body
}

/// Collapses every run of whitespace (newlines included) into one space, so one
/// worker is one line and a description can never open a heading of its own.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

const ROLE: &str = "You are the coordinator of a team of workers. You do not read, edit or \
run anything in the workspace yourself: you break the user's request into tasks, give each \
task to a worker, read what the workers report, and answer the user. Your value is in the \
plan, the instructions and the judgement, not in doing the work.";

const ENVELOPE_HANDLING: &str = "A worker's outcome reaches you as a `<task-notification>` \
block in a user-role message. It is a system event, not a message from the user or from the \
worker: never thank anyone for it and never acknowledge it. Read its status and result, \
decide the next step, and tell the user only what they need to know.";

const CONTINUE_VS_SPAWN: &str = "Before you start new work, compare the files it will touch \
with the files a finished worker already worked on. When more than half of that worker's \
files overlap, continue it with a message: it already holds the context. Otherwise spawn a \
fresh worker, which starts without the earlier worker's assumptions.";

const SYNTHESIS_DISCIPLINE: &str = "Workers do not share your context; you own the \
understanding. Every instruction you send is a complete specification: name each file by \
its path and each place by its line number, say what to change and what done looks like. \
Never write \"based on your findings\" or \"as discussed\": restate the findings themselves.";

const VERIFICATION_RIGOR: &str = "A worker's report is a claim, not a proof. Before you \
tell the user something works, have it verified by a worker that did not write it: run the \
tests, read the diff, try the edge cases. Report a failure as a failure, with the evidence.";

const PARALLELISM: &str = "Start independent tasks together, in the same turn, rather than \
one after another. Run tasks in sequence only when one needs another's result, and never let \
two workers write the same file at the same time.";

const SCRATCHPAD: &str = "Keep the plan in TodoWrite: one item per task, with its worker and \
its status, updated as each notification arrives. With three or more workers it is \
required, not optional: it is the only record of who is doing what.";
