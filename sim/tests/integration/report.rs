//! Reports: `run --report DIR`, `coordsim report`, and `replay --trace` as JSON
//! objects (issue 25).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::repo_root;

/// The failing-by-design scenario of the README's tour.
const DEMO: &str = "scenarios/demo/duplicate-notification.toml";

fn coordsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The keys of a summary that depend on the wall clock.
const TIMING_KEYS: [&str; 3] = [
    "wall_seconds",
    "seeds_per_second",
    "sim_seconds_per_wall_second",
];

fn without_timings(mut summary: Value) -> Value {
    for key in TIMING_KEYS {
        summary.as_object_mut().unwrap().remove(key);
    }
    summary
}

#[test]
fn a_report_of_a_failing_sweep_holds_junit_summary_index_and_timelines() {
    // Goal: `run --report DIR` writes the four parts, and a JUnit consumer reads
    // junit.xml back as one suite per scenario, a testcase per failing seed with its
    // invariant, detail and repro, and one testcase for the passing seeds. Method:
    // the demo scenario (fails every seed) beside a passing one, over seeds 0..4;
    // junit.xml parsed by the junit-parser crate.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let output = coordsim(&[
        "run",
        DEMO,
        "scenarios/core/notify-once.toml",
        "--seeds",
        "0..4",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("report written in"));

    let junit = junit_parser::from_reader(std::io::BufReader::new(
        std::fs::File::open(report.join("junit.xml")).unwrap(),
    ))
    .expect("junit.xml parses");
    assert_eq!(junit.suites.len(), 2);
    assert_eq!((junit.tests, junit.failures, junit.errors), (5, 4, 0));
    let demo = junit
        .suites
        .iter()
        .find(|suite| suite.name == DEMO)
        .unwrap();
    assert_eq!((demo.tests, demo.failures), (4, 4));
    for (seed, case) in demo.cases.iter().enumerate() {
        assert_eq!(case.original_name, format!("seed {seed}"));
        let junit_parser::TestStatus::Failure(failure) = &case.status else {
            panic!("seed {seed} is not a failure: {:?}", case.status);
        };
        assert_eq!(failure.failure_type, "notify-once");
        assert!(failure.message.contains("2 notifications"), "{failure:?}");
        assert!(failure.text.contains("repro: "), "{failure:?}");
        assert!(failure.text.contains(&format!("{DEMO} --seed {seed}")));
        assert!(failure.text.contains("shrink: "));
    }
    let passing = junit
        .suites
        .iter()
        .find(|suite| suite.name == "scenarios/core/notify-once.toml")
        .unwrap();
    assert_eq!((passing.tests, passing.failures), (1, 0));
    assert_eq!(passing.cases[0].original_name, "passing seeds of 0..=3: 4");
    assert!(passing.cases[0].status.is_success());

    let summary: Value = serde_json::from_str(&read(&report.join("summary.json"))).unwrap();
    assert_eq!(summary["seeds_failed"], 4);
    assert_eq!(
        summary["scenario_files"][1], DEMO,
        "scenarios run in sorted order"
    );
    assert_eq!(
        summary["counts"]["faults_fired_by_kind"]["duplicate-notify"], 8,
        "4 seeds of each scenario"
    );
    assert_eq!(
        summary["counts"]["faults_fired_by_kind"]["model-api"]
            .as_u64()
            .unwrap(),
        8
    );

    let index = read(&report.join("index.html"));
    assert_eq!(index.matches("<tr class=\"failure\">").count(), 4);
    for seed in 0..4 {
        let timeline = format!("runs/scenarios-demo-duplicate-notification-toml-{seed}.html");
        assert!(
            index.contains(&format!("href=\"{timeline}\"")),
            "{timeline}"
        );
        let page = read(&report.join(&timeline));
        assert!(page.contains("class=\"violation\""), "{timeline}");
        assert!(
            page.contains("data-kind=\"duplicate-notify\""),
            "{timeline}"
        );
        assert!(page.contains("class=\"spawn-arrow\""), "{timeline}");
    }
    assert!(index.contains("id=\"coverage\""));
    assert!(
        !index.contains("http://") && !index.contains("https://"),
        "no network"
    );
}

#[test]
fn a_report_refuses_to_overwrite_an_earlier_one_without_force() {
    // Goal: a report goes through the -o writer: its files are never replaced by
    // surprise. Method: the same report twice, then with --force.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r");
    let args = [
        "run",
        "scenarios/core/notify-once.toml",
        "--report",
        report.to_str().unwrap(),
    ];
    assert_eq!(coordsim(&args).status.code(), Some(0));
    let again = coordsim(&args);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("pass --force"),
        "{}",
        text(&again.stderr)
    );
    let forced = coordsim(&[&args[..], &["--force"]].concat());
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
}

#[test]
fn the_json_summary_counts_what_the_runs_survived() {
    // Goal: `run --json` says what a passing sweep survived: faults fired by kind,
    // tasks killed, messages lost loudly and cache breaks. Method: notify-once's
    // three faults fire on every seed and kill one task.
    let output = coordsim(&[
        "run",
        "scenarios/core/notify-once.toml",
        "--seeds",
        "0..3",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    let counts = &summary["counts"];
    for kind in ["duplicate-notify", "model-api", "worker-crash"] {
        assert_eq!(counts["faults_fired_by_kind"][kind], 3, "{kind}: {counts}");
    }
    assert!(counts["tasks_killed"].as_u64().unwrap() >= 3, "{counts}");
    assert!(counts.get("messages_lost_loudly").is_some());
    assert!(counts.get("cache_breaks").is_some());
}

#[test]
fn the_report_summary_is_the_json_summary() {
    // Goal: summary.json is the `run --json` object. Method: both for one sweep,
    // compared apart from the wall-clock figures.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r");
    let args = ["run", "scenarios/core", "--seeds", "0..3"];
    let json = coordsim(&[&args[..], &["--json", "--report", report.to_str().unwrap()]].concat());
    let printed: Value = serde_json::from_slice(&json.stdout).unwrap();
    let written: Value = serde_json::from_str(&read(&report.join("summary.json"))).unwrap();
    assert_eq!(without_timings(printed), without_timings(written));
}

#[test]
fn replay_trace_writes_each_event_as_a_json_object() {
    // Goal: issue 25's `replay --trace`, which wrote each event as a JSON string
    // inside the JSON line. Method: every line's `event` is an object with its kind.
    let output = coordsim(&[
        "replay",
        "scenarios/core/notify-once.toml",
        "--seed",
        "0",
        "--trace",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    assert!(stdout.lines().count() > 50);
    for line in stdout.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        assert!(entry["event"]["event"].is_string(), "{line}");
        assert!(
            entry["time_ms"].is_u64() && entry["actor"].is_string(),
            "{line}"
        );
    }
}

#[test]
fn report_renders_a_timeline_from_a_trace_file_or_a_scenario() {
    // Goal: `coordsim report` renders one run's timeline from `replay --trace`
    // output and from a scenario and seed, with the same lanes. Method: both for
    // the demo's seed 1; the scenario form also lists the violation and exits 1.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let replay = coordsim(&["replay", DEMO, "--seed", "1", "--trace"]);
    std::fs::write(&trace, &replay.stdout).unwrap();
    let from_trace = dir.path().join("from-trace.html");
    let output = coordsim(&[
        "report",
        trace.to_str().unwrap(),
        "-o",
        from_trace.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let from_scenario = coordsim(&["report", DEMO, "--seed", "1"]);
    assert_eq!(
        from_scenario.status.code(),
        Some(1),
        "{}",
        text(&from_scenario.stderr)
    );
    let lanes = |page: &str| -> Vec<String> {
        page.split("data-lane=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
            .collect()
    };
    let page = read(&from_trace);
    let scenario_page = text(&from_scenario.stdout);
    assert!(
        lanes(&page).contains(&"coordinator".to_owned()),
        "{:?}",
        lanes(&page)
    );
    assert_eq!(lanes(&page), lanes(&scenario_page));
    assert!(scenario_page.contains("class=\"violation\""));
}

#[test]
fn report_names_the_line_and_column_of_a_bad_trace_line() {
    // Goal: a bad trace file is an error naming file:line:column, exit 2, no panic.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(
        &trace,
        "{\"time_ms\":0,\"actor\":\"sim\",\"event\":{\"event\":\"healed\"}}\n{\"time_ms\":-1}\n",
    )
    .unwrap();
    let output = coordsim(&["report", trace.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("bad.jsonl:2:"), "{stderr}");
}

#[test]
fn a_timeline_of_a_thousand_events_keeps_a_readable_scale() {
    // Goal: a long run stays legible: at 1,000 events the drawing widens (with
    // sideways scrolling) rather than crowding the marks. Method: the scale gives
    // at least 8 px per event of a 1,000-event run, whatever its virtual length.
    for duration_ms in [1_000, 60_000, 900_000] {
        let width = coord_sim::report::px_per_ms(duration_ms, 1_000) * duration_ms as f64;
        assert!(width >= 8_000.0, "{duration_ms} ms: {width} px");
    }
}

/// `value` without the wall-clock figures, and its cost rounded to a micro-dollar:
/// summed in another order across shards, a float may differ in its last bits.
fn comparable(summary: Value) -> Value {
    let mut summary = without_timings(summary);
    let cost = summary["cost_usd"].as_f64().unwrap();
    summary["cost_usd"] = serde_json::json!((cost * 1e6).round() as u64);
    summary
}

#[test]
fn merged_shards_equal_the_unsharded_sweep() {
    // Goal: issue 25's acceptance: `coordsim merge` over shards 1/3, 2/3 and 3/3
    // equals the unsharded summary apart from timings, and its report lists every
    // failure with the timelines the shards rendered. Method: three shard
    // processes run side by side, each with --report, merged by folder.
    let dir = tempfile::tempdir().unwrap();
    let args = ["run", "scenarios/core", DEMO, "--seeds", "0..7"];
    let whole = coordsim(&[&args[..], &["--json"]].concat());
    let whole: Value = serde_json::from_slice(&whole.stdout).unwrap();
    let shards: Vec<_> = ["1/3", "2/3", "3/3"]
        .iter()
        .enumerate()
        .map(|(index, shard)| {
            let report = dir.path().join(format!("shard-{index}"));
            let child = Command::new(env!("CARGO_BIN_EXE_coordsim"))
                .args(args)
                .args(["--shard", shard, "--report"])
                .arg(&report)
                .current_dir(repo_root())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, report)
        })
        .collect();
    let mut folders = Vec::new();
    for (mut child, report) in shards {
        assert_eq!(
            child.wait().unwrap().code(),
            Some(1),
            "each shard has demo failures"
        );
        folders.push(report.to_str().unwrap().to_owned());
    }
    let merged_dir = dir.path().join("merged");
    let merge_args: Vec<&str> = ["merge"]
        .into_iter()
        .chain(folders.iter().map(String::as_str))
        .chain(["--report", merged_dir.to_str().unwrap()])
        .collect();
    let merged = coordsim(&merge_args);
    assert_eq!(merged.status.code(), Some(1), "{}", text(&merged.stderr));
    let merged: Value = serde_json::from_slice(&merged.stdout).unwrap();
    assert_eq!(comparable(merged.clone()), comparable(whole));
    let written: Value = serde_json::from_str(&read(&merged_dir.join("summary.json"))).unwrap();
    assert_eq!(written, merged);
    let index = read(&merged_dir.join("index.html"));
    assert_eq!(index.matches("<tr class=\"failure\">").count(), 7);
    assert_eq!(
        index.matches("class=\"timeline\"").count(),
        7,
        "every shard's timelines"
    );
    for seed in 0..7 {
        let timeline = coord_sim::report::timeline_path(DEMO, seed);
        assert!(merged_dir.join(timeline).is_file());
    }
}

#[test]
fn merge_refuses_overlapping_missing_or_foreign_shards() {
    // Goal: merge checks that shards are disjoint, complete and of one sweep, and
    // says which file is wrong, exit 2. Method: shard summaries of seeds 0..4
    // merged twice over, with one missing, and beside another seed range's.
    let dir = tempfile::tempdir().unwrap();
    let summary = |seeds: &str, shard: &str| {
        let output = coordsim(&[
            "run",
            "scenarios/core",
            "--seeds",
            seeds,
            "--shard",
            shard,
            "--json",
        ]);
        let path = dir
            .path()
            .join(format!("{}-{}.json", seeds, shard.replace('/', "of")));
        std::fs::write(&path, &output.stdout).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (one, two) = (summary("0..4", "1/2"), summary("0..4", "2/2"));
    let other = summary("0..6", "2/2");
    for (inputs, message) in [
        (
            vec![one.clone(), one.clone(), two.clone()],
            "shards must be disjoint",
        ),
        (vec![one.clone()], "incomplete: no summary of shard 2/2"),
        (vec![one.clone(), other], "its seed ranges differ"),
    ] {
        let args: Vec<&str> = ["merge"]
            .into_iter()
            .chain(inputs.iter().map(String::as_str))
            .collect();
        let output = coordsim(&args);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(
            text(&output.stderr).contains(message),
            "{}",
            text(&output.stderr)
        );
    }
    let merged = coordsim(&["merge", &one, &two]);
    assert_eq!(merged.status.code(), Some(0), "{}", text(&merged.stderr));
}

#[test]
fn check_determinism_prints_json_and_writes_a_report() {
    // Goal: `check-determinism --json` prints its report as JSON, and `--report`
    // writes a report whose JUnit file counts the seeds checked. Method: two seeds
    // of scenarios/core, both agreeing.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r");
    let output = coordsim(&[
        "check-determinism",
        "scenarios/core",
        "--seeds",
        "0..2",
        "--json",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (json["seeds_run"].as_u64(), json["seeds_agreed"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(json["divergences"], serde_json::json!([]));
    let summary: Value = serde_json::from_str(&read(&report.join("summary.json"))).unwrap();
    assert_eq!(
        (
            summary["seeds_run"].as_u64(),
            summary["seeds_failed"].as_u64()
        ),
        (Some(2), Some(0))
    );
    let junit = junit_parser::from_reader(read(&report.join("junit.xml")).as_bytes()).unwrap();
    assert_eq!((junit.tests, junit.failures), (1, 0));
}

#[test]
fn explore_writes_a_report_with_a_timeline_per_failing_program() {
    // Goal: `explore --report` renders each failing program's timeline from the
    // program file it wrote. Method: seeds 15..18 with the duplicate-notification
    // defect, one of which fails (seed 16), in a scratch folder.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args([
            "explore",
            "--seeds",
            "15..18",
            "--defect",
            "duplicate-notification",
        ])
        .args(["--shrink-max", "0", "--report", "report"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let report = dir.path().join("report");
    let index = read(&report.join("index.html"));
    assert_eq!(
        index.matches("<tr class=\"failure\">").count(),
        1,
        "{index}"
    );
    assert!(index.contains("href=\"runs/explore-16.html\""), "{index}");
    assert!(read(&report.join("runs/explore-16.html")).contains("class=\"violation\""));
}

#[test]
fn printed_repro_and_shrink_lines_run_from_another_directory() {
    // Goal: issue 25's repro lines, relative to wherever the sweep ran: the printed
    // `coordsim …` line names the scenario by its absolute path, so pasted in
    // another directory it fails the same way; the `cargo run` form is printed only
    // inside the repository. The same holds for the shrink line. Method: the demo's
    // seed 2 from the repository, its repro and shrink lines run by bash in a
    // scratch folder with this binary on PATH.
    let inside = coordsim(&["run", DEMO, "--seed", "2"]);
    let stdout = text(&inside.stdout);
    let repro = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("repro: "))
        .unwrap();
    assert!(repro.starts_with("coordsim run /"), "{repro}");
    assert!(stdout
        .contains("or, in the repository: cargo run --release --locked -p coord-sim -- run /"));
    let elsewhere = tempfile::tempdir().unwrap();
    let binary_dir = Path::new(env!("CARGO_BIN_EXE_coordsim")).parent().unwrap();
    let path = format!(
        "{}:{}",
        binary_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let rerun = Command::new("bash")
        .arg("-c")
        .arg(repro)
        .current_dir(elsewhere.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        rerun.status.code(),
        Some(1),
        "{repro}: {}",
        text(&rerun.stderr)
    );
    let rerun_stdout = text(&rerun.stdout);
    let fail_line = |out: &str| {
        out.lines()
            .find(|line| line.starts_with("FAIL"))
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        fail_line(&rerun_stdout).split_once(" seed ").unwrap().1,
        fail_line(&stdout).split_once(" seed ").unwrap().1,
        "the same seed, invariant and detail"
    );
    assert!(fail_line(&rerun_stdout).starts_with("FAIL /"));
    assert!(fail_line(&rerun_stdout).contains(&format!("/{DEMO} seed 2")));
    assert!(
        !rerun_stdout.contains("or, in the repository"),
        "outside the repository: {rerun_stdout}"
    );

    // The shrink line too: absolute, so pasted in another directory it writes the
    // shrunk scenario there, and that file fails the same way.
    let shrink = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("shrink: "))
        .unwrap();
    assert!(shrink.starts_with("coordsim shrink /"), "{shrink}");
    assert!(stdout.contains(&format!(
        "or, in the repository: cargo run --release --locked -p coord-sim -- {}",
        shrink.strip_prefix("coordsim ").unwrap()
    )));
    let shrunk = Command::new("bash")
        .arg("-c")
        .arg(shrink)
        .current_dir(elsewhere.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        shrunk.status.code(),
        Some(0),
        "{shrink}: {}{}",
        text(&shrunk.stdout),
        text(&shrunk.stderr)
    );
    let file = elsewhere.path().join("duplicate-notification-seed-2.toml");
    assert!(file.is_file(), "{}", text(&shrunk.stdout));
    let rerun_shrunk = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .arg("run")
        .arg(&file)
        .args(["--seed", "2"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(rerun_shrunk.status.code(), Some(1));
    assert_eq!(
        fail_line(&text(&rerun_shrunk.stdout))
            .split_once(" seed ")
            .unwrap()
            .1
            .split_once(": ")
            .unwrap()
            .1
            .split_once(':')
            .unwrap()
            .0,
        "notify-once",
        "the shrunk file breaks the same invariant"
    );
}

#[test]
fn report_without_a_folder_writes_under_reports_by_utc_time() {
    // Goal: a bare `--report` writes a fresh report under `reports/<UTC time>/` of
    // the current directory. Method: a sweep in a scratch folder; one folder named
    // like 20261124T210501Z appears under reports/, holding the summary.
    let dir = tempfile::tempdir().unwrap();
    let scenario = repo_root().join("scenarios/core/notify-once.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .arg("run")
        .arg(&scenario)
        .arg("--report")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let folders: Vec<_> = std::fs::read_dir(dir.path().join("reports"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    let [folder] = folders.as_slice() else {
        panic!("one report folder: {folders:?}")
    };
    assert_eq!(folder.len(), "20261124T210501Z".len(), "{folder}");
    assert!(folder.starts_with("20") && folder.ends_with('Z') && folder.contains('T'));
    assert!(dir
        .path()
        .join("reports")
        .join(folder)
        .join("summary.json")
        .is_file());
}

/// Set to 1, a missing xmllint fails the schema test instead of skipping it.
const REQUIRE_XMLLINT_VARIABLE: &str = "COORDSIM_REQUIRE_XMLLINT";

/// `xmllint` on PATH, or `None` after a loud skip message.
fn xmllint() -> Option<&'static str> {
    let found = Command::new("xmllint")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        assert!(
            std::env::var(REQUIRE_XMLLINT_VARIABLE).as_deref() != Ok("1"),
            "{REQUIRE_XMLLINT_VARIABLE}=1 but no xmllint on PATH: run scripts/install-xmllint"
        );
        eprintln!(
            "\n!!! SKIPPED: no xmllint on PATH, junit.xml was not validated against its \
             schema. Install it with scripts/install-xmllint (or set \
             {REQUIRE_XMLLINT_VARIABLE}=1 to fail).\n"
        );
    }
    found.then_some("xmllint")
}

#[test]
fn junit_xml_is_valid_against_the_schema_ci_systems_read() {
    // Goal: the junit.xml of a report is valid JUnit XML for Jenkins, GitLab and the
    // Actions reporters, failing or not. Method: `xmllint --schema` with Jenkins'
    // junit-10.xsd (fixtures/junit/) over the reports of a failing sweep (failures
    // beside a passing-seed range), an all-passing sweep and one shard of it.
    let Some(xmllint) = xmllint() else {
        return;
    };
    let schema = repo_root().join("fixtures/junit/junit-10.xsd");
    let dir = tempfile::tempdir().unwrap();
    let sweeps: [(&str, &[&str], i32); 3] = [
        (
            "failing",
            &[DEMO, "scenarios/core/notify-once.toml", "--seeds", "0..4"],
            1,
        ),
        ("passing", &["scenarios/core/", "--seeds", "0..6"], 0),
        (
            "shard",
            &["scenarios/core/", "--seeds", "0..6", "--shard", "2/3"],
            0,
        ),
    ];
    for (name, args, status) in sweeps {
        let report = dir.path().join(name);
        let mut command = vec!["run"];
        command.extend_from_slice(args);
        command.extend(["--report", report.to_str().unwrap()]);
        let output = coordsim(&command);
        assert_eq!(
            output.status.code(),
            Some(status),
            "{}",
            text(&output.stderr)
        );
        let junit = report.join("junit.xml");
        let validated = Command::new(xmllint)
            .arg("--noout")
            .arg("--schema")
            .arg(&schema)
            .arg(&junit)
            .output()
            .unwrap();
        assert!(
            validated.status.success(),
            "{name}: {}\n{}",
            text(&validated.stderr),
            read(&junit)
        );
        assert!(text(&validated.stderr).contains("validates"));
        let xml = read(&junit);
        assert!(xml.contains("passing seeds of "), "{xml}");
        if status == 1 {
            assert!(xml.contains("<failure "), "{xml}");
        }
    }
}
