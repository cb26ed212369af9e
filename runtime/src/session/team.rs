//! Teams inside a session: teammates join a team file led by the main thread, go
//! idle between turns and poll their mailbox, answer shutdown requests
//! cooperatively, and ask the lead before destructive tool calls.
//!
//! A shutdown request reaches a teammate through its mailbox (the lead's harness,
//! [`Session::request_shutdown`]) or through SendMessage. Through SendMessage it
//! waits in the teammate's message queue, as a request, for its next tool-round
//! boundary, where its model is handed it and answers with a SendMessage
//! `shutdown_response` to the lead: an approval ends the teammate at the end of
//! that round, a rejection (with its reason) leaves it running. An idle teammate
//! has no turn to finish and agrees at once (see `team::shutdown`).

use std::sync::Arc;
use std::time::Duration;

use super::{AgentRef, Session, StopError};
use crate::agent::PermissionMode;
use crate::event::RuntimeEvent;
use crate::probe::Probe;
use crate::route::{QueuedMessage, RequestId, TeamRoster};
use crate::task::{Lookup, TaskId};
use crate::team::{
    needs_permission, Delivery, IdleMail, ShutdownError, Team, TeamError, TEAM_LEAD_NAME,
};
use crate::tools::ToolName;
use crate::world::ToolCall;

/// What a teammate needs to know about its team.
#[derive(Debug, Clone)]
pub(crate) struct TeammateSetup {
    pub(crate) team: String,
    pub(crate) member: String,
    pub(crate) mode: PermissionMode,
    /// Held while the teammate asks its lead for a permission: one request at a
    /// time. The calls of a tool round run side by side, and two requests made in
    /// the same millisecond carry the same id (`permission-<millis>@<agentId>`), so
    /// the second answer would be taken for the first.
    pub(crate) asking: Arc<tokio::sync::Mutex<()>>,
}

impl TeammateSetup {
    /// The setup of member `member` of `team` in permission `mode`.
    pub(crate) fn new(team: String, member: String, mode: PermissionMode) -> Self {
        Self {
            team,
            member,
            mode,
            asking: Arc::default(),
        }
    }
}

/// Why an idle teammate woke up.
pub(crate) enum Wake {
    /// New messages: the texts of its next user message.
    Messages(Vec<String>),
    /// The lead asked it to shut down, and it agreed.
    Shutdown,
    /// It was aborted.
    Killed,
}

impl Session {
    fn team_not_found(&self, team: &str) -> TeamError {
        TeamError::NotFound {
            path: crate::team::team_file_path(&self.inner.layout, team).unwrap_or_default(),
        }
    }

    /// Adds `member` (task `id`) to `team`, creating the team with the main thread as
    /// its lead if it does not exist yet.
    pub(crate) async fn join_team(
        &self,
        team: &str,
        member: &str,
        id: &TaskId,
    ) -> Result<(), TeamError> {
        let mut teams = self.inner.teams.lock().await;
        if !teams.contains_key(team) {
            let handle = Team::load_or_create(
                &self.inner.world,
                &self.inner.layout,
                self.inner.config.profile,
                team,
                TEAM_LEAD_NAME,
                self.inner.main_id.clone(),
            )
            .await?;
            teams.insert(team.to_owned(), handle);
        }
        let handle = teams.get_mut(team).expect("inserted above");
        handle.add_member(member, id.clone()).await.map(|_| ())
    }

    /// The roster of the team `caller` belongs to: a teammate's own team; for the
    /// main thread, the team it leads when it leads exactly one.
    pub(crate) async fn roster_for(&self, caller: &AgentRef) -> Option<TeamRoster> {
        let team_name = match caller {
            AgentRef::Task(id) => self
                .state()
                .workers
                .get(id)
                .and_then(|worker| worker.team.clone())?,
            AgentRef::Main => {
                let teams = self.inner.teams.lock().await;
                if teams.len() != 1 {
                    return None;
                }
                teams.keys().next().cloned()?
            }
        };
        let teams = self.inner.teams.lock().await;
        teams.get(&team_name).map(Team::roster)
    }

    /// Writes `text` from `from` to `member`'s mailbox in `team`.
    pub(crate) async fn write_team_mailbox(
        &self,
        team: &str,
        member: &str,
        from: &str,
        text: &str,
    ) -> Result<(), TeamError> {
        let teams = self.inner.teams.lock().await;
        let handle = teams.get(team).ok_or_else(|| self.team_not_found(team))?;
        let message = crate::ipc::MailboxMessage::new(&self.inner.world, from, text);
        handle.mailbox(member)?.append(message).await?;
        Ok(())
    }

    /// Broadcasts `text` from `from` to `recipients` of `team`
    /// ([`Team::broadcast`](crate::team::Team::broadcast)).
    pub(crate) async fn broadcast_to_team(
        &self,
        team: &str,
        from: &str,
        text: &str,
        recipients: &[String],
    ) -> Result<Vec<String>, TeamError> {
        let teams = self.inner.teams.lock().await;
        let handle = teams.get(team).ok_or_else(|| self.team_not_found(team))?;
        handle.broadcast(from, text, recipients).await
    }

    /// As the lead: asks `member` of `team` to shut down. It answers through the
    /// lead's mailbox and ends once it has agreed.
    pub async fn request_shutdown(
        &self,
        team: &str,
        member: &str,
        reason: Option<String>,
    ) -> Result<RequestId, TeamError> {
        let teams = self.inner.teams.lock().await;
        let handle = teams.get(team).ok_or_else(|| self.team_not_found(team))?;
        handle.request_shutdown(member, reason).await
    }

    /// As the lead: takes the unread messages of the lead's mailbox in `team`
    /// (permission requests, shutdown answers, teammates' reports).
    pub async fn lead_inbox(&self, team: &str) -> Result<Vec<Delivery>, TeamError> {
        let mut teams = self.inner.teams.lock().await;
        let handle = teams
            .get_mut(team)
            .ok_or_else(|| self.team_not_found(team))?;
        handle.poll(TEAM_LEAD_NAME).await
    }

    /// As the lead: answers `member`'s permission request.
    pub async fn answer_permission(
        &self,
        team: &str,
        member: &str,
        request_id: RequestId,
        approve: bool,
        reason: Option<String>,
    ) -> Result<(), TeamError> {
        let teams = self.inner.teams.lock().await;
        let handle = teams.get(team).ok_or_else(|| self.team_not_found(team))?;
        handle
            .answer_permission(member, request_id, approve, reason)
            .await
    }

    /// Redirects teammate `id`: its current turn is abandoned (the main abort is not
    /// touched), and `message` becomes its next input.
    pub fn redirect(&self, id: &TaskId, message: &str) -> Result<(), StopError> {
        let mut state = self.state();
        let running = state
            .registry
            .get(id)
            .is_some_and(|task| !task.status().is_terminal());
        let Some(worker) = state.workers.get_mut(id).filter(|_| running) else {
            return Err(StopError::NotFound(id.to_string()));
        };
        if worker.team.is_none() {
            return Err(StopError::NotRunning {
                id: id.to_string(),
                status: "not a teammate".into(),
            });
        }
        worker.queued.push(message);
        worker.turn_token.cancel();
        // The redirect is a message from the lead like any other queued one.
        self.inner
            .world
            .journal
            .record(RuntimeEvent::MessageQueued {
                to: id.to_string(),
                from: AgentRef::Main.to_string(),
            });
        Ok(())
    }

    /// Asks the lead before a teammate's destructive tool call, as its permission mode
    /// requires. `Ok(())` means go ahead; `Err` is the refusal the model sees.
    pub(crate) async fn check_teammate_permission(
        &self,
        teammate: &TeammateSetup,
        call: &ToolCall,
    ) -> Result<(), String> {
        let Some(tool) = ToolName::parse(&call.name) else {
            return Ok(());
        };
        if !needs_permission(teammate.mode, tool) {
            return Ok(());
        }
        if teammate.mode == PermissionMode::Plan {
            return Err(format!("{tool} is not allowed in plan mode"));
        }
        let _one_request_at_a_time = teammate.asking.lock().await;
        let config = &self.inner.config;
        // Each wait uses its own handle, so one teammate's wait never holds the
        // session's team lock.
        let handle = self.team_of(teammate).await.map_err(|e| e.to_string())?;
        let request_id = handle
            .request_permission(&teammate.member, tool.as_str(), call.input.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        let answer = handle
            .wait_permission(
                &teammate.member,
                &request_id,
                config.permission_timeout,
                config.idle_poll,
            )
            .await
            .map_err(|e| e.to_string())?;
        if answer.approve {
            Ok(())
        } else {
            Err(format!(
                "the team lead denied {tool}: {}",
                answer.reason.unwrap_or_else(|| "no reason given".into())
            ))
        }
    }

    /// An idle teammate waits for work: messages queued for it, or its mailbox. A
    /// shutdown request is agreed to at once when there is nothing else to do: one
    /// in its mailbox, one queued for it alone, or one its model was handed and left
    /// unanswered. A request queued with other messages is handed over with them,
    /// as at a tool-round boundary, for its model to answer.
    pub(crate) async fn teammate_idle(&self, id: &TaskId, teammate: &TeammateSetup) -> Wake {
        let world = &self.inner.world;
        let config = &self.inner.config;
        let mut handle = match self.team_of(teammate).await {
            Ok(handle) => handle,
            Err(_) => return Wake::Killed,
        };
        let _ = handle.mark_idle(&teammate.member).await;
        let token = match self.state().workers.get(id) {
            Some(worker) => worker.token.clone(),
            None => return Wake::Killed,
        };
        loop {
            if token.is_cancelled() {
                return Wake::Killed;
            }
            let (queued, unanswered) = self.take_on_wake(id);
            if !unanswered.is_empty() {
                return self
                    .agree_to_shutdown(&mut handle, teammate, unanswered)
                    .await;
            }
            let mut handed_requests: Vec<RequestId> = queued
                .iter()
                .filter_map(|m| m.shutdown_request.clone())
                .collect();
            let mut texts: Vec<String> = queued.into_iter().map(|m| m.text).collect();
            match handle.poll_idle(&teammate.member, !texts.is_empty()).await {
                Ok(IdleMail::Shutdown) => {
                    Probe::ShutdownAgreedIdle.reach(&*world.journal);
                    return Wake::Shutdown;
                }
                Ok(IdleMail::Messages(mail)) => texts.extend(mail),
                // Requests beside other work: its model answers them with the rest.
                Ok(IdleMail::MessagesWithShutdown {
                    texts: mail,
                    requests,
                }) => {
                    if let Some(worker) = self.state().workers.get_mut(id) {
                        for request_id in &requests {
                            worker.shutdown.handed_over(request_id.clone());
                        }
                    }
                    handed_requests.extend(requests);
                    texts.extend(mail);
                }
                // An unreadable mailbox is read again at the next poll.
                Err(_) => {}
            }
            if !texts.is_empty() {
                if !handed_requests.is_empty() {
                    let _ = handle
                        .note_shutdown_requested(&teammate.member, &handed_requests)
                        .await;
                }
                let _ = handle.mark_busy(&teammate.member).await;
                world.journal.record(RuntimeEvent::MessagesDelivered {
                    to: id.to_string(),
                    count: texts.len(),
                });
                return Wake::Messages(texts);
            }
            let wait: Duration = config.idle_poll;
            tokio::select! {
                biased;
                _ = token.cancelled() => return Wake::Killed,
                _ = world.clock.sleep(wait) => {}
            }
        }
    }

    /// What idle teammate `id` wakes with from its queue, and the shutdown requests
    /// it must agree to now: those queued with nothing else beside them, and any
    /// its model was handed earlier and left unanswered. A request queued beside
    /// other messages is handed over with them (so it is awaited from now on) and
    /// is not agreed to yet.
    fn take_on_wake(&self, id: &TaskId) -> (Vec<QueuedMessage>, Vec<RequestId>) {
        let mut state = self.state();
        let Some(worker) = state.workers.get_mut(id) else {
            return (Vec::new(), Vec::new());
        };
        let queued = worker.queued.take_on_wake();
        for request_id in queued.iter().filter_map(|m| m.shutdown_request.clone()) {
            worker.shutdown.handed_over(request_id);
        }
        let only_requests = queued.iter().all(|m| m.shutdown_request.is_some());
        if !only_requests {
            return (queued, Vec::new());
        }
        (Vec::new(), worker.shutdown.take_unanswered())
    }

    /// Idle `teammate` agrees to shut down: every request in `requests` is answered
    /// with an approval in the lead's mailbox, after the team file notes it was
    /// asked (so the lead's poll takes it off the team). It ends whether or not an
    /// answer reaches the lead: it was asked to go, and the lead sees it leave.
    async fn agree_to_shutdown(
        &self,
        handle: &mut Team,
        teammate: &TeammateSetup,
        requests: Vec<RequestId>,
    ) -> Wake {
        let _ = handle
            .note_shutdown_requested(&teammate.member, &requests)
            .await;
        for request_id in requests {
            let _ = handle
                .respond_shutdown(&teammate.member, request_id, true, None)
                .await;
        }
        Probe::ShutdownAgreedIdle.reach(&*self.inner.world.journal);
        Wake::Shutdown
    }

    /// Marks `teammate` busy in its team's file. Best effort: the flag is what the
    /// team sees of it, and a teammate that cannot write it still works.
    pub(crate) async fn mark_teammate_busy(&self, teammate: &TeammateSetup) {
        if let Ok(mut handle) = self.team_of(teammate).await {
            let _ = handle.mark_busy(&teammate.member).await;
        }
    }

    /// `teammate`'s team, as its file is now.
    async fn team_of(&self, teammate: &TeammateSetup) -> Result<Team, TeamError> {
        Team::load(
            &self.inner.world,
            &self.inner.layout,
            self.inner.config.profile,
            &teammate.team,
        )
        .await
    }

    /// Notes in `teammate`'s team file that the lead asked it to shut down, when one
    /// of `requests` (handed over from its queue) is the lead's. Best effort: the
    /// note only lets the lead's poll take it off the team once it approves.
    pub(crate) async fn note_shutdown_requested(
        &self,
        teammate: &TeammateSetup,
        requests: &[RequestId],
    ) {
        if let Ok(mut handle) = self.team_of(teammate).await {
            let _ = handle
                .note_shutdown_requested(&teammate.member, requests)
                .await;
        }
    }

    /// SendMessage's `shutdown_request` (delivered form `text`, id `request_id`) to
    /// agent `id`: queued as a request for its next tool-round boundary when it is a
    /// running teammate (an idle one takes it when it wakes), refused otherwise:
    /// nothing else would ever answer it.
    pub(crate) fn queue_shutdown_request(
        &self,
        from: &AgentRef,
        id: &TaskId,
        request_id: RequestId,
        text: &str,
    ) -> Result<(), ShutdownError> {
        let journal = &*self.inner.world.journal;
        let mut guard = self.state();
        let state = &mut *guard;
        let refusal = match state.registry.lookup(id) {
            Lookup::Live(task) if task.status().is_terminal() => {
                format!("has ended ({})", task.status())
            }
            // Evicted only once it ended and notified.
            Lookup::Evicted => "has ended".to_owned(),
            Lookup::Unknown => "is not a task of this session".to_owned(),
            Lookup::Live(_) => match state.workers.get_mut(id) {
                Some(worker) if worker.team.is_some() => {
                    worker.queued.push_shutdown_request(text, request_id);
                    journal.record(RuntimeEvent::MessageQueued {
                        to: id.to_string(),
                        from: from.to_string(),
                    });
                    Probe::ShutdownRequestQueued.reach(journal);
                    return Ok(());
                }
                Some(_) => "is in no team".to_owned(),
                None => "is not an agent".to_owned(),
            },
        };
        Probe::ShutdownRequestRefused.reach(journal);
        Err(ShutdownError::NotARunningTeammate {
            agent: id.to_string(),
            state: refusal,
        })
    }

    /// Before `caller`'s `shutdown_response` to `request_id` is sent: the request
    /// must be one its model was handed and has not answered, and it is taken out
    /// of those. Refused otherwise ([`ShutdownError::NotPending`]).
    pub(crate) fn take_shutdown_answer(
        &self,
        caller: &AgentRef,
        sender: &str,
        request_id: &RequestId,
    ) -> Result<(), ShutdownError> {
        let mut state = self.state();
        let answered = match caller {
            AgentRef::Task(id) => state
                .workers
                .get_mut(id)
                .map(|worker| worker.shutdown.answer(request_id, sender)),
            AgentRef::Main => None,
        };
        answered
            .unwrap_or_else(|| {
                Err(ShutdownError::NotPending {
                    request_id: request_id.clone(),
                    sender: sender.to_owned(),
                })
            })
            .inspect_err(|_| Probe::ShutdownResponseUnmatched.reach(&*self.inner.world.journal))
    }

    /// After `caller`'s `shutdown_response` to `request_id` went out (`sent`) or
    /// failed: an approval that reached the lead ends the teammate at the end of
    /// this tool round; an answer that failed leaves the request waiting for one.
    pub(crate) fn settle_shutdown_answer(
        &self,
        caller: &AgentRef,
        request_id: RequestId,
        approve: bool,
        sent: bool,
    ) {
        let AgentRef::Task(id) = caller else {
            return;
        };
        let mut state = self.state();
        let Some(worker) = state.workers.get_mut(id) else {
            return;
        };
        match (sent, approve) {
            (true, true) => worker.shutdown.approve(request_id),
            (true, false) => {}
            (false, _) => worker.shutdown.unanswer(request_id),
        }
    }
}
