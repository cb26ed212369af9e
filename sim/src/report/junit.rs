//! `junit.xml`: a sweep in the JUnit XML format that CI systems read (GitHub
//! Actions' test reporters, GitLab's `artifacts:reports:junit`, Jenkins' JUnit
//! plugin).
//!
//! The shape is the common subset of those readers' schema (Jenkins' `junit-10.xsd`,
//! which GitLab and the Actions reporters also accept): a `<testsuites>` root, one
//! `<testsuite>` per scenario file, and in it
//!
//! - one `<testcase>` per failing seed, holding a `<failure>` (or an `<error>` when
//!   the run could not be carried out, invariant `harness`) whose `message` is the
//!   invariant and the detail, and whose text adds the repro and shrink commands;
//! - one `<testcase>` for all of the scenario's passing seeds together, so a sweep
//!   of thousands of seeds stays a small file.
//!
//! The XML is written by quick-xml, which escapes every attribute and text.

use quick_xml::events::BytesText;
use quick_xml::Writer;
use std::collections::BTreeMap;

use super::summary::Summary;
use crate::sweep::Failure;

/// The invariant a run that could not be carried out is reported under.
const HARNESS: &str = "harness";

/// The summary as a JUnit XML document.
pub fn junit_xml(summary: &Summary) -> String {
    let mut failures_by_scenario: BTreeMap<&str, BTreeMap<u64, Vec<&Failure>>> = BTreeMap::new();
    for failure in summary.failures() {
        failures_by_scenario
            .entry(failure.scenario.as_str())
            .or_default()
            .entry(failure.seed)
            .or_default()
            .push(failure);
    }
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    let declaration = quick_xml::events::BytesDecl::new("1.0", Some("UTF-8"), None);
    let suites = summary.seeds_per_scenario();
    let failing_seeds = |scenario: &str| {
        failures_by_scenario
            .get(scenario)
            .map_or(0, |seeds| seeds.len() as u64)
    };
    let (mut tests, mut failed, mut errors) = (0u64, 0u64, 0u64);
    for suite in &suites {
        let (suite_failed, suite_errors) =
            failed_and_errors(failures_by_scenario.get(suite.scenario));
        let passed = suite
            .seeds_run
            .saturating_sub(failing_seeds(suite.scenario));
        tests += suite_failed + suite_errors + u64::from(passed > 0);
        failed += suite_failed;
        errors += suite_errors;
    }
    writer
        .write_event(quick_xml::events::Event::Decl(declaration))
        .expect("writing to memory cannot fail");
    writer
        .create_element("testsuites")
        .with_attribute(("name", "coordsim"))
        .with_attribute(("tests", tests.to_string().as_str()))
        .with_attribute(("failures", failed.to_string().as_str()))
        .with_attribute(("errors", errors.to_string().as_str()))
        .with_attribute(("time", seconds(summary.wall_seconds).as_str()))
        .write_inner_content(|writer| {
            for suite in &suites {
                let seeds = failures_by_scenario.get(suite.scenario);
                let (suite_failed, suite_errors) = failed_and_errors(seeds);
                let passed = suite
                    .seeds_run
                    .saturating_sub(failing_seeds(suite.scenario));
                let suite_tests = suite_failed + suite_errors + u64::from(passed > 0);
                writer
                    .create_element("testsuite")
                    .with_attribute(("name", suite.scenario))
                    .with_attribute(("tests", suite_tests.to_string().as_str()))
                    .with_attribute(("failures", suite_failed.to_string().as_str()))
                    .with_attribute(("errors", suite_errors.to_string().as_str()))
                    .with_attribute(("skipped", "0"))
                    .write_inner_content(|writer| {
                        if passed > 0 {
                            let name = passing_name(summary, passed, suite.first_and_last);
                            writer
                                .create_element("testcase")
                                .with_attribute(("name", name.as_str()))
                                .with_attribute(("classname", suite.scenario))
                                .write_empty()?;
                        }
                        for (seed, failures) in seeds.into_iter().flatten() {
                            write_failing_seed(writer, suite.scenario, *seed, failures)?;
                        }
                        Ok(())
                    })?;
            }
            Ok(())
        })
        .expect("writing to memory cannot fail");
    let mut xml = String::from_utf8(writer.into_inner()).expect("the XML is UTF-8");
    xml.push('\n');
    xml
}

/// How many of a scenario's failing seeds failed a check, and how many could not
/// be run.
fn failed_and_errors(seeds: Option<&BTreeMap<u64, Vec<&Failure>>>) -> (u64, u64) {
    let mut counts = (0, 0);
    for failures in seeds.into_iter().flat_map(BTreeMap::values) {
        if is_error(failures) {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }
    counts
}

/// A seed is an error, not a failure, when it could not be run at all.
fn is_error(failures: &[&Failure]) -> bool {
    failures.iter().all(|failure| failure.invariant == HARNESS)
}

/// `passing seeds 0..199 (shard 2/3): 65 seeds`.
fn passing_name(summary: &Summary, passed: u64, first_and_last: Option<(u64, u64)>) -> String {
    let shard = match summary.shard.as_str() {
        "1/1" => String::new(),
        shard => format!(" (shard {shard})"),
    };
    let span = match first_and_last {
        Some((first, last)) => format!("{first}..={last}"),
        None => String::from("none"),
    };
    format!("passing seeds of {span}{shard}: {passed}")
}

/// One failing seed's testcase: a `<failure>` per broken invariant, or one
/// `<error>` when the run could not be carried out.
fn write_failing_seed<W: std::io::Write>(
    writer: &mut Writer<W>,
    scenario: &str,
    seed: u64,
    failures: &[&Failure],
) -> std::io::Result<()> {
    let name = format!("seed {seed}");
    let element = if is_error(failures) {
        "error"
    } else {
        "failure"
    };
    // Jenkins' schema allows one failure or error per testcase: the seed's first
    // broken invariant is its type, and the text lists them all.
    let first = failures.first().expect("a failing seed has a failure");
    let message: Vec<String> = failures
        .iter()
        .map(|failure| format!("{}: {}", failure.invariant, failure.detail))
        .collect();
    let mut text = String::new();
    for failure in failures {
        text += &format!("{}: {}\n", failure.invariant, failure.detail);
    }
    text += &format!("repro: {}\n", first.repro);
    if let Some(shrink) = &first.shrink {
        text += &format!("shrink: {shrink}\n");
    }
    writer
        .create_element("testcase")
        .with_attribute(("name", name.as_str()))
        .with_attribute(("classname", scenario))
        .write_inner_content(|writer| {
            writer
                .create_element(element)
                .with_attribute(("message", message.join("; ").as_str()))
                .with_attribute(("type", first.invariant.as_str()))
                .write_text_content(BytesText::new(&text))?;
            Ok(())
        })?;
    Ok(())
}

/// Seconds as JUnit writes them: a decimal number.
fn seconds(value: f64) -> String {
    format!("{:.3}", value.max(0.0))
}
