//! `coordsim cost` on real Claude Code transcripts, checked against independent figures.
//!
//! The expected token counts are what ccusage 20.0.24 (`ccusage session --json --offline`,
//! its native binary) printed for the same files laid out as `projects/<project>/`, and
//! what an independent Python script that deduplicates by `(message.id, requestId)`
//! computed; both agree to the token. The cost is ccusage's, at the same prices.
//! Where ccusage is installed (`scripts/install-ccusage`, as CI does), a test also runs
//! it on each fixture and compares; without it that test says it was skipped, unless
//! `COORDSIM_REQUIRE_CCUSAGE=1`, when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coord_sim::cost::{account, default_threads, PriceTable};
use serde_json::Value;

use crate::repo_root;

fn spotter() -> PathBuf {
    repo_root().join("fixtures/claude-code/spotter")
}

fn coordsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

fn json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `[input, output, cache creation, cache read]` of a JSON totals object.
fn tokens(value: &Value) -> [u64; 4] {
    [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .map(|key| {
        value[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {value}"))
    })
}

const TOTAL_TOKENS: [u64; 4] = [2_064, 69_618, 1_010_985, 27_887_119];
const TOTAL_COST_USD: f64 = 23.230112749999993;

#[test]
fn spotter_corpus_totals_equal_ccusage_to_the_token() {
    // Goal: the acceptance figures: every session's and the corpus's token totals are
    // exactly the independent ones, and the cost agrees (well within 1%).
    let report = json(&coordsim(&[
        "cost",
        "fixtures/claude-code/spotter",
        "--json",
    ]));
    assert_eq!(tokens(&report["totals"]), TOTAL_TOKENS);
    let totals = &report["totals"];
    assert_eq!(totals["cache_creation_5m_input_tokens"], 559_475);
    assert_eq!(totals["cache_creation_1h_input_tokens"], 451_510);
    let cost = totals["cost_usd"].as_f64().unwrap();
    assert!((cost - TOTAL_COST_USD).abs() < 1e-6, "{cost}");

    let sessions: Vec<(&str, [u64; 4])> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| (session["session_id"].as_str().unwrap(), tokens(session)))
        .collect();
    assert_eq!(
        sessions,
        [
            (
                "258c7280-ae70-4798-800f-63464d01a85d",
                [198, 38_908, 394_137, 14_972_534]
            ),
            (
                "4d5611e5-241a-462a-8d15-5122611a9569",
                [233, 28_899, 559_475, 12_387_553]
            ),
            ("short", [3, 13, 13_835, 11_515]),
            ("subagent", [1_576, 1_586, 25_842, 427_286]),
            ("tool_heavy", [54, 212, 17_696, 88_231]),
        ]
    );
    assert_eq!(report["read"]["malformed_lines"], 0);
    assert!(report["malformed"].as_array().unwrap().is_empty());
}

#[test]
fn main_thread_matches_the_fixture_readme_reference_figure() {
    // Goal: the 4d5611e5 main file alone gives the figure the fixtures README records, and
    // its subagents appear as their own agents of the same session.
    let report = json(&coordsim(&[
        "cost",
        "fixtures/claude-code/spotter",
        "--json",
    ]));
    let session = &report["sessions"][1];
    assert_eq!(
        session["session_id"],
        "4d5611e5-241a-462a-8d15-5122611a9569"
    );
    let agents: Vec<&str> = session["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|agent| agent["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["main", "a2898e3", "acompact-e1f845"]);
    assert_eq!(
        tokens(&session["agents"][0]),
        [177, 28_755, 479_537, 11_618_567]
    );
    assert_eq!(
        session["models"],
        serde_json::json!(["claude-opus-4-6", "claude-sonnet-4-5-20250929"])
    );

    let alone = json(&coordsim(&[
        "cost",
        "fixtures/claude-code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "--json",
    ]));
    assert_eq!(tokens(&alone["totals"]), [177, 28_755, 479_537, 11_618_567]);
}

#[test]
fn shared_fixtures_give_the_same_totals_as_the_copy() {
    // Goal: the repository's copy is the shared corpus: where `../shared` sits beside the
    // repository (as in CI), both give identical reports apart from paths.
    let shared = repo_root().join("../shared/fixtures/claude-code/spotter");
    if !shared.is_dir() {
        return;
    }
    let prices = PriceTable::built_in();
    let copy = account(&[spotter()], &prices, default_threads()).unwrap();
    let original = account(&[shared], &prices, default_threads()).unwrap();
    assert_eq!(copy.sessions, original.sessions);
    assert_eq!(copy.totals, original.totals);
}

/// A temporary copy of one fixture session with `extra` appended to its main file.
fn session_copy(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let name = "4d5611e5-241a-462a-8d15-5122611a9569";
    let mut text = std::fs::read_to_string(spotter().join(format!("{name}.jsonl"))).unwrap();
    text.push_str(extra);
    std::fs::write(dir.path().join(format!("{name}.jsonl")), text).unwrap();
    let subagents = dir.path().join(name).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    for entry in std::fs::read_dir(spotter().join(name).join("subagents")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), subagents.join(entry.file_name())).unwrap();
    }
    dir
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn malformed_lines_are_reported_with_their_location_and_lose_nothing() {
    // Goal: a truncated last line and a garbage line do not stop the accounting; each is
    // named on stderr and in the JSON with its line number; the totals are unchanged.
    let dir = session_copy("{\"type\":\"garbage\nnot json at all\n{\"type\":\"assistant\",\"mess");
    let output = coordsim(&["cost", arg(dir.path()), "--json"]);
    let report = json(&output);
    assert_eq!(
        tokens(&report["totals"]),
        [233, 28_899, 559_475, 12_387_553]
    );
    let lines: Vec<u64> = report["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bad| bad["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1513, 1514, 1515]);
    assert_eq!(report["read"]["malformed_lines"], 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("skipped malformed line").count(),
        3,
        "{stderr}"
    );
    assert!(
        stderr.contains("4d5611e5-241a-462a-8d15-5122611a9569.jsonl:1514:"),
        "{stderr}"
    );
}

#[test]
fn unknown_model_is_an_error_that_names_it() {
    // Goal: a response from a model the table lacks fails the command (exit 2) naming the
    // model and its line, and suggesting --pricing; no report with a silent zero is printed.
    let dir = session_copy(
        "{\"requestId\":\"req_x\",\"message\":{\"id\":\"msg_x\",\"model\":\"claude-future-9\",\
         \"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n",
    );
    let output = coordsim(&["cost", arg(dir.path())]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"claude-future-9\" (1 responses, first at "),
        "{stderr}"
    );
    assert!(stderr.contains(".jsonl:1513)"), "{stderr}");
    assert!(stderr.contains("--pricing FILE"), "{stderr}");
}

#[test]
fn pricing_file_overrides_the_built_in_table() {
    // Goal: `--pricing FILE` replaces the table: the same tokens at doubled prices cost
    // twice as much, and a model missing from the file becomes an error.
    let dir = tempfile::tempdir().unwrap();
    let built_in = std::fs::read_to_string(repo_root().join("pricing/anthropic.toml")).unwrap();
    let doubled: String = built_in
        .lines()
        .map(|line| match line.split_once(" = ") {
            Some((key, value)) if key != "threshold_tokens" && key != "aliases" => {
                format!("{key} = {}\n", value.parse::<f64>().unwrap() * 2.0)
            }
            _ => format!("{line}\n"),
        })
        .collect();
    let prices = dir.path().join("double.toml");
    std::fs::write(&prices, doubled).unwrap();
    let report = json(&coordsim(&[
        "cost",
        "fixtures/claude-code/spotter",
        "--json",
        "--pricing",
        arg(&prices),
    ]));
    assert_eq!(tokens(&report["totals"]), TOTAL_TOKENS);
    let cost = report["totals"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 2.0 * TOTAL_COST_USD).abs() < 1e-6, "{cost}");

    let opus_only = dir.path().join("opus.toml");
    let opus = built_in.split("[models.\"claude-opus-4-5").next().unwrap();
    std::fs::write(&opus_only, opus).unwrap();
    let output = coordsim(&[
        "cost",
        "fixtures/claude-code/spotter",
        "--pricing",
        arg(&opus_only),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("claude-sonnet-4-5-20250929"), "{stderr}");
    assert!(stderr.contains("opus.toml"), "{stderr}");

    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[models.x]\ninput = \"free\"\n").unwrap();
    let output = coordsim(&[
        "cost",
        "fixtures/claude-code/spotter",
        "--pricing",
        arg(&broken),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("broken.toml:2:"), "{stderr}");
}

#[test]
fn text_report_ends_with_the_read_summary() {
    // Goal: the default output is a table with a total row and says what was read.
    let output = coordsim(&["cost", "fixtures/claude-code/spotter"]);
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.lines().any(|line| line.starts_with("total ")
        && line.contains("27,887,119")
        && line.ends_with("23.2301")));
    assert!(stdout.ends_with(
        "9 files, 3688 lines, 325 API responses (317 duplicate lines merged), 0 malformed lines\n"
    ));
}

/// A corpus that exercises what threads could change: the fixtures twice over (every
/// response repeated in another file, as a resumed session repeats them) and a file of
/// malformed lines.
fn corpus_with_repeats() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for copy in ["a", "b"] {
        copy_tree(&spotter(), &dir.path().join(copy));
    }
    std::fs::write(
        dir.path().join("a/broken.jsonl"),
        "{\"type\":\"garbage\nnot json\n\n{\"requestId\":5,\"message\":{\"usage\":{}}}\n",
    )
    .unwrap();
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.path().extension().is_some_and(|ext| ext == "jsonl") {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn every_thread_count_prints_byte_identical_reports() {
    // Goal: `--threads` changes only the time: on the fixtures, and on a corpus where
    // responses repeat across files and lines are malformed, 1, 2 and 5 threads print
    // the same bytes on stdout and stderr, as JSON and as text.
    let repeats = corpus_with_repeats();
    let spotter = spotter();
    for corpus in [spotter.as_path(), repeats.path()] {
        for format in [&["--json"][..], &[][..]] {
            let run = |threads: &str| {
                let mut args = vec!["cost", arg(corpus), "--threads", threads];
                args.extend_from_slice(format);
                let output = coordsim(&args);
                assert!(output.status.success(), "{args:?}");
                (output.stdout, output.stderr)
            };
            let one = run("1");
            for threads in ["2", "5"] {
                assert!(
                    run(threads) == one,
                    "{threads} threads differ from 1 on {corpus:?} {format:?}"
                );
            }
        }
    }
    let report = json(&coordsim(&["cost", arg(repeats.path()), "--json"]));
    assert_eq!(tokens(&report["totals"]), TOTAL_TOKENS);
    assert_eq!(report["read"]["malformed_lines"], 3);
    let output = coordsim(&["cost", arg(repeats.path()), "--threads", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 1"));
}

/// Set to 1, a missing ccusage fails the comparison instead of skipping it.
const REQUIRE_CCUSAGE: &str = "COORDSIM_REQUIRE_CCUSAGE";

/// The pinned ccusage that `scripts/install-ccusage` installed, or `None` after a loud
/// skip message.
fn ccusage() -> Option<PathBuf> {
    let output = Command::new(repo_root().join("scripts/install-ccusage"))
        .arg("--installed")
        .output()
        .unwrap();
    let path = String::from_utf8(output.stdout).unwrap();
    if output.status.success() {
        return Some(PathBuf::from(path.trim()));
    }
    assert!(
        std::env::var(REQUIRE_CCUSAGE).as_deref() != Ok("1"),
        "{REQUIRE_CCUSAGE}=1 but ccusage is not installed: run scripts/install-ccusage\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "\n!!! SKIPPED: ccusage is not installed, the comparison with it did not run. \
         Install it with scripts/install-ccusage (or set {REQUIRE_CCUSAGE}=1 to fail).\n"
    );
    None
}

/// ccusage's report of the transcripts in `config_dir/projects/`: token totals, and
/// each session's by id.
fn ccusage_tokens(ccusage: &Path, config_dir: &Path) -> ([u64; 4], Vec<(String, [u64; 4])>) {
    let output = Command::new(ccusage)
        .args(["claude", "session", "--json", "--offline"])
        .env("CLAUDE_CONFIG_DIR", config_dir)
        .output()
        .unwrap();
    let report = json(&output);
    let tokens = |value: &Value| {
        [
            "inputTokens",
            "outputTokens",
            "cacheCreationTokens",
            "cacheReadTokens",
        ]
        .map(|key| {
            value[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{key} in {value}"))
        })
    };
    let mut sessions: Vec<(String, [u64; 4])> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let id = session["sessionId"].as_str().unwrap().to_owned();
            (id, tokens(session))
        })
        .collect();
    sessions.sort();
    (tokens(&report["totals"]), sessions)
}

#[test]
fn token_totals_equal_ccusage_on_every_fixture() {
    // Goal: on each fixture session alone (its main file and subagents), and on all of
    // them together session by session, coordsim's token totals are ccusage's exactly:
    // input, output, cache creation, cache read.
    let Some(ccusage) = ccusage() else {
        return;
    };
    let mut sessions: Vec<String> = std::fs::read_dir(spotter())
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect();
    sessions.sort();
    assert_eq!(sessions.len(), 5);
    for session in &sessions {
        let config = tempfile::tempdir().unwrap();
        let project = config.path().join("projects/fixture");
        std::fs::create_dir_all(&project).unwrap();
        let main = format!("{session}.jsonl");
        std::fs::copy(spotter().join(&main), project.join(&main)).unwrap();
        if spotter().join(session).is_dir() {
            copy_tree(&spotter().join(session), &project.join(session));
        }
        let ours = json(&coordsim(&["cost", arg(&project), "--json"]));
        let (theirs, _) = ccusage_tokens(&ccusage, config.path());
        eprintln!(
            "{session}: coordsim {:?}, ccusage {theirs:?}",
            tokens(&ours["totals"])
        );
        assert_eq!(tokens(&ours["totals"]), theirs, "{session}");
    }

    let config = tempfile::tempdir().unwrap();
    copy_tree(&spotter(), &config.path().join("projects/fixture"));
    let ours = json(&coordsim(&[
        "cost",
        arg(&config.path().join("projects")),
        "--json",
    ]));
    let ours_by_session: Vec<(String, [u64; 4])> = ours["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let id = session["session_id"].as_str().unwrap().to_owned();
            (id, tokens(session))
        })
        .collect();
    let (theirs, theirs_by_session) = ccusage_tokens(&ccusage, config.path());
    assert_eq!(tokens(&ours["totals"]), theirs);
    assert_eq!(theirs, TOTAL_TOKENS);
    assert_eq!(ours_by_session, theirs_by_session);
}
