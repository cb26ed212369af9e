//! What one model call costs over the production provider and the simulated API host,
//! against calling the model directly: the price of `model_transport = "http"` and
//! `"http-streaming"` per call, as the conversation grows.
//!
//! Each iteration sends one request whose conversation has n messages of 2 KiB
//! (alternating user and assistant) to a model that answers at once with a 1 KiB
//! text and a tool call. Over HTTP the provider encodes the request as JSON, writes
//! it through an in-memory pipe, the host parses it back, asks the model, and writes
//! the answer as one JSON body or as SSE events, which the provider decodes.
//! Throughput is in request bytes, so criterion's "B/s" is how fast a conversation
//! crosses the wire both ways.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::anthropic::{
    AnthropicProvider, ApiKey, Endpoint, ProviderConfig, Scheme,
};
use coord_runtime::world::{
    BoxFuture, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse, Role,
    StopReason, SystemClock, Usage,
};
use coord_sim::world::{ApiHost, PipeApiConnector};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Bytes of each message of the conversation.
const MESSAGE_BYTES: usize = 2048;

/// A model that answers every request at once with the same response.
#[derive(Debug)]
struct AnswersAtOnce(ModelResponse);

impl Model for AnswersAtOnce {
    fn send(&self, _: Arc<ModelRequest>) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let response = self.0.clone();
        Box::pin(async move { Ok(response) })
    }
}

fn response() -> ModelResponse {
    ModelResponse {
        id: "msg_bench".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("The limiter keeps one bucket per key. ".repeat(27)),
            ContentBlock::ToolUse {
                id: "toolu_bench".into(),
                name: "Read".into(),
                input: serde_json::json!({ "file_path": "/work/src/limiter.rs" }).into(),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 12,
            output_tokens: 300,
            ..Usage::default()
        },
    }
}

fn request(messages: usize) -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 8192,
        tools: Default::default(),
        system: Default::default(),
        messages: (0..messages)
            .map(|turn| Message {
                role: if turn % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content: vec![ContentBlock::text(
                    format!("turn {turn} of the review. ").repeat(MESSAGE_BYTES / 24),
                )],
            })
            .collect(),
        thinking: None,
    }
}

fn provider(upstream: Arc<dyn Model>, streaming: bool) -> AnthropicProvider {
    let endpoint = Endpoint {
        scheme: Scheme::Http,
        host: "api.bench.invalid".into(),
        port: 80,
    };
    let mut config = ProviderConfig::new(endpoint, ApiKey::new("bench-key"));
    config.streaming = streaming;
    config.request_timeout = Duration::from_secs(60);
    let connector = PipeApiConnector::new(ApiHost::new(upstream));
    AnthropicProvider::new(config, Arc::new(connector), Arc::new(SystemClock::new()))
}

fn one_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let upstream: Arc<dyn Model> = Arc::new(AnswersAtOnce(response()));
    let mut group = c.benchmark_group("model_call");
    for messages in [10, 100, 1000] {
        let request = request(messages);
        let request_bytes = serde_json::to_vec(&request).expect("serializes").len();
        group.throughput(Throughput::Bytes(request_bytes as u64));
        let transports: [(&str, Arc<dyn Model>); 3] = [
            ("direct", upstream.clone()),
            ("http", Arc::new(provider(upstream.clone(), false))),
            ("http-streaming", Arc::new(provider(upstream.clone(), true))),
        ];
        for (name, model) in transports {
            group.bench_with_input(BenchmarkId::new(name, messages), &request, |b, request| {
                b.iter(|| {
                    let response = runtime
                        .block_on(model.send(Arc::new(request.clone())))
                        .expect("the call succeeds");
                    black_box(response)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, one_call);
criterion_main!(benches);
