//! Per-turn cost of the prompt-cache simulator as a conversation grows.
//!
//! Each iteration replays a whole conversation of n turns (a 1,200-token tools and
//! system prefix, then a user and an assistant message per turn, the breakpoint
//! moved to the newest message) through a fresh cache. Throughput is reported in
//! turns, so criterion's "elem/s" is turns per second: if matching cost grew with
//! the conversation, turns per second would fall as n goes from 10 to 1,000.

use coord_runtime::world::CacheTtl;
use coord_sim::cache::{Block, Prompt, PromptCache, Request};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

/// Bytes of each message: a short turn of prose or a tool result.
const MESSAGE_BYTES: usize = 2048;

/// Message texts, built once so the bench times the cache, not string building.
fn messages(turns: usize) -> Vec<(String, String)> {
    (0..turns)
        .map(|turn| {
            let user = format!("user turn {turn} ").repeat(MESSAGE_BYTES / 16);
            let assistant = format!("assistant turn {turn} ").repeat(MESSAGE_BYTES / 21);
            (user, assistant)
        })
        .collect()
}

fn run_conversation(messages: &[(String, String)]) -> u64 {
    let mut cache = PromptCache::new();
    let mut prompt = Prompt::new();
    prompt
        .push(Block::tool("{\"name\":\"Read\"}".repeat(100).into_bytes()))
        .unwrap();
    prompt
        .push(
            Block::system(&"You review patches. ".repeat(180))
                .with_cache_control(CacheTtl::OneHour),
        )
        .unwrap();
    let mut read_tokens_total = 0;
    for (turn, (user, assistant)) in messages.iter().enumerate() {
        if turn > 0 {
            let last = prompt.len() - 1;
            prompt.set_cache_control(last, None).unwrap();
        }
        prompt.push(Block::user(user)).unwrap();
        prompt
            .push(Block::assistant(assistant).with_cache_control(CacheTtl::FiveMinutes))
            .unwrap();
        let sent_at = Duration::from_secs(30 * turn as u64);
        let request = Request::new("org", "claude-sonnet-4-5", sent_at)
            .conversation("main")
            .first_token_after(Duration::from_secs(2));
        let outcome = cache.send(&request, &mut prompt).unwrap();
        read_tokens_total += outcome.usage.cache_read_input_tokens;
    }
    read_tokens_total
}

fn conversation(c: &mut Criterion) {
    let mut group = c.benchmark_group("prompt_cache_conversation");
    for turns in [10usize, 100, 1_000] {
        let texts = messages(turns);
        group.throughput(Throughput::Elements(turns as u64));
        group.bench_with_input(BenchmarkId::from_parameter(turns), &texts, |b, texts| {
            b.iter(|| run_conversation(black_box(texts)))
        });
    }
    group.finish();
}

criterion_group!(benches, conversation);
criterion_main!(benches);
