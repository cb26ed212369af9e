//! Teams inside a session: teammates join a team file led by the main thread, go
//! idle between turns and poll their mailbox, answer shutdown requests
//! cooperatively, and ask the lead before destructive tool calls.

use std::time::Duration;

use super::{AgentRef, Session, StopError};
use crate::agent::PermissionMode;
use crate::event::RuntimeEvent;
use crate::route::{RequestId, TeamRoster};
use crate::task::TaskId;
use crate::team::{needs_permission, Delivery, IdleMail, Team, TeamError, TEAM_LEAD_NAME};
use crate::tools::ToolName;
use crate::world::ToolCall;

/// What a teammate needs to know about its team.
#[derive(Debug, Clone)]
pub(crate) struct TeammateSetup {
    pub(crate) team: String,
    pub(crate) member: String,
    pub(crate) mode: PermissionMode,
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
        let config = &self.inner.config;
        // Each wait uses its own handle, so one teammate's wait never holds the
        // session's team lock.
        let handle = Team::load(
            &self.inner.world,
            &self.inner.layout,
            config.profile,
            &teammate.team,
        )
        .await
        .map_err(|e| e.to_string())?;
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
    /// shutdown request is approved and ends it.
    pub(crate) async fn teammate_idle(&self, id: &TaskId, teammate: &TeammateSetup) -> Wake {
        let world = &self.inner.world;
        let config = &self.inner.config;
        let mut handle =
            match Team::load(world, &self.inner.layout, config.profile, &teammate.team).await {
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
            let mut texts: Vec<String> = self
                .state()
                .workers
                .get_mut(id)
                .map(|worker| worker.queued.take_on_wake())
                .unwrap_or_default();
            match handle.poll_idle(&teammate.member).await {
                Ok(IdleMail::Shutdown) => return Wake::Shutdown,
                Ok(IdleMail::Messages(mail)) => texts.extend(mail),
                // An unreadable mailbox is read again at the next poll.
                Err(_) => {}
            }
            if !texts.is_empty() {
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
}
