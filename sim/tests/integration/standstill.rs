//! A busy loop that holds virtual time still ends its run with a liveness failure
//! and a repro line, on both worlds, instead of hanging the sweep.

use std::sync::Arc;

use coord_runtime::world::{
    BoxFuture, Clock, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse,
};
use coord_sim::check::Invariant;
use coord_sim::run::{run_seed_with_model_layer, RunOptions, SeedRun};
use coord_sim::scenario::{LoadedScenario, WorldKind};
use coord_sim::world::STANDSTILL_READS;

use crate::repo_root;

/// The scenario whose worker's model call loops: the coordinator waits for the
/// worker's notification meanwhile.
const SCENARIO: &str = "scenarios/tasks/background-shell.toml";
const WORKER_PROMPT: &str = "Run the tests in the background.";

/// A model whose answer to the worker never comes: the call reads the clock and
/// waits no time, over and over, as a wait whose deadline test is off by one does.
#[derive(Debug)]
struct BusyWorkerCall {
    inner: Arc<dyn Model>,
    clock: Arc<dyn Clock>,
}

fn is_worker_call(request: &ModelRequest) -> bool {
    request.messages.first().is_some_and(|message| {
        message.content.iter().any(|block| match block {
            ContentBlock::Text { text, .. } => text.contains(WORKER_PROMPT),
            _ => false,
        })
    })
}

impl Model for BusyWorkerCall {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        if !is_worker_call(&request) {
            return self.inner.send(request);
        }
        let clock = self.clock.clone();
        Box::pin(async move {
            let deadline = clock.monotonic();
            loop {
                // `now > deadline` never holds while time stands still.
                let now = clock.monotonic();
                clock.sleep(deadline.saturating_sub(now)).await;
            }
        })
    }

    fn compaction_wanted(&self, messages: &[Message]) -> Option<bool> {
        self.inner.compaction_wanted(messages)
    }
}

fn run_busy(world: WorldKind) -> SeedRun {
    let scenario = LoadedScenario::load(&repo_root().join(SCENARIO)).unwrap();
    let options = RunOptions {
        world: Some(world),
        ..RunOptions::default()
    };
    let layer = |inner: Arc<dyn Model>, clock: Arc<dyn Clock>| -> Arc<dyn Model> {
        Arc::new(BusyWorkerCall { inner, clock })
    };
    run_seed_with_model_layer(&scenario, 0, &options, &layer).unwrap()
}

#[test]
fn a_busy_loop_in_a_worker_ends_the_run_with_a_liveness_failure() {
    for world in [WorldKind::Tokio, WorldKind::Turmoil] {
        let run = run_busy(world);
        let stood_still: Vec<&str> = run
            .failures
            .iter()
            .filter(|failure| failure.invariant == Invariant::Liveness.as_str())
            .map(|failure| failure.detail.as_str())
            .filter(|detail| detail.starts_with("virtual time stood still at "))
            .collect();
        assert_eq!(stood_still.len(), 1, "{world:?}: {:#?}", run.failures);
        assert!(
            stood_still[0].contains(&format!("read {STANDSTILL_READS} times")),
            "{}",
            stood_still[0]
        );
        // The worker never answered, so its script was not played: not-vacuous
        // names the standstill as the coordinator's end.
        assert!(
            run.failures.iter().any(
                |failure| failure.invariant == Invariant::NotVacuous.as_str()
                    && failure.detail.contains("the clock stood still at")
            ),
            "{world:?}: {:#?}",
            run.failures
        );
        // The seed stands still at the same read on every run.
        assert_eq!(run.trace_hash(), run_busy(world).trace_hash(), "{world:?}");
    }
}

#[test]
fn the_same_scenario_without_the_busy_loop_passes() {
    let scenario = LoadedScenario::load(&repo_root().join(SCENARIO)).unwrap();
    for world in [WorldKind::Tokio, WorldKind::Turmoil] {
        let options = RunOptions {
            world: Some(world),
            ..RunOptions::default()
        };
        let run = coord_sim::run::run_seed(&scenario, 0, &options).unwrap();
        assert!(run.failures.is_empty(), "{world:?}: {:#?}", run.failures);
    }
}
