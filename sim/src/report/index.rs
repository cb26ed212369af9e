//! `index.html`: a sweep at a glance. The summary, what the runs survived, a table
//! of failures with their repro and shrink commands and a link to each rendered
//! timeline, and the coverage of the runtime's probes.

use std::collections::BTreeSet;

use super::page::{escape, page};
use super::summary::Summary;
use super::timeline_path;

/// Styles of the index alone.
const STYLE: &str = "#filter{margin:6px 0;padding:3px;width:320px}";

/// Hides the failure rows that do not hold the filter's text.
const FILTER_SCRIPT: &str = "<script>\
(function(){var f=document.getElementById('filter');if(!f)return;\
f.addEventListener('input',function(){var q=f.value.toLowerCase();\
document.querySelectorAll('tr.failure').forEach(function(r){\
r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':'';});});})();\
</script>";

/// The index page of a report. `timelines` holds the (scenario, seed) pairs whose
/// timeline was rendered into `runs/`.
pub fn index_html(summary: &Summary, timelines: &BTreeSet<(String, u64)>) -> String {
    let mut body = String::new();
    let verdict = if summary.seeds_failed == 0 {
        "<span class=\"pass\">PASS</span>"
    } else {
        "<span class=\"fail\">FAIL</span>"
    };
    body += &format!("<h1>coordsim sweep: {verdict}</h1>\n");
    body += "<table id=\"summary\">\n";
    let rows = [
        ("scenarios", summary.scenarios.to_string()),
        (
            "seeds",
            format!(
                "{}..{} (shard {})",
                summary.seeds.start, summary.seeds.end, summary.shard
            ),
        ),
        ("seeds run", summary.seeds_run.to_string()),
        ("seeds failed", summary.seeds_failed.to_string()),
        ("interrupted", summary.interrupted.to_string()),
        ("wall time", format!("{:.2} s", summary.wall_seconds)),
        ("simulated time", format!("{:.1} s", summary.sim_seconds)),
        ("model cost", format!("${:.4}", summary.cost_usd)),
        (
            "cache hit ratio",
            format!("{:.1} %", summary.cache_hit_ratio * 100.0),
        ),
    ];
    for (name, value) in rows {
        body += &format!("<tr><th>{name}</th><td>{}</td></tr>\n", escape(&value));
    }
    body += "</table>\n";
    for skipped in &summary.skipped {
        body += &format!("<p>skipped: {}</p>\n", escape(skipped));
    }

    body += "<h2>What the runs survived</h2>\n<table id=\"counts\">\n";
    let counts = &summary.counts;
    body += &format!(
        "<tr><th>faults fired</th><td>{}</td></tr>\n",
        counts.faults_fired()
    );
    for (kind, fired) in &counts.faults_fired_by_kind {
        body += &format!(
            "<tr><th>&nbsp;&nbsp;{}</th><td>{fired}</td></tr>\n",
            escape(kind)
        );
    }
    body += &format!(
        "<tr><th>tasks killed</th><td>{}</td></tr>\n\
         <tr><th>messages lost loudly</th><td>{}</td></tr>\n\
         <tr><th>cache breaks</th><td>{}</td></tr>\n</table>\n",
        counts.tasks_killed, counts.messages_lost_loudly, counts.cache_breaks
    );

    let failures = summary.failures();
    body += &format!("<h2>Failures ({})</h2>\n", failures.len());
    if failures.is_empty() {
        body += "<p id=\"no-failures\">No seed failed.</p>\n";
    } else {
        body += "<input id=\"filter\" placeholder=\"filter failures\">\n\
                 <table id=\"failures\"><tr><th>scenario</th><th>seed</th><th>invariant</th>\
                 <th>detail</th><th>repro and shrink</th><th>timeline</th></tr>\n";
        for failure in failures {
            let key = (failure.scenario.clone(), failure.seed);
            let timeline = if timelines.contains(&key) {
                let path = timeline_path(&failure.scenario, failure.seed);
                format!("<a class=\"timeline\" href=\"{0}\">{0}</a>", escape(&path))
            } else {
                String::from("not rendered")
            };
            let shrink = failure
                .shrink
                .as_ref()
                .map(|shrink| format!("<br><code class=\"shrink\">{}</code>", escape(shrink)))
                .unwrap_or_default();
            body += &format!(
                "<tr class=\"failure\"><td>{}</td><td>{}</td><td class=\"fail\">{}</td>\
                 <td>{}</td><td><code class=\"repro\">{}</code>{shrink}</td><td>{timeline}</td></tr>\n",
                escape(&failure.scenario),
                failure.seed,
                escape(&failure.invariant),
                escape(&failure.detail),
                escape(&failure.repro),
            );
        }
        body += "</table>\n";
    }

    if !summary.coverage.is_empty() {
        let reached = summary.coverage.values().filter(|hits| **hits > 0).count();
        body += &format!(
            "<h2>Probe coverage: {reached} of {} reached</h2>\n<table id=\"coverage\">\n",
            summary.coverage.len()
        );
        for (probe, hits) in &summary.coverage {
            let class = if *hits == 0 { " class=\"fail\"" } else { "" };
            body += &format!(
                "<tr><th>{}</th><td{class}>{hits}</td></tr>\n",
                escape(probe)
            );
        }
        body += "</table>\n";
    }
    body += FILTER_SCRIPT;
    page("coordsim report", STYLE, &body)
}
