//! Whether a teammate that calls its model is marked busy in its team's file, as
//! the disk holds it when the request reaches the model API.
//!
//! PROTOCOL.md §5's teammates: a member's `isIdle` in `team.json` is true only
//! while it has nothing to do, and a member woken by mail is marked busy before
//! its turn. A teammate left marked idle while it works hides its next idle from
//! everyone who watches the file (the lead's harness, on-idle callbacks), which
//! the runtime's own account cannot show: only the file does.

use std::path::Path;

use coord_runtime::team::TeamFile;
use coord_runtime::world::Disk;

/// The teams under `session_root` whose file lists one of `names` (a teammate's
/// names, ignoring ASCII case) as idle, each with the member's name as listed.
pub(super) fn idle_in_team_files(
    disk: &dyn Disk,
    session_root: &Path,
    names: &[&str],
) -> Vec<(String, String)> {
    let Ok(teams) = disk.list_dir(&session_root.join("teams")) else {
        return Vec::new();
    };
    teams
        .iter()
        .filter_map(|team| {
            let bytes = disk.read(&team.join("team.json")).ok()?;
            let file = serde_json::from_slice::<TeamFile>(&bytes).ok()?;
            let member = names.iter().find_map(|name| file.member(name))?;
            member
                .is_idle
                .then(|| (file.name.clone(), member.name.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::MemDisk;

    fn team_file(idle: bool) -> String {
        let member = |name: &str, id: &str, is_idle: bool| {
            serde_json::json!({
                "name": name,
                "agent_id": id,
                "color": "blue",
                "joined_at_unix_ms": 0,
                "is_idle": is_idle,
            })
        };
        serde_json::json!({
            "name": "crew",
            "lead": "team-lead",
            "created_at_unix_ms": 0,
            "joins_total": 2,
            "members": [member("team-lead", "a00000000", true), member("Reviewer", "a00000001", idle)],
        })
        .to_string()
    }

    #[test]
    fn a_member_the_file_lists_as_idle_is_named_with_its_team() {
        let disk = MemDisk::new();
        let root = Path::new("/session");
        disk.create_dir_all(&root.join("teams/crew"))
            .expect("team dir");
        let file = root.join("teams/crew/team.json");
        disk.replace_atomic(&file, team_file(true).as_bytes())
            .expect("team file");
        assert_eq!(
            idle_in_team_files(&disk, root, &["reviewer"]),
            vec![("crew".to_owned(), "Reviewer".to_owned())]
        );
        assert!(idle_in_team_files(&disk, root, &["editor"]).is_empty());
        disk.replace_atomic(&file, team_file(false).as_bytes())
            .expect("team file");
        assert!(idle_in_team_files(&disk, root, &["reviewer"]).is_empty());
    }
}
