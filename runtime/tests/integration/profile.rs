//! Every behaviour where the profiles differ (docs/profiles.md), exercised under all
//! three profiles. Rows covered in their own area's tests name them in the doc.

use std::sync::Arc;

use coord_runtime::envelope::{render, Envelope, EnvelopeStatus};
use coord_runtime::ipc::lock_path_for;
use coord_runtime::ipc::{LockError, LockGuard, LockPolicy, Mailbox, MailboxConfig, MailboxError};
use coord_runtime::profile::{Profile, PromptStyle, ScratchOverwritePolicy};
use coord_runtime::tools::{Role, ToolName, ToolSurface};
use coord_runtime::world::{ChaChaEntropy, ManualClock, MemoryJournal, RealDisk};
use coord_runtime::World;

fn manual_world() -> World {
    World {
        clock: Arc::new(ManualClock::new(1_767_225_600_000)),
        entropy: Arc::new(ChaChaEntropy::from_seed(11)),
        disk: Arc::new(RealDisk::new()),
        journal: Arc::new(MemoryJournal::new()),
    }
}

#[test]
fn profile_names_round_trip() {
    // Goal: profiles are named as the docs and the CLI name them.
    for profile in Profile::ALL {
        assert_eq!(profile.as_str().parse::<Profile>(), Ok(profile));
    }
    assert!("claude".parse::<Profile>().is_err());
}

#[test]
fn a_deadline_expiry_is_timeout_only_on_the_nexo_wire() {
    // Goal: row "deadline expiry on the wire": render the same Timeout envelope under
    // each profile's dialect.
    let envelope = Envelope {
        task_id: "a00000001".into(),
        tool_use_id: None,
        output_file: None,
        status: EnvelopeStatus::Timeout,
        summary: "s".into(),
        result: None,
        usage: None,
        worktree: None,
        note: None,
        extra: Default::default(),
    };
    for (profile, wire) in [
        (Profile::ClaudeCode, "killed"),
        (Profile::Nexo, "timeout"),
        (Profile::Hardened, "killed"),
    ] {
        let xml = render(&envelope, profile.dialect());
        assert!(
            xml.contains(&format!("<status>{wire}</status>")),
            "{profile}: {xml}"
        );
    }
}

#[tokio::test]
async fn only_claude_code_reads_a_mailbox_without_its_lock() {
    // Goal: row "mailbox writes and reads": with the inbox lock held by another
    // writer, claude-code's unlocked read succeeds while nexo and hardened wait for
    // the lock and report contention; claude-code's writes are in place.
    let dir = tempfile::tempdir().unwrap();
    for profile in Profile::ALL {
        let world = manual_world();
        let inbox = dir.path().join(format!("{profile}.json"));
        let mut config = MailboxConfig::with_write_mode(profile.mailbox_write_mode());
        config.lock = LockPolicy::default();
        let mailbox = Mailbox::new(&world, &inbox, config);
        mailbox
            .append(coord_runtime::ipc::MailboxMessage::new(
                &world, "lead", "hello",
            ))
            .await
            .unwrap();
        let held = LockGuard::acquire(
            &world,
            &lock_path_for(&inbox),
            "other",
            &LockPolicy::default(),
        )
        .await
        .unwrap();
        let read = mailbox.read_all().await;
        match profile {
            Profile::ClaudeCode => assert_eq!(read.unwrap().len(), 1),
            Profile::Nexo | Profile::Hardened => assert!(matches!(
                read,
                Err(MailboxError::Lock(LockError::Contended { .. }))
            )),
        }
        held.release().unwrap();
    }
}

#[test]
fn coordinator_tool_surfaces_differ_between_claude_code_and_nexo() {
    // Goal: row "coordinator tools": the published tool lists, and no file or shell
    // tool for any coordinator.
    use ToolName::*;
    let cc: Vec<ToolName> = ToolSurface::for_role(Role::Coordinator, Profile::ClaudeCode)
        .tools()
        .collect();
    assert_eq!(cc, [Agent, SendMessage, TaskStop, SyntheticOutput]);
    assert_eq!(
        ToolSurface::for_role(Role::Coordinator, Profile::Hardened),
        ToolSurface::for_role(Role::Coordinator, Profile::ClaudeCode)
    );
    let nexo: Vec<ToolName> = ToolSurface::for_role(Role::Coordinator, Profile::Nexo)
        .tools()
        .collect();
    assert_eq!(
        nexo,
        [
            TaskStop,
            TeamCreate,
            TeamDelete,
            SendToPeer,
            ListPeers,
            SendMessageToWorker,
            TaskList,
            TaskGet,
            TodoWrite
        ]
    );
    for profile in Profile::ALL {
        let surface = ToolSurface::for_role(Role::Coordinator, profile);
        for tool in [Read, Write, Edit, Bash, Glob, Grep] {
            assert!(!surface.allows(tool), "{profile} coordinator has {tool}");
        }
        let worker = ToolSurface::for_role(Role::Worker, profile);
        for tool in [TeamCreate, TeamDelete, SendMessage, SyntheticOutput] {
            assert!(!worker.allows(tool), "{profile} worker has {tool}");
        }
    }
}

#[test]
fn the_profile_table_matches_the_documented_values() {
    // Goal: the one-word answers of docs/profiles.md, so the doc cannot drift from the
    // code; each row's behaviour is exercised by the test the doc names.
    use Profile::*;
    let rows: [(
        Profile,
        PromptStyle,
        bool,
        ScratchOverwritePolicy,
        bool,
        bool,
    ); 3] = [
        (
            ClaudeCode,
            PromptStyle::ReplaceChain,
            true,
            ScratchOverwritePolicy::Report,
            false,
            false,
        ),
        (
            Nexo,
            PromptStyle::PersonaPrepend,
            false,
            ScratchOverwritePolicy::Report,
            true,
            false,
        ),
        (
            Hardened,
            PromptStyle::ReplaceChain,
            true,
            ScratchOverwritePolicy::Refuse,
            false,
            true,
        ),
    ];
    // The auto-compact row: its threshold, or none.
    let compaction = [
        (ClaudeCode, Some(167_000)),
        (Nexo, None),
        (Hardened, Some(167_000)),
    ];
    for (profile, threshold_tokens) in compaction {
        assert_eq!(
            profile.compaction().map(|policy| policy.threshold_tokens()),
            threshold_tokens,
            "{profile}"
        );
    }
    for (profile, prompt, refuses_stale_write, scratch, fork_first_line, refuses_unknown) in rows {
        assert_eq!(profile.prompt_style(), prompt, "{profile}");
        assert_eq!(
            profile.refuses_write_modified_since_read(),
            refuses_stale_write,
            "{profile}"
        );
        assert_eq!(profile.scratch_overwrite_policy(), scratch, "{profile}");
        assert_eq!(
            profile.summarizes_fork_by_first_line(),
            fork_first_line,
            "{profile}"
        );
        assert_eq!(
            profile.refuses_unknown_recipient(),
            refuses_unknown,
            "{profile}"
        );
    }
}
