//! Parser fuzzing (issue 24): property-based fuzz targets for the envelope parser and
//! renderer, the transcript readers (cost and import), the cassette reader, mailbox
//! JSON and price tables.
//!
//! Goal: no input makes a parser panic or run long. Method: each target feeds
//! arbitrary bytes and mutated valid inputs (byte edits and spliced hostile tokens) and
//! requires `Ok` or a typed error, within [`CASE_TIME_MAX`]; where a parser accepts,
//! what it returns is checked too (envelopes round-trip, costs are finite, an inbox
//! loses nothing).
//!
//! Short mode, in every `cargo test`: 256 cases per target. Long mode: set
//! `COORDSIM_FUZZ_CASES` to the number of cases per target, and build in release:
//! `COORDSIM_FUZZ_CASES=1000000 cargo test --release -p coord-sim --test integration fuzz_`.
//! A failure prints the minimal input proptest shrank it to.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use coord_runtime::envelope::{
    parse_block, parse_block_with_warnings, render, render_checked, Dialect, Envelope,
    EnvelopeStatus, EnvelopeUsage, EnvelopeWorktree,
};
use coord_runtime::ipc::{parse_inbox, MailboxError};
use coord_sim::cassette::{Cassette, CassetteError};
use coord_sim::cost::pricing::RATE_USD_PER_MTOK_MAX;
use coord_sim::cost::transcript::TranscriptFile;
use coord_sim::cost::{CostError, CostReport, Ledger, PriceTable, PricingError, Usage};
use coord_sim::import::{extract_thread, Dag, ImportError};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};

use crate::repo_root;

/// Cases per target when `COORDSIM_FUZZ_CASES` is not set.
const CASES_SHORT: u32 = 256;

/// The longest one case may take. Generous for debug builds on a shared machine; a
/// parser that is quadratic in its input still misses it by far on these sizes.
const CASE_TIME_MAX: Duration = Duration::from_secs(5);

/// Cases per target: `COORDSIM_FUZZ_CASES`, or [`CASES_SHORT`].
fn cases() -> u32 {
    match std::env::var("COORDSIM_FUZZ_CASES") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("COORDSIM_FUZZ_CASES={text:?} is not a case count")),
        Err(_) => CASES_SHORT,
    }
}

/// Runs `check` on `cases()` inputs from `strategy`, failing on a panic, a failed
/// check or a case slower than [`CASE_TIME_MAX`]. Prints the count and time, which
/// the long mode reports.
fn fuzz<S: Strategy>(
    target: &str,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        // Shrinking a slow case would take as long again per step: a few suffice.
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let cases = config.cases;
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&strategy, |input| {
        let case_started = Instant::now();
        check(input)?;
        let elapsed = case_started.elapsed();
        prop_assert!(elapsed < CASE_TIME_MAX, "one case took {elapsed:?}");
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("fuzz target {target}: {failure}");
    }
    eprintln!(
        "fuzz target {target}: {cases} cases in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Fragments that parsers handle specially: markup, references, numbers at and past
/// their bounds, JSON and TOML punctuation, a byte order mark, line ends.
const HOSTILE_TOKENS: &[&str] = &[
    "<task-notification>",
    "</task-notification>",
    "<task-notification id='x'>",
    "<result>",
    "</result>",
    "<usage>",
    "<total_tokens>",
    "<subagent_tokens>",
    "<note>",
    "<x>",
    "</x>",
    "<x/>",
    "<é>",
    "<a.b>",
    "<worktree>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "&#0;",
    "&#xD800;",
    "&#x110000;",
    "&amp;",
    "&nbsp;",
    "&",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "-1",
    "1e308",
    "inf",
    "nan",
    "null",
    "true",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "=",
    "[models.x]",
    "\u{feff}",
    "\r\n",
    "\n",
    "\u{0}",
    "é",
];

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Replace(Index, u8),
    Duplicate(Index, usize),
    Splice(Index, &'static str),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Edit::Insert(at, bytes)),
        (any::<Index>(), 1usize..64).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Edit::Replace(at, byte)),
        (any::<Index>(), 1usize..256).prop_map(|(at, len)| Edit::Duplicate(at, len)),
        (any::<Index>(), prop::sample::select(HOSTILE_TOKENS))
            .prop_map(|(at, token)| Edit::Splice(at, token)),
    ]
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for edit in edits {
        let at = |index: &Index, bytes: &Vec<u8>| index.index(bytes.len() + 1);
        match edit {
            Edit::Insert(index, insert) => {
                let at = at(index, &bytes);
                bytes.splice(at..at, insert.iter().copied());
            }
            Edit::Delete(index, len) => {
                let at = at(index, &bytes);
                let end = (at + len).min(bytes.len());
                bytes.drain(at..end);
            }
            Edit::Replace(index, byte) => {
                if !bytes.is_empty() {
                    let at = index.index(bytes.len());
                    bytes[at] = *byte;
                }
            }
            Edit::Duplicate(index, len) => {
                let at = at(index, &bytes);
                let end = (at + len).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(end..end, copy);
            }
            Edit::Splice(index, token) => {
                let at = at(index, &bytes);
                bytes.splice(at..at, token.bytes());
            }
        }
    }
    bytes
}

/// Arbitrary bytes, or one of `seeds` with up to 8 edits.
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..512),
        1 => any::<String>().prop_map(String::into_bytes),
        6 => (prop::sample::select(seeds), prop::collection::vec(edit(), 0..8))
            .prop_map(|(seed, edits)| apply(&seed, &edits)),
    ]
}

/// Bytes as text the way a `&str` parser would get them from a lossy reader.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------- envelopes

const CLAUDE_CODE_2_1: &str = "<task-notification><task-id>a1b2</task-id>\
<tool-use-id>toolu_01</tool-use-id><output-file>/tmp/claude-0/-work/s1/tasks/a1b2.output</output-file>\
<status>completed</status><summary>Agent \"x\" completed</summary>\
<note>The same task-id may notify more than once.</note><result>done</result>\
<usage><subagent_tokens>13</subagent_tokens><tool_uses>1</tool_uses><duration_ms>1200</duration_ms></usage>\
</task-notification>";

fn envelope_seeds() -> Vec<Vec<u8>> {
    let full = Envelope {
        task_id: "a3kx9zq2".into(),
        tool_use_id: Some("toolu_01".into()),
        output_file: Some("/s/tasks/a3kx9zq2.output".into()),
        status: EnvelopeStatus::Failed,
        summary: "Agent \"x\" failed: <deadline> & more".into(),
        note: Some("n".into()),
        result: Some("a < b && c\r\n</result>".into()),
        usage: Some(EnvelopeUsage {
            total_tokens: 1,
            tool_uses: 2,
            duration_ms: 3,
        }),
        worktree: Some(EnvelopeWorktree {
            path: "/p".into(),
            branch: "b".into(),
        }),
        extra: [("attempt".to_owned(), "2".to_owned())].into(),
    };
    vec![
        render(&full, Dialect::ClaudeCode).into_bytes(),
        format!("prose {} more", render(&full, Dialect::Nexo)).into_bytes(),
        CLAUDE_CODE_2_1.as_bytes().to_vec(),
        b"<task-notification><task-id>g</task-id><status>failed</status><result>x \
          <task-notification><task-id>f</task-id><status>completed</status>\
          </task-notification></result></task-notification>"
            .to_vec(),
    ]
}

#[test]
fn fuzz_envelope_parser() {
    // Every candidate is read or warned about; every envelope read renders back to
    // itself (with the dialect's status word).
    fuzz("envelope parser", input(envelope_seeds()), |bytes| {
        let text = text(&bytes);
        let parsed = parse_block_with_warnings(&text);
        for warning in &parsed.warnings {
            prop_assert!(warning.line >= 1 && warning.column >= 1, "{warning:?}");
        }
        for envelope in &parsed.envelopes {
            prop_assert!(!envelope.task_id.trim().is_empty());
            let xml = render_checked(envelope, Dialect::Nexo)
                .map_err(|error| TestCaseError::fail(format!("{error}: {envelope:?}")))?;
            prop_assert_eq!(parse_block(&xml), vec![envelope.clone()], "{}", xml);
        }
        Ok(())
    });
}

fn envelope() -> impl Strategy<Value = Envelope> {
    let body = || prop_oneof![any::<String>(), "[<>&'\"\r\n a-z/;#x0-9]{0,24}"];
    let name = "[a-z_][a-z0-9_.-]{0,8}|usage\\.[a-z_][a-z0-9_-]{0,6}|[ -~]{0,4}";
    let usage = (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(total_tokens, tool_uses, duration_ms)| EnvelopeUsage {
            total_tokens,
            tool_uses,
            duration_ms,
        },
    );
    let worktree = (body(), body()).prop_map(|(path, branch)| EnvelopeWorktree { path, branch });
    let status = prop::sample::select(vec![
        EnvelopeStatus::Completed,
        EnvelopeStatus::Failed,
        EnvelopeStatus::Killed,
        EnvelopeStatus::Timeout,
    ]);
    (
        (
            body(),
            prop::option::of(body()),
            prop::option::of(body()),
            status,
        ),
        (body(), prop::option::of(body()), prop::option::of(body())),
        (
            prop::option::of(usage),
            prop::option::of(worktree),
            prop::collection::btree_map(name, body(), 0..3),
        ),
    )
        .prop_map(
            |(
                (task_id, tool_use_id, output_file, status),
                (summary, note, result),
                (usage, worktree, extra),
            )| Envelope {
                task_id,
                tool_use_id,
                output_file,
                status,
                summary,
                note,
                result,
                usage,
                worktree,
                extra,
            },
        )
}

#[test]
fn fuzz_envelope_render_round_trips_whatever_it_accepts() {
    // For any envelope `render_checked` accepts, parse(render(e)) == [e].
    fuzz("envelope render", envelope(), |envelope| {
        match render_checked(&envelope, Dialect::Nexo) {
            Ok(xml) => prop_assert_eq!(parse_block(&xml), vec![envelope], "{}", xml),
            Err(error) => prop_assert!(!error.to_string().is_empty()),
        }
        Ok(())
    });
}

// ---------------------------------------------------------------- transcripts

fn transcript_seeds() -> Vec<Vec<u8>> {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS
        .get_or_init(|| {
            let short = std::fs::read(repo_root().join("fixtures/claude-code/spotter/short.jsonl"))
                .expect("the short fixture transcript");
            let first_lines: Vec<u8> = short
                .split(|&byte| byte == b'\n')
                .take(6)
                .flat_map(|line| line.iter().copied().chain([b'\n']))
                .collect();
            let assistant = br#"{"type":"assistant","uuid":"a1","parentUuid":"u1","requestId":"r","message":{"id":"m","model":"claude-opus-4-6","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"Agent","input":{"prompt":"p"}}],"usage":{"input_tokens":18446744073709551615,"output_tokens":1,"cache_creation_input_tokens":5,"cache_read_input_tokens":2,"cache_creation":{"ephemeral_1h_input_tokens":9}}}}"#;
            let user = br#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hello <task-notification><task-id>a</task-id><status>completed</status></task-notification>"}}"#;
            let mut pair = user.to_vec();
            pair.push(b'\n');
            pair.extend_from_slice(assistant);
            vec![short, first_lines, pair]
        })
        .clone()
}

#[test]
fn fuzz_cost_transcript_reader() {
    // Any bytes read into a ledger and priced give a report or a typed error, and a
    // report's costs are finite.
    let prices = PriceTable::built_in();
    fuzz(
        "cost transcript reader",
        input(transcript_seeds()),
        |bytes| {
            let mut ledger = Ledger::new();
            ledger.add_transcript(TranscriptFile::at(Path::new("p/s.jsonl")), &bytes);
            match CostReport::build(&ledger, &prices) {
                Ok(report) => {
                    prop_assert!(report.totals.cost_usd.is_finite());
                    // A cost that is not finite serializes as `null`.
                    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
                    prop_assert!(costs_are_numbers(&json), "{json}");
                    let _ = report.to_text();
                }
                Err(CostError::UnknownModels { models, .. }) => prop_assert!(!models.is_empty()),
                Err(other) => return Err(TestCaseError::fail(format!("unexpected {other}"))),
            }
            Ok(())
        },
    );
}

/// Whether every `cost_usd` in `value` is a number.
fn costs_are_numbers(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(fields) => fields.iter().all(|(key, field)| {
            (key != "cost_usd" || field.is_number()) && costs_are_numbers(field)
        }),
        serde_json::Value::Array(items) => items.iter().all(costs_are_numbers),
        _ => true,
    }
}

#[test]
fn fuzz_import_transcript_reader() {
    // Any text parses into a DAG or a Malformed error naming a line, and a DAG's thread
    // extracts without a panic.
    fuzz(
        "import transcript reader",
        input(transcript_seeds()),
        |bytes| {
            let text = text(&bytes);
            match Dag::parse(Path::new("s.jsonl"), &text) {
                Ok(dag) => {
                    let thread = extract_thread(&dag);
                    prop_assert!(thread.responses.len() <= dag.lines_read);
                }
                Err(ImportError::Malformed { line, .. }) => prop_assert!(line >= 1),
                Err(other) => return Err(TestCaseError::fail(format!("unexpected {other}"))),
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------- cassettes

fn cassette_seeds() -> Vec<Vec<u8>> {
    let text =
        std::fs::read_to_string(repo_root().join("fixtures/cassettes/notify-once-seed-0.json"))
            .expect("the notify-once cassette");
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let exchanges = value["exchanges"].as_array_mut().unwrap();
    exchanges.truncate(2);
    vec![
        serde_json::to_string_pretty(&value).unwrap().into_bytes(),
        serde_json::to_string(&value).unwrap().into_bytes(),
    ]
}

#[test]
fn fuzz_cassette_reader() {
    // Any text is a cassette or an Invalid error with a 1-based position.
    fuzz("cassette reader", input(cassette_seeds()), |bytes| {
        let text = text(&bytes);
        match Cassette::parse(Path::new("c.json"), &text) {
            Ok(cassette) => {
                let again = Cassette::parse(Path::new("c.json"), &cassette.to_json());
                prop_assert!(again.is_ok(), "{again:?}");
            }
            Err(CassetteError::Invalid { line, column, .. }) => {
                prop_assert!(line >= 1 && column >= 1)
            }
            Err(other) => return Err(TestCaseError::fail(format!("unexpected {other}"))),
        }
        Ok(())
    });
}

// ---------------------------------------------------------------- mailboxes

fn inbox_seeds() -> Vec<Vec<u8>> {
    vec![
        br#"[
  {
    "from": "alice",
    "text": "hello",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "read": false,
    "color": "blue",
    "summary": "hi",
    "future_field": {"k": [1, 2.5, null]}
  },
  {
    "from": "bob",
    "text": "{\"type\":\"shutdown_request\"}",
    "timestamp": "2026-01-01T00:00:01.000Z",
    "read": true
  }
]"#
        .to_vec(),
        b"[]".to_vec(),
    ]
}

#[test]
fn fuzz_mailbox_json() {
    // Any bytes are an inbox or Corrupt with a 1-based position; an inbox that parses
    // serializes to the same JSON value (unknown fields kept).
    let path = Path::new("teams/t/inboxes/a.json");
    fuzz("mailbox json", input(inbox_seeds()), |bytes| {
        match parse_inbox(path, &bytes) {
            Ok(messages) => {
                let written = serde_json::to_vec(&messages).unwrap();
                let again = parse_inbox(path, &written)
                    .map_err(|error| TestCaseError::fail(error.to_string()))?;
                prop_assert_eq!(again, messages);
            }
            Err(MailboxError::Corrupt { line, column, .. }) => {
                prop_assert!(line >= 1 && column >= 1)
            }
            Err(other) => return Err(TestCaseError::fail(format!("unexpected {other}"))),
        }
        Ok(())
    });
}

// ---------------------------------------------------------------- price tables

fn price_seeds() -> Vec<Vec<u8>> {
    let built_in = std::fs::read(repo_root().join("pricing/anthropic.toml")).unwrap();
    vec![
        built_in,
        b"[models.\"m-1\"]\naliases = [\"m\"]\ninput = 2.0\ncache_write_5m = 2.5\n\
          cache_write_1h = 4.0\ncache_read = 0.2\noutput = 10.0\n\n\
          [models.\"m-1\".long_context]\nthreshold_tokens = 100\ninput = 4.0\n\
          cache_write_5m = 5.0\ncache_write_1h = 8.0\ncache_read = 0.4\noutput = 15.0\n"
            .to_vec(),
    ]
}

#[test]
fn fuzz_price_table() {
    // Any text is a price table whose every cost is finite, or an Invalid error with a
    // 1-based position.
    let most = Usage::from_response(u64::MAX, u64::MAX, u64::MAX, u64::MAX / 2, u64::MAX);
    fuzz("price table", input(price_seeds()), |bytes| {
        let text = text(&bytes);
        match PriceTable::parse("p.toml", &text) {
            Ok(table) => {
                for id in table.model_ids() {
                    let prices = table.lookup(id).unwrap();
                    let mut tiers = vec![prices.rates];
                    tiers.extend(prices.long_context.map(|long| long.rates));
                    for rates in tiers {
                        prop_assert!(rates.output <= RATE_USD_PER_MTOK_MAX);
                        prop_assert!(rates.cost_usd(&most).is_finite(), "{id}: {rates:?}");
                    }
                }
            }
            Err(PricingError::Invalid { line, column, .. }) => {
                prop_assert!(line >= 1 && column >= 1)
            }
            Err(other) => return Err(TestCaseError::fail(format!("unexpected {other}"))),
        }
        Ok(())
    });
}
