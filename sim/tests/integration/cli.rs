//! The coordsim binary, end to end.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use coord_sim::run::{run_seed, RunOptions, SeedRun};
use coord_sim::sweep::load_all;
use serde_json::Value;

use crate::repo_root;

fn coordsim(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

const ENVELOPES: &str = "Two workers finished.\n<task-notification>\n<task-id>a3kx9zq2</task-id>\n\
<status>COMPLETED</status>\n<summary>Agent \"Find auth bug\" completed</summary>\n\
<result>fixed &amp; tested</result>\n<usage><total_tokens>10</total_tokens><tool_uses>2</tool_uses>\
<duration_ms>300</duration_ms></usage>\n</task-notification>\nand\n<task-notification>\n\
<task-id>b0be39e</task-id>\n<output-file>/tmp/b0be39e.output</output-file>\n<status>killed</status>\n\
<summary>stopped</summary>\n<worktree><path>/r/.claude/worktrees/x</path><branch>worktree-x</branch></worktree>\n\
</task-notification>";

#[test]
fn envelope_parse_json_prints_every_key_in_order() {
    // Goal: the JSON shape is stable: every key present, absent fields null, order kept.
    let output = coordsim(&["envelope", "parse", "--json"], Some(ENVELOPES.as_bytes()));
    assert!(output.status.success());
    insta::assert_snapshot!(String::from_utf8(output.stdout).unwrap());
}

#[test]
fn envelope_parse_json_prints_an_empty_array_for_plain_text() {
    // Goal: text with no envelope is no envelopes, not an error.
    let output = coordsim(
        &["envelope", "parse", "-", "--json"],
        Some(b"nothing here <b>"),
    );
    assert!(output.status.success());
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        printed,
        serde_json::json!({"envelopes": [], "warnings": []})
    );
}

#[test]
fn envelope_parse_fails_clearly_on_unreadable_input() {
    // Goal: a missing file and non-UTF-8 input exit non-zero with a message that says why.
    let missing = coordsim(&["envelope", "parse", "no/such/file.txt", "--json"], None);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("cannot read no/such/file.txt"), "{stderr}");

    let binary = coordsim(&["envelope", "parse", "--json"], Some(b"ok \xff\xfe"));
    assert_eq!(binary.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&binary.stderr);
    assert!(
        stderr.contains("not UTF-8") && stderr.contains("offset 3"),
        "{stderr}"
    );
}

#[test]
fn envelope_render_round_trips_through_parse() {
    // Goal: render reads what parse prints; parsing the rendering gives the same JSON.
    let parsed = coordsim(&["envelope", "parse", "--json"], Some(ENVELOPES.as_bytes()));
    for dialect in ["claude-code", "nexo"] {
        let rendered = coordsim(
            &["envelope", "render", "--dialect", dialect],
            Some(&parsed.stdout),
        );
        assert!(
            rendered.status.success(),
            "{}",
            String::from_utf8_lossy(&rendered.stderr)
        );
        let reparsed = coordsim(&["envelope", "parse", "--json"], Some(&rendered.stdout));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&reparsed.stdout).unwrap(),
            serde_json::from_slice::<serde_json::Value>(&parsed.stdout).unwrap()
        );
    }
}

#[test]
fn envelope_render_reports_bad_json_with_its_position() {
    // Goal: malformed JSON is an error at line:column, and nothing is printed.
    let output = coordsim(&["envelope", "render"], Some(b"[{\"task_id\": }]"));
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("<stdin>:1:14"), "{stderr}");
}

#[test]
fn envelope_parse_reads_the_real_transcripts() {
    // Goal: the CLI finds the envelopes in a real Claude Code transcript file.
    let output = coordsim(
        &[
            "envelope",
            "parse",
            "fixtures/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
            "--json",
        ],
        None,
    );
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["warnings"], serde_json::json!([]));
    let envelopes = printed["envelopes"].as_array().unwrap();
    assert_eq!(envelopes.len(), 4);
    assert!(envelopes.iter().all(|e| e["status"] == "completed"));
    // The transcript's JSON strings are decoded: no JSON escapes leak into fields.
    assert_eq!(
        envelopes[0]["summary"],
        "Background command \"Force recompile ash deps to clear stale associations\" completed (exit code 0)"
    );
}

#[test]
fn envelope_parse_names_a_line_that_is_not_json() {
    // Goal: a broken transcript line is an error with its line number, not a skip.
    let output = coordsim(
        &["envelope", "parse", "--jsonl"],
        Some(b"{\"a\": 1}\nnot json\n"),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("<stdin>:2:"), "{stderr}");
}

#[test]
fn run_sweeps_scenarios_and_reports_json() {
    // Goal: `run --json` prints the documented keys and exits 0 when all seeds pass.
    let output = coordsim(
        &["run", "scenarios/core", "--seeds", "0..5", "--json"],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in [
        "scenarios",
        "seeds_run",
        "seeds_failed",
        "wall_seconds",
        "seeds_per_second",
        "sim_seconds",
        "sim_seconds_per_wall_second",
        "failures",
    ] {
        assert!(report.get(key).is_some(), "missing {key}");
    }
    let scenarios = load_all(&[repo_root().join("scenarios/core")])
        .unwrap()
        .len();
    assert_eq!(report["scenarios"], scenarios);
    assert_eq!(report["seeds_run"], 5 * scenarios);
    assert_eq!(report["seeds_failed"], 0);
}

#[test]
fn run_reports_a_bad_scenario_at_its_position() {
    // Goal: a scenario mistake stops the sweep with file:line:column and exit 2.
    // Method: a key given twice, a mistake in any version of the scenario format.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "name = \"x\"\nname = \"y\"\n").unwrap();
    let output = coordsim(&["run", path.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.toml:2:1"), "{stderr}");
}

/// `coordsim run ARGS --json`, parsed; panics unless it ran (exit 0 or 1) and its
/// exit code agrees with `seeds_failed`.
fn run_json(args: &[&str]) -> Value {
    let all = [&["run"], args, &["--json"]].concat();
    let output = coordsim(&all, None);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{all:?}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        output.status.success(),
        report["seeds_failed"] == 0,
        "{all:?}"
    );
    report
}

/// The (scenario, seed) of every failure in a `run --json` report.
fn failed_seeds(report: &Value) -> Vec<(String, u64)> {
    report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["scenario"].as_str().unwrap().to_owned(),
                f["seed"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn run_shards_partition_the_seeds() {
    // Goal: shards 1/3, 2/3 and 3/3 together run exactly the unsharded sweep. Method:
    // sweep seeds 0..11 whole and in three shards; the shards' seeds_run and
    // seeds_failed add up to the whole's, and their failed seeds are disjoint and
    // together the whole's.
    let args = ["scenarios/core", "--seeds", "0..11"];
    let whole = run_json(&args);
    let mut seeds_run = 0;
    let mut seeds_failed = 0;
    let mut failed = Vec::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let part = run_json(&[&args[..], &["--shard", shard]].concat());
        assert!(
            part["seeds_run"].as_u64().unwrap() > 0,
            "shard {shard} ran nothing"
        );
        seeds_run += part["seeds_run"].as_u64().unwrap();
        seeds_failed += part["seeds_failed"].as_u64().unwrap();
        failed.extend(failed_seeds(&part));
    }
    assert_eq!(seeds_run, whole["seeds_run"].as_u64().unwrap());
    assert_eq!(seeds_failed, whole["seeds_failed"].as_u64().unwrap());
    let union: BTreeSet<_> = failed.iter().cloned().collect();
    let whole_failed: BTreeSet<_> = failed_seeds(&whole).into_iter().collect();
    assert_eq!(union, whole_failed);
    assert_eq!(failed.len(), failed_seeds(&whole).len(), "shards overlap");
}

#[test]
fn run_shard_counts_its_seeds_from_the_start_of_the_range() {
    // Goal: shard K/N runs the seeds s with (s - A) % N == K - 1, counted from the
    // range's start A. Method: shard 3/3 of 5..13 is seeds 7 and 10 (counting from 0
    // would give 5, 8 and 11), for every scenario.
    let part = run_json(&["scenarios/core", "--seeds", "5..13", "--shard", "3/3"]);
    let scenarios = part["scenarios"].as_u64().unwrap();
    assert!(scenarios > 0);
    assert_eq!(part["seeds_run"].as_u64().unwrap(), 2 * scenarios);
}

#[test]
fn run_report_is_the_same_on_one_or_two_threads() {
    // Goal: the thread count changes timings only. Method: sweep seeds 0..12 on one
    // and on two threads and compare the JSON reports without their timing fields.
    let reports: Vec<Value> = ["1", "2"]
        .iter()
        .map(|threads| {
            let mut report =
                run_json(&["scenarios/core", "--seeds", "0..12", "--threads", threads]);
            let object = report.as_object_mut().unwrap();
            for timing in [
                "wall_seconds",
                "seeds_per_second",
                "sim_seconds_per_wall_second",
            ] {
                assert!(object.remove(timing).is_some(), "missing {timing}");
            }
            report
        })
        .collect();
    assert_eq!(reports[0], reports[1]);
}

#[test]
fn run_rejects_a_shard_that_does_not_exist() {
    // Goal: --shard takes K/N with 1 <= K <= N; anything else is a usage error (exit 2)
    // that says what was expected.
    for (shard, expected) in [
        ("0/3", "1 <= K <= N"),
        ("4/3", "1 <= K <= N"),
        ("1/0", "1 <= K <= N"),
        ("2", "expected K/N"),
        ("a/3", "expected K/N"),
    ] {
        let output = coordsim(&["run", "scenarios/core", "--shard", shard], None);
        assert_eq!(output.status.code(), Some(2), "--shard {shard}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--shard") && stderr.contains(expected),
            "--shard {shard}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "--shard {shard}");
    }
    let output = coordsim(&["run", "scenarios/core", "--threads", "0"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 1"));
}

/// Replays seed 3 of the first scenario under `scenarios/core` with `flags`, twice.
/// Returns the library's own run of that seed and what the replay printed, after
/// checking that both replays passed and printed the same bytes.
fn replay_seed_3(flags: &[&str]) -> (SeedRun, String) {
    let scenario = load_all(&[repo_root().join("scenarios/core")])
        .unwrap()
        .swap_remove(0);
    let run = run_seed(&scenario, 3, &RunOptions::default()).unwrap();
    let path = scenario.path.to_str().unwrap();
    let args = [&["replay", path, "--seed", "3"], flags].concat();
    let output = coordsim(&args, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    let again = coordsim(&args, None);
    assert_eq!(
        again.stdout, output.stdout,
        "{args:?} printed something else"
    );
    (run, String::from_utf8(output.stdout).unwrap())
}

#[test]
fn replay_trace_prints_the_runs_trace_as_json_lines() {
    // Goal: `replay --trace` prints exactly the run's trace, one entry per line, and
    // nothing else, the same on every replay. Method: run the seed through the
    // library and compare each line with the serialized entry.
    let (run, stdout) = replay_seed_3(&["--trace"]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(!run.trace.is_empty());
    assert_eq!(lines.len(), run.trace.len());
    for (line, entry) in lines.iter().zip(&run.trace) {
        let parsed: Value = serde_json::from_str(line).unwrap();
        assert_eq!(parsed, serde_json::to_value(entry).unwrap());
    }
}

#[test]
fn replay_prints_one_line_per_entry_then_the_trace_hash() {
    // Goal: the human view shows each entry's time, actor and event, then the
    // violations (or that there is none), then the run's cost table, then the trace
    // hash.
    let (run, stdout) = replay_seed_3(&[]);
    let lines: Vec<&str> = stdout.lines().collect();
    for (line, entry) in lines.iter().zip(&run.trace) {
        let time = format!("{}.{:03}s", entry.time_ms / 1000, entry.time_ms % 1000);
        let expected = format!("{time}  {}  {}", entry.actor, entry.event_json());
        assert_eq!(line.trim_start(), expected);
    }
    let cost_lines = run.cost.to_text().lines().count();
    assert_eq!(
        lines.len(),
        run.trace.len() + run.violations.len().max(1) + cost_lines + 1
    );
    let cost_start = run.trace.len() + run.violations.len().max(1);
    assert!(
        lines[cost_start].starts_with("agent "),
        "{}",
        lines[cost_start]
    );
    assert!(lines[cost_start + 1..]
        .iter()
        .any(|l| l.starts_with("total ")));
    assert_eq!(
        lines.last().unwrap(),
        &format!("trace hash {:016x}", run.trace_hash())
    );
}

#[test]
fn check_determinism_passes_on_the_core_scenarios() {
    // Goal: every core seed gives the same trace twice, on one thread or two.
    for threads in ["1", "2"] {
        let output = coordsim(
            &[
                "check-determinism",
                "scenarios/core",
                "--seeds",
                "0..5",
                "--threads",
                threads,
            ],
            None,
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        let scenarios = load_all(&[repo_root().join("scenarios/core")])
            .unwrap()
            .len();
        let seeds = 5 * scenarios;
        assert!(
            stdout.contains(&format!("{seeds} of {seeds} seeds agreed")),
            "{stdout}"
        );
        assert!(!stdout.contains("DIVERGED"), "{stdout}");
    }
}

#[test]
fn coverage_lists_every_probe_and_require_coverage_fails_on_an_unreached_one() {
    // Goal: `--coverage` shows each guard's hits, every probe listed, and
    // `--require-coverage` fails a sweep that leaves a guard unexercised. Method: a
    // scenario that reaches the name and unknown-tool guards and few others.
    let scenario = repo_root().join("scenarios/tasks/refused-spawns.toml");
    let path = scenario.to_str().unwrap();
    let shown = coordsim(&["run", path, "--seeds", "0..2", "--coverage"], None);
    assert!(shown.status.success(), "{shown:?}");
    let text = String::from_utf8(shown.stdout).unwrap();
    let names = coord_runtime::probe::Probe::ALL;
    assert!(
        text.contains(&format!("probes reached: 3 of {}", names.len())),
        "{text}"
    );
    assert!(text.contains("spawn-name-taken") && text.contains("tool-unknown-refused"));
    for probe in names {
        assert!(
            text.contains(probe.as_str()),
            "{probe} missing from\n{text}"
        );
    }
    assert!(text.contains("worktree-slug-refused") && text.contains("NEVER REACHED"));
    let required = coordsim(
        &["run", path, "--seeds", "0..2", "--require-coverage"],
        None,
    );
    assert_eq!(required.status.code(), Some(1));
    let error = String::from_utf8(required.stderr).unwrap();
    assert!(error.contains("never reached: ") && error.contains("worktree-slug-refused"));
    let json = coordsim(&["run", path, "--seeds", "0..2", "--json"], None);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["coverage"]["spawn-name-taken"], 2);
    assert_eq!(report["coverage"]["worktree-slug-refused"], 0);
}
