//! What each envelope the coordinator accepted says, set beside what the world saw
//! of its task: the texts the worker's model said, and the bytes of the task's
//! output file. Invariant 2's checker judges it (PROTOCOL.md §3: an envelope is
//! built from task state, and its result is the worker's own text).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use coord_runtime::envelope::{Envelope, EnvelopeStatus};
use coord_runtime::session::OUTPUT_UNREADABLE_OPEN;
use coord_runtime::world::{ContentBlock, Disk, Usage};
use xxhash_rust::xxh3::xxh3_64;

use crate::check::is_remote_id;
use crate::model::{ConversationView, LaunchInput, SpawnAnswer};
use crate::trace::{EnvelopeBodySeen, SpawnAnswerSaid, UsageSeen, BODY_TEXT_CHARS_MAX};

/// The texts each worker's model said, by agent label (its prompt), as digests:
/// one per response that held text, its text blocks joined by newlines as a
/// runtime reads a response's text.
#[derive(Debug, Default)]
pub struct WorkerTexts {
    said: HashMap<String, HashSet<u64>>,
    /// What the model API billed each worker's answered calls, compactions aside.
    usage: HashMap<String, UsageTally>,
    /// When each worker's first call was sent and answered, in ms of the run's
    /// clock: a task whose worker made it ran at least that long.
    first_call_ms: HashMap<String, (u64, u64)>,
    /// When each worker's latest call was answered, in ms of the run's clock: a
    /// worker answered since the coordinator's host last started is one that
    /// host's runtime ran, and whose usage it knows.
    last_answered_ms: HashMap<String, u64>,
    /// When the coordinator's model answered with each Agent call, by its
    /// `tool_use` id, in ms of the run's clock: a task it launched started later.
    agent_calls_answered_ms: HashMap<String, u64>,
}

/// A worker's answered calls, as PROTOCOL.md §1 counts a task's progress.
#[derive(Debug, Default, Clone, Copy)]
struct UsageTally {
    /// The input tokens (cached or not) of the latest answer: each request sends
    /// the whole conversation again.
    input_tokens_latest: u64,
    /// The output tokens of every answer.
    output_tokens_total: u64,
    /// The tool calls the answers made.
    tool_uses: u64,
    /// The call the latest answer was for, with its output tokens and tool calls:
    /// a call answered again is one whose earlier answer never reached the runtime
    /// (its client gave up on it, over a network, and sent the request again), so
    /// the later answer replaces it.
    latest: Option<(u32, u64, u64)>,
}

impl WorkerTexts {
    /// Notes the response `content` that worker `agent`'s model gave, and its
    /// `usage` unless it answered a compaction request (no turn of the task).
    pub fn note(
        &mut self,
        agent: &str,
        call: u32,
        content: &[ContentBlock],
        usage: &Usage,
        compaction: bool,
    ) {
        if compaction {
            // The compacted conversation counts its calls from 1 again.
            if let Some(tally) = self.usage.get_mut(agent) {
                tally.latest = None;
            }
        } else {
            let tally = self.usage.entry(agent.to_owned()).or_default();
            if let Some((_, output_tokens, tool_uses)) = tally
                .latest
                .filter(|(latest_call, ..)| *latest_call == call)
            {
                tally.output_tokens_total -= output_tokens;
                tally.tool_uses -= tool_uses;
            }
            let tool_uses = content
                .iter()
                .filter(|block| matches!(block, ContentBlock::ToolUse { .. }))
                .count() as u64;
            tally.input_tokens_latest = usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens;
            tally.output_tokens_total += usage.output_tokens;
            tally.tool_uses += tool_uses;
            tally.latest = Some((call, usage.output_tokens, tool_uses));
        }
        let texts: Vec<&str> = content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let text = texts.join("\n");
        if text.is_empty() {
            return;
        }
        let digest = xxh3_64(text.as_bytes());
        match self.said.get_mut(agent) {
            Some(said) => {
                said.insert(digest);
            }
            None => {
                self.said.insert(agent.to_owned(), HashSet::from([digest]));
            }
        }
    }

    /// Notes that worker `agent`'s call `call` was sent at `sent_ms` and answered
    /// at `answered_ms`: the first call 1's times, and the latest answer's.
    pub fn note_timing(&mut self, agent: &str, call: u32, sent_ms: u64, answered_ms: u64) {
        if call == 1 && !self.first_call_ms.contains_key(agent) {
            self.first_call_ms
                .insert(agent.to_owned(), (sent_ms, answered_ms));
        }
        match self.last_answered_ms.get_mut(agent) {
            Some(latest_ms) => *latest_ms = answered_ms,
            None => {
                self.last_answered_ms.insert(agent.to_owned(), answered_ms);
            }
        }
    }

    /// Notes that the coordinator's model answered at `answered_ms` with the Agent
    /// calls among `content`.
    pub fn note_agent_calls(&mut self, content: &[ContentBlock], answered_ms: u64) {
        for block in content {
            if let ContentBlock::ToolUse { id, name, .. } = block {
                if name == "Agent" {
                    self.agent_calls_answered_ms.insert(id.clone(), answered_ms);
                }
            }
        }
    }

    /// Whether `result` is text `agent`'s model said: one whole response's text, or
    /// nothing from a model that said nothing.
    pub fn said(&self, agent: &str, result: &str) -> bool {
        match self.said.get(agent) {
            Some(said) => said.contains(&xxh3_64(result.as_bytes())),
            None => result.is_empty(),
        }
    }
}

/// How an inline Agent result ends when its worker can be continued (PROTOCOL.md
/// §2): `agentId: <id> (<status>; continue it with SendMessage)`, after a blank
/// line.
const TRAILER_OPEN: &str = "\n\nagentId: ";
const TRAILER_CLOSE: &str = "; continue it with SendMessage)";

/// What `answer`, one Agent call's answer, said of its task, beside what the
/// call asked and what `texts` saw the workers' models say.
pub fn spawn_answer_said(answer: &SpawnAnswer, texts: &WorkerTexts) -> SpawnAnswerSaid {
    let mut said = SpawnAnswerSaid {
        task_id: answer.launched.clone(),
        asked_isolation: answer.asked.isolation.clone(),
        asked_team: answer.asked.team_name.is_some(),
        launch_status: answer.launch_status.clone(),
        launch_description_kept: answer.launch_description_kept,
        ..SpawnAnswerSaid::default()
    };
    if let Some(inline) = &answer.inline {
        let (result, trailer) = match inline.rfind(TRAILER_OPEN) {
            Some(at) => {
                let trailer = inline[at + TRAILER_OPEN.len()..]
                    .strip_suffix(TRAILER_CLOSE)
                    .and_then(|trailer| trailer.split_once(" ("));
                match trailer {
                    Some(trailer) => (&inline[..at], Some(trailer)),
                    None => (inline.as_str(), None),
                }
            }
            None => (inline.as_str(), None),
        };
        if let Some((task_id, status)) = trailer {
            said.task_id = Some(task_id.to_owned());
            said.trailer_status = Some(status.to_owned());
        }
        said.result_said = answer
            .asked
            .prompt
            .as_deref()
            .map(|worker| texts.said(worker, result));
    }
    said
}

/// `envelope`'s body beside the world: `view` is the coordinator's conversation
/// that carried it (which names the task's launch), `launches` every launch input
/// the tap has seen by task id (a compacted conversation no longer shows the
/// launches before its summary), `texts` what the workers' models said, and `disk` the disk as the runtime left it, read without its fault hooks.
/// `restarted_at_ms` is when the coordinator's host last started again, if it did.
pub fn body_seen(
    envelope: &Envelope,
    view: &ConversationView,
    launches: &BTreeMap<String, LaunchInput>,
    texts: &WorkerTexts,
    disk: &dyn Disk,
    now_ms: u64,
    restarted_at_ms: Option<u64>,
) -> EnvelopeBodySeen {
    let result = envelope.result.as_deref();
    let worded_by_runtime = envelope.status == EnvelopeStatus::Failed;
    let output = match (result, &envelope.output_file) {
        (Some(_), Some(path)) if !worded_by_runtime => disk
            .read(Path::new(path))
            .ok()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        _ => None,
    };
    let result_is_output = output
        .as_deref()
        .zip(result)
        .map(|(output, result)| output == result);
    let result_is_output_cut = output
        .as_deref()
        .zip(result)
        .is_some_and(|(output, result)| is_output_cut(output, result));
    let asked = launches.get(&envelope.task_id);
    let worker = asked.and_then(|asked| asked.prompt.as_ref());
    // A remote worker's calls are its host's: the coordinator hears only its report.
    let remote = is_remote_id(&envelope.task_id);
    // The task started after the coordinator's model answered with the call that
    // launched it, and ended before this request carried its envelope; its worker's
    // first call, sent and answered in between, is a part of its run. A worker
    // whose prompt another launch shares has no calls of its own to tell apart.
    let launch_call_id = asked.and_then(|asked| asked.call_id.clone());
    let prompt_shared = worker.is_some_and(|worker| {
        launches
            .values()
            .filter(|input| input.prompt.as_ref() == Some(worker))
            .count()
            > 1
    });
    // The calls billed under a worker's prompt are one task's only when no other
    // launch shares that prompt (a launch made again after its call timed out
    // runs the same script a second time).
    let billed = worker
        .filter(|_| !remote && !prompt_shared)
        .and_then(|worker| texts.usage.get(worker));
    // A remote task's usage is its host's report, timed by that host.
    let active_ms_max = launch_call_id
        .as_ref()
        .filter(|_| !remote)
        .and_then(|id| texts.agent_calls_answered_ms.get(id))
        .map(|launched_ms| now_ms.saturating_sub(*launched_ms));
    let active_ms_min = worker
        .filter(|_| !remote && !prompt_shared)
        .and_then(|worker| texts.first_call_ms.get(worker))
        .map(|(sent_ms, answered_ms)| answered_ms.saturating_sub(*sent_ms));
    // Only a restarted runtime, reloading a task that ended before it started,
    // no longer knows the task's usage (PROTOCOL.md §3). A host that never
    // restarted knows every task's; a restarted one knows the tasks whose workers
    // it ran, the ones answered since it started (a remote worker's host, and a
    // prompt another launch shares, do not say which task's calls they were).
    let usage_owed = envelope.usage.is_none()
        && match restarted_at_ms {
            None => true,
            Some(restarted_ms) => worker
                .filter(|_| !remote && !prompt_shared)
                .and_then(|worker| texts.last_answered_ms.get(worker))
                .is_some_and(|answered_ms| *answered_ms >= restarted_ms),
        };
    EnvelopeBodySeen {
        summary: cut(&envelope.summary),
        description: view.launched.get(&envelope.task_id).cloned(),
        result_head: result.map(cut),
        result_said: result
            .zip(worker)
            .map(|(result, worker)| texts.said(worker, result)),
        result_is_output,
        result_is_output_cut,
        name_asked: asked.and_then(|asked| asked.name.clone()),
        forked: asked.is_some_and(LaunchInput::is_fork),
        worktree: envelope
            .worktree
            .as_ref()
            .map(|worktree| (worktree.path.clone(), worktree.branch.clone())),
        usage: envelope.usage.as_ref().map(|usage| UsageSeen {
            total_tokens: usage.total_tokens,
            tool_uses: usage.tool_uses,
            billed: billed.map(|tally| {
                (
                    tally.input_tokens_latest + tally.output_tokens_total,
                    tally.tool_uses,
                )
            }),
            duration_ms: usage.duration_ms,
            active_ms_min,
            active_ms_max,
        }),
        usage_owed,
        tool_use_id: envelope.tool_use_id.clone(),
        launch_call_id,
        output_file: envelope.output_file.clone(),
        output_file_answered: asked.and_then(|asked| asked.output_file.clone()),
    }
}

/// Whether `result` is the start of `output` and then, on a line of its own
/// unless nothing was read, the runtime's notice that the rest failed to read
/// after exactly that many bytes.
fn is_output_cut(output: &str, result: &str) -> bool {
    let Some(at) = result.rfind(OUTPUT_UNREADABLE_OPEN) else {
        return false;
    };
    let (head, notice) = result.split_at(at);
    // Nothing read: the notice alone. Else what was read, then a line break.
    let read = match head.strip_suffix('\n') {
        _ if head.is_empty() => "",
        Some(read) if !read.is_empty() => read,
        _ => return false,
    };
    let said_offset = notice[OUTPUT_UNREADABLE_OPEN.len()..]
        .split_once(' ')
        .and_then(|(offset, _)| offset.parse::<usize>().ok());
    output.starts_with(read) && said_offset == Some(read.len())
}

/// `text` cut at [`BODY_TEXT_CHARS_MAX`] characters.
fn cut(text: &str) -> String {
    text.chars().take(BODY_TEXT_CHARS_MAX).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::envelope::EnvelopeUsage;

    fn text(text: &str) -> ContentBlock {
        ContentBlock::Text {
            text: text.to_owned(),
            cache_control: None,
        }
    }

    #[test]
    fn a_result_cut_by_a_failed_read_is_the_outputs_start_and_the_runtimes_notice() {
        let notice = |offset| coord_runtime::session::output_unreadable_notice(offset, "EIO");
        let output = "line one\nline two\n";
        assert!(is_output_cut(output, &format!("line one\n\n{}", notice(9))));
        assert!(is_output_cut(output, &notice(0)));
        // The offset must be what was read, and what was read the file's start.
        assert!(!is_output_cut(
            output,
            &format!("line one\n\n{}", notice(4))
        ));
        assert!(!is_output_cut(
            output,
            &format!("line two\n\n{}", notice(9))
        ));
        assert!(!is_output_cut(output, output));
        assert!(!is_output_cut(output, &format!("line one{}", notice(8))));
        assert!(!is_output_cut(output, &format!("\n{}", notice(0))));
    }

    /// A Read call, as a response holds it.
    fn read_call() -> ContentBlock {
        ContentBlock::ToolUse {
            id: "toolu_1".to_owned(),
            name: "Read".to_owned(),
            input: std::sync::Arc::new(serde_json::json!({})),
        }
    }

    #[test]
    fn usage_is_tallied_as_progress_counts_it() {
        // Goal: the latest answer's input (cached or not), every answer's output,
        // every tool call; a compaction's answer is no turn of the task.
        let mut texts = WorkerTexts::default();
        let usage = |input, cached, output| Usage {
            input_tokens: input,
            cache_read_input_tokens: cached,
            output_tokens: output,
            ..Usage::default()
        };
        let tool_use = read_call();
        texts.note(
            "worker",
            1,
            &[tool_use.clone(), tool_use.clone()],
            &usage(100, 0, 10),
            false,
        );
        texts.note("worker", 2, &[text("done")], &usage(20, 110, 5), false);
        texts.note("worker", 3, &[text("summary")], &usage(500, 0, 50), true);
        let tally = texts.usage["worker"];
        assert_eq!(tally.input_tokens_latest, 130);
        assert_eq!(tally.output_tokens_total, 15);
        assert_eq!(tally.tool_uses, 2);
    }

    #[test]
    fn a_call_answered_again_counts_its_last_answer_only() {
        // Goal: over a network a client may give up on an answer the API billed and
        // send the request again; the runtime counts only the answer it read.
        // Method: call 2 answered twice, with a tool call, then with text.
        let mut texts = WorkerTexts::default();
        let usage = |output| Usage {
            input_tokens: 10,
            output_tokens: output,
            ..Usage::default()
        };
        let tool_use = read_call();
        texts.note("worker", 1, &[text("start")], &usage(7), false);
        texts.note("worker", 2, &[tool_use], &usage(14), false);
        texts.note("worker", 2, &[text("done")], &usage(5), false);
        let tally = texts.usage["worker"];
        assert_eq!(tally.output_tokens_total, 12);
        assert_eq!(tally.tool_uses, 0);
        // After a compaction the calls count from 1 again: no answer is replaced.
        texts.note("worker", 3, &[text("summary")], &usage(40), true);
        texts.note("worker", 1, &[text("again")], &usage(3), false);
        assert_eq!(texts.usage["worker"].output_tokens_total, 15);
    }

    /// A completed envelope for `task_id` with `usage`.
    fn completed(task_id: &str, usage: Option<EnvelopeUsage>) -> Envelope {
        Envelope {
            task_id: task_id.to_owned(),
            tool_use_id: None,
            output_file: None,
            status: EnvelopeStatus::Completed,
            summary: "Agent \"audit\" completed".to_owned(),
            note: None,
            result: None,
            usage,
            worktree: None,
            extra: Default::default(),
        }
    }

    /// What [`body_seen`] makes of `envelope` at 1,000 ms on an empty disk.
    fn seen_at_1s(
        envelope: &Envelope,
        view: &ConversationView,
        texts: &WorkerTexts,
        restarted_at_ms: Option<u64>,
    ) -> EnvelopeBodySeen {
        let disk = crate::world::MemDisk::new();
        body_seen(
            envelope,
            view,
            &view.launch_inputs,
            texts,
            &disk,
            1_000,
            restarted_at_ms,
        )
    }

    #[test]
    fn a_usage_is_owed_unless_a_restart_reloaded_the_task() {
        // Goal: a host that never restarted owes every envelope its `<usage>`; a
        // restarted one owes it for the tasks whose workers answered a call since
        // it started, not for a task that ended before (or a remote one, whose
        // calls are its host's).
        let mut view = ConversationView::default();
        for task_id in ["a00000001", "r00000001"] {
            view.launch_inputs.insert(
                task_id.to_owned(),
                LaunchInput {
                    prompt: Some(format!("Audit {task_id}.")),
                    ..LaunchInput::default()
                },
            );
        }
        let mut texts = WorkerTexts::default();
        texts.note_timing("Audit a00000001.", 1, 10, 50);
        texts.note_timing("Audit a00000001.", 2, 60, 80);
        texts.note_timing("Audit r00000001.", 1, 10, 500);
        let owed = |task_id, restarted_at_ms| {
            seen_at_1s(&completed(task_id, None), &view, &texts, restarted_at_ms).usage_owed
        };
        assert!(owed("a00000001", None));
        assert!(owed("r00000001", None));
        assert!(owed("a00000001", Some(80)));
        assert!(!owed("a00000001", Some(81)));
        assert!(!owed("r00000001", Some(100)));
        // A task nobody launched in this conversation, after a restart: unknown.
        assert!(!owed("a00000009", Some(100)));
        let usage = EnvelopeUsage {
            total_tokens: 1,
            tool_uses: 0,
            duration_ms: 1,
        };
        let with_usage = completed("a00000001", Some(usage));
        assert!(!seen_at_1s(&with_usage, &view, &texts, None).usage_owed);
    }

    #[test]
    fn a_prompt_two_launches_share_has_no_billed_usage_of_its_own() {
        // Goal: a launch made again (its coordinator call timed out and was sent
        // again) runs the same script under the same prompt; the calls billed
        // under that prompt are both tasks', so neither envelope's usage is held
        // to them. A prompt launched once is.
        let mut view = ConversationView::default();
        for (task_id, prompt) in [
            ("a00000001", "Tidy CHANGELOG.md."),
            ("a00000002", "Tidy CHANGELOG.md."),
            ("a00000003", "Audit the logs."),
        ] {
            view.launch_inputs.insert(
                task_id.to_owned(),
                LaunchInput {
                    prompt: Some(prompt.to_owned()),
                    ..LaunchInput::default()
                },
            );
        }
        let mut texts = WorkerTexts::default();
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        };
        for prompt in ["Tidy CHANGELOG.md.", "Audit the logs."] {
            texts.note(prompt, 1, &[read_call()], &usage, false);
        }
        let usage = EnvelopeUsage {
            total_tokens: 110,
            tool_uses: 1,
            duration_ms: 1,
        };
        let billed = |task_id| {
            seen_at_1s(&completed(task_id, Some(usage)), &view, &texts, None)
                .usage
                .and_then(|usage| usage.billed)
        };
        assert_eq!(billed("a00000001"), None);
        assert_eq!(billed("a00000002"), None);
        assert_eq!(billed("a00000003"), Some((110, 1)));
    }

    #[test]
    fn a_result_is_said_when_one_response_said_it_whole() {
        let mut texts = WorkerTexts::default();
        texts.note(
            "worker",
            1,
            &[text("first"), text("second")],
            &Usage::default(),
            false,
        );
        assert!(texts.said("worker", "first\nsecond"));
        assert!(!texts.said("worker", "first"));
        assert!(!texts.said("other", "first\nsecond"));
        assert!(texts.said("silent", ""));
        assert!(!texts.said("worker", ""));
    }
}
