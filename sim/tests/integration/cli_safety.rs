//! The command line under hostile use (issue 24): closed pipes, signals, `-o` files
//! that must not be lost, folder walks that must end, and exit statuses.
//!
//! Each test runs the built `coordsim` binary, the way a user or a script meets it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::repo_root;

/// The binary, run from the repository root.
fn coordsim(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coordsim"));
    command
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null());
    command
}

/// Runs `command` to its end, or kills it after `limit` and fails the test.
fn output_within(command: &mut Command, limit: Duration) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("coordsim did not end within {limit:?}");
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A scenario that fails `never-blocks` on every seed: the foreground-spawns
/// experiment without the `[expect]` that makes its violation a pass.
fn failing_scenario() -> String {
    let experiment =
        std::fs::read_to_string(repo_root().join("scenarios/experiments/foreground-spawns.toml"))
            .unwrap();
    let expectation = "[expect]\nviolation = \"never-blocks\"\n";
    assert!(experiment.contains(expectation), "the experiment changed");
    experiment.replace(expectation, "")
}

/// Sends `signal` (`INT`, `TERM`) to `child`.
fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_status_141() {
    // Goal: issue 24's `coordsim run … | head -1` panic, for every kind of output.
    // Method: give the command a pipe whose read end is already closed, so even
    // its first write fails; it must exit 141 (SIGPIPE's status) with no panic
    // message.
    let scenario = "scenarios/core/notify-once.toml";
    let commands: [&[&str]; 7] = [
        &["run", scenario, "--seeds", "0..2"],
        &["run", "--help"],
        &["run", scenario, "--json"],
        &["replay", scenario, "--seed", "0"],
        &["check-determinism", scenario, "--seeds", "0..2"],
        &["schema"],
        &[
            "envelope",
            "parse",
            "fixtures/claude-code/spotter/subagent.jsonl",
        ],
    ];
    for args in commands {
        let (stdout_reader, stdout_writer) = std::io::pipe().unwrap();
        drop(stdout_reader);
        let mut child = coordsim(args)
            .stdout(stdout_writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn sigint_stops_a_sweep_with_the_failures_found_and_an_interrupted_summary() {
    // Goal: interrupt-safe sweeps. Method: a sweep of a scenario that fails every
    // seed, over a range too long to finish, with `--jsonl`; once failures stream
    // in, SIGINT. Every failure printed must be counted by the summary, which says
    // `interrupted`, and the status is 130.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("failing.toml");
    std::fs::write(&file, failing_scenario()).unwrap();
    let mut child = coordsim(&[
        "run",
        file.to_str().unwrap(),
        "--seeds",
        "0..100000000",
        "--jsonl",
        "--threads",
        "2",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(lines.next().unwrap().unwrap());
    }
    let signalled = Instant::now();
    signal(&child, "INT");
    seen.extend(lines.map(Result::unwrap));
    let status = child.wait().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(130));
    let objects: Vec<Value> = seen
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let (summary, failures) = objects.split_last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["interrupted"], true);
    assert!(failures.iter().all(|failure| failure["type"] == "failure"));
    assert_eq!(summary["seeds_failed"], failures.len() as u64);
    assert_eq!(
        summary["seeds_run"],
        failures.len() as u64,
        "every seed fails"
    );
    let seeds: Vec<u64> = failures
        .iter()
        .map(|failure| failure["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seeds,
        (0..seeds.len() as u64).collect::<Vec<_>>(),
        "in seed order"
    );
}

#[test]
fn sigterm_stops_each_kind_of_sweep_with_status_143() {
    // Goal: `run` (text), `check-determinism` and `explore` all stop on SIGTERM
    // with their summary marked interrupted. Method: long sweeps, SIGTERM after
    // a second and a half, the last line read.
    let explore_dir = tempfile::tempdir().unwrap();
    let sweeps: [(&[&str], Option<&Path>); 3] = [
        (
            &[
                "run",
                "scenarios/core/notify-once.toml",
                "--seeds",
                "0..100000000",
            ],
            None,
        ),
        (
            &[
                "check-determinism",
                "scenarios/core/notify-once.toml",
                "--seeds",
                "0..100000000",
            ],
            None,
        ),
        (
            &["explore", "--seeds", "0..100000000"],
            Some(explore_dir.path()),
        ),
    ];
    for (args, cwd) in sweeps {
        let mut command = coordsim(args);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Long enough for the handlers to be in place on a loaded machine: before
        // them, SIGTERM's default action would end the process with no status.
        std::thread::sleep(Duration::from_millis(1500));
        signal(&child, "TERM");
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(143), "{args:?}: {stdout}");
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.ends_with("INTERRUPTED by SIGTERM"), "{args:?}: {last}");
    }
}

#[test]
fn exit_statuses_and_json_errors_follow_the_convention() {
    // Goal: 2 for usage and bad input, 70 for a panic, never 101; with `--json`
    // stdout is one JSON object with an `error` object wherever it ended.
    let usage = output_within(
        &mut coordsim(&["run", "--no-such-flag", "--json"]),
        Duration::from_secs(30),
    );
    assert_eq!(usage.status.code(), Some(2));
    let object: Value = serde_json::from_slice(&usage.stdout).unwrap();
    assert_eq!(object["error"]["kind"], "usage");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nprofile = 3\n").unwrap();
    let invalid = output_within(
        &mut coordsim(&["run", bad.to_str().unwrap(), "--json"]),
        Duration::from_secs(30),
    );
    assert_eq!(invalid.status.code(), Some(2));
    let object: Value = serde_json::from_slice(&invalid.stdout).unwrap();
    assert_eq!(object["error"]["kind"], "bad_input");
    assert_eq!(object["error"]["path"], bad.to_str().unwrap());
    assert_eq!(
        (&object["error"]["line"], &object["error"]["column"]),
        (&2.into(), &11.into())
    );

    let panicked = output_within(
        coordsim(&["run", "scenarios/core/notify-once.toml", "--json"])
            .env("COORDSIM_TEST_PANIC", "1"),
        Duration::from_secs(30),
    );
    assert_eq!(panicked.status.code(), Some(70));
    let object: Value = serde_json::from_slice(&panicked.stdout).unwrap();
    assert_eq!(object["error"]["kind"], "internal");
    let message = object["error"]["message"].as_str().unwrap();
    assert!(message.contains("a bug in coordsim") && message.contains("COORDSIM_TEST_PANIC"));
    assert!(text(&panicked.stderr).contains("internal error"));
}

#[test]
fn an_error_prints_each_cause_once() {
    // Goal: issue 24's "No such file or directory (os error 2): No such file or
    // directory (os error 2)".
    let output = output_within(
        &mut coordsim(&["run", "no/such/scenario.toml"]),
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
    assert!(stderr.contains("no/such/scenario.toml"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_folder_with_links_to_dotdot_runs_each_scenario_once() {
    // Goal: issue 24's endless walk (two `..` links) and repeated runs (one link;
    // `run a/ ./a/`). Method: such a folder, named twice; one scenario must run,
    // in bounded time.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("a");
    std::fs::create_dir_all(folder.join("deeper")).unwrap();
    std::fs::copy(
        repo_root().join("scenarios/core/notify-once.toml"),
        folder.join("notify-once.toml"),
    )
    .unwrap();
    std::os::unix::fs::symlink("..", folder.join("up")).unwrap();
    std::os::unix::fs::symlink("..", folder.join("deeper/up")).unwrap();
    let spelled_again = format!("{}/./", folder.display());
    let output = output_within(
        &mut coordsim(&["run", folder.to_str().unwrap(), &spelled_again]),
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("1 scenario × seeds 0..1: 1 run,"),
        "{stdout}"
    );
}

#[test]
fn a_shard_of_the_whole_seed_space_starts_at_once() {
    // Goal: issue 24's `--shard 1/N` of a huge range, which walked the range to
    // find its seeds. Method: the one seed of a shard of 0..u64::MAX.
    let output = output_within(
        &mut coordsim(&[
            "run",
            "scenarios/core/notify-once.toml",
            "--seeds",
            "0..18446744073709551615",
            "--shard",
            "2/18446744073709551614",
            "--json",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["seeds_run"], 1);
}

#[cfg(unix)]
#[test]
fn a_repro_line_for_a_path_that_is_not_utf8_reruns_in_a_shell() {
    // Goal: issue 24's repro line that could not be rerun. Method: a failing
    // scenario at a path with a space and a byte that is not UTF-8; its printed
    // repro line, run by bash with this binary for `coordsim`, fails the same way.
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"fails \xff here.toml"));
    std::fs::write(&file, failing_scenario()).unwrap();
    let output = output_within(
        coordsim(&["run", "--seed", "3"]).arg(&file),
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    let repro = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("repro: "))
        .unwrap();
    let binary = coord_sim::shell_word::quote_path(Path::new(env!("CARGO_BIN_EXE_coordsim")));
    let command = format!("{binary}{}", repro.strip_prefix("coordsim").unwrap());
    let rerun = output_within(
        Command::new("bash").arg("-c").arg(&command),
        Duration::from_secs(60),
    );
    assert_eq!(
        rerun.status.code(),
        Some(1),
        "{command}: {}",
        text(&rerun.stderr)
    );
    assert!(
        text(&rerun.stdout).contains("seed 3: never-blocks"),
        "{command}"
    );
}

/// A folder holding a file with known contents, and paths around it.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

/// Runs `args` and asserts exit 2 with `message` in stderr.
fn refused(args: &[&str], message: &str) {
    let output = output_within(&mut coordsim(args), Duration::from_secs(60));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[cfg(unix)]
#[test]
fn import_o_keeps_existing_files_inputs_and_link_targets() {
    // Goal: issue 24's `import -o` that overwrote an existing file, its own input,
    // and followed a symlink. Method: each refused, the files byte for byte as
    // they were; then `--force` replaces an ordinary file.
    let files = Files::new();
    let session = files.path("session.jsonl");
    std::fs::copy(
        repo_root().join("fixtures/claude-code/spotter/short.jsonl"),
        &session,
    )
    .unwrap();
    let session_bytes = std::fs::read(&session).unwrap();
    let existing = files.write("existing.toml", "keep me\n");
    let victim = files.write("victim.txt", "victim\n");
    let link = files.path("link.toml");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let s = session.to_str().unwrap();
    refused(
        &["import", "claude-code", s, "-o", existing.to_str().unwrap()],
        "the file exists; pass --force to replace it",
    );
    refused(
        &["import", "claude-code", s, "-o", s, "--force"],
        "is the input",
    );
    refused(
        &[
            "import",
            "claude-code",
            s,
            "-o",
            link.to_str().unwrap(),
            "--force",
        ],
        "is a symbolic link",
    );
    assert_eq!(std::fs::read(&session).unwrap(), session_bytes);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me\n");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim\n");

    let forced = output_within(
        &mut coordsim(&[
            "import",
            "claude-code",
            s,
            "-o",
            existing.to_str().unwrap(),
            "--force",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let written = std::fs::read_to_string(&existing).unwrap();
    assert!(written.contains("[coordinator]"), "{written}");
    let names: Vec<_> = std::fs::read_dir(files.dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|name| !name.starts_with(".coordsim-")),
        "no temporary file is left: {names:?}"
    );
}

#[test]
fn shrink_and_record_o_keep_existing_files_and_their_input() {
    // Goal: issue 24's `shrink -o` and `record -o` that overwrote an existing file
    // or their own scenario. Method: each refused before any work, the files as
    // they were; `record --force` replaces an ordinary file.
    let files = Files::new();
    let scenario = files.write("failing.toml", &failing_scenario());
    let existing = files.write("existing.json", "keep me\n");
    let s = scenario.to_str().unwrap();
    let e = existing.to_str().unwrap();
    refused(
        &["shrink", s, "--seed", "0", "-o", e],
        "the file exists; pass --force to replace it",
    );
    refused(
        &["shrink", s, "--seed", "0", "-o", s, "--force"],
        "is the input",
    );
    refused(
        &["record", s, "-o", e],
        "the file exists; pass --force to replace it",
    );
    refused(&["record", s, "-o", s, "--force"], "is the input");
    assert_eq!(
        std::fs::read_to_string(&scenario).unwrap(),
        failing_scenario()
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me\n");

    let forced = output_within(
        &mut coordsim(&["record", s, "-o", e, "--force"]),
        Duration::from_secs(60),
    );
    // The seed fails `never-blocks`: status 1, and the cassette is written all the same.
    assert_eq!(forced.status.code(), Some(1), "{}", text(&forced.stderr));
    let cassette: Value = serde_json::from_slice(&std::fs::read(&existing).unwrap()).unwrap();
    assert!(cassette.is_object());
}
