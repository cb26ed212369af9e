//! The team lead's harness: what a lead does that no tool of the coordinator does.
//! It asks teammates to shut down and answers their permission requests through
//! the session's lead API, and reads the lead's inbox so that an approved shutdown
//! takes the member off its team.

use std::collections::BTreeSet;
use std::time::Duration;

use coord_runtime::session::Session;
use coord_runtime::team::TeamMessage;

use crate::fault::{FaultBook, COORDINATOR_LABEL};
use crate::scenario::{LeadAction, LeadActionKind};

/// What the lead says when it asks a teammate to go.
const SHUTDOWN_REASON: &str = "the work is done";
/// Why the lead denies a permission request.
const DENIAL_REASON: &str = "not in this change";

/// Plays `actions`: each once the coordinator has made its `after_call`th model
/// call, polling every `poll`. Ends when every action is done: its request sent
/// and, for a shutdown, the member's answer read; for a permission, the request
/// answered.
pub async fn lead(session: Session, actions: Vec<LeadAction>, book: FaultBook, poll: Duration) {
    let clock = session.world().clock.clone();
    let mut pending = actions;
    // Shutdowns asked for whose answer is not read yet, and permission answers
    // waiting for their request: (team, member, action).
    let mut waiting: Vec<(String, String, LeadActionKind)> = Vec::new();
    while !pending.is_empty() || !waiting.is_empty() {
        clock.sleep(poll).await;
        let calls = book.calls_of(COORDINATOR_LABEL);
        let (due, later): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|action| calls >= action.after_call);
        pending = later;
        for action in due {
            if action.action == LeadActionKind::Shutdown
                && session
                    .request_shutdown(
                        &action.team,
                        &action.member,
                        Some(SHUTDOWN_REASON.to_owned()),
                    )
                    .await
                    .is_err()
            {
                // The team or the member is not there yet: ask again at the next poll.
                pending.push(action);
                continue;
            }
            waiting.push((action.team, action.member, action.action));
        }
        let teams: BTreeSet<String> = waiting.iter().map(|(team, ..)| team.clone()).collect();
        for team in teams {
            let Ok(deliveries) = session.lead_inbox(&team).await else {
                continue;
            };
            for delivery in deliveries {
                let from = &delivery.message.from;
                let position = |wanted: &dyn Fn(LeadActionKind) -> bool| {
                    waiting.iter().position(|(t, member, kind)| {
                        *t == team && member.eq_ignore_ascii_case(from) && wanted(*kind)
                    })
                };
                match delivery.team_message {
                    Some(TeamMessage::ShutdownResponse { .. }) => {
                        if let Some(at) = position(&|kind| kind == LeadActionKind::Shutdown) {
                            waiting.remove(at);
                        }
                    }
                    Some(TeamMessage::PermissionRequest { request_id, .. }) => {
                        let Some(at) = position(&|kind| kind != LeadActionKind::Shutdown) else {
                            continue;
                        };
                        let (_, member, kind) = waiting.remove(at);
                        let approve = kind == LeadActionKind::ApprovePermission;
                        let reason = (!approve).then(|| DENIAL_REASON.to_owned());
                        let _ = session
                            .answer_permission(&team, &member, request_id, approve, reason)
                            .await;
                    }
                    _ => {}
                }
            }
        }
    }
}
