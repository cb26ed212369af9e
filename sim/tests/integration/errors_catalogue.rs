//! `docs/errors.md` checked against the binary: each catalogued bad input still
//! gets the documented exit status and message, so the catalogue cannot go stale.

use std::process::{Command, Stdio};

use crate::repo_root;

/// One row of the catalogue.
#[derive(Debug)]
struct Row {
    /// The arguments after `coordsim`.
    args: Vec<String>,
    status: i32,
    message: String,
}

/// The catalogue's rows: table lines whose first cell is a `coordsim` command.
fn rows(doc: &str) -> Vec<Row> {
    doc.lines()
        .filter(|line| line.starts_with("| `coordsim "))
        .map(|line| {
            // A `|` inside a message is written `\|`.
            let cells: Vec<String> = line
                .trim_matches('|')
                .replace("\\|", "\u{0}")
                .split(" | ")
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect();
            let [command, status, message] = cells.as_slice() else {
                panic!("a catalogue row has three cells: {line}");
            };
            let command = command
                .strip_prefix("`coordsim ")
                .and_then(|command| command.strip_suffix('`'))
                .unwrap_or_else(|| panic!("the command is `coordsim …`: {line}"));
            let message = message
                .strip_prefix("`` ")
                .and_then(|message| message.strip_suffix(" ``"))
                .unwrap_or_else(|| panic!("the message is `` … ``: {line}"));
            Row {
                args: command.split(' ').map(str::to_owned).collect(),
                status: status.parse().unwrap(),
                message: message.to_owned(),
            }
        })
        .collect()
}

#[test]
fn every_catalogued_input_is_refused_as_documented() {
    // Goal: docs/errors.md is true. Method: run each row's command from the
    // repository root; its status must match, and its stderr must hold the
    // message as a whole line. No file may change (the `-o` rows aim at fixtures
    // the commands must refuse to write).
    let doc = std::fs::read_to_string(repo_root().join("docs/errors.md")).unwrap();
    let rows = rows(&doc);
    assert!(
        rows.len() >= 10,
        "the catalogue has its rows: {}",
        rows.len()
    );
    let kept = repo_root().join("fixtures/errors/existing.toml");
    let kept_before = std::fs::read(&kept).unwrap();
    for row in &rows {
        let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
            .args(&row.args)
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(row.status), "{row:?}\n{stderr}");
        assert!(
            stderr.lines().any(|line| line == row.message),
            "{row:?}\nstderr was:\n{stderr}"
        );
    }
    assert_eq!(std::fs::read(&kept).unwrap(), kept_before);
}
