//! The worker loop: model turns and tool rounds until the worker ends.

use std::sync::Arc;

use futures_util::future::join_all;

use super::compaction::{compaction_messages, context_tokens, AUTO_TRIGGER};
use super::team::{TeammateSetup, Wake};
use super::tooling::CallSite;
use super::{AgentRef, Session, WorkerEnd};
use crate::agent::IsolationKind;
#[cfg(feature = "defects")]
use crate::defects::Defect;
use crate::envelope::EnvelopeWorktree;
use crate::event::RuntimeEvent;
use crate::fork::{check_cache_break, CacheSafeParams, ForkSource};
use crate::ipc::OutputWriter;
use crate::isolation::{self, WorktreeOutcome, WorktreeSlug};
use crate::probe::Probe;
use crate::route::RequestId;
use crate::session::transcript::{TranscriptHeader, TranscriptTeammate, TranscriptWriter};
use crate::task::TaskId;
use crate::tools::ToolSurface;
use crate::world::{
    ContentBlock, Message, ModelRequest, RemoteLaunch, Role, SystemBlock, ThinkingConfig, ToolCall,
    ToolDefinition, ToolOutput, Worktree,
};
use tokio_util::sync::CancellationToken;

/// Everything a worker needs to start.
pub(crate) struct WorkerSetup {
    pub(crate) id: TaskId,
    pub(crate) description: String,
    pub(crate) agent_type: String,
    /// The cache-key parts of every request: system, tools, model, limits.
    pub(crate) shape: RequestShape,
    /// For a fork: the parent's parameters, which its first request must match.
    pub(crate) cache_parent: Option<CacheSafeParams>,
    /// Its fork depth (0 unless it is a fork).
    pub(crate) fork_depth: u32,
    /// The conversation so far: the prompt, or a resumed transcript plus the message.
    pub(crate) messages: Vec<Message>,
    pub(crate) surface: ToolSurface,
    pub(crate) isolation: Option<IsolationKind>,
    /// The worktree slug, if it gets one.
    pub(crate) slug: String,
    pub(crate) resumed_from: Option<String>,
    /// Set for a teammate: it idles between turns instead of ending.
    pub(crate) teammate: Option<TeammateSetup>,
    pub(crate) token: CancellationToken,
}

/// The parts of a request that stay the same on every turn of one agent.
#[derive(Debug, Clone)]
pub(crate) struct RequestShape {
    pub(crate) model: String,
    pub(crate) max_tokens: u32,
    /// Shared by every request of the agent.
    pub(crate) tools: Arc<Vec<ToolDefinition>>,
    /// Shared by every request of the agent.
    pub(crate) system: Arc<Vec<SystemBlock>>,
    pub(crate) thinking: Option<ThinkingConfig>,
}

impl RequestShape {
    /// The request that sends `messages`, which move into it.
    pub(crate) fn request(&self, messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: self.model.clone(),
            max_tokens: self.max_tokens,
            tools: self.tools.clone(),
            system: self.system.clone(),
            messages,
            thinking: self.thinking,
        }
    }
}

/// The tool calls among `content`, in order.
pub(crate) fn tool_calls_of(content: &[ContentBlock]) -> Vec<ToolCall> {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, name, input } => Some(ToolCall {
                id: id.clone(),
                name: name.clone(),
                input: serde_json::Value::clone(input),
            }),
            _ => None,
        })
        .collect()
}

/// The ids of `calls`, in order: kept for their results while the calls
/// themselves move into the tools (a call's input can run to megabytes).
pub(crate) fn call_ids_of(calls: &[ToolCall]) -> Vec<String> {
    calls.iter().map(|call| call.id.clone()).collect()
}

/// One `tool_result` block per call, in call order.
pub(crate) fn tool_results(call_ids: Vec<String>, outputs: Vec<ToolOutput>) -> Vec<ContentBlock> {
    call_ids
        .into_iter()
        .zip(outputs)
        .map(|(tool_use_id, output)| ContentBlock::ToolResult {
            tool_use_id,
            content: output.content,
            is_error: output.is_error,
            cache_control: None,
        })
        .collect()
}

/// The text blocks of `message`, joined by newlines.
pub(crate) fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Session {
    /// Runs one worker to its end and reports that end exactly once.
    pub(crate) async fn run_worker(&self, setup: WorkerSetup) {
        let now_ms = self.inner.world.clock.unix_ms();
        let started = self.state().registry.start(&setup.id, now_ms);
        if !matches!(started, Ok(true)) {
            // Stopped (or expired) before it started: it has already ended.
            return;
        }
        // A teammate resumed by a message comes back to work: its team's file may
        // still list it as idle from before it was stopped (PROTOCOL.md §5).
        let resumed = self
            .state()
            .registry
            .get(&setup.id)
            .is_some_and(|task| task.continues.is_some());
        if let (Some(teammate), true) = (&setup.teammate, resumed) {
            self.mark_teammate_busy(teammate).await;
        }
        let worktree = match self.prepare_isolation(&setup) {
            Ok(worktree) => worktree,
            Err(error) => return self.finish(&setup.id, WorkerEnd::Failed(error)),
        };
        let end = match setup.isolation {
            Some(IsolationKind::Remote) => self.run_remote(&setup).await,
            _ => self.run_turns(&setup, worktree.as_ref()).await,
        };
        if let Some(worktree) = worktree {
            self.settle_worktree(&setup.id, worktree);
        }
        self.finish(&setup.id, end);
    }

    fn prepare_isolation(&self, setup: &WorkerSetup) -> Result<Option<Worktree>, String> {
        if setup.isolation != Some(IsolationKind::Worktree) {
            return Ok(None);
        }
        let (Some(vcs), Some(repo)) = (&self.inner.effects.vcs, &self.inner.config.repo) else {
            return Err("worktree isolation needs a repository".into());
        };
        let slug = WorktreeSlug::parse(&setup.slug).map_err(|e| format!("worktree slug: {e}"))?;
        isolation::prepare(vcs.as_ref(), repo, &slug)
            .map(Some)
            .map_err(|error| format!("cannot create worktree {:?}: {error}", setup.slug))
    }

    /// A clean worktree is removed with its branch; a changed one (or one whose
    /// state cannot be read) is kept and reported in the envelope.
    fn settle_worktree(&self, id: &TaskId, worktree: Worktree) {
        let (Some(vcs), Some(repo)) = (&self.inner.effects.vcs, &self.inner.config.repo) else {
            return;
        };
        let outcome = isolation::finish(vcs.as_ref(), repo, &worktree, &*self.inner.world.journal);
        let kept = match outcome {
            Ok(WorktreeOutcome::Removed) => return,
            Ok(WorktreeOutcome::Kept { path, branch }) => EnvelopeWorktree {
                path: path.display().to_string(),
                branch,
            },
            // When in doubt, keep it: a removed worktree cannot be recovered.
            Err(_) => EnvelopeWorktree {
                path: worktree.path.display().to_string(),
                branch: worktree.branch.clone(),
            },
        };
        if let Some(worker) = self.state().workers.get_mut(id) {
            worker.worktree = Some(kept);
        }
    }

    async fn run_remote(&self, setup: &WorkerSetup) -> WorkerEnd {
        let Some(remote) = self.inner.effects.remote.clone() else {
            return WorkerEnd::Failed("no remote host is configured".into());
        };
        // The coordinator keeps a remote worker's transcript as it keeps a local
        // one's: it is what a message resumes the worker from, while the task is in
        // memory or after its eviction.
        let transcript = match self.open_transcript(setup) {
            Ok(transcript) => transcript,
            Err(error) => return WorkerEnd::Failed(error),
        };
        let prompt = setup
            .messages
            .last()
            .map(|message| text_of(&message.content))
            .unwrap_or_default();
        let launch = RemoteLaunch {
            task_id: setup.id.to_string(),
            prompt,
            model: self.inner.config.model.clone(),
            // A resumed worker continues its conversation on the host; a fresh one
            // starts from its prompt.
            messages: match setup.resumed_from {
                Some(_) => setup.messages.clone(),
                None => Vec::new(),
            },
        };
        let report = tokio::select! {
            biased;
            _ = setup.token.cancelled() => return WorkerEnd::Killed,
            report = remote.run(launch) => report,
        };
        match report {
            Ok(report) => {
                keep_remote_conversation(&transcript, &setup.messages, &report);
                if !report.succeeded {
                    return WorkerEnd::Failed(report.text);
                }
                match self.append_output(&setup.id, &format!("{}\n", report.text)) {
                    Ok(()) => WorkerEnd::Completed(report.text),
                    Err(error) => WorkerEnd::Failed(error),
                }
            }
            Err(error) => WorkerEnd::Failed(error.to_string()),
        }
    }

    /// Creates worker `setup`'s transcript and writes the conversation it starts
    /// with. A worker whose transcript cannot be written fails: nothing could resume
    /// it.
    fn open_transcript(&self, setup: &WorkerSetup) -> Result<TranscriptWriter, String> {
        let transcript = TranscriptWriter::create(
            &self.inner.world,
            &self.inner.layout.transcript(&setup.id),
            TranscriptHeader {
                task_id: setup.id.to_string(),
                description: setup.description.clone(),
                agent_type: setup.agent_type.clone(),
                resumed_from: setup.resumed_from.clone(),
                teammate: setup.teammate.as_ref().map(|teammate| TranscriptTeammate {
                    team: teammate.team.clone(),
                    member: teammate.member.clone(),
                    mode: teammate.mode,
                }),
            },
        )
        .map_err(|error| error.to_string())?;
        for message in &setup.messages {
            transcript
                .append(message)
                .map_err(|error| error.to_string())?;
        }
        Ok(transcript)
    }

    /// Makes a worker's transcript durable as its turn ends. A finished worker may
    /// be resumed from its transcript once its envelope is out (PROTOCOL.md §1),
    /// so a transcript that cannot be synced ends the worker failed, as an output
    /// file that cannot be does (invariant 13).
    fn sync_transcript(&self, transcript: &TranscriptWriter) -> Result<(), WorkerEnd> {
        transcript.sync().map_err(|error| {
            Probe::TranscriptSyncFailed.reach(&*self.inner.world.journal);
            WorkerEnd::Failed(format!(
                "the task's transcript could not be made durable: {error}"
            ))
        })
    }

    /// Appends `text` to task `id`'s output file. A task whose result cannot reach
    /// its output file cannot end completed (invariant 13): the error says why.
    pub(crate) fn append_output(&self, id: &TaskId, text: &str) -> Result<(), String> {
        let Some(path) = self.task(id).map(|task| task.output_path) else {
            return Ok(());
        };
        // The file was created at spawn; the writer only appends.
        let limits = self.inner.config.output_limits;
        let open = OutputWriter::open;
        // Defect `follow-symlinks`: no check for a symlink planted at the path.
        #[cfg(feature = "defects")]
        let open = match self.inner.config.defects.has(Defect::FollowSymlinks) {
            false => open,
            true => OutputWriter::open_trusting_nofollow,
        };
        let written = open(&self.inner.world, &path, limits)
            .and_then(|mut output| output.append(text.as_bytes()));
        match written {
            Ok(_) => Ok(()),
            Err(error) => Err(format!(
                "the task's output file could not be written: {error}"
            )),
        }
    }

    async fn run_turns(&self, setup: &WorkerSetup, worktree: Option<&Worktree>) -> WorkerEnd {
        let config = &self.inner.config;
        let world = &self.inner.world;
        let transcript = match self.open_transcript(setup) {
            Ok(transcript) => transcript,
            Err(error) => return WorkerEnd::Failed(error),
        };
        let mut messages = setup.messages.clone();
        let cwd = worktree.map_or_else(|| config.cwd.clone(), |w| w.path.clone());
        let me = AgentRef::Task(setup.id.clone());
        let mut final_text = String::new();
        // The context the last response reported: what decides a compaction.
        let mut context_tokens_last: Option<u64> = None;

        for turn in 0..config.turns_max {
            if setup.token.is_cancelled() {
                return WorkerEnd::Killed;
            }
            if let Some(pre_tokens) = self.compaction_due(context_tokens_last, &messages) {
                let request = setup.shape.request(compaction_messages(messages.clone()));
                let compacted = tokio::select! {
                    biased;
                    _ = setup.token.cancelled() => return WorkerEnd::Killed,
                    compacted = self.compact(&me, request, pre_tokens) => compacted,
                };
                // A failed compaction leaves the conversation as it was.
                if let Some(compaction) = compacted {
                    let _ = transcript.append_compact_boundary(
                        AUTO_TRIGGER,
                        compaction.pre_tokens,
                        &compaction.message,
                    );
                    messages = vec![compaction.message];
                    context_tokens_last = None;
                }
            }
            // A fresh turn token per turn: a redirect cancels only this turn.
            let turn_token = setup.token.child_token();
            if let Some(worker) = self.state().workers.get_mut(&setup.id) {
                worker.turn_token = turn_token.clone();
            }
            // The conversation moves into the request and back after the turn, as
            // the coordinator's does: a worker's conversation can hold megabytes.
            let request = Arc::new(setup.shape.request(std::mem::take(&mut messages)));
            let fork_parent = setup.cache_parent.as_ref().filter(|_| turn == 0);
            // Defect `undeclared-cache-breaks`: the fork's prefix is not compared.
            #[cfg(feature = "defects")]
            let fork_parent = fork_parent
                .filter(|_| !self.inner.config.defects.has(Defect::UndeclaredCacheBreaks));
            if let Some(parent) = fork_parent {
                // A fork must reuse its parent's prefix byte for byte; any difference
                // is a cache break, reported with where it starts.
                check_cache_break(&*world.journal, me.to_string().as_str(), parent, &request);
            }
            let response = tokio::select! {
                biased;
                _ = turn_token.cancelled() => {
                    if setup.token.is_cancelled() {
                        return WorkerEnd::Killed;
                    }
                    // Redirected mid-turn: the turn is dropped and the teammate takes
                    // its queued redirect as its next input.
                    messages = Arc::unwrap_or_clone(request).messages;
                    match self.idle_or_end(setup, &mut messages, &final_text).await {
                        Some(end) => return end,
                        None => continue,
                    }
                }
                response = self.send_with_retry(&me, &request) => response,
            };
            let response = match response {
                Ok(response) => response,
                Err(error) => {
                    world.journal.record(RuntimeEvent::ModelCallFailed {
                        agent: me.to_string(),
                        error: error.to_string(),
                    });
                    return WorkerEnd::Failed(error.to_string());
                }
            };
            context_tokens_last = Some(context_tokens(&response.usage));
            {
                let usage = response.usage;
                let input_tokens = usage.input_tokens
                    + usage.cache_creation_input_tokens
                    + usage.cache_read_input_tokens;
                if let Some(task) = self.state().registry.get_mut(&setup.id) {
                    task.progress.record_turn(input_tokens, usage.output_tokens);
                }
            }
            let assistant = Message {
                role: Role::Assistant,
                content: response.content,
            };
            let _ = transcript.append(&assistant);
            let text = text_of(&assistant.content);
            if !text.is_empty() {
                if let Err(error) = self.append_output(&setup.id, &format!("{text}\n")) {
                    return WorkerEnd::Failed(error);
                }
                final_text = text;
            }
            let calls = tool_calls_of(&assistant.content);
            if calls.is_empty() {
                messages = Arc::unwrap_or_clone(request).messages;
                messages.push(assistant);
                if let Err(failed) = self.sync_transcript(&transcript) {
                    return failed;
                }
                match self.idle_or_end(setup, &mut messages, &final_text).await {
                    Some(end) => return end,
                    None => {
                        if let Some(last) = messages.last() {
                            let _ = transcript.append(last);
                        }
                        continue;
                    }
                }
            }

            let fork_from = ForkSource {
                // The turn's request is the conversation before the assistant's answer.
                request,
                assistant,
                depth: setup.fork_depth,
            };
            let site = CallSite {
                caller: &me,
                surface: &setup.surface,
                cwd: &cwd,
                worktree,
                fork_from: Some(&fork_from),
                teammate: setup.teammate.as_ref(),
            };
            let call_ids = call_ids_of(&calls);
            let call_names: Vec<String> = calls.iter().map(|call| call.name.clone()).collect();
            let round = join_all(calls.into_iter().map(|call| self.call_tool(&site, call)));
            let outputs = tokio::select! {
                biased;
                _ = setup.token.cancelled() => return WorkerEnd::Killed,
                outputs = round => outputs,
            };
            messages = fork_from.conversation_after();
            let mut content = tool_results(call_ids, outputs);
            // The tool-round boundary: the only point where queued messages enter.
            let (queued, approved) = {
                let mut state = self.state();
                if let Some(task) = state.registry.get_mut(&setup.id) {
                    for name in call_names {
                        task.progress.record_tool_use(name);
                    }
                }
                match state.workers.get_mut(&setup.id) {
                    // It approved its lead's shutdown request in this round: what
                    // waits for it stays where it is.
                    Some(worker) if worker.shutdown.approved().is_some() => (Vec::new(), true),
                    Some(worker) => {
                        let queued = worker.queued.take_at_boundary();
                        // A shutdown request is handed over as the request it is:
                        // from here on its answer is awaited, and matched to it.
                        for request_id in queued.iter().filter_map(|m| m.shutdown_request.clone()) {
                            worker.shutdown.handed_over(request_id);
                        }
                        (queued, false)
                    }
                    None => (Vec::new(), false),
                }
            };
            if approved {
                // Its answer is in the lead's mailbox; it ends with this round, once.
                let _ = transcript.append(&Message {
                    role: Role::User,
                    content,
                });
                if let Err(failed) = self.sync_transcript(&transcript) {
                    return failed;
                }
                return WorkerEnd::Completed(final_text);
            }
            if !queued.is_empty() {
                world.journal.record(RuntimeEvent::MessagesDelivered {
                    to: setup.id.to_string(),
                    count: queued.len(),
                });
                let requests: Vec<RequestId> = queued
                    .iter()
                    .filter_map(|m| m.shutdown_request.clone())
                    .collect();
                if !requests.is_empty() {
                    if let Some(teammate) = &setup.teammate {
                        self.note_shutdown_requested(teammate, &requests).await;
                    }
                }
                content.extend(
                    queued
                        .into_iter()
                        .map(|message| ContentBlock::text(message.text)),
                );
            }
            let user = Message {
                role: Role::User,
                content,
            };
            let _ = transcript.append(&user);
            messages.push(user);
        }
        Probe::TurnLimitReached.reach(&*self.inner.world.journal);
        WorkerEnd::Failed(format!("exceeded {} turns", config.turns_max))
    }

    /// At the end of a turn: a plain worker ends (`Some`); a teammate goes idle and
    /// comes back with its next input appended to `messages` (`None`), or ends when
    /// it agrees to shut down or is aborted.
    async fn idle_or_end(
        &self,
        setup: &WorkerSetup,
        messages: &mut Vec<Message>,
        final_text: &str,
    ) -> Option<WorkerEnd> {
        let Some(teammate) = &setup.teammate else {
            return self.end_or_answer_late_messages(setup, messages, final_text);
        };
        match self.teammate_idle(&setup.id, teammate).await {
            Wake::Killed => Some(WorkerEnd::Killed),
            Wake::Shutdown => Some(WorkerEnd::Completed(final_text.to_owned())),
            Wake::Messages(texts) => {
                append_user_text(messages, texts);
                None
            }
        }
    }

    /// A plain worker's turn ended without tool calls. Messages queued while that
    /// turn was under way have no tool round left to enter at: the end of the turn
    /// is their boundary, and the worker takes one more turn to answer them
    /// (`None`, with them appended to `messages`) rather than end with them
    /// undelivered (invariant 4). With none waiting, the queue is closed as the
    /// worker ends, so a message sent from then on resumes it instead.
    fn end_or_answer_late_messages(
        &self,
        setup: &WorkerSetup,
        messages: &mut Vec<Message>,
        final_text: &str,
    ) -> Option<WorkerEnd> {
        let queued = {
            let mut state = self.state();
            let Some(worker) = state.workers.get_mut(&setup.id) else {
                return Some(WorkerEnd::Completed(final_text.to_owned()));
            };
            let queued = worker.queued.take_on_wake();
            if queued.is_empty() {
                worker.queued.close();
                return Some(WorkerEnd::Completed(final_text.to_owned()));
            }
            queued
        };
        let journal = &*self.inner.world.journal;
        journal.record(RuntimeEvent::MessagesDelivered {
            to: setup.id.to_string(),
            count: queued.len(),
        });
        Probe::MessageTakenAtEnd.reach(journal);
        append_user_text(messages, queued.into_iter().map(|message| message.text));
        None
    }
}

/// Appends `texts` to the conversation as user text: to its last message if that is
/// the user's, else as a new one (the API needs the roles to alternate).
fn append_user_text(messages: &mut Vec<Message>, texts: impl IntoIterator<Item = String>) {
    let blocks = texts.into_iter().map(ContentBlock::text);
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message {
            role: Role::User,
            content: blocks.collect(),
        }),
    }
}

/// Appends to a remote worker's transcript what its report says it did after the
/// conversation it was launched with (`launched`), and syncs it. A report whose
/// conversation does not start with `launched` (a host that keeps none, or another
/// one's) leaves only its final text, as the worker's last message. A transcript
/// that cannot be written is not the worker's failure: only a later resume needs it.
fn keep_remote_conversation(
    transcript: &TranscriptWriter,
    launched: &[Message],
    report: &crate::world::RemoteReport,
) {
    let added: Vec<Message> = match report.messages.strip_prefix(launched) {
        Some(added) if !report.messages.is_empty() => added.to_vec(),
        _ if report.succeeded => vec![Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(report.text.clone())],
        }],
        _ => Vec::new(),
    };
    for message in &added {
        if transcript.append(message).is_err() {
            return;
        }
    }
    let _ = transcript.sync();
}
