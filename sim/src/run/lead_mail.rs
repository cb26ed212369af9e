//! The team leads' inboxes as the disk holds them once the run is over: where the
//! messages teammates sent their lead must be (invariant 4's "delivered" for a
//! recipient with no model of its own in the run), read as bytes rather than taken
//! from what the runtime says it wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use coord_runtime::ipc::{MailboxMessage, SessionLayout};
use coord_runtime::team::{team_file_path, TeamFile, TeamMessage, TEAM_LEAD_NAME};
use coord_runtime::world::Disk;

use crate::scenario::{LeadAction, LeadActionKind};
use crate::trace::{PermissionAsked, RequestAnswers, ShutdownsSeen, SimEvent, TeamMember};
use crate::world::inbox_path;

/// One message in a lead's inbox: who sent it (their name in the team) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeadMail {
    /// The team whose lead's inbox holds it.
    pub team: String,
    /// The sender's member name.
    pub from: String,
    /// The text: plain, or a structured message's JSON.
    pub text: String,
    /// Whether the lead read it.
    pub read: bool,
}

/// Every message in every team lead's inbox under `layout` on `disk`, team by team
/// in name order, each inbox in its own order. An inbox the disk cannot read, or
/// that is not a JSON array of messages (torn by a fault), adds nothing: the
/// messages it should hold then count as never delivered.
pub(super) fn lead_mail(layout: &SessionLayout, disk: &dyn Disk) -> Vec<LeadMail> {
    let teams_dir = layout.root().join("teams");
    let Ok(mut teams) = disk.list_dir(&teams_dir) else {
        return Vec::new();
    };
    teams.sort();
    let mut mail = Vec::new();
    for team in teams {
        let Some(name) = team.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let Some(inbox) = inbox_path(layout.root(), name, TEAM_LEAD_NAME) else {
            continue;
        };
        mail.extend(inbox_mail(name, &inbox, disk));
    }
    mail
}

/// The messages of the inbox at `path`, in order; none when it cannot be read as
/// an inbox.
fn inbox_mail(team: &str, path: &Path, disk: &dyn Disk) -> Vec<LeadMail> {
    let Ok(bytes) = disk.read(path) else {
        return Vec::new();
    };
    let messages = serde_json::from_slice::<Vec<MailboxMessage>>(&bytes).unwrap_or_default();
    messages
        .into_iter()
        .map(|message| LeadMail {
            team: team.to_owned(),
            from: message.from,
            text: message.text,
            read: message.read,
        })
        .collect()
}

/// The members the team files under `layout` on `disk` mark as asked to shut down,
/// beside every name a lead asked (`lead`'s scripted shutdowns and
/// `lead_requests`, the names the lead's model sent a shutdown request to), as
/// one trace event; `None` when no file marks a member.
pub(super) fn shutdowns_marked(
    lead: &[LeadAction],
    lead_requests: Vec<String>,
    layout: &SessionLayout,
    disk: &dyn Disk,
) -> Option<SimEvent> {
    let teams_dir = layout.root().join("teams");
    let mut teams = disk.list_dir(&teams_dir).ok()?;
    teams.sort();
    let mut marked = Vec::new();
    for team in teams {
        let Some(name) = team.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let file = team_file_path(layout, name)
            .ok()
            .and_then(|path| disk.read(&path).ok())
            .and_then(|bytes| serde_json::from_slice::<TeamFile>(&bytes).ok());
        let Some(file) = file else {
            continue;
        };
        marked.extend(
            file.members
                .into_iter()
                .filter(|member| member.shutdown_requested)
                .map(|member| TeamMember {
                    team: name.to_owned(),
                    member: member.name,
                }),
        );
    }
    if marked.is_empty() {
        return None;
    }
    let asked = lead
        .iter()
        .filter(|action| action.action == LeadActionKind::Shutdown)
        .map(|action| action.member.clone())
        .chain(lead_requests)
        .collect();
    Some(SimEvent::ShutdownsMarked { marked, asked })
}

/// The permission requests in `mail` beside the permission answers `lead` scripts,
/// as one trace event; `None` when there are neither.
pub(super) fn permissions_asked(lead: &[LeadAction], mail: &[LeadMail]) -> Option<SimEvent> {
    let asked: Vec<PermissionAsked> = mail
        .iter()
        .filter_map(|mail| match TeamMessage::parse(&mail.text)? {
            TeamMessage::PermissionRequest { tool, .. } => Some(PermissionAsked {
                team: mail.team.clone(),
                member: mail.from.clone(),
                tool: Some(tool),
            }),
            _ => None,
        })
        .collect();
    let scripted: Vec<PermissionAsked> = lead
        .iter()
        .filter(|action| action.action.answers_permission())
        .map(|action| PermissionAsked {
            team: action.team.clone(),
            member: action.member.clone(),
            tool: action.tool.clone(),
        })
        .collect();
    (!asked.is_empty() || !scripted.is_empty())
        .then_some(SimEvent::PermissionsAsked { asked, scripted })
}

/// The shutdowns `lead` scripts, beside the approving shutdown responses in `mail`
/// and the members each team's file under `layout` on `disk` still lists, as one
/// trace event; `None` when `lead` scripts no shutdown.
pub(super) fn shutdowns_witnessed(
    lead: &[LeadAction],
    mail: &[LeadMail],
    layout: &SessionLayout,
    disk: &dyn Disk,
) -> Option<SimEvent> {
    let scripted: Vec<TeamMember> = lead
        .iter()
        .filter(|action| action.action == LeadActionKind::Shutdown)
        .map(|action| TeamMember {
            team: action.team.clone(),
            member: action.member.clone(),
        })
        .collect();
    if scripted.is_empty() {
        return None;
    }
    let approvals: Vec<&LeadMail> = mail
        .iter()
        .filter(|mail| {
            matches!(
                TeamMessage::parse(&mail.text),
                Some(TeamMessage::ShutdownResponse { approve: true, .. })
            )
        })
        .collect();
    let sender = |mail: &&LeadMail| TeamMember {
        team: mail.team.clone(),
        member: mail.from.clone(),
    };
    let approved = approvals.iter().map(sender).collect();
    let approvals_read = approvals
        .iter()
        .filter(|mail| mail.read)
        .map(sender)
        .collect();
    let mut answers: BTreeMap<(&str, &str, String), u64> = BTreeMap::new();
    for mail in mail {
        if let Some(TeamMessage::ShutdownResponse { request_id, .. }) =
            TeamMessage::parse(&mail.text)
        {
            *answers
                .entry((&mail.team, &mail.from, request_id.to_string()))
                .or_default() += 1;
        }
    }
    let answered_twice = answers
        .into_iter()
        .filter(|(_, count)| *count > 1)
        .map(|((team, member, request_id), answers)| RequestAnswers {
            member: TeamMember {
                team: team.to_owned(),
                member: member.to_owned(),
            },
            request_id,
            answers,
        })
        .collect();
    let teams: BTreeSet<&str> = scripted.iter().map(|member| member.team.as_str()).collect();
    let listed = teams
        .into_iter()
        .flat_map(|team| {
            let members = team_file_path(layout, team)
                .ok()
                .and_then(|path| disk.read(&path).ok())
                .and_then(|bytes| serde_json::from_slice::<TeamFile>(&bytes).ok())
                .map(|file| file.members)
                .unwrap_or_default();
            members.into_iter().map(move |member| TeamMember {
                team: team.to_owned(),
                member: member.name,
            })
        })
        .collect();
    Some(SimEvent::ShutdownsWitnessed(Box::new(ShutdownsSeen {
        scripted,
        approved,
        approvals_read,
        listed,
        answered_twice,
    })))
}
