//! The fork child's first request (PROTOCOL.md §6).
//!
//! The child's messages are the parent's history, then the parent's assistant
//! message with **all** its tool uses, then one user message holding a tool result
//! per tool use, every one with the same placeholder text, and last a text block with
//! the fork rules inside `<fork-boilerplate>` and `Your directive: …`.
//!
//! Everything before that last text block is the same for every fork launched from
//! one assistant message, so sibling forks share the longest possible cache prefix;
//! and everything before the new user message is byte-identical to the parent's own
//! next request. Tools, system, model, thinking and `max_tokens` are the parent's,
//! unchanged.
//!
//! # Destructive tools and the cache
//!
//! An unsupervised fork must not use Bash, Edit or Write. Removing them from the
//! request's `tools` would change the first part of the cache key and break the cache
//! for the whole conversation. So the **advertised tool definitions stay identical**
//! to the parent's, and the restriction is enforced where calls are gated: the fork
//! runs as [`Role::UnsupervisedFork`], whose [`ToolSurface`] lacks the destructive
//! tools, so a call to one is refused before it has any effect. A supervised fork runs
//! as [`Role::Worker`].

use crate::profile::Profile;
use crate::tools::{Role, ToolName, ToolSurface};
use crate::world::{ContentBlock, Message, ModelRequest, Role as MessageRole, ToolDefinition};

use super::cache_break::detect_cache_break;
use super::guard::FORK_BOILERPLATE_TAG;
use super::guard::{check_fork_allowed, ForkConfig, ForkError, ForkOrigin, Supervision};
use super::params::CacheSafeParams;

/// The text of every tool result in a fork's first user message. Identical for all
/// tool uses and all forks, so it never splits the cache prefix of sibling forks.
pub const FORK_PLACEHOLDER_RESULT: &str = "Fork started — processing in background";

/// What precedes the directive in a fork's first user message.
pub const FORK_DIRECTIVE_PREFIX: &str = "Your directive: ";

/// The rules a fork is given, inside `<fork-boilerplate>`.
const FORK_RULES: &str = "You are a fork: a background copy of the agent whose conversation \
is above, started to carry out one directive. You are not that agent.
Rules:
1. Do the work yourself. Do not fork and do not start other agents.
2. Do not address the user and do not ask questions: nobody reads you until you finish.
3. Stay inside your directive. Do not redo or continue other work from the conversation above.
4. Some tools may be refused to you. A refusal is final: work around it or report it, do not retry.
5. End with one concise report: what you did, what you found (with file paths and line \
numbers), and what is left undone. That report is your result.";

/// A fork ready to run: its first request and the surface its calls are gated by.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Fork {
    /// The child's first request.
    pub request: ModelRequest,
    /// The role the child's tool calls are checked as.
    pub role: Role,
    /// The tools the child may actually call.
    pub surface: ToolSurface,
    /// The child's fork depth (1 for a fork of the main thread).
    pub depth: u32,
}

/// The fork rules in their tag, then the directive: the last block of a fork's first
/// user message.
pub fn fork_directive_text(directive: &str) -> String {
    format!(
        "<{FORK_BOILERPLATE_TAG}>\n{FORK_RULES}\n</{FORK_BOILERPLATE_TAG}>\n\n\
         {FORK_DIRECTIVE_PREFIX}{directive}"
    )
}

/// The role and surface a fork's calls are gated by: the worker surface (without
/// destructive tools unless supervised), narrowed to the tools the request advertises.
/// Advertised tools the runtime does not know are not on any surface.
pub fn fork_tool_surface(
    profile: Profile,
    supervision: Supervision,
    advertised: &[ToolDefinition],
) -> (Role, ToolSurface) {
    let role = match supervision {
        Supervision::Unsupervised => Role::UnsupervisedFork,
        Supervision::Supervised => Role::Worker,
    };
    let names: Vec<String> = advertised.iter().map(|tool| tool.name.clone()).collect();
    let surface = ToolSurface::for_role(role, profile).restricted_to(&names);
    if supervision == Supervision::Unsupervised {
        assert!(
            !surface.tools().any(ToolName::is_destructive),
            "an unsupervised fork's surface holds a destructive tool"
        );
    }
    (role, surface)
}

/// Builds the first request of a fork of the parent whose last request gave `params`,
/// launched by the parent's `assistant` message, to carry out `directive`.
///
/// # Errors
/// The refusals of [`check_fork_allowed`]; [`ForkError::NotAssistantMessage`],
/// [`ForkError::NoToolUse`] and [`ForkError::EmptyDirective`] for a bad launch.
pub fn build_fork(
    params: &CacheSafeParams,
    assistant: &Message,
    directive: &str,
    origin: &ForkOrigin,
    config: &ForkConfig,
) -> Result<Fork, ForkError> {
    let depth = check_fork_allowed(&params.messages, origin, config)?;
    if assistant.role != MessageRole::Assistant {
        return Err(ForkError::NotAssistantMessage);
    }
    let tool_use_ids: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            ContentBlock::Text { .. } | ContentBlock::ToolResult { .. } => None,
        })
        .collect();
    if tool_use_ids.is_empty() {
        return Err(ForkError::NoToolUse);
    }
    if directive.trim().is_empty() {
        return Err(ForkError::EmptyDirective);
    }

    let mut content: Vec<ContentBlock> = tool_use_ids
        .iter()
        .map(|id| ContentBlock::ToolResult {
            tool_use_id: (*id).to_owned(),
            content: FORK_PLACEHOLDER_RESULT.to_owned(),
            is_error: false,
            cache_control: None,
        })
        .collect();
    content.push(ContentBlock::text(fork_directive_text(directive)));

    let mut request = params.to_request();
    request.messages.push(assistant.clone());
    request.messages.push(Message {
        role: MessageRole::User,
        content,
    });

    // The whole point of a fork: its prefix is the parent's. Built from the parent's
    // own values, a difference here can only be a bug in this function.
    assert_eq!(
        detect_cache_break(params, &request),
        None,
        "a fork request must share its parent's cache prefix"
    );
    let (role, surface) = fork_tool_surface(origin.profile, config.supervision, &request.tools);
    Ok(Fork {
        request,
        role,
        surface,
        depth,
    })
}
