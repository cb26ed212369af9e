//! The team lead's harness: what a lead does that no tool of the coordinator does.
//! It asks teammates to shut down and answers (or ignores) their permission
//! requests through
//! the session's lead API, and reads the lead's inbox so that an approved shutdown
//! takes the member off its team.

use std::collections::BTreeSet;
use std::time::Duration;

use coord_runtime::route::{RequestId, RequestKind};
use coord_runtime::session::Session;
use coord_runtime::team::TeamMessage;

use super::tap::TapMemory;
use crate::fault::{FaultBook, COORDINATOR_LABEL};
use crate::scenario::{LeadAction, LeadActionKind};
use crate::trace::{SimEvent, Trace};

/// What the lead says when it asks a teammate to go.
const SHUTDOWN_REASON: &str = "the work is done";
/// Why the lead denies a permission request.
const DENIAL_REASON: &str = "not in this change";

/// A permission request read from a lead's inbox and not answered yet.
struct Request {
    team: String,
    from: String,
    request_id: RequestId,
    tool: String,
}

/// Plays `actions`: each once the coordinator has made its `after_call`th model
/// call and the run's clock has passed its `after_ms`, polling every `poll`. Ends
/// when every action is done: its request sent and, for a shutdown, the member's
/// answer read; for a permission, the request answered (or, for
/// `ignore-permission`, left); for a redirect, the redirect taken (its message is
/// noted in `tap` as one the lead sent the teammate, which must reach its model
/// once). A permission request read before its action is due waits for it.
///
/// Before it answers a permission request, the harness tries the same answer
/// under an id of another kind with the same member and time (a shutdown
/// request's): the lead's API must refuse it (PROTOCOL.md §5, an answer names
/// the request it answers), or any id could carry an approval. One it takes is
/// pushed into `trace` as [`SimEvent::LeadAnswerMisaccepted`].
pub async fn lead(
    session: Session,
    actions: Vec<LeadAction>,
    book: FaultBook,
    poll: Duration,
    trace: Trace,
    tap: TapMemory,
) {
    let clock = session.world().clock.clone();
    let started = clock.monotonic();
    let mut pending = actions;
    // Shutdowns asked for whose answer is not read yet, and permission answers
    // waiting for their request.
    let mut waiting: Vec<LeadAction> = Vec::new();
    let mut requests: Vec<Request> = Vec::new();
    while !pending.is_empty() || !waiting.is_empty() {
        clock.sleep(poll).await;
        let calls = book.calls_of(COORDINATOR_LABEL);
        let elapsed_ms = clock.monotonic().saturating_sub(started).as_millis();
        let (due, later): (Vec<_>, Vec<_>) = pending.into_iter().partition(|action| {
            calls >= action.after_call && elapsed_ms >= u128::from(action.after_ms)
        });
        pending = later;
        for action in due {
            if action.action == LeadActionKind::Redirect {
                let message = action.redirect_message();
                let taken = session
                    .resolve_name(&action.member)
                    .is_some_and(|id| session.redirect(&id, message).is_ok());
                if taken {
                    tap.note_redirect(&action.member, message, trace.now_ms());
                } else {
                    // The teammate is not there yet: redirect it at the next poll.
                    pending.push(action);
                }
                continue;
            }
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
            waiting.push(action);
        }
        // A permission request may come before its answer is due: a team with one
        // to come is read too.
        let teams: BTreeSet<String> = waiting
            .iter()
            .chain(
                pending
                    .iter()
                    .filter(|action| action.action.answers_permission()),
            )
            .map(|action| action.team.clone())
            .collect();
        for team in teams {
            let Ok(deliveries) = session.lead_inbox(&team).await else {
                continue;
            };
            for delivery in deliveries {
                let from = &delivery.message.from;
                match delivery.team_message {
                    Some(TeamMessage::ShutdownResponse { .. }) => {
                        if let Some(at) = waiting.iter().position(|action| {
                            action.team == team
                                && action.member.eq_ignore_ascii_case(from)
                                && action.action == LeadActionKind::Shutdown
                        }) {
                            waiting.remove(at);
                        }
                    }
                    Some(TeamMessage::PermissionRequest {
                        request_id, tool, ..
                    }) => requests.push(Request {
                        team: team.clone(),
                        from: from.clone(),
                        request_id,
                        tool,
                    }),
                    _ => {}
                }
            }
        }
        // Each due permission action takes the first request it answers: from its
        // member, for its tool if it names one. A request for another tool stays
        // unanswered: the teammate asked about the wrong call.
        let mut index = 0;
        while index < waiting.len() {
            let action = &waiting[index];
            let answers = |request: &Request| {
                action.action.answers_permission()
                    && request.team == action.team
                    && action.member.eq_ignore_ascii_case(&request.from)
                    && action
                        .tool
                        .as_ref()
                        .is_none_or(|tool| *tool == request.tool)
            };
            let Some(at) = requests.iter().position(answers) else {
                index += 1;
                continue;
            };
            let request = requests.remove(at);
            let action = waiting.remove(index);
            if action.action == LeadActionKind::IgnorePermission {
                continue;
            }
            let approve = action.action == LeadActionKind::ApprovePermission;
            let reason = (!approve).then(|| DENIAL_REASON.to_owned());
            let misdirected = RequestId::from_parts(
                RequestKind::Shutdown,
                request.request_id.unix_ms(),
                request.request_id.agent().clone(),
            );
            let taken = session
                .answer_permission(
                    &request.team,
                    &action.member,
                    misdirected.clone(),
                    approve,
                    reason.clone(),
                )
                .await;
            if taken.is_ok() {
                trace.push(
                    COORDINATOR_LABEL,
                    SimEvent::LeadAnswerMisaccepted {
                        detail: format!(
                            "the lead's answer to {}'s permission request {} was taken under the id {misdirected}, a shutdown request's",
                            action.member, request.request_id
                        ),
                    },
                );
            }
            let _ = session
                .answer_permission(
                    &request.team,
                    &action.member,
                    request.request_id,
                    approve,
                    reason,
                )
                .await;
        }
    }
}
