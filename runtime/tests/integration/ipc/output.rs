//! Task output files: symlink refusal, the size cap, incremental reads, exclusivity.

use proptest::prelude::*;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use coord_runtime::ipc::truncation_marker;
use coord_runtime::ipc::{
    read_output, AppendOutcome, OutputError, OutputLimits, OutputWriter, SessionLayout,
};
use coord_runtime::task::TaskId;
use coord_runtime::RuntimeEvent;

use super::real_world;

/// The output path of a fixed task under `root`, as the layout names it.
fn output_path(root: &Path) -> PathBuf {
    let id = TaskId::parse("a3kx9zq2").expect("a canonical agent task id");
    SessionLayout::new(root).task_output(&id)
}

fn limits_with_size_max(size_bytes_max: u64) -> OutputLimits {
    let mut limits = OutputLimits::default();
    limits.size_bytes_max = size_bytes_max;
    limits
}

fn limits_with_read_max(read_bytes_max: u64) -> OutputLimits {
    let mut limits = OutputLimits::default();
    limits.read_bytes_max = read_bytes_max;
    limits
}

fn count_occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count()
}

#[test]
fn symlink_at_output_path_is_refused_and_target_untouched() {
    // Goal: planted symlinks are refused, target intact. Method: plant before create, append.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(1);
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, b"precious bytes\n").expect("write target");
    let path = output_path(dir.path());
    std::fs::create_dir_all(path.parent().expect("tasks dir")).expect("mkdir tasks");

    symlink(&target, &path).expect("plant symlink before create");
    let created = OutputWriter::create(&test.world, &path, OutputLimits::default());
    assert!(
        matches!(&created, Err(OutputError::SymlinkRefused { path: refused }) if *refused == path),
        "create over a symlink: {created:?}"
    );
    assert_eq!(
        std::fs::read(&target).expect("read target"),
        b"precious bytes\n"
    );
    assert!(std::fs::symlink_metadata(&path)
        .expect("symlink still there")
        .file_type()
        .is_symlink());

    // The read side refuses the symlink too.
    let read = read_output(&test.world, &path, 0, OutputLimits::default());
    assert!(
        matches!(read, Err(OutputError::SymlinkRefused { .. })),
        "read through a symlink: {read:?}"
    );

    std::fs::remove_file(&path).expect("remove symlink");
    let mut writer =
        OutputWriter::create(&test.world, &path, OutputLimits::default()).expect("create");
    assert_eq!(
        writer.append(b"first line\n").expect("append"),
        AppendOutcome::Written
    );
    std::fs::remove_file(&path).expect("remove output file");
    symlink(&target, &path).expect("plant symlink after create");
    let appended = writer.append(b"through the symlink?\n");
    assert!(
        matches!(&appended, Err(OutputError::SymlinkRefused { path: refused }) if *refused == path),
        "append over a symlink: {appended:?}"
    );
    assert_eq!(
        std::fs::read(&target).expect("read target"),
        b"precious bytes\n"
    );
}

#[test]
fn dangling_symlink_at_output_path_is_refused_and_creates_nothing() {
    // Goal: O_EXCL refuses a dangling symlink. Method: plant one; target must not appear.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(2);
    let target = dir.path().join("not-yet.txt");
    let path = output_path(dir.path());
    std::fs::create_dir_all(path.parent().expect("tasks dir")).expect("mkdir tasks");
    symlink(&target, &path).expect("plant dangling symlink");

    let created = OutputWriter::create(&test.world, &path, OutputLimits::default());
    assert!(
        matches!(created, Err(OutputError::SymlinkRefused { .. })),
        "create over a dangling symlink: {created:?}"
    );
    assert!(!target.exists(), "the symlink's target must not be created");
}

#[test]
fn size_cap_keeps_what_fits_then_one_marker_then_drops() {
    // Goal: cap kept, one marker, then drops. Method: append past a 100-byte cap.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(3);
    let path = output_path(dir.path());
    let size_bytes_max: u64 = 100;
    let marker = truncation_marker(size_bytes_max);
    let marker_bytes = marker.len() as u64;
    assert!(
        marker_bytes < size_bytes_max - 10,
        "the test needs room for 10 bytes"
    );

    let mut writer = OutputWriter::create(&test.world, &path, limits_with_size_max(size_bytes_max))
        .expect("create");
    assert_eq!(
        writer.append(b"0123456789").expect("append"),
        AppendOutcome::Written
    );
    let overflow = vec![b'x'; 200];
    let room_bytes = size_bytes_max - marker_bytes - 10;
    assert_eq!(
        writer.append(&overflow).expect("append past the cap"),
        AppendOutcome::Truncated {
            kept_bytes: room_bytes
        }
    );
    assert_eq!(
        writer.append(b"later").expect("append"),
        AppendOutcome::Dropped
    );
    assert_eq!(writer.append(b"").expect("append"), AppendOutcome::Dropped);
    assert!(writer.truncated());
    assert_eq!(writer.size_bytes(), size_bytes_max);

    let bytes = std::fs::read(&path).expect("read output");
    assert_eq!(bytes.len() as u64, size_bytes_max);
    let mut expected = b"0123456789".to_vec();
    expected.extend(std::iter::repeat_n(b'x', room_bytes as usize));
    expected.extend_from_slice(marker.as_bytes());
    assert_eq!(bytes, expected);
    assert!(bytes.ends_with(marker.as_bytes()));
    assert_eq!(count_occurrences(&bytes, marker.as_bytes()), 1);

    let truncations: Vec<_> = test
        .events()
        .into_iter()
        .filter(|event| matches!(event, RuntimeEvent::OutputTruncated { .. }))
        .collect();
    assert_eq!(
        truncations,
        vec![RuntimeEvent::OutputTruncated {
            path: path.clone(),
            size_bytes_max
        }]
    );
}

#[test]
fn size_cap_exact_fit_then_marker_alone() {
    // Goal: an exact fit is written whole. Method: fill to cap minus marker, add one byte.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(4);
    let path = output_path(dir.path());
    let size_bytes_max: u64 = 200;
    let marker = truncation_marker(size_bytes_max);
    let room_bytes = size_bytes_max - marker.len() as u64;

    let mut writer = OutputWriter::create(&test.world, &path, limits_with_size_max(size_bytes_max))
        .expect("create");
    let filler = vec![b'f'; room_bytes as usize];
    assert_eq!(
        writer.append(&filler).expect("append"),
        AppendOutcome::Written
    );
    assert_eq!(
        writer.append(b"!").expect("append"),
        AppendOutcome::Truncated { kept_bytes: 0 }
    );
    let bytes = std::fs::read(&path).expect("read output");
    assert_eq!(bytes.len() as u64, size_bytes_max);
    assert_eq!(&bytes[..filler.len()], filler.as_slice());
    assert_eq!(&bytes[filler.len()..], marker.as_bytes());
}

#[test]
fn cap_smaller_than_marker_is_refused() {
    // Goal: a cap below the marker size is a typed error. Method: ask for 10 bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(5);
    let path = output_path(dir.path());
    let created = OutputWriter::create(&test.world, &path, limits_with_size_max(10));
    assert!(
        matches!(
            created,
            Err(OutputError::CapTooSmall { size_bytes_max: 10 })
        ),
        "{created:?}"
    );
    assert!(!path.exists());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn size_cap_holds_for_any_append_sequence(
        extra_room_bytes in 0u64..160,
        appends in proptest::collection::vec(
            proptest::collection::vec(b'a'..=b'z', 0..64), 0..12),
    ) {
        // Goal: cap invariants for any appends. Method: random appends and caps vs a model.
        let dir = tempfile::tempdir().expect("tempdir");
        let test = real_world(6);
        let path = output_path(dir.path());
        // The marker's length depends on the cap's digits; 3-digit caps all agree.
        let size_bytes_max = truncation_marker(100).len() as u64 + extra_room_bytes;
        let marker = truncation_marker(size_bytes_max);
        let mut writer =
            OutputWriter::create(&test.world, &path, limits_with_size_max(size_bytes_max))
                .expect("create");
        let mut written_model: Vec<u8> = Vec::new();
        for bytes in &appends {
            writer.append(bytes).expect("append");
            written_model.extend_from_slice(bytes);
        }
        let file = std::fs::read(&path).expect("read output");
        prop_assert!(file.len() as u64 <= size_bytes_max);
        prop_assert_eq!(file.len() as u64, writer.size_bytes());
        let truncations = test
            .events()
            .iter()
            .filter(|event| matches!(event, RuntimeEvent::OutputTruncated { .. }))
            .count();
        if writer.truncated() {
            prop_assert_eq!(file.len() as u64, size_bytes_max);
            prop_assert!(file.ends_with(marker.as_bytes()));
            prop_assert_eq!(count_occurrences(&file, marker.as_bytes()), 1);
            let kept = &file[..file.len() - marker.len()];
            prop_assert!(written_model.starts_with(kept));
            prop_assert!(written_model.len() + marker.len() > size_bytes_max as usize);
            prop_assert_eq!(truncations, 1);
        } else {
            prop_assert_eq!(&file, &written_model);
            prop_assert_eq!(truncations, 0);
        }
    }
}

#[test]
fn incremental_reads_concatenate_to_the_file() {
    // Goal: incremental reads see the whole file. Method: 64-byte reads between appends.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(7);
    let path = output_path(dir.path());
    let read_bytes_max: u64 = 64;
    let limits = limits_with_read_max(read_bytes_max);
    let mut writer = OutputWriter::create(&test.world, &path, limits).expect("create");

    let mut consumed: Vec<u8> = Vec::new();
    let mut offset_bytes: u64 = 0;
    let read_once = |consumed: &mut Vec<u8>, offset_bytes: &mut u64| -> usize {
        let chunk = read_output(&test.world, &path, *offset_bytes, limits).expect("read");
        assert!(chunk.bytes.len() as u64 <= read_bytes_max);
        assert_eq!(
            chunk.next_offset_bytes,
            *offset_bytes + chunk.bytes.len() as u64
        );
        *offset_bytes = chunk.next_offset_bytes;
        consumed.extend_from_slice(&chunk.bytes);
        chunk.bytes.len()
    };
    for line in 0..40 {
        let text = format!("line {line:03}: {}\n", "=".repeat(line % 17));
        writer.append(text.as_bytes()).expect("append");
        if line % 3 == 0 {
            read_once(&mut consumed, &mut offset_bytes);
        }
    }
    // Bounded drain: the file is a few KiB, so 1000 reads of 64 bytes always suffice.
    let mut reads_count = 0;
    while read_once(&mut consumed, &mut offset_bytes) > 0 {
        reads_count += 1;
        assert!(reads_count < 1000, "drain did not end");
    }
    let file = std::fs::read(&path).expect("read output");
    assert!(
        file.len() as u64 > 10 * read_bytes_max,
        "the file spans many reads"
    );
    assert_eq!(consumed, file);
    assert_eq!(offset_bytes, file.len() as u64);

    // A read at or past the end returns nothing and keeps the offset.
    let past_end = read_output(&test.world, &path, offset_bytes + 5, limits).expect("read");
    assert!(past_end.bytes.is_empty());
    assert_eq!(past_end.next_offset_bytes, offset_bytes + 5);
}

#[test]
fn creating_an_existing_output_file_is_already_exists() {
    // Goal: an existing output file is never reclaimed. Method: create twice, compare bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let test = real_world(8);
    let path = output_path(dir.path());
    let mut first =
        OutputWriter::create(&test.world, &path, OutputLimits::default()).expect("create");
    first.append(b"kept").expect("append");

    let second = OutputWriter::create(&test.world, &path, OutputLimits::default());
    assert!(
        matches!(&second, Err(OutputError::AlreadyExists { path: existing }) if *existing == path),
        "{second:?}"
    );
    assert_eq!(std::fs::read(&path).expect("read output"), b"kept");
}
