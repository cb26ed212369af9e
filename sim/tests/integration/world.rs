//! The simulated World: virtual time, the turmoil-backed disk and its crash
//! semantics, disk fault hooks, seeded streams, and the runtime running unchanged on it.
//!
//! Every test runs its checks inside a real `turmoil::Builder` simulation.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::envelope::{Envelope, EnvelopeStatus};
use coord_runtime::ipc::{
    read_output, AppendOutcome, LockPolicy, Mailbox, MailboxConfig, MailboxMessage, OutputError,
    OutputLimits, OutputWriter, SessionLayout, WriteMode,
};
use coord_runtime::task::{Lookup, NotifyOutcome, TaskKind, TaskRegistry, TaskState, TaskStatus};
use coord_runtime::world::{Clock, Disk, Entropy, FileKind, MemoryJournal};
use coord_runtime::{RuntimeEvent, World};
use coord_sim::world::{
    host_world, sim_builder, DiskFault, DiskFaultRule, DiskFaultRuleError, DiskFaults, DiskOp,
    FaultEffect, FaultRecord, OpMatch, PathMatch, Ratio, SimClock, SimDisk, Streams, TornLength,
    Verdict, SIM_EPOCH_UNIX_MS,
};
use rand_chacha::rand_core::RngCore;
use turmoil::fs::shim::std::fs as sim_fs;

/// Linux's `ELOOP`, what `O_NOFOLLOW` gives on a symlink.
const ELOOP: i32 = 40;

fn p(path: &str) -> &Path {
    Path::new(path)
}

fn memory_world(
    streams: &Streams,
    host: &str,
    boot: u32,
    disk: SimDisk,
) -> (World, Arc<MemoryJournal>) {
    let journal = Arc::new(MemoryJournal::new());
    let world = host_world(streams, host, boot, disk, journal.clone());
    (world, journal)
}

/// Steps `sim` until `done` is set, at most `steps_max` times.
fn step_until(sim: &mut turmoil::Sim<'_>, done: &AtomicBool, steps_max: u32) {
    for _ in 0..steps_max {
        if done.load(Ordering::SeqCst) {
            return;
        }
        sim.step().unwrap();
    }
    assert!(
        done.load(Ordering::SeqCst),
        "host not done after {steps_max} steps"
    );
}

#[test]
fn an_hour_of_virtual_sleep_takes_milliseconds_and_the_clock_reports_it() {
    // Goal: SimClock runs on turmoil's virtual time. Method: a client sleeps one hour
    // through SimClock in a sim with 1 s ticks; compare wall time spent and the clock's
    // readings before and after.
    let streams = Streams::new(1);
    let mut builder = sim_builder(&streams);
    builder
        .tick_duration(Duration::from_secs(1))
        .simulation_duration(Duration::from_secs(2 * 3600));
    let mut sim = builder.build();
    let readings = Arc::new(Mutex::new(None));
    let readings_in = readings.clone();
    sim.client("sleeper", async move {
        let clock = SimClock::new();
        let before = (clock.monotonic(), clock.unix_ms());
        clock.sleep(Duration::from_secs(3600)).await;
        let after = (clock.monotonic(), clock.unix_ms());
        *readings_in.lock().unwrap() = Some((before, after));
        Ok(())
    });
    let wall = std::time::Instant::now();
    sim.run().unwrap();
    let wall_elapsed = wall.elapsed();

    let ((mono_before, unix_before), (mono_after, unix_after)) =
        readings.lock().unwrap().take().expect("the client ran");
    assert_eq!(mono_before, Duration::ZERO);
    assert_eq!(unix_before, SIM_EPOCH_UNIX_MS);
    assert!(mono_after >= Duration::from_secs(3600), "{mono_after:?}");
    assert!(mono_after <= Duration::from_secs(3601), "{mono_after:?}");
    assert_eq!(
        unix_after,
        SIM_EPOCH_UNIX_MS + mono_after.as_millis() as u64
    );
    assert!(sim.elapsed() >= Duration::from_secs(3600));
    // 3600 ticks of an idle runtime: milliseconds, with room for a loaded CI machine.
    assert!(wall_elapsed < Duration::from_secs(10), "{wall_elapsed:?}");
}

#[test]
fn a_crash_loses_unsynced_writes_and_keeps_what_was_made_durable() {
    // Goal: SimDisk inherits turmoil's POSIX durability. Method: on boot 0 write files
    // with each durability level, crash and bounce the host, and on boot 1 read back.
    let streams = Streams::new(2);
    let mut sim = sim_builder(&streams).build();
    let boots = Arc::new(AtomicU32::new(0));
    let written = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (boots, written, checked, seen) = (
            boots.clone(),
            written.clone(),
            checked.clone(),
            seen.clone(),
        );
        sim.host("disk-host", move || {
            let boot = boots.fetch_add(1, Ordering::SeqCst);
            let (written, checked, seen) = (written.clone(), checked.clone(), seen.clone());
            async move {
                let disk = SimDisk::new();
                if boot == 0 {
                    disk.create_dir_all(p("/data/sub"))?;
                    disk.create_new(p("/data/durable"), b"v1")?;
                    disk.sync_file(p("/data/durable"))?;
                    // A directory's own sync makes its entries durable (fsync of a dir).
                    disk.sync_file(p("/data"))?;
                    assert_eq!(disk.append(p("/data/durable"), b"+unsynced")?, 11);
                    disk.replace_atomic(p("/data/sub/replaced"), b"atomic")?;
                    disk.create_new(p("/data/unsynced"), b"lost")?;
                    // Data synced but the directory entry not: orphaned by a crash.
                    disk.create_new(p("/data/orphan"), b"entry never synced")?;
                    disk.sync_file(p("/data/orphan"))?;
                    assert_eq!(disk.read(p("/data/durable"))?, b"v1+unsynced");
                    assert_eq!(disk.read(p("/data/unsynced"))?, b"lost");
                    written.store(true, Ordering::SeqCst);
                } else {
                    let mut lines = Vec::new();
                    lines.push(format!(
                        "durable={:?}",
                        String::from_utf8(disk.read(p("/data/durable"))?)?
                    ));
                    lines.push(format!(
                        "replaced={:?}",
                        String::from_utf8(disk.read(p("/data/sub/replaced"))?)?
                    ));
                    for lost in ["/data/unsynced", "/data/orphan"] {
                        lines.push(format!(
                            "{lost}={:?}",
                            disk.read(p(lost)).map_err(|e| e.kind())
                        ));
                    }
                    lines.push(format!("list={:?}", disk.list_dir(p("/data"))?));
                    *seen.lock().unwrap() = lines;
                    checked.store(true, Ordering::SeqCst);
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
    }
    step_until(&mut sim, &written, 100);
    sim.crash("disk-host");
    sim.bounce("disk-host");
    step_until(&mut sim, &checked, 100);

    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            "durable=\"v1\"".to_owned(),
            "replaced=\"atomic\"".to_owned(),
            "/data/unsynced=Err(NotFound)".to_owned(),
            "/data/orphan=Err(NotFound)".to_owned(),
            format!(
                "list={:?}",
                [PathBuf::from("/data/durable"), PathBuf::from("/data/sub")]
            ),
        ]
    );
}

/// The message texts of two inboxes.
type InboxTexts = (Vec<String>, Vec<String>);

#[test]
fn an_acknowledged_atomic_mailbox_write_survives_a_crash_and_a_legacy_inbox_is_lost() {
    // Goal: the core durability demonstration, with the runtime's own Mailbox. Method:
    // boot 0 appends two acknowledged messages to an atomic inbox and to a legacy
    // in-place inbox; crash and bounce; boot 1 waits out the stale-lock threshold and
    // reads both inboxes.
    let streams = Streams::new(3);
    let mut builder = sim_builder(&streams);
    builder.simulation_duration(Duration::from_secs(120));
    let mut sim = builder.build();
    let atomic_path = PathBuf::from("/session/teams/atomic/inboxes/lead.json");
    let legacy_path = PathBuf::from("/session/teams/legacy/inboxes/lead.json");
    let boots = Arc::new(AtomicU32::new(0));
    let written = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicBool::new(false));
    // (atomic inbox texts, legacy inbox texts) as boot 1 read them.
    let after_crash: Arc<Mutex<Option<InboxTexts>>> = Arc::default();
    {
        let (boots, written, checked, after_crash) = (
            boots.clone(),
            written.clone(),
            checked.clone(),
            after_crash.clone(),
        );
        sim.host("coordinator", move || {
            let boot = boots.fetch_add(1, Ordering::SeqCst);
            let (written, checked, after_crash) =
                (written.clone(), checked.clone(), after_crash.clone());
            let (atomic_path, legacy_path) = (atomic_path.clone(), legacy_path.clone());
            async move {
                let (world, _journal) = memory_world(&streams, "coordinator", boot, SimDisk::new());
                let atomic = Mailbox::new(
                    &world,
                    &atomic_path,
                    MailboxConfig::with_write_mode(WriteMode::Atomic),
                );
                let legacy = Mailbox::new(
                    &world,
                    &legacy_path,
                    MailboxConfig::with_write_mode(WriteMode::LegacyInPlace),
                );
                if boot == 0 {
                    for (index, text) in ["first", "second"].into_iter().enumerate() {
                        let message = MailboxMessage::new(&world, "worker", text);
                        assert_eq!(atomic.append(message.clone()).await?, index + 1);
                        assert_eq!(legacy.append(message).await?, index + 1);
                    }
                    assert_eq!(atomic.read_all().await?.len(), 2);
                    assert_eq!(legacy.read_all().await?.len(), 2);
                    written.store(true, Ordering::SeqCst);
                } else {
                    // The crash may leave the atomic inbox's lock file behind (its entry
                    // was made durable by the inbox's directory sync, its removal was
                    // not): the runtime breaks it once it is stale.
                    world
                        .clock
                        .sleep(LockPolicy::default().stale_after + Duration::from_secs(1))
                        .await;
                    let texts = |messages: Vec<MailboxMessage>| {
                        messages
                            .into_iter()
                            .map(|message| message.text)
                            .collect::<Vec<_>>()
                    };
                    let atomic_texts = texts(atomic.read_all().await?);
                    let legacy_texts = texts(legacy.read_all().await?);
                    *after_crash.lock().unwrap() = Some((atomic_texts, legacy_texts));
                    checked.store(true, Ordering::SeqCst);
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
    }
    step_until(&mut sim, &written, 1_000);
    sim.crash("coordinator");
    sim.bounce("coordinator");
    step_until(&mut sim, &checked, 20_000);

    let (atomic_texts, legacy_texts) = after_crash
        .lock()
        .unwrap()
        .take()
        .expect("boot 1 read the inboxes");
    assert_eq!(
        atomic_texts,
        ["first", "second"],
        "acknowledged atomic writes survive"
    );
    assert!(
        legacy_texts.is_empty(),
        "the unsynced legacy inbox is lost: {legacy_texts:?}"
    );
}

#[test]
fn each_disk_fault_fires_where_it_was_placed_with_the_documented_error() {
    // Goal: explicit fault placement. Method: install one Nth rule per fault kind on
    // distinct paths, run the operations inside a turmoil client, and check each
    // result, the bytes left on disk, and the fault log.
    let streams = Streams::new(4);
    let mut faults = DiskFaults::new(&streams);
    let rules = [
        // Rule 0 matches everything and never fires: later rules must still be reached.
        DiskFaultRule::rate(
            Ratio::NEVER,
            OpMatch::any(),
            PathMatch::Any,
            FaultEffect::Fail(DiskFault::Eio),
        ),
        DiskFaultRule::nth(
            2,
            OpMatch::only(DiskOp::Append),
            PathMatch::Under("/data/eio".into()),
            FaultEffect::Fail(DiskFault::Eio),
        ),
        DiskFaultRule::nth(
            1,
            OpMatch::only(DiskOp::CreateNew),
            PathMatch::NameEndsWith(".full".into()),
            FaultEffect::Fail(DiskFault::Enospc),
        ),
        DiskFaultRule::nth(
            1,
            OpMatch::only(DiskOp::SyncFile),
            PathMatch::Exact("/data/eio/log".into()),
            FaultEffect::Fail(DiskFault::Eio),
        ),
        DiskFaultRule::nth(
            1,
            OpMatch::only(DiskOp::Append),
            PathMatch::Exact("/data/torn/log".into()),
            FaultEffect::Torn(TornLength::KeptBytes(3)),
        ),
        DiskFaultRule::nth(
            1,
            OpMatch::only(DiskOp::OverwriteInPlace),
            PathMatch::Under("/data/torn".into()),
            FaultEffect::Torn(TornLength::KeptBytes(5)),
        ),
        DiskFaultRule::nth(
            2,
            OpMatch::only(DiskOp::ReplaceAtomic),
            PathMatch::Exact("/data/torn/state".into()),
            FaultEffect::Torn(TornLength::KeptBytes(4)),
        ),
        DiskFaultRule::rate(
            Ratio::ALWAYS,
            OpMatch::data_reads(),
            PathMatch::Exact("/data/always".into()),
            FaultEffect::Fail(DiskFault::Eio),
        ),
    ];
    for rule in rules {
        faults.install(rule).unwrap();
    }
    // A torn read is refused when the rule is installed, not when it fires.
    assert_eq!(
        faults.install(DiskFaultRule::nth(
            1,
            OpMatch::any(),
            PathMatch::Any,
            FaultEffect::Torn(TornLength::Drawn)
        )),
        Err(DiskFaultRuleError::TornWithoutData {
            op: DiskOp::CreateDirAll
        })
    );
    assert_eq!(
        faults.install(DiskFaultRule::nth(
            0,
            OpMatch::any(),
            PathMatch::Any,
            FaultEffect::Fail(DiskFault::Eio)
        )),
        Err(DiskFaultRuleError::NthZero)
    );
    let faults = Arc::new(Mutex::new(faults));
    let disk = SimDisk::with_policy(faults.clone());

    let mut sim = sim_builder(&streams).build();
    sim.client("faulty", async move {
        let is = |result: io::Result<()>, fault: DiskFault| {
            let error = result.expect_err("the fault fires");
            assert_eq!(DiskFault::of(&error), Some(fault), "{error}");
            error
        };
        disk.create_dir_all(p("/data/eio"))?;
        disk.create_dir_all(p("/data/torn"))?;

        // EIO on the 2nd append under /data/eio, and nothing lands.
        disk.create_new(p("/data/eio/log"), b"")?;
        assert_eq!(disk.append(p("/data/eio/log"), b"12345")?, 5);
        let error = is(
            disk.append(p("/data/eio/log"), b"67890").map(drop),
            DiskFault::Eio,
        );
        assert_eq!(error.raw_os_error(), Some(5));
        assert_eq!(disk.read(p("/data/eio/log"))?, b"12345");
        assert_eq!(disk.append(p("/data/eio/log"), b"abc")?, 8);

        // ENOSPC on create_new of a *.full file: StorageFull, raw 28, no file.
        let error = is(
            disk.create_new(p("/data/disk.full"), b"x"),
            DiskFault::Enospc,
        );
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert_eq!(error.raw_os_error(), Some(28));
        assert_eq!(
            disk.metadata(p("/data/disk.full")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );

        // EIO from fsync, once.
        is(disk.sync_file(p("/data/eio/log")), DiskFault::Eio);
        disk.sync_file(p("/data/eio/log"))?;

        // A torn append keeps a 3-byte prefix and is not acknowledged.
        disk.create_new(p("/data/torn/log"), b"0123")?;
        is(
            disk.append(p("/data/torn/log"), b"abcdefgh").map(drop),
            DiskFault::Eio,
        );
        assert_eq!(disk.read(p("/data/torn/log"))?, b"0123abc");

        // A torn in-place overwrite leaves a truncated file holding a 5-byte prefix.
        disk.create_new(p("/data/torn/inbox.json"), b"[\"old message\"]")?;
        is(
            disk.overwrite_in_place(p("/data/torn/inbox.json"), b"[\"new\",\"message\"]"),
            DiskFault::Eio,
        );
        assert_eq!(disk.read(p("/data/torn/inbox.json"))?, b"[\"new");

        // A torn replace_atomic leaves the old contents and no temp file.
        disk.replace_atomic(p("/data/torn/state"), b"old-state")?;
        is(
            disk.replace_atomic(p("/data/torn/state"), b"new-state-longer"),
            DiskFault::Eio,
        );
        assert_eq!(disk.read(p("/data/torn/state"))?, b"old-state");
        assert_eq!(
            disk.list_dir(p("/data/torn"))?,
            [
                p("/data/torn/inbox.json"),
                p("/data/torn/log"),
                p("/data/torn/state")
            ]
        );

        // A rate of ALWAYS fires on every matching read, and only there.
        disk.create_new(p("/data/always"), b"unreadable")?;
        for _ in 0..3 {
            is(disk.read(p("/data/always")).map(drop), DiskFault::Eio);
        }
        assert_eq!(disk.metadata(p("/data/always"))?.len_bytes, 10);
        Ok(())
    });
    sim.run().unwrap();

    let faults = faults.lock().unwrap();
    let fired: Vec<(usize, DiskOp, Verdict)> = faults
        .log()
        .iter()
        .map(|record| (record.rule_index, record.op, record.verdict))
        .collect();
    assert_eq!(
        fired,
        [
            (1, DiskOp::Append, Verdict::Fail(DiskFault::Eio)),
            (2, DiskOp::CreateNew, Verdict::Fail(DiskFault::Enospc)),
            (3, DiskOp::SyncFile, Verdict::Fail(DiskFault::Eio)),
            (4, DiskOp::Append, Verdict::Torn { kept_bytes: 3 }),
            (5, DiskOp::OverwriteInPlace, Verdict::Torn { kept_bytes: 5 }),
            (6, DiskOp::ReplaceAtomic, Verdict::Torn { kept_bytes: 4 }),
            (7, DiskOp::Read, Verdict::Fail(DiskFault::Eio)),
            (7, DiskOp::Read, Verdict::Fail(DiskFault::Eio)),
            (7, DiskOp::Read, Verdict::Fail(DiskFault::Eio)),
        ]
    );
    assert_eq!(faults.faults_count(), 9);
}

#[test]
fn turmoils_own_capacity_limit_surfaces_as_enospc() {
    // Goal: faults turmoil injects itself get std's error shape too. Method: a host
    // filesystem with a 16-byte capacity; append past it through SimDisk.
    let streams = Streams::new(5);
    let mut builder = sim_builder(&streams);
    builder.fs().capacity(16);
    let mut sim = builder.build();
    sim.client("small-disk", async move {
        let disk = SimDisk::new();
        disk.create_dir_all(p("/data"))?;
        disk.create_new(p("/data/log"), b"0123456789")?;
        let error = disk.append(p("/data/log"), b"0123456789").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert_eq!(DiskFault::of(&error), Some(DiskFault::Enospc));
        assert_eq!(disk.read(p("/data/log"))?, b"0123456789");
        Ok(())
    });
    sim.run().unwrap();
}

/// Everything one seeded run of [`fault_workload`] decided and observed.
#[derive(Debug, PartialEq, Eq)]
struct WorkloadRun {
    log: Vec<FaultRecord>,
    outcomes: Vec<String>,
    entropy_draws: Vec<u64>,
}

/// A fixed workload of writes, reads and entropy draws under rate-based faults on
/// `/a` (rule 0) and, if `with_second_rule`, torn overwrites on `/b` (rule 1).
fn fault_workload(seed: u64, with_second_rule: bool) -> WorkloadRun {
    let streams = Streams::new(seed);
    let mut faults = DiskFaults::new(&streams)
        .with_rule(DiskFaultRule::rate(
            Ratio::new(1, 4).unwrap(),
            OpMatch::of([DiskOp::Append, DiskOp::CreateNew, DiskOp::Read]),
            PathMatch::Under("/a".into()),
            FaultEffect::Fail(DiskFault::Eio),
        ))
        .unwrap();
    if with_second_rule {
        faults
            .install(DiskFaultRule::rate(
                Ratio::new(1, 2).unwrap(),
                OpMatch::only(DiskOp::OverwriteInPlace),
                PathMatch::Under("/b".into()),
                FaultEffect::Torn(TornLength::Drawn),
            ))
            .unwrap();
    }
    let faults = Arc::new(Mutex::new(faults));
    let disk = SimDisk::with_policy(faults.clone());
    let observed = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let observed_in = observed.clone();
    let mut sim = sim_builder(&streams).build();
    sim.client("worker", async move {
        let (world, _journal) = memory_world(&streams, "worker", 0, disk);
        let mut outcomes = Vec::new();
        let mut draws = Vec::new();
        world.disk.create_dir_all(p("/a"))?;
        world.disk.create_dir_all(p("/b"))?;
        for round in 0..40u32 {
            let file = PathBuf::from(format!("/a/file-{}", round % 5));
            let outcome = match world.disk.append(&file, format!("{round};").as_bytes()) {
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    world.disk.create_new(&file, b"").map(|()| 0)
                }
                other => other,
            };
            outcomes.push(format!("{round} append {outcome:?}"));
            let read = world.disk.read(&file).map(|bytes| bytes.len());
            outcomes.push(format!("{round} read {read:?}"));
            let overwrite = world
                .disk
                .overwrite_in_place(p("/b/inbox"), format!("round {round} of forty").as_bytes());
            let inbox = world.disk.read(p("/b/inbox")).map(String::from_utf8);
            outcomes.push(format!("{round} overwrite {overwrite:?} -> {inbox:?}"));
            draws.push(world.entropy.next_u64());
        }
        *observed_in.lock().unwrap() = (outcomes, draws);
        Ok(())
    });
    sim.run().unwrap();
    let (outcomes, entropy_draws) = std::mem::take(&mut *observed.lock().unwrap());
    let log = faults.lock().unwrap().log().to_vec();
    WorkloadRun {
        log,
        outcomes,
        entropy_draws,
    }
}

#[test]
fn the_same_seed_gives_the_same_fault_decisions_and_entropy_draws() {
    // Goal: a run's faults and draws are a function of its seed. Method: run a fault
    // workload twice per seed and compare everything; different seeds must differ.
    for seed in [10, 11, 12] {
        let first = fault_workload(seed, true);
        let second = fault_workload(seed, true);
        assert!(!first.log.is_empty(), "seed {seed}: the rates fired");
        assert_eq!(first, second, "seed {seed}");
    }
    let a = fault_workload(10, true);
    let b = fault_workload(11, true);
    assert_ne!(a.log, b.log);
    assert_ne!(a.entropy_draws, b.entropy_draws);
}

#[test]
fn enabling_another_fault_shifts_no_other_stream() {
    // Goal: streams are independent. Method: run the same seed with and without a
    // second fault rule on other paths; rule 0's decisions and the entropy draws must
    // not change. Then check the Streams derivation directly, inside a simulation.
    let without = fault_workload(20, false);
    let with = fault_workload(20, true);
    let rule_zero = |run: &WorkloadRun| -> Vec<FaultRecord> {
        run.log
            .iter()
            .filter(|record| record.rule_index == 0)
            .cloned()
            .collect()
    };
    assert!(with.log.iter().any(|record| record.rule_index == 1));
    assert_eq!(rule_zero(&without), rule_zero(&with));
    assert_eq!(without.entropy_draws, with.entropy_draws);

    let streams = Streams::new(21);
    let mut sim = sim_builder(&streams).build();
    sim.client("streams", async move {
        let undisturbed: Vec<u64> = {
            let mut entropy = streams.rng(Streams::ENTROPY);
            (0..8).map(|_| entropy.next_u64()).collect()
        };
        let mut faults = streams.rng(Streams::FAULTS);
        let mut entropy = streams.rng(Streams::ENTROPY);
        let mut interleaved = Vec::new();
        for _ in 0..8 {
            for _ in 0..100 {
                faults.next_u64();
            }
            interleaved.push(entropy.next_u64());
        }
        assert_eq!(undisturbed, interleaved);
        // The runtime's Entropy over a stream yields that stream's numbers.
        let runtime_entropy = streams.entropy(Streams::ENTROPY);
        let through_runtime: Vec<u64> = (0..8).map(|_| runtime_entropy.next_u64()).collect();
        assert_eq!(undisturbed, through_runtime);
        assert_ne!(
            streams.seed_for(Streams::ENTROPY),
            streams.seed_for(Streams::FAULTS)
        );
        assert_ne!(
            streams.rng(Streams::LATENCY).next_u64(),
            streams.rng(Streams::SCHEDULE).next_u64()
        );
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn sim_disk_honours_every_disk_contract() {
    // Goal: SimDisk keeps each documented Disk contract. Method: exercise every method
    // inside a turmoil client and check results and errors, including a planted
    // symlink, which every open must refuse without following.
    let streams = Streams::new(6);
    let mut builder = sim_builder(&streams);
    builder.simulation_duration(Duration::from_secs(60));
    let mut sim = builder.build();
    sim.client("contracts", async move {
        let disk = SimDisk::new();
        let clock = SimClock::new();
        disk.create_dir_all(p("/s/d"))?;
        disk.create_dir_all(p("/s/d"))?;

        // create_new: exclusive.
        disk.create_new(p("/s/d/f"), b"hello")?;
        assert_eq!(
            disk.create_new(p("/s/d/f"), b"x").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        // append: O_APPEND, returns the new length; a missing file is NotFound.
        assert_eq!(disk.append(p("/s/d/f"), b" world")?, 11);
        assert_eq!(
            disk.append(p("/s/d/missing"), b"x").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // read_at: offset and limit; short only at end of file.
        assert_eq!(disk.read_at(p("/s/d/f"), 6, 3)?, b"wor");
        assert_eq!(disk.read_at(p("/s/d/f"), 6, 100)?, b"world");
        assert_eq!(disk.read_at(p("/s/d/f"), 50, 10)?, b"");
        // overwrite_in_place: truncates, creates if missing.
        disk.overwrite_in_place(p("/s/d/f"), b"hi")?;
        assert_eq!(disk.read(p("/s/d/f"))?, b"hi");
        disk.overwrite_in_place(p("/s/d/new"), b"fresh")?;
        // replace_atomic: creates or replaces.
        disk.replace_atomic(p("/s/d/state"), b"one")?;
        disk.replace_atomic(p("/s/d/state"), b"two")?;
        assert_eq!(disk.read(p("/s/d/state"))?, b"two");
        // rename: replaces a file.
        disk.rename(p("/s/d/new"), p("/s/d/state"))?;
        assert_eq!(disk.read(p("/s/d/state"))?, b"fresh");
        assert_eq!(
            disk.rename(p("/s/d/new"), p("/s/d/x")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // hard_link: never replaces; the new name reads the same bytes.
        assert_eq!(
            disk.hard_link(p("/s/d/f"), p("/s/d/state"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        disk.hard_link(p("/s/d/f"), p("/s/d/link"))?;
        assert_eq!(disk.read(p("/s/d/link"))?, b"hi");
        // list_dir: sorted full paths.
        disk.create_new(p("/s/d/a"), b"")?;
        assert_eq!(
            disk.list_dir(p("/s/d"))?,
            [p("/s/d/a"), p("/s/d/f"), p("/s/d/link"), p("/s/d/state")]
        );
        // remove_file.
        disk.remove_file(p("/s/d/link"))?;
        assert_eq!(
            disk.remove_file(p("/s/d/link")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // metadata: kinds, lengths, and modification times on SimClock's time line.
        clock.sleep(Duration::from_secs(5)).await;
        disk.append(p("/s/d/a"), b"later")?;
        let meta = disk.metadata(p("/s/d/a"))?;
        assert_eq!((meta.kind, meta.len_bytes), (FileKind::File, 5));
        assert_eq!(meta.modified_unix_ms, Some(clock.unix_ms()));
        assert!(clock.unix_ms() >= SIM_EPOCH_UNIX_MS + 5_000);
        assert_eq!(disk.metadata(p("/s/d"))?.kind, FileKind::Dir);
        // sync_file on a file and on a directory.
        disk.sync_file(p("/s/d/a"))?;
        disk.sync_file(p("/s/d"))?;
        // Relative paths have no meaning on the simulated host.
        assert_eq!(
            disk.read(p("s/d/a")).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );

        // A planted symlink: every open refuses it (O_NOFOLLOW), the target is untouched.
        disk.create_new(p("/s/secret"), b"secret")?;
        sim_fs::symlink("/s/secret", "/s/d/trap")?;
        assert_eq!(disk.metadata(p("/s/d/trap"))?.kind, FileKind::Symlink);
        for result in [
            disk.append(p("/s/d/trap"), b"x").map(drop),
            disk.read(p("/s/d/trap")).map(drop),
            disk.read_at(p("/s/d/trap"), 0, 1).map(drop),
            disk.overwrite_in_place(p("/s/d/trap"), b"x"),
            disk.sync_file(p("/s/d/trap")),
        ] {
            assert_eq!(result.unwrap_err().raw_os_error(), Some(ELOOP));
        }
        assert_eq!(
            disk.create_new(p("/s/d/trap"), b"x").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        // replace_atomic and rename replace the symlink itself, as rename(2) does.
        disk.replace_atomic(p("/s/d/trap"), b"replaced")?;
        assert_eq!(disk.metadata(p("/s/d/trap"))?.kind, FileKind::File);
        assert_eq!(disk.read(p("/s/secret"))?, b"secret");
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn output_writer_and_task_registry_run_unchanged_on_sim_disk() {
    // Goal: the runtime's own OutputWriter and TaskRegistry work on the simulated
    // World. Method: inside a turmoil client, run one task's life (id, output file,
    // appends, incremental reads, cap, transitions timed by virtual sleeps,
    // notification, eviction) on host_world, and refuse a symlinked output path.
    let streams = Streams::new(7);
    let mut builder = sim_builder(&streams);
    builder.simulation_duration(Duration::from_secs(600));
    let mut sim = builder.build();
    sim.client("coordinator", async move {
        let (world, journal) = memory_world(&streams, "coordinator", 0, SimDisk::new());
        let layout = SessionLayout::new("/session");
        let mut registry = TaskRegistry::new(world.journal.clone());
        let id = registry.allocate_id(TaskKind::LocalBash, &*world.entropy);
        let output_path = layout.task_output(&id);
        registry.insert(TaskState::new(
            id.clone(),
            "build",
            output_path.clone(),
            world.clock.unix_ms(),
        ));

        let limits = OutputLimits::default();
        let mut writer = OutputWriter::create(&world, &output_path, limits)?;
        assert!(matches!(
            OutputWriter::create(&world, &output_path, limits),
            Err(OutputError::AlreadyExists { .. })
        ));
        registry.transition(&id, TaskStatus::Running, world.clock.unix_ms())?;
        assert_eq!(writer.append(b"line one\n")?, AppendOutcome::Written);
        let first = read_output(&world, &output_path, 0, limits)?;
        assert_eq!(first.bytes, b"line one\n");
        world.clock.sleep(Duration::from_secs(2)).await;
        assert_eq!(writer.append(b"line two\n")?, AppendOutcome::Written);
        writer.sync()?;
        let second = read_output(&world, &output_path, first.next_offset_bytes, limits)?;
        assert_eq!(second.bytes, b"line two\n");
        assert_eq!(writer.size_bytes(), 18);

        registry.transition(&id, TaskStatus::Completed, world.clock.unix_ms())?;
        let task = registry.get(&id).expect("live task");
        assert_eq!(
            task.ended_at_unix_ms.unwrap() - task.started_at_unix_ms,
            2_000
        );
        let build = |task: &TaskState| Envelope {
            task_id: task.id.to_string(),
            tool_use_id: None,
            output_file: Some(task.output_path.display().to_string()),
            status: EnvelopeStatus::Completed,
            summary: "build completed".to_owned(),
            result: Some("ok".to_owned()),
            usage: None,
            worktree: None,
            note: None,
            extra: Default::default(),
        };
        assert_eq!(registry.notify(&id, build)?, NotifyOutcome::Enqueued);
        assert_eq!(registry.notify(&id, build)?, NotifyOutcome::AlreadyNotified);
        assert_eq!(registry.take_notifications().len(), 1);
        world.clock.sleep(Duration::from_secs(30)).await;
        let evicted = registry.evict_expired(world.clock.unix_ms(), Duration::from_secs(30));
        assert_eq!(evicted, std::slice::from_ref(&id));
        assert_eq!(registry.lookup(&id), Lookup::Evicted);

        // The cap: what fits, then the marker, then nothing.
        let mut capped = OutputLimits::default();
        capped.size_bytes_max = 200;
        let marker_bytes = coord_runtime::ipc::output::truncation_marker(200).len() as u64;
        let capped_path = layout.tasks_dir().join("capped.output");
        let mut capped_writer = OutputWriter::create(&world, &capped_path, capped)?;
        assert_eq!(
            capped_writer.append(&[b'x'; 300])?,
            AppendOutcome::Truncated {
                kept_bytes: 200 - marker_bytes
            }
        );
        assert_eq!(capped_writer.append(b"more")?, AppendOutcome::Dropped);
        assert_eq!(
            world.disk.metadata(&capped_path)?.len_bytes,
            capped.size_bytes_max
        );

        // A symlink planted at an output path is refused; its target is untouched.
        world.disk.create_new(p("/session/secret"), b"keep")?;
        let trap = layout.tasks_dir().join("trap.output");
        sim_fs::symlink("/session/secret", &trap)?;
        assert!(matches!(
            OutputWriter::create(&world, &trap, limits),
            Err(OutputError::SymlinkRefused { .. })
        ));
        assert_eq!(world.disk.read(p("/session/secret"))?, b"keep");

        let events = journal.events();
        assert!(events
            .iter()
            .any(|event| matches!(event, RuntimeEvent::TaskEvicted { .. })));
        assert!(events
            .iter()
            .any(|event| matches!(event, RuntimeEvent::OutputTruncated { .. })));
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn hard_links_are_emulated_because_turmoil_drops_links_to_unsynced_files() {
    // Goal: justify and pin SimDisk's hard-link emulation. Method: link an unsynced
    // file with turmoil's own hard_link and with SimDisk, sync the directory, and read
    // both links back.
    let streams = Streams::new(8);
    let mut sim = sim_builder(&streams).build();
    sim.client("links", async move {
        let disk = SimDisk::new();
        disk.create_dir_all(p("/l"))?;
        disk.create_new(p("/l/original"), b"unsynced data")?;
        sim_fs::hard_link("/l/original", "/l/turmoil-link")?;
        disk.hard_link(p("/l/original"), p("/l/sim-link"))?;
        disk.sync_file(p("/l"))?;
        // turmoil's link copied the original's synced data, of which there was none:
        // the bytes are gone from the link without any crash.
        assert_eq!(disk.read(p("/l/turmoil-link"))?, b"");
        assert_eq!(disk.read(p("/l/original"))?, b"unsynced data");
        assert_eq!(disk.read(p("/l/sim-link"))?, b"unsynced data");
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_file_recreated_after_its_removal_reads_only_its_own_bytes() {
    // Goal: regression for turmoil replaying a removed file's pending writes through
    // its successor (found as a lock file that could never be released). Method:
    // create, remove and re-create a path with shorter contents, then read and sync.
    let streams = Streams::new(10);
    let mut sim = sim_builder(&streams).build();
    sim.client("relock", async move {
        let disk = SimDisk::new();
        disk.create_dir_all(p("/r"))?;
        disk.create_new(p("/r/x.lock"), b"{\"owner\":\"first holder\"}")?;
        disk.remove_file(p("/r/x.lock"))?;
        disk.create_new(p("/r/x.lock"), b"{\"owner\":\"b\"}")?;
        assert_eq!(disk.read(p("/r/x.lock"))?, b"{\"owner\":\"b\"}");
        disk.sync_file(p("/r/x.lock"))?;
        disk.sync_file(p("/r"))?;
        assert_eq!(disk.read(p("/r/x.lock"))?, b"{\"owner\":\"b\"}");
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_synced_output_file_in_a_new_directory_survives_a_crash() {
    // Goal: regression for OutputWriter::sync, which once synced the file's data but
    // not its directory entry, so a fresh output file could vanish in a crash.
    // Method: create, append and sync an output file under a new directory chain,
    // crash and bounce the host, and read it back.
    let streams = Streams::new(9);
    let mut sim = sim_builder(&streams).build();
    let boots = Arc::new(AtomicU32::new(0));
    let written = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    {
        let (boots, written, checked, seen) = (
            boots.clone(),
            written.clone(),
            checked.clone(),
            seen.clone(),
        );
        sim.host("output-host", move || {
            let boot = boots.fetch_add(1, Ordering::SeqCst);
            let (written, checked, seen) = (written.clone(), checked.clone(), seen.clone());
            let streams = Streams::new(9);
            async move {
                let world = host_world(
                    &streams,
                    "output-host",
                    boot,
                    SimDisk::new(),
                    Arc::new(MemoryJournal::new()),
                );
                let path = p("/session/tasks/a00000001.output");
                if boot == 0 {
                    let mut output = coord_runtime::ipc::OutputWriter::create(
                        &world,
                        path,
                        coord_runtime::ipc::OutputLimits::default(),
                    )?;
                    output.append(b"partial result")?;
                    output.sync()?;
                    written.store(true, Ordering::SeqCst);
                } else {
                    *seen.lock().unwrap() = world.disk.read(path).ok();
                    checked.store(true, Ordering::SeqCst);
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
    }
    step_until(&mut sim, &written, 100);
    sim.crash("output-host");
    sim.bounce("output-host");
    step_until(&mut sim, &checked, 100);
    assert_eq!(
        seen.lock().unwrap().as_deref(),
        Some(&b"partial result"[..])
    );
}
