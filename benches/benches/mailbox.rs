//! Mailbox appends per second on a real temp dir, with 1 and with 8 writers
//! contending for one inbox's lock. Each append takes the lock, reads the inbox,
//! and replaces it atomically (temp file, fsync, rename, fsync of the directory).
//!
//! The inbox is started afresh every 100 messages, so the figure is for inboxes of
//! up to 100 messages rather than for one ever-growing file.

use coord_runtime::ipc::{LockError, Mailbox, MailboxConfig, MailboxError, MailboxMessage};
use coord_runtime::World;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const INBOX_MESSAGES_MAX: u64 = 100;

/// Appends `count` messages as `writer`, retrying a message whose lock stayed
/// contended past the retry budget (counted in `contended`).
fn append_all(world: &World, inbox: &Path, writer: &str, count: u64, contended: &AtomicU64) {
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mailbox = Mailbox::new(world, inbox, MailboxConfig::default());
    executor.block_on(async {
        for n in 0..count {
            loop {
                let message = MailboxMessage::new(world, writer, format!("note {n} from {writer}"));
                match mailbox.append(message).await {
                    Ok(_) => break,
                    Err(MailboxError::Lock(LockError::Contended { .. })) => {
                        contended.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => panic!("append failed: {error}"),
                }
            }
        }
    });
}

fn appends(c: &mut Criterion) {
    let mut group = c.benchmark_group("mailbox_append");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let contended = AtomicU64::new(0);
    for writers in [1u64, 8] {
        group.bench_function(BenchmarkId::new("writers", writers), |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().unwrap();
                let world = World::real();
                let mut elapsed = Duration::ZERO;
                let mut remaining = iters;
                let mut round = 0;
                while remaining > 0 {
                    // One inbox per round of at most INBOX_MESSAGES_MAX messages.
                    let round_messages = remaining.min(INBOX_MESSAGES_MAX);
                    remaining -= round_messages;
                    round += 1;
                    let inbox = dir.path().join(format!("inboxes/round{round}.json"));
                    let started = Instant::now();
                    std::thread::scope(|scope| {
                        for writer in 0..writers {
                            let share = round_messages / writers
                                + u64::from(writer < round_messages % writers);
                            let (world, inbox, contended) = (&world, &inbox, &contended);
                            scope.spawn(move || {
                                append_all(world, inbox, &format!("w{writer}"), share, contended)
                            });
                        }
                    });
                    elapsed += started.elapsed();
                }
                elapsed
            })
        });
    }
    group.finish();
    eprintln!(
        "mailbox_append: {} appends retried after exhausting the lock's retry budget",
        contended.load(Ordering::Relaxed)
    );
}

criterion_group!(benches, appends);
criterion_main!(benches);
