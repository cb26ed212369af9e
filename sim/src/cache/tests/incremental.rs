//! Incremental cost (each byte hashed once while a conversation grows) and the
//! conversion from the runtime's `ModelRequest`.

use coord_runtime::world::{
    CacheControl, CacheTtl, ContentBlock, Message, ModelRequest, Role, SystemBlock, ThinkingConfig,
    ToolDefinition,
};

use super::{base_prompt, push_turn, request_at, secs, send, text};
use crate::cache::{Block, BlockKind, Prompt, PromptCache, Request, Section};

#[test]
fn cache_hashes_each_byte_once_in_a_growing_conversation() {
    // Goal: matching costs O(new bytes): a conversation that only appends hashes
    // every byte exactly once, and each turn reads the previous turn's prefix.
    // Method: 300 turns with a moving breakpoint; compare bytes hashed with bytes
    // sent, and each read with the previous prompt's token count.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    let mut previous_tokens = 0;
    for turn in 0..300u64 {
        push_turn(&mut prompt, 10 + turn % 7, 'a');
        let outcome = send(
            &mut cache,
            &request_at(turn * 10).conversation("main"),
            &mut prompt,
        );
        if turn > 0 {
            assert_eq!(outcome.usage.cache_read_input_tokens, previous_tokens);
        }
        assert_eq!(outcome.cache_break, None);
        previous_tokens = outcome.prompt_tokens;
    }
    let bytes_total: u64 = prompt.blocks().iter().map(|b| b.bytes().len() as u64).sum();
    assert_eq!(prompt.hashed_bytes_total(), bytes_total);
}

#[test]
fn cache_rehashes_only_from_an_edited_block() {
    // Goal: an edit invalidates hashes from the edited block on, not before.
    // Method: measure, edit the last block, measure again.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    push_turn(&mut prompt, 100, 'a');
    send(&mut cache, &request_at(0), &mut prompt);
    let first = prompt.hashed_bytes_total();
    prompt.replace(2, Block::user(&text(100, 'b'))).unwrap();
    send(&mut cache, &request_at(1), &mut prompt);
    assert_eq!(prompt.hashed_bytes_total(), first + 400);
    // Moving a breakpoint is not an edit.
    prompt
        .set_cache_control(2, Some(CacheTtl::FiveMinutes))
        .unwrap();
    send(&mut cache, &request_at(2), &mut prompt);
    assert_eq!(prompt.hashed_bytes_total(), first + 400);
}

fn model_request(breakpoint_on_system: bool) -> ModelRequest {
    let control = Some(CacheControl::ephemeral(None));
    let mut system = SystemBlock::text(text(1200, 's'));
    if breakpoint_on_system {
        system.cache_control = control;
    }
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 1024,
        tools: vec![ToolDefinition {
            name: "Read".into(),
            description: "Reads a file".into(),
            input_schema: serde_json::json!({"type": "object"}).into(),
            cache_control: None,
        }]
        .into(),
        system: vec![system].into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::text("hello"), ContentBlock::text("again")],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text {
                    text: "hi".into(),
                    cache_control: if breakpoint_on_system { None } else { control },
                }],
            },
        ],
        thinking: Some(ThinkingConfig::Enabled {
            budget_tokens: 2048,
        }),
    }
}

#[test]
fn cache_converts_runtime_model_requests() {
    // Goal: runtime requests feed the cache directly; `cache_control` is not part
    // of the compared bytes. Method: convert, inspect the blocks, then move the
    // breakpoint and check the earlier entry is still read.
    let runtime_request = model_request(true);
    let mut prompt = Prompt::from_model_request(&runtime_request);
    let kinds: Vec<BlockKind> = prompt.blocks().iter().map(Block::kind).collect();
    assert_eq!(
        kinds,
        vec![
            BlockKind::Tool,
            BlockKind::System,
            BlockKind::Message {
                role: Role::User,
                starts_message: true
            },
            BlockKind::Message {
                role: Role::User,
                starts_message: false
            },
            BlockKind::Message {
                role: Role::Assistant,
                starts_message: true
            },
        ]
    );
    assert_eq!(prompt.messages_start(), 2);
    assert_eq!(prompt.blocks()[1].section(), Section::System);
    assert_eq!(prompt.blocks()[1].bytes(), text(1200, 's').as_bytes());
    assert_eq!(prompt.breakpoints().collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        prompt.blocks()[1].cache_control(),
        Some(CacheTtl::FiveMinutes)
    );

    let request = Request::from_model_request("org-a", &runtime_request, secs(0));
    assert_eq!(request.model, "claude-sonnet-4-5");
    assert_eq!(request.thinking, runtime_request.thinking);

    let mut cache = PromptCache::new();
    let first = send(&mut cache, &request, &mut prompt);
    assert_eq!(first.writes.len(), 1);
    let mut moved = Prompt::from_model_request(&model_request(false));
    assert_eq!(moved.breakpoints().collect::<Vec<_>>(), vec![4]);
    let later = Request::from_model_request("org-a", &model_request(false), secs(10));
    let second = send(&mut cache, &later, &mut moved);
    assert_eq!(second.read_blocks, 2, "the system entry survives the move");
    assert_eq!(second.writes.len(), 1);
}

#[test]
fn cache_purges_only_expired_entries() {
    // Goal: memory stays bounded in long runs without changing results. Method:
    // write a 5m and a 1h entry, purge after 5 minutes, and check the 1h one reads.
    let mut cache = PromptCache::new();
    let mut prompt = Prompt::new();
    prompt
        .push(Block::system(&text(1100, 's')).with_cache_control(CacheTtl::OneHour))
        .unwrap();
    prompt
        .push(Block::user(&text(100, 'u')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(cache.entry_count(), 2);
    assert_eq!(cache.purge_expired(secs(299)), 0);
    assert_eq!(cache.purge_expired(secs(300)), 1);
    assert_eq!(
        send(&mut cache, &request_at(301), &mut prompt).read_blocks,
        1
    );
}
