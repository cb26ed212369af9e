//! Transcript reading: parse and deduplicate the shared Claude Code fixtures, and price them.
//!
//! Method: the files are read into memory once, so the parse benches measure parsing and
//! deduplication only; `account` adds discovery, file reads (on one thread, and on one
//! per core) and pricing.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use coord_sim::cost::transcript::{discover, TranscriptFile};
use coord_sim::cost::{account, default_threads, CostReport, Ledger, PriceTable};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/claude-code/spotter")
}

fn bench_transcripts(c: &mut Criterion) {
    let files = discover(&[corpus()]).expect("the fixture corpus is readable");
    let contents: Vec<(TranscriptFile, Vec<u8>)> = files
        .into_iter()
        .map(|file| {
            let bytes = std::fs::read(&file.path).expect("fixture readable");
            (file, bytes)
        })
        .collect();
    let size_bytes: usize = contents.iter().map(|(_, bytes)| bytes.len()).sum();
    let prices = PriceTable::built_in();

    let mut group = c.benchmark_group("transcript");
    group.throughput(Throughput::Bytes(size_bytes as u64));
    group.bench_function("parse_dedup_spotter", |b| {
        b.iter(|| {
            let mut ledger = Ledger::new();
            for (file, bytes) in &contents {
                ledger.add_transcript(file.clone(), bytes);
            }
            ledger
        })
    });
    group.bench_function("parse_dedup_price_spotter", |b| {
        b.iter(|| {
            let mut ledger = Ledger::new();
            for (file, bytes) in &contents {
                ledger.add_transcript(file.clone(), bytes);
            }
            CostReport::build(&ledger, &prices).expect("every fixture model is priced")
        })
    });
    for threads in [NonZeroUsize::MIN, default_threads()] {
        group.bench_function(
            format!("account_spotter_from_disk_{threads}_threads"),
            |b| {
                b.iter(|| {
                    account(&[corpus()], &prices, threads).expect("the fixture corpus is readable")
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_transcripts);
criterion_main!(benches);
