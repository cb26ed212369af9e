//! Envelope codec throughput, in bytes of XML per second.

use coord_benches::sample_envelope;
use coord_runtime::envelope::{parse_block, render, Dialect};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn render_and_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("envelope");
    for result_bytes in [256, 16 * 1024, 1024 * 1024] {
        let envelope = sample_envelope(result_bytes);
        let xml = render(&envelope, Dialect::ClaudeCode);
        group.throughput(Throughput::Bytes(xml.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("render", result_bytes),
            &envelope,
            |b, e| b.iter(|| render(black_box(e), Dialect::ClaudeCode)),
        );
        group.bench_with_input(BenchmarkId::new("parse", result_bytes), &xml, |b, xml| {
            b.iter(|| parse_block(black_box(xml)))
        });
    }
    // A coordinator turn's text: 50 envelopes between lines of prose.
    let turn: String = (0..50)
        .map(|_| {
            format!(
                "Worker update follows.\n{}\n",
                render(&sample_envelope(2048), Dialect::Nexo)
            )
        })
        .collect();
    group.throughput(Throughput::Bytes(turn.len() as u64));
    group.bench_function("parse_turn_50_envelopes", |b| {
        b.iter(|| parse_block(black_box(&turn)))
    });
    group.finish();
}

criterion_group!(benches, render_and_parse);
criterion_main!(benches);
