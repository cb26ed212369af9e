//! What a simulated model can tell from a request: whose conversation it is, which
//! workers it launched, and which of their notifications have arrived.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use coord_runtime::envelope::{parse_block, Envelope};
use coord_runtime::session::CONTINUATION_PREAMBLE;
use coord_runtime::world::{ContentBlock, Message, ModelRequest, Role};
use memchr::memmem;
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use super::compaction::{
    holds_summary, is_compact_instruction, is_compaction_request, restored_view,
};
use super::misreading::misreading;

/// The text a scripted agent says while its next turn waits for a trigger. Turns
/// with this text do not count as script steps.
pub const WAITING_TEXT: &str = "(waiting for notifications)";

/// Whether `response` ends its agent's work: text and no tool call, and not the
/// text of an agent waiting for notifications, nor a compaction's summary.
pub fn ends_agent_work(response: &coord_runtime::world::ModelResponse) -> bool {
    let calls = response
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::ToolUse { .. }));
    let waiting = response.content.iter().any(
        |block| matches!(block, ContentBlock::Text { text, .. } if text == WAITING_TEXT || holds_summary(text)),
    );
    !calls && !waiting
}

/// A summary of one request's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConversationView {
    /// The first user text: the agent's prompt, which names whose conversation it is.
    pub prompt: String,
    /// Assistant turns so far that were script steps (waiting turns excluded).
    pub steps_taken: usize,
    /// Workers this agent launched with the Agent tool, by task id: their
    /// descriptions, from the launch results.
    pub launched: BTreeMap<String, String>,
    /// What those Agent calls asked for beyond the description, by task id. Not
    /// carried across a compaction, whose summary keeps only the descriptions.
    pub launch_inputs: BTreeMap<String, LaunchInput>,
    /// Every Agent call answered without an error, in order. Not carried across
    /// a compaction.
    pub spawn_answers: Vec<SpawnAnswer>,
    /// Background shells this agent started with `Bash`, in order: each task id,
    /// from the call's result, and the command it ran. Not carried across a
    /// compaction.
    pub shells: Vec<(String, String)>,
    /// Tasks this agent stopped, in order: the `task_id` of every TaskStop call
    /// whose result came back without an error. Not carried across a compaction.
    pub stopped: Vec<String>,
    /// Envelopes delivered into the conversation, in order.
    pub notifications: Vec<Envelope>,
    /// The texts of every user message block after the prompt (tool results
    /// excluded), in order: queued and mailbox messages, resumes.
    pub later_user_texts: Vec<String>,
    /// For a fork (PROTOCOL.md §6): the prompt of the conversation it copied. A
    /// fork's history is its parent's, so its own prompt is its directive, and
    /// `steps_taken`, `launched`, `notifications` and `later_user_texts` count only
    /// what followed the directive.
    pub forked_from: Option<String>,
    /// For a fork: how many messages of the request precede its own turns (the
    /// parent's history, the parent's assistant message and the directive message).
    pub fork_messages_len: usize,
    /// For a fork: the texts of the results its directive message gave its
    /// parent's calls that are not PROTOCOL.md §6's placeholder, in order.
    pub fork_results_not_placeholder: Vec<String>,
    /// Assistant messages so far, waiting turns included (for a fork, those after
    /// the directive): the conversation's model calls before this one. After a
    /// compaction, the calls before it (the compaction's included) count too.
    pub assistant_messages: usize,
    /// Whether this request asks for a compaction of the conversation (its last
    /// block is the runtime's compaction instruction): the model answers with a
    /// summary, and no script step is played. Of this request only, never carried
    /// to the conversation's later ones.
    pub compaction_requested: bool,
    /// For a compacted conversation: the script steps taken when it was compacted
    /// (its summary's count), so that a scripted compaction before a step happens
    /// once, however many waiting turns follow it.
    pub compacted_at_step: Option<usize>,
    /// The index of a message after the conversation's first that opens with the
    /// runtime's continuation preamble: a summary sent behind the history it
    /// replaced (a compaction undone, as a resume from a transcript that kept the
    /// history would send). Kept for the conversation's later requests.
    pub summary_behind_history_at: Option<usize>,
}

/// What an Agent call asked for, beside its description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchInput {
    /// Its prompt: whose conversation the worker's is.
    pub prompt: Option<String>,
    /// The name it gave the worker: its worktree slug, when it asked for a
    /// worktree.
    pub name: Option<String>,
    /// Its `run_in_background`, if it set one.
    pub run_in_background: Option<bool>,
    /// Its `subagent_type`, if it named one.
    pub subagent_type: Option<String>,
    /// Its `isolation` (`worktree` or `remote`), if it asked for one.
    pub isolation: Option<String>,
    /// Its `team_name`, if it named one: the worker is a teammate.
    pub team_name: Option<String>,
    /// The call's `tool_use` id, once its answer launched the worker: the id the
    /// worker's envelope must name (PROTOCOL.md §3).
    pub call_id: Option<String>,
    /// The `outputFile` its answer named, once it launched the worker.
    pub output_file: Option<String>,
}

impl LaunchInput {
    /// Whether it asked for a fork (`subagent_type = "fork"`).
    pub fn is_fork(&self) -> bool {
        self.subagent_type.as_deref() == Some("fork")
    }
}

/// One Agent call's answer, as its caller's model received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnAnswer {
    /// What the call asked for.
    pub asked: LaunchInput,
    /// The answer, when it launched the worker in the background: its `agentId`.
    pub launched: Option<String>,
    /// The answer, when it was the worker's result inline: its whole text.
    pub inline: Option<String>,
    /// A launch's `status` word, as the answer gave it.
    pub launch_status: Option<String>,
    /// For a launch: whether the answer's `description` was the call's own.
    pub launch_description_kept: Option<bool>,
}

/// What an Agent call's answer said of the worker it launched in the background.
#[derive(Debug, Clone)]
struct LaunchAnswer {
    agent_id: String,
    output_file: Option<String>,
    status: Option<String>,
    description: Option<String>,
}

/// Envelopes and launch results already parsed, by the text they were parsed from.
///
/// A coordinator's every request carries every notification it was ever given and
/// every launch result, so a caller that reads each request of a run into a view
/// ([`ConversationView::read`]) keeps one memo for the run and parses each
/// notification's XML and each launch's JSON once. The keys are hashed with XXH3:
/// they are whole notification texts, and SipHash spends several times as long on
/// them.
///
/// It also keeps, per conversation, where the last read of it stopped. Within one
/// boot the runtime only appends to a conversation, and hands each request the
/// conversation's own messages, moved rather than copied. So a request whose first
/// message and whose message at the last read's end are the very messages read then
/// (the same allocation, and equal) is that conversation grown, and is read from
/// there on: reading every request whole made a script of n turns cost n² message
/// visits. Any other request (a fork's copy of its parent's history, a sibling
/// with the same prompt, a request that crossed the simulated network) is read
/// whole.
#[derive(Debug, Default)]
pub struct EnvelopeMemo {
    parsed: HashMap<String, Vec<Envelope>, Xxh3DefaultBuilder>,
    /// The `agentId` and `outputFile` of each launch result, by its text.
    launched: HashMap<String, Option<LaunchAnswer>, Xxh3DefaultBuilder>,
    /// Where reading each conversation stopped, by its first user text: several
    /// conversations (siblings, forks of one parent) can share one, the latest
    /// read last.
    conversations: HashMap<String, Vec<Reading>, Xxh3DefaultBuilder>,
    /// What [`unescaped_in_envelopes`] found in each envelope text read since the
    /// tap last took them.
    unescaped: Vec<String>,
    /// Whether an envelope text was read again as hostile variants ([`misreading`]).
    variants_read: bool,
    /// What [`misreading`] found since the tap last took it.
    misread: Vec<String>,
}

/// The most readings kept per first user text: the siblings whose requests
/// alternate. A conversation whose reading was dropped is read whole once more.
const READINGS_PER_PROMPT_MAX: usize = 16;

/// A conversation read up to some message: the view so far and what reading on
/// needs.
#[derive(Debug, Clone, Default)]
struct Reading {
    view: ConversationView,
    /// tool_use id → what a call whose result the view reads asked for.
    calls: BTreeMap<String, AskedCall>,
    first_text_seen: bool,
    /// How many messages were read.
    messages_len: usize,
    /// The last message read, which a later request must hold at the same place,
    /// equal, to be read on from `messages_len`.
    last: Option<Message>,
    /// Where the first and the last message read kept their blocks: a request
    /// built from the same conversation holds them in the same allocations.
    first_blocks_at: usize,
    last_blocks_at: usize,
}

/// What a tool call asked for, kept until its result is read.
#[derive(Debug, Clone)]
enum AskedCall {
    /// An Agent call: its description and the rest of what it asked.
    Agent(String, LaunchInput),
    /// A `Bash` call with `run_in_background`: its command.
    BackgroundShell(String),
    /// A TaskStop call: the task it names.
    Stop(String),
}

impl AskedCall {
    /// What `name` called with `input` asked for, when the view follows its result.
    fn of(name: &str, input: &serde_json::Value) -> Option<AskedCall> {
        let text = |key: &str| input.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        match name {
            "Agent" => {
                let description = text("description")?;
                let asked = LaunchInput {
                    prompt: text("prompt"),
                    name: text("name"),
                    run_in_background: input
                        .get("run_in_background")
                        .and_then(serde_json::Value::as_bool),
                    subagent_type: text("subagent_type"),
                    isolation: text("isolation"),
                    team_name: text("team_name"),
                    call_id: None,
                    output_file: None,
                };
                Some(AskedCall::Agent(description, asked))
            }
            "Bash" if input.get("run_in_background") == Some(&serde_json::Value::Bool(true)) => {
                text("command").map(AskedCall::BackgroundShell)
            }
            "TaskStop" => text("task_id").map(AskedCall::Stop),
            _ => None,
        }
    }
}

/// The task id in the result of a background `Bash` call: `Command running in
/// background with ID: <id>. Output: <path>`.
fn shell_task_id(result: &str) -> Option<&str> {
    let rest = result.strip_prefix("Command running in background with ID: ")?;
    let (id, _) = rest.split_once(". Output: ")?;
    Some(id)
}

/// Where `message` keeps its blocks: its identity, for as long as it lives.
fn blocks_at(message: &Message) -> usize {
    message.content.as_ptr() as usize
}

impl Reading {
    /// Whether `request` is this conversation grown: the same first message, and
    /// the same message where the reading stopped.
    fn continues(&self, request: &ModelRequest) -> bool {
        let messages = &request.messages;
        if self.messages_len == 0 || messages.len() < self.messages_len {
            return false;
        }
        let last = &messages[self.messages_len - 1];
        blocks_at(&messages[0]) == self.first_blocks_at
            && blocks_at(last) == self.last_blocks_at
            && self.last.as_ref() == Some(last)
    }

    /// Reads the messages of `request` past those read already.
    fn read_on(&mut self, request: &ModelRequest, memo: &mut EnvelopeMemo) {
        let start = self.messages_len;
        for (index, message) in request.messages.iter().enumerate().skip(start) {
            self.read_message(index, message, memo);
        }
        self.messages_len = request.messages.len();
        if let Some(first) = request.messages.first() {
            self.first_blocks_at = blocks_at(first);
        }
        if let Some(last) = request.messages.last() {
            self.last_blocks_at = blocks_at(last);
            if self.messages_len > start || self.last.is_none() {
                self.last = Some(last.clone());
            }
        }
    }

    fn read_message(&mut self, index: usize, message: &Message, memo: &mut EnvelopeMemo) {
        let view = &mut self.view;
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text { text, .. }) => {
                    if !self.first_text_seen {
                        self.first_text_seen = true;
                        // A compacted conversation starts from the summary, which
                        // carries what the conversation before it counted.
                        match restored_view(text) {
                            Some(restored) => *view = restored,
                            None => view.prompt = text.clone(),
                        }
                        continue;
                    }
                    if is_compact_instruction(block) {
                        continue;
                    }
                    if text.starts_with(CONTINUATION_PREAMBLE) {
                        view.summary_behind_history_at.get_or_insert(index);
                    }
                    if let Some(directive) = fork_directive(text) {
                        // Everything before the directive is the parent's, its
                        // calls too: a result for one of them is not the fork's.
                        self.calls.clear();
                        let parent = std::mem::replace(&mut view.prompt, directive.to_owned());
                        *view = ConversationView {
                            prompt: std::mem::take(&mut view.prompt),
                            forked_from: Some(parent),
                            fork_messages_len: index + 1,
                            fork_results_not_placeholder: results_not_placeholder(message),
                            ..ConversationView::default()
                        };
                        continue;
                    }
                    let envelopes = memo.envelopes(text);
                    if envelopes.is_empty() {
                        view.later_user_texts.push(text.clone());
                    }
                    view.notifications.extend(envelopes);
                }
                (
                    Role::User,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error: false,
                        ..
                    },
                ) => match self.calls.get(tool_use_id) {
                    Some(AskedCall::Agent(description, input)) => {
                        let launched = memo.launch_answer(content);
                        view.spawn_answers.push(SpawnAnswer {
                            asked: input.clone(),
                            launched: launched.as_ref().map(|answer| answer.agent_id.clone()),
                            inline: launched.is_none().then(|| content.clone()),
                            launch_status: launched.as_ref().and_then(|a| a.status.clone()),
                            launch_description_kept: launched
                                .as_ref()
                                .map(|a| a.description.as_ref() == Some(description)),
                        });
                        if let Some(LaunchAnswer {
                            agent_id,
                            output_file,
                            ..
                        }) = launched
                        {
                            let input = LaunchInput {
                                call_id: Some(tool_use_id.clone()),
                                output_file,
                                ..input.clone()
                            };
                            view.launch_inputs.insert(agent_id.clone(), input);
                            view.launched.insert(agent_id, description.clone());
                        }
                    }
                    Some(AskedCall::BackgroundShell(command)) => {
                        if let Some(id) = shell_task_id(content) {
                            view.shells.push((id.to_owned(), command.clone()));
                        }
                    }
                    Some(AskedCall::Stop(task_id)) => view.stopped.push(task_id.clone()),
                    None => {}
                },
                (Role::Assistant, ContentBlock::ToolUse { id, name, input }) => {
                    if let Some(asked) = AskedCall::of(name, input) {
                        self.calls.insert(id.clone(), asked);
                    }
                }
                _ => {}
            }
        }
        if message.role == Role::Assistant {
            view.assistant_messages += 1;
            let waiting = message.content.iter().all(
                |block| matches!(block, ContentBlock::Text { text, .. } if text == WAITING_TEXT),
            );
            if !waiting {
                view.steps_taken += 1;
            }
        }
    }
}

/// The first character an envelope in `text` carries raw between its tags, where
/// PROTOCOL.md §3 escapes every element body (`& < > " '`) and docs/envelope.md a
/// carriage return too: `>`, `"`, `'` or `\r` (a raw `<` or `&` reads as markup, and
/// the parser already finds it), with the element it is in. `None` when every
/// envelope is escaped. The runtime escapes in every profile (docs/profiles.md), so
/// the bytes its coordinator's model received are held to that, not only what a
/// lenient parser makes of them: quick-xml reads a raw carriage return back as it
/// was, where an XML reader that normalises line ends (XML 1.0 §2.11) reads a
/// result the worker never wrote.
pub fn unescaped_in_envelopes(text: &str) -> Option<String> {
    static OPEN: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new("<task-notification>"));
    static CLOSE: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new("</task-notification>"));
    let mut rest = text;
    while let Some(start) = OPEN.find(rest.as_bytes()) {
        let after = &rest[start..];
        let end = CLOSE
            .find(after.as_bytes())
            .map_or(after.len(), |end| end + CLOSE.needle().len());
        let envelope = &after[..end];
        rest = &after[end..];
        // The envelope's tags have no attributes: an escaped one holds no quote or
        // carriage return, and a `>` only where each tag ends. Most envelopes are
        // found clean on that count alone.
        let (opens, closes) = envelope
            .bytes()
            .fold((0usize, 0usize), |(opens, closes), byte| {
                (
                    opens + usize::from(byte == b'<'),
                    closes + usize::from(byte == b'>'),
                )
            });
        if opens == closes && memchr::memchr3(b'"', b'\'', b'\r', envelope.as_bytes()).is_none() {
            continue;
        }
        // Each piece after a `<` is a tag up to its `>`, then the text up to the
        // next tag.
        for piece in envelope.split('<').skip(1) {
            let (element, body) = piece.split_once('>').unwrap_or((piece, ""));
            let raw = body
                .bytes()
                .position(|byte| matches!(byte, b'>' | b'"' | b'\'' | b'\r'));
            if let Some(at) = raw {
                let character = char::from(body.as_bytes()[at]);
                return Some(format!(
                    "an envelope's <{element}> carried {character:?} unescaped"
                ));
            }
        }
    }
    None
}

impl EnvelopeMemo {
    /// The envelopes in `text`, as [`parse_block`] finds them.
    fn envelopes(&mut self, text: &str) -> Vec<Envelope> {
        // Text with no envelope in it is not worth keeping a copy of.
        if !text.contains("<task-notification") {
            return Vec::new();
        }
        if let Some(envelopes) = self.parsed.get(text) {
            return envelopes.clone();
        }
        let envelopes = parse_block(text);
        if let Some(found) = unescaped_in_envelopes(text) {
            self.unescaped.push(found);
        }
        // The first envelope with a result is read again as hostile variants: the
        // reader's refusals do not depend on which envelope they start from, and
        // one reading a run keeps the cost out of the sweep's throughput.
        if let [envelope] = envelopes.as_slice() {
            if !self.variants_read && envelope.result.is_some() {
                self.variants_read = true;
                self.misread.extend(misreading(parse_block, text, envelope));
            }
        }
        self.parsed.insert(text.to_owned(), envelopes.clone());
        envelopes
    }

    /// What the envelope texts read since the last call held unescaped, one
    /// description a text.
    pub fn take_unescaped(&mut self) -> Vec<String> {
        std::mem::take(&mut self.unescaped)
    }

    /// What the hostile variants of the envelope texts read since the last call
    /// were misread as, one description a text.
    pub fn take_misread(&mut self) -> Vec<String> {
        std::mem::take(&mut self.misread)
    }

    /// The `agentId` string of the launch result `content`, and its `outputFile`
    /// string if it has one, if it is a JSON object with an `agentId`.
    fn launch_answer(&mut self, content: &str) -> Option<LaunchAnswer> {
        if let Some(answer) = self.launched.get(content) {
            return answer.clone();
        }
        let launch: Option<serde_json::Value> = serde_json::from_str(content).ok();
        let field = |name: &str| {
            launch
                .as_ref()
                .and_then(|launch| launch.get(name))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let answer = field("agentId").map(|agent_id| LaunchAnswer {
            agent_id,
            output_file: field("outputFile"),
            status: field("status"),
            description: field("description"),
        });
        self.launched.insert(content.to_owned(), answer.clone());
        answer
    }
}

impl ConversationView {
    /// Reads `request`.
    pub fn of(request: &ModelRequest) -> ConversationView {
        Self::read(request, &mut EnvelopeMemo::default())
    }

    /// Reads `request`, taking envelopes parsed before, and the reading of the
    /// conversation's earlier requests, from `memo`.
    pub fn read(request: &ModelRequest, memo: &mut EnvelopeMemo) -> ConversationView {
        let key = first_user_text(request).map(str::to_owned);
        let earlier = key.as_ref().and_then(|key| {
            let readings = memo.conversations.get_mut(key)?;
            let index = readings
                .iter()
                .position(|reading| reading.continues(request))?;
            Some(readings.remove(index))
        });
        let mut reading = earlier.unwrap_or_default();
        reading.read_on(request, memo);
        let mut view = reading.view.clone();
        view.compaction_requested = is_compaction_request(request);
        if let Some(key) = key {
            let readings = memo.conversations.entry(key).or_default();
            if readings.len() == READINGS_PER_PROMPT_MAX {
                readings.remove(0);
            }
            readings.push(reading);
        }
        view
    }

    /// Descriptions of launched workers matching `pattern` (`*` matches any run of
    /// characters), and how many of them have notified.
    pub fn launched_and_notified(&self, pattern: &str) -> (usize, usize) {
        let matching: Vec<&String> = self
            .launched
            .iter()
            .filter(|(_, description)| wildcard_match(pattern, description))
            .map(|(id, _)| id)
            .collect();
        let notified = matching
            .iter()
            .filter(|id| self.notifications.iter().any(|e| e.task_id == ***id))
            .count();
        (matching.len(), notified)
    }
}

/// The text of the first user text block of `request`: whose conversation it is.
fn first_user_text(request: &ModelRequest) -> Option<&str> {
    request
        .messages
        .iter()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| &message.content)
        .find_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
}

/// Every tool result of a fork's directive message answers one of its parent's
/// calls with this text (PROTOCOL.md §6): the simulator's own copy, so that a
/// runtime that changes a byte of it is judged by it.
pub const FORK_PLACEHOLDER_RESULT: &str = "Fork started — processing in background";

/// The results in a fork's directive `message` whose text is not the placeholder.
fn results_not_placeholder(message: &Message) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { content, .. } if content != FORK_PLACEHOLDER_RESULT => {
                Some(content.clone())
            }
            _ => None,
        })
        .collect()
}

/// The directive of a fork's directive block (PROTOCOL.md §6): the text after
/// `Your directive: ` in a block that carries the fork boilerplate.
fn fork_directive(text: &str) -> Option<&str> {
    use coord_runtime::fork::{FORK_BOILERPLATE_TAG, FORK_DIRECTIVE_PREFIX};
    // `<TAG>` tested piecewise: this runs on every user text of every request.
    let opens_boilerplate = text
        .strip_prefix('<')
        .and_then(|rest| rest.strip_prefix(FORK_BOILERPLATE_TAG))
        .is_some_and(|rest| rest.starts_with('>'));
    if !opens_boilerplate {
        return None;
    }
    let at = text.rfind(FORK_DIRECTIVE_PREFIX)?;
    Some(&text[at + FORK_DIRECTIVE_PREFIX.len()..])
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
///
/// Splits the pattern in place rather than into a list: disk-fault paths are matched
/// at every disk operation of a seed that has them.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let Some((first, after_first)) = pattern.split_once('*') else {
        return pattern == text;
    };
    // The parts between the first `*` and the last, if there are two or more.
    let (middles, last) = match after_first.rsplit_once('*') {
        Some((middles, last)) => (Some(middles), last),
        None => (None, after_first),
    };
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in middles.into_iter().flat_map(|middles| middles.split('*')) {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{
        unescaped_in_envelopes, wildcard_match, ConversationView, EnvelopeMemo, WAITING_TEXT,
    };
    use coord_runtime::world::{ContentBlock, Message, ModelRequest, Role};
    use proptest::prelude::*;

    fn text(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![ContentBlock::Text {
                text: text.to_owned(),
                cache_control: None,
            }],
        }
    }

    /// The messages a growing conversation may gain: launches and their results,
    /// notifications, queued messages, waiting turns and a fork directive.
    fn message(kind: u8, n: usize) -> Message {
        match kind % 6 {
            0 => Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: format!("toolu_{n}"),
                    name: "Agent".to_owned(),
                    input: serde_json::json!({ "description": format!("w{n}"), "prompt": "p" })
                        .into(),
                }],
            },
            1 => Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: format!("toolu_{}", n.saturating_sub(1)),
                    content: format!("{{\"agentId\":\"a{n}\"}}"),
                    is_error: false,
                    cache_control: None,
                }],
            },
            2 => text(
                Role::User,
                &format!(
                    "<task-notification>\n<task-id>a{n}</task-id>\n<status>completed</status>\n\
                     <summary>done</summary>\n</task-notification>"
                ),
            ),
            3 => text(Role::Assistant, WAITING_TEXT),
            4 => text(Role::User, &format!("queued message {n}")),
            _ => text(
                Role::User,
                &format!(
                    "<{}>x</{}>\n{}go {n}",
                    coord_runtime::fork::FORK_BOILERPLATE_TAG,
                    coord_runtime::fork::FORK_BOILERPLATE_TAG,
                    coord_runtime::fork::FORK_DIRECTIVE_PREFIX
                ),
            ),
        }
    }

    fn tool_use(id: &str, name: &str, input: serde_json::Value) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.to_owned(),
                name: name.to_owned(),
                input: input.into(),
            }],
        }
    }

    fn tool_result(id: &str, content: &str, is_error: bool) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.to_owned(),
                content: content.to_owned(),
                is_error,
                cache_control: None,
            }],
        }
    }

    #[test]
    fn a_view_holds_the_shells_its_agent_started_and_the_stops_it_was_told_succeeded() {
        // Goal: what placeholders and invariant 1 rely on is read from the model's
        // side of the conversation: a background shell's id from its result, a
        // stop only when its answer was no error. Method: two shells (one started
        // in the foreground), one stop refused and one accepted.
        let view = ConversationView::of(&request(vec![
            text(Role::User, "the prompt"),
            tool_use(
                "t1",
                "Bash",
                serde_json::json!({ "command": "cargo test", "run_in_background": true }),
            ),
            tool_result(
                "t1",
                "Command running in background with ID: b00000001. Output: /s/tasks/b00000001.output",
                false,
            ),
            tool_use("t2", "Bash", serde_json::json!({ "command": "ls" })),
            tool_result("t2", "README.md", false),
            tool_use("t3", "TaskStop", serde_json::json!({ "task_id": "b00000009" })),
            tool_result("t3", "no task b00000009", true),
            tool_use("t4", "TaskStop", serde_json::json!({ "task_id": "b00000001" })),
            tool_result("t4", "stopped", false),
        ]));
        assert_eq!(
            view.shells,
            vec![("b00000001".to_owned(), "cargo test".to_owned())]
        );
        assert_eq!(view.stopped, vec!["b00000001".to_owned()]);
    }

    #[test]
    fn a_summary_behind_other_messages_is_found_and_one_in_front_is_not() {
        // Goal: a conversation that starts from its summary is compacted; one that
        // holds the summary behind the history it replaced is not, and the view
        // says where the summary sits.
        let summary = format!(
            "{}Summary: 3 script steps taken.",
            coord_runtime::session::CONTINUATION_PREAMBLE
        );
        let compacted = request(vec![
            text(Role::User, &summary),
            text(Role::Assistant, "Going on."),
            text(Role::User, "A follow-up."),
        ]);
        assert_eq!(
            ConversationView::of(&compacted).summary_behind_history_at,
            None
        );
        let undone = request(vec![
            text(Role::User, "the prompt"),
            text(Role::Assistant, "Module 1."),
            text(Role::User, &summary),
        ]);
        assert_eq!(
            ConversationView::of(&undone).summary_behind_history_at,
            Some(2)
        );
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "m".to_owned(),
            max_tokens: 1,
            tools: Default::default(),
            system: Default::default(),
            messages,
            thinking: None,
        }
    }

    proptest! {
        /// Goal: reading a conversation on from where its last request stopped gives
        /// the view a whole read gives, at every length; a copy of the conversation
        /// (a fork's, a sibling's) and a request whose last read message changed are
        /// read whole. Method: grow one request as the runtime grows a conversation,
        /// moving its messages, and compare each read with a fresh whole read.
        #[test]
        fn reading_on_sees_what_reading_whole_sees(
            kinds in proptest::collection::vec(any::<u8>(), 0..40),
            edited in any::<bool>(),
        ) {
            let mut grown = request(vec![text(Role::User, "the prompt")]);
            let mut memo = EnvelopeMemo::default();
            for (n, kind) in kinds.iter().enumerate() {
                grown.messages.push(message(*kind, n));
                let whole = ConversationView::of(&grown);
                prop_assert_eq!(&ConversationView::read(&grown, &mut memo), &whole);
                prop_assert_eq!(&ConversationView::read(&grown, &mut memo), &whole);
                // A sibling: the same messages, copied, and one more of its own.
                let mut sibling = request(grown.messages.clone());
                sibling.messages.push(message(kind.wrapping_add(1), n + 1000));
                prop_assert_eq!(
                    ConversationView::read(&sibling, &mut memo),
                    ConversationView::of(&sibling)
                );
            }
            let last = grown.messages.len() - 1;
            if edited {
                grown.messages[last] = text(Role::User, "an edited message");
            } else {
                grown.messages[last].content.push(ContentBlock::Text {
                    text: "appended".to_owned(),
                    cache_control: None,
                });
            }
            prop_assert_eq!(
                ConversationView::read(&grown, &mut memo),
                ConversationView::of(&grown)
            );
        }
    }

    /// How patterns were matched before [`wildcard_match`] split them in place.
    fn wildcard_match_by_list(pattern: &str, text: &str) -> bool {
        let parts: Vec<&str> = pattern.split('*').collect();
        if parts.len() == 1 {
            return pattern == text;
        }
        let (first, last) = (parts[0], parts[parts.len() - 1]);
        if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
            return false;
        }
        let mut rest = &text[first.len()..text.len() - last.len()];
        for middle in &parts[1..parts.len() - 1] {
            match rest.find(middle) {
                Some(at) => rest = &rest[at + middle.len()..],
                None => return false,
            }
        }
        true
    }

    proptest! {
        /// Short alphabets, so that stars, repeats and overlaps are common.
        #[test]
        fn splitting_in_place_matches_what_splitting_into_a_list_did(
            pattern in "[ab*/]{0,8}",
            text in "[ab/]{0,10}",
        ) {
            prop_assert_eq!(
                wildcard_match(&pattern, &text),
                wildcard_match_by_list(&pattern, &text)
            );
        }
    }

    fn envelope_with(result: &str, summary: &str) -> coord_runtime::envelope::Envelope {
        coord_runtime::envelope::Envelope {
            task_id: "a1b2c3d4e".to_owned(),
            tool_use_id: None,
            output_file: None,
            status: coord_runtime::envelope::EnvelopeStatus::Completed,
            summary: summary.to_owned(),
            note: None,
            result: Some(result.to_owned()),
            usage: None,
            worktree: None,
            extra: Default::default(),
        }
    }

    proptest! {
        #[test]
        fn an_envelope_the_runtime_renders_carries_nothing_unescaped(
            result in any::<String>(),
            summary in "[ -~]{0,40}",
        ) {
            use coord_runtime::envelope::{render, Dialect};
            let envelope = envelope_with(&result, &summary);
            for dialect in [Dialect::ClaudeCode, Dialect::Nexo] {
                let text = format!("Before.\n{}\nAfter: \"quoted\" > 1", render(&envelope, dialect));
                prop_assert_eq!(unescaped_in_envelopes(&text), None);
            }
        }
    }

    #[test]
    fn a_raw_body_is_found_with_its_element() {
        // Goal: Claude Code's raw interpolation, which PROTOCOL.md §3 says our
        // runtime never does, is found in the text a model received, in the element
        // that carries it; text outside envelopes is not judged.
        use coord_runtime::envelope::{render_raw_result, Dialect};
        let raw = render_raw_result(&envelope_with("if a > b", "done"), Dialect::ClaudeCode);
        assert_eq!(
            unescaped_in_envelopes(&raw).as_deref(),
            Some("an envelope's <result> carried '>' unescaped")
        );
        let quoted = render_raw_result(&envelope_with("say \"hi\"", "done"), Dialect::ClaudeCode);
        assert!(unescaped_in_envelopes(&quoted).unwrap().contains("'\"'"));
        let two_lines =
            render_raw_result(&envelope_with("one\r\ntwo", "done"), Dialect::ClaudeCode);
        assert_eq!(
            unescaped_in_envelopes(&two_lines).as_deref(),
            Some("an envelope's <result> carried '\\r' unescaped")
        );
        assert_eq!(unescaped_in_envelopes("no envelope: a > b \"c\""), None);
    }
}
