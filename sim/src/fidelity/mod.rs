//! How faithfully a replay reproduces the session it was imported from
//! (`coordsim replay --fidelity`).
//!
//! A scenario written by `coordsim import` names its session in `[recording]`.
//! [`measure`] imports that session again (the import is deterministic, so it
//! yields the recording exactly as the scenario was made from it), runs one seed
//! of the scenario, and compares the two per agent: the main thread is the
//! coordinator, each subagent the worker whose prompt its spawn passed.
//!
//! - [`sequence`]: the order of spawns, tool calls and notification deliveries.
//! - [`cache`]: the simulated prompt cache's predicted usage against the recorded
//!   usage, and what each costs.
//! - [`report`]: the text table and the JSON form.

pub mod cache;
mod error;
pub mod report;
pub mod sequence;

pub use cache::{CacheFidelity, UsagePair, UsageTotals};
pub use error::FidelityError;
pub use sequence::{Divergence, Item, SequenceFidelity};

use serde::Serialize;

use crate::cache::BytesPerToken;
use crate::economics::built_in_prices;
use crate::fault::COORDINATOR_LABEL;
use crate::import::{import_claude_code, Imported, RecordedAgent, Role};
use crate::run::{run_seed, RunOptions, SeedRun};
use crate::scenario::{LoadedScenario, RecordingFormat};
use crate::trace::TraceEntry;

/// One agent's fidelity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentFidelity {
    /// `main`, or the subagent's `agentId`.
    pub name: String,
    /// Its sequence against the replay's; `None` when another agent's script plays
    /// it (two subagents spawned with one prompt), so that the trace cannot tell
    /// them apart.
    pub sequence: Option<SequenceFidelity>,
    /// Its predicted usage against its recorded usage.
    pub cache: CacheFidelity,
    /// The model both usages are priced as.
    pub priced_as: String,
}

/// How faithfully one seed of a scenario replays its recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FidelityReport {
    /// The scenario's name.
    pub scenario: String,
    /// The recorded session's file name.
    pub recording: String,
    /// The seed run.
    pub seed: u64,
    /// The main thread first, then each subagent.
    pub agents: Vec<AgentFidelity>,
    /// Every agent's requests together.
    pub cache: CacheFidelity,
    /// The bytes a token the replay's cache counted the requests at (the
    /// scenario's `[economics] bytes_per_token`).
    pub bytes_per_token: BytesPerToken,
    /// Invariant violations the run found, as `invariant: detail`.
    pub violations: Vec<String>,
}

/// Runs seed `seed` of `scenario` and compares it with the session its
/// `[recording]` names. Also returns the run, whose failures decide the exit code.
pub fn measure(
    scenario: &LoadedScenario,
    seed: u64,
) -> Result<(FidelityReport, SeedRun), FidelityError> {
    let Some(recording) = &scenario.scenario.recording else {
        return Err(FidelityError::NoRecording {
            scenario: scenario.path.clone(),
        });
    };
    let source_path = recording.source_from(&scenario.path);
    let imported = match recording.format {
        RecordingFormat::ClaudeCode => import_claude_code(&source_path),
    }
    .map_err(|error| FidelityError::Import {
        scenario: scenario.path.clone(),
        source_path: source_path.clone(),
        error,
    })?;
    if imported.scenario.coordinator.prompt != scenario.scenario.coordinator.prompt {
        return Err(FidelityError::NotItsRecording {
            scenario: scenario.path.clone(),
            source_path,
        });
    }
    let run = run_seed(scenario, seed, &RunOptions::default())?;
    let mut report = compare_run(&imported, &run.trace);
    report.scenario = scenario.scenario.name.clone();
    report.seed = seed;
    report.bytes_per_token = scenario.scenario.economics.bytes_per_token;
    report.violations = run
        .violations
        .iter()
        .map(|v| format!("{}: {}", v.invariant, v.detail))
        .collect();
    Ok((report, run))
}

/// Compares the run traced in `trace` with the recording `imported` was made from.
/// The report's scenario, seed and violations are left empty for the caller, and
/// its bytes a token are the imported scenario's.
pub fn compare_run(imported: &Imported, trace: &[TraceEntry]) -> FidelityReport {
    let mut agents: Vec<AgentFidelity> = Vec::new();
    for agent in &imported.agents {
        agents.extend(agent_fidelity(imported, agent, trace));
    }
    let cache = CacheFidelity::total(agents.iter().map(|a| &a.cache));
    FidelityReport {
        scenario: String::new(),
        recording: imported.summary.source.clone(),
        seed: 0,
        agents,
        cache,
        bytes_per_token: imported.scenario.economics.bytes_per_token,
        violations: Vec::new(),
    }
}

/// The label the trace gives `agent`'s conversation.
fn label(agent: &RecordedAgent) -> &str {
    match agent.role {
        Role::Coordinator => COORDINATOR_LABEL,
        Role::Worker => &agent.prompt,
    }
}

/// `agent`'s row, then one row per compaction of its recorded (named by its
/// compaction transcript), compared with the replay's compactions in order.
fn agent_fidelity(
    imported: &Imported,
    agent: &RecordedAgent,
    trace: &[TraceEntry],
) -> Vec<AgentFidelity> {
    let label = label(agent);
    let replayed = sequence::replayed(trace, label);
    let sequence = agent
        .scripted
        .then(|| sequence::compare(&sequence::recorded(agent), &replayed));
    let split = if agent.scripted {
        cache::split_pairs(trace, label)
    } else {
        cache::SplitPairs::default()
    };
    let (pairs, model_named) = (split.requests, split.model_named);
    // Priced as recorded where the table knows the recorded model.
    let recorded_model = agent
        .thread
        .responses
        .iter()
        .filter_map(|r| r.model.as_deref())
        .find(|model| built_in_prices().lookup(model).is_some());
    let priced_as = recorded_model
        .map(str::to_owned)
        .or(model_named)
        .unwrap_or_default();
    let mut rows = vec![AgentFidelity {
        name: agent.name.clone(),
        sequence,
        cache: CacheFidelity::of(&pairs, &priced_as),
        priced_as: priced_as.clone(),
    }];
    let replayed_compactions = replayed
        .iter()
        .filter(|item| **item == Item::Compaction)
        .count();
    let recorded = imported
        .summary
        .compactions
        .iter()
        .filter(|c| c.agent == agent.name);
    for (index, compaction) in recorded.enumerate() {
        let name = compaction
            .transcript
            .clone()
            .unwrap_or_else(|| format!("{} compaction {}", agent.name, index + 1));
        // A compaction is one item: it happened, in its place (the agent's own
        // sequence says where).
        let sequence = agent.scripted.then(|| {
            let expected = [sequence::Expected {
                item: Item::Compaction,
                continuation: false,
            }];
            let happened: &[Item] = match index < replayed_compactions {
                true => &[Item::Compaction],
                false => &[],
            };
            sequence::compare(&expected, happened)
        });
        let pairs: Vec<UsagePair> = split.compactions.get(index).copied().into_iter().collect();
        rows.push(AgentFidelity {
            name,
            sequence,
            cache: CacheFidelity::of(&pairs, &priced_as),
            priced_as: priced_as.clone(),
        });
    }
    rows
}
