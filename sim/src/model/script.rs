//! Turn scripts: what each simulated agent says, turn by turn.
//!
//! An agent's script is an ordered list of turns. The model finds the agent by its
//! prompt (the first user text of the conversation) and plays the next turn it has
//! not played. A turn may wait for a [`Trigger`]: until the trigger holds, the agent
//! answers [`WAITING_TEXT`] and ends its turn, which for a coordinator means "wait
//! for more notifications". Faults that reorder or delay workers therefore do not
//! break the script: the synthesis turn simply fires later.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{ContentBlock, ModelRequest, ModelResponse, Role, StopReason, Usage};
use rand_chacha::rand_core::RngCore;

use super::policy::{ModelPolicy, PolicyReply};
use super::shared_input::SharedInput;
use super::shell_answer::{ShellAnswer, ShellAnswers};
use super::shell_gate::ShellGates;
use super::size::{content_size_bytes, json_size_bytes};
use super::view::{ConversationView, WAITING_TEXT};

/// How long a turn takes, drawn from the model's latency stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Latency {
    /// Always `ms`.
    Fixed {
        /// Milliseconds.
        ms: u64,
    },
    /// Uniform in `min_ms..=max_ms`.
    Uniform {
        /// Shortest.
        min_ms: u64,
        /// Longest.
        max_ms: u64,
    },
}

impl Default for Latency {
    fn default() -> Self {
        Latency::Fixed { ms: 1_000 }
    }
}

impl Latency {
    /// A draw from this distribution.
    pub fn draw(&self, rng: &mut dyn RngCore) -> Duration {
        let ms = match *self {
            Latency::Fixed { ms } => ms,
            Latency::Uniform { min_ms, max_ms } => {
                let span = max_ms.saturating_sub(min_ms).saturating_add(1);
                min_ms + rng.next_u64() % span
            }
        };
        Duration::from_millis(ms)
    }
}

/// When a scripted turn may fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// Once every worker this agent launched whose description matches `pattern`
    /// (`*` is a wildcard) has notified, and at least one such worker exists.
    NotificationsFrom {
        /// Description pattern, e.g. `research-*`.
        pattern: String,
    },
    /// Once at least `count` notifications have arrived in total.
    NotificationsAtLeast {
        /// How many.
        count: usize,
    },
}

impl Trigger {
    /// Whether the trigger holds in `view`.
    pub fn holds(&self, view: &ConversationView) -> bool {
        match self {
            Trigger::NotificationsFrom { pattern } => {
                let (launched, notified) = view.launched_and_notified(pattern);
                launched > 0 && notified == launched
            }
            Trigger::NotificationsAtLeast { count } => view.notifications.len() >= *count,
        }
    }
}

/// One tool call a scripted turn makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The tool.
    pub name: String,
    /// Its input.
    #[serde(default)]
    pub input: SharedInput,
    /// The result a recorded session got for this call (`coordsim import`). The run
    /// still performs the call; the cost meter bills this text in place of the
    /// runtime's result, so that a replay's prompts are the recording's size. Default
    /// none: the runtime's result is billed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// What the runtime must answer this call with: `ok` or `error`. A scenario
    /// states it where a guard must refuse (or must let through) a call; the run
    /// fails (`expected-outcome`) when the answer the agent's model received
    /// differs. Default none: either answer is fine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<CallOutcome>,
    /// A text the answer the agent's model received must contain, as written: a
    /// path a Glob must list, a line a Grep must find, a line a Read must return.
    /// The run fails (`expected-outcome`) when the answer lacks it. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_text: Option<String>,
    /// A text the answer must not contain: a path a Glob must not list, a line
    /// past a Read's limit, a truncation notice where nothing was cut. The run
    /// fails (`expected-outcome`) when the answer holds it. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_no_text: Option<String>,
    /// Makes this call `count` calls in the same turn, `{n}` in the input's strings
    /// numbering them from 1 (the scenario loader expands it). Default one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// For a background `Bash` call: the script step before whose request its
    /// command finishes (the simulated shell holds it until the agent's request for
    /// the step before; see `model::shell_gate`), so that its notification arrives
    /// where a recorded session had it. Default none: it finishes at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finishes_before_step: Option<usize>,
    /// For a `Bash` call: what its command prints and how it ends, as the simulated
    /// shell reports it to the runtime (see `model::shell_answer`). Default: it
    /// exits 0 at once, printing nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<Box<ShellAnswer>>,
}

impl ScriptedToolCall {
    /// A call of tool `name` with `input`, as scripts written in code make them: no
    /// recorded result, no expected answer, one call.
    pub fn new(name: &str, input: serde_json::Value) -> Self {
        Self {
            name: name.to_owned(),
            input: input.into(),
            result: None,
            expect: None,
            expect_text: None,
            expect_no_text: None,
            count: None,
            finishes_before_step: None,
            shell: None,
        }
    }
}

/// The answer a scripted tool call must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CallOutcome {
    /// A result without an error.
    Ok,
    /// An error result (a refusal, a failed call).
    Error,
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

/// One turn of an agent's script.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// What the agent says.
    #[serde(default)]
    pub text: Option<String>,
    /// The tools it calls, all in this one message.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// The stop reason (default: `tool_use` with tool calls, else `end_turn`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub stop_reason: Option<StopReason>,
    /// The usage to report (default: estimated from the request and reply sizes).
    #[serde(default)]
    #[schemars(with = "Option<std::collections::BTreeMap<String, u64>>")]
    pub usage: Option<Usage>,
    /// How long the turn takes.
    #[serde(default)]
    pub latency: Latency,
    /// How long, in a recorded session (`coordsim import`), the client held this
    /// turn's request before sending it: the tool runs and the user's pauses since
    /// the previous response, which the simulated tools and user take no time for.
    /// The cost meter sends the request that much later, so that the prompt cache
    /// sees the recorded gaps and the expiries they caused. Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub send_delay_ms: u64,
    /// What the turn waits for before it fires.
    #[serde(default)]
    pub when: Option<Trigger>,
    /// Plays this turn `repeat` times in a row (the scenario loader expands it).
    /// Default once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// Whether a recorded session's client rewrote its prompt before this turn's
    /// request (`coordsim import`: the request read only the client's head back
    /// from the cache): the cost meter rewrites the first message's padding there,
    /// so that the simulated cache breaks where the recorded one did. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_rewritten: bool,
    /// Compacts the agent's conversation before this turn's request, as a recorded
    /// session did there (`coordsim import`): the model asks the runtime to, and
    /// answers the compaction request with this summary. Default none: the
    /// runtime's threshold rule decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_before: Option<ScriptedCompaction>,
}

/// A compaction a script asks for before one of its turns.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCompaction {
    /// The summary the compaction request is answered with (the model adds the
    /// state block it goes on from).
    pub summary: String,
    /// The usage the recorded compaction request reported (default: estimated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, u64>>")]
    pub usage: Option<Usage>,
    /// How long the compaction request takes.
    #[serde(default)]
    pub latency: Latency,
}

/// One agent's script, found by its prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentScript {
    /// The agent's prompt, exactly: how the model tells whose conversation it is.
    pub prompt: String,
    /// The size of the agent's first request as a recorded session's client sent it
    /// (`coordsim import`): the cost meter pads the agent's requests to it. Default
    /// none: requests are billed as the runtime builds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_prompt: Option<RecordedPrompt>,
    /// Its turns, in order. May be left out when a `[model] cassette` answers
    /// instead (the scenario loader requires coordinator turns otherwise). Shared:
    /// the workers of one `count` play the same turns, which are kept once.
    #[serde(default)]
    pub turns: Arc<Vec<ScriptedTurn>>,
    /// Makes this worker `count` workers, `{n}` in the prompt (and in the turns'
    /// strings, if any) numbering them from 1 (the scenario loader expands it).
    /// Default one worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// What a recorded client sent at the start of an agent's conversation, beyond what
/// the runtime builds: its system prompt and tool definitions are tens of thousands
/// of tokens, the runtime's a few hundred. The cost meter adds the difference to
/// the agent's head (tools and system) as padding the runtime and the model never
/// see, the same on every request, so that the first request bills
/// `first_request_tokens`; and it treats the first `cached_before_tokens` of that
/// head as cached before the session began, as the recording read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedPrompt {
    /// Prompt tokens of the recorded first request: input, cache writes and cache
    /// reads.
    pub first_request_tokens: u64,
    /// Of those, the tokens the recorded first request read from the cache: a head
    /// earlier sessions had cached. 0 when it read none.
    #[serde(default)]
    pub cached_before_tokens: u64,
    /// The recorded client's head (tools and system) in tokens, when the recording
    /// shows it: what a request read after the client rewrote its first message or
    /// compacted. The rest of the first request beyond the runtime's was then the
    /// client's first user message, which the cost meter pads after the head, so
    /// that a rewrite writes it again. Default none: the whole difference is head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_tokens: Option<u64>,
    /// The bytes a token this agent's own recorded prompts grew at, when the
    /// import measured it and it differs from the session's (`[economics]
    /// bytes_per_token`): the cost meter counts the agent's messages at it. A
    /// subagent writing prose runs at about four where the main thread's code and
    /// JSON run at three. Default none: the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_token: Option<crate::cache::BytesPerToken>,
}

/// The id of the tool call at `index` of a scripted turn played as the agent's
/// `step`th step: unique within a conversation.
pub fn scripted_tool_use_id(step: usize, index: usize) -> String {
    format!("toolu_s{step}_{index}")
}

/// The `(step, index)` a [`scripted_tool_use_id`] was made from; `None` for any
/// other id.
pub fn scripted_tool_use_position(id: &str) -> Option<(usize, usize)> {
    let (step, index) = id.strip_prefix("toolu_s")?.split_once('_')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(step) || !digits(index) {
        return None;
    }
    Some((step.parse().ok()?, index.parse().ok()?))
}

/// Roughly four bytes a token: the estimate used when a turn gives no usage.
const BYTES_PER_TOKEN: u64 = 4;

/// A policy that plays agent scripts. Cheap to clone: clones share the scripts,
/// which can carry megabytes (an oversize message), and every boot of a run takes one.
#[derive(Debug, Clone, Default)]
pub struct ScriptPolicy {
    scripts: Arc<BTreeMap<String, AgentScript>>,
    /// What an agent without a script says: one final text.
    fallback_text: String,
    /// Whether a turn without recorded usage estimates its input tokens from the
    /// request's size. Sizing costs a pass over the whole request per call, so a
    /// caller that bills input itself (the run's cost meter) turns it off.
    input_estimated: bool,
    /// Whether any script asks for a compaction (`compact_before`).
    compactions_scripted: bool,
    /// The gates of the scripts' background shells, which each request opens up to
    /// its step; none when no call has one.
    shell_gates: Option<Arc<ShellGates>>,
    /// What the simulated shell answers the scripts' commands with; none when no
    /// call scripts an answer.
    shell_answers: Option<Arc<ShellAnswers>>,
}

impl ScriptPolicy {
    /// A policy playing `scripts`; agents without one answer `fallback_text` once.
    pub fn new(scripts: impl IntoIterator<Item = AgentScript>, fallback_text: &str) -> Self {
        let scripts: BTreeMap<String, AgentScript> = scripts
            .into_iter()
            .map(|script| (script.prompt.clone(), script))
            .collect();
        let compactions_scripted = scripts
            .values()
            .any(|script| script.turns.iter().any(|t| t.compact_before.is_some()));
        let shell_gates = ShellGates::of(scripts.values()).map(Arc::new);
        let shell_answers = ShellAnswers::of(scripts.values()).map(Arc::new);
        Self {
            scripts: Arc::new(scripts),
            fallback_text: fallback_text.to_owned(),
            input_estimated: true,
            compactions_scripted,
            shell_gates,
            shell_answers,
        }
    }

    /// The gates the simulated shell holds the scripts' background commands at;
    /// none when no call has one.
    pub fn shell_gates(&self) -> Option<Arc<ShellGates>> {
        self.shell_gates.clone()
    }

    /// What the simulated shell answers the scripts' commands with; none when no
    /// call scripts an answer.
    pub fn shell_answers(&self) -> Option<Arc<ShellAnswers>> {
        self.shell_answers.clone()
    }

    /// The policy leaving `input_tokens` of unrecorded usage at 0, for a caller
    /// that counts input itself.
    pub fn without_input_estimate(mut self) -> Self {
        self.input_estimated = false;
        self
    }

    /// The turn `view`'s agent plays next, if its script has one left. Borrowed: a
    /// turn can carry megabytes (an oversize message), and only the response that
    /// plays it needs a copy.
    fn next_turn(&self, view: &ConversationView) -> Option<&ScriptedTurn> {
        self.scripts
            .get(&view.prompt)
            .and_then(|script| script.turns.get(view.steps_taken))
    }

    /// The compaction `view`'s agent's script asks for before its next turn, unless
    /// the conversation was already compacted there.
    fn compaction_due(&self, view: &ConversationView) -> Option<&ScriptedCompaction> {
        if view.compacted_at_step == Some(view.steps_taken) {
            return None;
        }
        self.next_turn(view)?.compact_before.as_ref()
    }
}

/// Builds the response for `turn`; tool-use ids are unique within the conversation
/// because they carry the step number.
pub fn response_for(turn: &ScriptedTurn, request: &ModelRequest, step: usize) -> ModelResponse {
    response_sized(turn, request, step, true)
}

/// [`response_for`], estimating input tokens only when `input_estimated`.
fn response_sized(
    turn: &ScriptedTurn,
    request: &ModelRequest,
    step: usize,
    input_estimated: bool,
) -> ModelResponse {
    let content = response_content(turn, step);
    let stop_reason = turn.stop_reason.unwrap_or(if turn.tool_calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolUse
    });
    let usage = turn
        .usage
        .unwrap_or_else(|| estimate_usage(input_estimated.then_some(request), &content));
    ModelResponse {
        id: format!("msg_s{step}"),
        model: request.model.clone(),
        role: Role::Assistant,
        content,
        stop_reason,
        usage,
    }
}

/// The content of the response `turn` plays as the agent's `step`th step: its text,
/// then its tool calls, or one empty text block when it has neither.
pub fn response_content(turn: &ScriptedTurn, step: usize) -> Vec<ContentBlock> {
    // Exactly as many blocks as the reply holds: the conversation keeps this vector
    // for the rest of the run, and a vector grown by pushes has room for four, 180
    // bytes of a one-call reply unused on every turn of every agent.
    let blocks_count = (usize::from(turn.text.is_some()) + turn.tool_calls.len()).max(1);
    let mut content = Vec::with_capacity(blocks_count);
    if let Some(text) = &turn.text {
        content.push(ContentBlock::text(text.clone()));
    }
    for (index, call) in turn.tool_calls.iter().enumerate() {
        content.push(ContentBlock::ToolUse {
            id: scripted_tool_use_id(step, index),
            name: call.name.clone(),
            input: call.input.shared(),
        });
    }
    if content.is_empty() {
        content.push(ContentBlock::text(String::new()));
    }
    content
}

/// Usage estimated from sizes: every request byte is uncached input (none without
/// a request to size).
fn estimate_usage(request: Option<&ModelRequest>, content: &[ContentBlock]) -> Usage {
    let request_bytes = request.map_or(0, |request| json_size_bytes(request).unwrap_or(0));
    let reply_bytes = content_size_bytes(content).unwrap_or(0);
    Usage {
        input_tokens: request_bytes.div_ceil(BYTES_PER_TOKEN),
        output_tokens: reply_bytes.div_ceil(BYTES_PER_TOKEN),
        ..Usage::default()
    }
}

impl ModelPolicy for ScriptPolicy {
    fn reply(
        &self,
        request: &ModelRequest,
        view: &ConversationView,
        latency_rng: &mut dyn RngCore,
    ) -> PolicyReply {
        if view.compaction_requested {
            // A summary carrying the agent's state; no script step is played. A
            // scripted compaction answers with its own summary and usage.
            let summary = match self.compaction_due(view) {
                Some(scripted) => ScriptedTurn {
                    text: Some(super::compaction::summary_with(view, &scripted.summary)),
                    usage: scripted.usage,
                    latency: scripted.latency,
                    ..ScriptedTurn::default()
                },
                None => ScriptedTurn {
                    text: Some(super::compaction::summary_of(view)),
                    ..ScriptedTurn::default()
                },
            };
            let usage_recorded = summary.usage.is_some();
            return PolicyReply::Respond {
                response: response_sized(&summary, request, view.steps_taken, self.input_estimated),
                latency: summary.latency.draw(latency_rng),
                usage_recorded,
            };
        }
        if let Some(gates) = &self.shell_gates {
            gates.requested(&view.prompt, view.steps_taken);
        }
        let fallback;
        let turn = match self.next_turn(view) {
            Some(turn) => turn,
            None => {
                // The script is exhausted (a resumed worker, a coordinator woken
                // again): the agent ends its turn with the fallback text.
                fallback = ScriptedTurn {
                    text: Some(self.fallback_text.clone()),
                    ..ScriptedTurn::default()
                };
                &fallback
            }
        };
        let waiting = turn
            .when
            .as_ref()
            .is_some_and(|trigger| !trigger.holds(view));
        let waiting_turn;
        let played = if waiting {
            waiting_turn = ScriptedTurn {
                text: Some(WAITING_TEXT.to_owned()),
                ..ScriptedTurn::default()
            };
            &waiting_turn
        } else {
            turn
        };
        PolicyReply::Respond {
            response: response_sized(played, request, view.steps_taken, self.input_estimated),
            latency: turn.latency.draw(latency_rng),
            usage_recorded: played.usage.is_some(),
        }
    }

    fn compaction_wanted(&self, messages: &[coord_runtime::world::Message]) -> Option<bool> {
        if !self.compactions_scripted {
            // Reading the conversation costs a pass over it; most scripts never ask.
            return None;
        }
        let request = ModelRequest {
            model: String::new(),
            max_tokens: 0,
            tools: Default::default(),
            system: Default::default(),
            messages: messages.to_vec(),
            thinking: None,
        };
        let view = ConversationView::of(&request);
        self.compaction_due(&view).map(|_| true)
    }
}
