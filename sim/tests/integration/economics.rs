//! The cost model of simulated runs: every model call priced through the simulated
//! prompt cache, and the comparisons of `scenarios/cost/`.

use coord_sim::cost::PriceTable;
use coord_sim::economics::{compare, EconomicsReport, Spend};
use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::LoadedScenario;
use coord_sim::trace::{SimEvent, TraceEvent};

use crate::repo_root;

fn load(name: &str) -> LoadedScenario {
    LoadedScenario::load(&repo_root().join("scenarios/cost").join(name)).unwrap()
}

fn report(name: &str) -> EconomicsReport {
    let report = compare(&load(name), 0, &PriceTable::built_in()).unwrap();
    for variant in &report.variants {
        assert!(
            variant.failures.is_empty(),
            "{name} {}: {:?}",
            variant.variant,
            variant.failures
        );
    }
    report
}

fn totals<'r>(report: &'r EconomicsReport, variant: &str) -> &'r Spend {
    &report
        .variants
        .iter()
        .find(|v| v.variant == variant)
        .unwrap_or_else(|| panic!("no variant {variant}"))
        .cost
        .total
}

#[test]
fn economics_forks_cost_less_than_fresh_spawns_when_they_share_the_lead_prefix() {
    // Goal: a fork reads its parent's cached prefix, so three reviewers launched as
    // forks cost less and hit more than the same reviewers as fresh spawns.
    // Method: run scenarios/cost/fork-vs-fresh.toml's two variants under seed 0.
    let report = report("fork-vs-fresh.toml");
    let (fork, fresh) = (totals(&report, "fork"), totals(&report, "fresh"));
    assert!(fork.cost_usd < fresh.cost_usd, "{}", report.to_text());
    assert!(
        fork.cache_hit_ratio > fresh.cache_hit_ratio,
        "{}",
        report.to_text()
    );
    insta::assert_snapshot!(report.to_text());
}

#[test]
fn economics_one_hour_ttl_wins_when_gaps_exceed_five_minutes() {
    // Goal: with six-minute gaps between the lead's turns, 5-minute entries expire
    // and are written again; 1-hour entries are written once and read.
    // Method: run scenarios/cost/ttl-5m-vs-1h.toml's two variants under seed 0.
    let report = report("ttl-5m-vs-1h.toml");
    let (five, hour) = (totals(&report, "5m"), totals(&report, "1h"));
    assert!(hour.cost_usd < five.cost_usd, "{}", report.to_text());
    assert!(
        hour.cache_hit_ratio > five.cache_hit_ratio,
        "{}",
        report.to_text()
    );
    assert!(hour.usage.cache_creation_1h_input_tokens > 0);
    assert_eq!(hour.usage.cache_creation_5m_input_tokens, 0);
    assert_eq!(five.usage.cache_creation_1h_input_tokens, 0);
    insta::assert_snapshot!(report.to_text());
}

#[test]
fn economics_staggered_forks_hit_more_than_simultaneous_ones() {
    // Goal: an entry is readable only once the response that wrote it started, so
    // forks sent together each write their shared prefix, while staggered forks
    // read the first one's write.
    // Method: run scenarios/cost/simultaneous-vs-staggered.toml under seed 0.
    let report = report("simultaneous-vs-staggered.toml");
    let (together, staggered) = (
        totals(&report, "simultaneous"),
        totals(&report, "staggered"),
    );
    assert!(
        staggered.cache_hit_ratio > together.cache_hit_ratio,
        "{}",
        report.to_text()
    );
    assert!(
        staggered.cost_usd < together.cost_usd,
        "{}",
        report.to_text()
    );
    insta::assert_snapshot!(report.to_text());
}

#[test]
fn economics_an_edited_fork_system_prompt_is_reported_with_its_byte_offset() {
    // Goal: the deliberate edit to one fork's system prompt is a cache break that
    // names the agent, the request, the block and the byte offset, and only the
    // edited variant has it.
    // Method: run scenarios/cost/fork-system-edit.toml's variants under seed 0 and
    // read the breaks.
    let report = report("fork-system-edit.toml");
    let intact = &report.variants[0];
    let edited = &report.variants[1];
    assert!(intact.cost.cache_breaks.is_empty(), "{}", report.to_text());
    let [found] = edited.cost.cache_breaks.as_slice() else {
        panic!("expected one break: {}", report.to_text());
    };
    assert_eq!(found.agent, "Review src/storage/ and list its findings.");
    assert_eq!(found.call, 1);
    assert_eq!(found.section, "system");
    assert_eq!(found.cause, "prefix");
    // The edit appends to the lead's system text, so the first differing byte is
    // where that text used to end: tools, then the whole original text.
    let scenario = load("fork-system-edit.toml").scenario;
    let system_len_bytes = scenario.settings.system_prompt.unwrap().len() as u64;
    assert!(found.byte_offset > system_len_bytes);
    assert!(totals(&report, "edited").cost_usd > totals(&report, "intact").cost_usd);
    insta::assert_snapshot!(report.to_text());
}

#[test]
fn economics_the_run_report_carries_the_break_and_every_usage_has_the_api_shape() {
    // Goal: a plain run of the edit scenario reports the break in its per-run cost,
    // and each `model_billed` event's usage is the Messages API's block.
    // Method: run seed 0 as the sweep does and read the trace's JSON.
    let run = run_seed(&load("fork-system-edit.toml"), 0, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    assert_eq!(run.cost.cache_breaks.len(), 1);
    assert!(run
        .cost
        .to_text()
        .contains("cache break: Review src/storage/"));
    let mut billed = 0;
    for entry in &run.trace {
        if !matches!(entry.typed, TraceEvent::Sim(SimEvent::ModelBilled { .. })) {
            continue;
        }
        billed += 1;
        let event: serde_json::Value = serde_json::from_str(&entry.event_json()).unwrap();
        let usage = event["usage"].as_object().unwrap();
        let mut keys: Vec<&str> = usage.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "cache_creation",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "input_tokens",
                "output_tokens"
            ]
        );
        let split = usage["cache_creation"].as_object().unwrap();
        let five = split["ephemeral_5m_input_tokens"].as_u64().unwrap();
        let hour = split["ephemeral_1h_input_tokens"].as_u64().unwrap();
        assert_eq!(
            five + hour,
            usage["cache_creation_input_tokens"].as_u64().unwrap()
        );
    }
    assert_eq!(billed, run.cost.total.calls);
    assert!(run.cost.total.cost_usd > 0.0);
}

#[test]
fn economics_recorded_usage_wins_over_the_estimate() {
    // Goal: a turn whose script records `usage` reports exactly that usage.
    // Method: give the lead's first turn a recorded usage and read its event.
    let mut scenario = load("fork-vs-fresh.toml");
    let recorded = coord_runtime::world::Usage {
        input_tokens: 7,
        output_tokens: 11,
        ..Default::default()
    };
    std::sync::Arc::make_mut(&mut scenario.scenario.coordinator.turns)[0].usage = Some(recorded);
    let run = run_seed(&scenario, 0, &RunOptions::default()).unwrap();
    let first = run.trace.iter().find_map(|entry| match &entry.typed {
        TraceEvent::Sim(SimEvent::ModelBilled {
            agent,
            usage,
            usage_recorded,
            ..
        }) if agent == "coordinator" => Some((**usage, *usage_recorded)),
        _ => None,
    });
    assert_eq!(first, Some((recorded, true)));
}
