//! PROTOCOL.md §7's prompt assembly, judged on the system prompt the coordinator's
//! model received in its first request, against the simulator's own reading of §7
//! applied to the scenario's prompt sources (never the runtime's assembly code):
//!
//! - claude-code and hardened: the first present source of override, coordinator,
//!   agent and custom prompt replaces the default sections, and the append prompt
//!   follows unless the override won;
//! - nexo: the `# COORDINATOR ROLE` persona (when the binding's tools are given),
//!   whose tool section lists those tools the coordinator surface has, matched
//!   ignoring case and sorted, with a scratchpad section exactly when TodoWrite is
//!   among them; then the agent prompt, or else the default sections; then the
//!   channel addendum under its heading.
//!
//! An empty text is an absent one. In coordinator mode, one more block follows,
//! which starts by telling the coordinator what its workers can call: §7's worker
//! surface, sorted by name, from the judge's own table ([`Surface`]). The model
//! tap applies the rule as the first request arrives and logs
//! `system_prompt_wrong` when it does not hold; the verdict fails the seed under
//! `prompt-assembly`.

use coord_runtime::profile::Profile;

use coord_runtime::tools::ToolName;

use super::surfaces::Surface;
use super::Violation;
use crate::scenario::Settings;
use crate::trace::{SimEvent, TraceEntry, TraceEvent};

/// The name a wrongly assembled system prompt fails under.
pub const PROMPT_ASSEMBLY: &str = "prompt-assembly";

/// The nexo coordinator's tools (PROTOCOL.md §7).
const NEXO_COORDINATOR_TOOLS: [&str; 9] = [
    "TeamCreate",
    "TeamDelete",
    "SendToPeer",
    "ListPeers",
    "SendMessageToWorker",
    "TaskStop",
    "TaskList",
    "TaskGet",
    "TodoWrite",
];
const PERSONA_HEADING: &str = "# COORDINATOR ROLE";
const CHANNEL_ADDENDUM_HEADING: &str = "# CHANNEL ADDENDUM";
/// How much of a block a failure quotes.
const QUOTE_CHARS_MAX: usize = 80;

/// One block §7 gives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    /// Exactly this text.
    Text(String),
    /// The nexo persona, listing exactly these tools.
    Persona { tools: Vec<&'static str> },
}

/// The system prompt §7 gives a run's main thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemRule {
    blocks: Vec<Block>,
    /// Whether coordinator mode adds its block at the end.
    coordinator_mode: bool,
    /// How coordinator mode's block starts: the workers' tools (§7's worker
    /// surface, from the judge's own table), sorted by name.
    workers_tools_line: String,
}

/// The line that tells a coordinator of `profile` what its workers can call: §7's
/// worker surface as [`Surface`] writes it, sorted by name.
fn workers_tools_line(profile: Profile) -> String {
    let mut names: Vec<&str> = ToolName::ALL
        .into_iter()
        .filter(|tool| Surface::Worker.allows(*tool, profile))
        .map(ToolName::as_str)
        .collect();
    names.sort_unstable();
    format!(
        "Workers you start can call these tools: {}.",
        names.join(", ")
    )
}

fn present(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|text| !text.is_empty())
}

impl SystemRule {
    /// The rule for a main thread of `profile` with `settings`' prompt sources.
    pub fn of(profile: Profile, settings: &Settings) -> Self {
        let prompt = &settings.prompt;
        let defaults = || -> Vec<Block> {
            settings
                .system_prompt
                .iter()
                .chain(&prompt.default_sections)
                .filter(|section| !section.is_empty())
                .map(|section| Block::Text(section.clone()))
                .collect()
        };
        let mut blocks = Vec::new();
        // §7 by profile, from the simulator's own reading: the runtime's
        // `Profile::prompt_style` is what is judged, not the judge.
        match profile {
            Profile::ClaudeCode | Profile::Hardened => {
                let chosen = [
                    &prompt.override_prompt,
                    &prompt.coordinator_prompt,
                    &prompt.agent_prompt,
                    &prompt.custom_prompt,
                ]
                .into_iter()
                .find_map(present);
                match chosen {
                    Some(text) => blocks.push(Block::Text(text.to_owned())),
                    None => blocks.extend(defaults()),
                }
                if present(&prompt.override_prompt).is_none() {
                    blocks.extend(
                        present(&prompt.append_prompt).map(|text| Block::Text(text.to_owned())),
                    );
                }
            }
            Profile::Nexo => {
                if let Some(allowed) = &prompt.persona_tools {
                    blocks.push(Block::Persona {
                        tools: persona_tools(allowed),
                    });
                }
                match present(&prompt.agent_prompt) {
                    Some(text) => blocks.push(Block::Text(text.to_owned())),
                    None => blocks.extend(defaults()),
                }
                if let Some(addendum) = present(&prompt.channel_addendum) {
                    blocks.push(Block::Text(format!(
                        "{CHANNEL_ADDENDUM_HEADING}\n\n{addendum}"
                    )));
                }
            }
        }
        Self {
            blocks,
            coordinator_mode: settings.coordinator_mode,
            workers_tools_line: workers_tools_line(profile),
        }
    }

    /// What is wrong with `received`, the system blocks of the first request, or
    /// `None` when it is what §7 gives.
    pub fn judge(&self, received: &[&str]) -> Option<String> {
        let expected_len = self.blocks.len() + usize::from(self.coordinator_mode);
        if received.len() != expected_len {
            return Some(format!(
                "the coordinator's first request has {} system blocks, where PROTOCOL.md §7 gives {expected_len} for the scenario's prompt sources{}: {}",
                received.len(),
                if self.coordinator_mode {
                    " (the last one coordinator mode's)"
                } else {
                    ""
                },
                received
                    .iter()
                    .map(|block| quote(block))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let block_wrong = self
            .blocks
            .iter()
            .zip(received)
            .enumerate()
            .find_map(|(index, (block, text))| {
                let wrong = match block {
                    Block::Text(expected) => (expected != text).then(|| quote(expected)),
                    Block::Persona { tools } => persona_wrong(tools, text),
                }?;
                Some(format!(
                    "system block {index} of the coordinator's first request is {}, where PROTOCOL.md §7 gives {wrong}",
                    quote(text)
                ))
            });
        // A coordinator writes instructions for tools it does not have: what it is
        // told its workers can call must be what they can.
        let last = received.last().copied().unwrap_or_default();
        block_wrong.or_else(|| {
            (self.coordinator_mode && !last.starts_with(&self.workers_tools_line)).then(|| {
                format!(
                    "coordinator mode's system block tells the coordinator {}, where PROTOCOL.md §7's worker surface gives {:?}",
                    quote(last),
                    self.workers_tools_line
                )
            })
        })
    }
}

/// The persona's tools: the allowed ones the nexo coordinator surface has,
/// matched ignoring case (`*` allows every one), sorted.
fn persona_tools(allowed: &[String]) -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = NEXO_COORDINATOR_TOOLS
        .into_iter()
        .filter(|tool| {
            allowed
                .iter()
                .any(|name| name == "*" || name.eq_ignore_ascii_case(tool))
        })
        .collect();
    tools.sort_unstable();
    tools
}

/// What the persona block `text` lacks or has too much of, if anything.
fn persona_wrong(tools: &[&str], text: &str) -> Option<String> {
    let tools_line = if tools.is_empty() {
        "No tools are available to you in this binding.".to_owned()
    } else {
        format!("You may call exactly these tools: {}.", tools.join(", "))
    };
    let scratchpad = tools.contains(&"TodoWrite");
    if !text.starts_with(PERSONA_HEADING) {
        Some(format!("the persona, under {PERSONA_HEADING:?}"))
    } else if !text.contains(&tools_line) {
        Some(format!("a persona saying {tools_line:?}"))
    } else if text.contains("\n## Scratchpad\n") != scratchpad {
        Some(format!(
            "a persona {} a scratchpad section (TodoWrite {})",
            if scratchpad { "with" } else { "without" },
            if scratchpad {
                "is among its tools"
            } else {
                "is not among its tools"
            }
        ))
    } else if text.contains("\n## Known workers\n") {
        Some("a persona without known workers (none were given)".to_owned())
    } else {
        None
    }
}

fn quote(text: &str) -> String {
    let head: String = text.chars().take(QUOTE_CHARS_MAX).collect();
    if head.len() < text.len() {
        format!("{head:?}…")
    } else {
        format!("{head:?}")
    }
}

/// A failure for each `system_prompt_wrong` the tap logged.
pub fn judge_prompt(trace: &[TraceEntry]) -> Vec<Violation> {
    trace
        .iter()
        .filter_map(|entry| match &entry.typed {
            TraceEvent::Sim(SimEvent::SystemPromptWrong { detail }) => Some(Violation {
                invariant: PROMPT_ASSEMBLY,
                detail: detail.clone(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::PromptSettings;

    fn settings(prompt: PromptSettings, coordinator_mode: bool) -> Settings {
        Settings {
            system_prompt: Some("You are the release engineer.".to_owned()),
            prompt,
            coordinator_mode,
            ..Settings::default()
        }
    }

    #[test]
    fn the_override_wins_and_drops_the_append() {
        // Goal: §7's priority (override first) and its one exception to the append.
        let rule = SystemRule::of(
            Profile::ClaudeCode,
            &settings(
                PromptSettings {
                    override_prompt: Some("O".to_owned()),
                    coordinator_prompt: Some("C".to_owned()),
                    append_prompt: Some("A".to_owned()),
                    ..PromptSettings::default()
                },
                false,
            ),
        );
        assert_eq!(rule.judge(&["O"]), None);
        let appended = rule.judge(&["O", "A"]).expect("the append is dropped");
        assert!(appended.contains("has 2 system blocks"), "{appended}");
        let wrong = rule.judge(&["C"]).expect("the override wins");
        assert!(wrong.contains("system block 0"), "{wrong}");
    }

    #[test]
    fn an_empty_source_is_absent() {
        // Goal: an empty coordinator prompt does not win, and an empty default
        // section is no block; coordinator mode's own block comes last.
        let rule = SystemRule::of(
            Profile::Hardened,
            &settings(
                PromptSettings {
                    coordinator_prompt: Some(String::new()),
                    default_sections: vec![String::new(), "Ship on Fridays.".to_owned()],
                    append_prompt: Some("Be brief.".to_owned()),
                    ..PromptSettings::default()
                },
                true,
            ),
        );
        let workers = workers_tools_line(Profile::Hardened);
        assert_eq!(
            rule.judge(&[
                "You are the release engineer.",
                "Ship on Fridays.",
                "Be brief.",
                &workers
            ]),
            None
        );
        assert!(rule.judge(&["", "Be brief.", &workers]).is_some());
    }

    #[test]
    fn the_coordinator_is_told_the_workers_surface() {
        // Goal: what coordinator mode's block says workers can call is §7's worker
        // surface, sorted, whatever follows it. Method: the right line with the
        // scratchpad after it passes; the coordinator's own tools, or a worker
        // tool left out, fail.
        let rule = SystemRule::of(
            Profile::Hardened,
            &settings(PromptSettings::default(), true),
        );
        let workers = workers_tools_line(Profile::Hardened);
        assert!(
            workers.starts_with(
                "Workers you start can call these tools: Agent, Bash, Edit, Glob, Grep, "
            ),
            "{workers}"
        );
        assert!(!workers.contains("SendMessage,") && !workers.contains("TeamCreate"));
        let told = |block: &str| rule.judge(&["You are the release engineer.", block]);
        assert_eq!(
            told(&format!(
                "{workers}\n\nScratchpad directory: /session/scratch"
            )),
            None
        );
        let coordinators = told("Workers you start can call these tools: Agent, SendMessage, SyntheticOutput, TaskStop.")
            .expect("the coordinator's own tools are not the workers'");
        assert!(
            coordinators.contains("worker surface gives"),
            "{coordinators}"
        );
        assert!(told(&workers.replace("Bash, ", "")).is_some());
    }

    #[test]
    fn the_nexo_persona_lists_the_coordinator_tools_it_is_allowed() {
        // Goal: the persona's tools are the allowed ones on the coordinator
        // surface, matched ignoring case, sorted; the scratchpad section follows
        // TodoWrite; the addendum comes last under its heading.
        let rule = SystemRule::of(
            Profile::Nexo,
            &settings(
                PromptSettings {
                    agent_prompt: Some("You serve #ops.".to_owned()),
                    channel_addendum: Some("Reply in threads.".to_owned()),
                    persona_tools: Some(vec![
                        "taskstop".to_owned(),
                        "Bash".to_owned(),
                        "TeamCreate".to_owned(),
                    ]),
                    ..PromptSettings::default()
                },
                false,
            ),
        );
        let persona = "# COORDINATOR ROLE\n\n## Role\n…\n\n## Tools available\nYou may call exactly these tools: TaskStop, TeamCreate.\n…";
        let addendum = "# CHANNEL ADDENDUM\n\nReply in threads.";
        assert_eq!(rule.judge(&[persona, "You serve #ops.", addendum]), None);
        let with_scratchpad = format!("{persona}\n\n## Scratchpad\nKeep notes.");
        let wrong = rule
            .judge(&[&with_scratchpad, "You serve #ops.", addendum])
            .expect("no TodoWrite, no scratchpad");
        assert!(wrong.contains("without a scratchpad section"), "{wrong}");
        let bash = persona.replace("TaskStop, TeamCreate", "Bash, TaskStop, TeamCreate");
        assert!(rule.judge(&[&bash, "You serve #ops.", addendum]).is_some());
    }
}
