//! The real-disk world (`disk = "real"`, `--disk real`): the production `RealDisk` on
//! a temp directory, under the same scenarios, faults and checkers.

use std::io;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use coord_runtime::ipc::{AppendOutcome, OutputLimits, OutputWriter};
use coord_runtime::world::{ChaChaEntropy, Disk, FileKind, ManualClock, MemoryJournal, Vcs};
use coord_runtime::World;
use coord_sim::run::{run_seed, DiskRefusal, RunError, RunOptions, SeedRun, VcsSetting};
use coord_sim::scenario::{DiskSetting, Fault, FaultKind, LoadedScenario};
use coord_sim::world::{init_repository, DiskFault, DiskOp, RootedGit, RootedRealDisk, Verdict};

use crate::disk_rules::{DiskRule, DiskRules};
use crate::repo_root;

fn p(path: &str) -> &Path {
    Path::new(path)
}

fn real(swarm: bool) -> RunOptions {
    RunOptions {
        swarm,
        disk: Some(DiskSetting::Real),
        ..RunOptions::default()
    }
}

/// The real disk with the simulated version control in place of git.
fn real_with_simulated_vcs() -> RunOptions {
    RunOptions {
        vcs: Some(VcsSetting::Sim),
        ..real(false)
    }
}

fn load(relative: &str) -> LoadedScenario {
    LoadedScenario::load(&repo_root().join(relative)).unwrap()
}

/// Every text a trace holds, to look for host paths in it.
fn trace_text(run: &SeedRun) -> String {
    run.trace.iter().map(|entry| entry.event_json()).collect()
}

/// The temp directories' prefix, which must never reach a trace.
const TEMP_PREFIX: &str = "coordsim-disk-";

#[test]
fn the_reference_scenario_passes_on_the_real_disk_with_virtual_paths_in_its_trace() {
    // Goal: the production disk runs a whole scenario and every checker passes, and
    // the trace names the run's virtual paths only. Method: the reference workflow,
    // three seeds, plain and swarm; look for disk writes under /session and for any
    // trace text naming the temp directory.
    let scenario = load("scenarios/reference/four-phase.toml");
    for seed in 0..3 {
        for swarm in [false, true] {
            let run = run_seed(&scenario, seed, &real(swarm)).unwrap();
            assert!(run.failures.is_empty(), "seed {seed}: {:?}", run.failures);
            let text = trace_text(&run);
            assert!(text.contains("\"path\":\"/session/"), "seed {seed}");
            assert!(
                !text.contains(TEMP_PREFIX),
                "seed {seed}: a host path leaked"
            );
        }
    }
}

#[test]
fn the_real_disk_gives_a_plain_run_the_memory_disks_trace() {
    // Goal: without faults that act differently on the two disks, the real disk's
    // trace is the memory disk's, time stamps included: nothing of the host (paths,
    // mtimes, temp names) leaks in. Method: seeds 0..3 of the reference scenario on
    // both disks, both with the simulated version control; compare the trace hashes.
    let scenario = load("scenarios/reference/four-phase.toml");
    for seed in 0..3 {
        let memory = run_seed(&scenario, seed, &RunOptions::default()).unwrap();
        let on_real = run_seed(&scenario, seed, &real_with_simulated_vcs()).unwrap();
        assert_eq!(memory.trace_hash(), on_real.trace_hash(), "seed {seed}");
    }
}

/// The trace's events as JSON, without the disk writes under the worktrees that no
/// tool made (the checkout's, which the simulated version control makes through
/// the disk and git makes on its own) and without the branches git lists once the
/// run is over (only the production version control has branches to list).
fn events_but_checkouts(run: &SeedRun) -> Vec<String> {
    run.trace
        .iter()
        .map(|entry| entry.event_json())
        .filter(|json| {
            let checkout = json.contains("\"event\":\"disk_write\"")
                && json.contains("\"path\":\"/work/.claude/worktrees/")
                && !json.contains("\"agent\":");
            let branches = json.contains("\"event\":\"worktree_branches_left\"");
            !checkout && !branches
        })
        .collect()
}

#[test]
fn the_production_git_makes_the_worktrees_the_simulated_version_control_makes() {
    // Goal: on the real disk the runtime's worktrees are made, judged and removed by
    // the production GitVcs, and a run is the one the simulated version control
    // gives but for the checkout's writes, which git makes outside the disk
    // boundary. Method: the reference scenario (one worktree, kept with the
    // worker's file) and the kept-or-removed scenario (one kept, one removed), seeds
    // 0..3, on the real disk with git (the default there) and with the simulated
    // version control: no violation, the same events once the checkout's writes
    // are set aside, and those writes seen only without git.
    for relative in [
        "scenarios/reference/four-phase.toml",
        "scenarios/isolation/worktree-kept-or-removed.toml",
    ] {
        let scenario = load(relative);
        for seed in 0..3 {
            let with_git = run_seed(&scenario, seed, &real(false)).unwrap();
            let with_sim = run_seed(&scenario, seed, &real_with_simulated_vcs()).unwrap();
            assert!(
                with_git.failures.is_empty(),
                "{relative} seed {seed}: {:?}",
                with_git.failures
            );
            assert_eq!(
                events_but_checkouts(&with_git),
                events_but_checkouts(&with_sim),
                "{relative} seed {seed}"
            );
            assert!(events_but_checkouts(&with_sim).len() < with_sim.trace.len());
            assert_eq!(
                events_but_checkouts(&with_git).len() + 1,
                with_git.trace.len()
            );
            assert!(trace_text(&with_git).contains("\"worktrees_left\""));
            // Git lists the kept worktree's branch once the run is over.
            assert!(trace_text(&with_git).contains("\"worktree_branches_left\""));
            assert!(!trace_text(&with_sim).contains("\"worktree_branches_left\""));
        }
    }
}

#[test]
fn the_production_git_keeps_a_changed_worktree_and_removes_a_clean_one() {
    // Goal: RootedGit gives the runtime the production GitVcs at the run's virtual
    // paths: a worktree on its own branch, "has changes" from git itself, and a
    // removal that takes the checkout and the branch. Method: a workspace made a
    // repository by init_repository; two worktrees, a file written into one
    // through the disk; ask git on the host what is left.
    let disk = RootedRealDisk::new().unwrap();
    disk.create_dir_all(p("/work/shared")).unwrap();
    disk.create_new(p("/work/shared/notes.md"), b"notes\n")
        .unwrap();
    init_repository(&disk, p("/work")).unwrap();
    let git = RootedGit::on(disk.clone());
    let clean = git.create_worktree(p("/work"), "clean").unwrap();
    let changed = git.create_worktree(p("/work"), "changed").unwrap();
    assert_eq!(clean.path, p("/work/.claude/worktrees/clean"));
    assert_eq!(changed.branch, "worktree-changed");
    // The checkout holds the committed file, made by git, not through the disk.
    assert_eq!(
        disk.read(p("/work/.claude/worktrees/changed/shared/notes.md"))
            .unwrap(),
        b"notes\n"
    );
    assert!(!git.has_changes(&clean).unwrap());
    assert!(!git.has_changes(&changed).unwrap());
    disk.create_new(
        p("/work/.claude/worktrees/changed/limit.rs"),
        b"struct Bucket;\n",
    )
    .unwrap();
    assert!(git.has_changes(&changed).unwrap());
    assert!(!git.has_changes(&clean).unwrap());

    git.remove_worktree(p("/work"), &clean).unwrap();
    assert_eq!(
        disk.metadata(p("/work/.claude/worktrees/clean"))
            .unwrap_err()
            .kind(),
        io::ErrorKind::NotFound
    );
    let host_repo = disk.host_path(p("/work")).unwrap();
    let branches = Command::new("git")
        .arg("-C")
        .arg(&host_repo)
        .args(["branch", "--list", "--format=%(refname:short)"])
        .output()
        .unwrap();
    let branches = String::from_utf8_lossy(&branches.stdout);
    assert_eq!(
        branches.lines().collect::<Vec<_>>(),
        ["main", "worktree-changed"]
    );
    // A slug git would take for a path of its own is refused before git runs.
    assert_eq!(
        git.create_worktree(p("/work"), "../escape")
            .unwrap_err()
            .kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn git_on_a_simulated_disk_is_refused_before_the_run() {
    // Goal: `--vcs git` needs the real disk, and says so. Method: the binary on the
    // reference scenario with `--vcs git` and the memory disk (exit 2, the reason),
    // and with `--vcs sim` on the real disk (runs).
    let refused = coordsim(&[
        "replay",
        "scenarios/reference/four-phase.toml",
        "--seed",
        "0",
        "--vcs",
        "git",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("`--vcs git` needs the real disk") && stderr.contains("`memory` disk"),
        "{stderr}"
    );
    let ran = coordsim(&[
        "replay",
        "scenarios/reference/four-phase.toml",
        "--seed",
        "0",
        "--disk",
        "real",
        "--vcs",
        "sim",
    ]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let bad = coordsim(&["run", "scenarios/core", "--vcs", "svn"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected `sim` or `git`"));
}

#[test]
fn a_seed_on_the_real_disk_gives_the_same_trace_twice() {
    // Goal: determinism holds on the real disk. Method: every seed of 0..4 twice, in
    // plain and swarm mode, on two scenarios with faults; compare trace hashes.
    for relative in [
        "scenarios/reference/four-phase.toml",
        "scenarios/faults/hardened-slow-lock-holder.toml",
    ] {
        let scenario = load(relative);
        for seed in 0..4 {
            for swarm in [false, true] {
                let first = run_seed(&scenario, seed, &real(swarm)).unwrap();
                let second = run_seed(&scenario, seed, &real(swarm)).unwrap();
                assert_eq!(
                    first.trace_hash(),
                    second.trace_hash(),
                    "{relative} seed {seed} swarm {swarm}"
                );
            }
        }
    }
}

#[test]
fn swarm_on_the_real_disk_never_draws_a_coordinator_crash() {
    // Goal: swarm mode draws only kinds the real disk supports. Method: a scenario
    // whose swarm allows every kind, 24 seeds; no drawn schedule holds a
    // coordinator crash, while the memory disk draws one for some seed.
    let scenario = load("scenarios/reference/four-phase.toml");
    let crashes = |options: &RunOptions| {
        (0..24)
            .filter(|&seed| {
                run_seed(&scenario, seed, options)
                    .unwrap()
                    .schedule
                    .iter()
                    .any(|fault| fault.kind() == FaultKind::CoordinatorCrash)
            })
            .count()
    };
    assert_eq!(crashes(&real(true)), 0);
    let memory_swarm = RunOptions {
        swarm: true,
        ..RunOptions::default()
    };
    assert!(crashes(&memory_swarm) > 0);
}

/// The hardened symlink scenario, on a disk that honours `O_NOFOLLOW`, set to run
/// on the real disk by its own setting.
fn symlink_scenario() -> LoadedScenario {
    let path = repo_root().join("scenarios/faults/hardened-symlink-at-output.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("disk_honours_nofollow = false", "disk = \"real\"");
    LoadedScenario::parse(&path, &text).unwrap()
}

#[test]
fn a_planted_symlink_at_an_output_path_is_refused_by_the_real_o_nofollow() {
    // Goal: the symlink-at-output fault plants a real symlink, the production disk
    // refuses to write through it, and no-escape passes. Method: the hardened
    // scenario with `disk = "real"`, seeds 0..3: the fault fires, no violation is
    // found, no write resolves outside /session and /work, and the host's /etc
    // gains no victim file.
    let scenario = symlink_scenario();
    assert_eq!(scenario.scenario.settings.disk, Some(DiskSetting::Real));
    for seed in 0..3 {
        let run = run_seed(&scenario, seed, &RunOptions::default()).unwrap();
        assert!(
            run.violations.is_empty(),
            "seed {seed}: {:?}",
            run.violations
        );
        assert!(run.failures.is_empty(), "seed {seed}: {:?}", run.failures);
        let text = trace_text(&run);
        assert!(
            text.contains("\"event\":\"fault_fired\"")
                && text.contains("\"kind\":\"symlink-at-output\""),
            "seed {seed}: not fired"
        );
        assert!(!text.contains("\"resolved_path\":\"/etc"), "seed {seed}");
        assert!(!text.contains("\"through_symlink\":true"), "seed {seed}");
    }
    assert!(!Path::new("/etc/coordsim-victim").exists());
}

#[test]
fn the_real_o_nofollow_alone_stops_a_writer_that_skips_its_own_symlink_check() {
    // Goal: the production disk's O_NOFOLLOW is what stands between a planted
    // symlink and its target. Method: the follow-symlinks experiment (the output
    // writer trusts O_NOFOLLOW alone), which breaks no-escape on a disk that ignores
    // the flag, run on the real disk instead: no violation, for seeds 0..3.
    let path = repo_root().join("scenarios/experiments/follow-symlinks.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("disk_honours_nofollow = false", "disk = \"real\"")
        .replace("[expect]\nviolation = \"no-escape\"\n", "");
    let scenario = LoadedScenario::parse(&path, &text).unwrap();
    assert!(scenario.scenario.expect.violation.is_none());
    for seed in 0..3 {
        let run = run_seed(&scenario, seed, &RunOptions::default()).unwrap();
        assert!(
            run.violations.is_empty(),
            "seed {seed}: {:?}",
            run.violations
        );
        assert!(run.failures.is_empty(), "seed {seed}: {:?}", run.failures);
    }
}

#[test]
fn o_nofollow_refuses_a_planted_symlink_and_its_rooted_victim_stays_empty() {
    // Goal: at the disk itself, a symlink planted at an output path is refused with
    // ELOOP for appends and EEXIST for creates, and its target, rooted in the temp
    // directory, is never written. Method: plant /session/t.output -> /etc/victim on
    // a fresh real disk and write through it every way the output writer does.
    let disk = RootedRealDisk::new().unwrap();
    disk.create_dir_all(p("/session")).unwrap();
    disk.create_dir_all(p("/etc")).unwrap();
    disk.create_new(p("/etc/victim"), b"").unwrap();
    disk.plant_symlink(p("/session/t.output"), p("/etc/victim"))
        .unwrap();
    let link = std::fs::read_link(disk.root().join("session/t.output")).unwrap();
    assert!(link.starts_with(disk.root()), "{link:?} leaves the root");

    let append = disk.append(p("/session/t.output"), b"secret").unwrap_err();
    // ELOOP, what O_NOFOLLOW answers on a symlink (40 on Linux, 62 on the BSDs).
    assert!(matches!(append.raw_os_error(), Some(40 | 62)), "{append:?}");
    let create = disk
        .create_new(p("/session/t.output"), b"secret")
        .unwrap_err();
    assert_eq!(create.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(
        disk.metadata(p("/session/t.output")).unwrap().kind,
        FileKind::Symlink
    );
    assert_eq!(disk.read(p("/etc/victim")).unwrap(), b"");
}

#[test]
fn the_real_disk_refuses_paths_that_leave_its_root() {
    // Goal: no spelling of a path reaches outside the temp directory. Method: `..`
    // and relative paths fail with InvalidInput before touching the host.
    let disk = RootedRealDisk::new().unwrap();
    for path in ["/session/../../etc/passwd", "/..", "session/x", "../x"] {
        let error = disk.create_new(p(path), b"x").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{path}");
    }
    assert_eq!(
        disk.list_dir(p("/")).unwrap(),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn the_real_disk_lists_virtual_paths_and_stamps_the_run_clock() {
    // Goal: what the runtime reads back names its own paths and its own time, never
    // the host's. Method: write under /session with a manual clock; list the
    // directory and read a file's modification time.
    let disk = RootedRealDisk::new().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    disk.set_clock(Arc::new(clock.clone()));
    disk.create_dir_all(p("/session/tasks")).unwrap();
    disk.create_new(p("/session/tasks/a.output"), b"a").unwrap();
    disk.replace_atomic(p("/session/b.json"), b"{}").unwrap();
    assert_eq!(
        disk.list_dir(p("/session")).unwrap(),
        vec![
            p("/session/b.json").to_owned(),
            p("/session/tasks").to_owned()
        ]
    );
    let meta = disk.metadata(p("/session/tasks/a.output")).unwrap();
    assert_eq!(meta.modified_unix_ms, Some(1_700_000_000_000));
    assert_eq!(meta.len_bytes, 1);
}

#[test]
fn a_torn_append_on_the_real_disk_lands_its_kept_bytes_then_fails_with_eio() {
    // Goal: the one fault policy acts on the real disk as on the memory disk.
    // Method: a rule that tears the first append to 2 bytes and fails the first
    // read with ENOSPC; check the file's host bytes and the errors.
    let faults = DiskRules::new([
        DiskRule::nth(1, DiskOp::Append, "", Verdict::Torn { kept_bytes: 2 }),
        DiskRule::nth(1, DiskOp::Read, "", Verdict::Fail(DiskFault::Enospc)),
    ]);
    let base = RootedRealDisk::new().unwrap();
    let disk = base.clone().with_policy(Arc::new(Mutex::new(faults)));
    disk.create_dir_all(p("/session")).unwrap();
    disk.create_new(p("/session/log"), b"").unwrap();
    let torn = disk.append(p("/session/log"), b"abcdef").unwrap_err();
    assert_eq!(DiskFault::of(&torn), Some(DiskFault::Eio));
    assert_eq!(
        std::fs::read(base.root().join("session/log")).unwrap(),
        b"ab"
    );
    let read = disk.read(p("/session/log")).unwrap_err();
    assert_eq!(DiskFault::of(&read), Some(DiskFault::Enospc));
    assert_eq!(disk.read(p("/session/log")).unwrap(), b"ab");
}

#[test]
fn an_oversize_output_hits_the_output_writers_cap_on_the_real_disk() {
    // Goal: the size cap that guards output files holds on the production disk
    // (RealDisk has no cap of its own; the output writer keeps the file within its
    // limit). Method: a 4 KiB cap, 10 KiB appended; the host file holds exactly the
    // cap, ending with the truncation marker.
    let disk = RootedRealDisk::new().unwrap();
    let world = World {
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        entropy: Arc::new(ChaChaEntropy::from_seed(0)),
        disk: Arc::new(disk.clone()),
        journal: Arc::new(MemoryJournal::new()),
    };
    world.disk.create_dir_all(p("/session/tasks")).unwrap();
    let mut limits = OutputLimits::default();
    limits.size_bytes_max = 4096;
    let mut writer = OutputWriter::create(&world, p("/session/tasks/big.output"), limits).unwrap();
    let outcome = writer.append(&vec![b'x'; 10 * 1024]).unwrap();
    assert!(
        matches!(outcome, AppendOutcome::Truncated { .. }),
        "{outcome:?}"
    );
    assert_eq!(writer.append(b"more").unwrap(), AppendOutcome::Dropped);
    let bytes = std::fs::read(disk.root().join("session/tasks/big.output")).unwrap();
    assert_eq!(bytes.len(), 4096);
    assert!(String::from_utf8_lossy(&bytes).ends_with("bytes]\n"));
}

#[test]
fn a_coordinator_crash_on_the_real_disk_is_a_typed_refusal_before_the_run() {
    // Goal: a fault the real disk cannot carry out is refused with a typed error
    // naming the scenario, the kind and why; so is a disk that follows symlinks.
    // Method: run the crash scenario and the follow-symlinks experiment on the real
    // disk.
    let crash = load("scenarios/faults/atomic-mailbox-crash.toml");
    assert!(crash
        .scenario
        .faults
        .iter()
        .any(|fault| matches!(fault, Fault::CoordinatorCrash { .. })));
    match run_seed(&crash, 0, &real(false)) {
        Err(RunError::DiskRefused(DiskRefusal::FaultKind { scenario, kind, .. })) => {
            assert_eq!(scenario, crash.path);
            assert_eq!(kind, FaultKind::CoordinatorCrash);
        }
        other => panic!("expected a refusal, got {:?}", other.map(|run| run.seed)),
    }
    let follows = load("scenarios/experiments/follow-symlinks.toml");
    let refused = run_seed(&follows, 0, &real(false)).unwrap_err();
    assert!(
        matches!(
            refused,
            RunError::DiskRefused(DiskRefusal::FollowsFinalSymlinks { .. })
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("disk_honours_nofollow"));
}

fn coordsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

#[test]
fn the_disk_flag_runs_a_scenario_on_the_real_disk_and_refuses_what_it_cannot_run() {
    // Goal: `--disk real` reaches the run, a named scenario the disk refuses exits 2
    // with its reason, and a folder sweep skips it with the same reason. Method: the
    // binary on the reference scenario, the crash scenario, and scenarios/faults.
    let ran = coordsim(&[
        "replay",
        "scenarios/reference/four-phase.toml",
        "--seed",
        "1",
        "--swarm",
        "--disk",
        "real",
    ]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(stdout.contains("trace hash"), "{stdout}");
    assert!(!stdout.contains("coordinator-crash\""), "{stdout}");

    let refused = coordsim(&[
        "replay",
        "scenarios/faults/atomic-mailbox-crash.toml",
        "--seed",
        "0",
        "--disk",
        "real",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("scenarios/faults/atomic-mailbox-crash.toml")
            && stderr.contains("`coordinator-crash`")
            && stderr.contains("power cut"),
        "{stderr}"
    );

    let named = coordsim(&[
        "run",
        "scenarios/faults/atomic-mailbox-crash.toml",
        "--disk",
        "real",
    ]);
    assert_eq!(named.status.code(), Some(2));

    let swept = coordsim(&[
        "run",
        "scenarios/faults",
        "--seeds",
        "0..1",
        "--disk",
        "real",
    ]);
    let stdout = String::from_utf8_lossy(&swept.stdout);
    assert!(swept.status.success(), "{stdout}");
    assert!(
        stdout.contains("SKIPPED scenarios/faults/atomic-mailbox-crash.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-crash-mid-round.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-record-lags-delivery.toml")
            && stdout.contains("SKIPPED scenarios/faults/real-on-memory-mailbox-crash.toml")
            && stdout.contains("SKIPPED scenarios/faults/real-on-memory-notified-crash.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-transcript-sync-failure.toml")
            && stdout
                .contains("SKIPPED scenarios/faults/hardened-prompt-change-across-restarts.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-crash-before-delivery.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-crash-before-first-spawn.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-torn-coordinator-log.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-crash-after-stopped-shell.toml")
            && stdout.contains("SKIPPED scenarios/faults/hardened-continue-across-restart.toml")
            && stdout.contains(
                "SKIPPED scenarios/faults/hardened-foreground-worker-across-restart.toml"
            )
            && stdout.contains("(14 scenarios skipped)"),
        "{stdout}"
    );

    let bad = coordsim(&["run", "scenarios/core", "--disk", "floppy"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn check_determinism_passes_on_the_real_disk() {
    // Goal: the built-in determinism check agrees on the real disk. Method: the
    // binary's check-determinism over two scenarios, seeds 0..3, swarm on.
    let checked = coordsim(&[
        "check-determinism",
        "scenarios/core",
        "scenarios/reference",
        "--seeds",
        "0..3",
        "--swarm",
        "--disk",
        "real",
    ]);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{stdout}");
    assert!(stdout.contains("6 of 6 seeds agreed"), "{stdout}");
}
