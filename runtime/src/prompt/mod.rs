//! Prompt assembly: the claude-code priority chain and the nexo persona block.
//!
//! PROTOCOL.md §7 gives the two published ways a coordinator's system prompt is built:
//! Claude Code *replaces* the default prompt through a priority chain
//! ([`replace_chain`]: override > coordinator > agent > custom > default, then the
//! append prompt), and nexo *prepends* a `# COORDINATOR ROLE` persona block to the
//! agent's prompt ([`render_persona`]).
//! [`assemble_system_prompt`] picks one by [`Profile::prompt_style`]. Everything here is
//! a pure function of its inputs, so the system prompt is byte-deterministic and its
//! place in the prompt-cache prefix is stable.
//!
//! [`worker_tools_context`] renders what a coordinator is told about its workers'
//! tools and the scratchpad.
//!
//! [`Profile::prompt_style`]: crate::profile::Profile::prompt_style

mod assemble;
mod chain;
mod context;
mod persona;

pub use assemble::{assemble_system_prompt, PromptInputs};
pub use chain::{replace_chain, select_rung, PromptRung, PromptSources};
pub use context::worker_tools_context;
pub use persona::{
    persona_tools, render_channel_addendum, render_persona, KnownWorker, PersonaInputs,
    CHANNEL_ADDENDUM_HEADING, PERSONA_HEADING,
};
