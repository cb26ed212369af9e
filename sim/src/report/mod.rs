//! Reports of a sweep for CI systems and for people: what `--report DIR` writes.
//!
//! A report directory holds
//!
//! - `summary.json`: the [`Summary`], the object `run --json` prints;
//! - `junit.xml`: the sweep as JUnit XML for CI systems ([`junit`]);
//! - `index.html`: the summary, the failures with their repro and shrink commands,
//!   what the runs survived and the probes' coverage ([`index`]);
//! - `runs/<scenario>-<seed>.html`: the timeline of each failing seed
//!   ([`timeline`]), at most [`TIMELINES_MAX`] of them, each seed run again to get
//!   its trace, so a sweep keeps no traces and a report of many failures stays
//!   cheap.
//!
//! Everything here turns data into text; the command line writes the files.
//! [`merge`] puts the summaries of a sweep's shards back together.
//! [`RunCounts`] counts what a run survived ([`counts`]); [`trace_file`] reads a
//! trace back from `coordsim replay --trace` output.

mod counts;
mod index;
mod junit;
mod merge;
mod page;
mod summary;
mod timeline;
mod trace_file;

pub use counts::RunCounts;
pub use index::index_html;
pub use junit::junit_xml;
pub use merge::{merge, MergeError};
pub use summary::{ScenarioSeeds, SeedRange, Summary, SweepScope};
pub use timeline::{px_per_ms, timeline_html, TimelineEvent, TimelineHeading};
pub use trace_file::{read_trace_file, TraceFileError};

use std::collections::BTreeSet;

use crate::run::{run_seed, RunOptions};
use crate::scenario::LoadedScenario;

/// Timelines a report renders at most: the first failing seeds in scenario then
/// seed order. Each costs a rerun of its seed.
pub const TIMELINES_MAX: usize = 50;

/// Where a seed's timeline goes in a report, relative to its directory:
/// `runs/<scenario path, every character but letters, digits, `-` and `_` made
/// `-`>-<seed>.html`.
pub fn timeline_path(scenario: &str, seed: u64) -> String {
    let name: String = scenario
        .trim_start_matches("./")
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '-' || character == '_' {
                character
            } else {
                '-'
            }
        })
        .collect();
    format!("runs/{}-{seed}.html", name.trim_matches('-'))
}

/// One file of a report: its path relative to the report directory, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFile {
    /// `summary.json`, `runs/….html`, …
    pub path: String,
    /// The file's text.
    pub text: String,
}

/// Every file of the report of `summary`, rendering the timelines of its first
/// [`TIMELINES_MAX`] failing seeds by running them again from `scenarios` with
/// `options` (a failing seed whose scenario is not among `scenarios`, or that
/// cannot be run, gets no timeline).
pub fn report_files(
    summary: &Summary,
    scenarios: &[LoadedScenario],
    options: &RunOptions,
) -> Vec<ReportFile> {
    let mut files = Vec::new();
    let mut rendered = BTreeSet::new();
    let mut seeds_seen = BTreeSet::new();
    for failure in summary.failures() {
        let key = (failure.scenario.clone(), failure.seed);
        if !seeds_seen.insert(key.clone()) || seeds_seen.len() > TIMELINES_MAX {
            continue;
        }
        let Some(scenario) = scenarios
            .iter()
            .find(|scenario| scenario.path.display().to_string() == failure.scenario)
        else {
            continue;
        };
        let Ok(run) = run_seed(scenario, failure.seed, options) else {
            continue;
        };
        let events: Vec<TimelineEvent> = run.trace.iter().map(TimelineEvent::of_entry).collect();
        let heading = TimelineHeading {
            scenario: failure.scenario.clone(),
            seed: failure.seed,
            violations: run
                .failures
                .iter()
                .map(|violation| (violation.invariant.to_owned(), violation.detail.clone()))
                .collect(),
            repro: Some(failure.repro.clone()),
        };
        files.push(ReportFile {
            path: timeline_path(&failure.scenario, failure.seed),
            text: timeline_html(&heading, &events),
        });
        rendered.insert(key);
    }
    let mut summary_json =
        serde_json::to_string_pretty(summary).expect("a summary is strings and numbers");
    summary_json.push('\n');
    let mut all = vec![
        ReportFile {
            path: "summary.json".to_owned(),
            text: summary_json,
        },
        ReportFile {
            path: "junit.xml".to_owned(),
            text: junit_xml(summary),
        },
        ReportFile {
            path: "index.html".to_owned(),
            text: index_html(summary, &rendered),
        },
    ];
    all.append(&mut files);
    all
}
