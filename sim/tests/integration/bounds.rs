//! Bad scenario input: every number has a range checked at load time with its
//! `file:line:column`, and no scenario value makes a run panic, hang or exhaust
//! memory (issue 24).

use std::path::Path;
use std::process::{Command, Output};

use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{LoadedScenario, ScenarioError};
use coord_sim::sweep::load_all;

use crate::repo_root;

/// A valid scenario: a coordinator that launches one worker and waits for it.
const VALID: &str = r#"name = "x"

[settings]
turns_max = 200

[coordinator]
prompt = "go"

[[coordinator.turns]]
tool_calls = [{ name = "Agent", input = { description = "w", prompt = "work" } }]

[[coordinator.turns]]
text = "all done"
when = { kind = "notifications_at_least", count = 1 }

[[workers]]
prompt = "work"
[[workers.turns]]
text = "done"
latency = { kind = "uniform", min_ms = 10, max_ms = 20 }
"#;

fn error_of(text: &str) -> String {
    match LoadedScenario::parse(Path::new("bad.toml"), text) {
        Err(error @ ScenarioError::Invalid { .. }) => error.to_string(),
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

/// Asserts that `text` fails to load with an error at `at` (its `line:` or
/// `line:col`) that says `message`, and that running it exits 2.
fn assert_refused_at(text: &str, at: &str, message: &str) {
    let error = error_of(text);
    assert!(
        error.starts_with(&format!("bad.toml:{at}")),
        "{message}: {error}"
    );
    assert!(error.contains(message), "{message}: {error}");
    let (output, _dir) = run_text(text, &["--seed", "1"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

/// The `line:col` of the first occurrence of `needle` in `text`, 1-based.
fn position_of(text: &str, needle: &str) -> String {
    let offset = text.find(needle).expect("the needle is in the text");
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("{line}:{column}")
}

fn coordsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

/// Writes `text` to a scenario file in a fresh folder and runs `coordsim` on it.
fn run_text(text: &str, args: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap().to_owned();
    let mut all = vec!["run", path.as_str()];
    all.extend_from_slice(args);
    (coordsim(&all), dir)
}

#[test]
fn the_valid_base_loads_and_passes() {
    // Goal: every refusal below comes from its one changed value, not the base.
    let loaded = LoadedScenario::parse(Path::new("ok.toml"), VALID).unwrap();
    let run = run_seed(&loaded, 1, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
}

#[test]
fn a_zero_spawn_deadline_loads_and_a_worker_scripted_under_it_never_runs() {
    // Goal: `spawn_deadline_ms = 0` is the one way to end a task before its runner
    // first runs (scenarios/tasks/zero-deadline.toml), so it loads; a worker with a
    // script under it is a vacuous run, which fails with its own name. Method: the
    // valid scenario under a zero deadline, loaded and run.
    let text = VALID.replace("turns_max = 200", "spawn_deadline_ms = 0");
    LoadedScenario::parse(Path::new("zero.toml"), &text).expect("a zero deadline loads");
    let (output, _dir) = run_text(&text, &["--seed", "1"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("not-vacuous: \"work\" played 0 of its 1 scripted turns"),
        "{stdout}"
    );
}

#[test]
fn a_zero_spawn_deadline_does_not_panic_the_runtime() {
    // Goal: a deadline that expires at the spawn's own instant ends the task before
    // it starts, in every profile, instead of panicking in the task state machine
    // (runtime/src/task/status.rs). Method: set the value past the loader.
    let mut loaded =
        LoadedScenario::load(&repo_root().join("scenarios/core/notify-once.toml")).unwrap();
    for profile in ["hardened", "nexo", "claude-code"] {
        loaded.scenario.profile = profile.parse().unwrap();
        loaded.scenario.settings.spawn_deadline_ms = Some(0);
        let run = run_seed(&loaded, 1, &RunOptions::default());
        assert!(run.is_ok(), "{profile}: {run:?}");
    }
}

#[test]
fn a_huge_oversize_message_is_refused_before_any_allocation() {
    // Goal: `size_bytes = u64::MAX` (once a "capacity overflow" panic) and 4e9
    // (once 15.6 GB) are load errors at the value, and the CLI exits 2.
    for value in ["18446744073709551615", "4000000000"] {
        let text = format!(
            "{VALID}\n[[faults]]\nkind = \"oversize-message\"\nworker = \"work\"\nsize_bytes = {value}\n"
        );
        let error = error_of(&text);
        let at = position_of(&text, value);
        assert!(error.starts_with(&format!("bad.toml:{at}:")), "{error}");
        assert!(error.contains("`size_bytes`"), "{error}");
        assert!(error.contains("expected 1 to 16777216"), "{error}");
        let (output, _dir) = run_text(&text, &["--seed", "1"]);
        assert_eq!(output.status.code(), Some(2), "{output:?}");
    }
}

#[test]
fn too_many_mailbox_producers_are_refused() {
    // Goal: `producers = 4294967295` (once killed by the OOM killer) is refused.
    let text = format!(
        "{VALID}\n[[faults]]\nkind = \"mailbox-producers\"\ninbox = \"team-lead\"\nproducers = 4294967295\n"
    );
    let error = error_of(&text);
    assert!(error.contains("`producers` = 4294967295 is out of range: expected 1 to 10000"));
    let (output, _dir) = run_text(&text, &["--seed", "1"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("s.toml:"), "{stderr}");
}

#[test]
fn the_most_producers_allowed_run_in_bounded_time() {
    // Goal: the top of the producers' range is a run of seconds, not minutes.
    let text = std::fs::read_to_string(
        repo_root().join("scenarios/faults/hardened-slow-lock-holder.toml"),
    )
    .unwrap()
    .replace("producers = 12", "producers = 10000");
    let loaded = LoadedScenario::parse(Path::new("p.toml"), &text).unwrap();
    let started = std::time::Instant::now();
    run_seed(&loaded, 1, &RunOptions::default()).unwrap();
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

#[test]
fn a_uniform_latency_with_min_above_max_is_refused_at_its_turn() {
    // Goal: the error points at the wrong latency, not the first `min_ms` of the file.
    let text = VALID.replace("min_ms = 10, max_ms = 20", "min_ms = 30, max_ms = 20");
    let error = error_of(&text);
    let at = position_of(&text, "30, max_ms");
    assert!(error.starts_with(&format!("bad.toml:{at}:")), "{error}");
    assert!(error.contains("min_ms <= max_ms"), "{error}");
}

#[test]
fn a_stagger_at_the_cache_ttl_is_refused() {
    // Goal: forks staggered by the 5-minute TTL or more make other calls than
    // simultaneous forks; such a stagger is refused rather than compared.
    let text = format!("{VALID}\n[economics]\nstagger_ms = 300000\n");
    let error = error_of(&text);
    assert!(error.contains("expected 0 to 299999"), "{error}");
    assert!(error.contains("5-minute cache TTL"), "{error}");
    let text = format!("{VALID}\n[economics]\nstagger_ms = 299999\n");
    LoadedScenario::parse(Path::new("ok.toml"), &text).unwrap();
}

#[test]
fn vacuous_run_limits_are_refused() {
    // Goal: a run that cannot take a step (`run_limit_ms = 0`, `turns_max = 0`) is a
    // load error, not a run reported as "no violation".
    for (key, value) in [("run_limit_ms", "0"), ("turns_max", "0")] {
        let text = VALID.replace("turns_max = 200", &format!("{key} = {value}"));
        let error = error_of(&text);
        assert!(
            error.contains(&format!("`{key}` = 0 is out of range: expected 1 to")),
            "{error}"
        );
        let (output, _dir) = run_text(&text, &["--seed", "1"]);
        assert_eq!(output.status.code(), Some(2), "{key}: {output:?}");
    }
}

#[test]
fn a_when_count_above_what_the_scripts_can_spawn_is_refused() {
    // Goal: a turn waiting for more notifications than the scenario can bring never
    // fires; it is refused at its `count`.
    let text = VALID.replace("count = 1", "count = 2");
    let error = error_of(&text);
    let at = position_of(&text, "2 }");
    assert!(error.starts_with(&format!("bad.toml:{at}:")), "{error}");
    assert!(error.contains("can never hold"), "{error}");
    assert!(error.contains("at most 1 notification"), "{error}");
}

#[test]
fn usage_sums_that_would_overflow_are_refused() {
    // Goal: token counts near u64::MAX (an imported transcript's) are load errors,
    // not an overflow panic in the cache model at run time.
    let recorded = VALID.replace(
        "prompt = \"go\"\n",
        "prompt = \"go\"\nrecorded_prompt = { first_request_tokens = 18446744073709551615 }\n",
    );
    let error = error_of(&recorded);
    assert!(error.contains("`first_request_tokens`"), "{error}");
    let usage = VALID.replace(
        "text = \"all done\"\n",
        "text = \"all done\"\nusage = { input_tokens = 18446744073709551615, output_tokens = 1 }\n",
    );
    let error = error_of(&usage);
    assert!(error.contains("`input_tokens`"), "{error}");
    let cached = VALID.replace(
        "prompt = \"go\"\n",
        "prompt = \"go\"\nrecorded_prompt = { first_request_tokens = 10, cached_before_tokens = 11 }\n",
    );
    let error = error_of(&cached);
    assert!(
        error.contains("`cached_before_tokens` = 11 is out of range: expected 0 to 10"),
        "{error}"
    );
}

#[test]
fn every_number_of_the_format_has_a_range() {
    // Goal: each numeric field refuses a value past its documented range at that
    // value's position. Method: one edit of the valid base per field.
    let faults = |body: &str| format!("{VALID}\n[[faults]]\n{body}\n");
    let cases: Vec<(String, &str)> = vec![
        (VALID.replace("turns_max = 200", "idle_poll_ms = 1"), "idle_poll_ms"),
        (
            VALID.replace("turns_max = 200", "liveness_bound_ms = 999999999999"),
            "liveness_bound_ms",
        ),
        (
            VALID.replace("turns_max = 200", "run_limit_ms = 2592000001"),
            "run_limit_ms",
        ),
        (
            VALID.replace("turns_max = 200", "turns_max = 1000001"),
            "turns_max",
        ),
        (
            VALID.replace("turns_max = 200", "turmoil_tick_ms = 60001"),
            "turmoil_tick_ms",
        ),
        (
            VALID.replace("turns_max = 200", "output_bytes_max = 18446744073709551615"),
            "output_bytes_max",
        ),
        (
            VALID.replace("turns_max = 200", "eviction_grace_ms = 2592000001"),
            "eviction_grace_ms",
        ),
        (
            format!("{VALID}\n[swarm]\nfaults_max = 1001\n"),
            "faults_max",
        ),
        (
            format!("{VALID}\n[expect]\ntraffic_min = 1000000001\n"),
            "traffic_min",
        ),
        (
            VALID.replace("min_ms = 10, max_ms = 20", "min_ms = 10, max_ms = 2592000001"),
            "max_ms",
        ),
        (
            VALID.replace(
                "latency = { kind = \"uniform\", min_ms = 10, max_ms = 20 }",
                "latency = { kind = \"fixed\", ms = 2592000001 }",
            ),
            "ms",
        ),
        (
            VALID.replace("text = \"done\"", "text = \"done\"\nsend_delay_ms = 2592000001"),
            "send_delay_ms",
        ),
        (
            faults("kind = \"coordinator-crash\"\nat_ms = 2592000001"),
            "at_ms",
        ),
        (
            faults("kind = \"delayed-notification\"\nworker = \"work\"\ndelay_ms = 2592000001"),
            "delay_ms",
        ),
        (
            faults("kind = \"disk\"\nnth = 1000000001\neffect = \"eio\""),
            "nth",
        ),
        (
            faults("kind = \"model-api\"\nagent = \"coordinator\"\ncall = 1000001\nerror = \"timeout\""),
            "call",
        ),
        (faults("kind = \"symlink-at-output\"\nspawn = 1000001"), "spawn"),
        (
            faults("kind = \"symlinked-worktree-dir\"\nworktree = 1000001\ndir = \"vendor\""),
            "worktree",
        ),
        (
            faults("kind = \"remote-partition\"\nlaunch = 1\nduration_ms = 0"),
            "duration_ms",
        ),
        (
            faults("kind = \"cache-breaking-prompt-change\"\ncall = 0"),
            "call",
        ),
        (
            faults("kind = \"slow-lock-holder\"\ninbox = \"team-lead\"\nhold_ms = 2592000001"),
            "hold_ms",
        ),
        (
            faults("kind = \"binding-switch\"\nafter_call = 1000001\nbinding = \"slack:a\""),
            "after_call",
        ),
        (faults("kind = \"task-id-collision\"\ndraw = 1"), "draw"),
        (
            faults("kind = \"task-id-collision\"\ndraw = 3\nrepeats = 3"),
            "repeats",
        ),
        (
            faults("kind = \"worker-crash\"\nworker = \"work\"\nat = { point = \"model-call\", call = 1000001 }"),
            "call",
        ),
        (
            format!("{VALID}\n[[lead]]\nafter_call = 0\nteam = \"t\"\nmember = \"m\"\naction = \"shutdown\"\n"),
            "after_call",
        ),
    ];
    for (text, key) in cases {
        let error = error_of(&text);
        assert!(
            error.contains(&format!("`{key}` = ")) && error.contains("is out of range"),
            "{key}: {error}"
        );
        // The position is that of the value written, on the line that holds the key.
        let line: usize = error.split(':').nth(1).unwrap().parse().unwrap();
        let line_text = text.lines().nth(line - 1).unwrap();
        assert!(
            line_text.contains(key),
            "{key}: {error} points at {line_text:?}"
        );
    }
}

#[test]
fn two_scenarios_of_one_folder_with_one_name_are_refused() {
    // Goal: names are unique within a folder (docs/scenario-format.md); a sweep of a
    // folder that breaks this is a load error naming both files, exit 2.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.toml"), VALID).unwrap();
    std::fs::write(dir.path().join("b.toml"), VALID).unwrap();
    let error = load_all(&[dir.path().to_owned()]).unwrap_err().to_string();
    assert!(
        error.contains("a.toml") && error.contains("b.toml"),
        "{error}"
    );
    assert!(error.contains("\"x\""), "{error}");
    let output = coordsim(&["run", dir.path().to_str().unwrap(), "--seed", "1"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    // The same name in two folders is fine, and so is one file named twice.
    let other = dir.path().join("sub");
    std::fs::create_dir(&other).unwrap();
    std::fs::rename(dir.path().join("b.toml"), other.join("b.toml")).unwrap();
    let a = dir.path().join("a.toml");
    load_all(&[dir.path().to_owned()]).unwrap();
    let scenarios = vec![
        LoadedScenario::load(&a).unwrap(),
        LoadedScenario::load(&dir.path().join(".").join("a.toml")).unwrap(),
    ];
    coord_sim::scenario::check_unique_names(&scenarios).unwrap();
}

#[test]
fn the_last_u64_seed_is_refused_rather_than_running_no_seed() {
    // Goal: `--seed 18446744073709551615` once ran 0 seeds and exited 0; it is now
    // bad input (exit 2) saying why, and an empty `--seeds` range is too.
    let scenario = "scenarios/core/notify-once.toml";
    let output = coordsim(&["run", scenario, "--seed", "18446744073709551615"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("past the last seed"), "{stderr}");
    for range in ["5..5", "6..5"] {
        let output = coordsim(&["run", scenario, "--seeds", range]);
        assert_eq!(output.status.code(), Some(2), "{range}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("holds no seed"), "{stderr}");
    }
    // The seed just below runs, exactly once.
    let output = coordsim(&["run", scenario, "--seed", "18446744073709551614", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["seeds_run"], 1, "{report}");
}

#[test]
fn shrink_refuses_an_unknown_invariant_and_a_zero_run_budget() {
    // Goal: `--invariant no-such` is a usage error listing the names, not "no
    // failure to shrink"; `--runs-max 0` is refused, not "does not reproduce".
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.toml");
    let out = out.to_str().unwrap();
    let scenario = "scenarios/core/notify-once.toml";
    let unknown = coordsim(&[
        "shrink",
        scenario,
        "--seed",
        "1",
        "-o",
        out,
        "--invariant",
        "no-such",
    ]);
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("unknown invariant \"no-such\""), "{stderr}");
    assert!(
        stderr.contains("notify-once") && stderr.contains("liveness"),
        "{stderr}"
    );
    assert!(!stderr.contains("no failure to shrink"), "{stderr}");
    let zero = coordsim(&[
        "shrink",
        scenario,
        "--seed",
        "1",
        "-o",
        out,
        "--runs-max",
        "0",
    ]);
    assert_eq!(zero.status.code(), Some(2), "{zero:?}");
    let stderr = String::from_utf8_lossy(&zero.stderr);
    assert!(stderr.contains("--runs-max"), "{stderr}");
    assert!(!stderr.contains("reproduce"), "{stderr}");
    assert!(!Path::new(out).exists());
    // The library refuses both too, for callers other than the command line.
    let loaded = LoadedScenario::load(&repo_root().join(scenario)).unwrap();
    let options = coord_sim::shrink::ShrinkOptions {
        runs_max: 0,
        ..Default::default()
    };
    let error = coord_sim::shrink::shrink(&loaded, 1, None, &options).unwrap_err();
    assert!(
        matches!(error, coord_sim::shrink::ShrinkError::NoRunBudget),
        "{error}"
    );
}

#[test]
fn a_missing_or_corrupt_cassette_is_bad_input() {
    // Goal: once exit 1 (a violation on every seed), a cassette that cannot be read
    // or parsed is now a load error naming it: exit 2, before any seed runs.
    let source =
        std::fs::read_to_string(repo_root().join("scenarios/replay/notify-once-cassette.toml"))
            .unwrap();
    // The cassette named beside the scenario, in a fresh folder: first absent.
    let cassette_line = source
        .lines()
        .find(|line| line.starts_with("cassette = "))
        .expect("the scenario names its cassette");
    let source = source.replace(cassette_line, "cassette = \"c.json\"");
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, &source).unwrap();
    let scenario = scenario.to_str().unwrap();
    let missing = coordsim(&["run", scenario, "--seeds", "0..3"]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("cannot read the cassette"), "{stderr}");

    let cassette_path = dir.path().join("c.json");
    std::fs::write(&cassette_path, "{\n  \"format\": 7,\n").unwrap();
    let corrupt = coordsim(&["run", scenario, "--seeds", "0..3"]);
    assert_eq!(corrupt.status.code(), Some(2), "{corrupt:?}");
    let stderr = String::from_utf8_lossy(&corrupt.stderr);
    assert!(stderr.contains("c.json:2:"), "{stderr}");
    let error = LoadedScenario::load(Path::new(scenario)).unwrap_err();
    assert!(matches!(error, ScenarioError::Cassette(_)), "{error}");
}

/// A coordinator that reads a file on each of `turns` turns, then finishes.
fn many_turns(turns: usize) -> LoadedScenario {
    let mut text = format!(
        "name = \"many-turns\"\n[settings]\nturns_max = {}\n[coordinator]\nprompt = \"go\"\n",
        turns + 10
    );
    for _ in 0..turns {
        text.push_str(
            "[[coordinator.turns]]\ntool_calls = [{ name = \"Read\", input = { file_path = \"/work/README.md\" } }]\nlatency = { kind = \"fixed\", ms = 1 }\n",
        );
    }
    text.push_str("[[coordinator.turns]]\ntext = \"done\"\n");
    LoadedScenario::parse(Path::new("many.toml"), &text).unwrap()
}

#[test]
fn a_script_costs_time_linear_in_its_turns() {
    // Goal: a script of n turns once cost n² (each request was read whole by the
    // model's view and recounted by the cost meter): 16k turns took 1.8 s, 100k
    // more than 60 s. Method: 8 times the turns must cost well under 64 times the
    // time; linear is 8, and the bound leaves room for a loaded machine.
    let time = |turns: usize| {
        let scenario = many_turns(turns);
        let started = std::time::Instant::now();
        let run = run_seed(&scenario, 1, &RunOptions::default()).unwrap();
        assert!(run.failures.is_empty(), "{:?}", run.failures);
        started.elapsed()
    };
    time(200);
    let small = time(1_000);
    let large = time(8_000);
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    assert!(
        ratio < 24.0,
        "1,000 turns: {small:?}; 8,000 turns: {large:?} ({ratio:.1}x)"
    );
}

#[test]
fn every_generated_program_is_within_the_ranges() {
    // Goal: `coordsim explore` draws programs the loader's ranges accept, in every
    // profile, so the new checks refuse no program it writes.
    use coord_sim::explore::{program, ExploreOptions};
    let dir = tempfile::tempdir().unwrap();
    for profile in ["hardened", "claude-code", "nexo"] {
        let mut options = ExploreOptions::default();
        options.profile = profile.parse().unwrap();
        for seed in 0..300 {
            if let Err(error) = program(seed, &options, dir.path()) {
                panic!("{profile} seed {seed}: {error}");
            }
        }
    }
}

#[test]
fn a_run_long_enough_to_poll_without_end_is_refused() {
    // Goal: every duration in range can still make a run that polls for a week of
    // virtual time (teammates idling at one poll a second took 65 s and 900 MB);
    // the polls a run allows are bounded, and the error says what would do.
    let text = VALID.replace(
        "turns_max = 200",
        "run_limit_ms = 604800000\nliveness_bound_ms = 604800000",
    );
    let error = error_of(&text);
    assert!(
        error.contains("`idle_poll_ms` = 1000 would let an idle agent poll 1209600 times"),
        "{error}"
    );
    assert!(error.contains("idle_poll_ms of at least 6048"), "{error}");
    let slower = text.replace("run_limit_ms", "idle_poll_ms = 6048\nrun_limit_ms");
    LoadedScenario::parse(Path::new("ok.toml"), &slower).unwrap();
    let (output, _dir) = run_text(&text, &["--seed", "1"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

#[test]
fn a_lead_act_naming_a_tool_no_teammate_asks_about_is_refused_at_the_value() {
    // Goal: a permission act's `tool` is one a request can name (Bash, Edit,
    // Write), and a shutdown names none; a typo would otherwise wait for a request
    // that never comes.
    for (act, needle, expected) in [
        (
            "action = \"approve-permission\"\ntool = \"write\"\n",
            "\"write\"",
            "no tool a teammate asks permission for",
        ),
        (
            "action = \"shutdown\"\ntool = \"Write\"\n",
            "\"Write\"",
            "only a permission answer has one",
        ),
        (
            "action = \"shutdown\"\nmessage = \"stop\"\n",
            "\"stop\"",
            "only a `redirect` has one",
        ),
    ] {
        let text = format!("{VALID}\n[[lead]]\nteam = \"crew\"\nmember = \"w\"\n{act}");
        let error = error_of(&text);
        assert!(error.contains(expected), "{error}");
        assert!(
            error.contains(&format!("bad.toml:{}", position_of(&text, needle))),
            "{error}"
        );
    }
    let fine = format!(
        "{VALID}\n[[lead]]\nteam = \"crew\"\nmember = \"w\"\naction = \"deny-permission\"\ntool = \"Bash\"\n"
    );
    LoadedScenario::parse(Path::new("ok.toml"), &fine).unwrap();
}

#[test]
fn a_workspace_file_outside_the_workspace_or_too_large_is_refused_at_its_value() {
    // Goal: a `[[files]]` entry that climbs out of the workspace, takes a built-in
    // file or an earlier entry's path, asks for more than 64 MiB (allocated for
    // every run), or has no content to fill its size is a load error at the value,
    // and the CLI exits 2.
    let file = |fields: &str| format!("{VALID}\n[[files]]\n{fields}\n");
    let cases = [
        (
            file("path = \"../etc/passwd\"\ncontent = \"x\""),
            "\"../etc/passwd\"",
            "`..` segment",
        ),
        (
            file("path = \"/etc/passwd\"\ncontent = \"x\""),
            "\"/etc/passwd\"",
            "is absolute",
        ),
        (
            file("path = \"README.md\"\ncontent = \"x\""),
            "\"README.md\"",
            "already holds",
        ),
        (
            file("path = \"big.log\"\ncontent = \"x\"\nsize_bytes = 67108865"),
            "67108865",
            "expected 0 to 67108864",
        ),
        (
            file("path = \"big.log\"\ncontent = \"\"\nsize_bytes = 10"),
            "\"\"",
            "nothing can fill",
        ),
        (
            format!(
                "{}\n[[files]]\npath = \"a.log\"\ncontent = \"y\"\n",
                file("path = \"a.log\"\ncontent = \"x\"")
            ),
            "\"a.log\"\ncontent = \"y\"",
            "an earlier entry already holds",
        ),
    ];
    for (text, value, message) in cases {
        // The value's line: the last occurrence, which for the repeated path is the
        // second entry's.
        let offset = text.rfind(value).expect("the value is in the text");
        let line = text[..offset].matches('\n').count() + 1;
        assert_refused_at(&text, &format!("{line}:"), message);
    }
    // Within bounds, it loads.
    let text = file("path = \"logs/app.log\"\ncontent = \"ok\\n\"\nsize_bytes = 5");
    LoadedScenario::parse(Path::new("ok.toml"), &text).unwrap();
}

#[test]
fn a_shell_output_too_large_or_with_nothing_to_fill_it_is_refused_at_its_value() {
    // Goal: a scripted shell answer's `stdout_size_bytes` over 64 MiB, or with an
    // empty `stdout`, is a load error at the value, and the CLI exits 2; one within
    // bounds loads and its command prints that many bytes.
    let shell = |answer: &str| {
        VALID.replace(
            "text = \"done\"\n",
            &format!(
                "tool_calls = [{{ name = \"Bash\", input = {{ command = \"pg_dump\" }}, shell = {{ {answer} }} }}]\n"
            ),
        )
    };
    let cases = [
        (
            shell("stdout = \"row\\n\", stdout_size_bytes = 67108865"),
            "67108865",
            "expected 0 to 67108864",
        ),
        (
            shell("stdout = \"\", stdout_size_bytes = 10"),
            "\"\"",
            "nothing can fill `stdout_size_bytes`",
        ),
    ];
    for (text, value, message) in cases {
        assert_refused_at(&text, &position_of(&text, value), message);
    }
    let loaded = LoadedScenario::parse(
        Path::new("ok.toml"),
        &shell("stdout = \"row\\n\", stdout_size_bytes = 10"),
    )
    .unwrap();
    let answer = loaded.scenario.workers[0].turns[0].tool_calls[0]
        .shell
        .as_ref()
        .unwrap();
    assert_eq!(answer.output().stdout, "row\nrow\nro");
}
