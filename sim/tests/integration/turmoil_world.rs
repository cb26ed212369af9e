//! The turmoil world (`world = "turmoil"`, `--world turmoil`): scenarios run with
//! the coordinator, the remote-worker host and the model API host as turmoil hosts,
//! through the same fault engine and checkers as the tokio world.

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{Remote, RemoteError, RemoteLaunch, RemoteReport};
use coord_sim::run::{disk_setting, repro_command, run_seed, RunOptions, SeedRun};
use coord_sim::scenario::{DiskSetting, LoadedScenario, WorldKind};
use coord_sim::shrink::shrink_command;
use coord_sim::world::{
    serve_remote_worker, sim_builder, Connector, HoldingListener, LinkFate, LinkPolicy,
    PartitionedTurmoilConnector, Streams, TcpRemote, TurmoilBootClock, TurmoilLink,
};

use crate::repo_root;

fn scenario(path: &str) -> LoadedScenario {
    LoadedScenario::load(&repo_root().join(path)).unwrap()
}

fn on_turmoil() -> RunOptions {
    RunOptions {
        world: Some(WorldKind::Turmoil),
        ..RunOptions::default()
    }
}

/// The trace entries whose event is `event`, as (time in ms, event JSON).
fn events(run: &SeedRun, event: &str) -> Vec<(u64, String)> {
    let tag = format!("\"event\":\"{event}\"");
    run.trace
        .iter()
        .map(|entry| (entry.time_ms, entry.event_json()))
        .filter(|(_, json)| json.contains(&tag))
        .collect()
}

#[test]
fn a_scenario_passes_on_turmoil() {
    // Goal: the real session runs to its end on turmoil's hosts and clock, and the
    // same checkers find nothing.
    let run = run_seed(
        &scenario("scenarios/core/notify-once.toml"),
        0,
        &on_turmoil(),
    )
    .unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let ended = events(&run, "run_ended");
    assert_eq!(ended.len(), 1);
    assert!(ended[0].1.contains("finished after"), "{ended:?}");
}

#[test]
fn a_report_phase_partition_holds_the_report_on_turmoils_link() {
    // Goal: the fault engine's partitions act through turmoil's network: the first
    // launch's report waits out its 90 s partition, the second launch is refused,
    // and the run still passes.
    let run = run_seed(
        &scenario("scenarios/faults/remote-partition.toml"),
        0,
        &on_turmoil(),
    )
    .unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let fired = events(&run, "fault_fired");
    assert_eq!(fired.len(), 2, "{fired:?}");
    let launched_ms = fired[0].0;
    let completed: Vec<u64> = events(&run, "task_transitioned")
        .into_iter()
        .filter(|(_, json)| json.contains("\"to\":\"completed\""))
        .map(|(time_ms, _)| time_ms)
        .collect();
    assert!(
        completed.iter().any(|&at| at >= launched_ms + 90_000),
        "no task completed after the partition healed: {completed:?}"
    );
    let failed = events(&run, "task_transitioned")
        .into_iter()
        .filter(|(_, json)| json.contains("\"to\":\"failed\""))
        .count();
    assert_eq!(failed, 1, "the refused launch fails, and only it");
}

/// Refuses every connect, as a connect-phase partition does.
struct RefuseAll;

impl LinkPolicy for RefuseAll {
    fn on_connect(&self, _launch: u32) -> LinkFate {
        LinkFate::Refused
    }
}

/// Holds the first connection's report for 30 s.
struct HoldFirst;

impl LinkPolicy for HoldFirst {
    fn on_connect(&self, launch: u32) -> LinkFate {
        match launch {
            1 => LinkFate::HeldFor(Duration::from_secs(30)),
            _ => LinkFate::Open,
        }
    }
}

fn launch() -> RemoteLaunch {
    RemoteLaunch {
        task_id: "t1".into(),
        prompt: "work".into(),
        model: "m".into(),
        messages: Vec::new(),
    }
}

/// Runs one remote call from `coordinator` to `worker` over a [`TurmoilLink`] under
/// `policy`; returns its result and the turmoil time it ended at.
fn call_over_link(
    policy: Arc<dyn LinkPolicy>,
) -> (Result<RemoteReport, RemoteError>, Duration, String) {
    let mut sim = sim_builder(&Streams::new(3))
        .simulation_duration(Duration::from_secs(60))
        .build();
    let link = TurmoilLink::new("coordinator", "worker");
    let host_link = link.clone();
    sim.host("worker", move || {
        let link = host_link.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", 7000)).await?;
            serve_remote_worker(HoldingListener::new(listener, link), |launch| async move {
                RemoteReport {
                    task_id: launch.task_id,
                    succeeded: true,
                    text: "done".into(),
                    messages: Vec::new(),
                }
            })
            .await?;
            Ok(())
        }
    });
    let outcome = Arc::new(std::sync::Mutex::new(None));
    let seen = outcome.clone();
    let connector = PartitionedTurmoilConnector::new(link, 7000, policy);
    let peer = connector.peer();
    sim.client("coordinator", async move {
        let remote = TcpRemote::new(connector, Arc::new(TurmoilBootClock::running()));
        let result = remote.run(launch()).await;
        *seen.lock().unwrap() = Some((result, turmoil::sim_elapsed().unwrap()));
        Ok(())
    });
    sim.run().unwrap();
    let (result, at) = outcome.lock().unwrap().take().unwrap();
    (result, at, peer)
}

#[test]
fn a_refused_connect_is_dropped_by_a_turmoil_partition() {
    // Goal: on an idle link, a refusal is turmoil's: its partition drops the SYN
    // and the connect fails at once with turmoil's own error.
    let (result, at, peer) = call_over_link(Arc::new(RefuseAll));
    match result {
        Err(RemoteError::Unreachable(message)) => {
            assert!(
                !message.contains(&format!("{peer}: partitioned")),
                "the connector refused by itself: {message}"
            );
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(
        at < Duration::from_secs(1),
        "refused at once, not at {at:?}"
    );
}

#[test]
fn a_held_report_crosses_the_link_when_the_partition_heals() {
    // Goal: a report-phase partition is a turmoil hold set by the host's reply: the
    // launch gets through, the report waits 30 s.
    let (result, at, _) = call_over_link(Arc::new(HoldFirst));
    assert_eq!(result.unwrap().text, "done");
    assert!(
        at >= Duration::from_secs(30),
        "the report arrived at {at:?}"
    );
    assert!(at < Duration::from_secs(31), "the report arrived at {at:?}");
}

#[test]
fn a_coordinator_crash_restarts_from_the_disk_on_turmoil() {
    // Goal: `coordinator-crash` ends the boot's simulation and the next boot resumes
    // the session from what the disk kept, on the same time line.
    let run = run_seed(
        &scenario("scenarios/faults/atomic-mailbox-crash.toml"),
        0,
        &on_turmoil(),
    )
    .unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let crashed = events(&run, "host_crashed");
    let restarted = events(&run, "host_restarted");
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert!(
        restarted[0].0 >= 10_000,
        "restarted at {} ms",
        restarted[0].0
    );
    let ended = events(&run, "run_ended");
    assert!(ended[0].0 > restarted[0].0, "{ended:?}");
}

#[test]
fn each_world_has_its_own_disk_and_a_setting_or_the_flag_overrides_it() {
    // Goal: the turmoil world runs on turmoil's filesystem unless asked otherwise,
    // and the command line wins over the scenario.
    let mut loaded = scenario("scenarios/faults/atomic-mailbox-crash.toml");
    let spec = &mut loaded.scenario;
    let with_disk = |disk| RunOptions {
        disk,
        ..on_turmoil()
    };
    assert_eq!(
        disk_setting(spec, &RunOptions::default()),
        DiskSetting::Memory
    );
    assert_eq!(disk_setting(spec, &on_turmoil()), DiskSetting::Turmoil);
    assert_eq!(
        disk_setting(spec, &with_disk(Some(DiskSetting::Memory))),
        DiskSetting::Memory
    );
    spec.settings.world = WorldKind::Turmoil;
    assert_eq!(
        disk_setting(spec, &RunOptions::default()),
        DiskSetting::Turmoil
    );
    spec.settings.disk = Some(DiskSetting::Real);
    assert_eq!(
        disk_setting(spec, &RunOptions::default()),
        DiskSetting::Real
    );
    assert_eq!(
        disk_setting(spec, &with_disk(Some(DiskSetting::Turmoil))),
        DiskSetting::Turmoil
    );
}

#[test]
fn turmoils_disk_loses_what_was_never_synced_when_the_host_crashes() {
    // Goal: a crash on the turmoil world is turmoil's crash of the disk's host, and
    // the checkers see its losses: the legacy in-place mailbox loses acknowledged
    // messages, which `mailbox-durability` finds, while the atomic one keeps them.
    for (path, expect_loss) in [
        ("scenarios/experiments/legacy-mailbox-crash.toml", true),
        ("scenarios/faults/atomic-mailbox-crash.toml", false),
    ] {
        let loaded = scenario(path);
        for disk in [None, Some(DiskSetting::Turmoil)] {
            let options = RunOptions {
                disk,
                world: disk.is_none().then_some(WorldKind::Turmoil),
                ..RunOptions::default()
            };
            let run = run_seed(&loaded, 0, &options).unwrap();
            assert!(run.failures.is_empty(), "{path}: {:?}", run.failures);
            let crashed = events(&run, "host_crashed");
            assert_eq!(crashed.len(), 1, "{path}: {crashed:?}");
            let inbox_lost = crashed[0].1.contains("inboxes/team-lead.json\"");
            assert_eq!(inbox_lost, expect_loss, "{path}: {}", crashed[0].1);
            let found = run
                .violations
                .iter()
                .any(|violation| violation.invariant == "mailbox-durability");
            assert_eq!(found, expect_loss, "{path}: {:?}", run.violations);
        }
    }
}

#[test]
fn the_same_seed_on_turmoil_gives_the_same_trace() {
    // Goal: the turmoil world is a function of the seed, HTTP model transport and
    // crashes included, and `[settings] world` means what `--world` does.
    for path in [
        "scenarios/faults/model-api-over-http.toml",
        "scenarios/faults/atomic-mailbox-crash.toml",
    ] {
        let loaded = scenario(path);
        let first = run_seed(&loaded, 1, &on_turmoil()).unwrap();
        assert!(first.failures.is_empty(), "{path}: {:?}", first.failures);
        let second = run_seed(&loaded, 1, &on_turmoil()).unwrap();
        assert_eq!(first.trace_hash(), second.trace_hash(), "{path}");
        let mut set = loaded.clone();
        set.scenario.settings.world = WorldKind::Turmoil;
        let from_settings = run_seed(&set, 1, &RunOptions::default()).unwrap();
        assert_eq!(first.trace_hash(), from_settings.trace_hash(), "{path}");
    }
}

#[test]
fn a_coarser_tick_is_a_setting_and_zero_is_refused() {
    // Goal: `turmoil_tick_ms` reaches turmoil, and a zero tick is a scenario error.
    let mut loaded = scenario("scenarios/core/notify-once.toml");
    loaded.scenario.settings.turmoil_tick_ms = 50;
    let run = run_seed(&loaded, 0, &on_turmoil()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let text = "name = \"t\"\ndescription = \"t\"\n[settings]\nturmoil_tick_ms = 0\n\
                [coordinator]\nprompt = \"p\"\n[[coordinator.turns]]\ntext = \"done\"\n";
    let error = LoadedScenario::parse("t.toml".as_ref(), text).unwrap_err();
    assert!(error.to_string().contains("turmoil_tick_ms"), "{error}");
}

fn coordsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

#[test]
fn the_world_flag_runs_seeds_on_turmoil() -> io::Result<()> {
    // Goal: `--world turmoil` reaches the run, with check-determinism and replay
    // too, and an unknown world is refused by name.
    let scenario = "scenarios/faults/remote-partition.toml";
    let run = coordsim(&["run", scenario, "--seeds", "0..2", "--world", "turmoil"]);
    assert!(run.status.success(), "{run:?}");
    let determinism = coordsim(&[
        "check-determinism",
        scenario,
        "--seeds",
        "0..2",
        "--world",
        "turmoil",
    ]);
    assert!(determinism.status.success(), "{determinism:?}");
    let tokio = coordsim(&["replay", scenario, "--seed", "0", "--trace"]);
    let turmoil = coordsim(&[
        "replay", scenario, "--seed", "0", "--trace", "--world", "turmoil",
    ]);
    assert!(turmoil.status.success(), "{turmoil:?}");
    assert_ne!(
        tokio.stdout, turmoil.stdout,
        "the flag changed nothing: turmoil's network has its own latency"
    );
    let unknown = coordsim(&["run", scenario, "--seeds", "0..1", "--world", "moon"]);
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("expected tokio or turmoil"), "{stderr}");
    Ok(())
}

#[test]
fn repro_and_shrink_lines_name_the_world() {
    // Goal: a failure found on turmoil is rerun and shrunk on turmoil, and a run on
    // the scenario's own world adds no flag.
    let path = std::path::Path::new("scenarios/faults/remote-partition.toml");
    let mut options = on_turmoil();
    options.turmoil_tick_ms = std::num::NonZeroU64::new(10);
    let repro = repro_command(path, 3, &options);
    let shrink = shrink_command(path, 3, &options);
    for line in [&repro, &shrink] {
        assert!(
            line.contains("--world turmoil --turmoil-tick-ms 10"),
            "{line}"
        );
    }
    let plain = repro_command(path, 3, &RunOptions::default());
    assert!(!plain.contains("--world"), "{plain}");
}
