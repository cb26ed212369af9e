//! A cassette as the simulated model's policy: how a scenario's `[model] cassette`
//! drives a run.
//!
//! The replay takes the scripts' place and nothing else's. The run's tap still
//! records every call into the trace and its cost meter still prices it (with the
//! recorded `usage`), and the scenario's fault schedule still applies on top: a
//! model fault fires before the cassette is asked, so a scenario can inject a 429
//! into a recorded session, and a by-hash replay answers the retried request. The
//! cassette already holds what model faults did while it was recorded (their
//! errors, the calls that never answered), so a scenario replaying a recording
//! schedules only the faults it wants on top.
//!
//! Each exchange is answered after its recorded latency, so a replay keeps the
//! recording's timing and its interleaving. At the end of the run, every miss and
//! every exchange never replayed is a run failure ([`REPLAY_MISS`],
//! [`REPLAY_UNUSED`]) whose text carries the miss's diff.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use coord_runtime::world::{ContentBlock, ModelRequest};
use rand_chacha::rand_core::RngCore;

use super::error::CassetteError;
use super::format::{Cassette, Outcome};
use super::label::AgentLabels;
use super::replay::{MatchMode, ReplayModel, ReplayReport, Replayed};
use crate::check::Violation;
use crate::model::{ConversationView, ModelPolicy, PolicyReply};
use crate::scenario::{CassetteMatch, LoadedScenario};

/// The failure a request the cassette could not answer is reported under.
pub const REPLAY_MISS: &str = "cassette-miss";
/// The failure exchanges a run never replayed are reported under.
pub const REPLAY_UNUSED: &str = "cassette-unused";
/// Misses reported with their diff; the rest are counted.
const MISSES_SHOWN_MAX: usize = 3;
/// Unused exchanges listed; the rest are counted.
const UNUSED_SHOWN_MAX: usize = 10;

/// The replay of a scenario's cassette, as a model policy.
#[derive(Debug)]
pub struct CassettePolicy {
    replay: ReplayModel,
    labels: AgentLabels,
    path: PathBuf,
}

impl CassettePolicy {
    /// The replay of `scenario`'s `[model] cassette`, or `None` when its model is
    /// scripted. The path is relative to the scenario file.
    pub fn for_scenario(scenario: &LoadedScenario) -> Result<Option<Self>, CassetteError> {
        let settings = &scenario.scenario.model;
        let Some(relative) = &settings.cassette else {
            return Ok(None);
        };
        let path = match scenario.path.parent() {
            Some(dir) => lexically_normal(&dir.join(relative)),
            None => PathBuf::from(relative),
        };
        let cassette = Cassette::load(&path)?;
        let mode = match settings.matching.unwrap_or_default() {
            CassetteMatch::RequestHash => MatchMode::ByRequestHash,
            CassetteMatch::InOrder => MatchMode::InOrder { per_agent: false },
            CassetteMatch::InOrderPerAgent => MatchMode::InOrder { per_agent: true },
        };
        let labels = AgentLabels::new(scenario.scenario.coordinator.prompt.clone());
        Ok(Some(Self::new(cassette, mode, labels, path)))
    }

    /// A replay of `cassette` (read from `path`, for messages) matching by `mode`,
    /// labelling requests with `labels`.
    pub fn new(cassette: Cassette, mode: MatchMode, labels: AgentLabels, path: PathBuf) -> Self {
        Self {
            replay: ReplayModel::new(cassette, mode).labelled_by(labels.clone()),
            labels,
            path,
        }
    }

    /// The replay.
    pub fn replay(&self) -> &ReplayModel {
        &self.replay
    }

    /// Spawn description → worker prompt, for every Agent call the cassette's
    /// responses make: what the fault book needs to aim worker faults at the
    /// workers a cassette launches.
    pub fn description_prompts(&self) -> BTreeMap<String, String> {
        self.replay
            .exchanges()
            .filter_map(|exchange| match &exchange.outcome {
                Outcome::Response(response) => Some(&response.content),
                _ => None,
            })
            .flatten()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { name, input, .. } if name == "Agent" => {
                    let description = input.get("description")?.as_str()?;
                    let prompt = input.get("prompt")?.as_str()?;
                    Some((description.to_owned(), prompt.to_owned()))
                }
                _ => None,
            })
            .collect()
    }

    /// The run failures the replay's report makes: one per miss shown (with its
    /// diff), and one listing the exchanges never replayed.
    pub fn failures(&self) -> Vec<Violation> {
        failures_of(&self.replay.report(), &self.path)
    }
}

/// `path` with `.` dropped and each `..` cancelling the folder before it, without
/// asking the filesystem: `scenarios/replay/../../fixtures/x.json` reads as
/// `fixtures/x.json` in messages. A leading `..` stays.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(normal.components().next_back(), Some(Component::Normal(_))) =>
            {
                normal.pop();
            }
            other => normal.push(other.as_os_str()),
        }
    }
    normal
}

/// The failures `report` makes, for the cassette at `path`.
pub fn failures_of(report: &ReplayReport, path: &Path) -> Vec<Violation> {
    let mut failures: Vec<Violation> = report
        .misses
        .iter()
        .take(MISSES_SHOWN_MAX)
        .map(|miss| Violation {
            invariant: REPLAY_MISS,
            detail: format!("{}: {miss}", path.display()),
        })
        .collect();
    if report.misses.len() > MISSES_SHOWN_MAX {
        failures.push(Violation {
            invariant: REPLAY_MISS,
            detail: format!(
                "{}: {} more miss(es) after these",
                path.display(),
                report.misses.len() - MISSES_SHOWN_MAX
            ),
        });
    }
    if !report.unused.is_empty() {
        let mut detail = format!(
            "{}: {} of {} exchanges were never replayed:",
            path.display(),
            report.unused.len(),
            report.exchanges
        );
        for unused in report.unused.iter().take(UNUSED_SHOWN_MAX) {
            detail += &format!("\n  {unused}");
        }
        if report.unused.len() > UNUSED_SHOWN_MAX {
            detail += &format!("\n  and {} more", report.unused.len() - UNUSED_SHOWN_MAX);
        }
        failures.push(Violation {
            invariant: REPLAY_UNUSED,
            detail,
        });
    }
    failures
}

impl ModelPolicy for CassettePolicy {
    fn reply(
        &self,
        request: &ModelRequest,
        view: &ConversationView,
        _latency_rng: &mut dyn RngCore,
    ) -> PolicyReply {
        let agent = self.labels.label_viewed(view);
        match self.replay.answer_labelled(request, Some(agent)) {
            Replayed::Response { response, latency } => PolicyReply::Respond {
                response,
                latency,
                // The recorded usage is what the call cost: the meter keeps it.
                usage_recorded: true,
            },
            Replayed::Error { error, latency } => PolicyReply::Fail { error, latency },
            Replayed::Miss(error) => PolicyReply::Fail {
                error,
                latency: std::time::Duration::ZERO,
            },
            Replayed::NoResponse => PolicyReply::Hang,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_cassette_paths_read_without_their_detours() {
        // Goal: messages name the cassette as a person would type it.
        assert_eq!(
            lexically_normal(Path::new("scenarios/replay/../../fixtures/./c.json")),
            PathBuf::from("fixtures/c.json")
        );
        assert_eq!(
            lexically_normal(Path::new("../c.json")),
            PathBuf::from("../c.json")
        );
        assert_eq!(lexically_normal(Path::new("/a/../b")), PathBuf::from("/b"));
    }
}
