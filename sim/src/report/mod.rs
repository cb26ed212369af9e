//! Reports of a sweep for CI systems and for people: what `--report DIR` writes.
//!
//! A report directory holds
//!
//! - `summary.json`: the [`Summary`], the object `run --json` prints;
//! - `junit.xml`: the sweep as JUnit XML for CI systems ([`junit_xml`]);
//! - `index.html`: the summary, the failures with their repro and shrink commands,
//!   what the runs survived and the probes' coverage ([`index_html`]);
//! - `runs/<scenario>-<seed>.html`: the timeline of each failing seed
//!   ([`timeline_html`]), at most [`TIMELINES_MAX`] of them, each seed run again to get
//!   its trace, so a sweep keeps no traces and a report of many failures stays
//!   cheap.
//!
//! Everything here turns data into text; the command line writes the files.
//! [`merge`] puts the summaries of a sweep's shards back together.
//! [`RunCounts`] counts what a run survived; [`read_trace_file`] reads a
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

use crate::run::{run_seed, RunOptions, SeedRun};
use crate::scenario::LoadedScenario;
use crate::sweep::Failure;

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

/// How a report gets a failing seed's run again, for its timeline: `None` when it
/// cannot (the scenario is not at hand, or the run could not be carried out).
pub type Rerun<'a> = dyn Fn(&Failure) -> Option<SeedRun> + 'a;

/// Reruns a failure's seed from the scenario it names among `scenarios`, with
/// `options`: the [`Rerun`] of a sweep.
pub fn rerun_in<'a>(
    scenarios: &'a [LoadedScenario],
    options: &'a RunOptions,
) -> impl Fn(&Failure) -> Option<SeedRun> + 'a {
    move |failure| {
        let scenario = scenarios
            .iter()
            .find(|scenario| scenario.path.display().to_string() == failure.scenario)?;
        run_seed(scenario, failure.seed, options).ok()
    }
}

/// Every file of the report of `summary`, rendering the timelines of its first
/// [`TIMELINES_MAX`] failing seeds from their runs again (`rerun`; a seed it
/// cannot run gets no timeline).
pub fn report_files(summary: &Summary, rerun: &Rerun<'_>) -> Vec<ReportFile> {
    let mut files = Vec::new();
    let mut rendered = BTreeSet::new();
    let mut seeds_seen = BTreeSet::new();
    for failure in summary.failures() {
        let key = (failure.scenario.clone(), failure.seed);
        if !seeds_seen.insert(key.clone()) || seeds_seen.len() > TIMELINES_MAX {
            continue;
        }
        let Some(run) = rerun(failure) else {
            continue;
        };
        files.push(ReportFile {
            path: timeline_path(&failure.scenario, failure.seed),
            text: timeline_of_run(&run, failure),
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

/// The timeline page of a failing seed's run.
fn timeline_of_run(run: &SeedRun, failure: &Failure) -> String {
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
    timeline_html(&heading, &events)
}
