//! Inbox lock files: a bounded retry budget that fails loudly, and stale-lock breaking.

use std::path::Path;
use std::time::Duration;

use coord_runtime::ipc::lock_path_for;
use coord_runtime::ipc::{
    LockError, LockGuard, LockOwner, LockPolicy, Mailbox, MailboxConfig, MailboxError,
    MailboxMessage,
};
use coord_runtime::world::Clock;
use coord_runtime::RuntimeEvent;

use super::{host_unix_ms, manual_world, real_world, FIXED_UNIX_MS, ONE_HOUR};

/// Writes a lock file at `lock_path` as a crashed writer would have left it.
fn plant_lock(lock_path: &Path, owner: &str, acquired_at_unix_ms: u64) {
    let record = LockOwner {
        owner: owner.to_owned(),
        acquired_at_unix_ms,
        token: 0xdead_beef,
    };
    std::fs::create_dir_all(lock_path.parent().expect("lock dir")).expect("mkdir");
    std::fs::write(lock_path, serde_json::to_vec(&record).expect("serialize")).expect("plant");
}

/// Names in `dir` other than the inbox itself: lock files, temp files, stale asides.
fn leftovers(dir: &Path, inbox: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path != inbox)
        .map(|path| path.display().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn contention_past_the_retry_budget_is_a_typed_error() {
    // Goal: a held lock fails an append after 11 attempts. Method: hold it, use ManualClock.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, clock) = manual_world(11, FIXED_UNIX_MS);
    let inbox = dir.path().join("inboxes").join("bob.json");
    let mailbox = Mailbox::new(&test.world, &inbox, MailboxConfig::default());
    mailbox
        .append(MailboxMessage::new(&test.world, "alice", "before the lock"))
        .await
        .expect("first append");
    let before = std::fs::read(&inbox).expect("read inbox");

    let lock_path = lock_path_for(&inbox);
    let guard = LockGuard::acquire(&test.world, &lock_path, "holder-x", &LockPolicy::default())
        .await
        .expect("take the lock");
    let waited_from = clock.monotonic();
    let appended = mailbox
        .append(MailboxMessage::new(&test.world, "carol", "blocked"))
        .await;
    let waited = clock.monotonic() - waited_from;

    match &appended {
        Err(MailboxError::Lock(LockError::Contended {
            path,
            attempts,
            holder,
        })) => {
            assert_eq!(path, &lock_path);
            assert_eq!(*attempts, 11);
            assert_eq!(holder, "holder-x");
        }
        other => panic!("expected Contended, got {other:?}"),
    }
    // Ten backoffs of nominally 5, 10, 20, 40, 80, then 100 ms, each jittered to
    // between half and all of its nominal length.
    let nominal: Duration = (0..10)
        .map(|attempt| LockPolicy::default().backoff_nominal(attempt))
        .sum();
    assert_eq!(nominal, Duration::from_millis(655));
    assert!(
        waited >= nominal / 2 && waited <= nominal,
        "waited {waited:?}"
    );

    assert_eq!(std::fs::read(&inbox).expect("read inbox"), before);
    let failures: Vec<_> = test
        .events()
        .into_iter()
        .filter_map(|event| match event {
            RuntimeEvent::MailboxWriteFailed { path, from, reason } => Some((path, from, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, inbox);
    assert_eq!(failures[0].1, "carol");
    assert!(failures[0].2.contains("holder-x"), "{}", failures[0].2);
    assert!(failures[0].2.contains("11 attempts"), "{}", failures[0].2);

    // The lock is still the holder's, and once released the write goes through.
    let owner: LockOwner =
        serde_json::from_slice(&std::fs::read(&lock_path).expect("read lock")).expect("parse");
    assert_eq!(owner.owner, "holder-x");
    guard.release().expect("release");
    assert_eq!(
        mailbox
            .append(MailboxMessage::new(&test.world, "carol", "after"))
            .await
            .expect("append after release"),
        2
    );
    assert!(!lock_path.exists());
}

#[tokio::test]
async fn stale_lock_is_broken_and_journaled_with_its_owner() {
    // Goal: a crashed writer's lock is broken. Method: plant a 60 s old lock, append, read journal.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(12);
    let inbox = dir.path().join("bob.json");
    let lock_path = lock_path_for(&inbox);
    plant_lock(&lock_path, "crashed-writer", host_unix_ms() - 60_000);

    let count = Mailbox::new(&test.world, &inbox, MailboxConfig::default())
        .append(MailboxMessage::new(&test.world, "alice", "hello"))
        .await
        .expect("append over a stale lock");
    assert_eq!(count, 1);

    let broken: Vec<_> = test
        .events()
        .into_iter()
        .filter_map(|event| match event {
            RuntimeEvent::StaleLockBroken {
                path,
                owner,
                age_ms,
            } => Some((path, owner, age_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].0, lock_path);
    assert_eq!(broken[0].1, "crashed-writer");
    assert!(broken[0].2 >= 60_000, "age {} ms", broken[0].2);
    assert!(
        leftovers(dir.path(), &inbox).is_empty(),
        "no lock or aside file may remain: {:?}",
        leftovers(dir.path(), &inbox)
    );
}

#[tokio::test]
async fn unparseable_old_lock_is_broken_by_its_mtime() {
    // Goal: a garbled old lock is broken by mtime. Method: plant garbage, clock an hour ahead.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, _clock) = manual_world(13, host_unix_ms() + ONE_HOUR.as_millis() as u64);
    let inbox = dir.path().join("bob.json");
    let lock_path = lock_path_for(&inbox);
    std::fs::write(&lock_path, b"{\"owner\": \"half-writ").expect("plant garbage lock");

    Mailbox::new(&test.world, &inbox, MailboxConfig::default())
        .append(MailboxMessage::new(&test.world, "alice", "hello"))
        .await
        .expect("append over an unreadable stale lock");

    let events = test.events();
    assert!(
        events.contains(&RuntimeEvent::UnreadableLockBroken {
            path: lock_path.clone()
        }),
        "{events:?}"
    );
    assert!(leftovers(dir.path(), &inbox).is_empty());
}

#[tokio::test]
async fn unparseable_fresh_lock_is_not_broken() {
    // Goal: a garbled fresh lock is respected. Method: plant garbage, ManualClock at host time.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, _clock) = manual_world(14, host_unix_ms());
    let inbox = dir.path().join("bob.json");
    let lock_path = lock_path_for(&inbox);
    std::fs::write(&lock_path, b"{\"owner\": \"half-writ").expect("plant garbage lock");

    let appended = Mailbox::new(&test.world, &inbox, MailboxConfig::default())
        .append(MailboxMessage::new(&test.world, "alice", "hello"))
        .await;
    assert!(
        matches!(
            &appended,
            Err(MailboxError::Lock(LockError::Contended { holder, .. })) if holder == "unknown"
        ),
        "{appended:?}"
    );
    assert!(lock_path.exists());
    assert!(!inbox.exists());
}

#[tokio::test]
async fn lock_younger_than_threshold_is_respected() {
    // Goal: a live lock is never broken. Method: plant a 9 s old lock (threshold 10 s), append.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, _clock) = manual_world(15, FIXED_UNIX_MS);
    let inbox = dir.path().join("bob.json");
    let lock_path = lock_path_for(&inbox);
    // The retries wait at most 655 ms in all, so the lock stays younger than 10 s.
    plant_lock(&lock_path, "slow-writer", FIXED_UNIX_MS - 9_000);

    let appended = Mailbox::new(&test.world, &inbox, MailboxConfig::default())
        .append(MailboxMessage::new(&test.world, "alice", "hello"))
        .await;
    assert!(
        matches!(
            &appended,
            Err(MailboxError::Lock(LockError::Contended { holder, .. })) if holder == "slow-writer"
        ),
        "{appended:?}"
    );
    let events = test.events();
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, RuntimeEvent::StaleLockBroken { .. })),
        "{events:?}"
    );
    let owner: LockOwner =
        serde_json::from_slice(&std::fs::read(&lock_path).expect("read lock")).expect("parse");
    assert_eq!(owner.owner, "slow-writer");
}

#[tokio::test]
async fn lock_going_stale_during_the_retries_is_broken() {
    // Goal: staleness is rechecked per attempt. Method: a 9.9 s old lock ages past 10 s.
    let dir = tempfile::tempdir().expect("tempdir");
    let (test, clock) = manual_world(16, FIXED_UNIX_MS);
    let inbox = dir.path().join("bob.json");
    let lock_path = lock_path_for(&inbox);
    // The retries wait at least 327 ms in all, so the lock passes 10 s on the way.
    plant_lock(&lock_path, "slow-writer", FIXED_UNIX_MS - 9_900);

    Mailbox::new(&test.world, &inbox, MailboxConfig::default())
        .append(MailboxMessage::new(&test.world, "alice", "hello"))
        .await
        .expect("append once the lock went stale");
    assert!(
        clock.monotonic() >= Duration::from_millis(100),
        "it had to wait"
    );
    let broken: Vec<_> = test
        .events()
        .into_iter()
        .filter_map(|event| match event {
            RuntimeEvent::StaleLockBroken { owner, age_ms, .. } => Some((owner, age_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].0, "slow-writer");
    assert!(broken[0].1 >= 10_000, "age {} ms", broken[0].1);
}

#[tokio::test]
async fn release_removes_only_the_holders_own_lock() {
    // Goal: releasing never removes a lock someone else now holds, and still removes
    // this holder's lock however its record is spelled. Method: rewrite the lock file
    // under a held guard, then release.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(14);
    let lock_path = dir.path().join("bob.json.lock");
    let policy = LockPolicy::default();

    let guard = LockGuard::acquire(&test.world, &lock_path, "holder-a", &policy)
        .await
        .expect("take the lock");
    // The lock was broken as stale and another writer took it meanwhile.
    plant_lock(&lock_path, "holder-b", host_unix_ms());
    guard.release().expect("release");
    let left: LockOwner =
        serde_json::from_slice(&std::fs::read(&lock_path).expect("the other lock stays"))
            .expect("a lock record");
    assert_eq!(left.owner, "holder-b");
    std::fs::remove_file(&lock_path).expect("clear");

    let guard = LockGuard::acquire(&test.world, &lock_path, "holder-c", &policy)
        .await
        .expect("take the lock again");
    // Same record, other spelling: still this holder's lock.
    let record: LockOwner =
        serde_json::from_slice(&std::fs::read(&lock_path).expect("read")).expect("parse");
    std::fs::write(
        &lock_path,
        serde_json::to_vec_pretty(&record).expect("serialize"),
    )
    .expect("rewrite");
    guard.release().expect("release");
    assert!(!lock_path.exists(), "the holder's own lock is removed");
}
