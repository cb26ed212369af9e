//! The production provider against the simulated host.
//!
//! Each test below runs the real `AnthropicProvider` in a turmoil client, connected by
//! `TurmoilApiConnector` to the "api" host, with `TurmoilBootClock::running()` as its clock, so its
//! deadline waits on virtual time. What the provider returns is compared with what
//! the upstream model answered, and what the host recorded shows how many attempts
//! the provider made: one per call, since retrying is the session's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::world::anthropic::{
    AnthropicProvider, ApiKey, Endpoint, ProviderConfig, Scheme,
};
use coord_runtime::world::{
    Clock, ContentBlock, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason, Usage,
};
use coord_sim::cassette::{Cassette, MatchMode, Outcome, ReplayModel};
use coord_sim::model::{ConversationView, ModelPolicy, PolicyReply, SimulatedModel};
use coord_sim::world::{ApiHost, Streams, TurmoilApiConnector, TurmoilBootClock};
use rand_chacha::rand_core::RngCore;

use super::{fixed_response, request_body, run, FixedModel, API, PORT};

/// The request the provider sends in these tests.
fn model_request() -> ModelRequest {
    serde_json::from_str(&request_body(false)).expect("the fixture body is a request")
}

/// A provider for the "api" host with `edit` applied to its settings. Works only
/// inside the simulation (its clock is turmoil's virtual time).
fn provider(edit: impl FnOnce(&mut ProviderConfig)) -> AnthropicProvider {
    let endpoint = Endpoint {
        scheme: Scheme::Http,
        host: API.into(),
        port: PORT,
    };
    let mut config = ProviderConfig::new(endpoint, ApiKey::new("sk-ant-sim-secret"));
    config.request_timeout = Duration::from_secs(30);
    edit(&mut config);
    AnthropicProvider::new(
        config,
        Arc::new(TurmoilApiConnector::new()),
        Arc::new(TurmoilBootClock::running()),
    )
}

/// What one provider call returned and how much virtual time it took.
type CallOutcome = (Result<ModelResponse, ModelError>, Duration);

/// Runs one provider call (settings edited by `edit`) against `api` in a simulation
/// bounded to `limit`; returns its outcome and the simulation's total virtual time.
fn provider_call(
    api: &ApiHost,
    limit: Duration,
    edit: impl FnOnce(&mut ProviderConfig) + 'static,
) -> CallOutcome {
    let outcome: Arc<Mutex<Option<CallOutcome>>> = Arc::default();
    let outcome_in = outcome.clone();
    run(api, limit, async move {
        let provider = provider(edit);
        let clock = TurmoilBootClock::running();
        let started = clock.monotonic();
        let result = provider.send(Arc::new(model_request())).await;
        *outcome_in.lock().unwrap() = Some((result, clock.monotonic() - started));
        Ok(())
    });
    let outcome = outcome.lock().unwrap().take();
    outcome.expect("the provider call finished inside the simulation")
}

const E2E_LIMIT: Duration = Duration::from_secs(300);

#[test]
fn provider_json_call_returns_the_upstream_response() {
    // Goal: (a) a non-streaming call through the simulated network returns exactly
    // what the upstream model answered, with the headers the API requires.
    // Method: one call with `streaming: false`; compare, and read the host's record.
    let api = ApiHost::new(FixedModel::ok());
    let (result, _) = provider_call(&api, E2E_LIMIT, |config| config.streaming = false);
    assert_eq!(result, Ok(fixed_response()));
    let received = api.received();
    assert_eq!(received.len(), 1);
    assert!(!received[0].streaming);
    assert_eq!(received[0].request.as_ref(), Some(&model_request()));
    assert_eq!(received[0].anthropic_version.as_deref(), Some("2023-06-01"));
    for name in ["x-api-key", "anthropic-version", "content-type", "host"] {
        assert!(
            received[0].header_names.iter().any(|seen| seen == name),
            "{name}"
        );
    }
}

#[test]
fn provider_streaming_call_assembles_the_upstream_response() {
    // Goal: (b) a streaming call assembles the SSE events back into exactly the
    // upstream response (text in pieces, tool input in several JSON deltas, usage).
    // Method: one call with `streaming: true`; compare.
    let api = ApiHost::new(FixedModel::ok());
    let (result, _) = provider_call(&api, E2E_LIMIT, |config| config.streaming = true);
    assert_eq!(result, Ok(fixed_response()));
    assert!(api.received()[0].streaming);
}

#[test]
fn provider_reports_a_rate_limit_with_its_retry_after() {
    // Goal: (c) a 429 with `retry-after: 3` ends the call with the wait the host
    // asked for, for the session's retry loop to honour; the provider does not retry.
    // Method: a rate-limited upstream; one call; read the error and the host's record.
    let retry_after = Duration::from_secs(3);
    let api = ApiHost::new(FixedModel::failing(ModelError::RateLimited {
        retry_after: Some(retry_after),
    }));
    let (result, _) = provider_call(&api, E2E_LIMIT, |_| {});
    assert_eq!(
        result,
        Err(ModelError::RateLimited {
            retry_after: Some(retry_after)
        })
    );
    assert_eq!(api.requests_count(), 1);
}

#[test]
fn provider_reports_an_overload_after_one_attempt() {
    // Goal: (d, e) under a 529 the provider makes one attempt and returns
    // ModelError::Overloaded, which is transient.
    // Method: an overloaded upstream.
    let api = ApiHost::new(FixedModel::failing(ModelError::Overloaded));
    let (result, _) = provider_call(&api, E2E_LIMIT, |_| {});
    assert_eq!(result, Err(ModelError::Overloaded));
    assert!(result.unwrap_err().is_transient());
    assert_eq!(api.requests_count(), 1);
}

#[test]
fn provider_reports_mid_stream_disconnects_as_a_typed_error() {
    // Goal: (f) an answer that breaks off ends the call with ModelError::Transport
    // after one attempt, for both answer shapes.
    // Method: a malformed upstream, which the host cuts off mid-answer; streaming and
    // JSON calls.
    for streaming in [true, false] {
        let api = ApiHost::new(FixedModel::failing(ModelError::Malformed {
            detail: "cut".into(),
        }));
        let (result, _) = provider_call(&api, E2E_LIMIT, move |config| {
            config.streaming = streaming;
        });
        // A body cut short is a failed read, whatever its framing.
        let Err(ModelError::Transport(why)) = &result else {
            panic!("streaming {streaming}: a cut answer is a transport error: {result:?}");
        };
        assert!(why.contains("EOF") || why.contains("end of file"), "{why}");
        assert_eq!(api.requests_count(), 1, "streaming {streaming}");
    }
}

#[test]
fn provider_times_out_on_a_hung_host_in_virtual_time() {
    // Goal: (h) a host that never answers ends the call at request_timeout on the
    // virtual clock with ModelError::Timeout, well within the simulation's limit:
    // nothing hangs.
    // Method: an upstream timeout (the host stays silent), request_timeout 30 s.
    let api = ApiHost::new(FixedModel::failing(ModelError::Timeout {
        elapsed: Duration::from_secs(600),
    }));
    let (result, took) = provider_call(&api, E2E_LIMIT, |config| {
        config.request_timeout = Duration::from_secs(30);
    });
    let Err(ModelError::Timeout { elapsed }) = result else {
        panic!("a hung host is a timeout: {result:?}");
    };
    assert!(
        elapsed >= Duration::from_secs(30),
        "attempt ran {elapsed:?}"
    );
    assert_eq!(api.requests_count(), 1);
    assert!(
        took >= Duration::from_secs(30),
        "one attempt of 30 s: {took:?}"
    );
    assert!(
        took < E2E_LIMIT / 2,
        "ended well within the limit: {took:?}"
    );
}

#[test]
fn provider_outwaits_latency_in_virtual_time() {
    // Goal: (i) a slow upstream (5 s) is waited for on the virtual clock, and answers.
    // Method: a 5 s upstream, within a 30 s request timeout.
    let delay = Duration::from_secs(5);
    let api = ApiHost::new(FixedModel::slow(delay));
    let (result, took) = provider_call(&api, E2E_LIMIT, |_| {});
    assert_eq!(result, Ok(fixed_response()));
    assert_eq!(api.requests_count(), 1);
    assert!(took >= delay, "the call took {took:?}");
}

/// A policy that echoes the last user text back, after a fixed latency.
#[derive(Debug)]
struct EchoPolicy {
    latency: Duration,
}

impl ModelPolicy for EchoPolicy {
    fn reply(
        &self,
        request: &ModelRequest,
        _view: &ConversationView,
        _latency_rng: &mut dyn RngCore,
    ) -> PolicyReply {
        let prompt = request
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter_map(|block| match block {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .next_back()
            .unwrap_or_default();
        PolicyReply::Respond {
            response: ModelResponse {
                id: "msg_echo".into(),
                model: request.model.clone(),
                role: Role::Assistant,
                content: vec![ContentBlock::text(format!("echo: {prompt}"))],
                stop_reason: StopReason::EndTurn,
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                    ..Usage::default()
                },
            },
            latency: self.latency,
            usage_recorded: true,
        }
    }
}

#[test]
fn provider_reaches_a_simulated_model_behind_the_host() {
    // Goal: a `SimulatedModel` upstream (its latency on the api host's virtual clock)
    // answers the production provider through the simulated network.
    // Method: an echo policy with 2 s latency behind the host; one streaming call.
    let latency = Duration::from_secs(2);
    let upstream = SimulatedModel::new(
        Arc::new(EchoPolicy { latency }),
        Arc::new(TurmoilBootClock::running()),
        Streams::new(11).rng(Streams::LATENCY),
    );
    let api = ApiHost::new(Arc::new(upstream));
    let (result, took) = provider_call(&api, E2E_LIMIT, |config| config.streaming = true);
    let response = result.expect("the echo answers");
    assert_eq!(
        response.content,
        [ContentBlock::text("echo: Summarise main.rs")]
    );
    assert_eq!(response.usage.output_tokens, 3);
    assert!(took >= latency, "the call took {took:?}");
}

/// Sends each of `requests` through the provider (streaming) to `api`, in order,
/// inside one bounded simulation; returns what each call returned.
fn provider_calls(
    api: &ApiHost,
    requests: Vec<ModelRequest>,
) -> Vec<Result<ModelResponse, ModelError>> {
    let results: Arc<Mutex<Vec<Result<ModelResponse, ModelError>>>> = Arc::default();
    let results_in = results.clone();
    run(api, E2E_LIMIT, async move {
        let provider = provider(|config| config.streaming = true);
        for request in requests {
            let result = provider.send(Arc::new(request)).await;
            results_in.lock().unwrap().push(result);
        }
        Ok(())
    });
    let results = results.lock().unwrap().clone();
    results
}

#[test]
fn provider_gets_recorded_responses_from_a_host_replaying_a_cassette() {
    // Goal: the host serves recorded responses too: with a cassette replay as its
    // upstream, the provider gets back exactly what was recorded for each request,
    // and a request the cassette lacks is the API's 400, not a hang or a retry loop.
    // Method: the committed notify-once cassette, matched by request hash; its
    // first two recorded requests, then the first one with its prompt edited.
    let cassette =
        Cassette::load(&crate::repo_root().join("fixtures/cassettes/notify-once-seed-0.json"))
            .unwrap();
    let answered: Vec<(ModelRequest, ModelResponse)> = cassette
        .exchanges
        .iter()
        .filter_map(|exchange| match &exchange.outcome {
            Outcome::Response(response) => Some((exchange.request.clone(), response.clone())),
            _ => None,
        })
        .take(2)
        .collect();
    assert_eq!(answered.len(), 2);
    let mut edited = answered[0].0.clone();
    edited.messages[0].content = vec![ContentBlock::text("A prompt nobody recorded.")];
    let api = ApiHost::new(Arc::new(ReplayModel::new(
        cassette,
        MatchMode::ByRequestHash,
    )));

    let mut requests: Vec<ModelRequest> = answered.iter().map(|(r, _)| r.clone()).collect();
    requests.push(edited);
    let results = provider_calls(&api, requests);

    assert_eq!(results[0], Ok(answered[0].1.clone()));
    assert_eq!(results[1], Ok(answered[1].1.clone()));
    assert!(
        matches!(&results[2], Err(ModelError::Api { status: 400, .. })),
        "{:?}",
        results[2]
    );
    assert_eq!(api.requests_count(), 3, "a miss is not retried");
}
