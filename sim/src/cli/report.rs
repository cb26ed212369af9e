//! `--report DIR` on the sweeps, and `coordsim report`, which renders one run's
//! timeline on demand.
//!
//! Every report file goes through the one `-o` writer ([`super::output_file`]): an
//! existing file is refused without `--force`, a symbolic link is never followed,
//! and a file is written whole or not at all.

use anyhow::{bail, Context, Result};
use clap::Args;
use coord_sim::report::{
    read_trace_file, report_files, timeline_html, ReportFile, Rerun, Summary, TimelineEvent,
    TimelineHeading,
};
use coord_sim::run::{repro_command, run_seed};
use coord_sim::scenario::LoadedScenario;
use coord_sim::sweep::load_all;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::output_file::{scenario_inputs, OutputFile};
use super::stdout::write_stdout;
use super::sweep_args::{run_options, WorldArgs};

/// The folder `--report` without a value writes under, one subfolder per sweep.
const REPORTS_DIR: &str = "reports";

/// `--report [DIR]` and its `--force`.
#[derive(Debug, Args)]
pub struct ReportDirArgs {
    /// Write a report: `summary.json`, `junit.xml`, `index.html` and a timeline per
    /// failing seed (at most 50) under `runs/`. Without DIR, under
    /// `reports/<UTC time>/`.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    report: Option<Option<PathBuf>>,
    /// Let `--report` replace the files of an earlier report in DIR.
    #[arg(long, requires = "report")]
    force: bool,
}

impl ReportDirArgs {
    /// Whether a report was asked for.
    pub fn wanted(&self) -> bool {
        self.report.is_some()
    }

    /// Writes the report of `summary` when one was asked for, and returns how long
    /// that took.
    pub fn write(
        &self,
        summary: &Summary,
        scenarios: &[LoadedScenario],
        rerun: &Rerun<'_>,
    ) -> Result<Duration> {
        let Some(dir) = &self.report else {
            return Ok(Duration::ZERO);
        };
        let started = Instant::now();
        let dir = dir.clone().unwrap_or_else(default_report_dir);
        let files = report_files(summary, rerun);
        let inputs: Vec<PathBuf> = scenarios.iter().flat_map(scenario_inputs).collect();
        write_report_dir(&dir, &files, &inputs, self.force)?;
        Ok(started.elapsed())
    }
}

/// `reports/<UTC time>`, e.g. `reports/20261124T210501Z`.
fn default_report_dir() -> PathBuf {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    Path::new(REPORTS_DIR).join(utc_stamp(seconds))
}

/// Unix seconds as `YYYYMMDDTHHMMSSZ` (the proleptic Gregorian calendar, UTC).
fn utc_stamp(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let of_day = unix_seconds % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Writes `files` under `dir`, each through the `-o` writer.
pub fn write_report_dir(
    dir: &Path,
    files: &[ReportFile],
    inputs: &[PathBuf],
    force: bool,
) -> Result<()> {
    for file in files {
        let path = dir.join(&file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("{}: cannot create the folder", folder.display()))?;
        }
        OutputFile::new(&path, &[], force)
            .and_inputs(inputs.iter().cloned())
            .write(file.text.as_bytes())?;
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A trace written by `coordsim replay --trace` (`*.jsonl`), or a scenario file
    /// to run.
    input: PathBuf,
    /// The seed to run, when the input is a scenario.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Swarm mode, as the seed was run in the sweep.
    #[arg(long)]
    swarm: bool,
    #[command(flatten)]
    world: WorldArgs,
    /// Write the timeline's HTML to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Let `-o` replace an existing file.
    #[arg(long, requires = "output")]
    force: bool,
}

/// Whether `path` names a trace file rather than a scenario.
fn is_trace_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension == "jsonl" || extension == "json")
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let mut inputs = vec![args.input.clone()];
    let (html, failed) = if is_trace_file(&args.input) {
        if args.seed.is_some() || args.swarm {
            bail!("--seed and --swarm choose a run of a scenario; a trace file is one run already");
        }
        if let Some(output) = &args.output {
            OutputFile::new(output, &[&args.input], args.force).check()?;
        }
        let events = read_trace_file(&args.input)?;
        let heading = TimelineHeading {
            scenario: args.input.display().to_string(),
            ..TimelineHeading::default()
        };
        (timeline_html(&heading, &events), false)
    } else {
        let Some(seed) = args.seed else {
            bail!("{}: a scenario needs --seed N", args.input.display());
        };
        let scenarios = load_all(std::slice::from_ref(&args.input))?;
        let [scenario] = scenarios.as_slice() else {
            bail!(
                "report renders one scenario, but {} holds {}",
                args.input.display(),
                scenarios.len()
            );
        };
        inputs.extend(scenario_inputs(scenario));
        if let Some(output) = &args.output {
            OutputFile::new(output, &[], args.force)
                .and_inputs(inputs.iter().cloned())
                .check()?;
        }
        let options = run_options(args.swarm, &args.world);
        let run = run_seed(scenario, seed, &options)?;
        let events: Vec<TimelineEvent> = run.trace.iter().map(TimelineEvent::of_entry).collect();
        let heading = TimelineHeading {
            scenario: scenario.path.display().to_string(),
            seed,
            violations: run
                .failures
                .iter()
                .map(|violation| (violation.invariant.to_owned(), violation.detail.clone()))
                .collect(),
            repro: Some(repro_command(&scenario.path, seed, &options)),
        };
        (timeline_html(&heading, &events), !run.failures.is_empty())
    };
    match &args.output {
        Some(output) => OutputFile::new(output, &[], args.force)
            .and_inputs(inputs)
            .write(html.as_bytes())?,
        None => write_stdout(&html)?,
    }
    // The page is written either way; the status says whether the run failed.
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::utc_stamp;

    #[test]
    fn report_folders_are_named_by_utc_time() {
        // Goal: the default report folder's name is the UTC time, in calendar order.
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
        assert_eq!(utc_stamp(1_795_554_301), "20261124T210501Z");
    }
}
