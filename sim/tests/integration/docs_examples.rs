//! Every example output in README.md and docs/*.md is the output of the command
//! its marker names, so it cannot go stale.
//!
//! A marked block is a fenced block right after an HTML comment
//!
//! ```text
//! <!-- output of: COMMAND[; COMMAND]...[; in SETUP][; with VAR=VALUE][; SIGINT after N s] -->
//! ```
//!
//! Each `COMMAND` is `coordsim ARGS` (the binary under test) or `cat FILE` (a file
//! an earlier command wrote), run in order from the repository root, or from a
//! scratch folder the test prepares when `in SETUP` names one of [`SETUPS`]. When
//! the block shows commands (`$ coordsim …` lines), it shows every command, each
//! followed by its output; otherwise it is the output of the last command, the
//! earlier ones preparing it. Output is standard output and standard error through
//! one pipe, in the order a terminal shows them. `with VAR=VALUE` sets an
//! environment variable for the commands; `SIGINT after N s` sends the last command
//! SIGINT after N seconds, as Ctrl-C would.
//!
//! A line `…` in a block stands for any run of lines, so a long output can be shown
//! in part; every line shown is checked. Before comparing, the repository's path
//! is written `/path/to/coordsim` and a scratch folder's `/path/to/work`, and what
//! depends on the wall clock is left out: a summary's `N.NN s wall (N seeds/s)`,
//! the `--json` timing keys, and how far an interrupted sweep got.
//!
//! A command that needs the real Claude Code CLI (`--claude-bin
//! "$(scripts/install-claude-code)"`) runs only when `COORDSIM_CLAUDE_BIN` names
//! the installed CLI (`.ci/run` sets it after installing it), and a live run's
//! task ids, request counts and milliseconds are left out too.
//!
//! A ```` ```text ```` block that is not an output says so with
//! `<!-- not output: WHY -->`; any other unmarked text block fails the test.
//!
//! `COORDSIM_UPDATE_DOCS=1` rewrites every differing block with the real output
//! instead of failing, keeping its `…` lines and the lines that already agree.

use std::io::{Read, Seek};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::repo_root;

/// The marker of a checked block.
const OUTPUT_MARKER: &str = "<!-- output of: ";
/// The marker of a text block that is not an output.
const NOT_OUTPUT_MARKER: &str = "<!-- not output: ";
/// A block line that stands for any run of lines.
const ELISION: &str = "…";
/// Set, the test rewrites stale blocks instead of failing.
const UPDATE_VARIABLE: &str = "COORDSIM_UPDATE_DOCS";
/// The installed Claude Code CLI, for the blocks of a live run.
const CLAUDE_BIN_VARIABLE: &str = "COORDSIM_CLAUDE_BIN";
/// How a marker names the installed CLI.
const CLAUDE_BIN_WORD: &str = "\"$(scripts/install-claude-code)\"";
/// How the docs write the repository's path.
const ROOT_SHOWN: &str = "/path/to/coordsim";
/// How the docs write a scratch folder's path.
const WORK_SHOWN: &str = "/path/to/work";
const REGENERATE: &str =
    "COORDSIM_UPDATE_DOCS=1 cargo test -p coord-sim --locked --test integration docs_examples";

/// One marked block.
struct Example {
    /// The file, relative to the repository root.
    file: String,
    /// The 1-based line of the block's first line (after the opening fence).
    first_line: usize,
    /// The block's lines.
    shown: Vec<String>,
    /// What the marker says.
    spec: Spec,
}

/// How a block is produced.
#[derive(Debug)]
struct Spec {
    /// The marker's text, for messages.
    text: String,
    commands: Vec<String>,
    setup: Option<String>,
    environment: Vec<(String, String)>,
    interrupt_after: Option<Duration>,
}

impl Spec {
    fn parse(text: &str) -> Result<Spec, String> {
        let mut spec = Spec {
            text: text.to_owned(),
            commands: Vec::new(),
            setup: None,
            environment: Vec::new(),
            interrupt_after: None,
        };
        for part in text.split("; ") {
            if let Some(setup) = part.strip_prefix("in ") {
                if !SETUPS.iter().any(|(name, _)| *name == setup) {
                    return Err(format!("no setup named `{setup}`"));
                }
                spec.setup = Some(setup.to_owned());
            } else if let Some(assignment) = part.strip_prefix("with ") {
                let (name, value) = assignment
                    .split_once('=')
                    .ok_or_else(|| format!("`{part}`: expected `with VAR=VALUE`"))?;
                spec.environment.push((name.to_owned(), value.to_owned()));
            } else if let Some(after) = part.strip_prefix("SIGINT after ") {
                let seconds = after
                    .strip_suffix(" s")
                    .and_then(|seconds| seconds.parse::<u64>().ok())
                    .ok_or_else(|| format!("`{part}`: expected `SIGINT after N s`"))?;
                spec.interrupt_after = Some(Duration::from_secs(seconds));
            } else if part.starts_with("coordsim ") || part.starts_with("cat ") {
                spec.commands.push(part.to_owned());
            } else {
                return Err(format!(
                    "`{part}` is neither a command (`coordsim …`, `cat FILE`), `in SETUP`, \
                     `with VAR=VALUE` nor `SIGINT after N s`"
                ));
            }
        }
        if spec.commands.is_empty() {
            return Err("no command".to_owned());
        }
        Ok(spec)
    }

    /// Whether a command needs the real Claude Code CLI.
    fn live(&self) -> bool {
        self.commands
            .iter()
            .any(|command| command.contains(CLAUDE_BIN_WORD))
    }
}

/// The files whose examples are checked.
fn documents() -> Vec<String> {
    let mut files = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(repo_root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The marked blocks of `file`, or what is wrong with its markers.
fn examples_of(file: &str, text: &str) -> (Vec<Example>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut examples, mut problems) = (Vec::new(), Vec::new());
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let Some(fence) = line.strip_prefix("```").filter(|rest| !rest.is_empty()) else {
            index += 1;
            continue;
        };
        let language = fence.trim();
        let close = (index + 1..lines.len())
            .find(|&at| lines[at].trim_end() == "```")
            .unwrap_or_else(|| panic!("{file}:{}: a fenced block that never ends", index + 1));
        let before = index.checked_sub(1).map(|at| lines[at].trim());
        let marker = before.and_then(|line| line.strip_prefix(OUTPUT_MARKER));
        match marker {
            Some(marker) => match marker.strip_suffix(" -->").map(Spec::parse) {
                Some(Ok(spec)) => examples.push(Example {
                    file: file.to_owned(),
                    first_line: index + 2,
                    shown: lines[index + 1..close]
                        .iter()
                        .map(|line| (*line).to_owned())
                        .collect(),
                    spec,
                }),
                Some(Err(why)) => problems.push(format!("{file}:{index}: bad marker: {why}")),
                None => problems.push(format!("{file}:{index}: a marker must end with ` -->`")),
            },
            None if language == "text"
                && !before.is_some_and(|line| line.starts_with(NOT_OUTPUT_MARKER)) =>
            {
                problems.push(format!(
                    "{file}:{}: a ```text block without a marker: mark it `{OUTPUT_MARKER}COMMAND -->` \
                     (or `{NOT_OUTPUT_MARKER}WHY -->` when it is not an output)",
                    index + 1
                ));
            }
            None => {}
        }
        index = close + 1;
    }
    (examples, problems)
}

/// A scratch folder's contents, made before a block's commands run in it.
type Setup = fn(&Path);

/// The scratch folders markers name with `in SETUP`.
const SETUPS: [(&str, Setup); 8] = [
    ("an empty folder", |_| {}),
    ("a folder holding the session 258c7280.jsonl", |dir| {
        let session = "fixtures/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d";
        copy(&format!("{session}.jsonl"), &dir.join("258c7280.jsonl"));
        let subagents = dir.join("258c7280/subagents");
        std::fs::create_dir_all(&subagents).unwrap();
        for agent in ["agent-a881341.jsonl", "agent-acompact-fffbd0.jsonl"] {
            copy(
                &format!("{session}/subagents/{agent}"),
                &subagents.join(agent),
            );
        }
    }),
    ("a folder holding a.toml", |dir| {
        copy("scenarios/core/notify-once.toml", &dir.join("a.toml"))
    }),
    ("a folder holding notify-once.toml", |dir| {
        copy(
            "scenarios/core/notify-once.toml",
            &dir.join("notify-once.toml"),
        )
    }),
    ("a folder holding swarm.toml", |dir| {
        std::fs::write(dir.join("swarm.toml"), SWARM_SCENARIO).unwrap()
    }),
    (
        "a folder holding replay.toml and a malformed x.json",
        |dir| {
            let cassette = read(&repo_root().join("fixtures/cassettes/notify-once-seed-0.json"));
            std::fs::write(
                dir.join("x.json"),
                cassette.replace("\"coordsim-cassette\"", "\"vcr-cassette\""),
            )
            .unwrap();
            write_replay(dir, "x.json");
        },
    ),
    (
        "a folder holding replay.toml and a tampered tampered.json",
        |dir| {
            let cassette = read(&repo_root().join("fixtures/cassettes/notify-once-seed-0.json"));
            let mut cassette: Value = serde_json::from_str(&cassette).unwrap();
            // The coordinator's second request, its prompt edited by hand (its
            // request_hash left stale, as a hand edit leaves it).
            let second = cassette["exchanges"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .filter(|exchange| exchange["agent"] == "coordinator" && exchange["call"] != 1)
                .min_by_key(|exchange| exchange["call"].as_u64().unwrap())
                .unwrap();
            let text = &mut second["request"]["messages"][0]["content"][0]["text"];
            assert_eq!(text, "Investigate the login failures.");
            *text = Value::from("Investigate the logout failures.");
            std::fs::write(
                dir.join("tampered.json"),
                serde_json::to_string_pretty(&cassette).unwrap(),
            )
            .unwrap();
            write_replay(dir, "tampered.json");
        },
    ),
    ("a folder holding notes.txt", |dir| {
        std::fs::write(dir.join("notes.txt"), ENVELOPE_NOTES).unwrap()
    }),
];

/// The scenario docs/cli.md shrinks: Claude Code's mailbox under whatever faults a
/// seed draws.
const SWARM_SCENARIO: &str = r#"name = "legacy-mailbox-swarm"
description = "Claude Code's mailbox under whatever faults the seed draws."
profile = "claude-code"

[coordinator]
prompt = "Collect the teammates' status reports."

[[coordinator.turns]]
tool_calls = [{ name = "Agent", input = { description = "survey", prompt = "Survey the repository." } }]
latency = { kind = "fixed", ms = 500 }

[[coordinator.turns]]
text = "Survey done."
when = { kind = "notifications_at_least", count = 1 }

[[workers]]
prompt = "Survey the repository."
[[workers.turns]]
text = "Two crates, one binary."
latency = { kind = "uniform", min_ms = 20000, max_ms = 40000 }
"#;

/// The text docs/cli.md reads envelopes from: one envelope of a newer dialect, and
/// a candidate with attributes, which is not read as one.
const ENVELOPE_NOTES: &str = r#"The worker finished:
<task-notification><task-id>a3kx9zq2</task-id><status>completed</status><summary>Agent "Find auth bug" completed</summary><note>The same task-id may notify more than once.</note><result>src/auth.rs:42 …</result><usage><total_tokens>48211</total_tokens><tool_uses>17</tool_uses><duration_ms>93000</duration_ms></usage><output-file>/tmp/session/tasks/a3kx9zq2.output</output-file><attempt>2</attempt></task-notification>
<task-notification id="x"><task-id>b</task-id><status>completed</status></task-notification>
"#;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn copy(from: &str, to: &Path) {
    std::fs::copy(repo_root().join(from), to).unwrap();
}

/// `replay.toml`: the repository's notify-once replay, answering from `cassette`
/// by request hash.
fn write_replay(dir: &Path, cassette: &str) {
    let text = read(&repo_root().join("scenarios/replay/notify-once-cassette.toml"))
        .replace(
            "cassette = \"../../fixtures/cassettes/notify-once-seed-0.json\"",
            &format!("cassette = \"{cassette}\""),
        )
        .replace("match = \"in-order-per-agent\"", "match = \"request-hash\"");
    std::fs::write(dir.join("replay.toml"), text).unwrap();
}

/// What one command printed, and how it ended.
struct Ran {
    output: String,
    status: Option<i32>,
}

/// Runs one command of a marker in `dir`.
fn run(
    command: &str,
    dir: &Path,
    environment: &[(String, String)],
    interrupt_after: Option<Duration>,
) -> Ran {
    let words: Vec<String> = command
        .split_whitespace()
        .map(|word| match word {
            CLAUDE_BIN_WORD => std::env::var(CLAUDE_BIN_VARIABLE).unwrap(),
            word => word.to_owned(),
        })
        .collect();
    if words[0] == "cat" {
        return Ran {
            output: read(&dir.join(&words[1])),
            status: Some(0),
        };
    }
    // One file for both streams, so their lines interleave as on a terminal.
    let output_file = tempfile::tempfile().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(&words[1..])
        .current_dir(dir)
        .env_remove(UPDATE_VARIABLE)
        .envs(environment.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(output_file.try_clone().unwrap())
        .stderr(output_file.try_clone().unwrap())
        .spawn()
        .unwrap();
    if let Some(after) = interrupt_after {
        std::thread::sleep(after);
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -INT failed");
    }
    let status = child.wait().unwrap();
    let mut output_file = output_file;
    let mut output = String::new();
    output_file.rewind().unwrap();
    output_file.read_to_string(&mut output).unwrap();
    Ran {
        output,
        status: status.code(),
    }
}

/// The output of the block's commands, as the block shows it, with the paths
/// written as the docs write them.
fn real_output(example: &Example) -> Result<Vec<String>, String> {
    let scratch = tempfile::tempdir().unwrap();
    let root = repo_root().canonicalize().unwrap();
    let dir = match &example.spec.setup {
        Some(name) => {
            let (_, setup) = SETUPS.iter().find(|(setup, _)| setup == name).unwrap();
            setup(scratch.path());
            scratch.path().canonicalize().unwrap()
        }
        None => root.clone(),
    };
    let shows_commands = example.shown.iter().any(|line| line.starts_with("$ "));
    let mut lines = Vec::new();
    let count = example.spec.commands.len();
    for (index, command) in example.spec.commands.iter().enumerate() {
        let last = index + 1 == count;
        let interrupt = example.spec.interrupt_after.filter(|_| last);
        let ran = run(command, &dir, &example.spec.environment, interrupt);
        // A crash is never an example: status 70 is coordsim's internal error, a
        // missing code a signal other than the one the marker sends.
        if ran.status == Some(70) || (ran.status.is_none() && interrupt.is_none()) {
            return Err(format!(
                "`{command}` crashed ({:?}):\n{}",
                ran.status, ran.output
            ));
        }
        let mut output = ran.output;
        if dir != root {
            output = output.replace(dir.to_str().unwrap(), WORK_SHOWN);
        }
        let output = output.replace(root.to_str().unwrap(), ROOT_SHOWN);
        if shows_commands {
            lines.push(format!("$ {command}"));
        }
        if shows_commands || last {
            lines.extend(output.lines().map(str::to_owned));
        }
    }
    Ok(lines)
}

/// `line` with every figure that depends on the wall clock replaced by `#`.
fn masked(line: &str, live: bool) -> String {
    let mut line = mask_before(line, " s wall");
    line = mask_after(&line, " s wall (");
    for key in [
        "wall_seconds",
        "seeds_per_second",
        "sim_seconds_per_wall_second",
    ] {
        line = mask_after(&line, &format!("\"{key}\": "));
    }
    if line.contains("INTERRUPTED by SIG") {
        // How far an interrupted sweep got depends on when the signal came.
        line = mask_before(&line, " runs (of ");
        line = mask_before(&line, " s simulated");
    }
    if live {
        // A live run's timings, request count and the task ids the CLI made up.
        line = mask_before(&line, " ms");
        line = mask_before(&line, " requests");
        line = mask_after(&line, "task ");
    }
    line
}

/// `line` with the number just before each `pattern` replaced by `#`.
fn mask_before(line: &str, pattern: &str) -> String {
    let mut result = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(pattern) {
        let head = &rest[..at];
        let number = head.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ',');
        if number.len() < head.len() {
            result += number;
            result += "#";
        } else {
            result += head;
        }
        result += pattern;
        rest = &rest[at + pattern.len()..];
    }
    result + rest
}

/// `line` with the word just after each `pattern` replaced by `#`.
fn mask_after(line: &str, pattern: &str) -> String {
    let mut result = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(pattern) {
        result += &rest[..at + pattern.len()];
        rest = &rest[at + pattern.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
            .unwrap_or(rest.len());
        if end > 0 {
            result += "#";
        }
        rest = &rest[end..];
    }
    result + rest
}

/// Where a block and the real output part: the index of the block's line, and the
/// index of the real line it was held against (`None` past the real output's end).
#[derive(Debug, PartialEq)]
struct Mismatch {
    shown: usize,
    real: Option<usize>,
}

/// How a block's runs of lines between elisions sit in the real output.
struct Placement {
    /// Each run: its first index in the block, its length, and where it starts in
    /// the real output.
    runs: Vec<(usize, usize, usize)>,
    mismatch: Option<Mismatch>,
}

/// Places the block's runs of lines on the real output: the first run at the start
/// (unless the block starts with `…`), the last at the end (unless it ends with
/// `…`), each other at its first match after the previous one. A run that does not
/// fit is placed where most of its first lines agree, and the first disagreement is
/// the mismatch.
fn place(shown: &[String], real: &[String], live: bool) -> Placement {
    let same =
        |shown_line: &str, real_line: &str| masked(shown_line, live) == masked(real_line, live);
    // How many leading lines of `run` agree with the real output from `start`.
    let agreeing = |run: &[String], start: usize| {
        run.iter()
            .zip(real.get(start..).unwrap_or_default())
            .take_while(|(shown_line, real_line)| same(shown_line, real_line))
            .count()
    };
    let mut runs = Vec::new();
    let mut run_start = 0;
    for (index, line) in shown
        .iter()
        .enumerate()
        .chain([(shown.len(), &String::new())])
    {
        if index == shown.len() || line == ELISION {
            runs.push((run_start, index - run_start));
            run_start = index + 1;
        }
    }
    let last_run = runs.len() - 1;
    let mut placement = Placement {
        runs: Vec::new(),
        mismatch: None,
    };
    let mut position = 0;
    for (number, &(first, length)) in runs.iter().enumerate() {
        let run = &shown[first..first + length];
        let anchored_start = number == 0;
        let anchored_end = number == last_run;
        let start = if anchored_start {
            0
        } else if anchored_end {
            real.len().saturating_sub(length).max(position)
        } else if length == 0 {
            position
        } else {
            (position..real.len())
                .find(|&start| agreeing(run, start) == length)
                .unwrap_or_else(|| {
                    (position..real.len())
                        .max_by_key(|&start| (agreeing(run, start), std::cmp::Reverse(start)))
                        .unwrap_or(position)
                })
        };
        let agree = agreeing(run, start);
        placement.runs.push((first, length, start));
        if placement.mismatch.is_none() {
            // Without elisions the block is the whole output.
            let too_long = anchored_start && anchored_end && real.len() > length;
            if agree < length {
                let real_index = start + agree;
                placement.mismatch = Some(Mismatch {
                    shown: first + agree,
                    real: (real_index < real.len()).then_some(real_index),
                });
            } else if too_long {
                placement.mismatch = Some(Mismatch {
                    shown: first + length,
                    real: Some(start + length),
                });
            }
        }
        position = start + length;
    }
    placement
}

/// The block rewritten from the real output: its `…` lines kept, each run of lines
/// replaced by the real lines where it was placed (without `…`, the whole output),
/// a line of the run that already agrees with the real one (timings aside) kept as
/// it was.
fn regenerated(shown: &[String], real: &[String], live: bool) -> Vec<String> {
    let keep = |run: &[String], real_line: &String| {
        run.iter()
            .find(|shown_line| masked(shown_line, live) == masked(real_line, live))
            .unwrap_or(real_line)
            .clone()
    };
    let placement = place(shown, real, live);
    if placement.runs.len() == 1 {
        return real
            .iter()
            .map(|real_line| keep(shown, real_line))
            .collect();
    }
    let mut lines = Vec::new();
    for (number, &(first, length, start)) in placement.runs.iter().enumerate() {
        if number > 0 {
            lines.push(ELISION.to_owned());
        }
        let run = &shown[first..first + length];
        for real_line in real.iter().skip(start).take(length) {
            lines.push(keep(run, real_line));
        }
    }
    lines
}

/// Checks every block whose liveness is `live`; returns the problems found.
fn check_examples(live: bool) -> Vec<String> {
    let update = std::env::var_os(UPDATE_VARIABLE).is_some();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let path = repo_root().join(&file);
        let text = read(&path);
        let (examples, marker_problems) = examples_of(&file, &text);
        if !live {
            problems.extend(marker_problems);
        }
        let mut rewrites: Vec<(usize, Vec<String>)> = Vec::new();
        for example in examples
            .iter()
            .filter(|example| example.spec.live() == live)
        {
            checked += 1;
            let real = match real_output(example) {
                Ok(real) => real,
                Err(why) => {
                    problems.push(format!(
                        "{}:{}: {why}",
                        example.file,
                        example.first_line - 1
                    ));
                    continue;
                }
            };
            let Some(mismatch) = place(&example.shown, &real, live).mismatch else {
                continue;
            };
            if update {
                rewrites.push((example.first_line, regenerated(&example.shown, &real, live)));
                continue;
            }
            let shown_line = example
                .shown
                .get(mismatch.shown)
                .map_or("(the block ends here)".to_owned(), |line| {
                    format!("`{line}`")
                });
            let real_line = mismatch
                .real
                .map_or("(the output ends here)".to_owned(), |at| {
                    format!("`{}`", real[at])
                });
            problems.push(format!(
                "{}:{}: the example block (output of: {}) is stale at its line {} ({}:{}):\n  \
                 shown: {shown_line}\n  real:  {real_line}\nthe real output:\n{}\n",
                example.file,
                example.first_line - 1,
                example.spec.text,
                mismatch.shown + 1,
                example.file,
                example.first_line + mismatch.shown,
                real.join("\n"),
            ));
        }
        if !rewrites.is_empty() {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            // From the last block up, so earlier line numbers still hold.
            for (first_line, new) in rewrites.into_iter().rev() {
                let start = first_line - 1;
                let end = (start..lines.len())
                    .find(|&at| lines[at].trim_end() == "```")
                    .unwrap();
                lines.splice(start..end, new);
            }
            let mut text = lines.join("\n");
            text.push('\n');
            std::fs::write(&path, text).unwrap();
            eprintln!("{file}: rewrote its stale example blocks");
        }
    }
    eprintln!("{checked} example blocks checked");
    problems
}

fn report(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{}\n\nRegenerate the blocks with: {REGENERATE}\n(review the diff: every line it \
         writes is what the command printed)",
        problems.join("\n")
    );
}

#[test]
fn every_example_output_in_the_docs_is_its_command_s_real_output() {
    report(check_examples(false));
}

#[test]
fn the_claude_code_examples_are_a_live_run_s_output() {
    // Needs the real CLI: `.ci/run` installs it and sets the variable.
    if std::env::var_os(CLAUDE_BIN_VARIABLE).is_none() {
        eprintln!(
            "skipped: {CLAUDE_BIN_VARIABLE} is not set; the blocks of a live run of the \
             Claude Code CLI need it (COORDSIM_CLAUDE_BIN=\"$(scripts/install-claude-code)\")"
        );
        return;
    }
    report(check_examples(true));
}

#[test]
fn an_elision_stands_for_any_run_of_lines_and_every_shown_line_is_checked() {
    let lines = |text: &str| -> Vec<String> { text.lines().map(str::to_owned).collect() };
    let real = lines("a\nb\nc\nd\ne");
    let fits = |shown: &str| place(&lines(shown), &real, false).mismatch;
    assert_eq!(fits("a\nb\nc\nd\ne"), None);
    assert_eq!(fits("a\n…\ne"), None);
    assert_eq!(fits("…\nc\n…"), None);
    assert_eq!(fits("a\n…\nc\nd\n…\ne"), None);
    assert_eq!(fits("…"), None);
    assert_eq!(
        fits("a\n…\nb\nc\nd\ne"),
        None,
        "an elision may stand for no line"
    );
    assert_eq!(
        fits("a\nb\nx\nd\ne"),
        Some(Mismatch {
            shown: 2,
            real: Some(2)
        })
    );
    assert_eq!(
        fits("a\nb"),
        Some(Mismatch {
            shown: 2,
            real: Some(2)
        })
    );
    assert_eq!(
        fits("a\n…\nd"),
        Some(Mismatch {
            shown: 2,
            real: Some(4)
        })
    );
    assert_eq!(
        fits("…\nc\nx\n…"),
        Some(Mismatch {
            shown: 2,
            real: Some(3)
        })
    );
    assert_eq!(
        fits("a\nb\nc\nd\ne\nf"),
        Some(Mismatch {
            shown: 5,
            real: None
        })
    );
    // Regenerating keeps the elisions and takes the real lines around them.
    assert_eq!(
        regenerated(&lines("a\n…\nx"), &real, false),
        lines("a\n…\ne")
    );
    assert_eq!(regenerated(&lines("a\nx"), &real, false), real);
    assert_eq!(
        regenerated(&lines("…\nc\nx\n…"), &real, false),
        lines("…\nc\nd\n…")
    );
}

#[test]
fn wall_clock_figures_are_left_out_of_the_comparison() {
    assert_eq!(
        masked(
            "1 scenario × seeds 0..2: 2 runs, 2 failed, 0.03 s wall (59 seeds/s), 13.5 s simulated",
            false
        ),
        "1 scenario × seeds 0..2: 2 runs, 2 failed, # s wall (# seeds/s), 13.5 s simulated"
    );
    assert_eq!(
        masked("  \"wall_seconds\": 1.31,", false),
        "  \"wall_seconds\": #,"
    );
    assert_eq!(
        masked(
            "1 scenario × seeds 0..9: 548 runs (of 9), 0 failed, 2.01 s wall (273 seeds/s), 669.3 s simulated, INTERRUPTED by SIGINT",
            false
        ),
        "1 scenario × seeds 0..9: # runs (of 9), 0 failed, # s wall (# seeds/s), # s simulated, INTERRUPTED by SIGINT"
    );
    assert_eq!(
        masked("notify-once: task a3abbda6c at 4 ms, 8 requests", true),
        "notify-once: task # at # ms, # requests"
    );
}

#[test]
fn a_block_whose_marker_is_missing_or_wrong_is_named() {
    let text = "intro\n```text\nout\n```\n<!-- output of: rm -rf x -->\n```text\nx\n```\n\
                <!-- not output: a layout -->\n```text\ntree\n```\n```toml\nname = 1\n```\n";
    let (examples, problems) = examples_of("x.md", text);
    assert!(examples.is_empty());
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("x.md:2: a ```text block without a marker"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("x.md:5: bad marker: `rm -rf x`"),
        "{problems:#?}"
    );
}
