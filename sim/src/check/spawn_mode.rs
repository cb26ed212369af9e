//! PROTOCOL.md §2's async decision, judged on the answers agents' models received
//! to their Agent calls: a spawn runs in the background if it asked to
//! (`run_in_background`), its definition always does, or the session is in
//! coordinator mode, the fork experiment, assistant mode or proactive mode, unless
//! background tasks are disabled, which forces every spawn into the foreground. A
//! background spawn is answered with its launch; a foreground one with the
//! worker's result, inline.
//!
//! The coordinator's own spawns in coordinator mode are invariant 3's
//! (`never-blocks`, in `invariants.rs`); every other answer is judged here and
//! fails the seed under `spawn-mode`. A definition's own `background` is taken
//! from the simulator's copy of the built-in definitions ([`BUILTIN_BACKGROUND`]),
//! not from the runtime's registry, so a runtime that forgets a definition's
//! `background` is held to it; a call of any other type (a fork, an unknown name
//! the runtime refuses) is not judged here.

use super::Violation;
use crate::fault::COORDINATOR_LABEL;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The name a spawn answered in the wrong mode fails under.
pub const SPAWN_MODE: &str = "spawn-mode";

/// The definition a call without `subagent_type` runs.
const GENERAL_PURPOSE: &str = "general-purpose";

/// The built-in agent definitions and whether each always runs in the background
/// (PROTOCOL.md §2's "the agent definition's `background`"): a coordinator's
/// `worker` does; the others run where the call and the session put them.
const BUILTIN_BACKGROUND: [(&str, bool); 5] = [
    (GENERAL_PURPOSE, false),
    ("Explore", false),
    ("Plan", false),
    ("verification", false),
    ("worker", true),
];

/// Whether the built-in definition `agent_type` always runs in the background;
/// `None` for a type the simulator does not hold a copy of.
fn definition_background(agent_type: &str) -> Option<bool> {
    BUILTIN_BACKGROUND
        .iter()
        .find(|(name, _)| *name == agent_type)
        .map(|(_, background)| *background)
}

/// A failure for each Agent answer §2's async decision does not give.
pub fn judge_spawn_mode(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut modes = None;
    let mut failures = Vec::new();
    for entry in trace {
        let TraceEvent::Sim(event) = &entry.typed else {
            continue;
        };
        match event {
            SimEvent::RunStarted {
                coordinator_mode,
                background_forced,
                background_disabled,
                binding: None,
                ..
            } => modes = Some((*coordinator_mode, *background_forced, *background_disabled)),
            SimEvent::SpawnAnswered {
                agent,
                asked_background,
                subagent_type,
                background,
                ..
            } => {
                let Some((coordinator_mode, forced, disabled)) = modes else {
                    continue;
                };
                if coordinator_mode && agent.as_str() == COORDINATOR_LABEL {
                    continue;
                }
                let agent_type = subagent_type
                    .as_ref()
                    .map_or(GENERAL_PURPOSE, |name| name.as_str());
                let Some(definition_background) = definition_background(agent_type) else {
                    continue;
                };
                let wants_background = *asked_background == Some(true)
                    || definition_background
                    || coordinator_mode
                    || forced;
                let expected = wants_background && !disabled;
                if *background != expected {
                    failures.push(Violation {
                        invariant: SPAWN_MODE,
                        detail: format!(
                            "at {} ms {agent}'s Agent call (run_in_background {}) was answered {}, where PROTOCOL.md §2 runs it {} ({})",
                            entry.time_ms,
                            asked_background.map_or("unset".to_owned(), |asked| asked.to_string()),
                            if *background { "with a background launch" } else { "with the worker's result inline" },
                            if expected { "in the background" } else { "in the foreground" },
                            match (disabled, coordinator_mode, forced) {
                                (true, _, _) => "background tasks are disabled",
                                (false, true, _) => "coordinator mode",
                                (false, false, true) => "a session mode runs every spawn in the background",
                                (false, false, false) if definition_background => "its definition always runs in the background",
                                (false, false, false) if wants_background => "it asked to",
                                _ => "nothing asks for the background",
                            }
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::super::sim_entry as sim;
    use super::*;
    use crate::trace::Name;

    fn started(coordinator_mode: bool, forced: bool, disabled: bool) -> TraceEntry {
        sim(
            0,
            SimEvent::RunStarted {
                scenario: Name::new("spawn"),
                profile: Name::new("hardened"),
                coordinator_mode,
                liveness_bound_ms: 1,
                background_forced: forced,
                background_disabled: disabled,
                binding: None,
            },
        )
    }

    fn answered(asked: Option<bool>, subagent_type: Option<&str>, background: bool) -> TraceEntry {
        sim(
            10,
            SimEvent::SpawnAnswered {
                agent: Name::new("coordinator"),
                asked_background: asked,
                subagent_type: subagent_type.map(Name::new),
                background,
                said: Box::default(),
            },
        )
    }

    #[test]
    fn the_async_decision_is_held_to_section_2() {
        // Goal: each input of §2's decision, and the override that forces the
        // foreground, against the answer the model received.
        let judge = |start, answer| judge_spawn_mode(&[start, answer]).len();
        assert_eq!(
            judge(
                started(false, false, false),
                answered(Some(true), None, true)
            ),
            0
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(Some(true), None, false)
            ),
            1
        );
        assert_eq!(
            judge(started(false, false, false), answered(None, None, false)),
            0
        );
        assert_eq!(
            judge(started(false, false, false), answered(None, None, true)),
            1
        );
        assert_eq!(
            judge(started(false, true, false), answered(None, None, true)),
            0
        );
        assert_eq!(
            judge(started(false, true, false), answered(None, None, false)),
            1
        );
        assert_eq!(
            judge(
                started(false, true, true),
                answered(Some(true), None, false)
            ),
            0
        );
        assert_eq!(
            judge(started(false, true, true), answered(Some(true), None, true)),
            1
        );
    }

    #[test]
    fn the_coordinators_spawns_in_coordinator_mode_are_left_alone_and_definitions_are_held_to_their_background(
    ) {
        // Goal: invariant 3 judges the coordinator in coordinator mode; a
        // built-in definition that always runs in the background (`worker`) is
        // held to it, the others run where the call puts them, and a type the
        // simulator holds no copy of is not judged.
        let judge = |start, answer| judge_spawn_mode(&[start, answer]).len();
        assert_eq!(
            judge(started(true, false, false), answered(None, None, false)),
            0
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(None, Some("worker"), true)
            ),
            0
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(None, Some("worker"), false)
            ),
            1
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(None, Some("Explore"), true)
            ),
            1
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(None, Some("custom-reviewer"), false)
            ),
            0
        );
        assert_eq!(
            judge(
                started(false, false, false),
                answered(None, Some("general-purpose"), true)
            ),
            1
        );
    }
}
