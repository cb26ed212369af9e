//! The World boundary's production implementations: the real disk's guarantees,
//! the manual clock, seeded entropy.

use std::io::ErrorKind;
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{
    ChaChaEntropy, Clock, Disk, Entropy, FileKind, ManualClock, RealDisk, SystemClock,
};

#[test]
fn create_new_refuses_existing_files_and_symlinks() {
    // Goal: O_EXCL|O_NOFOLLOW: neither a file nor a (even dangling) symlink is opened.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    let path = dir.path().join("f");
    disk.create_new(&path, b"first").unwrap();
    assert_eq!(
        disk.create_new(&path, b"again").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(disk.read(&path).unwrap(), b"first");

    let target = dir.path().join("target");
    let link = dir.path().join("link");
    symlink(&target, &link).unwrap();
    assert_eq!(
        disk.create_new(&link, b"x").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert!(
        !target.exists(),
        "nothing may be created through a dangling symlink"
    );
}

#[test]
fn no_operation_follows_a_symlink() {
    // Goal: append, read, read_at and overwrite_in_place fail on a symlink and leave
    // its target as it was.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    let target = dir.path().join("target");
    std::fs::write(&target, b"secret").unwrap();
    let link = dir.path().join("link");
    symlink(&target, &link).unwrap();
    assert!(disk.append(&link, b"x").is_err());
    assert!(disk.read(&link).is_err());
    assert!(disk.read_at(&link, 0, 10).is_err());
    assert!(disk.overwrite_in_place(&link, b"x").is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"secret");
    assert_eq!(disk.metadata(&link).unwrap().kind, FileKind::Symlink);
}

#[test]
fn append_returns_the_new_length_and_read_at_honours_offset_and_limit() {
    // Goal: the primitives output files are built on behave as documented.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    let path = dir.path().join("out");
    disk.create_new(&path, b"").unwrap();
    assert_eq!(disk.append(&path, b"hello ").unwrap(), 6);
    assert_eq!(disk.append(&path, b"world").unwrap(), 11);
    assert_eq!(disk.read_at(&path, 6, 3).unwrap(), b"wor");
    assert_eq!(disk.read_at(&path, 6, 100).unwrap(), b"world");
    assert!(disk.read_at(&path, 11, 100).unwrap().is_empty());
    assert!(disk.read_at(&path, 500, 100).unwrap().is_empty());
    let meta = disk.metadata(&path).unwrap();
    assert_eq!((meta.kind, meta.len_bytes), (FileKind::File, 11));
    assert!(meta.modified_unix_ms.is_some());
}

#[test]
fn replace_atomic_swaps_contents_and_leaves_no_temp_file() {
    // Goal: the atomic replace yields the new contents and cleans up after itself.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    let path = dir.path().join("inbox.json");
    disk.replace_atomic(&path, b"[1]").unwrap();
    disk.replace_atomic(&path, b"[1,2]").unwrap();
    assert_eq!(disk.read(&path).unwrap(), b"[1,2]");
    assert_eq!(disk.list_dir(dir.path()).unwrap(), vec![path]);
}

#[test]
fn replace_atomic_over_a_symlink_replaces_the_link_not_its_target() {
    // Goal: rename(2) swaps the directory entry; the symlink's target is untouched.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    let target = dir.path().join("target");
    std::fs::write(&target, b"secret").unwrap();
    let link = dir.path().join("link");
    symlink(&target, &link).unwrap();
    disk.replace_atomic(&link, b"new").unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"secret");
    assert_eq!(disk.metadata(&link).unwrap().kind, FileKind::File);
}

#[test]
fn list_dir_is_sorted_and_hard_link_never_replaces() {
    // Goal: listing order is deterministic, and hard_link refuses an existing name.
    let dir = tempfile::tempdir().unwrap();
    let disk = RealDisk::new();
    for name in ["c", "a", "b"] {
        disk.create_new(&dir.path().join(name), name.as_bytes())
            .unwrap();
    }
    let names: Vec<_> = disk
        .list_dir(dir.path())
        .unwrap()
        .into_iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let error = disk
        .hard_link(&dir.path().join("a"), &dir.path().join("b"))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AlreadyExists);
    assert_eq!(disk.read(&dir.path().join("b")).unwrap(), b"b");
    disk.rename(&dir.path().join("a"), &dir.path().join("d"))
        .unwrap();
    disk.remove_file(&dir.path().join("b")).unwrap();
    assert_eq!(disk.list_dir(dir.path()).unwrap().len(), 2);
}

#[test]
fn the_manual_clock_moves_only_when_told() {
    // Goal: tests and simulations control time exactly; sleeping advances the clock.
    let clock = ManualClock::new(1_000_000);
    assert_eq!(clock.monotonic(), Duration::ZERO);
    assert_eq!(clock.unix_ms(), 1_000_000);
    clock.advance(Duration::from_millis(250));
    block_on(clock.sleep(Duration::from_millis(750)));
    assert_eq!(clock.monotonic(), Duration::from_secs(1));
    assert_eq!(clock.unix_ms(), 1_001_000);
}

#[test]
fn the_system_clock_is_monotonic_and_near_the_wall_clock() {
    // Goal: the production clock reads the host's clocks.
    let clock = SystemClock::new();
    let first = clock.monotonic();
    let second = clock.monotonic();
    assert!(second >= first);
    assert!(clock.unix_ms() > 1_700_000_000_000);
}

#[test]
fn seeded_entropy_replays_and_below_stays_in_range() {
    // Goal: a seed fixes the stream, and `below` covers its whole range and nothing more.
    let a = ChaChaEntropy::from_seed(42);
    let b = ChaChaEntropy::from_seed(42);
    let draws_a: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
    let draws_b: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
    assert_eq!(draws_a, draws_b);
    let mut seen = [0u32; 7];
    for _ in 0..7_000 {
        seen[a.below(7) as usize] += 1;
    }
    assert!(
        seen.iter().all(|&count| (850..1150).contains(&count)),
        "{seen:?}"
    );
    assert_ne!(
        ChaChaEntropy::from_os().next_u64(),
        ChaChaEntropy::from_os().next_u64()
    );
}

/// Polls a future that is ready at once (ManualClock's sleep) to completion.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn model_requests_and_responses_have_the_messages_api_shape() {
    // Goal: the model boundary speaks the Messages API's JSON: tagged content blocks,
    // cache_control breakpoints with TTLs, and usage with the 5m/1h split.
    use coord_runtime::world::{
        CacheControl, CacheTtl, ContentBlock, Message, ModelRequest, ModelResponse, Role,
        StopReason, SystemBlock,
    };
    let mut system = SystemBlock::text("You are a worker.");
    system.cache_control = Some(CacheControl::ephemeral(Some(CacheTtl::OneHour)));
    let request = ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 1024,
        tools: Arc::default(),
        system: vec![system].into(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: "ok".into(),
                is_error: false,
                cache_control: Some(CacheControl::ephemeral(None)),
            }],
        }],
        thinking: None,
    };
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        serde_json::json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": "You are a worker.",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": "toolu_1", "content": "ok",
                "cache_control": {"type": "ephemeral"}}]}]
        })
    );
    let response: ModelResponse = serde_json::from_value(serde_json::json!({
        "id": "msg_01", "type": "message", "model": "claude-sonnet-4-5", "role": "assistant",
        "content": [{"type": "text", "text": "hi"},
                    {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "a"}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 3, "cache_creation_input_tokens": 2048,
                  "cache_read_input_tokens": 9000, "output_tokens": 55,
                  "cache_creation": {"ephemeral_5m_input_tokens": 48, "ephemeral_1h_input_tokens": 2000}}
    }))
    .unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage.cache_creation.ephemeral_1h_input_tokens,
        2000
    );
    assert_eq!(response.usage.cache_read_input_tokens, 9000);
    assert_eq!(response.content.len(), 2);
}
