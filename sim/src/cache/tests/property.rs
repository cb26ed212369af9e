//! Property: in any generated conversation, cache reads never exceed the longest
//! common prefix with an entry that could be live.
//!
//! The oracle knows nothing of entries. It keeps every request sent (organization,
//! model, thinking, blocks, times) and bounds each read by the longest block-exact
//! common prefix, in tokens, with (a) a request whose response has started by the
//! time of the read (someone must have written the entry) and (b) a request sent
//! no later than the read whose response started within the longest TTL before it
//! (someone must have written or refreshed the entry recently enough). Reaching
//! into the messages also requires equal thinking settings.

use coord_runtime::world::{CacheTtl, ThinkingConfig};
use proptest::prelude::*;
use std::time::Duration;

use super::text;
use crate::cache::{Block, BlockKind, CacheOutcome, Prompt, PromptCache, Request};

const MODELS: [&str; 2] = ["claude-sonnet-4-5", "claude-3-haiku-20240307"];
const ORGS: [&str; 2] = ["org-a", "org-b"];
const FILLS: [char; 3] = ['a', 'b', 'c'];
const TTL_LONGEST: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
enum Op {
    Append {
        assistant: bool,
        tokens: u64,
        fill: usize,
    },
    EditMessage {
        index_seed: usize,
        fill: usize,
    },
    Truncate {
        keep_seed: usize,
    },
    ChangeSystem {
        tokens: u64,
        fill: usize,
    },
    ToggleThinking,
    SwitchModel,
    SwitchOrganization,
}

#[derive(Debug, Clone)]
struct Step {
    conversation: usize,
    op: Op,
    /// Seeds of the blocks to mark; the first `one_hour` of them (in prefix order)
    /// get 1h so the TTL order rule holds.
    breakpoint_seeds: Vec<usize>,
    one_hour: usize,
    advance_s: u64,
    latency_s: u64,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), 1..400u64, 0..FILLS.len())
            .prop_map(|(assistant, tokens, fill)| Op::Append { assistant, tokens, fill }),
        2 => (any::<usize>(), 0..FILLS.len())
            .prop_map(|(index_seed, fill)| Op::EditMessage { index_seed, fill }),
        1 => any::<usize>().prop_map(|keep_seed| Op::Truncate { keep_seed }),
        1 => (800..1600u64, 0..FILLS.len())
            .prop_map(|(tokens, fill)| Op::ChangeSystem { tokens, fill }),
        1 => Just(Op::ToggleThinking),
        1 => Just(Op::SwitchModel),
        1 => Just(Op::SwitchOrganization),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..3usize,
        op(),
        proptest::collection::vec(any::<usize>(), 0..=4),
        0..=4usize,
        prop_oneof![4 => 0..60u64, 2 => 60..400u64, 1 => 3000..4000u64],
        0..20u64,
    )
        .prop_map(
            |(conversation, op, breakpoint_seeds, one_hour, advance_s, latency_s)| Step {
                conversation,
                op,
                breakpoint_seeds,
                one_hour,
                advance_s,
                latency_s,
            },
        )
}

/// One conversation's changing state.
struct Agent {
    prompt: Prompt,
    model: usize,
    organization: usize,
    thinking: Option<ThinkingConfig>,
}

/// What the oracle remembers of a sent request.
struct Sent {
    organization: usize,
    model: usize,
    thinking: Option<ThinkingConfig>,
    blocks: Vec<Block>,
    sent_at: Duration,
    response_started_at: Duration,
}

fn tokens_of(block: &Block) -> u64 {
    (block.bytes().len() as u64).div_ceil(4)
}

/// Tokens of the longest block-exact common prefix of `blocks` and `other`,
/// stopping at the first message block when the thinking settings differ.
fn common_prefix_tokens(blocks: &[Block], thinking_equal: bool, other: &[Block]) -> u64 {
    blocks
        .iter()
        .zip(other)
        .take_while(|(a, b)| a.kind() == b.kind() && a.bytes() == b.bytes())
        .take_while(|(a, _)| thinking_equal || !matches!(a.kind(), BlockKind::Message { .. }))
        .map(|(a, _)| tokens_of(a))
        .sum()
}

fn thinking_key(thinking: Option<ThinkingConfig>) -> Option<u32> {
    match thinking {
        Some(ThinkingConfig::Enabled { budget_tokens }) => Some(budget_tokens),
        _ => None,
    }
}

fn apply(agent: &mut Agent, op: &Op) {
    let prompt = &mut agent.prompt;
    match *op {
        Op::Append {
            assistant,
            tokens,
            fill,
        } => {
            let body = text(tokens, FILLS[fill]);
            let block = if assistant {
                Block::assistant(&body)
            } else {
                Block::user(&body)
            };
            prompt.push(block).unwrap();
        }
        Op::EditMessage { index_seed, fill } => {
            let messages = prompt.len() - prompt.messages_start();
            if messages > 0 {
                let index = prompt.messages_start() + index_seed % messages;
                let old = &prompt.blocks()[index];
                let bytes = vec![FILLS[fill] as u8; old.bytes().len()];
                prompt
                    .replace(index, Block::new(old.kind(), bytes))
                    .unwrap();
            }
        }
        Op::Truncate { keep_seed } => {
            let start = prompt.messages_start();
            prompt.truncate(start + keep_seed % (prompt.len() - start + 1));
        }
        Op::ChangeSystem { tokens, fill } => {
            prompt
                .replace(1, Block::system(&text(tokens, FILLS[fill])))
                .unwrap();
        }
        Op::ToggleThinking => {
            agent.thinking = match agent.thinking {
                None => Some(ThinkingConfig::Enabled {
                    budget_tokens: 1024,
                }),
                Some(_) => None,
            };
        }
        Op::SwitchModel => agent.model = 1 - agent.model,
        Op::SwitchOrganization => agent.organization = 1 - agent.organization,
    }
}

fn place_breakpoints(prompt: &mut Prompt, seeds: &[usize], one_hour: usize) {
    prompt.clear_cache_control();
    let mut indices: Vec<usize> = seeds.iter().map(|seed| seed % prompt.len()).collect();
    indices.sort_unstable();
    indices.dedup();
    for (rank, index) in indices.into_iter().enumerate() {
        let ttl = if rank < one_hour {
            CacheTtl::OneHour
        } else {
            CacheTtl::FiveMinutes
        };
        prompt.set_cache_control(index, Some(ttl)).unwrap();
    }
}

fn check(
    outcome: &CacheOutcome,
    blocks: &[Block],
    request: &Request,
    agent: &Agent,
    history: &[Sent],
) {
    let now = request.sent_at;
    let total: u64 = blocks.iter().map(tokens_of).sum();
    let usage = outcome.usage;
    assert_eq!(
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens,
        total
    );
    assert_eq!(
        usage.cache_creation.ephemeral_5m_input_tokens
            + usage.cache_creation.ephemeral_1h_input_tokens,
        usage.cache_creation_input_tokens
    );
    let read_boundary: u64 = blocks[..outcome.read_blocks].iter().map(tokens_of).sum();
    assert_eq!(usage.cache_read_input_tokens, read_boundary);

    let same_key = history
        .iter()
        .filter(|sent| sent.organization == agent.organization && sent.model == agent.model);
    let lcp = |sent: &Sent| {
        let thinking_equal = thinking_key(sent.thinking) == thinking_key(agent.thinking);
        common_prefix_tokens(blocks, thinking_equal, &sent.blocks)
    };
    let written_bound = same_key
        .clone()
        .filter(|sent| sent.response_started_at <= now)
        .map(lcp)
        .max()
        .unwrap_or(0);
    let live_bound = same_key
        .filter(|sent| sent.sent_at <= now && now < sent.response_started_at + TTL_LONGEST)
        .map(lcp)
        .max()
        .unwrap_or(0);
    assert!(
        usage.cache_read_input_tokens <= written_bound,
        "read {} tokens but the longest prefix shared with a started response is {}",
        usage.cache_read_input_tokens,
        written_bound
    );
    assert!(
        usage.cache_read_input_tokens <= live_bound,
        "read {} tokens but the longest prefix shared with a recent request is {}",
        usage.cache_read_input_tokens,
        live_bound
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cache_reads_never_exceed_a_live_common_prefix(
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut cache = PromptCache::new();
        let mut agents: Vec<Agent> = (0..3)
            .map(|_| {
                let mut prompt = Prompt::new();
                prompt.push(Block::tool(text(300, 't').into_bytes())).unwrap();
                prompt.push(Block::system(&text(900, 's'))).unwrap();
                Agent { prompt, model: 0, organization: 0, thinking: None }
            })
            .collect();
        let mut history: Vec<Sent> = Vec::new();
        let mut now = Duration::ZERO;
        for step in &steps {
            now += Duration::from_secs(step.advance_s);
            let agent = &mut agents[step.conversation];
            apply(agent, &step.op);
            place_breakpoints(&mut agent.prompt, &step.breakpoint_seeds, step.one_hour);
            let request = Request::new(ORGS[agent.organization], MODELS[agent.model], now)
                .thinking(agent.thinking)
                .conversation(format!("agent-{}", step.conversation))
                .first_token_after(Duration::from_secs(step.latency_s));
            let outcome = cache.send(&request, &mut agent.prompt).expect("valid request");
            let blocks = agent.prompt.blocks().to_vec();
            check(&outcome, &blocks, &request, agent, &history);
            history.push(Sent {
                organization: agent.organization,
                model: agent.model,
                thinking: agent.thinking,
                blocks,
                sent_at: request.sent_at,
                response_started_at: request.response_started_at,
            });
        }
    }
}
