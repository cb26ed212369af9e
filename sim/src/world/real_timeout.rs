//! The production shell's timeout, run for real: [`time_out_for_real`].
//!
//! The simulated shell runs nothing, so a command scripted to time out never tests
//! what the runtime's own shell (`RealShell`) does at a timeout: drop the waiting
//! child, and with it kill the process. A child left running there outlives the
//! Bash call that started it, and nothing the runtime reports says so. Here a
//! scripted timeout is played by `RealShell` itself, on a real process that sleeps
//! far past it (`exec sleep 60`), and the host's process table is read afterwards:
//! once the call has returned, no process of that command may still be running.
//!
//! Only on Linux, where `/proc` lists the processes, and only on the tokio world,
//! whose executor can then enable its I/O driver for the child (see
//! `run/tokio_world.rs`). The timeout itself runs on the executor's paused clock,
//! so the call ends at the same virtual time as a simulated timeout would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use coord_runtime::world::{RealShell, Shell, ShellCommand};

/// How long the real command sleeps, in real seconds: it must not end by itself
/// before its timeout is read, which takes milliseconds.
const REAL_SLEEP_S: u64 = 60;

/// How long a killed process may take to leave the process table (or become a
/// zombie) before it counts as left running, in real time. A SIGKILL is delivered
/// in microseconds; the bound only matters to a process that was never killed.
const KILL_SETTLE_MS: u64 = 500;

/// How long the host may take to show a spawned child in its process table, in
/// real time, before the timeout is let run anyway.
const START_WAIT_MS: u64 = 2_000;

/// What reading the process table found after a real timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeoutSeen {
    /// The shell reported a timeout and no process of the command runs.
    Killed,
    /// The shell reported a timeout, and these processes of the command still ran
    /// half a second later. They have been killed since, so that the run
    /// leaves nothing behind.
    LeftRunning {
        /// Their process ids.
        pids: Vec<u32>,
    },
    /// The real command could not be run or did not time out (no `sh` or `sleep`
    /// on the host): nothing was learned.
    NotRun,
}

/// Runs a command that outlives its timeout through the production shell with
/// `timeout`, then reads which of its processes still run.
pub async fn time_out_for_real(timeout: Duration) -> TimeoutSeen {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    // A minute of real time outlives the reading by far; a process a broken shell
    // leaves behind where no reading follows (a boot dropped mid-call) still ends
    // within it. The fraction makes the command line unique to this run of it, in
    // this process: it is how the process table names it.
    let marker = format!(
        "{REAL_SLEEP_S}.{:010}{:010}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let command = ShellCommand {
        command: format!("exec sleep {marker}"),
        cwd: std::env::temp_dir(),
        timeout,
    };
    // The virtual clock jumps to the timeout as soon as the executor idles, which
    // can be before the host has even started the child, or while `sh` is
    // replacing itself with `sleep` (a process table read then shows no command
    // line). Until the table shows `sleep` itself, this task yields, and a
    // yielding executor never idles.
    let run = RealShell.run(command);
    tokio::pin!(run);
    let started = std::time::Instant::now();
    let mut running_seen = false;
    let output = loop {
        tokio::select! {
            biased;
            output = &mut run => break output,
            () = tokio::task::yield_now(), if !running_seen => {
                running_seen = sleeping_with(&marker)
                    || started.elapsed() >= Duration::from_millis(START_WAIT_MS);
            }
        }
    };
    match output {
        Ok(output) if output.timed_out => {}
        _ => return TimeoutSeen::NotRun,
    }
    let mut waited_ms = 0;
    loop {
        let pids = running_with(&marker);
        if pids.is_empty() {
            return TimeoutSeen::Killed;
        }
        if waited_ms >= KILL_SETTLE_MS {
            kill(&pids);
            return TimeoutSeen::LeftRunning { pids };
        }
        // Real time, on purpose: the kill is the host's, not the simulation's.
        std::thread::sleep(Duration::from_millis(10));
        waited_ms += 10;
    }
}

/// The processes whose command line holds `marker` and that have not exited: a
/// zombie (state `Z`) has, and only waits to be reaped.
fn running_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let holds_marker = cmdline
                .split(|byte| *byte == 0)
                .any(|arg| arg.windows(marker.len()).any(|w| w == marker.as_bytes()));
            holds_marker && !exited(*pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether a process whose command line holds `marker` runs `sleep` itself:
/// `sh` has replaced itself with it, and its command line will not change again.
fn sleeping_with(marker: &str) -> bool {
    running_with(marker).into_iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| cmdline.split(|byte| *byte == 0).next() == Some(b"sleep"))
    })
}

/// Whether process `pid` is a zombie or gone: its state, in `/proc/<pid>/stat`, is
/// the field after the parenthesised command name.
fn exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some("Z" | "X") | None)
}

/// Kills `pids`, best effort: a process that left meanwhile is no error.
fn kill(pids: &[u32]) {
    let _ = std::process::Command::new("kill")
        .arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stderr(std::process::Stdio::null())
        .status();
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .enable_io()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn the_production_shell_kills_its_command_at_the_timeout_in_virtual_time() {
        // Goal: the real process is gone once the call returns, and the timeout
        // took the virtual time asked for, not a day.
        let runtime = paused_runtime();
        let (seen, elapsed) = runtime.block_on(async {
            let started = tokio::time::Instant::now();
            let seen = time_out_for_real(Duration::from_secs(120)).await;
            (seen, started.elapsed())
        });
        assert_eq!(seen, TimeoutSeen::Killed);
        assert_eq!(elapsed, Duration::from_secs(120));
    }

    /// Kills `child` before failing on `holds`, so that a failing test leaves no
    /// process behind.
    fn kill_on_failure(child: &mut std::process::Child, holds: bool) {
        if !holds {
            let _ = child.kill();
            panic!("the running process was not found by its marker");
        }
    }

    #[test]
    fn a_process_still_running_is_found_by_its_marker_and_a_zombie_is_not() {
        // Goal: the process-table reading that judges a timeout. Method: a real
        // child found while it runs, then not once it was killed and is a zombie.
        let marker = format!("86399.{:010}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg(&marker)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The host may take a moment to show a new process.
        let started = std::time::Instant::now();
        let mut found = running_with(&marker);
        while found.is_empty() && started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
            found = running_with(&marker);
        }
        let holds = found == [child.id()];
        kill_on_failure(&mut child, holds);
        kill(&[child.id()]);
        // Killed but not yet reaped: a zombie, which has exited.
        let killed_at = std::time::Instant::now();
        while !running_with(&marker).is_empty() && killed_at.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(running_with(&marker).is_empty());
        child.wait().unwrap();
        assert!(running_with(&marker).is_empty());
    }
}
