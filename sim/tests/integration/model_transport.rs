//! Runs whose runtime reaches its model through the production Anthropic provider,
//! over HTTP to the simulated API host (`[settings] model_transport`): the
//! scenario's model API faults reach the provider on the wire, and its retries show
//! in the trace as repeated calls at the delays the provider waited.

use std::collections::BTreeMap;

use coord_sim::run::{run_seed, RunOptions};
use coord_sim::scenario::{LoadedScenario, ModelTransport};

use crate::repo_root;

const SCENARIO: &str = "scenarios/faults/model-api-over-http.toml";

/// Per agent, the virtual times (ms) at which the host's upstream model was called.
fn call_times_ms(scenario: &LoadedScenario, seed: u64) -> BTreeMap<String, Vec<u64>> {
    let run = run_seed(scenario, seed, &RunOptions::default()).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let mut times: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for entry in &run.trace {
        let event: serde_json::Value = serde_json::from_str(&entry.event_json()).unwrap();
        if event["event"] == "model_called" {
            let agent = event["agent"].as_str().unwrap().to_owned();
            times.entry(agent).or_default().push(entry.time_ms);
        }
    }
    times
}

fn with_transport(transport: ModelTransport) -> LoadedScenario {
    let mut loaded = LoadedScenario::load(&repo_root().join(SCENARIO)).unwrap();
    loaded.scenario.settings.model_transport = transport;
    loaded
}

/// The gap between an agent's first and second upstream call.
fn first_retry_gap_ms(times: &BTreeMap<String, Vec<u64>>, agent: &str) -> u64 {
    let calls = &times[agent];
    assert!(calls.len() >= 2, "{agent} was called {calls:?}");
    calls[1] - calls[0]
}

#[test]
fn the_provider_retries_each_wire_fault_after_the_delay_it_owes() {
    // Each first call fails after the scripted model's 300 ms; the provider then
    // waits: retry-after (5 s) for the 429, its 500 ms backoff for the 529 and the
    // cut stream, and for the silent host its 60 s deadline plus the backoff.
    for transport in [ModelTransport::Http, ModelTransport::HttpStreaming] {
        let times = call_times_ms(&with_transport(transport), 0);
        let gaps: Vec<u64> = [
            "Read the deploy logs.",
            "Diff the deploy config.",
            "Check the health probes.",
            "List the changes since the last deploy.",
        ]
        .iter()
        .map(|agent| first_retry_gap_ms(&times, agent))
        .collect();
        assert_eq!(gaps, [5_300, 800, 60_500, 800], "{transport:?}");
    }
}

#[test]
fn every_task_completes_once_over_http_with_and_without_streams() {
    for transport in [ModelTransport::Http, ModelTransport::HttpStreaming] {
        let scenario = with_transport(transport);
        for seed in 0..10 {
            let run = run_seed(&scenario, seed, &RunOptions::default()).unwrap();
            assert!(
                run.violations.is_empty(),
                "{transport:?} seed {seed}: {:?}",
                run.violations
            );
            let completed = run
                .trace
                .iter()
                .filter(|entry| entry.event_json().contains(r#""status":"completed""#))
                .filter(|entry| entry.event_json().contains("notification_enqueued"))
                .count();
            assert_eq!(completed, 4, "{transport:?} seed {seed}");
        }
    }
}

#[test]
fn over_http_a_run_is_still_a_function_of_its_seed() {
    let scenario = with_transport(ModelTransport::HttpStreaming);
    let options = RunOptions {
        swarm: true,
        ..RunOptions::default()
    };
    for seed in 0..5 {
        let first = run_seed(&scenario, seed, &options).unwrap();
        let second = run_seed(&scenario, seed, &options).unwrap();
        assert_eq!(first.trace_hash(), second.trace_hash(), "seed {seed}");
    }
}

#[test]
fn a_direct_run_retries_in_the_runtime_instead() {
    // Without the provider, the scripted model's errors reach the runtime's own
    // retry loop, which waits differently: the transports are distinguishable.
    let direct = call_times_ms(&with_transport(ModelTransport::Direct), 0);
    let http = call_times_ms(&with_transport(ModelTransport::Http), 0);
    assert_ne!(
        first_retry_gap_ms(&direct, "Check the health probes."),
        first_retry_gap_ms(&http, "Check the health probes.")
    );
}
