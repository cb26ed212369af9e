//! Invariant checkers and the verdict: one checker per invariant of PROTOCOL.md §8,
//! each reading only the trace, and the rules that turn a seed's violations into
//! its failures (the scenario's expected violation, its promised traffic). A
//! violation names the invariant and the events involved, with their virtual times.

mod binding_isolation;
mod call_policies;
mod invariants;
mod lock_budget;
mod prompt_assembly;
mod request_rules;
mod shell_endings;
mod spawn_answers;
mod spawn_mode;
mod stop_cascade;
mod surfaces;
mod task_output;
mod task_progress;
mod verdict;

pub use binding_isolation::TASK_LIST;
pub use call_policies::{
    judge_compaction_timing, judge_model_retries, COMPACTION_KEPT, COMPACTION_TIMING, MODEL_RETRIES,
};
pub use prompt_assembly::{judge_prompt, SystemRule, PROMPT_ASSEMBLY};
pub use request_rules::{api_refusal, judge_requests, API_REQUEST};
pub(crate) use spawn_answers::is_remote_id;
pub use spawn_answers::{judge_spawn_answers, INLINE_RESULT, LAUNCH_ANSWER, TASK_IDS};
pub(crate) use spawn_answers::{ID_ALPHABET, ID_BODY_LEN};
pub use spawn_mode::{judge_spawn_mode, SPAWN_MODE};
pub use stop_cascade::ends_by_kill;
pub use surfaces::{read_only_definition_allows, Surface};
pub use task_output::{judge_task_output, TASK_OUTPUT};
pub use task_progress::{judge_task_progress, TASK_PROGRESS};
pub use verdict::{
    judge, judge_calls, judge_panics, judge_traffic, traffic, EXPECTED_OUTCOME, RUNTIME_PANIC,
    TRAFFIC_MIN,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::trace::TraceEntry;

/// The invariants of PROTOCOL.md §8, by checker name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Invariant {
    /// 1. One terminal state and exactly one notification per task.
    NotifyOnce,
    /// 2. No accepted envelope was written by a worker.
    NoForgery,
    /// 3. The coordinator never blocks on a worker.
    NeverBlocks,
    /// 4. Queued messages are delivered at round boundaries, exactly once.
    MessageDelivery,
    /// 5. Acknowledged mailbox writes survive crashes.
    MailboxDurability,
    /// 6. No lost update goes unreported.
    NoLostUpdate,
    /// 7. No write through a symlink or outside the writer's tree.
    NoEscape,
    /// 8. Fork requests share the parent's prefix unless a break was declared.
    ForkPrefix,
    /// 9. No tool call outside the caller's surface succeeds.
    ToolSurface,
    /// 10. No worker of one binding is visible to another.
    BindingIsolation,
    /// 11. After faults heal, every task ends within the bound.
    Liveness,
    /// 12. The same seed gives the same trace.
    Determinism,
    /// 13. A notified output file is durable.
    DurableOutput,
    /// 14. Every scripted agent plays its script to the end, or the run says why.
    NotVacuous,
}

impl Invariant {
    /// Every invariant, in PROTOCOL.md order.
    pub const ALL: [Invariant; 14] = [
        Invariant::NotifyOnce,
        Invariant::NoForgery,
        Invariant::NeverBlocks,
        Invariant::MessageDelivery,
        Invariant::MailboxDurability,
        Invariant::NoLostUpdate,
        Invariant::NoEscape,
        Invariant::ForkPrefix,
        Invariant::ToolSurface,
        Invariant::BindingIsolation,
        Invariant::Liveness,
        Invariant::Determinism,
        Invariant::DurableOutput,
        Invariant::NotVacuous,
    ];

    /// The checker's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Invariant::NotifyOnce => "notify-once",
            Invariant::NoForgery => "no-forgery",
            Invariant::NeverBlocks => "never-blocks",
            Invariant::MessageDelivery => "message-delivery",
            Invariant::MailboxDurability => "mailbox-durability",
            Invariant::NoLostUpdate => "no-lost-update",
            Invariant::NoEscape => "no-escape",
            Invariant::ForkPrefix => "fork-prefix",
            Invariant::ToolSurface => "tool-surface",
            Invariant::BindingIsolation => "binding-isolation",
            Invariant::Liveness => "liveness",
            Invariant::Determinism => "determinism",
            Invariant::DurableOutput => "durable-output",
            Invariant::NotVacuous => "not-vacuous",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A simulator event at `time_ms`, as a trace entry: for the checkers' tests.
#[cfg(test)]
fn sim_entry(time_ms: u64, event: crate::trace::SimEvent) -> TraceEntry {
    TraceEntry {
        time_ms,
        actor: "sim".into(),
        typed: crate::trace::TraceEvent::Sim(event),
    }
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The checker's name, e.g. `notify-once`.
    pub invariant: &'static str,
    /// What went wrong, naming the events and their virtual times.
    pub detail: String,
}

impl Violation {
    fn new(invariant: Invariant, detail: String) -> Self {
        Self {
            invariant: invariant.as_str(),
            detail,
        }
    }
}

/// Runs every single-trace checker over `trace`.
pub fn check_all(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut violations = Vec::new();
    violations.extend(invariants::notify_once(trace));
    violations.extend(stop_cascade::stop_cascade(trace));
    violations.extend(invariants::no_forgery(trace));
    violations.extend(shell_endings::shell_endings(trace));
    violations.extend(invariants::never_blocks(trace));
    violations.extend(invariants::message_delivery(trace));
    violations.extend(invariants::mailbox_durability(trace));
    violations.extend(lock_budget::lock_budget(trace));
    violations.extend(invariants::no_lost_update(trace));
    violations.extend(invariants::no_escape(trace));
    violations.extend(invariants::fork_prefix(trace));
    violations.extend(invariants::tool_surface(trace));
    violations.extend(binding_isolation::binding_isolation(trace));
    violations.extend(binding_isolation::listings_incomplete(trace));
    violations.extend(invariants::liveness(trace));
    violations.extend(invariants::durable_output(trace));
    violations.extend(invariants::not_vacuous(trace));
    violations
}

/// Invariant 12: two runs of one seed must leave the same trace. Names the first
/// entry where `first` and `second` differ.
pub fn determinism(first: &[TraceEntry], second: &[TraceEntry]) -> Option<Violation> {
    let describe = |entry: Option<&TraceEntry>| match entry {
        Some(entry) => format!(
            "[{} ms] {} {}",
            entry.time_ms,
            entry.actor,
            entry.event_json()
        ),
        None => "the end of the trace".to_owned(),
    };
    let index = (0..first.len().max(second.len())).find(|&i| first.get(i) != second.get(i))?;
    Some(Violation::new(
        Invariant::Determinism,
        format!(
            "the two runs diverge at trace entry {index}: first run {}, second run {}",
            describe(first.get(index)),
            describe(second.get(index))
        ),
    ))
}
