//! The coordsim binary, end to end.

use std::io::Write;
use std::process::{Command, Output, Stdio};

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
    // Goal: text with no envelope is `[]`, not an error.
    let output = coordsim(
        &["envelope", "parse", "-", "--json"],
        Some(b"nothing here <b>"),
    );
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "[]");
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
    let envelopes: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
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
    assert_eq!(report["seeds_run"], 15);
    assert_eq!(report["seeds_failed"], 0);
}

#[test]
fn run_reports_a_bad_scenario_at_its_position() {
    // Goal: a scenario mistake stops the sweep with file:line:column and exit 2.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "name = \"x\"\n[[workers]]\ndescription = 3\nresult = \"r\"\n",
    )
    .unwrap();
    let output = coordsim(&["run", path.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.toml:3:15"), "{stderr}");
}
