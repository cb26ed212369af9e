//! One agent's thread read out of its DAG: its prompt, its model decisions (one
//! per API response, its split lines merged), and what reached it between them.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use coord_runtime::world::Usage;
use serde_json::Value;

use super::dag::{Dag, Entry};

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The `tool_use` id.
    pub id: String,
    /// The tool, as Claude Code named it.
    pub name: String,
    /// Its input.
    pub input: Value,
}

/// What reached the agent between two of its responses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arrivals {
    /// Tool results.
    pub tool_results: usize,
    /// The `tool_use` ids of tool results that carried a finished subagent's
    /// answer (a foreground `Task` call).
    pub agent_results: Vec<String>,
    /// The task ids of delivered `<task-notification>` envelopes.
    pub notifications: Vec<String>,
    /// User prompts typed after the first one.
    pub user_prompts: usize,
    /// Their texts, in order.
    pub user_prompt_texts: Vec<String>,
    /// The compaction the client made before this response's request, if any.
    pub compaction: Option<RecordedCompaction>,
}

/// A compaction the recording made: its `compact_boundary` line and the summary
/// message the conversation went on from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedCompaction {
    /// Line of the boundary.
    pub line: usize,
    /// What started it (`compactMetadata.trigger`: `auto` or `manual`).
    pub trigger: String,
    /// The context size it recorded (`compactMetadata.preTokens`).
    pub pre_tokens: u64,
    /// The summary, without the continuation preamble: the text of the
    /// `isCompactSummary` message after the boundary. `None` when the recording has
    /// no such message.
    pub summary: Option<String>,
    /// When the boundary was written (ms since the Unix epoch), if stamped.
    pub at_ms: Option<u64>,
}

/// One API response: every line sharing its `(message.id, requestId)`, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    /// Line of its first content block.
    pub line: usize,
    /// Its text blocks, in order, joined by blank lines; `None` without any.
    pub text: Option<String>,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolUse>,
    /// Thinking blocks, which a replay does not carry.
    pub thinking_blocks: usize,
    /// The recorded stop reason, when a line had one.
    pub stop_reason: Option<String>,
    /// The largest usage among its lines.
    pub usage: Option<Usage>,
    /// The model that answered, as the response named it.
    pub model: Option<String>,
    /// Milliseconds from the line before it to its first line, when both carry
    /// timestamps.
    pub latency_ms: Option<u64>,
    /// When its first line was written (ms since the Unix epoch), if stamped.
    pub started_ms: Option<u64>,
    /// When the last stamped line before it was written: about when its request
    /// was sent.
    pub sent_ms: Option<u64>,
    /// What reached the agent since its previous response.
    pub before: Arrivals,
}

/// One agent's thread.
#[derive(Debug, Clone, Default)]
pub struct Thread {
    /// The first real user prompt.
    pub prompt: Option<String>,
    /// Its responses, in order.
    pub responses: Vec<Response>,
    /// Responses that lie only on abandoned branches.
    pub abandoned_responses: usize,
    /// `tool_use` id of a spawning call → the spawned subagent's `agentId`, from
    /// `agent_progress` lines and from tool results.
    pub agent_ids: BTreeMap<String, String>,
    /// A subagent's own lines as `agent_progress` lines carried them, by `agentId`:
    /// what the thread is rebuilt from when its file is missing.
    pub progress_lines: BTreeMap<String, Vec<Entry>>,
    /// Envelopes enqueued through `queue-operation` lines.
    pub notifications_enqueued: usize,
    /// The text of each tool result received, by the `tool_use` id it answers.
    pub results: BTreeMap<String, String>,
    /// The working directory of its first line that names one: where the recorded
    /// paths are.
    pub cwd: Option<String>,
    /// The first and last timestamps of its lines (ms since the Unix epoch).
    pub span_ms: Option<(u64, u64)>,
    /// The background shell task each `Bash` call became (its result's
    /// `toolUseResult.backgroundTaskId`), by the call's `tool_use` id.
    pub background_tasks: BTreeMap<String, String>,
}

impl Thread {
    /// Every tool call of every response.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolUse> {
        self.responses.iter().flat_map(|r| r.tool_calls.iter())
    }
}

/// The key that groups the lines of one API response; a line without a message id
/// is a response of its own.
fn response_key(entry: &Entry) -> String {
    let message_id = entry
        .value
        .pointer("/message/id")
        .and_then(Value::as_str)
        .unwrap_or("");
    if message_id.is_empty() {
        return format!("line:{}", entry.line);
    }
    let request_id = entry.str_field("requestId").unwrap_or("");
    format!("{}:{message_id}{request_id}", message_id.len())
}

/// The content blocks of a line's message: an array, or a string as one text block.
fn blocks(entry: &Entry) -> Vec<Value> {
    match entry.value.pointer("/message/content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Reads the thread of `dag`.
pub fn thread(dag: &Dag) -> Thread {
    let path = dag.active_path();
    let active_keys: HashSet<String> = path
        .iter()
        .map(|&i| &dag.entries[i])
        .filter(|e| e.kind == "assistant")
        .map(response_key)
        .collect();
    let all_assistant_keys: HashSet<String> = dag
        .entries
        .iter()
        .filter(|e| e.kind == "assistant")
        .map(response_key)
        .collect();
    let active_tool_uses: HashSet<String> = dag
        .entries
        .iter()
        .filter(|e| e.kind == "assistant" && active_keys.contains(&response_key(e)))
        .flat_map(blocks)
        .filter(|b| block_type(b) == "tool_use")
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let mut thread = Thread {
        abandoned_responses: all_assistant_keys.difference(&active_keys).count(),
        ..Thread::default()
    };
    let mut index_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut arrivals = Arrivals::default();
    let mut previous_ms: Option<u64> = None;
    for (i, entry) in dag.entries.iter().enumerate() {
        let timestamp_ms = entry.str_field("timestamp").and_then(timestamp_ms);
        if thread.cwd.is_none() {
            thread.cwd = entry.str_field("cwd").map(str::to_owned);
        }
        match entry.kind.as_str() {
            "progress" => read_progress(entry, &mut thread),
            "queue-operation" => {
                let enqueued = entry.str_field("operation") == Some("enqueue")
                    && entry
                        .str_field("content")
                        .is_some_and(|c| c.contains("<task-notification>"));
                thread.notifications_enqueued += usize::from(enqueued);
            }
            "assistant" => {
                let key = response_key(entry);
                if !active_keys.contains(&key) {
                    continue;
                }
                let index = *index_of.entry(key).or_insert_with(|| {
                    thread.responses.push(Response {
                        line: entry.line,
                        latency_ms: timestamp_ms
                            .zip(previous_ms)
                            .map(|(now, before)| now.saturating_sub(before)),
                        started_ms: timestamp_ms,
                        sent_ms: previous_ms,
                        before: std::mem::take(&mut arrivals),
                        ..Response::default()
                    });
                    thread.responses.len() - 1
                });
                merge_line(&mut thread.responses[index], entry);
            }
            "system" if entry.str_field("subtype") == Some("compact_boundary") => {
                if !path.contains(&i) {
                    continue;
                }
                let metadata = entry.value.get("compactMetadata");
                arrivals.compaction = Some(RecordedCompaction {
                    line: entry.line,
                    trigger: metadata
                        .and_then(|m| m.get("trigger"))
                        .and_then(Value::as_str)
                        .unwrap_or("auto")
                        .to_owned(),
                    pre_tokens: metadata
                        .and_then(|m| m.get("preTokens"))
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    summary: None,
                    at_ms: timestamp_ms,
                });
            }
            "user" => {
                let answers_active_call = blocks(entry).iter().any(|b| {
                    b.get("tool_use_id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| active_tool_uses.contains(id))
                });
                if !path.contains(&i) && !answers_active_call {
                    continue;
                }
                read_user(entry, &mut thread, &mut arrivals);
            }
            _ => continue,
        }
        if let Some(now) = timestamp_ms {
            let (first, last) = thread.span_ms.get_or_insert((now, now));
            *first = (*first).min(now);
            *last = (*last).max(now);
        }
        previous_ms = timestamp_ms.or(previous_ms);
    }
    thread
}

/// Adds one line's content blocks, usage and stop reason to its response.
fn merge_line(response: &mut Response, entry: &Entry) {
    for block in blocks(entry) {
        match block_type(&block) {
            "text" => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                match &mut response.text {
                    Some(joined) => {
                        joined.push_str("\n\n");
                        joined.push_str(text);
                    }
                    None => response.text = Some(text.to_owned()),
                }
            }
            "tool_use" => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                // A line repeating an earlier block of its response adds nothing.
                if !id.is_empty() && response.tool_calls.iter().any(|call| call.id == id) {
                    continue;
                }
                response.tool_calls.push(ToolUse {
                    id: id.to_owned(),
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    input: block.get("input").cloned().unwrap_or(Value::Null),
                });
            }
            "thinking" | "redacted_thinking" => response.thinking_blocks += 1,
            _ => {}
        }
    }
    if let Some(reason) = entry
        .value
        .pointer("/message/stop_reason")
        .and_then(Value::as_str)
    {
        response.stop_reason = Some(reason.to_owned());
    }
    if let Some(model) = entry
        .value
        .pointer("/message/model")
        .and_then(Value::as_str)
    {
        response.model = Some(model.to_owned());
    }
    let usage = entry
        .value
        .pointer("/message/usage")
        .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok());
    if let Some(usage) = usage {
        // Saturating: counts are checked against their bound only once the thread is
        // read, and a hostile line must not overflow before then.
        let total = |u: &Usage| {
            u.input_tokens
                .saturating_add(u.output_tokens)
                .saturating_add(u.cache_creation_input_tokens)
                .saturating_add(u.cache_read_input_tokens)
        };
        if response
            .usage
            .is_none_or(|kept| total(&usage) > total(&kept))
        {
            response.usage = Some(usage);
        }
    }
}

/// Records a user line: tool results, envelopes, and typed prompts.
fn read_user(entry: &Entry, thread: &mut Thread, arrivals: &mut Arrivals) {
    let compact_summary = entry.value.get("isCompactSummary") == Some(&Value::Bool(true));
    let meta = entry.value.get("isMeta") == Some(&Value::Bool(true)) || compact_summary;
    if compact_summary {
        if let Some(compaction) = &mut arrivals.compaction {
            let texts: Vec<String> = blocks(entry)
                .iter()
                .filter(|b| block_type(b) == "text")
                .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_owned))
                .collect();
            let text = texts.join("\n\n");
            let preamble = coord_runtime::session::CONTINUATION_PREAMBLE;
            compaction.summary = Some(text.strip_prefix(preamble).unwrap_or(&text).to_owned());
        }
    }
    let agent_id = entry
        .value
        .pointer("/toolUseResult/agentId")
        .and_then(Value::as_str);
    for block in blocks(entry) {
        match block_type(&block) {
            "tool_result" => {
                arrivals.tool_results += 1;
                let tool_use_id = block.get("tool_use_id").and_then(Value::as_str);
                if let Some(id) = tool_use_id {
                    thread
                        .results
                        .entry(id.to_owned())
                        .or_insert_with(|| result_text(block.get("content")));
                }
                let background_task = entry
                    .value
                    .pointer("/toolUseResult/backgroundTaskId")
                    .and_then(Value::as_str);
                if let (Some(tool_use_id), Some(task_id)) = (tool_use_id, background_task) {
                    thread
                        .background_tasks
                        .insert(tool_use_id.to_owned(), task_id.to_owned());
                }
                if let (Some(tool_use_id), Some(agent_id)) = (tool_use_id, agent_id) {
                    arrivals.agent_results.push(tool_use_id.to_owned());
                    thread
                        .agent_ids
                        .entry(tool_use_id.to_owned())
                        .or_insert_with(|| agent_id.to_owned());
                }
            }
            "text" if !meta => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                let envelopes = coord_runtime::envelope::parse_block(text);
                if !envelopes.is_empty() {
                    arrivals
                        .notifications
                        .extend(envelopes.into_iter().map(|e| e.task_id));
                } else if text.trim().is_empty() || text.starts_with("[Request interrupted") {
                    // Not a prompt: Claude Code's own marker of an interruption.
                } else if thread.prompt.is_none() {
                    thread.prompt = Some(text.to_owned());
                } else {
                    arrivals.user_prompts += 1;
                    arrivals.user_prompt_texts.push(text.to_owned());
                }
            }
            _ => {}
        }
    }
}

/// The text of a tool result's `content`: a string as it is, blocks as their texts
/// joined by newlines (an image counts as nothing: the replay carries no images).
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// Records an `agent_progress` line: which call spawned which agent, and the
/// agent's own line it carries.
fn read_progress(entry: &Entry, thread: &mut Thread) {
    let data = entry.value.get("data");
    if data.and_then(|d| d.get("type")).and_then(Value::as_str) != Some("agent_progress") {
        return;
    }
    let Some(agent_id) = data.and_then(|d| d.get("agentId")).and_then(Value::as_str) else {
        return;
    };
    if let Some(call) = entry.str_field("parentToolUseID") {
        thread
            .agent_ids
            .entry(call.to_owned())
            .or_insert_with(|| agent_id.to_owned());
    }
    let message = data.and_then(|d| d.get("message"));
    let kind = message.and_then(|m| m.get("type")).and_then(Value::as_str);
    if let (Some(message), Some(kind @ ("user" | "assistant"))) = (message, kind) {
        let lines = thread
            .progress_lines
            .entry(agent_id.to_owned())
            .or_default();
        // Progress lines repeat a message as the subagent goes on; one copy is enough.
        let uuid = message.get("uuid").and_then(Value::as_str);
        let seen: BTreeSet<&str> = lines.iter().filter_map(|e| e.str_field("uuid")).collect();
        if uuid.is_some_and(|uuid| seen.contains(uuid)) {
            return;
        }
        lines.push(Entry {
            line: entry.line,
            kind: kind.to_owned(),
            value: message.clone(),
        });
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 UTC timestamp as Claude Code
/// writes it (`2026-02-10T21:11:59.186Z`); `None` for any other form.
pub fn timestamp_ms(text: &str) -> Option<u64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut date_parts = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (
        date_parts.next()??,
        date_parts.next()??,
        date_parts.next()??,
    );
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock_parts = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (
        clock_parts.next()??,
        clock_parts.next()??,
        clock_parts.next()??,
    );
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1_000 + millis;
    u64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_to_epoch_milliseconds() {
        // Goal: the recorded form reads exactly; other forms are refused, not guessed.
        assert_eq!(timestamp_ms("1970-01-01T00:00:01.5Z"), Some(1_500));
        assert_eq!(
            timestamp_ms("2026-02-10T21:11:59.186Z"),
            Some(1_770_757_919_186)
        );
        assert_eq!(timestamp_ms("2026-02-10 21:11:59"), None);
        assert_eq!(timestamp_ms("2026-13-10T21:11:59Z"), None);
    }
}
