//! A generated report in a real headless Chromium (Debian's `chromium` package,
//! installed by `scripts/install-chromium`).
//!
//! Without Chromium the tests say loudly that they were skipped, unless
//! `COORDSIM_REQUIRE_CHROMIUM=1` (set by `.ci/run`), when they fail instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::repo_root;

/// The failing-by-design scenario of the README's tour.
const DEMO: &str = "scenarios/demo/duplicate-notification.toml";

/// Set to 1, a missing Chromium fails the tests instead of skipping them.
const REQUIRE_VARIABLE: &str = "COORDSIM_REQUIRE_CHROMIUM";

/// Seconds a browser run may take on a loaded machine.
const BROWSER_SECONDS_MAX: &str = "120";

/// The Chromium binary on PATH, or `None` after a loud skip message.
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        let output = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .ok()?;
        let path = String::from_utf8(output.stdout).ok()?;
        (output.status.success() && !path.trim().is_empty()).then(|| PathBuf::from(path.trim()))
    });
    if found.is_none() {
        assert!(
            std::env::var(REQUIRE_VARIABLE).as_deref() != Ok("1"),
            "{REQUIRE_VARIABLE}=1 but no chromium on PATH: run scripts/install-chromium"
        );
        eprintln!(
            "\n!!! SKIPPED: no chromium on PATH, the browser test did not run. \
             Install it with scripts/install-chromium (or set {REQUIRE_VARIABLE}=1 to fail).\n"
        );
    }
    found
}

/// Runs headless Chromium over `page` with `extra` flags.
fn headless(chromium: &Path, page: &Path, extra: &[&str]) -> Output {
    let url = format!("file://{}", page.display());
    let output = Command::new("timeout")
        .arg(BROWSER_SECONDS_MAX)
        .arg(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,800",
        ])
        .args(extra)
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "chromium on {url}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The DOM of `page` after its scripts ran, and the browser's log.
fn dump_dom(chromium: &Path, page: &Path) -> (String, String) {
    let output = headless(chromium, page, &["--dump-dom"]);
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Asserts that the page ran without a JavaScript error: none trapped into the
/// DOM, none logged to the console.
fn assert_no_js_error(page: &Path, dom: &str, log: &str) {
    assert!(dom.contains("</html>"), "{}: no DOM dumped", page.display());
    assert!(
        !dom.contains("data-js-errors=\""),
        "{}: {dom}",
        page.display()
    );
    assert!(!log.contains("Uncaught"), "{}: {log}", page.display());
}

#[test]
fn a_report_renders_in_chromium_with_failures_lanes_and_fault_shading() {
    // Goal: issue 25's acceptance: the demo's report, opened in headless Chromium,
    // shows its failures, links to timelines whose lanes and fault shading are in
    // the DOM, and logs no JavaScript error; a screenshot is taken. Method: the
    // report of the demo over seeds 0..3; each page's DOM dumped after its scripts
    // ran; one timeline screenshot.
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["run", DEMO, "--seeds", "0..3", "--report"])
        .arg(&report)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));

    let index = report.join("index.html");
    let (dom, log) = dump_dom(&chromium, &index);
    assert_no_js_error(&index, &dom, &log);
    assert_eq!(dom.matches("<tr class=\"failure\"").count(), 3, "{dom}");
    let links: Vec<&str> = dom
        .split("class=\"timeline\" href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect();
    assert_eq!(links.len(), 3, "{dom}");

    for link in links {
        let timeline = report.join(link);
        let (dom, log) = dump_dom(&chromium, &timeline);
        assert_no_js_error(&timeline, &dom, &log);
        for lane in ["coordinator", "Find the auth bug.", "disk"] {
            assert!(
                dom.contains(&format!("data-lane=\"{lane}\"")),
                "{link}: lane {lane}"
            );
        }
        for kind in ["duplicate-notify", "model-api"] {
            assert!(
                dom.contains(&format!("class=\"fault\" data-kind=\"{kind}\"")),
                "{link}: fault {kind}"
            );
        }
        assert!(dom.contains("class=\"violation\""), "{link}");
    }

    let screenshot = dir.path().join("timeline.png");
    let flag = format!("--screenshot={}", screenshot.display());
    headless(&chromium, &report.join(link_of_seed(0)), &[&flag]);
    let size_bytes = std::fs::metadata(&screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(size_bytes > 1_000, "screenshot of {size_bytes} bytes");
}

#[test]
fn a_page_with_a_javascript_error_is_caught() {
    // Goal: the no-JavaScript-error check can fail: a report page whose script
    // throws carries `data-js-errors` in the dumped DOM. Method: the index page of
    // a report with a throwing script added before `</body>`.
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let output = Command::new(env!("CARGO_BIN_EXE_coordsim"))
        .args(["run", "scenarios/core/notify-once.toml", "--report"])
        .arg(&report)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let page = report.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        html.replace("</body>", "<script>no_such_function();</script></body>"),
    )
    .unwrap();
    let (dom, _) = dump_dom(&chromium, &broken);
    assert!(dom.contains("data-js-errors=\""), "{dom}");
    assert!(dom.contains("no_such_function"), "{dom}");
}

/// The timeline of the demo's `seed`, relative to a report's directory.
fn link_of_seed(seed: u64) -> String {
    coord_sim::report::timeline_path(DEMO, seed)
}
