//! The coordinator loop.

use std::sync::Arc;

use futures_util::future::join_all;

use super::compaction::{compaction_messages, context_tokens, AUTO_TRIGGER};
use super::durable::{add_notification_blocks, close_unresolved_calls, CoordinatorLog};
use super::tooling::CallSite;
use super::worker::{call_ids_of, text_of, tool_calls_of, tool_results};
use super::{AgentRef, Session, SessionError};
#[cfg(feature = "defects")]
use crate::defects::Defect;
use crate::envelope::render;
#[cfg(feature = "defects")]
use crate::envelope::render_raw_result;
use crate::event::RuntimeEvent;
use crate::fork::{check_cache_break, CacheSafeParams, ForkSource};
use crate::probe::Probe;
use crate::prompt::{assemble_system_prompt, worker_tools_context, PromptInputs};
use crate::tools::{Role, ToolSurface};
use crate::world::{ContentBlock, Message, ModelRequest, Role as MessageRole, SystemBlock};

/// How a coordinator run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorReport {
    /// The coordinator's last text.
    pub final_text: String,
    /// Model turns taken.
    pub turns: u32,
    /// Envelopes injected into the conversation.
    pub notifications_delivered: usize,
    /// The whole conversation.
    pub messages: Vec<Message>,
}

impl Session {
    /// The main thread's system prompt: the profile's assembly of `inputs` (the
    /// claude-code priority chain, or the nexo persona block), followed in
    /// coordinator mode by the workers' tool context and the scratchpad path.
    pub fn main_system_prompt(&self, inputs: &PromptInputs) -> Vec<SystemBlock> {
        let config = &self.inner.config;
        let mut blocks = assemble_system_prompt(config.profile, inputs);
        if config.coordinator_mode {
            let scratch_dir = self.inner.layout.scratch_dir();
            blocks.push(SystemBlock::text(worker_tools_context(
                config.profile,
                Some(&scratch_dir),
            )));
        }
        blocks
    }

    /// Runs the main thread on `prompt` until it ends its turn with no task left to
    /// report. In coordinator mode it has the coordinator's tools only; every spawn
    /// returns at once, and finished workers' envelopes arrive as one user-role
    /// message at its next turn boundary. The conversation is written to a fresh
    /// durable log as it goes, so [`Session::resume_coordinator`] can continue it
    /// after a crash.
    pub async fn run_coordinator(
        &self,
        prompt: &str,
        system: Vec<SystemBlock>,
    ) -> Result<CoordinatorReport, SessionError> {
        let messages = vec![Message {
            role: MessageRole::User,
            content: vec![ContentBlock::text(prompt)],
        }];
        let log = CoordinatorLog::create(&self.inner.world, &self.inner.layout, &messages[0])?;
        self.converse(messages, &log, system).await
    }

    /// Continues the main thread's conversation from its durable log after a
    /// restart ([`Session::resume`]): tool calls that never got a result are closed
    /// with an error result, the notifications of tasks that died with the previous
    /// process arrive at the next turn boundary, and the loop goes on as
    /// [`Session::run_coordinator`]'s would. With no durable conversation (the host
    /// went down before the prompt was written) it starts over from `prompt`.
    /// The report counts every turn of the conversation, before the restart too
    /// (back to its last compaction, whose summary the log continues from).
    pub async fn resume_coordinator(
        &self,
        prompt: &str,
        system: Vec<SystemBlock>,
    ) -> Result<CoordinatorReport, SessionError> {
        let (log, replayed) = CoordinatorLog::reopen(&self.inner.world, &self.inner.layout)?;
        let mut messages = replayed.messages;
        if messages.is_empty() {
            return self.run_coordinator(prompt, system).await;
        }
        if let Some(closing) = close_unresolved_calls(&messages) {
            log.append_message(&closing)?;
            messages.push(closing);
        }
        {
            let mut state = self.state();
            let added_since = std::mem::take(&mut state.system_amendments);
            state.system_amendments = replayed.amendments;
            state.system_amendments.extend(added_since);
        }
        self.converse(messages, &log, system).await
    }

    /// The coordinator loop over `messages`, each new one written to `log` before
    /// the loop goes on.
    async fn converse(
        &self,
        mut messages: Vec<Message>,
        log: &CoordinatorLog,
        system: Vec<SystemBlock>,
    ) -> Result<CoordinatorReport, SessionError> {
        let config = &self.inner.config;
        let role = if config.coordinator_mode {
            Role::Coordinator
        } else {
            Role::Solo
        };
        let surface = ToolSurface::for_role(role, config.profile);
        let tools = super::tool_definitions(&surface);
        // The system blocks of the last turn and the amendments they were built
        // with: turns without a new amendment share them.
        let mut turn_system: Arc<Vec<SystemBlock>> = Arc::default();
        let mut turn_amendments: Option<Vec<SystemBlock>> = None;
        let me = AgentRef::Main;
        let cwd = config.cwd.clone();
        let mut delivered = 0;
        let mut previous_key: Option<CacheSafeParams> = None;
        // Amendments already in the log (those a resumed conversation replayed).
        let mut amendments_logged = log.amendments_logged();
        // The context the last response reported: what decides a compaction.
        let mut context_tokens_last: Option<u64> = None;
        let mut turn = u32::try_from(
            messages
                .iter()
                .filter(|m| m.role == MessageRole::Assistant)
                .count(),
        )
        .unwrap_or(u32::MAX);
        loop {
            // A conversation that ends with the assistant's text is a turn that
            // ended. Wait (without blocking any worker) until a notification arrives,
            // or end when no task is left to report.
            if messages
                .last()
                .is_some_and(|m| m.role == MessageRole::Assistant)
            {
                loop {
                    let change = self.next_change();
                    if self.state().registry.notifications_pending() > 0 {
                        break;
                    }
                    if self.outstanding() == 0 {
                        let final_text = messages
                            .last()
                            .map_or_else(String::new, |m| text_of(&m.content));
                        return Ok(CoordinatorReport {
                            final_text,
                            turns: turn,
                            notifications_delivered: delivered,
                            messages,
                        });
                    }
                    self.wait_for_change(change, config.idle_recheck).await;
                }
            }
            if turn >= config.turns_max {
                Probe::TurnLimitReached.reach(&*self.inner.world.journal);
                return Err(SessionError::TurnLimit(config.turns_max));
            }
            turn += 1;
            if let Some(pre_tokens) = self.compaction_due(context_tokens_last, &messages) {
                // The last turn's request shape, so the prefix is the one it cached.
                let request = ModelRequest {
                    model: config.model.clone(),
                    max_tokens: config.max_tokens,
                    tools: tools.clone(),
                    system: turn_system.clone(),
                    messages: compaction_messages(messages.clone()),
                    thinking: None,
                };
                // A failed compaction leaves the conversation as it was.
                if let Some(compaction) = self.compact(&me, request, pre_tokens).await {
                    log.append_compact_boundary(
                        AUTO_TRIGGER,
                        compaction.pre_tokens,
                        &compaction.message,
                    )?;
                    messages = vec![compaction.message];
                }
            }
            delivered += self.inject_notifications(&mut messages, log)?;
            self.evict_expired();
            let amendments = self.state().system_amendments.clone();
            for block in amendments.iter().skip(amendments_logged) {
                log.append_amendment(block)?;
            }
            amendments_logged = amendments.len();
            if turn_amendments.as_ref() != Some(&amendments) {
                let mut blocks = system.clone();
                blocks.extend(amendments.iter().cloned());
                turn_system = Arc::new(blocks);
                turn_amendments = Some(amendments);
            }
            // The conversation moves into the request and back after the turn: the
            // request must outlive the model call (a fork copies it), and copying
            // the conversation every turn cost more than the rest of the turn.
            let request = Arc::new(ModelRequest {
                model: config.model.clone(),
                max_tokens: config.max_tokens,
                tools: tools.clone(),
                system: turn_system.clone(),
                messages: std::mem::take(&mut messages),
                thinking: None,
            });
            self.declare_prefix_change(&me, previous_key.as_ref(), &request);
            previous_key = Some(CacheSafeParams::head_of(&request));
            let response = self.send_with_retry(&me, &request).await.map_err(|e| {
                self.inner
                    .world
                    .journal
                    .record(RuntimeEvent::ModelCallFailed {
                        agent: me.to_string(),
                        error: e.to_string(),
                    });
                SessionError::Model(e.to_string())
            })?;
            context_tokens_last = Some(context_tokens(&response.usage));
            let assistant = Message {
                role: MessageRole::Assistant,
                content: response.content,
            };
            let calls = tool_calls_of(&assistant.content);
            // Durable before its calls run: a restart must know which calls were made.
            log.append_message(&assistant)?;
            let fork_from = ForkSource {
                request,
                assistant,
                depth: 0,
            };
            if !calls.is_empty() {
                let site = CallSite {
                    caller: &me,
                    surface: &surface,
                    cwd: &cwd,
                    worktree: None,
                    fork_from: Some(&fork_from),
                    teammate: None,
                };
                // Every call of one message runs concurrently.
                let call_ids = call_ids_of(&calls);
                let outputs =
                    join_all(calls.into_iter().map(|call| self.call_tool(&site, call))).await;
                let results = Message {
                    role: MessageRole::User,
                    content: tool_results(call_ids, outputs),
                };
                log.append_message(&results)?;
                messages = fork_from.conversation_after();
                messages.push(results);
            } else {
                messages = fork_from.conversation_after();
            }
        }
    }

    /// Adds `text` as a last block of the main thread's system prompt from its next
    /// turn on: what an embedding harness does when the instructions it includes
    /// change mid-session (an edited instructions file, a new output style). It
    /// breaks the prompt cache, and the coordinator loop declares the break.
    pub fn amend_system_prompt(&self, text: &str) {
        self.state().system_amendments.push(SystemBlock::text(text));
    }

    /// Journals a cache break when `request`'s cache key (model, limits, thinking,
    /// tools, system) differs from the previous turn's: a changed prefix costs a full
    /// cache write, and must be visible as one (PROTOCOL.md §6).
    fn declare_prefix_change(
        &self,
        me: &AgentRef,
        previous_key: Option<&CacheSafeParams>,
        request: &ModelRequest,
    ) {
        // Defect `undeclared-cache-breaks`: the change is not compared, so not declared.
        #[cfg(feature = "defects")]
        if self.inner.config.defects.has(Defect::UndeclaredCacheBreaks) {
            return;
        }
        if let Some(previous) = previous_key {
            check_cache_break(
                &*self.inner.world.journal,
                &me.to_string(),
                previous,
                &CacheSafeParams::head_of(request).to_request(),
            );
        }
    }

    /// Appends pending envelopes to the conversation as one user-role message (or
    /// to the trailing user message), after writing them to `log`: the log line is
    /// the durable record that they were delivered. Returns how many were injected.
    fn inject_notifications(
        &self,
        messages: &mut Vec<Message>,
        log: &CoordinatorLog,
    ) -> Result<usize, SessionError> {
        let envelopes = self.take_notifications();
        if envelopes.is_empty() {
            return Ok(0);
        }
        let dialect = self.inner.config.profile.dialect();
        let render_envelope = render;
        // Defect `raw-envelope-result`: the worker's result goes in unescaped.
        #[cfg(feature = "defects")]
        let render_envelope = match self.inner.config.defects.has(Defect::RawEnvelopeResult) {
            false => render_envelope,
            true => render_raw_result,
        };
        let blocks: Vec<ContentBlock> = envelopes
            .iter()
            .map(|envelope| ContentBlock::text(render_envelope(envelope, dialect)))
            .collect();
        log.append_notifications(&blocks, &envelopes)?;
        self.inner
            .world
            .journal
            .record(RuntimeEvent::NotificationsDelivered {
                task_ids: envelopes.iter().map(|e| e.task_id.clone()).collect(),
            });
        add_notification_blocks(messages, blocks);
        Ok(envelopes.len())
    }
}
