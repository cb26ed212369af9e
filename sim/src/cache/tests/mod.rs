//! Tests of the prompt cache: one or more per rule (`rules`), cache-break reports
//! (`breaks`), incremental cost and the runtime conversion (`incremental`), and the
//! property that reads never exceed a live entry's common prefix (`property`).

mod breaks;
mod incremental;
mod property;
mod rules;

use coord_runtime::world::CacheTtl;
use std::time::Duration;

use super::{Block, CacheOutcome, Prompt, PromptCache, Request};

const ORG: &str = "org-a";
/// A model with the default 1024-token minimum.
const SONNET: &str = "claude-sonnet-4-5";

/// Text of exactly `tokens` tokens under the default four-bytes-a-token estimator, made of `fill`.
fn text(tokens: u64, fill: char) -> String {
    assert!(fill.is_ascii());
    std::iter::repeat_n(fill, (tokens * 4) as usize).collect()
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// A request from `ORG` to `SONNET` sent at `seconds`, answered at once.
fn request_at(seconds: u64) -> Request {
    Request::new(ORG, SONNET, secs(seconds))
}

/// Tools (400 tokens) and system (800 tokens, 5m breakpoint): 1200 tokens, enough to
/// be cached on every model with a 1024-token minimum.
fn base_prompt() -> Prompt {
    let mut prompt = Prompt::new();
    prompt
        .push(Block::tool(text(400, 't').into_bytes()))
        .unwrap();
    prompt
        .push(Block::system(&text(800, 's')).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
    prompt
}

/// Sends and unwraps.
fn send(cache: &mut PromptCache, request: &Request, prompt: &mut Prompt) -> CacheOutcome {
    cache.send(request, prompt).expect("valid request")
}

/// Appends a user message of `tokens` tokens and moves the single message
/// breakpoint onto it (the system breakpoint stays).
fn push_turn(prompt: &mut Prompt, tokens: u64, fill: char) {
    for index in prompt.breakpoints().collect::<Vec<_>>() {
        if index >= prompt.messages_start() {
            prompt.set_cache_control(index, None).unwrap();
        }
    }
    prompt
        .push(Block::user(&text(tokens, fill)).with_cache_control(CacheTtl::FiveMinutes))
        .unwrap();
}
