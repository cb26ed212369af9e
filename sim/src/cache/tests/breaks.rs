//! Cache breaks: a request of a conversation misses the prefix its predecessor
//! cached, and the outcome names the block, byte offset and cause.
//!
//! The conversation prompt is tools (1600 bytes) → system (3200 bytes) → one user
//! message (1200 bytes, breakpoint), so block starts are at bytes 0, 1600, 4800.

use coord_runtime::world::{CacheTtl, ThinkingConfig};

use super::{base_prompt, push_turn, request_at, secs, send, text, ORG};
use crate::cache::{Block, BreakCause, CacheBreak, Prompt, PromptCache, Request, Section};

const MAIN: &str = "main";

fn conversation_prompt() -> Prompt {
    let mut prompt = base_prompt();
    push_turn(&mut prompt, 300, 'a');
    prompt
}

/// A cache holding `conversation_prompt()` sent by conversation `MAIN` at 0.
fn primed() -> PromptCache {
    let mut cache = PromptCache::new();
    let outcome = send(
        &mut cache,
        &request_at(0).conversation(MAIN),
        &mut conversation_prompt(),
    );
    assert_eq!(outcome.cache_break, None);
    assert_eq!(outcome.usage.cache_creation_input_tokens, 1500);
    cache
}

#[test]
fn cache_break_names_the_block_and_byte_of_a_system_edit() {
    // Goal: an edited system prompt is reported where it first differs. Method:
    // change byte 100 of the system block and resend in the same conversation.
    let mut cache = primed();
    let mut prompt = conversation_prompt();
    let mut system = text(800, 's');
    system.replace_range(100..101, "X");
    prompt
        .replace(
            1,
            Block::system(&system).with_cache_control(CacheTtl::FiveMinutes),
        )
        .unwrap();
    let outcome = send(&mut cache, &request_at(10).conversation(MAIN), &mut prompt);
    assert_eq!(outcome.usage.cache_read_input_tokens, 0);
    assert_eq!(
        outcome.cache_break,
        Some(CacheBreak {
            block_index: 1,
            byte_offset: 1600 + 100,
            section: Section::System,
            cause: BreakCause::Prefix,
            expected_read_blocks: 3,
            expected_read_tokens: 1500,
        })
    );
}

#[test]
fn cache_break_names_a_tool_edit_and_a_message_edit() {
    // Goal: offsets count from the start of the prefix in every section. Method:
    // edit byte 7 of the tool; separately, byte 1199 of the cached message.
    let mut cache = primed();
    let mut tool_edit = conversation_prompt();
    let mut tool = text(400, 't');
    tool.replace_range(7..8, "X");
    tool_edit
        .replace(0, Block::tool(tool.into_bytes()))
        .unwrap();
    let outcome = send(
        &mut cache,
        &request_at(10).conversation(MAIN),
        &mut tool_edit,
    );
    let cache_break = outcome.cache_break.expect("tool edit breaks the cache");
    assert_eq!(
        (
            cache_break.block_index,
            cache_break.byte_offset,
            cache_break.section
        ),
        (0, 7, Section::Tools)
    );

    let mut cache = primed();
    let mut message_edit = conversation_prompt();
    let mut message = text(300, 'a');
    message.replace_range(1199..1200, "X");
    message_edit
        .replace(
            2,
            Block::user(&message).with_cache_control(CacheTtl::FiveMinutes),
        )
        .unwrap();
    let outcome = send(
        &mut cache,
        &request_at(10).conversation(MAIN),
        &mut message_edit,
    );
    assert_eq!(outcome.usage.cache_read_input_tokens, 1200);
    let cache_break = outcome.cache_break.expect("message edit breaks the cache");
    assert_eq!(
        (
            cache_break.block_index,
            cache_break.byte_offset,
            cache_break.section
        ),
        (2, 4800 + 1199, Section::Messages)
    );
}

#[test]
fn cache_break_names_model_organization_and_thinking_changes() {
    // Goal: key changes are breaks with their own cause. Method: resend the same
    // prompt with another model, organization, and thinking budget.
    let mut cache = primed();
    let other_model = Request::new(ORG, "claude-opus-4-1", secs(10)).conversation(MAIN);
    let outcome = send(&mut cache, &other_model, &mut conversation_prompt());
    let cache_break = outcome.cache_break.expect("model change breaks the cache");
    assert_eq!(cache_break.cause, BreakCause::Model);
    assert_eq!((cache_break.block_index, cache_break.byte_offset), (0, 0));

    let mut cache = primed();
    let other_org = Request::new("org-b", super::SONNET, secs(10)).conversation(MAIN);
    let outcome = send(&mut cache, &other_org, &mut conversation_prompt());
    assert_eq!(
        outcome.cache_break.map(|b| b.cause),
        Some(BreakCause::Organization)
    );

    let mut cache = primed();
    let thinking = request_at(10)
        .conversation(MAIN)
        .thinking(Some(ThinkingConfig::Enabled {
            budget_tokens: 4096,
        }));
    let outcome = send(&mut cache, &thinking, &mut conversation_prompt());
    assert_eq!(outcome.usage.cache_read_input_tokens, 1200);
    assert_eq!(
        outcome.cache_break,
        Some(CacheBreak {
            block_index: 2,
            byte_offset: 4800,
            section: Section::Messages,
            cause: BreakCause::Thinking,
            expected_read_blocks: 3,
            expected_read_tokens: 1500,
        })
    );
}

#[test]
fn cache_misses_without_a_prefix_change_are_not_breaks() {
    // Goal: expiry and not-yet-readable entries are misses, not breaks; appending
    // a turn is neither. Method: resend too late, too early, and extended.
    let mut cache = primed();
    let late = send(
        &mut cache,
        &request_at(400).conversation(MAIN),
        &mut conversation_prompt(),
    );
    assert_eq!(late.read_blocks, 0);
    assert_eq!(late.cache_break, None);

    let mut cache = PromptCache::new();
    let slow = request_at(0).first_token_after(secs(30)).conversation(MAIN);
    send(&mut cache, &slow, &mut conversation_prompt());
    let early = send(
        &mut cache,
        &request_at(5).conversation(MAIN),
        &mut conversation_prompt(),
    );
    assert_eq!(early.read_blocks, 0);
    assert_eq!(early.cache_break, None);

    let mut cache = primed();
    let mut extended = conversation_prompt();
    push_turn(&mut extended, 100, 'b');
    let next_turn = send(
        &mut cache,
        &request_at(10).conversation(MAIN),
        &mut extended,
    );
    assert_eq!(next_turn.usage.cache_read_input_tokens, 1500);
    assert_eq!(next_turn.cache_break, None);
}

#[test]
fn cache_break_checks_a_fork_against_its_parent() {
    // Goal: a fork inherits its parent's conversation record, so a fork with the
    // parent's prefix reads it silently and a fork that changed it reports where.
    // Method: fork twice from `main`, once by cloning the prompt and appending,
    // once with a rebuilt system prompt.
    let mut cache = primed();
    assert!(cache.fork_conversation(MAIN, "fork-1"));
    assert!(!cache.fork_conversation("nobody", "fork-x"));
    let mut fork = conversation_prompt();
    push_turn(&mut fork, 50, 'f');
    let outcome = send(
        &mut cache,
        &request_at(10).conversation("fork-1"),
        &mut fork,
    );
    assert_eq!(outcome.usage.cache_read_input_tokens, 1500);
    assert_eq!(outcome.cache_break, None);

    assert!(cache.fork_conversation(MAIN, "fork-2"));
    let mut rebuilt = Prompt::new();
    rebuilt
        .push(Block::tool(text(400, 't').into_bytes()))
        .unwrap();
    rebuilt
        .push(Block::system(&format!("{}!", &text(800, 's')[..3199])))
        .unwrap();
    push_turn(&mut rebuilt, 300, 'a');
    let outcome = send(
        &mut cache,
        &request_at(20).conversation("fork-2"),
        &mut rebuilt,
    );
    let cache_break = outcome.cache_break.expect("changed system breaks the fork");
    assert_eq!(
        (
            cache_break.block_index,
            cache_break.byte_offset,
            cache_break.cause
        ),
        (1, 1600 + 3199, BreakCause::Prefix)
    );
}
