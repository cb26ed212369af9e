//! Mailboxes: no lost or duplicated message under concurrent writers (threads and
//! processes), corrupt inboxes left intact, read marks, broadcast, and write modes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::ipc::lock_path_for;
use coord_runtime::ipc::{
    broadcast, LockError, LockGuard, LockPolicy, Mailbox, MailboxConfig, MailboxError,
    MailboxMessage, SessionLayout, WriteMode,
};
use coord_runtime::world::{ChaChaEntropy, MemoryJournal, RealDisk, SystemClock};
use coord_runtime::{RuntimeEvent, World};

use super::{manual_world, real_world, FIXED_UNIX_MS};

/// Retries of one message after `Contended` before the test gives up: with 10 lock
/// retries per attempt this is thousands of lock attempts, far more than contention
/// between a handful of writers needs.
const CONTENDED_RETRIES_MAX: u32 = 200;

/// The longest pause of a writer between two of its messages.
const WRITER_PAUSE_US_MAX: u64 = 4_000;

/// The env var that turns [`mailbox_writer_child`] into a writer:
/// `<inbox path>,<writer name>,<messages count>`.
const CHILD_ENV: &str = "COORD_TEST_MAILBOX_CHILD";

/// The line a child prints so that the parent can add up its retries.
const CHILD_RETRIES_PREFIX: &str = "mailbox_writer_child contended_retries=";

/// Appends `message`, retrying it as long as the lock is contended (bounded). Returns
/// how many retries it took. Any other error fails the test.
async fn append_retrying(mailbox: &Mailbox, message: MailboxMessage) -> u32 {
    let mut retries: u32 = 0;
    loop {
        match mailbox.append(message.clone()).await {
            Ok(_) => return retries,
            Err(MailboxError::Lock(LockError::Contended { .. })) => {
                retries += 1;
                assert!(
                    retries <= CONTENDED_RETRIES_MAX,
                    "message {:?} still contended after {retries} retries",
                    message.text
                );
            }
            Err(error) => panic!("append of {:?} failed: {error}", message.text),
        }
    }
}

/// Writes `count` messages `<writer>#<i>` from `writer`, in order; returns the retries.
/// A writer pauses between its messages, as an agent does: without the pause one
/// writer re-takes the lock at once while the others are still backing off, and the
/// writers end up taking turns in long runs instead of contending.
async fn write_messages(world: &World, inbox: &Path, writer: &str, count: usize) -> u32 {
    let mailbox = Mailbox::new(world, inbox, MailboxConfig::default());
    let mut retries = 0;
    for index in 0..count {
        let message = MailboxMessage::new(world, writer, format!("{writer}#{index}"));
        retries += append_retrying(&mailbox, message).await;
        let pause_us = world.entropy.below(WRITER_PAUSE_US_MAX);
        world.clock.sleep(Duration::from_micros(pause_us)).await;
    }
    retries
}

/// A seed derived from a writer's name (FNV-1a), so each writer jitters differently
/// but reproducibly.
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A system-clock world for one writer, seeded from its name.
fn writer_world(writer: &str) -> World {
    World {
        clock: Arc::new(SystemClock::new()),
        entropy: Arc::new(ChaChaEntropy::from_seed(seed_of(writer))),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    }
}

/// Asserts that the inbox holds exactly `writers × count` messages, each once, and that
/// each writer's messages are in the order it sent them.
fn assert_all_present_once(inbox: &Path, writers: &[String], count: usize) {
    let bytes = std::fs::read(inbox).expect("read inbox");
    let messages: Vec<MailboxMessage> =
        serde_json::from_slice(&bytes).expect("the inbox parses as an array of messages");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for message in &messages {
        *seen.entry(message.text.as_str()).or_default() += 1;
    }
    let duplicated: Vec<_> = seen.iter().filter(|(_, times)| **times > 1).collect();
    assert!(duplicated.is_empty(), "duplicated: {duplicated:?}");
    let mut missing = Vec::new();
    for writer in writers {
        for index in 0..count {
            let text = format!("{writer}#{index}");
            if !seen.contains_key(text.as_str()) {
                missing.push(text);
            }
        }
    }
    assert!(missing.is_empty(), "missing: {missing:?}");
    assert_eq!(messages.len(), writers.len() * count);
    for writer in writers {
        let order: Vec<&str> = messages
            .iter()
            .filter(|message| message.from == *writer)
            .map(|message| message.text.as_str())
            .collect();
        let expected: Vec<String> = (0..count)
            .map(|index| format!("{writer}#{index}"))
            .collect();
        assert_eq!(order, expected, "{writer}'s messages out of order");
    }
    assert!(!lock_path_for(inbox).exists(), "the lock was left behind");
}

/// How often the sender changes between neighbouring messages: 0 means the writers
/// ran one after another and never actually contended.
fn writer_switches(inbox: &Path) -> usize {
    let messages: Vec<MailboxMessage> =
        serde_json::from_slice(&std::fs::read(inbox).expect("read inbox")).expect("parse");
    messages
        .windows(2)
        .filter(|pair| pair[0].from != pair[1].from)
        .count()
}

#[test]
fn concurrent_writer_threads_lose_no_message() {
    // Goal: no lost or duplicated message. Method: 8 threads x 25 appends, retry on Contended.
    const WRITERS_COUNT: usize = 8;
    const MESSAGES_PER_WRITER: usize = 25;
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = dir
        .path()
        .join("teams")
        .join("t")
        .join("inboxes")
        .join("lead.json");
    let writers: Vec<String> = (0..WRITERS_COUNT)
        .map(|index| format!("thread-{index}"))
        .collect();
    // All writers start together, so that they really contend for the lock.
    let start = Arc::new(std::sync::Barrier::new(WRITERS_COUNT));

    let handles: Vec<_> = writers
        .iter()
        .map(|writer| {
            let writer = writer.clone();
            let inbox = inbox.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("tokio runtime");
                let world = writer_world(&writer);
                start.wait();
                runtime.block_on(write_messages(&world, &inbox, &writer, MESSAGES_PER_WRITER))
            })
        })
        .collect();
    let retries: Vec<u32> = handles
        .into_iter()
        .map(|handle| handle.join().expect("writer thread panicked"))
        .collect();
    println!(
        "concurrent_writer_threads_lose_no_message: contended retries per thread {retries:?}, \
         total {}; writer switches in the inbox {}",
        retries.iter().sum::<u32>(),
        writer_switches(&inbox)
    );
    assert_all_present_once(&inbox, &writers, MESSAGES_PER_WRITER);
}

/// Not a test on its own: with [`CHILD_ENV`] set, this process is one writer of
/// [`concurrent_writer_processes_lose_no_message`]; without it, it does nothing.
#[test]
fn mailbox_writer_child() {
    // Goal: be one writer process of the test above. Method: append as the env var says.
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    // The path comes first and may itself contain commas; the other two fields do not.
    let mut fields = spec.rsplitn(3, ',');
    let count: usize = fields
        .next()
        .and_then(|count| count.parse().ok())
        .expect("messages count");
    let writer = fields.next().expect("writer name").to_owned();
    let inbox = PathBuf::from(fields.next().expect("inbox path"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let world = writer_world(&writer);
    let retries = runtime.block_on(write_messages(&world, &inbox, &writer, count));
    println!("{CHILD_RETRIES_PREFIX}{retries}");
}

#[test]
fn concurrent_writer_processes_lose_no_message() {
    // Goal: the lock works across processes. Method: 4 child processes x 25 appends.
    const WRITERS_COUNT: usize = 4;
    const MESSAGES_PER_WRITER: usize = 25;
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = dir
        .path()
        .join("teams")
        .join("t")
        .join("inboxes")
        .join("lead.json");
    let writers: Vec<String> = (0..WRITERS_COUNT)
        .map(|index| format!("process-{index}"))
        .collect();
    let test_binary = std::env::current_exe().expect("current test binary");

    let children: Vec<_> = writers
        .iter()
        .map(|writer| {
            Command::new(&test_binary)
                .args([
                    "--exact",
                    "ipc::mailbox::mailbox_writer_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(
                    CHILD_ENV,
                    format!("{},{writer},{MESSAGES_PER_WRITER}", inbox.display()),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn writer process")
        })
        .collect();
    let mut retries = Vec::new();
    for (writer, child) in writers.iter().zip(children) {
        let output = child.wait_with_output().expect("wait for writer process");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{writer} failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let writer_retries: u32 = stdout
            .lines()
            .find_map(|line| line.split_once(CHILD_RETRIES_PREFIX))
            .map(|(_, retries)| retries)
            .unwrap_or_else(|| panic!("{writer} did not run the child writer:\n{stdout}"))
            .trim()
            .parse()
            .expect("retries count");
        retries.push(writer_retries);
    }
    println!(
        "concurrent_writer_processes_lose_no_message: contended retries per process \
         {retries:?}, total {}; writer switches in the inbox {}",
        retries.iter().sum::<u32>(),
        writer_switches(&inbox)
    );
    assert_all_present_once(&inbox, &writers, MESSAGES_PER_WRITER);
}

/// Inboxes that are not a JSON array of messages, with where the parser stops.
const CORRUPT_INBOXES: [(&str, usize, usize); 3] = [
    // Cut short mid-message, as a crash during an in-place rewrite leaves it.
    (r#"[{"from": "a", "text": "#, 1, 23),
    // Valid JSON, wrong shape.
    (r#"{"not": "an array"}"#, 1, 1),
    // The position is reported on the right line.
    ("[\n  {\"from\": \"a\",\n   \"text\": 7}\n]", 3, 12),
];

#[tokio::test]
async fn corrupt_inbox_is_reported_and_left_byte_identical() {
    // Goal: a corrupt inbox gives Corrupt and stays intact. Method: every op and mode.
    for (contents, line_expected, column_expected) in CORRUPT_INBOXES {
        for write_mode in [WriteMode::Atomic, WriteMode::LegacyInPlace] {
            let dir = tempfile::tempdir().expect("tempdir");
            let test = real_world(21);
            let inbox = dir.path().join("bob.json");
            std::fs::write(&inbox, contents).expect("plant corrupt inbox");
            let mailbox = Mailbox::new(
                &test.world,
                &inbox,
                MailboxConfig::with_write_mode(write_mode),
            );
            let case = format!("{write_mode:?} {contents:?}");

            let appended = mailbox
                .append(MailboxMessage::new(&test.world, "alice", "lost?"))
                .await;
            let read = mailbox.read_all().await;
            let marked = mailbox.mark_read_indices("bob", &[0]).await;
            for (operation, error) in [
                ("append", appended.err()),
                ("read_all", read.err()),
                ("mark_read", marked.err()),
            ] {
                match error {
                    Some(MailboxError::Corrupt {
                        path, line, column, ..
                    }) => {
                        assert_eq!(path, inbox, "{case} {operation}");
                        assert_eq!(line, line_expected, "{case} {operation} line");
                        assert_eq!(column, column_expected, "{case} {operation} column");
                    }
                    other => panic!("{case} {operation}: expected Corrupt, got {other:?}"),
                }
            }
            assert_eq!(
                std::fs::read(&inbox).expect("read inbox"),
                contents.as_bytes(),
                "{case}: the corrupt bytes must stay for a human"
            );
            assert!(!lock_path_for(&inbox).exists(), "{case}: lock left behind");
            let failed = test
                .events()
                .into_iter()
                .filter(|event| matches!(event, RuntimeEvent::MailboxWriteFailed { .. }))
                .count();
            assert_eq!(failed, 1, "{case}: one failed append journaled");
        }
    }
}

#[tokio::test]
async fn whitespace_only_inbox_reads_as_empty() {
    // Goal: a blank inbox is empty, not corrupt. Method: plant one, read, append.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(22);
    let inbox = dir.path().join("bob.json");
    std::fs::write(&inbox, " \n").expect("plant blank inbox");
    let mailbox = Mailbox::new(&test.world, &inbox, MailboxConfig::default());
    assert!(mailbox.read_all().await.expect("read").is_empty());
    assert_eq!(
        mailbox
            .append(MailboxMessage::new(&test.world, "alice", "hi"))
            .await
            .expect("append"),
        1
    );
}

#[tokio::test]
async fn a_mailbox_makes_its_directory_again_when_it_is_removed_between_writes() {
    // Goal: a mailbox creates its inbox's directory before its first write, and
    // again when something removes it later; no write fails for want of it.
    // Method: write through a mailbox whose directory does not exist yet, remove the
    // directory, write again through a clone and through the original, read back.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(24);
    let inbox = dir.path().join("teams/t/inboxes/lead.json");
    let mailbox = Mailbox::new(&test.world, &inbox, MailboxConfig::default());
    let clone = mailbox.clone();
    let first = MailboxMessage::new(&test.world, "first", "hi");
    assert_eq!(clone.append(first).await.expect("first append"), 1);
    std::fs::remove_dir_all(dir.path().join("teams")).expect("remove the team");
    let second = MailboxMessage::new(&test.world, "second", "hi");
    assert_eq!(clone.append(second).await.expect("append after removal"), 1);
    assert_eq!(
        mailbox
            .append(MailboxMessage::new(&test.world, "third", "hi"))
            .await
            .expect("append through the original"),
        2
    );
    let from: Vec<String> = mailbox
        .read_all()
        .await
        .expect("read")
        .into_iter()
        .map(|message| message.from)
        .collect();
    assert_eq!(from, ["second", "third"]);
    assert!(!lock_path_for(&inbox).exists(), "the lock was released");
}

#[tokio::test]
async fn appends_write_the_whole_inbox_serialized_even_after_an_outside_writer() {
    // Goal: a mailbox that splices appends into the bytes it last wrote writes what
    // serializing every message writes, and sees a change made by another writer.
    // Method: append through clones of one mailbox, rewrite the file compactly with
    // an extra message from outside, append again, compare with a full serialization.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(23);
    let inbox = dir.path().join("lead.json");
    let mailbox = Mailbox::new(&test.world, &inbox, MailboxConfig::default());
    for n in 0..3 {
        let message = MailboxMessage::new(&test.world, format!("p{n}"), "line\n\"quoted\"");
        mailbox.clone().append(message).await.expect("append");
    }
    let pretty = |messages: &[MailboxMessage]| serde_json::to_vec_pretty(messages).expect("json");
    let mut messages = mailbox.read_all().await.expect("read");
    assert_eq!(std::fs::read(&inbox).expect("inbox"), pretty(&messages));
    messages.push(MailboxMessage::new(&test.world, "outside", "compact"));
    std::fs::write(&inbox, serde_json::to_vec(&messages).expect("json")).expect("rewrite");
    assert_eq!(
        mailbox
            .append(MailboxMessage::new(&test.world, "p3", "after"))
            .await
            .expect("append"),
        5
    );
    let messages = mailbox.read_all().await.expect("read");
    assert_eq!(messages[3].from, "outside");
    assert_eq!(messages[4].from, "p3");
    assert_eq!(std::fs::read(&inbox).expect("inbox"), pretty(&messages));
}

#[tokio::test]
async fn mark_read_by_index_and_predicate_keeps_unknown_fields() {
    // Goal: exact read marks, unknown fields kept. Method: mark, then inspect raw JSON.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, _clock) = manual_world(23, FIXED_UNIX_MS);
    let inbox = dir.path().join("bob.json");
    let planted = serde_json::json!([{
        "from": "lead",
        "text": "{\"type\":\"shutdown_request\"}",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "read": false,
        "color": "blue",
        "summary": "shutdown",
        "kind": "x",
        "meta": {"nested": [1, 2, 3]}
    }]);
    std::fs::write(&inbox, serde_json::to_vec_pretty(&planted).expect("json")).expect("plant");
    let mailbox = Mailbox::new(&test.world, &inbox, MailboxConfig::default());
    for (from, text) in [("alice", "one"), ("carol", "two"), ("alice", "three")] {
        mailbox
            .append(MailboxMessage::new(&test.world, from, text))
            .await
            .expect("append");
    }

    let unread_indices = |unread: Vec<(usize, MailboxMessage)>| -> Vec<usize> {
        unread.into_iter().map(|(index, _)| index).collect()
    };
    assert_eq!(
        unread_indices(mailbox.read_unread().await.expect("unread")),
        [0, 1, 2, 3]
    );
    assert_eq!(
        mailbox
            .mark_read_indices("bob", &[1, 3, 99])
            .await
            .expect("mark"),
        2,
        "index 99 is past the end and ignored"
    );
    let unread = mailbox.read_unread().await.expect("unread");
    assert_eq!(unread[1].1.text, "two");
    assert_eq!(unread_indices(unread), [0, 2]);
    assert_eq!(
        mailbox.mark_read_indices("bob", &[1]).await.expect("mark"),
        0,
        "already read"
    );
    assert_eq!(
        mailbox
            .mark_read_where("bob", |_, message| message.from == "lead")
            .await
            .expect("mark"),
        1
    );
    assert_eq!(
        unread_indices(mailbox.read_unread().await.expect("unread")),
        [2]
    );

    let messages = mailbox.read_all().await.expect("read");
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0].extra.get("kind"), Some(&serde_json::json!("x")));
    assert_eq!(messages[0].color.as_deref(), Some("blue"));
    assert_eq!(messages[0].summary.as_deref(), Some("shutdown"));
    assert!(messages[1..].iter().all(|message| message.extra.is_empty()));

    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&inbox).expect("read inbox")).expect("json");
    let mut expected_first = planted[0].clone();
    expected_first["read"] = serde_json::json!(true);
    assert_eq!(
        raw[0], expected_first,
        "the first message survives verbatim but for `read`"
    );
    assert_eq!(raw[2]["from"], "carol");
    assert_eq!(raw[2]["timestamp"], "2025-01-01T00:00:00.000Z");
    assert_eq!(raw[2]["read"], false);
    assert!(
        raw[2].get("color").is_none(),
        "absent options are not written as null"
    );
}

#[tokio::test]
async fn broadcast_skips_the_sender_case_insensitively() {
    // Goal: broadcast skips the sender in any case. Method: "Alice" to alice, bob, carol.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(24);
    let layout = SessionLayout::new(dir.path());
    let members: Vec<String> = ["alice", "bob", "carol"].map(String::from).to_vec();
    let inbox_of = |member: &str| {
        let path = layout.inbox("team-1", member).expect("valid names");
        Mailbox::new(&test.world, path, MailboxConfig::default())
    };

    let delivered = broadcast(&test.world, "Alice", "standup in 5", &members, inbox_of)
        .await
        .expect("broadcast");
    assert_eq!(delivered, ["bob", "carol"]);
    assert!(!layout.inbox("team-1", "alice").expect("path").exists());
    for member in ["bob", "carol"] {
        let messages = inbox_of(member).read_all().await.expect("read");
        assert_eq!(messages.len(), 1, "{member}");
        assert_eq!(messages[0].from, "Alice");
        assert_eq!(messages[0].text, "standup in 5");
        assert!(!messages[0].read);
    }
}

#[tokio::test]
async fn broadcast_stops_at_the_first_failure_and_names_it() {
    // Goal: a failed broadcast names who got it. Method: corrupt carol's inbox.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(25);
    let layout = SessionLayout::new(dir.path());
    let carol = layout.inbox("team-1", "carol").expect("path");
    std::fs::create_dir_all(carol.parent().expect("dir")).expect("mkdir");
    std::fs::write(&carol, "[{").expect("plant corrupt inbox");
    let members: Vec<String> = ["bob", "carol", "dave"].map(String::from).to_vec();
    let inbox_of = |member: &str| {
        let path = layout.inbox("team-1", member).expect("valid names");
        Mailbox::new(&test.world, path, MailboxConfig::default())
    };

    let error = broadcast(&test.world, "lead", "hi", &members, inbox_of)
        .await
        .expect_err("carol's inbox is corrupt");
    assert_eq!(error.member, "carol");
    assert_eq!(error.delivered, ["bob"]);
    assert!(
        matches!(error.source, MailboxError::Corrupt { .. }),
        "{error}"
    );
    assert!(!layout.inbox("team-1", "dave").expect("path").exists());
}

#[tokio::test]
async fn legacy_mode_writes_the_same_json_and_reads_without_the_lock() {
    // Goal: modes differ in locking only. Method: same ops in both modes; read under lock.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for write_mode in [WriteMode::Atomic, WriteMode::LegacyInPlace] {
        let (test, _clock) = manual_world(26, FIXED_UNIX_MS);
        let inbox = dir.path().join(format!("{write_mode:?}.json"));
        let mailbox = Mailbox::new(
            &test.world,
            &inbox,
            MailboxConfig::with_write_mode(write_mode),
        );
        for (from, text) in [("alice", "one"), ("bob", "two"), ("alice", "three")] {
            mailbox
                .append(MailboxMessage::new(&test.world, from, text))
                .await
                .expect("append");
        }
        mailbox.mark_read_indices("lead", &[1]).await.expect("mark");
        files.push(std::fs::read(&inbox).expect("read inbox"));

        let guard = LockGuard::acquire(
            &test.world,
            &lock_path_for(&inbox),
            "holder-x",
            &LockPolicy::default(),
        )
        .await
        .expect("take the lock");
        let read = mailbox.read_all().await;
        match write_mode {
            WriteMode::LegacyInPlace => {
                assert_eq!(read.expect("legacy reads ignore the lock").len(), 3);
            }
            WriteMode::Atomic => assert!(
                matches!(
                    &read,
                    Err(MailboxError::Lock(LockError::Contended { holder, .. }))
                        if holder == "holder-x"
                ),
                "atomic reads wait for the lock: {read:?}"
            ),
        }
        guard.release().expect("release");
    }
    assert_eq!(files[0], files[1], "both modes write the same JSON");
    let messages: Vec<MailboxMessage> = serde_json::from_slice(&files[0]).expect("parse");
    let read_flags: Vec<bool> = messages.iter().map(|message| message.read).collect();
    assert_eq!(read_flags, [false, true, false]);
}
