//! The timeline of one run (`runs/<scenario>-<seed>.html`): plain SVG written from
//! Rust, one self-contained page.
//!
//! Why plain SVG rather than an embedded charting library: a timeline here is lanes,
//! dots, arrows and shaded bands, a few hundred lines of drawing that need no
//! layout engine; writing the SVG from Rust keeps the page free of a vendored
//! library's hundreds of kilobytes, its licence and its updates, works with
//! JavaScript off, and makes the DOM the test reads the same as the one drawn.
//!
//! Layout:
//!
//! - one swimlane per actor of the trace (the simulator, the coordinator, each
//!   worker, the runtime, the tools, the disk host), plus one per task, which
//!   carries the runtime's events about that task;
//! - x is virtual time at a fixed scale chosen from the run's length and its number
//!   of events ([`px_per_ms`]), so a run of 1,000 events stays legible by
//!   scrolling sideways while the lane labels stay put (`position: sticky`); events
//!   of one lane at the same millisecond are set a few pixels apart so none hides
//!   another;
//! - spawns are arrows from the parent's lane to the task's lane, envelopes
//!   (notifications enqueued) arrows from the task's lane to the coordinator's;
//!   mailbox writes, model calls (coloured by their cache outcome: hit, miss or
//!   break), tools and disk writes are dots; every mark has a `<title>` tooltip
//!   with its time, actor and event;
//! - each fault that fired shades every lane from its firing to the run's heal
//!   (or a thin band when it fired after), coloured by kind, with a legend;
//! - the violations are listed at the top, and the lanes their details name are
//!   outlined in red.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

use super::page::{escape, page};
use crate::trace::TraceEntry;

/// One event of a run as the timeline reads it: from a run's trace
/// ([`TimelineEvent::of_entry`]) or from a line of `coordsim replay --trace`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEvent {
    /// Virtual time, ms since the run started.
    pub time_ms: u64,
    /// Who acted.
    pub actor: String,
    /// The event as a JSON object, its kind under `event`.
    pub event: Value,
}

impl TimelineEvent {
    /// The timeline's view of a trace entry.
    pub fn of_entry(entry: &TraceEntry) -> TimelineEvent {
        TimelineEvent {
            time_ms: entry.time_ms,
            actor: entry.actor.clone().into(),
            event: serde_json::from_str(&entry.event_json()).expect("an event is JSON"),
        }
    }

    /// The event's kind: `task_spawned`, `fault_fired`, …
    fn kind(&self) -> &str {
        self.event["event"].as_str().unwrap_or("event")
    }

    /// A string field of the event.
    fn field(&self, name: &str) -> Option<&str> {
        self.event.get(name).and_then(Value::as_str)
    }
}

/// What a timeline shows besides its events.
#[derive(Debug, Clone, Default)]
pub struct TimelineHeading {
    /// The scenario file.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The broken invariants and their details.
    pub violations: Vec<(String, String)>,
    /// The command that reruns the seed.
    pub repro: Option<String>,
}

/// Width of the lane labels' column.
const LABEL_WIDTH_PX: f64 = 240.0;
/// Height of one lane.
const LANE_HEIGHT_PX: f64 = 26.0;
/// Room above the lanes for the time axis.
const AXIS_HEIGHT_PX: f64 = 24.0;
/// Space between events of one lane at the same millisecond.
const SAME_TIME_STEP_PX: f64 = 5.0;
/// Events of one lane at one millisecond past this many share the last position.
const SAME_TIME_STEPS_MAX: u64 = 24;
/// Bounds of the drawing's width, whatever the run.
const WIDTH_PX_MIN: f64 = 1_200.0;
const WIDTH_PX_MAX: f64 = 60_000.0;
/// Width given to each event when the scale is chosen: 1,000 events get 8,000 px.
const WIDTH_PX_PER_EVENT: f64 = 8.0;
/// Characters of an event's JSON shown in its tooltip.
const TOOLTIP_CHARS_MAX: usize = 400;

/// Colours of the fault kinds, given in sorted kind order.
const FAULT_COLOURS: [&str; 8] = [
    "#f4a261", "#e76f51", "#9b5de5", "#00bbf9", "#f15bb5", "#8ac926", "#ffca3a", "#6a4c93",
];

/// The timeline's scale: pixels per virtual millisecond, from the run's length and
/// its number of events: 8 px per event, between 1,200 and 60,000 px in all.
pub fn px_per_ms(duration_ms: u64, events: usize) -> f64 {
    let width_px = (events as f64 * WIDTH_PX_PER_EVENT).clamp(WIDTH_PX_MIN, WIDTH_PX_MAX);
    width_px / duration_ms.max(1) as f64
}

/// Whom a lane belongs to, in the order lanes are drawn.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LaneKind {
    Simulator,
    Coordinator,
    Agent,
    Task,
    Runtime,
    Disk,
}

/// The lane an event is drawn in: a task's lane for the runtime's events about a
/// task, the actor's lane otherwise.
fn lane_of(event: &TimelineEvent) -> (LaneKind, String) {
    if event.actor == "runtime" {
        if let Some(task) = event.field("task_id") {
            return (LaneKind::Task, format!("task {task}"));
        }
    }
    let kind = match event.actor.as_str() {
        "sim" => LaneKind::Simulator,
        "coordinator" => LaneKind::Coordinator,
        "disk" => LaneKind::Disk,
        "runtime" | "tools" => LaneKind::Runtime,
        _ => LaneKind::Agent,
    };
    (kind, event.actor.clone())
}

/// The CSS class of an event's mark.
fn mark_class(event: &TimelineEvent) -> &'static str {
    match event.kind() {
        "task_spawned" => "spawn",
        "notification_enqueued" | "envelopes_accepted" | "notifications_delivered" => "envelope",
        "mailbox_written" | "mailbox_acked" | "messages_delivered" | "message_queued" => "message",
        "mailbox_write_failed" => "message lost",
        "fault_fired" => "fault-mark",
        "model_billed" => {
            if !event.event["cache_break"].is_null() {
                "cache-break"
            } else if event.event["usage"]["cache_read_input_tokens"]
                .as_u64()
                .is_some_and(|tokens| tokens > 0)
            {
                "cache-hit"
            } else {
                "cache-miss"
            }
        }
        "model_called" => "model",
        "disk_write" => "disk",
        "task_transitioned" => "task",
        "tool_failed" | "tool_call_refused" => "tool-failed",
        kind if kind.starts_with("tool") => "tool",
        _ => "other",
    }
}

/// Styles of the timeline.
const STYLE: &str = ".scroll{overflow-x:auto;border:1px solid #ccc}.row{display:flex;width:max-content}\
.labels{position:sticky;left:0;z-index:1;background:#fff;flex:none;border-right:1px solid #999}\
.lane-band{fill:#fafafa}.lane-band.odd{fill:#f0f0f0}.lane-violation{stroke:#d00;stroke-width:2;fill:#fde8e8}\
circle{stroke:#333;stroke-width:.5}.spawn{fill:#2a9d8f}.envelope{fill:#264653}.message{fill:#e9c46a}\
.lost{fill:#d00}.cache-hit{fill:#2b9348}.cache-miss{fill:#adb5bd}.cache-break{fill:#d00000}\
.model{fill:#fff}.disk{fill:#ccc}.task{fill:#457b9d}.tool{fill:#90be6d}.tool-failed{fill:#f94144}\
.other{fill:#999}.fault-mark{fill:#000}.in-violation{stroke:#d00;stroke-width:1.5}\
line.spawn-arrow{stroke:#2a9d8f;stroke-width:1.2}line.envelope-arrow{stroke:#264653;stroke-width:1.2;stroke-dasharray:4 2}\
.fault{opacity:.25}.axis text,.labels text{font:11px monospace}.axis line{stroke:#bbb}\
.legend span{display:inline-block;margin-right:12px}.swatch{display:inline-block;width:12px;height:12px;\
vertical-align:middle;margin-right:4px;border:1px solid #666}ul#violations{color:#b00020}";

/// The timeline page of one run.
pub fn timeline_html(heading: &TimelineHeading, events: &[TimelineEvent]) -> String {
    let duration_ms = events.iter().map(|event| event.time_ms).max().unwrap_or(0) + 1;
    let scale = px_per_ms(duration_ms, events.len());
    let x_of = |time_ms: u64| time_ms as f64 * scale;

    // Lanes in kind order, then in order of first appearance.
    let mut first_seen: BTreeMap<(LaneKind, String), usize> = BTreeMap::new();
    for (index, event) in events.iter().enumerate() {
        first_seen.entry(lane_of(event)).or_insert(index);
    }
    let mut lanes: Vec<(LaneKind, String)> = first_seen.keys().cloned().collect();
    lanes.sort_by_key(|lane| (lane.0.clone(), first_seen[lane]));
    let lane_index: BTreeMap<&str, usize> = lanes
        .iter()
        .enumerate()
        .map(|(index, (_, name))| (name.as_str(), index))
        .collect();
    let lane_y =
        |index: usize| AXIS_HEIGHT_PX + index as f64 * LANE_HEIGHT_PX + LANE_HEIGHT_PX / 2.0;
    let height_px = AXIS_HEIGHT_PX + lanes.len() as f64 * LANE_HEIGHT_PX + 4.0;
    let width_px = x_of(duration_ms) + SAME_TIME_STEP_PX * SAME_TIME_STEPS_MAX as f64 + 40.0;

    // The lanes a violation's detail names (a task id, an agent).
    let violating: BTreeSet<usize> = lanes
        .iter()
        .enumerate()
        .filter(|(_, (kind, name))| {
            let needle = name.strip_prefix("task ").unwrap_or(name);
            *kind != LaneKind::Simulator
                && *kind != LaneKind::Runtime
                && *kind != LaneKind::Disk
                && heading
                    .violations
                    .iter()
                    .any(|(_, detail)| detail.contains(needle))
        })
        .map(|(index, _)| index)
        .collect();

    let mut svg = String::new();
    // Lane bands.
    for index in 0..lanes.len() {
        let y = AXIS_HEIGHT_PX + index as f64 * LANE_HEIGHT_PX;
        let class = if violating.contains(&index) {
            "lane-band lane-violation"
        } else if index % 2 == 1 {
            "lane-band odd"
        } else {
            "lane-band"
        };
        svg += &format!(
            "<rect class=\"{class}\" x=\"0\" y=\"{y}\" width=\"{width_px:.0}\" height=\"{LANE_HEIGHT_PX}\"/>\n"
        );
    }
    // Faults, shaded by kind under the marks.
    let heal_ms = events
        .iter()
        .find(|event| event.kind() == "healed")
        .map(|event| event.time_ms);
    let fault_kinds: BTreeSet<&str> = events
        .iter()
        .filter(|event| event.kind() == "fault_fired")
        .filter_map(|event| event.field("kind"))
        .collect();
    let colour_of = |kind: &str| {
        let index = fault_kinds
            .iter()
            .position(|known| *known == kind)
            .unwrap_or(0);
        FAULT_COLOURS[index % FAULT_COLOURS.len()]
    };
    for event in events.iter().filter(|event| event.kind() == "fault_fired") {
        let kind = event.field("kind").unwrap_or("fault");
        let start = x_of(event.time_ms);
        let end = match heal_ms {
            Some(heal) if heal > event.time_ms => x_of(heal),
            _ => start + 6.0,
        };
        svg += &format!(
            "<rect class=\"fault\" data-kind=\"{kind}\" x=\"{start:.1}\" y=\"{AXIS_HEIGHT_PX}\" \
             width=\"{:.1}\" height=\"{:.0}\" fill=\"{}\"><title>fault {} at {}: {}</title></rect>\n",
            (end - start).max(6.0),
            lanes.len() as f64 * LANE_HEIGHT_PX,
            colour_of(kind),
            escape(kind),
            seconds(event.time_ms),
            escape(event.field("detail").unwrap_or_default()),
            kind = escape(kind),
        );
    }
    // The time axis.
    svg += "<g class=\"axis\">\n";
    let tick_ms = tick_step_ms(scale);
    let mut tick = 0;
    // Bounded: the ticks step by at least 1 ms up to the run's length.
    while tick <= duration_ms {
        let x = x_of(tick);
        svg += &format!(
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{height_px:.0}\"/>\
             <text x=\"{:.1}\" y=\"14\">{}</text>\n",
            AXIS_HEIGHT_PX - 4.0,
            x + 2.0,
            seconds(tick)
        );
        tick += tick_ms;
    }
    svg += "</g>\n";
    // Arrows: spawns and envelopes.
    let mut same_time: BTreeMap<(usize, u64), u64> = BTreeMap::new();
    let mut positions = Vec::with_capacity(events.len());
    for event in events {
        let (_, lane) = lane_of(event);
        let index = lane_index[lane.as_str()];
        let step = same_time.entry((index, event.time_ms)).or_default();
        let x = x_of(event.time_ms) + (*step).min(SAME_TIME_STEPS_MAX) as f64 * SAME_TIME_STEP_PX;
        *step += 1;
        positions.push((index, x));
    }
    for (event, (index, x)) in events.iter().zip(&positions) {
        let (from, to, class) = match event.kind() {
            "task_spawned" => {
                let parent = event.field("parent").unwrap_or("coordinator");
                let from = lane_index
                    .get(parent)
                    .or_else(|| lane_index.get(format!("task {parent}").as_str()))
                    .copied();
                (from, Some(*index), "spawn-arrow")
            }
            "notification_enqueued" => (
                Some(*index),
                lane_index.get("coordinator").copied(),
                "envelope-arrow",
            ),
            _ => continue,
        };
        let (Some(from), Some(to)) = (from, to) else {
            continue;
        };
        if from == to {
            continue;
        }
        svg += &format!(
            "<line class=\"{class}\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" \
             marker-end=\"url(#arrow)\"/>\n",
            lane_y(from),
            lane_y(to) + if to > from { -5.0 } else { 5.0 },
        );
    }
    // The marks, one group per lane.
    let mut by_lane: BTreeMap<usize, String> = BTreeMap::new();
    for (event, (index, x)) in events.iter().zip(&positions) {
        let class = mark_class(event);
        let violation = if violating.contains(index) {
            " in-violation"
        } else {
            ""
        };
        let mut json = event.event.to_string();
        if json.len() > TOOLTIP_CHARS_MAX {
            let cut = (0..=TOOLTIP_CHARS_MAX)
                .rev()
                .find(|at| json.is_char_boundary(*at))
                .unwrap_or(0);
            json.truncate(cut);
            json += "…";
        }
        by_lane.entry(*index).or_default().push_str(&format!(
            "<circle class=\"{class}{violation}\" cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\">\
             <title>{} {}: {}</title></circle>\n",
            lane_y(*index),
            seconds(event.time_ms),
            escape(&event.actor),
            escape(&json)
        ));
    }
    for (index, marks) in by_lane {
        svg += &format!(
            "<g class=\"lane\" data-lane=\"{}\">\n{marks}</g>\n",
            escape(&lanes[index].1)
        );
    }

    let mut labels = String::new();
    for (index, (kind, name)) in lanes.iter().enumerate() {
        let shown: String = name.chars().take(30).collect();
        let shown = if shown.len() < name.len() {
            shown + "…"
        } else {
            shown
        };
        labels += &format!(
            "<text class=\"lane-label\" data-kind=\"{:?}\" x=\"6\" y=\"{:.1}\">{}<title>{}</title></text>\n",
            kind,
            lane_y(index) + 4.0,
            escape(&shown),
            escape(name)
        );
    }

    let mut body = format!(
        "<h1>{} seed {}</h1>\n",
        escape(&heading.scenario),
        heading.seed
    );
    if heading.violations.is_empty() {
        body += "<p id=\"violations\" class=\"pass\">No violation.</p>\n";
    } else {
        body += "<ul id=\"violations\">\n";
        for (invariant, detail) in &heading.violations {
            body += &format!(
                "<li class=\"violation\"><b>{}</b>: {}</li>\n",
                escape(invariant),
                escape(detail)
            );
        }
        body += "</ul>\n";
    }
    if let Some(repro) = &heading.repro {
        body += &format!("<p>repro: <code>{}</code></p>\n", escape(repro));
    }
    body += &format!(
        "<p>{} events over {} of virtual time, {:.3} px per ms; scroll sideways, hover a mark for its event.</p>\n",
        events.len(),
        seconds(duration_ms - 1),
        scale
    );
    body += "<div class=\"legend\">";
    for (class, name) in [
        ("spawn", "spawn"),
        ("envelope", "envelope"),
        ("message", "mailbox write"),
        ("lost", "message lost"),
        ("cache-hit", "cache hit"),
        ("cache-miss", "cache miss"),
        ("cache-break", "cache break"),
        ("task", "task status"),
        ("tool", "tool"),
        ("disk", "disk write"),
    ] {
        body += &format!("<span><svg width=\"10\" height=\"10\"><circle class=\"{class}\" cx=\"5\" cy=\"5\" r=\"4\"/></svg> {name}</span>");
    }
    for kind in &fault_kinds {
        body += &format!(
            "<span class=\"fault-legend\"><i class=\"swatch\" style=\"background:{}\"></i>fault {}</span>",
            colour_of(kind),
            escape(kind)
        );
    }
    body += "</div>\n";
    body += &format!(
        "<div class=\"scroll\"><div class=\"row\">\
         <div class=\"labels\"><svg width=\"{LABEL_WIDTH_PX}\" height=\"{height_px:.0}\">{labels}</svg></div>\
         <svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width_px:.0}\" height=\"{height_px:.0}\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"#333\"/></marker></defs>\n{svg}</svg></div></div>\n"
    );
    page(
        &format!("{} seed {}", heading.scenario, heading.seed),
        STYLE,
        &body,
    )
}

/// Virtual ms as `12.345s`.
fn seconds(time_ms: u64) -> String {
    format!("{}.{:03}s", time_ms / 1000, time_ms % 1000)
}

/// A round tick interval (1, 2 or 5 times a power of ten ms) that puts ticks at
/// least 100 px apart.
fn tick_step_ms(px_per_ms: f64) -> u64 {
    let step_ms_min = (100.0 / px_per_ms).max(1.0);
    let mut decade: u64 = 1;
    // Bounded: the decade grows tenfold each pass until it overflows u64.
    loop {
        for factor in [1, 2, 5] {
            let step = decade.saturating_mul(factor);
            if step as f64 >= step_ms_min {
                return step;
            }
        }
        match decade.checked_mul(10) {
            Some(next) => decade = next,
            None => return decade,
        }
    }
}
