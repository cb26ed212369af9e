//! The system prompt of an agent, by profile (PROTOCOL.md §7).
//!
//! One entry point, [`assemble_system_prompt`], dispatches on
//! [`Profile::prompt_style`]:
//!
//! - [`PromptStyle::ReplaceChain`] (`claude-code`, `hardened`): the priority chain of
//!   [`replace_chain`]; the persona and the channel addendum are ignored.
//! - [`PromptStyle::PersonaPrepend`] (`nexo`): the persona block when the agent is a
//!   coordinator, then the agent's prompt, then the channel addendum when set. The
//!   agent's prompt is [`PromptSources::agent_prompt`], or the default prompt when that
//!   is absent; the other sources of the chain do not exist in nexo and are ignored.
//!
//! Each part is its own system block, so a channel addendum that varies per channel
//! does not change the bytes of the blocks before it.

use crate::profile::{Profile, PromptStyle};
use crate::world::SystemBlock;

use super::chain::{replace_chain, PromptSources};
use super::persona::{render_channel_addendum, render_persona, PersonaInputs};

/// Everything an agent's system prompt can be built from. Defaults: no sources, not a
/// coordinator, no channel addendum.
///
/// `#[non_exhaustive]`: build it from [`PromptInputs::default`] and the `with_*`
/// methods, or assign fields on a default value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptInputs {
    /// The texts of the claude-code chain; nexo reads the agent and default prompts.
    pub sources: PromptSources,
    /// nexo only: `Some` when the agent is a coordinator, which prepends the persona.
    pub persona: Option<PersonaInputs>,
    /// nexo only: the channel's addendum, appended under `# CHANNEL ADDENDUM`.
    pub channel_addendum: Option<String>,
}

impl PromptInputs {
    /// Sets the chain's sources.
    pub fn with_sources(mut self, sources: PromptSources) -> Self {
        self.sources = sources;
        self
    }

    /// Makes the agent a nexo coordinator with this persona.
    pub fn with_persona(mut self, persona: PersonaInputs) -> Self {
        self.persona = Some(persona);
        self
    }

    /// Sets the channel addendum.
    pub fn with_channel_addendum(mut self, addendum: impl Into<String>) -> Self {
        self.channel_addendum = Some(addendum.into());
        self
    }
}

/// The system prompt of an agent under `profile`.
pub fn assemble_system_prompt(profile: Profile, inputs: &PromptInputs) -> Vec<SystemBlock> {
    match profile.prompt_style() {
        PromptStyle::ReplaceChain => replace_chain(&inputs.sources),
        PromptStyle::PersonaPrepend => persona_prepend(inputs),
    }
}

/// The nexo assembly: persona (coordinators only), agent prompt, channel addendum.
fn persona_prepend(inputs: &PromptInputs) -> Vec<SystemBlock> {
    let mut blocks = Vec::new();
    if let Some(persona) = &inputs.persona {
        blocks.push(SystemBlock::text(render_persona(persona)));
    }
    match inputs
        .sources
        .agent_prompt
        .as_deref()
        .filter(|text| !text.is_empty())
    {
        Some(agent) => blocks.push(SystemBlock::text(agent)),
        None => blocks.extend(
            inputs
                .sources
                .default_prompt
                .iter()
                .filter(|section| !section.is_empty())
                .map(SystemBlock::text),
        ),
    }
    if let Some(addendum) = inputs
        .channel_addendum
        .as_deref()
        .filter(|text| !text.is_empty())
    {
        blocks.push(SystemBlock::text(render_channel_addendum(addendum)));
    }
    blocks
}
