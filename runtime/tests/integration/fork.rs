//! Fork subagent tests (PROTOCOL.md §6): cache-safe parameters, the shape of the
//! fork's first request, byte identity of its cache prefix with the parent and with
//! sibling forks, the recursive-fork and depth guards, the coordinator-mode
//! exclusion, destructive tools (advertised unchanged, gated at call time), and
//! cache-break detection and journaling.

use std::sync::Arc;

use coord_runtime::fork::{
    build_fork, check_cache_break, check_fork_allowed, detect_cache_break, fork_directive_text,
    fork_marker_indices, journal_cache_break, request_prefix_bytes, CacheBreak, CachePart,
    CacheSafeParams, ForkConfig, ForkError, ForkOrigin, Supervision, FORK_DIRECTIVE_PREFIX,
    FORK_PLACEHOLDER_RESULT,
};
use coord_runtime::profile::Profile;
use coord_runtime::tools::{Role, ToolName};
use coord_runtime::world::{
    CacheControl, CacheTtl, ContentBlock, MemoryJournal, Message, ModelRequest,
    Role as MessageRole, SystemBlock, ThinkingConfig, ToolDefinition,
};
use coord_runtime::RuntimeEvent;
use proptest::prelude::*;
use serde_json::json;

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}).into(),
        cache_control: None,
    }
}

fn user(text: &str) -> Message {
    Message {
        role: MessageRole::User,
        content: vec![ContentBlock::text(text)],
    }
}

fn tool_use(id: &str, name: &str, prompt: &str) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input: json!({"description": "fork", "prompt": prompt}).into(),
    }
}

/// The parent's last request: tools (destructive ones included), two system blocks
/// with a breakpoint, thinking on, and a three-message history ending with a user turn.
fn parent_request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 32_000,
        tools: ["Agent", "Bash", "Edit", "Glob", "Grep", "Read", "Write"]
            .map(tool)
            .to_vec()
            .into(),
        system: vec![
            SystemBlock::text("You are a helpful agent."),
            SystemBlock {
                cache_control: Some(CacheControl::ephemeral(Some(CacheTtl::OneHour))),
                ..SystemBlock::text("Project rules: keep it small.")
            },
        ]
        .into(),
        messages: vec![
            user("Find why login fails."),
            Message {
                role: MessageRole::Assistant,
                content: vec![
                    ContentBlock::text("Reading the auth module."),
                    tool_use("toolu_read", "Read", "src/auth.rs"),
                ],
            },
            Message {
                role: MessageRole::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "toolu_read".into(),
                    content: "fn login() { … }".into(),
                    is_error: false,
                    cache_control: Some(CacheControl::ephemeral(None)),
                }],
            },
        ],
        thinking: Some(ThinkingConfig::Enabled {
            budget_tokens: 8_000,
        }),
    }
}

/// The parent's response that launches two forks (and reads a file alongside).
fn launching_message() -> Message {
    Message {
        role: MessageRole::Assistant,
        content: vec![
            ContentBlock::text("Forking two investigations."),
            tool_use("toolu_fork_a", "Agent", "Check the session store"),
            tool_use("toolu_fork_b", "Agent", "Check the password hash"),
            tool_use("toolu_read2", "Read", "src/session.rs"),
        ],
    }
}

fn params() -> CacheSafeParams {
    CacheSafeParams::from_request(&parent_request())
}

fn main_thread() -> ForkOrigin {
    ForkOrigin::main_thread(Profile::ClaudeCode)
}

fn fork_request(directive: &str) -> ModelRequest {
    build_fork(
        &params(),
        &launching_message(),
        directive,
        &main_thread(),
        &ForkConfig::default(),
    )
    .expect("fork allowed")
    .request
}

/// The serde_json bytes of one part of a request.
fn to_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("serializes")
}

/// Offset of the first byte where `a` and `b` differ, computed independently of
/// the library (the shorter length when one is a prefix of the other).
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

/// Byte range of a top-level part's value in a canonical prefix, found by its key.
fn part_region(bytes: &[u8], part: &str, next: Option<&str>) -> std::ops::Range<usize> {
    let find = |key: &str| {
        let needle = format!("\"{key}\":");
        bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .map(|at| at + needle.len())
            .expect("key present")
    };
    find(part)..next.map_or(bytes.len(), |key| find(key) - key.len() - 3)
}

/// Detects the break of `child` against the parent and checks the offset is the
/// first differing byte of the two canonical prefixes.
fn detect_checked(child: &ModelRequest) -> Option<CacheBreak> {
    let parent = params();
    let found = detect_cache_break(&parent, child);
    let shared = parent.messages.len();
    let a = request_prefix_bytes(&parent.to_request(), shared);
    let b = request_prefix_bytes(child, shared.min(child.messages.len()));
    let expected = first_difference(&a, &b);
    assert_eq!(found.map(|brk| brk.byte_offset as usize), expected);
    found
}

#[test]
fn cache_safe_params_round_trip_the_request() {
    // Goal: the cache-safe parameters hold exactly the parent request's key parts.
    // Method: from_request then to_request gives back an equal request.
    let request = parent_request();
    let params = CacheSafeParams::from_request(&request);
    assert_eq!(params.model, request.model);
    assert_eq!(params.max_tokens, request.max_tokens);
    assert_eq!(params.thinking, request.thinking);
    assert_eq!(params.to_request(), request);
}

#[test]
fn fork_messages_have_the_specified_shape() {
    // Goal: history, then the launching assistant message whole, then one user message
    // with a placeholder result per tool use (all of them, in order) and the directive
    // block with the boilerplate.
    // Method: build a fork and inspect its messages.
    let request = fork_request("Check the session store");
    let history = parent_request().messages;
    assert_eq!(request.messages.len(), history.len() + 2);
    assert_eq!(request.messages[..history.len()], history[..]);
    assert_eq!(request.messages[history.len()], launching_message());
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, MessageRole::User);
    let ids: Vec<&str> = last.content[..3]
        .iter()
        .map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => {
                assert_eq!(content, FORK_PLACEHOLDER_RESULT);
                assert_eq!(content, "Fork started — processing in background");
                assert!(!is_error);
                assert!(cache_control.is_none());
                tool_use_id.as_str()
            }
            other => panic!("expected a tool result, got {other:?}"),
        })
        .collect();
    assert_eq!(ids, ["toolu_fork_a", "toolu_fork_b", "toolu_read2"]);
    assert_eq!(last.content.len(), 4);
    let ContentBlock::Text { text, .. } = &last.content[3] else {
        panic!("expected the directive text block");
    };
    assert_eq!(text, &fork_directive_text("Check the session store"));
    assert!(text.starts_with("<fork-boilerplate>\n"));
    let close = text
        .find("</fork-boilerplate>")
        .expect("boilerplate closed");
    assert!(text[close..].ends_with("\n\nYour directive: Check the session store"));
    assert_eq!(fork_marker_indices(&request.messages), [history.len() + 1]);
}

#[test]
fn fork_prefix_is_byte_identical_to_parent() {
    // Goal: the fork's canonical prefix through the parent's messages equals the
    // parent's request bytes, and through the launching message equals the parent's
    // own next request (with the real tool results); the key parts serialize alike.
    // Method: compare request_prefix_bytes, and raw serde_json of each part.
    let parent = parent_request();
    let child = fork_request("Check the session store");
    let shared = parent.messages.len();
    let parent_bytes = request_prefix_bytes(&parent, shared);
    assert_eq!(request_prefix_bytes(&child, shared), parent_bytes);
    // The prefix is a true byte prefix of the longer conversation.
    assert!(request_prefix_bytes(&child, child.messages.len()).starts_with(&parent_bytes));

    let mut parent_next = parent.clone();
    parent_next.messages.push(launching_message());
    parent_next.messages.push(Message {
        role: MessageRole::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "toolu_fork_a".into(),
            content: "async_launched".into(),
            is_error: false,
            cache_control: None,
        }],
    });
    assert_eq!(
        request_prefix_bytes(&child, shared + 1),
        request_prefix_bytes(&parent_next, shared + 1)
    );

    assert_eq!(to_json(&child.tools), to_json(&parent.tools));
    assert_eq!(to_json(&child.system), to_json(&parent.system));
    assert_eq!(to_json(&child.model), to_json(&parent.model));
    assert_eq!(to_json(&child.thinking), to_json(&parent.thinking));
    assert_eq!(to_json(&child.max_tokens), to_json(&parent.max_tokens));
    for (index, message) in parent.messages.iter().enumerate() {
        assert_eq!(
            to_json(&child.messages[index]),
            to_json(message),
            "message {index}"
        );
    }
}

#[test]
fn sibling_forks_share_the_prefix_up_to_the_directive() {
    // Goal: two forks from the same assistant message share everything before the new
    // user message, and their bytes first differ inside the directive text.
    // Method: compare canonical prefixes; locate the first differing byte.
    let a = fork_request("Check the session store");
    let b = fork_request("Check the password hash");
    let shared = parent_request().messages.len() + 1;
    assert_eq!(
        request_prefix_bytes(&a, shared),
        request_prefix_bytes(&b, shared)
    );
    let full_a = request_prefix_bytes(&a, a.messages.len());
    let full_b = request_prefix_bytes(&b, b.messages.len());
    let offset = first_difference(&full_a, &full_b).expect("directives differ");
    let directive_at = String::from_utf8(full_a.clone())
        .unwrap()
        .find(FORK_DIRECTIVE_PREFIX)
        .expect("directive present");
    assert!(offset > directive_at + FORK_DIRECTIVE_PREFIX.len() - 1);
    // Their cache-break check against the parent is clean for both.
    assert_eq!(detect_checked(&a), None);
    assert_eq!(detect_checked(&b), None);
}

#[test]
fn prefix_grows_by_appending() {
    // Goal: the prefix with n messages is a byte prefix of the one with n + 1, for
    // every n, so a longer conversation never rewrites earlier bytes.
    // Method: compare successive prefixes of a fork request.
    let request = fork_request("Check the session store");
    for n in 0..request.messages.len() {
        let shorter = request_prefix_bytes(&request, n);
        let longer = request_prefix_bytes(&request, n + 1);
        assert!(longer.starts_with(&shorter), "n = {n}");
        assert!(longer.len() > shorter.len());
    }
}

#[test]
#[should_panic(expected = "prefix of 4 messages")]
fn prefix_of_missing_messages_is_a_bug() {
    // Goal: asking for more messages than the request has is a caller bug: it panics.
    // Method: ask for one more message than the parent request holds.
    request_prefix_bytes(&parent_request(), 4);
}

#[test]
fn fork_marker_in_user_history_refuses() {
    // Goal: a fork from inside a fork is refused by the marker scan, even when the
    // caller claims depth 0. Method: fork from the fork's own request.
    let child = fork_request("Check the session store");
    let nested = CacheSafeParams::from_request(&child);
    let launch = Message {
        role: MessageRole::Assistant,
        content: vec![tool_use("toolu_nested", "Agent", "go deeper")],
    };
    let err = build_fork(
        &nested,
        &launch,
        "go deeper",
        &main_thread(),
        &ForkConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ForkError::RecursiveFork {
            message_index: 4,
            markers_count: 1,
            depth_max: 1,
        }
    );
    assert!(err.to_string().contains("fork from inside a fork"));
}

#[test]
fn fork_marker_outside_user_text_is_ignored() {
    // Goal: only user text blocks are scanned: a tool result or an assistant message
    // that mentions the tag does not block a fork.
    // Method: put the marker in a tool result and in assistant text.
    let mut history = parent_request().messages;
    history.push(Message {
        role: MessageRole::Assistant,
        content: vec![
            ContentBlock::text("The docs mention <fork-boilerplate>."),
            tool_use("toolu_cat", "Read", "docs.md"),
        ],
    });
    history.push(Message {
        role: MessageRole::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "toolu_cat".into(),
            content: "<fork-boilerplate>quoted</fork-boilerplate>".into(),
            is_error: false,
            cache_control: None,
        }],
    });
    assert!(fork_marker_indices(&history).is_empty());
    assert_eq!(
        check_fork_allowed(&history, &main_thread(), &ForkConfig::default()),
        Ok(1)
    );
}

#[test]
fn depth_limit_refuses_and_is_configurable() {
    // Goal: by default a fork (depth 1) cannot fork; with a limit of 2 it can once, and
    // the marker count still bounds the depth; a limit of 0 disables forking.
    // Method: check_fork_allowed across depths, limits and marker counts.
    let clean = parent_request().messages;
    let fork_child = main_thread().with_depth(1);
    assert_eq!(
        check_fork_allowed(&clean, &fork_child, &ForkConfig::default()),
        Err(ForkError::DepthExceeded {
            depth: 2,
            depth_max: 1
        })
    );
    let two = ForkConfig::default().with_depth_max(2);
    let one_marker = fork_request("Check the session store").messages;
    assert_eq!(check_fork_allowed(&one_marker, &fork_child, &two), Ok(2));
    // A caller that lost track of the depth still gets the right one from the markers.
    assert_eq!(check_fork_allowed(&one_marker, &main_thread(), &two), Ok(2));
    let mut two_markers = one_marker.clone();
    two_markers.push(Message {
        role: MessageRole::Assistant,
        content: vec![tool_use("toolu_again", "Agent", "again")],
    });
    two_markers.push(user(&fork_directive_text("again")));
    assert_eq!(
        check_fork_allowed(&two_markers, &fork_child, &two),
        Err(ForkError::RecursiveFork {
            message_index: 4,
            markers_count: 2,
            depth_max: 2
        })
    );
    assert_eq!(
        check_fork_allowed(
            &clean,
            &main_thread(),
            &ForkConfig::default().with_depth_max(0)
        ),
        Err(ForkError::DepthExceeded {
            depth: 1,
            depth_max: 0
        })
    );
}

#[test]
fn fork_in_coordinator_mode_is_refused() {
    // Goal: fork and coordinator mode are mutually exclusive, under every profile.
    // Method: build a fork from a coordinator origin.
    for profile in Profile::ALL {
        let origin = ForkOrigin::main_thread(profile).with_coordinator_mode(true);
        let result = build_fork(
            &params(),
            &launching_message(),
            "Check the session store",
            &origin,
            &ForkConfig::default(),
        );
        assert_eq!(result.unwrap_err(), ForkError::CoordinatorMode, "{profile}");
    }
}

#[test]
fn bad_launches_are_typed_errors() {
    // Goal: a non-assistant launch message, one without tool uses, and a blank
    // directive are refused with their own errors. Method: build each.
    let config = ForkConfig::default();
    let build = |message: &Message, directive: &str| {
        build_fork(&params(), message, directive, &main_thread(), &config).unwrap_err()
    };
    assert_eq!(build(&user("hi"), "x"), ForkError::NotAssistantMessage);
    let no_tools = Message {
        role: MessageRole::Assistant,
        content: vec![ContentBlock::text("just talking")],
    };
    assert_eq!(build(&no_tools, "x"), ForkError::NoToolUse);
    assert_eq!(
        build(&launching_message(), " \n\t"),
        ForkError::EmptyDirective
    );
}

#[test]
fn unsupervised_fork_keeps_tool_definitions_but_gates_destructive_calls() {
    // Goal: the advertised tools stay byte-identical to the parent's (cache safety),
    // while the fork's surface refuses Bash, Edit and Write.
    // Method: build an unsupervised fork (the default); compare tools; query the surface.
    let fork = build_fork(
        &params(),
        &launching_message(),
        "Check the session store",
        &main_thread(),
        &ForkConfig::default(),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_vec(&fork.request.tools).unwrap(),
        serde_json::to_vec(&parent_request().tools).unwrap()
    );
    assert!(fork.request.tools.iter().any(|tool| tool.name == "Bash"));
    assert_eq!(fork.role, Role::UnsupervisedFork);
    assert_eq!(fork.depth, 1);
    for destructive in [ToolName::Bash, ToolName::Edit, ToolName::Write] {
        assert!(!fork.surface.allows(destructive), "{destructive} allowed");
    }
    let allowed: Vec<ToolName> = fork.surface.tools().collect();
    assert_eq!(
        allowed,
        [
            ToolName::Agent,
            ToolName::Read,
            ToolName::Glob,
            ToolName::Grep
        ]
    );
}

#[test]
fn supervised_fork_keeps_destructive_tools() {
    // Goal: an explicitly supervised fork keeps the destructive tools, with the same
    // request as an unsupervised one. Method: build both and compare.
    let config = ForkConfig::default().with_supervision(Supervision::Supervised);
    let supervised = build_fork(
        &params(),
        &launching_message(),
        "Check the session store",
        &main_thread(),
        &config,
    )
    .unwrap();
    assert_eq!(supervised.role, Role::Worker);
    for destructive in [ToolName::Bash, ToolName::Edit, ToolName::Write] {
        assert!(
            supervised.surface.allows(destructive),
            "{destructive} refused"
        );
    }
    assert_eq!(supervised.request, fork_request("Check the session store"));
}

#[test]
fn identical_request_reports_no_cache_break() {
    // Goal: the parent's own request and a fork built from it break nothing, and
    // nothing is journaled. Method: detect and check with a memory journal.
    let journal = MemoryJournal::new();
    assert_eq!(detect_checked(&parent_request()), None);
    let child = fork_request("Check the session store");
    assert_eq!(
        check_cache_break(&journal, "fork-a", &params(), &child),
        None
    );
    assert!(journal.events().is_empty());
}

#[test]
fn changed_system_prompt_breaks_at_its_block() {
    // Goal: editing the second system block reports part `system`, block 1, at an
    // offset inside that block. Method: mutate, detect, locate the system region.
    let mut child = fork_request("x");
    Arc::make_mut(&mut child.system)[1]
        .text
        .push_str(" Also be fast.");
    let found = detect_checked(&child).expect("break");
    assert_eq!(found.part, CachePart::System);
    assert_eq!(found.block_index, Some(1));
    let bytes = request_prefix_bytes(&child, 3);
    let region = part_region(&bytes, "system", Some("messages"));
    assert!(region.contains(&(found.byte_offset as usize)));
}

#[test]
fn changed_model_breaks_at_model() {
    // Goal: another model reports part `model`, no block, inside the model value.
    // Method: mutate the model's last character.
    let mut child = fork_request("x");
    child.model = "claude-sonnet-4-6".into();
    let found = detect_checked(&child).expect("break");
    assert_eq!((found.part, found.block_index), (CachePart::Model, None));
    // `{"model":"claude-sonnet-4-` is 26 bytes, so the `5`/`6` is at offset 26.
    assert_eq!(found.byte_offset, 26);
}

#[test]
fn added_tool_breaks_at_the_new_block() {
    // Goal: adding a tool at the end reports part `tools`, block index = the parent's
    // tool count. Method: push a tool and detect.
    let mut child = fork_request("x");
    Arc::make_mut(&mut child.tools).push(tool("WebFetch"));
    let found = detect_checked(&child).expect("break");
    assert_eq!(found.part, CachePart::Tools);
    assert_eq!(found.block_index, Some(parent_request().tools.len()));
    let bytes = request_prefix_bytes(&child, 3);
    let region = part_region(&bytes, "tools", Some("system"));
    assert!(region.contains(&(found.byte_offset as usize)));
    // Inserting at the front breaks at block 0 instead.
    let mut front = fork_request("x");
    Arc::make_mut(&mut front.tools).insert(0, tool("AAA"));
    assert_eq!(detect_checked(&front).unwrap().block_index, Some(0));
}

#[test]
fn changed_thinking_breaks_at_thinking() {
    // Goal: a different thinking budget, or thinking turned off, reports `thinking`.
    // Method: two mutations of the thinking config.
    for thinking in [
        Some(ThinkingConfig::Enabled {
            budget_tokens: 9_000,
        }),
        None,
        Some(ThinkingConfig::Disabled),
    ] {
        let mut child = fork_request("x");
        child.thinking = thinking;
        let found = detect_checked(&child).expect("break");
        assert_eq!((found.part, found.block_index), (CachePart::Thinking, None));
        let bytes = request_prefix_bytes(&child, 3);
        let region = part_region(&bytes, "thinking", Some("tools"));
        assert!(
            region.contains(&(found.byte_offset as usize)),
            "{thinking:?}"
        );
    }
}

#[test]
fn changed_max_tokens_breaks_at_max_tokens() {
    // Goal: a different max_tokens reports `max_tokens`, whether the number grows or
    // shrinks (a shorter number differs at the separator after it).
    // Method: 32000 → 64000 and 32000 → 3200.
    for max_tokens in [64_000, 3_200, 320_000] {
        let mut child = fork_request("x");
        child.max_tokens = max_tokens;
        let found = detect_checked(&child).expect("break");
        assert_eq!(
            (found.part, found.block_index),
            (CachePart::MaxTokens, None),
            "{max_tokens}"
        );
    }
}

#[test]
fn changed_or_missing_history_breaks_at_messages() {
    // Goal: an edited history message reports `messages` at its index; a child with
    // fewer messages than the parent reports the first missing one.
    // Method: edit message 2's tool result; drop the last message.
    let mut edited = fork_request("x");
    if let ContentBlock::ToolResult { content, .. } = &mut edited.messages[2].content[0] {
        content.push('!');
    }
    let found = detect_checked(&edited).expect("break");
    assert_eq!(
        (found.part, found.block_index),
        (CachePart::Messages, Some(2))
    );
    let mut short = parent_request();
    short.messages.pop();
    let found = detect_checked(&short).expect("break");
    assert_eq!(
        (found.part, found.block_index),
        (CachePart::Messages, Some(2))
    );
}

#[test]
fn cache_break_is_journaled() {
    // Goal: a detected break becomes one RuntimeEvent::CacheBreak with the same fields.
    // Method: journal_cache_break and check_cache_break into memory journals.
    let mut child = fork_request("x");
    child.model = "claude-opus-4-1".into();
    let journal = MemoryJournal::new();
    let found = check_cache_break(&journal, "fork-a", &params(), &child).expect("break");
    let expected = RuntimeEvent::CacheBreak {
        agent: "fork-a".into(),
        part: "model".into(),
        block_index: None,
        byte_offset: found.byte_offset,
    };
    assert_eq!(journal.events(), std::slice::from_ref(&expected));
    let direct = MemoryJournal::new();
    journal_cache_break(&direct, "fork-a", &found);
    assert_eq!(direct.events(), [expected]);
}

proptest! {
    #[test]
    fn any_system_block_edit_is_located(
        texts in proptest::collection::vec("[a-z \"\\\\]{0,12}", 1..6),
        pick in any::<prop::sample::Index>(),
        suffix in "[a-z\"]{1,4}",
    ) {
        // Goal: for any system prompt and any edited block, the break names `system`,
        // that block, and the first differing byte.
        // Method: random blocks; append to one; detect against the unedited parent.
        let mut parent = parent_request();
        parent.system = Arc::new(texts.iter().map(SystemBlock::text).collect());
        let index = pick.index(texts.len());
        let mut child = parent.clone();
        Arc::make_mut(&mut child.system)[index]
            .text
            .push_str(&suffix);
        let found = detect_cache_break(&CacheSafeParams::from_request(&parent), &child);
        let a = request_prefix_bytes(&parent, 3);
        let b = request_prefix_bytes(&child, 3);
        let expected = first_difference(&a, &b).expect("bytes differ");
        prop_assert_eq!(found, Some(CacheBreak {
            part: CachePart::System,
            block_index: Some(index),
            byte_offset: expected as u64,
        }), "repro: texts={:?} index={} suffix={:?}", texts, index, suffix);
    }
}
