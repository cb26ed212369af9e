//! The verdict of every invariant of PROTOCOL.md §8 on one observed run: upheld,
//! broken, or not observable on this target.
//!
//! The checkers are [`crate::check`]'s, run on the [witness
//! trace](super::observation::witness_trace). A checker whose evidence the real
//! process does not show (its disk operations, its tool gate, its bindings) would
//! pass for lack of evidence; that is not a verdict, so it is reported as "not
//! observable on this target" instead. [`OBSERVABLE`] lists the invariants the
//! witness trace always carries evidence for; message-delivery and no-escape have
//! evidence only in runs that show it (a SendMessage accepted on the wire, a task
//! directory planted as a symlink).

use serde::Serialize;

use crate::check::{check_all, judge, Invariant, Violation};
use crate::fault::FaultKind;
use crate::scenario::Scenario;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The invariants a run of the Claude Code CLI shows evidence for, and why each is.
pub const OBSERVABLE: [(Invariant, &str); 5] = [
    (
        Invariant::NotifyOnce,
        "launch results, worker endings served and envelopes delivered are all on the wire",
    ),
    (
        Invariant::NoForgery,
        "every envelope the coordinator is handed is parsed from its requests and matched to a worker ending",
    ),
    (
        Invariant::NeverBlocks,
        "the Agent result says whether the CLI launched the worker in the background",
    ),
    (
        Invariant::Liveness,
        "a launched task whose worker never got its final answer is open at the end",
    ),
    (
        Invariant::NotVacuous,
        "the host counts the script turns it served to each agent",
    ),
];

/// Why the other invariants cannot be judged on a real process.
fn not_observable_reason(invariant: Invariant) -> &'static str {
    match invariant {
        Invariant::MessageDelivery => {
            "no SendMessage to a launched worker was answered without an error in this run"
        }
        Invariant::MailboxDurability => "needs crashes and mailbox reads the CLI does not expose",
        Invariant::NoLostUpdate | Invariant::NoEscape => {
            "needs a witness of every disk operation; the CLI's file writes are not intercepted"
        }
        Invariant::ForkPrefix => {
            "the CLI's system prompt and tools are dropped from the observation (they are its code)"
        }
        Invariant::ToolSurface => {
            "the CLI's tool gate runs in process; tool results are not witnessed"
        }
        Invariant::BindingIsolation => "the CLI has no channel bindings",
        Invariant::Determinism => "runs use real time and are not reproducible by seed",
        Invariant::DurableOutput => {
            "output files are observed after the process ends, not at notification time"
        }
        _ => "not observable on this target",
    }
}

/// What one invariant's checker says about one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The checker ran on evidence and found nothing.
    Upheld,
    /// The checker found a violation.
    Broken,
    /// The target shows no evidence for this invariant.
    NotObservable,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Upheld => "upheld",
            Verdict::Broken => "broken",
            Verdict::NotObservable => "not observable on this target",
        })
    }
}

/// One invariant's verdict and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InvariantVerdict {
    /// The checker's name.
    pub invariant: &'static str,
    /// What it found.
    pub verdict: Verdict,
    /// The evidence it had, or why it had none.
    pub detail: String,
}

/// The judgment of one run: a verdict per invariant, and what makes the run fail
/// after the scenario's expectations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgment {
    /// One per invariant, in PROTOCOL.md order.
    pub verdicts: Vec<InvariantVerdict>,
    /// The violations of observable invariants.
    pub violations: Vec<Violation>,
    /// What fails the run (an unexpected violation, an expected one not found).
    pub failures: Vec<Violation>,
}

/// What `invariant`'s checker has to go on in `trace`, if anything: the
/// [`OBSERVABLE`] evidence; for message-delivery the accepted messages and the
/// recipients' requests; and for no-escape the writes made through a planted task
/// directory in a run with `symlink-at-output` ([`super::plant`]).
fn evidence(invariant: Invariant, trace: &[TraceEntry]) -> Option<&'static str> {
    if let Some((_, evidence)) = OBSERVABLE.iter().find(|(i, _)| *i == invariant) {
        return Some(evidence);
    }
    if invariant == Invariant::MessageDelivery {
        let messages_witnessed = trace.iter().any(|entry| {
            matches!(
                &entry.typed,
                TraceEvent::Sim(SimEvent::MessagesWitnessed { messages }) if !messages.is_empty()
            )
        });
        return messages_witnessed.then_some(
            "each SendMessage the CLI answered without an error is looked for in its recipient worker's requests",
        );
    }
    let planted = trace.iter().any(|entry| {
        matches!(
            &entry.typed,
            TraceEvent::Sim(SimEvent::FaultFired { kind, .. }) if *kind == FaultKind::SymlinkAtOutput
        )
    });
    (invariant == Invariant::NoEscape && planted).then_some(
        "the task directory was planted as a symlink out of the session: every file the CLI wrote through it is found outside",
    )
}

/// Judges `trace`, the witness trace of one run of `scenario`.
pub fn judge_witness(scenario: &Scenario, trace: &[TraceEntry]) -> Judgment {
    let observable = |invariant: Invariant| evidence(invariant, trace).is_some();
    let violations: Vec<Violation> = check_all(trace)
        .into_iter()
        .filter(|violation| {
            Invariant::ALL
                .iter()
                .any(|i| i.as_str() == violation.invariant && observable(*i))
        })
        .collect();
    let verdicts = Invariant::ALL
        .iter()
        .map(|invariant| {
            let found: Vec<&Violation> = violations
                .iter()
                .filter(|v| v.invariant == invariant.as_str())
                .collect();
            let (verdict, detail) = match evidence(*invariant, trace) {
                None => (
                    Verdict::NotObservable,
                    not_observable_reason(*invariant).to_owned(),
                ),
                Some(_) if !found.is_empty() => (
                    Verdict::Broken,
                    found
                        .iter()
                        .map(|v| v.detail.as_str())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                Some(evidence) => (Verdict::Upheld, evidence.to_owned()),
            };
            InvariantVerdict {
                invariant: invariant.as_str(),
                verdict,
                detail,
            }
        })
        .collect();
    let failures = judge(scenario, &violations);
    Judgment {
        verdicts,
        violations,
        failures,
    }
}
