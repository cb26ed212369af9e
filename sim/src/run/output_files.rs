//! The task output files as the disk holds them once the run is over: the witness
//! of invariant 13's cap half, read as bytes rather than taken from what the
//! runtime says it wrote.

use std::path::Path;

use coord_runtime::ipc::{truncation_marker, OutputLimits};
use coord_runtime::world::Disk;

use crate::scenario::Scenario;
use crate::trace::{SimEvent, Trace};

/// The directory of the session's task output files.
pub(super) const TASKS_DIR: &str = "/session/tasks";
/// The file name ending of a task output file.
pub(super) const OUTPUT_SUFFIX: &str = ".output";

/// Reads every task output file on `disk` and records, for each one at or over the
/// run's cap or holding a truncation marker, its size and markers. A file the disk
/// cannot read is skipped: the checks that need it say so on their own.
pub(super) fn witness(scenario: &Scenario, disk: &dyn Disk, trace: &Trace) {
    let size_bytes_max = scenario
        .settings
        .output_bytes_max
        .unwrap_or_else(|| OutputLimits::default().size_bytes_max);
    let marker = truncation_marker(size_bytes_max);
    let Ok(mut paths) = disk.list_dir(Path::new(TASKS_DIR)) else {
        return;
    };
    paths.sort();
    for path in paths {
        let is_output = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().ends_with(OUTPUT_SUFFIX));
        if !is_output {
            continue;
        }
        // A cap is never below the marker's length: a shorter file is neither at
        // the cap nor holding a marker, and is not read.
        if disk
            .metadata(&path)
            .is_ok_and(|meta| meta.len_bytes < marker.len() as u64)
        {
            continue;
        }
        let Ok(bytes) = disk.read(&path) else {
            continue;
        };
        let markers_count = count(&bytes, marker.as_bytes());
        let size_bytes = bytes.len() as u64;
        if markers_count == 0 && size_bytes < size_bytes_max {
            continue;
        }
        trace.push(
            "disk",
            SimEvent::OutputFileWitnessed {
                path: path.to_string_lossy().into_owned(),
                size_bytes,
                size_bytes_max,
                markers_count,
                ends_with_marker: bytes.ends_with(marker.as_bytes()),
            },
        );
    }
}

/// Non-overlapping occurrences of `needle` in `haystack`.
fn count(haystack: &[u8], needle: &[u8]) -> u64 {
    if needle.is_empty() {
        return 0;
    }
    let mut found = 0;
    let mut rest = haystack;
    while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
        found += 1;
        rest = &rest[at + needle.len()..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn counts_non_overlapping_occurrences() {
        assert_eq!(count(b"ab-ab-ab", b"ab"), 3);
        assert_eq!(count(b"aaaa", b"aa"), 2);
        assert_eq!(count(b"abc", b"x"), 0);
        assert_eq!(count(b"", b"x"), 0);
    }
}
