//! The send times the team inboxes' messages carry, as the disk holds them once the
//! run is over, held against when a model first asked to send each message.
//!
//! PROTOCOL.md §4 gives every inbox message a `timestamp`: when it was sent. A
//! message cannot have been sent before the model response that asked for it
//! reached the runtime, so a stamp earlier than that response is a clock the
//! runtime misread (a cached reading, a stamp reused from an earlier message). The
//! stamps are parsed here, with `humantime`, not with the runtime's own formatter.

use std::path::Path;

use coord_runtime::ipc::{MailboxMessage, SessionLayout};
use coord_runtime::world::Disk;

use crate::world::SIM_EPOCH_UNIX_MS;

/// One message in some member's team inbox, with its stamp as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StampedMail {
    /// The inbox's owner: its file name without `.json`.
    pub owner: String,
    /// The sender's member name.
    pub from: String,
    /// The text: plain, or a structured message's JSON.
    pub text: String,
    /// The `timestamp` field as written.
    pub stamp: String,
}

impl StampedMail {
    /// The stamp in ms of virtual time (since [`SIM_EPOCH_UNIX_MS`]): negative
    /// before the run's epoch, `None` when it is not an RFC 3339 time.
    pub fn stamped_ms(&self) -> Option<i128> {
        let time = humantime::parse_rfc3339(&self.stamp).ok()?;
        let unix_ms = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
        Some(i128::try_from(unix_ms).ok()? - i128::from(SIM_EPOCH_UNIX_MS))
    }
}

/// Every message in the team inboxes under `layout` on `disk` whose owner
/// `judged` accepts: team by team in name order, inbox by inbox in name order,
/// each inbox in its own order. An inbox that cannot be read as a JSON array of
/// messages (torn by a fault) adds nothing; other witnesses judge those.
pub(super) fn stamped_mail(
    layout: &SessionLayout,
    disk: &dyn Disk,
    judged: impl Fn(&str) -> bool,
) -> Vec<StampedMail> {
    let Ok(teams) = disk.list_dir(&layout.root().join("teams")) else {
        return Vec::new();
    };
    let mut mail = Vec::new();
    for team in teams {
        let Ok(inboxes) = disk.list_dir(&team.join("inboxes")) else {
            continue;
        };
        for inbox in inboxes {
            let Some(owner) = inbox_owner(&inbox) else {
                continue;
            };
            if judged(owner) {
                mail.extend(inbox_mail(owner, &inbox, disk));
            }
        }
    }
    mail
}

/// The owner of the inbox at `path`: its file name without `.json`; none when
/// `path` is not an inbox (a lock or temp file beside one).
fn inbox_owner(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.strip_suffix(".json")
}

/// The messages of `owner`'s inbox at `path`; none when it cannot be read as one.
fn inbox_mail(owner: &str, path: &Path, disk: &dyn Disk) -> Vec<StampedMail> {
    let Ok(bytes) = disk.read(path) else {
        return Vec::new();
    };
    serde_json::from_slice::<Vec<MailboxMessage>>(&bytes)
        .unwrap_or_default()
        .into_iter()
        .map(|message| StampedMail {
            owner: owner.to_owned(),
            from: message.from,
            text: message.text,
            stamp: message.timestamp,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(stamp: &str) -> StampedMail {
        StampedMail {
            owner: "drafter".into(),
            from: "team-lead".into(),
            text: "go".into(),
            stamp: stamp.into(),
        }
    }

    #[test]
    fn a_stamp_reads_as_virtual_time_since_the_epoch() {
        // SIM_EPOCH_UNIX_MS is 2026-01-01T00:00:00Z.
        assert_eq!(
            stamped("2026-01-01T00:00:01.250Z").stamped_ms(),
            Some(1_250)
        );
        assert_eq!(
            stamped("2025-12-31T23:59:59.000Z").stamped_ms(),
            Some(-1_000)
        );
    }

    #[test]
    fn only_the_inboxes_judged_are_read_and_each_message_names_its_owner() {
        let disk = crate::world::MemDisk::new();
        let layout = SessionLayout::new("/session");
        let inboxes = layout.root().join("teams/docs/inboxes");
        disk.create_dir_all(&inboxes).expect("inboxes");
        let inbox = |from: &str| {
            format!(
                r#"[{{"from":"{from}","text":"hi","timestamp":"2026-01-01T00:00:01.000Z","read":false}}]"#
            )
        };
        for (owner, from) in [("drafter", "team-lead"), ("team-lead", "drafter")] {
            disk.replace_atomic(
                &inboxes.join(format!("{owner}.json")),
                inbox(from).as_bytes(),
            )
            .expect("inbox");
        }
        disk.replace_atomic(&inboxes.join("drafter.json.lock"), b"{}")
            .expect("lock");
        let mail = stamped_mail(&layout, &disk, |owner| owner == "drafter");
        assert_eq!(mail.len(), 1);
        assert_eq!(
            (mail[0].owner.as_str(), mail[0].from.as_str()),
            ("drafter", "team-lead")
        );
        assert_eq!(mail[0].stamped_ms(), Some(1_000));
        assert_eq!(stamped_mail(&layout, &disk, |_| true).len(), 2);
    }

    #[test]
    fn a_stamp_that_is_no_time_reads_as_none() {
        assert_eq!(stamped("yesterday").stamped_ms(), None);
        assert_eq!(stamped("").stamped_ms(), None);
    }
}
