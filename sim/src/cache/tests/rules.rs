//! One test (or a few) per cache rule. Each builds a small prompt whose token
//! counts are exact under the default four-bytes-a-token estimator, sends it at chosen virtual times
//! and asserts the `usage` numbers the rule implies.

use coord_runtime::world::{CacheTtl, Role, ThinkingConfig};

use super::{base_prompt, request_at, secs, send, text, ORG, SONNET};
use crate::cache::{
    Block, BytesPerToken, CacheError, CacheRules, Prompt, PromptCache, Request, Section,
    TokenEstimator,
};

#[test]
fn cache_rules_file_parses_to_the_documented_numbers() {
    // Goal: rules.toml is the single source of the numbers. Method: parse it and
    // compare with the published values, including per-model minimums.
    let rules = CacheRules::documented();
    assert_eq!(rules.breakpoints_max, 4);
    assert_eq!(rules.lookback_blocks, 20);
    assert_eq!(rules.ttl(CacheTtl::FiveMinutes), secs(300));
    assert_eq!(rules.ttl(CacheTtl::OneHour), secs(3600));
    assert_eq!(rules.minimum_tokens("claude-sonnet-4-5-20250929"), 1024);
    assert_eq!(rules.minimum_tokens("claude-opus-4-1-20250805"), 1024);
    assert_eq!(rules.minimum_tokens("claude-opus-4-5-20251101"), 4096);
    assert_eq!(rules.minimum_tokens("claude-opus-4-6"), 4096);
    assert_eq!(rules.minimum_tokens("claude-haiku-4-5-20251001"), 4096);
    assert_eq!(rules.minimum_tokens("claude-3-5-haiku-20241022"), 2048);
    assert_eq!(rules.minimum_tokens("claude-3-haiku-20240307"), 2048);
    assert_eq!(PromptCache::default().rules(), &rules);
    assert!(CacheRules::from_toml("breakpoints_max = 4").is_err());
}

#[test]
fn cache_prefix_order_is_tools_then_system_then_messages() {
    // Goal: blocks can only be laid out tools → system → messages, and an edit
    // invalidates only prefixes that contain it. Method: try out-of-order pushes,
    // then edit a message (system entry survives) and a tool (nothing survives).
    let mut prompt = Prompt::new();
    prompt.push(Block::system("s")).unwrap();
    assert_eq!(
        prompt.push(Block::tool(b"{}".to_vec())),
        Err(CacheError::SectionOrder {
            index: 1,
            section: Section::Tools,
            previous: Section::System,
        })
    );
    prompt.push(Block::user("u")).unwrap();
    assert!(matches!(
        prompt.push(Block::system("late")),
        Err(CacheError::SectionOrder { .. })
    ));

    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    prompt.push(Block::user(&text(100, 'a'))).unwrap();
    let first = send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(first.usage.cache_creation_input_tokens, 1200);
    assert_eq!(first.usage.input_tokens, 100);

    prompt.replace(2, Block::user(&text(100, 'b'))).unwrap();
    let message_edit = send(&mut cache, &request_at(10), &mut prompt);
    assert_eq!(message_edit.usage.cache_read_input_tokens, 1200);
    assert_eq!(message_edit.usage.input_tokens, 100);

    prompt
        .replace(0, Block::tool(text(400, 'T').into_bytes()))
        .unwrap();
    let tool_edit = send(&mut cache, &request_at(20), &mut prompt);
    assert_eq!(tool_edit.usage.cache_read_input_tokens, 0);
    assert_eq!(tool_edit.usage.cache_creation_input_tokens, 1200);
}

#[test]
fn cache_matches_byte_exact_prefixes_only_at_block_boundaries() {
    // Goal: one changed byte loses every entry past it, and equal bytes split into
    // different blocks do not match. Method: cache a 3-block prefix, then send a
    // one-byte edit of block 2 and a re-split of block 2 into two blocks.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    prompt
        .push(Block::user(&text(300, 'a')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    let first = send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(first.usage.cache_creation_input_tokens, 1500);

    let same = send(&mut cache, &request_at(1), &mut prompt.clone());
    assert_eq!(same.usage.cache_read_input_tokens, 1500);

    let mut edited_text = text(300, 'a');
    edited_text.replace_range(1199..1200, "b");
    let mut edited = prompt.clone();
    edited
        .replace(
            2,
            Block::user(&edited_text).with_cache_control(CacheTtl::FiveMinutes),
        )
        .unwrap();
    let one_byte = send(&mut cache, &request_at(2), &mut edited);
    assert_eq!(one_byte.usage.cache_read_input_tokens, 1200);
    assert_eq!(one_byte.usage.cache_creation_input_tokens, 300);

    let mut split = base_prompt();
    split.push(Block::user(&text(150, 'a'))).unwrap();
    split
        .push(
            Block::message(Role::User, false, text(150, 'a').into_bytes())
                .with_cache_control(CacheTtl::FiveMinutes),
        )
        .unwrap();
    let resplit = send(&mut cache, &request_at(3), &mut split);
    assert_eq!(resplit.usage.cache_read_input_tokens, 1200);
    assert_eq!(resplit.read_blocks, 2);
}

#[test]
fn cache_accepts_four_breakpoints_and_rejects_a_fifth() {
    // Goal: the API's limit of 4 cache_control blocks. Method: mark 4, then 5.
    let mut cache = PromptCache::new();
    let mut prompt = Prompt::new();
    for fill in ['a', 'b', 'c', 'd'] {
        prompt
            .push(Block::system(&text(300, fill)).with_cache_control(CacheTtl::FiveMinutes))
            .unwrap();
    }
    let four = send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(
        four.writes.len(),
        1,
        "only the 1200-token prefix is long enough"
    );
    prompt
        .push(Block::user("fifth").with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    assert_eq!(
        cache.send(&request_at(1), &mut prompt),
        Err(CacheError::TooManyBreakpoints { count: 5, max: 4 })
    );
}

/// Caches tools+system+one message (3 blocks), then sends that prefix followed by
/// `added` more blocks with a breakpoint on the last block only.
fn read_blocks_after_adding(added: usize) -> usize {
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    prompt
        .push(Block::user(&text(10, 'a')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    send(&mut cache, &request_at(0), &mut prompt);
    prompt.clear_cache_control();
    for _ in 0..added {
        prompt.push(Block::assistant(&text(10, 'b'))).unwrap();
    }
    let last = prompt.len() - 1;
    prompt
        .set_cache_control(last, Some(CacheTtl::FiveMinutes))
        .unwrap();
    send(&mut cache, &request_at(1), &mut prompt).read_blocks
}

#[test]
fn cache_lookback_reaches_twenty_blocks_before_a_breakpoint() {
    // Goal: a breakpoint finds an entry at most 20 block boundaries back. Method:
    // cache a 3-block prefix, then put the only breakpoint 20 and 21 blocks later.
    assert_eq!(read_blocks_after_adding(1), 3);
    assert_eq!(read_blocks_after_adding(20), 3);
    assert_eq!(read_blocks_after_adding(21), 0);
}

/// Cache-write tokens of a single system block of `tokens` with a breakpoint.
fn written_tokens(model: &str, tokens: u64) -> u64 {
    let mut cache = PromptCache::new();
    let mut prompt = Prompt::new();
    prompt
        .push(Block::system(&text(tokens, 's')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    let outcome = send(&mut cache, &Request::new(ORG, model, secs(0)), &mut prompt);
    assert_eq!(
        outcome.usage.input_tokens + outcome.usage.cache_creation_input_tokens,
        tokens
    );
    outcome.usage.cache_creation_input_tokens
}

#[test]
fn cache_minimum_length_is_per_model() {
    // Goal: prefixes shorter than the model's minimum are never written. Method:
    // one token under and exactly at each documented minimum.
    for (model, minimum) in [
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-opus-4-1-20250805", 1024),
        ("claude-3-haiku-20240307", 2048),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-haiku-4-5-20251001", 4096),
    ] {
        assert_eq!(written_tokens(model, minimum - 1), 0, "{model}");
        assert_eq!(written_tokens(model, minimum), minimum, "{model}");
    }
}

#[test]
fn cache_five_minute_ttl_is_refreshed_by_every_hit() {
    // Goal: a 5m entry lives 5 minutes after its last hit. Method: hit at 4 and 8
    // minutes (past the original expiry), then miss exactly 5 minutes after that.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(
        send(&mut cache, &request_at(240), &mut prompt)
            .usage
            .cache_read_input_tokens,
        1200
    );
    assert_eq!(
        send(&mut cache, &request_at(480), &mut prompt)
            .usage
            .cache_read_input_tokens,
        1200
    );
    let expired = send(&mut cache, &request_at(780), &mut prompt);
    assert_eq!(expired.usage.cache_read_input_tokens, 0);
    assert_eq!(expired.usage.cache_creation_input_tokens, 1200);

    let mut unrefreshed = PromptCache::new();
    send(&mut unrefreshed, &request_at(0), &mut prompt);
    assert_eq!(
        send(&mut unrefreshed, &request_at(299), &mut prompt).read_blocks,
        2
    );
    let mut unrefreshed = PromptCache::new();
    send(&mut unrefreshed, &request_at(0), &mut prompt);
    assert_eq!(
        send(&mut unrefreshed, &request_at(300), &mut prompt).read_blocks,
        0
    );
}

#[test]
fn cache_one_hour_ttl_lives_an_hour_and_is_refreshed() {
    // Goal: a 1h entry outlives 5 minutes, expires after an hour, and hits refresh
    // it. Method: hits at 6 minutes and 59:59, a refreshed hit at 1h30, a miss at
    // exactly 1h without hits.
    let mut prompt = Prompt::new();
    prompt
        .push(Block::system(&text(1200, 's')).with_cache_control(CacheTtl::OneHour))
        .unwrap();
    let mut cache = PromptCache::new();
    let first = send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(first.usage.cache_creation.ephemeral_1h_input_tokens, 1200);
    assert_eq!(first.usage.cache_creation.ephemeral_5m_input_tokens, 0);
    assert_eq!(
        send(&mut cache, &request_at(360), &mut prompt).read_blocks,
        1
    );
    assert_eq!(
        send(&mut cache, &request_at(3599), &mut prompt).read_blocks,
        1
    );
    assert_eq!(
        send(&mut cache, &request_at(5400), &mut prompt).read_blocks,
        1
    );

    let mut cache = PromptCache::new();
    send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(
        send(&mut cache, &request_at(3600), &mut prompt).read_blocks,
        0
    );
}

#[test]
fn cache_mixed_ttls_bill_read_then_1h_then_5m_writes() {
    // Goal: the documented mixed-TTL billing: read up to the highest hit (A), 1h
    // write up to the last 1h breakpoint (B), 5m write up to the last breakpoint
    // (C), input after C. Method: two 1h system breakpoints (1100, 1300 tokens), a
    // 5m message breakpoint (1600) and 50 trailing tokens; vary what hits.
    let build = |system_b: char, message: char| {
        let mut prompt = Prompt::new();
        prompt
            .push(Block::system(&text(1100, 's')).with_cache_control(CacheTtl::OneHour))
            .unwrap();
        prompt
            .push(Block::system(&text(200, system_b)).with_cache_control(CacheTtl::OneHour))
            .unwrap();
        prompt
            .push(Block::user(&text(300, message)).with_cache_control(CacheTtl::FiveMinutes))
            .unwrap();
        prompt.push(Block::assistant(&text(50, 'z'))).unwrap();
        prompt
    };
    let mut cache = PromptCache::new();
    let cold = send(&mut cache, &request_at(0), &mut build('b', 'm'));
    assert_eq!(cold.usage.cache_read_input_tokens, 0);
    assert_eq!(cold.usage.cache_creation.ephemeral_1h_input_tokens, 1300);
    assert_eq!(cold.usage.cache_creation.ephemeral_5m_input_tokens, 300);
    assert_eq!(cold.usage.cache_creation_input_tokens, 1600);
    assert_eq!(cold.usage.input_tokens, 50);

    // Hit at B: nothing 1h left to write.
    let new_message = send(&mut cache, &request_at(10), &mut build('b', 'n'));
    assert_eq!(new_message.usage.cache_read_input_tokens, 1300);
    assert_eq!(
        new_message.usage.cache_creation.ephemeral_1h_input_tokens,
        0
    );
    assert_eq!(
        new_message.usage.cache_creation.ephemeral_5m_input_tokens,
        300
    );
    assert_eq!(new_message.usage.input_tokens, 50);

    // Hit at the first 1h breakpoint only.
    let new_system = send(&mut cache, &request_at(20), &mut build('c', 'm'));
    assert_eq!(new_system.usage.cache_read_input_tokens, 1100);
    assert_eq!(
        new_system.usage.cache_creation.ephemeral_1h_input_tokens,
        200
    );
    assert_eq!(
        new_system.usage.cache_creation.ephemeral_5m_input_tokens,
        300
    );
    assert_eq!(new_system.usage.input_tokens, 50);
}

#[test]
fn cache_rejects_a_one_hour_breakpoint_after_a_five_minute_one() {
    // Goal: the API requires longer TTLs first. Method: 5m then 1h.
    let mut prompt = Prompt::new();
    prompt
        .push(Block::system(&text(1200, 's')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    prompt
        .push(Block::user("u").with_cache_control(CacheTtl::OneHour))
        .unwrap();
    assert_eq!(
        PromptCache::new().send(&request_at(0), &mut prompt),
        Err(CacheError::TtlOrder {
            index: 1,
            five_minute_index: 0,
        })
    );
}

#[test]
fn cache_entry_is_readable_only_once_its_response_started() {
    // Goal: requests sent together do not read each other's writes. Method: a
    // parent and a fork sent at the same moment both write; a request before the
    // first response starts misses; one at that moment hits.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    let parent = request_at(0).first_token_after(secs(5));
    let fork = request_at(0).first_token_after(secs(3));
    assert_eq!(
        send(&mut cache, &parent, &mut prompt)
            .usage
            .cache_creation_input_tokens,
        1200
    );
    assert_eq!(
        send(&mut cache, &fork, &mut prompt)
            .usage
            .cache_creation_input_tokens,
        1200,
        "a simultaneous fork pays the write again"
    );
    let early = request_at(2).first_token_after(secs(10));
    assert_eq!(send(&mut cache, &early, &mut prompt).read_blocks, 0);
    // The earlier of the two writers' first tokens makes the entry visible.
    assert_eq!(send(&mut cache, &request_at(3), &mut prompt).read_blocks, 2);
}

/// tools (1100 tokens, 1h) → system (200, 5m) → message (300, 5m).
fn layered_prompt(tool: char, system: char) -> Prompt {
    let mut prompt = Prompt::new();
    prompt
        .push(Block::tool(text(1100, tool).into_bytes()).with_cache_control(CacheTtl::OneHour))
        .unwrap();
    prompt
        .push(Block::system(&text(200, system)).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    prompt
        .push(Block::user(&text(300, 'm')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    prompt
}

#[test]
fn cache_invalidation_by_tools_and_system_changes() {
    // Goal: a system change keeps the tools entry and loses system and messages; a
    // tools change loses everything. Method: cache all three layers, then edit.
    let mut cache = PromptCache::new();
    let cold = send(&mut cache, &request_at(0), &mut layered_prompt('t', 's'));
    assert_eq!(cold.writes.len(), 3);
    let system_changed = send(&mut cache, &request_at(10), &mut layered_prompt('t', 'S'));
    assert_eq!(system_changed.usage.cache_read_input_tokens, 1100);
    assert_eq!(system_changed.usage.cache_creation_input_tokens, 500);
    let tools_changed = send(&mut cache, &request_at(20), &mut layered_prompt('T', 's'));
    assert_eq!(tools_changed.usage.cache_read_input_tokens, 0);
    assert_eq!(tools_changed.usage.cache_creation_input_tokens, 1600);
}

#[test]
fn cache_invalidation_by_model_change() {
    // Goal: entries are per model. Method: same prompt, another model, then back.
    let mut cache = PromptCache::new();
    send(&mut cache, &request_at(0), &mut layered_prompt('t', 's'));
    let other = Request::new(ORG, "claude-opus-4-1", secs(10));
    assert_eq!(
        send(&mut cache, &other, &mut layered_prompt('t', 's')).read_blocks,
        0
    );
    assert_eq!(
        send(&mut cache, &request_at(20), &mut layered_prompt('t', 's')).read_blocks,
        3
    );
}

#[test]
fn cache_invalidation_by_thinking_change_spares_tools_and_system() {
    // Goal: changing thinking (on/off or budget) loses message entries only.
    // Method: cache with thinking off, switch budgets, switch back.
    let mut cache = PromptCache::new();
    let mut prompt = layered_prompt('t', 's');
    let with = |seconds, thinking| request_at(seconds).thinking(thinking);
    let budget = |budget_tokens| Some(ThinkingConfig::Enabled { budget_tokens });
    send(&mut cache, &with(0, None), &mut prompt);
    assert_eq!(
        send(&mut cache, &with(10, budget(1024)), &mut prompt).read_blocks,
        2
    );
    assert_eq!(
        send(&mut cache, &with(20, budget(2048)), &mut prompt).read_blocks,
        2
    );
    assert_eq!(
        send(&mut cache, &with(30, budget(1024)), &mut prompt).read_blocks,
        3
    );
    // Absent and disabled thinking are the same request.
    let disabled = Some(ThinkingConfig::Disabled);
    assert_eq!(
        send(&mut cache, &with(40, disabled), &mut prompt).read_blocks,
        3
    );
}

#[test]
fn cache_is_isolated_per_organization() {
    // Goal: one organization never reads another's entries. Method: org-a writes,
    // org-b sends the same prompt, org-a reads.
    let mut cache = PromptCache::new();
    let mut prompt = base_prompt();
    send(&mut cache, &request_at(0), &mut prompt);
    let other_org = Request::new("org-b", SONNET, secs(10));
    let outcome = send(&mut cache, &other_org, &mut prompt);
    assert_eq!(outcome.usage.cache_read_input_tokens, 0);
    assert_eq!(outcome.usage.cache_creation_input_tokens, 1200);
    assert_eq!(
        send(&mut cache, &request_at(20), &mut prompt).read_blocks,
        2
    );
}

#[test]
fn cache_default_estimator_is_bytes_over_four_rounded_up() {
    // Goal: the documented estimator, and recorded counts replacing it. Method:
    // estimate a few lengths; send a short block carrying a recorded count.
    let estimator = BytesPerToken::default();
    assert_eq!(estimator, BytesPerToken::FOUR);
    assert_eq!(estimator.estimate_tokens(b""), 0);
    assert_eq!(estimator.estimate_tokens(b"a"), 1);
    assert_eq!(estimator.estimate_tokens(b"abcd"), 1);
    assert_eq!(estimator.estimate_tokens(b"abcde"), 2);

    let mut prompt = Prompt::new();
    prompt
        .push(
            Block::system("short but recorded long")
                .with_tokens(5000)
                .with_cache_control(CacheTtl::FiveMinutes),
        )
        .unwrap();
    let outcome = send(&mut PromptCache::new(), &request_at(0), &mut prompt);
    assert_eq!(outcome.prompt_tokens, 5000);
    assert_eq!(outcome.usage.cache_creation_input_tokens, 5000);
}

#[test]
fn cache_ratio_estimator_rounds_up_per_block_in_thousandths() {
    // Goal: a configured ratio counts ceil(bytes / ratio) per block, exactly, in
    // integer thousandths. Method: lengths on and just past a multiple, at 3 and at
    // 2.95 bytes a token (59 bytes are exactly 20 tokens there).
    let three = BytesPerToken::from_bytes_per_token(3.0).unwrap();
    assert_eq!(three.milli_bytes_per_token(), 3_000);
    assert_eq!(three.estimate_tokens(b""), 0);
    assert_eq!(three.estimate_tokens(b"abc"), 1);
    assert_eq!(three.estimate_tokens(b"abcd"), 2);
    assert_eq!(three.estimate_tokens(&[b'x'; 3_000]), 1_000);
    let calibrated = BytesPerToken::from_bytes_per_token(2.95).unwrap();
    assert_eq!(calibrated.milli_bytes_per_token(), 2_950);
    assert_eq!(calibrated.estimate_tokens(&[b'x'; 59]), 20);
    assert_eq!(calibrated.estimate_tokens(&[b'x'; 60]), 21);
    // The base prompt's 1,600-byte tool and 3,200-byte system block, 1,200 tokens
    // at 4 bytes a token, are 534 + 1,067 at 3: each block rounds up on its own.
    let mut prompt = base_prompt();
    let mut cache = PromptCache::new().with_estimator(three);
    assert_eq!(
        send(&mut cache, &request_at(0), &mut prompt).prompt_tokens,
        1601
    );
}

#[test]
fn cache_ratio_estimator_refuses_ratios_outside_one_to_eight_bytes() {
    // Goal: a ratio no tokenizer has is an error, not a silently absurd count.
    // Method: the bounds, values past them, NaN and infinity.
    assert_eq!(
        BytesPerToken::from_bytes_per_token(1.0),
        Ok(BytesPerToken::MIN)
    );
    assert_eq!(
        BytesPerToken::from_bytes_per_token(8.0),
        Ok(BytesPerToken::MAX)
    );
    for refused in [0.0, -3.0, 0.999, 8.001, f64::NAN, f64::INFINITY] {
        let error = BytesPerToken::from_bytes_per_token(refused).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("bytes_per_token must be a number from 1.0 to 8.0"),
            "{error}"
        );
    }
    assert!(BytesPerToken::from_milli(999).is_err());
    assert_eq!(
        BytesPerToken::from_milli(2_950).unwrap().to_string(),
        "2.95"
    );
    assert_eq!(BytesPerToken::FOUR.to_string(), "4.0");
}

#[test]
fn cache_estimator_is_pluggable() {
    // Goal: a custom estimator drives every count. Method: one token per byte.
    #[derive(Debug)]
    struct PerByte;
    impl TokenEstimator for PerByte {
        fn estimate_tokens(&self, bytes: &[u8]) -> u64 {
            bytes.len() as u64
        }
    }
    let mut cache = PromptCache::new().with_estimator(PerByte);
    let mut prompt = base_prompt();
    let outcome = send(&mut cache, &request_at(0), &mut prompt);
    assert_eq!(outcome.prompt_tokens, 4800);
}

#[test]
fn cache_rejects_a_response_before_its_request() {
    // Goal: impossible timings are input errors, not panics.
    let mut request = request_at(10);
    request.response_started_at = secs(9);
    assert!(matches!(
        PromptCache::new().send(&request, &mut base_prompt()),
        Err(CacheError::ResponseBeforeSend { .. })
    ));
}
