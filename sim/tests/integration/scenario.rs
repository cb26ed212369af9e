//! Scenario files: every mistake is reported at file:line:column.

use coord_sim::scenario::{LoadedScenario, ScenarioError};
use std::path::Path;

fn error_of(text: &str) -> String {
    match LoadedScenario::parse(Path::new("bad.toml"), text) {
        Err(error @ ScenarioError::Invalid { .. }) => error.to_string(),
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

#[test]
fn an_unknown_key_is_named_with_its_position() {
    // Goal: a typo is an error at the typo, not a silently ignored key.
    let error =
        error_of("name = \"x\"\n[[workers]]\ndescription = \"d\"\nresult = \"r\"\nmesages = 2\n");
    assert!(error.starts_with("bad.toml:5:1:"), "{error}");
    assert!(error.contains("mesages"), "{error}");
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_its_position() {
    // Goal: a wrong type points at the value and says what was expected.
    let error = error_of(
        "name = \"x\"\n[[workers]]\ndescription = \"d\"\nresult = \"r\"\nmessages = \"two\"\n",
    );
    assert!(error.starts_with("bad.toml:5:12:"), "{error}");
    assert!(error.contains("expected u32"), "{error}");
}

#[test]
fn an_unknown_end_status_is_refused() {
    // Goal: only completed|failed|killed|timeout are endings.
    let error = error_of(
        "name = \"x\"\n[[workers]]\ndescription = \"d\"\nresult = \"r\"\nend = \"done\"\n",
    );
    assert!(error.starts_with("bad.toml:5:7:"), "{error}");
    assert!(error.contains("completed"), "{error}");
}

#[test]
fn a_scenario_without_workers_is_refused() {
    // Goal: an empty scenario is a mistake, not a trivially passing run.
    let error = error_of("name = \"x\"\nworkers = []\n");
    assert!(error.starts_with("bad.toml:1:1:"), "{error}");
    assert!(error.contains("[[workers]]"), "{error}");
}

#[test]
fn broken_toml_is_reported_at_the_break() {
    // Goal: syntax errors carry positions too.
    let error = error_of("name = \"x\n");
    assert!(error.starts_with("bad.toml:1:"), "{error}");
}
