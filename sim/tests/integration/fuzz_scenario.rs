//! Fuzzing the scenario loader: any text, however broken, is a scenario or a typed
//! error with a position, never a panic.
//!
//! Method: proptest over three kinds of input: arbitrary text; the repository's own
//! scenario files mutated (numbers swapped for extreme ones, lines dropped,
//! duplicated or cut, fragments of TOML spliced in); and tables assembled from the
//! format's own keys with hostile values. `cargo test` runs 256 cases of each;
//! `COORDSIM_FUZZ_CASES=N` runs N of each (the long mode).

use std::path::Path;
use std::sync::OnceLock;

use coord_sim::scenario::{LoadedScenario, ScenarioError};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::repo_root;

/// Cases per property: 256, or `COORDSIM_FUZZ_CASES`.
fn cases() -> u32 {
    std::env::var("COORDSIM_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(256)
}

fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The repository's scenario files under 8 KB: real scenarios to mutate.
fn corpus() -> &'static [String] {
    static CORPUS: OnceLock<Vec<String>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut texts = Vec::new();
        let mut folders = vec![repo_root().join("scenarios")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|ext| ext == "toml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if text.len() < 8_192 {
                        texts.push(text);
                    }
                }
            }
        }
        texts.sort();
        assert!(texts.len() > 10, "the corpus is the repository's scenarios");
        texts
    })
}

/// Loads `text`; the only acceptable outcomes are a scenario or an invalid-scenario
/// error whose position lies inside the text.
fn loads_or_refuses(text: &str) -> Result<(), TestCaseError> {
    match LoadedScenario::parse(Path::new("fuzz.toml"), text) {
        Ok(_) => Ok(()),
        Err(ScenarioError::Invalid {
            line,
            column,
            message,
            ..
        }) => {
            let lines = text.split('\n').count();
            prop_assert!(
                line >= 1 && line <= lines,
                "line {line} of {lines}: {message}"
            );
            prop_assert!(column >= 1, "column {column}: {message}");
            prop_assert!(!message.is_empty());
            Ok(())
        }
        Err(other) => Err(TestCaseError::fail(format!(
            "parse gave a non-positional error: {other}"
        ))),
    }
}

/// Numbers that have broken loaders and runs: zero, the edges of every integer
/// width, floats, exponents, signs, underscores, radix prefixes.
fn hostile_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("4294967295".to_owned()),
        Just("4e9".to_owned()),
        Just("1e308".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("-0.0".to_owned()),
        Just("0x7fffffff".to_owned()),
        Just("1_000_000".to_owned()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| format!("{n:?}")),
    ]
}

/// Fragments of TOML, valid and not, that a mutation splices in.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        hostile_number(),
        Just("[[faults]]\nkind = \"oversize-message\"\nworker = \"*\"\nsize_bytes = ".to_owned()),
        Just(
            "[[faults]]\nkind = \"mailbox-producers\"\ninbox = \"team-lead\"\nproducers = "
                .to_owned()
        ),
        Just("[settings]\nspawn_deadline_ms = ".to_owned()),
        Just("when = { kind = \"notifications_at_least\", count = ".to_owned()),
        Just("latency = { kind = \"uniform\", min_ms = 9, max_ms = ".to_owned()),
        Just("[[coordinator.turns]]\n".to_owned()),
        Just("[economics]\nstagger_ms = ".to_owned()),
        Just("\"\"\"".to_owned()),
        Just("{".to_owned()),
        Just("]]".to_owned()),
        Just("\u{feff}".to_owned()),
        Just("\0".to_owned()),
        "[ -~]{0,40}",
        ".{0,20}",
    ]
}

/// One edit of a scenario's text.
#[derive(Debug, Clone)]
enum Mutation {
    /// Every number at or after byte `at` (in position order) becomes `number`.
    Number { nth: usize, number: String },
    /// Line `line` is dropped.
    DropLine { line: usize },
    /// Line `line` is written twice.
    DuplicateLine { line: usize },
    /// `fragment` is inserted at byte `at` (moved to a character boundary).
    Insert { at: usize, fragment: String },
    /// The text is cut at byte `at`.
    Truncate { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), hostile_number())
            .prop_map(|(nth, number)| Mutation::Number { nth, number }),
        1 => any::<usize>().prop_map(|line| Mutation::DropLine { line }),
        1 => any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        2 => (any::<usize>(), fragment()).prop_map(|(at, fragment)| Mutation::Insert { at, fragment }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, mutation: &Mutation) -> String {
    match mutation {
        Mutation::Number { nth, number } => {
            // The nth run of ASCII digits in the text.
            let runs: Vec<(usize, usize)> = {
                let bytes = text.as_bytes();
                let mut runs = Vec::new();
                let mut index = 0;
                while index < bytes.len() {
                    if bytes[index].is_ascii_digit() {
                        let start = index;
                        while index < bytes.len() && bytes[index].is_ascii_digit() {
                            index += 1;
                        }
                        runs.push((start, index));
                    } else {
                        index += 1;
                    }
                }
                runs
            };
            match runs.get(nth % runs.len().max(1)) {
                Some(&(start, end)) => format!("{}{number}{}", &text[..start], &text[end..]),
                None => text.to_owned(),
            }
        }
        Mutation::DropLine { line } | Mutation::DuplicateLine { line } => {
            let mut lines: Vec<&str> = text.split('\n').collect();
            let index = line % lines.len();
            if matches!(mutation, Mutation::DropLine { .. }) {
                lines.remove(index);
            } else {
                lines.insert(index, lines[index]);
            }
            lines.join("\n")
        }
        Mutation::Insert { at, fragment } => {
            let at = boundary(text, *at);
            format!("{}{fragment}{}", &text[..at], &text[at..])
        }
        Mutation::Truncate { at } => text[..boundary(text, *at)].to_owned(),
    }
}

#[test]
fn arbitrary_text_is_a_scenario_or_a_positioned_error() {
    // Goal: no text at all makes the loader panic.
    let mut runner = TestRunner::new(config());
    runner
        .run(&".{0,400}", |text| loads_or_refuses(&text))
        .unwrap();
}

#[test]
fn mutated_scenarios_are_scenarios_or_positioned_errors() {
    // Goal: the repository's scenarios, edited one to four times, load or are
    // refused with a position; none panics the loader.
    let corpus = corpus();
    let mut runner = TestRunner::new(config());
    let strategy = (
        0..corpus.len(),
        proptest::collection::vec(mutation(), 1..=4),
    );
    runner
        .run(&strategy, |(index, mutations)| {
            let text = mutations
                .iter()
                .fold(corpus[index].clone(), |text, mutation| {
                    apply(&text, mutation)
                });
            loads_or_refuses(&text)
        })
        .unwrap();
}

/// A key of the format with a value, valid or hostile.
fn setting_line() -> impl Strategy<Value = String> {
    let keys = prop::sample::select(vec![
        "spawn_deadline_ms",
        "idle_poll_ms",
        "liveness_bound_ms",
        "run_limit_ms",
        "turns_max",
        "turmoil_tick_ms",
        "output_bytes_max",
        "output_read_bytes_max",
        "eviction_grace_ms",
    ]);
    (keys, hostile_number()).prop_map(|(key, value)| format!("{key} = {value}"))
}

fn fault_table() -> impl Strategy<Value = String> {
    let kinds = prop::sample::select(vec![
        "worker-crash",
        "coordinator-crash",
        "delayed-notification",
        "mailbox-producers",
        "disk",
        "model-api",
        "symlink-at-output",
        "symlinked-worktree-dir",
        "oversize-message",
        "remote-partition",
        "cache-breaking-prompt-change",
        "slow-lock-holder",
        "binding-switch",
    ]);
    let fields = prop::sample::subsequence(
        vec![
            "worker = \"work\"",
            "inbox = \"team-lead\"",
            "agent = \"coordinator\"",
            "effect = \"eio\"",
            "error = \"timeout\"",
            "binding = \"slack:a\"",
            "dir = \"vendor\"",
        ],
        0..4,
    );
    let numbers = prop::collection::vec(
        (
            prop::sample::select(vec![
                "at_ms",
                "delay_ms",
                "producers",
                "nth",
                "call",
                "spawn",
                "size_bytes",
                "launch",
                "duration_ms",
                "hold_ms",
                "after_call",
                "worktree",
            ]),
            hostile_number(),
        ),
        0..4,
    );
    (kinds, fields, numbers).prop_map(|(kind, fields, numbers)| {
        let mut table = format!("[[faults]]\nkind = \"{kind}\"\n");
        for field in fields {
            table.push_str(field);
            table.push('\n');
        }
        for (key, value) in numbers {
            table.push_str(&format!("{key} = {value}\n"));
        }
        table
    })
}

#[test]
fn assembled_scenarios_with_hostile_numbers_load_or_are_refused() {
    // Goal: every numeric key of the format, given any number, loads or is refused
    // with a position.
    let mut runner = TestRunner::new(config());
    let strategy = (
        prop::collection::vec(setting_line(), 0..4),
        prop::collection::vec(fault_table(), 0..3),
        hostile_number(),
        hostile_number(),
    );
    runner
        .run(&strategy, |(settings, faults, count, max_ms)| {
            let text = format!(
                "name = \"fuzz\"\n[settings]\n{}\n[coordinator]\nprompt = \"go\"\n\
                 [[coordinator.turns]]\ntool_calls = [{{ name = \"Agent\", input = {{ description = \"w\", prompt = \"work\" }} }}]\n\
                 [[coordinator.turns]]\ntext = \"done\"\nwhen = {{ kind = \"notifications_at_least\", count = {count} }}\n\
                 [[workers]]\nprompt = \"work\"\n[[workers.turns]]\ntext = \"done\"\n\
                 latency = {{ kind = \"uniform\", min_ms = 5, max_ms = {max_ms} }}\n{}",
                settings.join("\n"),
                faults.join("\n"),
            );
            loads_or_refuses(&text)
        })
        .unwrap();
}
