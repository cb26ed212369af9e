//! Scenario files: every mistake is reported at file:line:column, and the JSON
//! Schema in docs/ is the one the types generate.

use coord_sim::model::CallOutcome;
use coord_sim::scenario::{json_schema, LoadedScenario, ScenarioError};
use coord_sim::sweep::load_all;
use std::path::Path;

use crate::repo_root;

const VALID: &str = r#"name = "x"

[coordinator]
prompt = "go"

[[coordinator.turns]]
tool_calls = [{ name = "Agent", input = { description = "w", prompt = "work" } }]

[[workers]]
prompt = "work"
[[workers.turns]]
text = "done"
"#;

fn error_of(text: &str) -> String {
    match LoadedScenario::parse(Path::new("bad.toml"), text) {
        Err(error @ ScenarioError::Invalid { .. }) => error.to_string(),
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

#[test]
fn a_valid_scenario_loads() {
    let loaded = LoadedScenario::parse(Path::new("ok.toml"), VALID).unwrap();
    assert_eq!(loaded.scenario.workers.len(), 1);
}

#[test]
fn an_unknown_key_is_named_with_its_position() {
    // Goal: a typo is an error at the typo, not a silently ignored key.
    let error = error_of(&VALID.replace("text = \"done\"", "txt = \"done\""));
    assert!(error.starts_with("bad.toml:12:1:"), "{error}");
    assert!(error.contains("txt"), "{error}");
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_its_position() {
    let error = error_of(&format!(
        "{VALID}\n[settings]\nspawn_deadline_ms = \"long\"\n"
    ));
    assert!(error.starts_with("bad.toml:15:21:"), "{error}");
}

#[test]
fn bytes_per_token_defaults_to_four_and_takes_a_ratio_to_the_thousandth() {
    // Goal: an omitted ratio is the documented default, and an integer reads as a
    // ratio, kept to the thousandth.
    use coord_sim::cache::BytesPerToken;
    let loaded = LoadedScenario::parse(Path::new("ok.toml"), VALID).unwrap();
    assert_eq!(
        loaded.scenario.economics.bytes_per_token,
        BytesPerToken::FOUR
    );
    for (written, milli) in [("3", 3_000), ("2.95", 2_950), ("1.0", 1_000), ("8", 8_000)] {
        let text = format!("{VALID}\n[economics]\nbytes_per_token = {written}\n");
        let loaded = LoadedScenario::parse(Path::new("ok.toml"), &text).unwrap();
        let ratio = loaded.scenario.economics.bytes_per_token;
        assert_eq!(ratio.milli_bytes_per_token(), milli, "{written}");
    }
}

#[test]
fn a_bytes_per_token_out_of_range_is_an_error_at_the_value() {
    // Goal: a ratio no tokenizer has (zero, negative, past eight bytes, NaN) or a
    // value that is no number is a loader error at file:line:column of the value.
    for written in ["0.5", "0", "-3.0", "8.5", "nan", "inf"] {
        let error = error_of(&format!(
            "{VALID}\n[economics]\nbytes_per_token = {written}\n"
        ));
        assert!(error.starts_with("bad.toml:15:19: "), "{written}: {error}");
        assert!(
            error.contains("bytes_per_token must be a number from 1.0 to 8.0"),
            "{written}: {error}"
        );
    }
    let error = error_of(&format!(
        "{VALID}\n[economics]\nbytes_per_token = \"three\"\n"
    ));
    assert!(error.starts_with("bad.toml:15:19: "), "{error}");
}

#[test]
fn an_unknown_fault_kind_lists_the_catalogue() {
    let error = error_of(&format!("{VALID}\n[[faults]]\nkind = \"meteor\"\n"));
    assert!(error.starts_with("bad.toml:15:8:"), "{error}");
    assert!(error.contains("worker-crash"), "{error}");
}

#[test]
fn every_runtime_defect_loads_by_name_and_an_unknown_one_is_an_error_at_it() {
    // Goal: the scenario's defect names are the runtime's, all of them, and a typo
    // is a located error rather than a silently healthy run.
    let names: Vec<String> = coord_runtime::defects::Defect::ALL
        .iter()
        .map(|d| format!("\"{d}\""))
        .collect();
    let text = format!("{VALID}\n[settings]\ndefects = [{}]\n", names.join(", "));
    let loaded = LoadedScenario::parse(Path::new("ok.toml"), &text).unwrap();
    assert_eq!(
        loaded.scenario.settings.defects,
        coord_runtime::defects::Defect::ALL.to_vec()
    );
    let schema = json_schema();
    for name in &names {
        assert!(
            schema.contains(name.as_str()),
            "{name} is missing from the schema"
        );
    }
    let error = error_of(&format!(
        "{VALID}\n[settings]\ndefects = [\"raw-envelopes\"]\n"
    ));
    assert!(error.starts_with("bad.toml:15:"), "{error}");
    assert!(error.contains("raw-envelope-result"), "{error}");
}

#[test]
fn a_fault_naming_no_worker_points_at_the_name() {
    // Goal: semantic mistakes get positions too.
    let error = error_of(&format!(
        "{VALID}\n[[faults]]\nkind = \"forged-envelope\"\nworker = \"wrok\"\n"
    ));
    assert!(error.starts_with("bad.toml:16:10:"), "{error}");
    assert!(
        error.contains("no [[workers]] prompt matches \"wrok\""),
        "{error}"
    );
}

#[test]
fn an_agent_call_without_a_script_is_refused() {
    let error = error_of(&VALID.replace(
        "prompt = \"work\"\n[[workers.turns]]",
        "prompt = \"other\"\n[[workers.turns]]",
    ));
    assert!(
        error.contains("no [[workers]] script has that prompt"),
        "{error}"
    );
    assert!(error.starts_with("bad.toml:7:"), "{error}");
}

#[test]
fn a_launch_without_a_script_and_a_switch_at_call_zero_are_refused() {
    // Goal: the harness's launches and binding switches are checked like the rest.
    let error = error_of(&format!(
        "{VALID}\n[[launches]]\ndescription = \"l\"\nprompt = \"nobody\"\n"
    ));
    assert!(
        error.contains("a [[launches]] entry launches prompt \"nobody\""),
        "{error}"
    );
    let error = error_of(&format!(
        "{VALID}\n[[faults]]\nkind = \"binding-switch\"\nafter_call = 0\nbinding = \"slack:bob\"\n"
    ));
    assert!(
        error.contains("`after_call` = 0 is out of range: expected 1 to 1000000"),
        "{error}"
    );
}

#[test]
fn a_symlinked_worktree_dir_must_name_one_segment_and_an_earlier_worktree() {
    // Goal: a planted link can only lie in the worktree itself and point at a
    // worktree that exists. Method: a nested and a climbing name, worktree 0, and
    // other-worktree at the first worktree; each refused at its line.
    let fault = |fields: &str| {
        error_of(&format!(
            "{VALID}\n[[faults]]\nkind = \"symlinked-worktree-dir\"\n{fields}\n"
        ))
    };
    for dir in ["a/b", "..", ""] {
        let error = fault(&format!("worktree = 1\ndir = \"{dir}\""));
        assert!(
            error.contains("must be one plain path segment"),
            "{dir}: {error}"
        );
    }
    let error = fault("worktree = 0\ndir = \"vendor\"");
    assert!(
        error.contains("`worktree` = 0 is out of range: expected 1 to 1000000"),
        "{error}"
    );
    let error = fault("worktree = 1\ndir = \"vendor\"\ntarget = \"other-worktree\"");
    assert!(error.contains("must be at least 2"), "{error}");
    assert!(error.starts_with("bad.toml:18:"), "{error}");
    let valid = format!(
        "{VALID}\n[[faults]]\nkind = \"symlinked-worktree-dir\"\nworktree = 2\ndir = \"vendor\"\ntarget = \"other-worktree\"\n"
    );
    LoadedScenario::parse(Path::new("ok.toml"), &valid).unwrap();
}

#[test]
fn an_experiment_must_name_a_known_invariant() {
    let error = error_of(&format!("{VALID}\n[expect]\nviolation = \"vibes\"\n"));
    assert!(error.contains("mailbox-durability"), "{error}");
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    // Goal: docs/scenario.schema.json cannot drift from the types.
    let committed = std::fs::read_to_string(repo_root().join("docs/scenario.schema.json")).unwrap();
    assert_eq!(
        committed,
        json_schema(),
        "regenerate with `coordsim schema > docs/scenario.schema.json`"
    );
}

#[test]
fn an_output_cap_smaller_than_the_truncation_marker_is_refused() {
    // Goal: `output_bytes_max` reaches the loader's checks: a cap that cannot hold
    // the truncation marker would fail every spawn, so it is a scenario error, and
    // a cap that holds it loads.
    let with_cap = |cap: u64| {
        VALID.replacen(
            "[coordinator]",
            &format!("[settings]\noutput_bytes_max = {cap}\n\n[coordinator]"),
            1,
        )
    };
    let error = error_of(&with_cap(16));
    assert!(error.contains("output_bytes_max"), "{error}");
    LoadedScenario::parse(Path::new("x.toml"), &with_cap(512)).unwrap();
}

#[test]
fn a_shell_answer_off_a_bash_call_or_a_killed_command_with_a_code_is_refused() {
    // Goal: a `shell` table only scripts a Bash command, and a killed command has no
    // exit code; both mistakes are named at the key, and a good one loads.
    let worker = |call: &str| {
        VALID.replace(
            "[[workers.turns]]\ntext = \"done\"",
            &format!(
                "[[workers.turns]]\ntool_calls = [{call}]\n[[workers.turns]]\ntext = \"done\""
            ),
        )
    };
    let error = error_of(&worker(
        r#"{ name = "Read", input = { file_path = "a" }, shell = { stdout = "x" } }"#,
    ));
    assert!(error.starts_with("bad.toml:12:"), "{error}");
    assert!(
        error.contains("a `shell` answer is for a Bash call's command, but this call is Read"),
        "{error}"
    );
    let error = error_of(&worker(
        r#"{ name = "Bash", input = { command = "make" }, shell = { exit_code = 2, killed = "signal" } }"#,
    ));
    assert!(error.starts_with("bad.toml:12:"), "{error}");
    assert!(
        error.contains("leave `exit_code` out with `killed`"),
        "{error}"
    );
    let error = error_of(&worker(
        r#"{ name = "Bash", input = { command = "make" }, shell = { killed = "sigkill" } }"#,
    ));
    assert!(error.starts_with("bad.toml:12:"), "{error}");
    let good = worker(
        r#"{ name = "Bash", input = { command = "make" }, shell = { stdout = "ok", killed = "timeout" } }"#,
    );
    let loaded = LoadedScenario::parse(Path::new("ok.toml"), &good).unwrap();
    let call = &loaded.scenario.workers[0].turns[0].tool_calls[0];
    let answer = call.shell.as_deref().expect("the call keeps its answer");
    assert_eq!(answer.stdout, "ok");
    assert_eq!(answer.killed, Some(coord_sim::model::Killed::Timeout));
}

#[test]
fn every_refusal_a_scenario_expects_names_its_reason() {
    // Goal: a call a scenario in `scenarios/` expects to be refused also says why
    // (`expect_text`). A guard that slipped hides behind any other refusal of the
    // same call: a nine-segment scratch key refused because the eight-segment
    // key's file lies in its path passed `expect = "error"` while the depth limit
    // was gone. Method: every scripted call of every scenario's coordinator and
    // workers.
    let scenarios = load_all(&[repo_root().join("scenarios")]).unwrap();
    let mut unnamed = Vec::new();
    for loaded in &scenarios {
        let scenario = &loaded.scenario;
        for script in std::iter::once(&scenario.coordinator).chain(&scenario.workers) {
            for (step, turn) in script.turns.iter().enumerate() {
                for (index, call) in turn.tool_calls.iter().enumerate() {
                    if call.expect == Some(CallOutcome::Error) && call.expect_text.is_none() {
                        unnamed.push(format!(
                            "{}: {:?}'s call {index} of step {step} ({})",
                            loaded.path.display(),
                            script.prompt,
                            call.name
                        ));
                    }
                }
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "calls expected to be refused with no expect_text naming the reason:\n{}",
        unnamed.join("\n")
    );
}
