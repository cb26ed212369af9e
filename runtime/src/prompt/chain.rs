//! The claude-code system prompt priority chain (PROTOCOL.md §7).
//!
//! In Claude Code the coordinator prompt *replaces* the default system prompt instead
//! of adding to it. Exactly one rung of the chain supplies the prompt:
//!
//! ```text
//! override > coordinator > agent > custom > default
//! ```
//!
//! and the append prompt then follows it, unless the override rung won: an override
//! is the whole prompt by definition, so nothing may be added to it.
//!
//! An empty string counts as absent, as in Claude Code (which tests truthiness), so an
//! empty override cannot blank the prompt by accident. Empty default sections are
//! dropped because the Messages API rejects empty text blocks.

use crate::world::SystemBlock;

/// The texts the chain chooses from. Every field defaults to absent.
///
/// `#[non_exhaustive]`: build it from [`PromptSources::default`] and the `with_*`
/// methods, or assign fields on a default value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptSources {
    /// Replaces everything, the append prompt included (`--system-prompt` style).
    pub override_prompt: Option<String>,
    /// The coordinator prompt; present only in coordinator mode.
    pub coordinator_prompt: Option<String>,
    /// The main-thread agent definition's prompt.
    pub agent_prompt: Option<String>,
    /// A custom system prompt given by the user.
    pub custom_prompt: Option<String>,
    /// The default system prompt, as its sections (one system block each).
    pub default_prompt: Vec<String>,
    /// Added after the chosen rung, unless that rung is the override.
    pub append_prompt: Option<String>,
}

impl PromptSources {
    /// Sets the override prompt.
    pub fn with_override(mut self, text: impl Into<String>) -> Self {
        self.override_prompt = Some(text.into());
        self
    }

    /// Sets the coordinator prompt.
    pub fn with_coordinator(mut self, text: impl Into<String>) -> Self {
        self.coordinator_prompt = Some(text.into());
        self
    }

    /// Sets the agent prompt.
    pub fn with_agent(mut self, text: impl Into<String>) -> Self {
        self.agent_prompt = Some(text.into());
        self
    }

    /// Sets the custom prompt.
    pub fn with_custom(mut self, text: impl Into<String>) -> Self {
        self.custom_prompt = Some(text.into());
        self
    }

    /// Sets the default prompt's sections.
    pub fn with_default<S: Into<String>>(mut self, sections: impl IntoIterator<Item = S>) -> Self {
        self.default_prompt = sections.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the append prompt.
    pub fn with_append(mut self, text: impl Into<String>) -> Self {
        self.append_prompt = Some(text.into());
        self
    }
}

/// Which rung of the chain supplied the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PromptRung {
    /// [`PromptSources::override_prompt`].
    Override,
    /// [`PromptSources::coordinator_prompt`].
    Coordinator,
    /// [`PromptSources::agent_prompt`].
    Agent,
    /// [`PromptSources::custom_prompt`].
    Custom,
    /// [`PromptSources::default_prompt`] (also when every source is absent).
    Default,
}

/// The rung that wins for `sources`: the first present one, in priority order.
pub fn select_rung(sources: &PromptSources) -> PromptRung {
    if present(&sources.override_prompt).is_some() {
        PromptRung::Override
    } else if present(&sources.coordinator_prompt).is_some() {
        PromptRung::Coordinator
    } else if present(&sources.agent_prompt).is_some() {
        PromptRung::Agent
    } else if present(&sources.custom_prompt).is_some() {
        PromptRung::Custom
    } else {
        PromptRung::Default
    }
}

/// The system prompt the chain produces: the winning rung's text (the default prompt
/// as one block per section), then the append prompt unless the override won.
pub fn replace_chain(sources: &PromptSources) -> Vec<SystemBlock> {
    let rung = select_rung(sources);
    let chosen: Vec<&str> = match rung {
        PromptRung::Override => present(&sources.override_prompt).into_iter().collect(),
        PromptRung::Coordinator => present(&sources.coordinator_prompt).into_iter().collect(),
        PromptRung::Agent => present(&sources.agent_prompt).into_iter().collect(),
        PromptRung::Custom => present(&sources.custom_prompt).into_iter().collect(),
        PromptRung::Default => sources
            .default_prompt
            .iter()
            .map(String::as_str)
            .filter(|section| !section.is_empty())
            .collect(),
    };
    let append = match rung {
        PromptRung::Override => None,
        _ => present(&sources.append_prompt),
    };
    chosen
        .into_iter()
        .chain(append)
        .map(SystemBlock::text)
        .collect()
}

/// The text of a source, or `None` when it is absent or empty.
fn present(source: &Option<String>) -> Option<&str> {
    source.as_deref().filter(|text| !text.is_empty())
}
