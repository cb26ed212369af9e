//! `coordsim merge`: the summaries (or report folders) of a sweep's shards put back
//! together into one summary and, with `--report`, one report
//! (`coord_sim::report::merge` says what is checked).

use anyhow::{Context, Result};
use clap::Args;
use coord_sim::report::{index_html, junit_xml, merge, timeline_path, ReportFile, Summary};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::output_file::OutputFile;
use super::report::write_report_dir;
use super::stdout::outln;

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' `summary.json` files (`run --json` output), or their `--report`
    /// folders.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Write the merged report to DIR: summary.json, junit.xml, index.html, and
    /// the timelines the shards' report folders hold.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Let `--report` replace the files of an earlier report in DIR.
    #[arg(long, requires = "report")]
    force: bool,
}

/// Why a summary file could not be read.
#[derive(Debug, thiserror::Error)]
enum SummaryFileError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}:{}: not a coordsim summary: {source}", path.display(), source.line(), source.column())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The summary file an input names: itself, or a report folder's `summary.json`.
fn summary_path(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join("summary.json")
    } else {
        input.to_owned()
    }
}

fn read_summary(path: &Path) -> Result<Summary, SummaryFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| SummaryFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| SummaryFileError::Parse {
        path: path.to_owned(),
        source,
    })
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let mut summaries = Vec::new();
    for input in &args.inputs {
        let path = summary_path(input);
        let summary = read_summary(&path)?;
        summaries.push((path, summary));
    }
    let merged = merge(&summaries)?;
    if let Some(dir) = &args.report {
        // The timelines the shards rendered, copied over.
        let mut timelines = Vec::new();
        let mut rendered = BTreeSet::new();
        for failure in merged.failures() {
            let relative = timeline_path(&failure.scenario, failure.seed);
            let key = (failure.scenario.clone(), failure.seed);
            if rendered.contains(&key) {
                continue;
            }
            let found = args
                .inputs
                .iter()
                .filter(|input| input.is_dir())
                .map(|input| input.join(&relative))
                .find(|path| path.is_file());
            if let Some(path) = found {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("{}: cannot read", path.display()))?;
                timelines.push(ReportFile {
                    path: relative,
                    text,
                });
                rendered.insert(key);
            }
        }
        let mut summary_json = serde_json::to_string_pretty(&merged)?;
        summary_json.push('\n');
        let mut files = vec![
            ReportFile {
                path: "summary.json".to_owned(),
                text: summary_json,
            },
            ReportFile {
                path: "junit.xml".to_owned(),
                text: junit_xml(&merged),
            },
            ReportFile {
                path: "index.html".to_owned(),
                text: index_html(&merged, &rendered),
            },
        ];
        files.append(&mut timelines);
        let inputs: Vec<PathBuf> = summaries.iter().map(|(path, _)| path.clone()).collect();
        // An input is never an output, even through `--force`.
        for file in &files {
            OutputFile::new(&dir.join(&file.path), &[], args.force)
                .and_inputs(inputs.iter().cloned())
                .check()?;
        }
        write_report_dir(dir, &files, &inputs, args.force)?;
    }
    outln!("{}", serde_json::to_string_pretty(&merged)?)?;
    Ok(if merged.seeds_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
