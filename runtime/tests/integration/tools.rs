//! tools tests: the standard tools on a real temp directory, and the gate's surface,
//! lost-update, confinement and scratchpad checks.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

use coord_runtime::ipc::Scratchpad;
use coord_runtime::profile::Profile;
use coord_runtime::tools::{
    apply_edit, EditError, GlobPattern, Role, StandardTools, ToolCallContext, ToolGate, ToolSurface,
};
use coord_runtime::world::{
    BoxFuture, ChaChaEntropy, MemoryJournal, RealDisk, RealShell, SystemClock, ToolCall,
    ToolContext, ToolOutput, Tools,
};
use coord_runtime::{RuntimeEvent, World};

struct Fixture {
    dir: TempDir,
    journal: Arc<MemoryJournal>,
    world: World,
    scratchpad: Arc<Scratchpad>,
    tools: Arc<StandardTools>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(MemoryJournal::new());
        let world = World {
            clock: Arc::new(SystemClock::new()),
            entropy: Arc::new(ChaChaEntropy::from_seed(7)),
            disk: Arc::new(RealDisk::new()),
            journal: journal.clone(),
        };
        let scratchpad = Arc::new(Scratchpad::new(&world, dir.path().join("scratch")));
        let tools = Arc::new(StandardTools::new(
            world.clone(),
            Arc::new(RealShell),
            scratchpad.clone(),
        ));
        Fixture {
            dir,
            journal,
            world,
            scratchpad,
            tools,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    async fn run(&self, agent: &str, name: &str, input: Value) -> ToolOutput {
        let context = ToolContext {
            agent_id: agent.to_owned(),
            cwd: self.root().to_path_buf(),
        };
        self.tools.call(context, call(name, input)).await
    }

    fn gate(&self, profile: Profile) -> ToolGate {
        ToolGate::new(self.world.clone(), profile, self.tools.clone())
            .with_scratchpad(self.scratchpad.clone())
    }

    fn worker(&self, agent: &str, profile: Profile) -> ToolCallContext {
        ToolCallContext {
            agent_id: agent.to_owned(),
            surface: ToolSurface::for_role(Role::Worker, profile),
            cwd: self.root().to_path_buf(),
            worktree_root: None,
        }
    }

    fn refusals(&self) -> Vec<(String, String)> {
        self.journal
            .events()
            .into_iter()
            .filter_map(|event| match event {
                RuntimeEvent::ToolCallRefused { agent, tool, .. } => Some((agent, tool)),
                _ => None,
            })
            .collect()
    }

    fn modified_since_read(&self) -> Vec<(String, PathBuf, bool)> {
        self.journal
            .events()
            .into_iter()
            .filter_map(|event| match event {
                RuntimeEvent::WriteModifiedSinceRead {
                    agent,
                    path,
                    refused,
                } => Some((agent, path, refused)),
                _ => None,
            })
            .collect()
    }
}

fn call(name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: "toolu_test".to_owned(),
        name: name.to_owned(),
        input,
    }
}

fn read_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Inner tools that only count calls: proves a refused call never reaches them.
#[derive(Debug, Default)]
struct CountingTools {
    calls: Mutex<Vec<String>>,
}

impl Tools for CountingTools {
    fn call(&self, _context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        self.calls.lock().unwrap().push(call.name);
        Box::pin(async {
            ToolOutput {
                content: "ok".to_owned(),
                is_error: false,
            }
        })
    }
}

// ---------------------------------------------------------------- standard tools

#[tokio::test]
async fn read_returns_whole_files_and_line_ranges() {
    // Goal: Read returns the text, honours 1-based offset/limit and resolves relative
    // paths against cwd. Method: read a three-line file several ways.
    let fx = Fixture::new();
    std::fs::write(fx.path("f.txt"), "one\ntwo\nthree\n").unwrap();
    let whole = fx.run("a", "Read", json!({"file_path": "f.txt"})).await;
    assert!(!whole.is_error, "{}", whole.content);
    assert_eq!(whole.content, "one\ntwo\nthree\n");
    let absolute = fx
        .run("a", "read", json!({"file_path": fx.path("f.txt")}))
        .await;
    assert_eq!(absolute.content, whole.content, "names ignore ASCII case");
    let middle = fx
        .run(
            "a",
            "Read",
            json!({"file_path": "f.txt", "offset": 2, "limit": 1}),
        )
        .await;
    assert_eq!(middle.content, "two\n");
    let tail = fx
        .run(
            "a",
            "Read",
            json!({"file_path": "./sub/../f.txt", "offset": 3}),
        )
        .await;
    assert_eq!(tail.content, "three\n");
}

#[tokio::test]
async fn read_reports_missing_files_directories_symlinks_and_bad_offsets() {
    // Goal: every Read failure is an error output that says what is wrong. Method:
    // a missing file, a directory, a symlink (never followed), offset 0.
    let fx = Fixture::new();
    std::fs::write(fx.path("target"), "secret").unwrap();
    symlink(fx.path("target"), fx.path("link")).unwrap();
    std::fs::create_dir(fx.path("dir")).unwrap();
    let cases = [
        (json!({"file_path": "missing"}), "does not exist"),
        (json!({"file_path": "dir"}), "is a directory"),
        (json!({"file_path": "link"}), "symlink"),
        (json!({"file_path": "target", "offset": 0}), "1-based"),
    ];
    for (input, expected) in cases {
        let output = fx.run("a", "Read", input.clone()).await;
        assert!(output.is_error, "{input}: {}", output.content);
        assert!(
            output.content.contains(expected),
            "{input}: {:?} lacks {expected:?}",
            output.content
        );
    }
}

#[tokio::test]
async fn write_creates_parents_replaces_and_never_writes_through_symlinks() {
    // Goal: Write creates missing directories, replaces whole files, and refuses a
    // symlink or directory target. Method: write, rewrite, then a planted symlink.
    let fx = Fixture::new();
    let created = fx
        .run(
            "a",
            "Write",
            json!({"file_path": "new/dir/f.txt", "content": "v1"}),
        )
        .await;
    assert!(!created.is_error, "{}", created.content);
    assert_eq!(read_file(&fx.path("new/dir/f.txt")), "v1");
    let replaced = fx
        .run(
            "a",
            "Write",
            json!({"file_path": "new/dir/f.txt", "content": "v2"}),
        )
        .await;
    assert!(!replaced.is_error);
    assert_eq!(read_file(&fx.path("new/dir/f.txt")), "v2");

    std::fs::write(fx.path("target"), "secret").unwrap();
    symlink(fx.path("target"), fx.path("link")).unwrap();
    let through_link = fx
        .run(
            "a",
            "Write",
            json!({"file_path": "link", "content": "pwned"}),
        )
        .await;
    assert!(through_link.is_error);
    assert!(
        through_link.content.contains("symlink"),
        "{}",
        through_link.content
    );
    assert_eq!(read_file(&fx.path("target")), "secret");
    assert!(std::fs::symlink_metadata(fx.path("link"))
        .unwrap()
        .file_type()
        .is_symlink());

    let onto_dir = fx
        .run("a", "Write", json!({"file_path": "new", "content": "x"}))
        .await;
    assert!(onto_dir.is_error, "{}", onto_dir.content);
}

#[tokio::test]
async fn edit_replaces_exactly_one_occurrence_unless_replace_all() {
    // Goal: Edit's uniqueness rule and its typed failures. Method: edit a file with a
    // repeated word; check the file after every failure is unchanged.
    let fx = Fixture::new();
    let file = fx.path("f.rs");
    std::fs::write(&file, "let a = 1;\nlet b = 1;\nfn main() {}\n").unwrap();

    let ambiguous = fx
        .run(
            "a",
            "Edit",
            json!({"file_path": "f.rs", "old_string": "= 1", "new_string": "= 2"}),
        )
        .await;
    assert!(ambiguous.is_error);
    assert!(
        ambiguous.content.contains("occurs 2 times"),
        "{}",
        ambiguous.content
    );
    assert_eq!(read_file(&file), "let a = 1;\nlet b = 1;\nfn main() {}\n");

    for (old, new, expected) in [
        ("nowhere", "x", "not found"),
        ("main", "main", "identical"),
        ("", "x", "empty"),
    ] {
        let output = fx
            .run(
                "a",
                "Edit",
                json!({"file_path": "f.rs", "old_string": old, "new_string": new}),
            )
            .await;
        assert!(output.is_error);
        assert!(output.content.contains(expected), "{}", output.content);
    }
    assert_eq!(read_file(&file), "let a = 1;\nlet b = 1;\nfn main() {}\n");

    let once = fx
        .run(
            "a",
            "Edit",
            json!({"file_path": "f.rs", "old_string": "let a", "new_string": "let c"}),
        )
        .await;
    assert!(!once.is_error, "{}", once.content);
    let all = fx
        .run(
            "a",
            "Edit",
            json!({"file_path": "f.rs", "old_string": "= 1", "new_string": "= 2", "replace_all": true}),
        )
        .await;
    assert!(!all.is_error, "{}", all.content);
    assert_eq!(read_file(&file), "let c = 2;\nlet b = 2;\nfn main() {}\n");

    let missing = fx
        .run(
            "a",
            "Edit",
            json!({"file_path": "nope", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(missing.is_error);
    assert!(missing.content.contains("does not exist"));

    // The pure function gives the same typed answers.
    assert_eq!(
        apply_edit("x x", "x", "y", false),
        Err(EditError::Ambiguous {
            occurrences_count: 2
        })
    );
    assert_eq!(apply_edit("x x", "x", "y", true).unwrap(), "y y");
}

#[tokio::test]
async fn bad_input_and_unknown_tools_are_errors() {
    // Goal: strict input parsing. Method: unknown field, missing field, wrong type,
    // an unknown tool, and a known tool the standard tools do not provide.
    let fx = Fixture::new();
    let cases = [
        (
            "Read",
            json!({"file_path": "f", "bogus": 1}),
            "unknown field `bogus`",
        ),
        (
            "Write",
            json!({"file_path": "f"}),
            "missing field `content`",
        ),
        ("Bash", json!({"command": 5}), "invalid type"),
        ("Frobnicate", json!({}), "unknown tool"),
        ("Agent", json!({}), "not provided"),
    ];
    for (name, input, expected) in cases {
        let output = fx.run("a", name, input).await;
        assert!(output.is_error, "{name}");
        assert!(
            output.content.contains(expected),
            "{name}: {}",
            output.content
        );
    }
    assert!(!fx.path("f").exists(), "no bad call had an effect");
}

#[tokio::test]
async fn bash_runs_in_cwd_and_reports_exit_codes() {
    // Goal: Bash runs `sh -c` in the caller's cwd; a non-zero exit is an error that
    // names the code and keeps stdout and stderr. Method: pwd, then a failing command.
    let fx = Fixture::new();
    let pwd = fx.run("a", "Bash", json!({"command": "pwd"})).await;
    assert!(!pwd.is_error, "{}", pwd.content);
    assert_eq!(
        Path::new(pwd.content.trim()).canonicalize().unwrap(),
        fx.root().canonicalize().unwrap()
    );
    let failing = fx
        .run(
            "a",
            "Bash",
            json!({"command": "echo out; echo err >&2; exit 3", "description": "fail"}),
        )
        .await;
    assert!(failing.is_error);
    assert!(failing.content.contains("out"), "{}", failing.content);
    assert!(failing.content.contains("err"), "{}", failing.content);
    assert!(
        failing.content.contains("exit code 3"),
        "{}",
        failing.content
    );
}

#[tokio::test]
async fn bash_timeout_kills_the_command() {
    // Goal: timeout_ms bounds a command and is reported as an error; absurd timeouts
    // are refused. Method: `sleep 10` with 200 ms, timed with the wall clock.
    let fx = Fixture::new();
    let started = Instant::now();
    let slept = fx
        .run(
            "a",
            "Bash",
            json!({"command": "sleep 10", "timeout_ms": 200}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(slept.is_error);
    assert!(
        slept.content.contains("timed out after 200 ms"),
        "{}",
        slept.content
    );
    for timeout_ms in [0, 600_001] {
        let output = fx
            .run(
                "a",
                "Bash",
                json!({"command": "true", "timeout_ms": timeout_ms}),
            )
            .await;
        assert!(output.is_error, "{timeout_ms}");
        assert!(output.content.contains("timeout_ms"), "{}", output.content);
    }
    // Claude Code's field name is accepted as an alias.
    let aliased = fx
        .run("a", "Bash", json!({"command": "echo hi", "timeout": 5000}))
        .await;
    assert_eq!(
        aliased,
        ToolOutput {
            content: "hi\n".into(),
            is_error: false
        }
    );
}

fn make_tree(fx: &Fixture) {
    for (path, content) in [
        ("a.rs", "fn a() {}\n"),
        ("b.txt", "alpha\nbeta\n"),
        ("src/lib.rs", "// TODO: one\nfn lib() {}\n// todo lower\n"),
        ("src/deep/c.rs", "fn c() {} // TODO: two\n"),
        ("src/deep/d.txt", "TODO: three\n"),
        (".git/objects/x.rs", "// TODO: hidden in git\n"),
        ("bin.dat", "TODO\0binary"),
    ] {
        let full = fx.path(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
}

#[tokio::test]
async fn glob_matches_star_question_and_double_star_sorted() {
    // Goal: Glob's syntax and ordering. Method: a small tree (with a .git dir that
    // must be skipped) and patterns using *, ?, **, {a,b} and a path argument.
    let fx = Fixture::new();
    make_tree(&fx);
    let root = fx.root().display().to_string();
    let listed = |paths: &[&str]| {
        paths
            .iter()
            .map(|path| format!("{root}/{path}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cases: [(Value, Vec<&str>); 7] = [
        (
            json!({"pattern": "**/*.rs"}),
            vec!["a.rs", "src/deep/c.rs", "src/lib.rs"],
        ),
        (json!({"pattern": "*.rs"}), vec!["a.rs"]),
        (json!({"pattern": "src/*.rs"}), vec!["src/lib.rs"]),
        (
            json!({"pattern": "src/**"}),
            vec!["src/deep/c.rs", "src/deep/d.txt", "src/lib.rs"],
        ),
        (json!({"pattern": "?.*"}), vec!["a.rs", "b.txt"]),
        (
            json!({"pattern": "**/*.{txt,dat}"}),
            vec!["b.txt", "bin.dat", "src/deep/d.txt"],
        ),
        (
            json!({"pattern": "**/c.rs", "path": "src"}),
            vec!["src/deep/c.rs"],
        ),
    ];
    for (input, expected) in cases {
        let output = fx.run("a", "Glob", input.clone()).await;
        assert!(!output.is_error, "{input}: {}", output.content);
        assert_eq!(output.content, listed(&expected), "{input}");
    }
    let none = fx.run("a", "Glob", json!({"pattern": "**/*.py"})).await;
    assert_eq!(none.content, "No files found");
    let malformed = fx.run("a", "Glob", json!({"pattern": "[a"})).await;
    assert!(malformed.is_error);
    let not_dir = fx
        .run("a", "Glob", json!({"pattern": "*", "path": "a.rs"}))
        .await;
    assert!(not_dir.is_error);

    let pattern = GlobPattern::new("src/**/[!x]?.rs").unwrap();
    assert!(pattern.matches(Path::new("src/ab.rs")));
    assert!(pattern.matches(Path::new("src/a/b/ab.rs")));
    assert!(!pattern.matches(Path::new("src/xb.rs")));
    assert!(!pattern.matches(Path::new("../src/ab.rs")));
}

#[tokio::test]
async fn grep_reports_path_line_text_sorted() {
    // Goal: Grep's output format, ordering, glob filter, single-file path, and that it
    // skips .git and binary files. Method: search the small tree for TODO.
    let fx = Fixture::new();
    make_tree(&fx);
    let root = fx.root().display();
    let all = fx.run("a", "Grep", json!({"pattern": "TODO"})).await;
    assert!(!all.is_error, "{}", all.content);
    assert_eq!(
        all.content,
        format!(
            "{root}/src/deep/c.rs:1:fn c() {{}} // TODO: two\n\
             {root}/src/deep/d.txt:1:TODO: three\n\
             {root}/src/lib.rs:1:// TODO: one"
        )
    );
    let case_insensitive = fx
        .run(
            "a",
            "Grep",
            json!({"pattern": "(?i)todo", "path": "src/lib.rs"}),
        )
        .await;
    assert_eq!(
        case_insensitive.content,
        format!("{root}/src/lib.rs:1:// TODO: one\n{root}/src/lib.rs:3:// todo lower")
    );
    let filtered = fx
        .run("a", "Grep", json!({"pattern": "TODO", "glob": "*.txt"}))
        .await;
    assert_eq!(
        filtered.content,
        format!("{root}/src/deep/d.txt:1:TODO: three")
    );
    let none = fx.run("a", "Grep", json!({"pattern": "zzz"})).await;
    assert_eq!(
        none,
        ToolOutput {
            content: "No matches found".into(),
            is_error: false
        }
    );
    let bad = fx.run("a", "Grep", json!({"pattern": "(unclosed"})).await;
    assert!(bad.is_error);
    assert!(bad.content.contains("invalid regular expression"));
}

#[tokio::test]
async fn scratchpad_tools_read_write_and_validate_keys() {
    // Goal: the scratchpad tools share values between agents, validate keys, and
    // report an overwrite of an unread version (Report policy lives in Scratchpad).
    // Method: a writes, b reads, b overwrites a newer value it never read.
    let fx = Fixture::new();
    let absent = fx
        .run("b", "ScratchpadRead", json!({"key": "a/plan"}))
        .await;
    assert!(absent.is_error);
    assert!(absent.content.contains("does not exist"));
    let wrote = fx
        .run(
            "a",
            "ScratchpadWrite",
            json!({"key": "a/plan", "content": "step 1"}),
        )
        .await;
    assert!(!wrote.is_error, "{}", wrote.content);
    let read = fx
        .run("b", "ScratchpadRead", json!({"key": "a/plan"}))
        .await;
    assert_eq!(
        read,
        ToolOutput {
            content: "step 1".into(),
            is_error: false
        }
    );

    fx.run(
        "a",
        "ScratchpadWrite",
        json!({"key": "a/plan", "content": "step 2"}),
    )
    .await;
    let clobber = fx
        .run(
            "b",
            "ScratchpadWrite",
            json!({"key": "a/plan", "content": "mine"}),
        )
        .await;
    assert!(!clobber.is_error);
    assert!(
        clobber.content.contains("written by a"),
        "{}",
        clobber.content
    );
    assert!(fx.journal.events().iter().any(|event| matches!(
        event,
        RuntimeEvent::ScratchOverwritten { writer, previous_writer, .. }
            if writer == "b" && previous_writer == "a"
    )));

    for key in ["../escape", "a/../b", "/abs", "a b"] {
        let output = fx
            .run("a", "ScratchpadWrite", json!({"key": key, "content": "x"}))
            .await;
        assert!(output.is_error, "{key}");
        assert!(
            output.content.contains("scratch key"),
            "{key}: {}",
            output.content
        );
    }
    assert!(!fx.path("escape").exists());
}

// ---------------------------------------------------------------- the gate

#[tokio::test]
async fn gate_refuses_calls_outside_the_surface_before_any_effect() {
    // Goal: invariant 9. Method: a coordinator calls Read and Write, an unsupervised
    // fork calls Bash, anyone calls an unknown tool; the inner tools count calls, and
    // the real tools' disk must stay untouched.
    let fx = Fixture::new();
    let counting = Arc::new(CountingTools::default());
    let gate = ToolGate::new(fx.world.clone(), Profile::ClaudeCode, counting.clone());
    let coordinator = ToolCallContext {
        agent_id: "coordinator".into(),
        surface: ToolSurface::for_role(Role::Coordinator, Profile::ClaudeCode),
        cwd: fx.root().to_path_buf(),
        worktree_root: None,
    };
    let fork = ToolCallContext {
        agent_id: "a1".into(),
        surface: ToolSurface::for_role(Role::UnsupervisedFork, Profile::ClaudeCode),
        ..coordinator.clone()
    };
    let calls = [
        (&coordinator, call("Read", json!({"file_path": "f"}))),
        (
            &coordinator,
            call("Write", json!({"file_path": "f", "content": "x"})),
        ),
        (&fork, call("Bash", json!({"command": "touch marker"}))),
        (&fork, call("NoSuchTool", json!({}))),
    ];
    for (context, tool_call) in calls.clone() {
        let output = gate.call(context.clone(), tool_call.clone()).await;
        assert!(output.is_error, "{}", tool_call.name);
        assert!(output.content.starts_with("refused:"), "{}", output.content);
    }
    assert!(
        counting.calls.lock().unwrap().is_empty(),
        "nothing reached the tools"
    );
    assert_eq!(
        fx.refusals(),
        vec![
            ("coordinator".into(), "Read".into()),
            ("coordinator".into(), "Write".into()),
            ("a1".into(), "Bash".into()),
            ("a1".into(), "NoSuchTool".into()),
        ]
    );

    // The same refusals in front of the real tools leave the disk as it was.
    let real_gate = fx.gate(Profile::ClaudeCode);
    for (context, tool_call) in calls {
        assert!(real_gate.call(context.clone(), tool_call).await.is_error);
    }
    assert!(!fx.path("f").exists());
    assert!(!fx.path("marker").exists());

    // An allowed call goes through: the fork may read.
    std::fs::write(fx.path("f"), "hello").unwrap();
    let read = real_gate
        .call(fork.clone(), call("Read", json!({"file_path": "f"})))
        .await;
    assert_eq!(read.content, "hello");
}

#[tokio::test]
async fn gate_refuses_bad_input_with_an_event() {
    // Goal: the gate parses the standard tools' input itself, so bad input never
    // reaches the tools. Method: an unknown field, through a counting inner.
    let fx = Fixture::new();
    let counting = Arc::new(CountingTools::default());
    let gate = ToolGate::new(fx.world.clone(), Profile::Nexo, counting.clone());
    let output = gate
        .call(
            fx.worker("w1", Profile::Nexo),
            call(
                "Write",
                json!({"file_path": "f", "content": "x", "mode": 1}),
            ),
        )
        .await;
    assert!(output.is_error);
    assert!(
        output.content.contains("unknown field `mode`"),
        "{}",
        output.content
    );
    assert!(counting.calls.lock().unwrap().is_empty());
    assert_eq!(fx.refusals(), vec![("w1".into(), "Write".into())]);
}

#[tokio::test]
async fn write_modified_since_read_is_refused_or_reported_per_profile() {
    // Goal: invariant 6 for files. Method: per profile, worker A reads f, worker B
    // reads and writes f, then A writes f: refused in claude-code and hardened,
    // allowed in nexo, and journaled in all three.
    for profile in Profile::ALL {
        let fx = Fixture::new();
        let gate = fx.gate(profile);
        let file = fx.path("f.txt");
        std::fs::write(&file, "v0").unwrap();
        let (a, b) = (fx.worker("A", profile), fx.worker("B", profile));
        let read = |context: &ToolCallContext| {
            gate.call(context.clone(), call("Read", json!({"file_path": "f.txt"})))
        };
        let write = |context: &ToolCallContext, content: &str| {
            gate.call(
                context.clone(),
                call("Write", json!({"file_path": "f.txt", "content": content})),
            )
        };
        assert!(!read(&a).await.is_error);
        assert!(!read(&b).await.is_error);
        assert!(!write(&b, "from B").await.is_error, "{profile}");
        assert!(
            fx.modified_since_read().is_empty(),
            "B had read the version it replaced"
        );

        let from_a = write(&a, "from A").await;
        let refuses = profile != Profile::Nexo;
        assert_eq!(from_a.is_error, refuses, "{profile}: {}", from_a.content);
        assert_eq!(
            fx.modified_since_read(),
            vec![("A".into(), file.clone(), refuses)]
        );
        if refuses {
            assert!(from_a.content.contains("modified since A last read it"));
            assert_eq!(read_file(&file), "from B", "{profile}: B's update survives");
            // Reading again makes the write legitimate.
            assert!(!read(&a).await.is_error);
            assert!(!write(&a, "from A").await.is_error);
        }
        assert_eq!(read_file(&file), "from A");
    }
}

#[tokio::test]
async fn changes_made_outside_the_gate_count_as_modifications() {
    // Goal: the check compares against the disk, so a change by Bash (or another
    // process) is caught too. Method: A reads, B appends with Bash, A edits.
    let fx = Fixture::new();
    let gate = fx.gate(Profile::Hardened);
    std::fs::write(fx.path("f"), "one\n").unwrap();
    let a = fx.worker("A", Profile::Hardened);
    let b = fx.worker("B", Profile::Hardened);
    gate.call(a.clone(), call("Read", json!({"file_path": "f"})))
        .await;
    let appended = gate
        .call(b, call("Bash", json!({"command": "echo two >> f"})))
        .await;
    assert!(!appended.is_error, "{}", appended.content);
    let edit = gate
        .call(
            a,
            call(
                "Edit",
                json!({"file_path": "f", "old_string": "one", "new_string": "uno"}),
            ),
        )
        .await;
    assert!(edit.is_error, "{}", edit.content);
    assert_eq!(read_file(&fx.path("f")), "one\ntwo\n");
    assert_eq!(
        fx.modified_since_read(),
        vec![("A".into(), fx.path("f"), true)]
    );
}

#[tokio::test]
async fn an_ended_agent_is_forgotten_alone() {
    // Goal: forgetting an ended agent's reads forgets no other agent's, even one
    // whose id starts with the ended one's. Method: A and AB read f; A is
    // forgotten; AB may still write f, A's next write is blind and refused.
    let fx = Fixture::new();
    let gate = fx.gate(Profile::Hardened);
    std::fs::write(fx.path("f"), "v0").unwrap();
    let (a, ab) = (
        fx.worker("A", Profile::Hardened),
        fx.worker("AB", Profile::Hardened),
    );
    for context in [&a, &ab] {
        let read = gate
            .call(context.clone(), call("Read", json!({"file_path": "f"})))
            .await;
        assert!(!read.is_error, "{}", read.content);
    }
    gate.forget_agent("A");
    let write = |context: &ToolCallContext, content: &str| {
        gate.call(
            context.clone(),
            call("Write", json!({"file_path": "f", "content": content})),
        )
    };
    let from_ab = write(&ab, "from AB").await;
    assert!(!from_ab.is_error, "{}", from_ab.content);
    let from_a = write(&a, "from A").await;
    assert!(
        from_a.is_error,
        "A's read was forgotten: {}",
        from_a.content
    );
    assert_eq!(read_file(&fx.path("f")), "from AB");
}

#[tokio::test]
async fn a_write_over_a_directory_is_refused_for_what_it_is() {
    // Goal: a directory holds no version for the lost-update check to compare, so
    // the gate neither claims a change nor asks the agent to try again: the tool
    // refuses the write for what the path is. Method: hardened and claude-code
    // gates, a Write to a directory, then the directory still there.
    for profile in [Profile::Hardened, Profile::ClaudeCode] {
        let fx = Fixture::new();
        let gate = fx.gate(profile);
        std::fs::create_dir_all(fx.path("notes")).unwrap();
        let written = gate
            .call(
                fx.worker("A", profile),
                call("Write", json!({"file_path": "notes", "content": "x"})),
            )
            .await;
        assert!(written.is_error, "{profile:?}");
        assert!(
            written.content.contains("exists and is not a regular file"),
            "{profile:?}: {}",
            written.content
        );
        assert!(fx.modified_since_read().is_empty(), "{profile:?}");
        assert!(fx.path("notes").is_dir());
    }
}

#[tokio::test]
async fn blind_writes_to_existing_files_are_caught_but_new_files_are_fine() {
    // Goal: a Write or Edit of an existing file the agent never read is a potential
    // lost update; creating a file is not; an agent's own write counts as seen.
    // Method: claude-code gate; new file, rewrite, blind write, blind edit.
    let fx = Fixture::new();
    let gate = fx.gate(Profile::ClaudeCode);
    let a = fx.worker("A", Profile::ClaudeCode);
    let write = |path: &str, content: &str| {
        gate.call(
            a.clone(),
            call("Write", json!({"file_path": path, "content": content})),
        )
    };
    assert!(!write("new.txt", "1").await.is_error);
    assert!(
        !write("new.txt", "2").await.is_error,
        "its own write counts as read"
    );
    assert!(fx.modified_since_read().is_empty());

    std::fs::write(fx.path("theirs.txt"), "precious").unwrap();
    let blind = write("theirs.txt", "oops").await;
    assert!(blind.is_error);
    assert!(
        blind.content.contains("has not read it"),
        "{}",
        blind.content
    );
    let blind_edit = gate
        .call(
            a.clone(),
            call(
                "Edit",
                json!({"file_path": "theirs.txt", "old_string": "precious", "new_string": "x"}),
            ),
        )
        .await;
    assert!(blind_edit.is_error);
    assert_eq!(read_file(&fx.path("theirs.txt")), "precious");
    assert_eq!(
        fx.modified_since_read(),
        vec![
            ("A".into(), fx.path("theirs.txt"), true),
            ("A".into(), fx.path("theirs.txt"), true),
        ]
    );

    // An agent that saw the file absent must not clobber a file created since.
    let absent = gate
        .call(a.clone(), call("Read", json!({"file_path": "later.txt"})))
        .await;
    assert!(absent.is_error);
    std::fs::write(fx.path("later.txt"), "someone else's").unwrap();
    assert!(write("later.txt", "mine").await.is_error);
    assert_eq!(read_file(&fx.path("later.txt")), "someone else's");
}

#[tokio::test]
async fn worktree_writes_stay_inside_the_worktree() {
    // Goal: invariant 7. Method: a worker with a worktree root writes inside (fine),
    // then via `..`, an absolute path outside, and a symlinked directory inside the
    // worktree pointing out: all refused with an event and no effect.
    let fx = Fixture::new();
    let gate = fx.gate(Profile::Nexo);
    let worktree = fx.path("repo/.claude/worktrees/w1");
    std::fs::create_dir_all(&worktree).unwrap();
    std::fs::create_dir_all(fx.path("outside")).unwrap();
    symlink(fx.path("outside"), worktree.join("escape")).unwrap();
    let context = ToolCallContext {
        agent_id: "w1".into(),
        surface: ToolSurface::for_role(Role::Worker, Profile::Nexo),
        cwd: worktree.clone(),
        worktree_root: Some(worktree.clone()),
    };
    let write = |path: String| {
        gate.call(
            context.clone(),
            call("Write", json!({"file_path": path, "content": "x"})),
        )
    };
    assert!(!write("src/inside.rs".into()).await.is_error);
    assert_eq!(read_file(&worktree.join("src/inside.rs")), "x");

    let outside = fx.path("outside/f");
    for path in [
        "../../../outside/f".to_owned(),
        outside.display().to_string(),
        "escape/f".to_owned(),
        "src/../../w1-sibling/f".to_owned(),
    ] {
        let output = write(path.clone()).await;
        assert!(output.is_error, "{path}");
        assert!(
            output.content.contains("outside the worktree") || output.content.contains("symlink"),
            "{path}: {}",
            output.content
        );
    }
    let edit = gate
        .call(
            context.clone(),
            call(
                "Edit",
                json!({"file_path": outside, "old_string": "a", "new_string": "b"}),
            ),
        )
        .await;
    assert!(edit.is_error);
    assert!(!outside.exists(), "nothing was written outside");
    assert_eq!(fx.refusals().len(), 5);
    use coord_runtime::probe::Probe;
    let probes = probes_reached(&fx.journal);
    assert_eq!(
        probes
            .iter()
            .filter(|probe| **probe == Probe::WriteSymlinkRefused)
            .count(),
        1,
        "escape/f is refused for its symlink: {probes:?}"
    );
    assert!(fx.modified_since_read().is_empty());
}

#[tokio::test]
async fn hardened_refuses_scratch_overwrites_of_unread_versions() {
    // Goal: invariant 6 for the scratchpad. Method: A writes a key, B writes the
    // same key without reading it: refused in hardened (A's value kept), reported
    // and let through in claude-code; after reading, B may write.
    for profile in [Profile::Hardened, Profile::ClaudeCode] {
        let fx = Fixture::new();
        let gate = fx.gate(profile);
        let (a, b) = (fx.worker("A", profile), fx.worker("B", profile));
        let write = |context: &ToolCallContext, content: &str| {
            gate.call(
                context.clone(),
                call(
                    "ScratchpadWrite",
                    json!({"key": "team/plan", "content": content}),
                ),
            )
        };
        assert!(!write(&a, "A's plan").await.is_error);
        let clobber = write(&b, "B's plan").await;
        let scratch_file = fx.path("scratch/team/plan");
        let overwritten = fx
            .journal
            .events()
            .iter()
            .any(|event| matches!(event, RuntimeEvent::ScratchOverwritten { .. }));
        if profile == Profile::Hardened {
            assert!(clobber.is_error, "{}", clobber.content);
            assert!(clobber.content.contains("ScratchpadRead it first"));
            assert_eq!(read_file(&scratch_file), "A's plan");
            assert_eq!(fx.refusals(), vec![("B".into(), "ScratchpadWrite".into())]);
            assert!(!overwritten);
            let read = gate
                .call(
                    b.clone(),
                    call("ScratchpadRead", json!({"key": "team/plan"})),
                )
                .await;
            assert_eq!(read.content, "A's plan");
            assert!(!write(&b, "B's plan").await.is_error);
        } else {
            assert!(!clobber.is_error, "{}", clobber.content);
            assert!(overwritten, "the scratchpad reports the lost update");
            assert!(fx.refusals().is_empty());
        }
        assert_eq!(read_file(&scratch_file), "B's plan");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_through_one_gate_never_lose_an_update_silently() {
    // Goal: check and write are atomic per path. Method: 8 workers each read f, then
    // all write concurrently under claude-code: exactly one write may succeed, and
    // every other one is refused with an event.
    let fx = Fixture::new();
    let gate = Arc::new(fx.gate(Profile::ClaudeCode));
    std::fs::write(fx.path("f"), "v0").unwrap();
    let workers: Vec<ToolCallContext> = (0..8)
        .map(|index| fx.worker(&format!("w{index}"), Profile::ClaudeCode))
        .collect();
    for worker in &workers {
        gate.call(worker.clone(), call("Read", json!({"file_path": "f"})))
            .await;
    }
    let mut handles = Vec::new();
    for worker in workers {
        let gate = gate.clone();
        handles.push(tokio::spawn(async move {
            let content = format!("from {}", worker.agent_id);
            gate.call(
                worker,
                call("Write", json!({"file_path": "f", "content": content})),
            )
            .await
        }));
    }
    let mut successes = 0;
    for handle in handles {
        if !handle.await.unwrap().is_error {
            successes += 1;
        }
    }
    assert_eq!(successes, 1);
    assert_eq!(fx.modified_since_read().len(), 7);
}

/// The probes `journal` marked, in order.
fn probes_reached(journal: &MemoryJournal) -> Vec<coord_runtime::probe::Probe> {
    journal
        .events()
        .into_iter()
        .filter_map(|event| match event {
            RuntimeEvent::ProbeReached { probe } => Some(probe),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn writes_without_a_worktree_stay_inside_the_session_and_workspace_roots() {
    // Goal: invariant 7 for agents without a worktree. Method: a gate whose roots are
    // a workspace and a session directory; a worker working in the workspace writes
    // inside both (fine), then by absolute path elsewhere, by `..` out of the
    // workspace, and through a symlinked directory inside it: each refused with its
    // probe, and nothing lands outside.
    use coord_runtime::probe::Probe;
    let fx = Fixture::new();
    let workspace = fx.path("work");
    let session = fx.path("session");
    for dir in [&workspace, &session, &fx.path("outside")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    symlink(fx.path("outside"), workspace.join("vendor")).unwrap();
    let gate = fx
        .gate(Profile::Hardened)
        .with_writable_roots([session.clone(), workspace.clone()]);
    let context = ToolCallContext {
        agent_id: "a1".into(),
        surface: ToolSurface::for_role(Role::Worker, Profile::Hardened),
        cwd: workspace.clone(),
        worktree_root: None,
    };
    let write = |path: String| {
        gate.call(
            context.clone(),
            call("Write", json!({"file_path": path, "content": "x"})),
        )
    };
    assert!(!write("src/inside.rs".into()).await.is_error);
    assert!(
        !write(session.join("notes.md").display().to_string())
            .await
            .is_error
    );
    assert_eq!(read_file(&workspace.join("src/inside.rs")), "x");
    assert_eq!(read_file(&session.join("notes.md")), "x");
    assert!(probes_reached(&fx.journal).is_empty());

    let outside = fx.path("outside/f");
    for (path, probe, says) in [
        (
            outside.display().to_string(),
            Probe::RootsEscapeRefused,
            "outside the session and workspace roots",
        ),
        (
            "../outside/f".to_owned(),
            Probe::RootsEscapeRefused,
            "outside the session and workspace roots",
        ),
        (
            "src/../../outside/f".to_owned(),
            Probe::RootsEscapeRefused,
            "outside the session and workspace roots",
        ),
        (
            "vendor/f".to_owned(),
            Probe::WriteSymlinkRefused,
            "passes through the symlink",
        ),
    ] {
        let output = write(path.clone()).await;
        assert!(output.is_error, "{path}");
        assert!(output.content.contains(says), "{path}: {}", output.content);
        assert_eq!(probes_reached(&fx.journal).last(), Some(&probe), "{path}");
    }
    assert!(!outside.exists(), "nothing was written outside");
    assert_eq!(fx.refusals().len(), 4);
}

#[tokio::test]
async fn a_relative_workspace_root_admits_relative_targets_only() {
    // Goal: a session left at its default working directory `.` cannot be escaped
    // by an absolute path. Method: roots `.` alone; an absolute target is refused
    // before any effect, and a relative one reaches the tools.
    let fx = Fixture::new();
    let inner = Arc::new(CountingTools::default());
    let gate = ToolGate::new(fx.world.clone(), Profile::Hardened, inner.clone())
        .with_writable_roots([PathBuf::from(".")]);
    let context = ToolCallContext {
        agent_id: "a1".into(),
        surface: ToolSurface::for_role(Role::Worker, Profile::Hardened),
        cwd: PathBuf::from("."),
        worktree_root: None,
    };
    let write = |path: &str| {
        gate.call(
            context.clone(),
            call("Write", json!({"file_path": path, "content": "x"})),
        )
    };
    assert!(
        write(&fx.path("elsewhere").display().to_string())
            .await
            .is_error
    );
    assert!(write("../elsewhere").await.is_error);
    assert!(inner.calls.lock().unwrap().is_empty());
    // A relative target inside `.` is passed on (its parent does not exist here, so
    // nothing is walked on the real disk).
    assert!(!write("coordsim-gate-test-missing-dir/f").await.is_error);
    assert_eq!(inner.calls.lock().unwrap().len(), 1);
}
