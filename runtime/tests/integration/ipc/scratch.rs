//! The scratchpad: key validation and same-key overwrite detection.

use proptest::prelude::*;
use std::path::{Component, Path};

use coord_runtime::ipc::{NameError, ScratchKey, ScratchKeyError, Scratchpad, WriteOutcome};
use coord_runtime::RuntimeEvent;

use super::real_world;

#[test]
fn scratch_keys_are_validated() {
    // Goal: no key escapes the scratch dir. Method: bad keys and their errors; good keys.
    let dot = |name: &str| ScratchKeyError::BadSegment {
        key: String::new(),
        source: NameError::DotSegment {
            what: "scratch key segment",
            name: name.to_owned(),
        },
    };
    let bad_char = |name: &str, character| ScratchKeyError::BadSegment {
        key: String::new(),
        source: NameError::BadCharacter {
            what: "scratch key segment",
            name: name.to_owned(),
            character,
        },
    };
    let cases: Vec<(&str, ScratchKeyError)> = vec![
        ("..", dot("..")),
        ("a/../b", dot("..")),
        (".", dot(".")),
        ("a/./b", dot(".")),
        ("/abs", ScratchKeyError::Absolute("/abs".into())),
        ("a//b", ScratchKeyError::EmptySegment("a//b".into())),
        ("", ScratchKeyError::EmptySegment("".into())),
        ("a/", ScratchKeyError::EmptySegment("a/".into())),
        ("my notes", bad_char("my notes", ' ')),
        ("a\\..\\b", bad_char("a\\..\\b", '\\')),
        ("a/b c/d", bad_char("b c", ' ')),
        (
            "1/2/3/4/5/6/7/8/9",
            ScratchKeyError::TooDeep("1/2/3/4/5/6/7/8/9".into()),
        ),
    ];
    for (key, expected) in cases {
        let error = ScratchKey::parse(key).expect_err(key);
        // The key in BadSegment is the whole key; the table leaves it out for brevity.
        let error = match error {
            ScratchKeyError::BadSegment { key: whole, source } => {
                assert_eq!(whole, key);
                ScratchKeyError::BadSegment {
                    key: String::new(),
                    source,
                }
            }
            other => other,
        };
        assert_eq!(error, expected, "key {key:?}");
    }
    let too_long = "x".repeat(65);
    assert!(matches!(
        ScratchKey::parse(&too_long),
        Err(ScratchKeyError::BadSegment {
            source: NameError::TooLong { .. },
            ..
        })
    ));

    for key in [
        "a1b2c3d4/notes.md",
        "notes",
        "a/b/c/d/e/f/g/h",
        "a-1/.hidden_ok",
    ] {
        assert_eq!(ScratchKey::parse(key).expect(key).as_str(), key);
    }
    let key = ScratchKey::for_agent("a1b2c3d4", "notes.md").expect("conventional key");
    assert_eq!(key, ScratchKey::parse("a1b2c3d4/notes.md").expect("parse"));
    assert_eq!(key.to_string(), "a1b2c3d4/notes.md");
    assert!(ScratchKey::for_agent("..", "notes.md").is_err());
    assert!(ScratchKey::for_agent("a1b2c3d4", "").is_err());
    assert!(ScratchKey::for_agent("a1b2c3d4", "../../etc/passwd").is_err());
}

proptest! {
    #[test]
    fn accepted_scratch_keys_stay_under_the_root(key in "[a./\\\\ ]{0,10}") {
        // Goal: accepted keys stay inside the root. Method: random strings of risky chars.
        if let Ok(parsed) = ScratchKey::parse(&key) {
            let relative = Path::new(parsed.as_str());
            prop_assert!(relative
                .components()
                .all(|component| matches!(component, Component::Normal(_))));
            prop_assert_eq!(relative.components().count(), parsed.as_str().split('/').count());
            let root = Path::new("/session/scratch");
            prop_assert!(root.join(relative).starts_with(root));
        }
    }
}

#[test]
fn same_key_overwrite_is_detected() {
    // Goal: unseen overwrites are reported. Method: the protocol's sequence of A and B writes.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(31);
    let pad = Scratchpad::new(&test.world, dir.path().join("scratch"));
    let key = ScratchKey::parse("shared/plan.md").expect("key");

    assert_eq!(
        pad.write("A", &key, b"A1").expect("write"),
        WriteOutcome::Fresh
    );
    assert_eq!(
        pad.write("B", &key, b"B1").expect("write"),
        WriteOutcome::Overwrote {
            previous_writer: "A".into()
        },
        "B never read A's value"
    );
    assert_eq!(
        pad.read("B", &key).expect("read").as_deref(),
        Some(&b"B1"[..])
    );
    assert_eq!(
        pad.write("B", &key, b"B2").expect("write"),
        WriteOutcome::Fresh,
        "B saw the current value"
    );
    assert_eq!(
        pad.write("A", &key, b"A2").expect("write"),
        WriteOutcome::Overwrote {
            previous_writer: "B".into()
        },
        "A last saw its own A1, not B2"
    );
    assert_eq!(
        pad.write("A", &key, b"A3").expect("write"),
        WriteOutcome::Fresh,
        "A rewrites its own value"
    );
    assert_eq!(
        pad.read("C", &key).expect("read").as_deref(),
        Some(&b"A3"[..])
    );
    assert_eq!(std::fs::read(pad.path_of(&key)).expect("file"), b"A3");

    let overwrites: Vec<_> = test
        .events()
        .into_iter()
        .filter(|event| matches!(event, RuntimeEvent::ScratchOverwritten { .. }))
        .collect();
    assert_eq!(
        overwrites,
        [
            RuntimeEvent::ScratchOverwritten {
                key: "shared/plan.md".into(),
                writer: "B".into(),
                previous_writer: "A".into(),
            },
            RuntimeEvent::ScratchOverwritten {
                key: "shared/plan.md".into(),
                writer: "A".into(),
                previous_writer: "B".into(),
            },
        ]
    );
}

#[test]
fn first_write_over_an_absent_or_seen_key_is_fresh() {
    // Goal: no false alarms. Method: writers read the key (absent or present), then write.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(32);
    let pad = Scratchpad::new(&test.world, dir.path().join("scratch"));
    let key = ScratchKey::for_agent("a1b2c3d4", "notes.md").expect("key");
    assert_eq!(pad.read("A", &key).expect("read"), None);
    assert_eq!(
        pad.write("A", &key, b"A1").expect("write"),
        WriteOutcome::Fresh
    );
    assert_eq!(
        pad.read("B", &key).expect("read").as_deref(),
        Some(&b"A1"[..])
    );
    assert_eq!(
        pad.write("B", &key, b"B1").expect("write"),
        WriteOutcome::Fresh
    );
    assert!(test.events().is_empty(), "{:?}", test.events());
}

#[test]
fn overwrite_by_another_process_is_detected_even_over_own_value() {
    // Goal: outside overwrites are seen. Method: two scratchpads on one dir; A, B, A.
    let dir = tempfile::tempdir().expect("tempdir");
    let here = real_world(33);
    let elsewhere = real_world(34);
    let pad_here = Scratchpad::new(&here.world, dir.path().join("scratch"));
    let pad_elsewhere = Scratchpad::new(&elsewhere.world, dir.path().join("scratch"));
    let key = ScratchKey::parse("shared/plan.md").expect("key");

    assert_eq!(
        pad_here.write("A", &key, b"A1").expect("write"),
        WriteOutcome::Fresh
    );
    assert_eq!(
        pad_elsewhere.write("B", &key, b"B1").expect("write"),
        WriteOutcome::Overwrote {
            previous_writer: "unknown".into()
        }
    );
    assert_eq!(
        pad_here.write("A", &key, b"A2").expect("write"),
        WriteOutcome::Overwrote {
            previous_writer: "unknown".into()
        },
        "B1 was lost, and this scratchpad does not know who wrote it"
    );
}

#[test]
fn concurrent_writers_with_separate_worlds_never_fail() {
    // Goal: unlocked same-key writes never fail. Method: 2 threads, 2 RealDisks, lockstep.
    const WRITES_PER_THREAD: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("scratch");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = ["A", "B"]
        .into_iter()
        .enumerate()
        .map(|(index, writer)| {
            let root = root.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let test = real_world(35 + index as u64);
                let pad = Scratchpad::new(&test.world, root);
                let key = ScratchKey::parse("shared/counter").expect("key");
                barrier.wait();
                for round in 0..WRITES_PER_THREAD {
                    if let Err(error) =
                        pad.write(writer, &key, format!("{writer}{round}").as_bytes())
                    {
                        return Err(format!("{writer} round {round}: {error}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .expect("writer thread panicked")
            .expect("every write succeeds");
    }
    let leftovers: Vec<_> = std::fs::read_dir(root.join("shared"))
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers, ["counter"], "no temp file may remain");
}
