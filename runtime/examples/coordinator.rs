//! A coordinator with three workers against a tiny scripted model.
//!
//! The coordinator's first turn spawns three research workers in one message; every
//! spawn returns `async_launched` at once. Each worker answers after a different
//! (virtual) delay, and the coordinator receives their `<task-notification>`
//! envelopes at its next turn boundaries. The example prints every envelope the
//! coordinator received, as the coordinator saw it.
//!
//! Run it with `cargo run -p coord-runtime --example coordinator`.

use std::sync::Arc;
use std::time::Duration;

use coord_runtime::ipc::SessionLayout;
use coord_runtime::profile::Profile;
use coord_runtime::session::{Effects, Session, SessionConfig};
use coord_runtime::world::{
    BoxFuture, ContentBlock, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason,
    ToolCall, ToolContext, ToolOutput, Tools, Usage,
};
use coord_runtime::World;
use serde_json::json;

/// Answers the coordinator with a plan, and each worker with its findings.
#[derive(Debug)]
struct TinyModel;

fn reply(content: Vec<ContentBlock>, stop_reason: StopReason) -> ModelResponse {
    ModelResponse {
        id: "msg_example".into(),
        model: "claude-sonnet-4-5".into(),
        role: Role::Assistant,
        content,
        stop_reason,
        usage: Usage {
            input_tokens: 1_200,
            output_tokens: 80,
            ..Usage::default()
        },
    }
}

impl Model for TinyModel {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let first_user_text = match request.messages[0].content.first() {
            Some(ContentBlock::Text { text, .. }) => text.clone(),
            _ => String::new(),
        };
        Box::pin(async move {
            if first_user_text.starts_with("Research") {
                // Workers take 1, 2 and 3 seconds of model time.
                let topic = first_user_text.trim_start_matches("Research ").to_owned();
                let delay_s = topic.len() as u64 % 3 + 1;
                tokio::time::sleep(Duration::from_secs(delay_s)).await;
                return Ok(reply(
                    vec![ContentBlock::text(format!(
                        "{topic}: see src/{topic}.rs:42"
                    ))],
                    StopReason::EndTurn,
                ));
            }
            if request.messages.len() == 1 {
                let spawns = ["auth", "billing", "search"]
                    .iter()
                    .enumerate()
                    .map(|(n, topic)| ContentBlock::ToolUse {
                        id: format!("toolu_{n}"),
                        name: "Agent".into(),
                        input: json!({
                            "description": format!("research {topic}"),
                            "prompt": format!("Research {topic}"),
                        })
                        .into(),
                    })
                    .collect();
                return Ok(reply(spawns, StopReason::ToolUse));
            }
            Ok(reply(
                vec![ContentBlock::text("Noted; waiting for the rest.")],
                StopReason::EndTurn,
            ))
        })
    }
}

/// The coordinator has no file tools and the workers call none, so no call lands here.
#[derive(Debug)]
struct NoTools;

impl Tools for NoTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        Box::pin(std::future::ready(ToolOutput {
            content: format!("{} is not available in this example", call.name),
            is_error: true,
        }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut config = SessionConfig::new(Profile::Hardened);
    config.coordinator_mode = true;
    let effects = Effects {
        model: Arc::new(TinyModel),
        tools: Arc::new(NoTools),
        vcs: None,
        remote: None,
        shell: None,
    };
    let session = Session::create(
        World::real(),
        effects,
        config,
        SessionLayout::new(dir.path()),
    )?;
    let report = session
        .run_coordinator("Find where each subsystem validates input.", vec![])
        .await?;

    println!(
        "coordinator finished after {} turns with {} envelopes:\n",
        report.turns, report.notifications_delivered
    );
    for message in report.messages.iter().filter(|m| m.role == Role::User) {
        for block in &message.content {
            if let ContentBlock::Text { text, .. } = block {
                if text.starts_with("<task-notification>") {
                    println!("{text}\n");
                }
            }
        }
    }
    Ok(())
}
