//! Where PROTOCOL.md §4 puts a session's mailboxes, written out here from the
//! protocol's table rather than asked of the runtime's `SessionLayout`.
//!
//! The world's outside writers (the producers, the forger, the duplicator) and the
//! witnesses that read mailboxes back look where the protocol says a mailbox is. A
//! runtime that moved its mailboxes then misses their mail and fails the sweep;
//! asking the runtime where to look would have followed it there.
//!
//! How each profile writes and reads an inbox is written out here too, from §4's
//! notes, rather than asked of the runtime's `Profile::mailbox_write_mode`.

use std::path::{Path, PathBuf};

use coord_runtime::ipc::WriteMode;
use coord_runtime::profile::Profile;

/// How PROTOCOL.md §4 has `profile` write an inbox: claude-code rewrites it in
/// place (and reads it without the lock); nexo and hardened write atomically
/// (temp file, fsync, rename, fsync of the directory) and read under the lock.
pub fn inbox_write_mode(profile: Profile) -> WriteMode {
    match profile {
        Profile::ClaudeCode => WriteMode::LegacyInPlace,
        Profile::Nexo | Profile::Hardened => WriteMode::Atomic,
    }
}

/// `<root>/teams/<team>/inboxes/<agent>.json`, or `None` when `team` or `agent` is
/// not one plain path segment (no outside writer addresses such a name).
pub fn inbox_path(root: &Path, team: &str, agent: &str) -> Option<PathBuf> {
    let plain = |segment: &str| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && !segment.contains(['/', '\\', '\0'])
    };
    (plain(team) && plain(agent)).then(|| {
        root.join("teams")
            .join(team)
            .join("inboxes")
            .join(format!("{agent}.json"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claude_code_rewrites_an_inbox_in_place() {
        assert_eq!(
            inbox_write_mode(Profile::ClaudeCode),
            WriteMode::LegacyInPlace
        );
        assert_eq!(inbox_write_mode(Profile::Nexo), WriteMode::Atomic);
        assert_eq!(inbox_write_mode(Profile::Hardened), WriteMode::Atomic);
    }

    #[test]
    fn an_inbox_is_where_the_protocol_puts_it() {
        assert_eq!(
            inbox_path(Path::new("/session"), "crew", "team-lead"),
            Some(PathBuf::from("/session/teams/crew/inboxes/team-lead.json"))
        );
    }

    #[test]
    fn a_name_that_is_not_one_segment_has_no_inbox() {
        for (team, agent) in [
            ("crew", ".."),
            ("..", "lead"),
            ("a/b", "lead"),
            ("crew", ""),
        ] {
            assert_eq!(inbox_path(Path::new("/session"), team, agent), None);
        }
    }
}
