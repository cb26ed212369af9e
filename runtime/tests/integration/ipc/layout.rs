//! The session layout: where each bus file lives, and names that may not become paths.

use std::path::Path;

use coord_runtime::ipc::{NameError, SessionLayout};
use coord_runtime::task::TaskId;

#[test]
fn layout_names_the_protocol_paths() {
    // Goal: paths match PROTOCOL.md section 4. Method: compare each layout path.
    let root = Path::new("/tmp/session-1");
    let layout = SessionLayout::new(root);
    let id = TaskId::parse("a3kx9zq2").expect("task id");
    assert_eq!(layout.root(), root);
    assert_eq!(layout.tasks_dir(), root.join("tasks"));
    assert_eq!(layout.task_output(&id), root.join("tasks/a3kx9zq2.output"));
    assert_eq!(
        layout.inboxes_dir("team-1").expect("dir"),
        root.join("teams/team-1/inboxes")
    );
    assert_eq!(
        layout.inbox("team-1", "alice").expect("inbox"),
        root.join("teams/team-1/inboxes/alice.json")
    );
    assert_eq!(layout.scratch_dir(), root.join("scratch"));
}

#[test]
fn layout_refuses_names_that_leave_their_directory() {
    // Goal: no name escapes its directory. Method: bad team/agent names, exact NameErrors.
    let layout = SessionLayout::new("/tmp/session-1");
    let cases = [
        (
            "../x",
            "a",
            NameError::BadCharacter {
                what: "team name",
                name: "../x".into(),
                character: '/',
            },
        ),
        (
            "t",
            "a/b",
            NameError::BadCharacter {
                what: "agent name",
                name: "a/b".into(),
                character: '/',
            },
        ),
        (
            "..",
            "a",
            NameError::DotSegment {
                what: "team name",
                name: "..".into(),
            },
        ),
        (
            "t",
            ".",
            NameError::DotSegment {
                what: "agent name",
                name: ".".into(),
            },
        ),
        ("t", "", NameError::Empty { what: "agent name" }),
        (
            "t",
            "bob\\..",
            NameError::BadCharacter {
                what: "agent name",
                name: "bob\\..".into(),
                character: '\\',
            },
        ),
    ];
    for (team, agent, expected) in cases {
        assert_eq!(
            layout.inbox(team, agent),
            Err(expected),
            "team {team:?} agent {agent:?}"
        );
    }
    assert!(matches!(
        layout.inbox("t", &"a".repeat(65)),
        Err(NameError::TooLong { .. })
    ));
}
