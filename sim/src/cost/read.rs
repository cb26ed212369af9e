//! Reading many transcript files on several threads into one set of responses.
//!
//! Threads take files one at a time, in order, from a shared counter, each into its own
//! `Responses`; the shares are merged at the end. Dealing files one at a time keeps
//! the threads busy however uneven the files' sizes; merging gives the same responses
//! as reading the files in order, because which line of a response is kept does not
//! depend on the order lines were read in (`ledger.rs`).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::ledger::Responses;
use super::lines::LineReader;
use super::transcript::TranscriptFile;
use super::CostError;

/// The number of threads to read on when none is asked for: one per core.
pub fn default_threads() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

/// Reads `files` on up to `threads` threads. A file that cannot be read fails the whole
/// reading; if several cannot, the error names the first of them in `files`, as reading
/// them in order would.
pub(super) fn read_files(
    files: &[TranscriptFile],
    threads: NonZeroUsize,
) -> Result<Responses, CostError> {
    let threads = threads.get().min(files.len()).max(1);
    let next_file = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let read_share = || read_share(files, &next_file, &failed);
    let shares: Vec<Result<Responses, (usize, CostError)>> = if threads == 1 {
        vec![read_share()]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(read_share)).collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    };
    let mut merged: Option<Responses> = None;
    let mut first_error: Option<(usize, CostError)> = None;
    for share in shares {
        match share {
            Ok(share) => match &mut merged {
                Some(merged) => merged.absorb(share),
                None => merged = Some(share),
            },
            Err((index, error)) => {
                if first_error.as_ref().is_none_or(|(first, _)| index < *first) {
                    first_error = Some((index, error));
                }
            }
        }
    }
    if let Some((_, error)) = first_error {
        return Err(error);
    }
    let mut merged = merged.expect("at least one thread reads");
    merged.finish();
    Ok(merged)
}

/// One thread's work: files taken from `next_file` until none are left or one could not
/// be read. Files are taken in increasing order, so when file `i` fails every file
/// before it has been taken and is read to its end: the first failure in `files` is
/// always among those reported.
fn read_share(
    files: &[TranscriptFile],
    next_file: &AtomicUsize,
    failed: &AtomicBool,
) -> Result<Responses, (usize, CostError)> {
    let mut share = Responses::default();
    let mut reader = LineReader::new();
    while !failed.load(Ordering::Relaxed) {
        let index = next_file.fetch_add(1, Ordering::Relaxed);
        let Some(file) = files.get(index) else {
            break;
        };
        let read = std::fs::File::open(&file.path).and_then(|opened| {
            reader.for_each_line(opened, |number, line| share.add_line(index, number, line))
        });
        if let Err(source) = read {
            failed.store(true, Ordering::Relaxed);
            let error = CostError::Read {
                path: file.path.clone(),
                source,
            };
            return Err((index, error));
        }
    }
    Ok(share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::ledger::Ledger;

    fn line(id: usize, output: u64) -> String {
        format!(
            r#"{{"requestId":"r{id}","message":{{"id":"m{id}","model":"m","usage":{{"input_tokens":1,"output_tokens":{output}}}}}}}"#
        )
    }

    #[test]
    fn every_thread_count_reads_the_ledger_of_reading_in_order() {
        // Goal: files read on 1 to 8 threads give what reading them one after another
        // gives, with responses repeated across files (a resumed session) and a
        // malformed line in several files.
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for index in 0..12 {
            let path = dir.path().join(format!("s{index:02}.jsonl"));
            let lines: Vec<String> = (0..30)
                .map(|n| match n % 7 {
                    6 => "{\"broken".to_owned(),
                    _ => line((index * 13 + n) % 40, (n % 4) as u64),
                })
                .collect();
            std::fs::write(&path, lines.join("\n")).unwrap();
            files.push(TranscriptFile::at(&path));
        }
        let mut in_order = Ledger::new();
        for file in &files {
            in_order.read_file(file.clone()).unwrap();
        }
        assert!(in_order.duplicate_lines() > 0);
        for threads in 1..=8 {
            let threads = NonZeroUsize::new(threads).unwrap();
            let ledger = Ledger::read_all(files.clone(), threads).unwrap();
            assert_eq!(ledger.requests(), in_order.requests(), "{threads} threads");
            assert_eq!(
                ledger.malformed(),
                in_order.malformed(),
                "{threads} threads"
            );
            assert_eq!(ledger.lines_read(), in_order.lines_read());
            assert_eq!(ledger.duplicate_lines(), in_order.duplicate_lines());
        }
    }

    #[test]
    fn the_error_names_the_first_file_that_cannot_be_read() {
        // Goal: with several unreadable files, every thread count names the first of
        // them, as reading in order would.
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for index in 0..10 {
            let path = dir.path().join(format!("s{index}.jsonl"));
            if index != 4 && index != 7 {
                std::fs::write(&path, line(index, 1)).unwrap();
            }
            files.push(TranscriptFile::at(&path));
        }
        for threads in 1..=4 {
            let threads = NonZeroUsize::new(threads).unwrap();
            match read_files(&files, threads) {
                Err(CostError::Read { path, .. }) => {
                    assert_eq!(path, dir.path().join("s4.jsonl"), "{threads} threads")
                }
                other => panic!("expected a read error, got {other:?}"),
            }
        }
        let empty = Ledger::read_all(Vec::new(), NonZeroUsize::MIN).unwrap();
        assert!(empty.requests().is_empty());

        // A path that opens but cannot be read (a directory) leaves a ledger as it was.
        let mut ledger = Ledger::new();
        ledger.read_file(files[0].clone()).unwrap();
        let unreadable = TranscriptFile::at(dir.path());
        assert!(ledger.read_file(unreadable).is_err());
        assert_eq!(ledger.files().len(), 1);
        assert_eq!(ledger.requests().len(), 1);
    }
}
