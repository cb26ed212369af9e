//! What idle virtual time costs: turmoil's fixed tick against the paused tokio
//! clock the seed driver runs on.
//!
//! A seed of the reference scenario covers about 105 s of virtual time (163 s with
//! swarm faults), most of it spent waiting on model latencies. turmoil advances its
//! clock one tick at a time and polls every host on each tick, so waiting costs
//! wall time in proportion to the virtual time waited over the tick. A paused
//! current-thread tokio runtime jumps straight to the next timer, so a wait costs the
//! same whatever its length.
//!
//! Each iteration waits out `VIRTUAL_SECONDS` of virtual time:
//! - `turmoil/tick_ms=N`: three hosts (the coordinator, a remote-worker host and a
//!   model API host) each sleeping in 250 ms steps, as agents awaiting model replies
//!   do, on a sim with an N ms tick;
//! - `paused_tokio`: the same three sleepers as tasks on a paused current-thread
//!   runtime.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// Virtual time each iteration waits out.
const VIRTUAL_SECONDS: u64 = 10;
/// How long each sleeper sleeps at a time.
const SLEEP_STEP: Duration = Duration::from_millis(250);
/// The hosts of a simulated run.
const HOSTS: [&str; 3] = ["coordinator", "remote", "api"];

async fn sleep_through(total: Duration) {
    let mut slept = Duration::ZERO;
    while slept < total {
        tokio::time::sleep(SLEEP_STEP).await;
        slept += SLEEP_STEP;
    }
}

fn turmoil_wait(tick: Duration) {
    let total = Duration::from_secs(VIRTUAL_SECONDS);
    let mut sim = turmoil::Builder::new()
        .tick_duration(tick)
        .simulation_duration(total * 2)
        .build();
    for host in HOSTS {
        sim.client(host, async move {
            sleep_through(total).await;
            Ok(())
        });
    }
    sim.run()
        .expect("the sleepers finish within the simulation's duration");
}

fn paused_tokio_wait() {
    let total = Duration::from_secs(VIRTUAL_SECONDS);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    runtime.block_on(async {
        let sleepers: Vec<_> = HOSTS
            .iter()
            .map(|_| tokio::spawn(sleep_through(total)))
            .collect();
        for sleeper in sleepers {
            sleeper.await.expect("a sleeper does not panic");
        }
    });
}

fn virtual_time(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("wait_{VIRTUAL_SECONDS}s_virtual"));
    group.sample_size(10);
    for tick_ms in [1u64, 10, 100] {
        group.bench_with_input(
            BenchmarkId::new("turmoil", format!("tick_ms={tick_ms}")),
            &tick_ms,
            |b, &tick_ms| b.iter(|| turmoil_wait(black_box(Duration::from_millis(tick_ms)))),
        );
    }
    group.bench_function("paused_tokio", |b| b.iter(paused_tokio_wait));
    group.finish();
}

criterion_group!(benches, virtual_time);
criterion_main!(benches);
