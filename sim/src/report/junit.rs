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

use quick_xml::escape::partial_escape;
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
                    .with_attribute(("name", xml_safe(suite.scenario).as_str()))
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
                                .with_attribute(("classname", xml_safe(suite.scenario).as_str()))
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
        .with_attribute(("classname", xml_safe(scenario).as_str()))
        .write_inner_content(|writer| {
            writer
                .create_element(element)
                .with_attribute(("message", xml_safe(&message.join("; ")).as_ref()))
                .with_attribute(("type", first.invariant.as_str()))
                // Only `<`, `>` and `&` are escaped in the body: quotes stay as
                // they are, for readers that handle few entities.
                .write_text_content(BytesText::from_escaped(partial_escape(xml_safe(&text))))?;
            Ok(())
        })?;
    Ok(())
}

/// `text` with the characters XML 1.0 cannot hold, even escaped (control
/// characters but tab, newline and carriage return), replaced by U+FFFD.
fn xml_safe(text: &str) -> String {
    text.chars()
        .map(|character| match character {
            '\t' | '\n' | '\r' => character,
            control if control < ' ' => char::REPLACEMENT_CHARACTER,
            other => other,
        })
        .collect()
}

/// Seconds as JUnit writes them: a decimal number.
fn seconds(value: f64) -> String {
    format!("{:.3}", value.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunCounts, SeedRange};

    fn failure(seed: u64, invariant: &str, detail: &str) -> Failure {
        Failure {
            scenario: "a <b> & \"c\".toml".to_owned(),
            seed,
            invariant: invariant.to_owned(),
            detail: detail.to_owned(),
            repro: format!("coordsim run 'a <b> & \"c\".toml' --seed {seed}"),
            repro_cargo: None,
            shrink: None,
            shrink_cargo: None,
        }
    }

    #[test]
    fn a_harness_seed_is_an_error_and_markup_in_text_survives() {
        // Goal: a seed that could not be run is a JUnit <error>, a broken invariant
        // a <failure>, and names and details holding XML's special characters read
        // back as written. Method: a summary of seeds 0..3 with one of each,
        // parsed back by a JUnit consumer (junit-parser).
        let summary = Summary {
            line_type: None,
            scenarios: 1,
            scenario_files: vec!["a <b> & \"c\".toml".to_owned()],
            seeds: SeedRange { start: 0, end: 3 },
            shard: "1/1".to_owned(),
            skipped: vec![],
            seeds_run: 3,
            seeds_failed: 2,
            wall_seconds: 1.5,
            seeds_per_second: 2.0,
            sim_seconds: 3.0,
            sim_seconds_per_wall_second: 2.0,
            interrupted: false,
            failures: Some(vec![
                failure(0, "harness", "cannot set up <world>"),
                failure(2, "notify-once", "task \"x\" & <y> notified twice"),
                failure(2, "liveness", "a bell \u{7} rang"),
            ]),
            cost_usd: 0.0,
            prompt_tokens: 0,
            cache_read_tokens: 0,
            cache_hit_ratio: 0.0,
            coverage: Default::default(),
            counts: RunCounts::default(),
        };
        let xml = junit_xml(&summary);
        let parsed = junit_parser::from_reader(xml.as_bytes()).expect("valid JUnit XML");
        assert_eq!((parsed.tests, parsed.failures, parsed.errors), (3, 1, 1));
        let suite = &parsed.suites[0];
        assert_eq!(suite.name, "a <b> & \"c\".toml");
        let names: Vec<&str> = suite
            .cases
            .iter()
            .map(|case| case.original_name.as_str())
            .collect();
        assert_eq!(names, ["passing seeds of 0..=2: 1", "seed 0", "seed 2"]);
        let junit_parser::TestStatus::Error(error) = &suite.cases[1].status else {
            panic!("seed 0 is an error: {:?}", suite.cases[1].status);
        };
        assert_eq!(error.error_type, "harness");
        let junit_parser::TestStatus::Failure(failed) = &suite.cases[2].status else {
            panic!("seed 2 is a failure: {:?}", suite.cases[2].status);
        };
        assert_eq!(
            failed.message,
            "notify-once: task \"x\" & <y> notified twice; liveness: a bell \u{fffd} rang"
        );
        // junit-parser drops the entities of a text body (it reads only their
        // neighbours), so the repro is checked by its plain parts; the attributes
        // above read back whole.
        assert!(
            failed.text.starts_with("notify-once: task"),
            "{:?}",
            failed.text
        );
        assert!(
            failed.text.contains("repro: coordsim run"),
            "{:?}",
            failed.text
        );
        assert!(failed.text.contains("--seed 2"), "{:?}", failed.text);
        assert!(
            xml.contains("a &lt;b&gt; &amp; &quot;c&quot;.toml"),
            "{xml}"
        );
    }
}
