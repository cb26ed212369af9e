//! isolation tests: worktree slugs, path confinement, and the worktree lifecycle
//! with real git in temp repositories.

use std::path::{Path, PathBuf};
use std::process::Command;

use coord_runtime::isolation::{
    contains, finish, normalize, prepare, SlugError, WorktreeOutcome, WorktreeSlug,
};
use coord_runtime::world::{GitVcs, MemoryJournal, Vcs};
use coord_runtime::RuntimeEvent;

/// Runs git in `dir` with a fixed identity and no signing, whatever the user's
/// global config says; panics with git's stderr on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A temp repository with one commit on `main`, its identity set locally.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.name", "Test"]);
    git(
        dir.path(),
        &["config", "user.email", "test@example.invalid"],
    );
    git(dir.path(), &["config", "commit.gpgsign", "false"]);
    std::fs::write(dir.path().join("README"), "hello\n").unwrap();
    git(dir.path(), &["add", "README"]);
    git(dir.path(), &["commit", "-q", "-m", "initial"]);
    dir
}

fn branch_exists(repo: &Path, branch: &str) -> bool {
    !git(repo, &["branch", "--list", branch]).trim().is_empty()
}

fn slug(text: &str) -> WorktreeSlug {
    WorktreeSlug::parse(text).unwrap()
}

#[test]
fn slugs_accept_safe_segments_and_reject_everything_else() {
    // Goal: PROTOCOL §2's slug rule with typed errors. Method: accept and reject lists.
    let sixty_four = "a".repeat(64);
    for good in [
        "fix-auth",
        "a",
        "v1.2_rc",
        "feature/auth",
        "a/b/c",
        "A.b-C_9",
        &sixty_four,
    ] {
        assert_eq!(WorktreeSlug::parse(good).unwrap().as_str(), good);
    }
    let long = "a".repeat(65);
    let cases: Vec<(&str, SlugError)> = vec![
        ("", SlugError::Empty),
        (
            &long,
            SlugError::TooLong {
                slug: long.clone(),
                chars_count: 65,
            },
        ),
        ("..", SlugError::DotSegment { slug: "..".into() }),
        (".", SlugError::DotSegment { slug: ".".into() }),
        (
            "a/../b",
            SlugError::DotSegment {
                slug: "a/../b".into(),
            },
        ),
        (
            "a/./b",
            SlugError::DotSegment {
                slug: "a/./b".into(),
            },
        ),
        (
            "a..b",
            SlugError::DotSegment {
                slug: "a..b".into(),
            },
        ),
        (
            "a//b",
            SlugError::EmptySegment {
                slug: "a//b".into(),
            },
        ),
        (
            "/abs",
            SlugError::EmptySegment {
                slug: "/abs".into(),
            },
        ),
        (
            "trailing/",
            SlugError::EmptySegment {
                slug: "trailing/".into(),
            },
        ),
        (
            "has space",
            SlugError::BadCharacter {
                slug: "has space".into(),
                character: ' ',
            },
        ),
        (
            "a\\b",
            SlugError::BadCharacter {
                slug: "a\\b".into(),
                character: '\\',
            },
        ),
        (
            "a+b",
            SlugError::BadCharacter {
                slug: "a+b".into(),
                character: '+',
            },
        ),
        (
            "é",
            SlugError::BadCharacter {
                slug: "é".into(),
                character: 'é',
            },
        ),
        (
            "x.lock",
            SlugError::BadEnding {
                slug: "x.lock".into(),
            },
        ),
        ("x.", SlugError::BadEnding { slug: "x.".into() }),
    ];
    for (bad, expected) in cases {
        assert_eq!(WorktreeSlug::parse(bad), Err(expected), "{bad:?}");
    }
}

#[test]
fn slugs_map_to_one_directory_and_one_branch() {
    // Goal: `/` never nests worktrees or refs. Method: check the mapping of a
    // nested slug and a plain one.
    let nested = slug("feature/auth");
    assert_eq!(nested.dir_name(), "feature+auth");
    assert_eq!(nested.branch_name(), "worktree-feature+auth");
    assert_eq!(
        nested.relative_path(),
        PathBuf::from(".claude/worktrees/feature+auth")
    );
    let plain = slug("fix-1");
    assert_eq!(plain.branch_name(), "worktree-fix-1");
    assert_eq!(
        plain.relative_path(),
        PathBuf::from(".claude/worktrees/fix-1")
    );
}

#[test]
fn contains_is_lexical_and_refuses_escapes() {
    // Goal: the confinement check behind invariant 7. Method: paths inside, outside,
    // and escaping through `..`, absolute and relative.
    let root = Path::new("/repo/.claude/worktrees/w1");
    let inside = [
        "/repo/.claude/worktrees/w1",
        "/repo/.claude/worktrees/w1/src/a.rs",
        "/repo/.claude/worktrees/w1/./src/../b.rs",
        "src/a.rs",
        "./a/../b",
    ];
    for path in inside {
        assert!(contains(root, Path::new(path)), "{path}");
    }
    let outside = [
        "/repo/.claude/worktrees/w1/../w2/a.rs",
        "/repo/.claude/worktrees/w10/a.rs",
        "/repo/a.rs",
        "../w2/a.rs",
        "src/../../w1-evil",
        "/../../etc/passwd",
        "/etc/passwd",
    ];
    for path in outside {
        assert!(!contains(root, Path::new(path)), "{path}");
    }
    assert_eq!(
        normalize(Path::new("/a/./b/../c")),
        Some(PathBuf::from("/a/c"))
    );
    assert_eq!(normalize(Path::new("a/../..")), None);
}

#[test]
fn clean_worktree_is_removed_with_its_branch() {
    // Goal: no changes → worktree and branch removed, WorktreeRemoved journaled.
    // Method: prepare, check git sees it, finish without touching it.
    let repo = repo();
    let vcs = GitVcs::new();
    let journal = MemoryJournal::new();
    let worktree = prepare(&vcs, repo.path(), &slug("clean")).unwrap();
    assert_eq!(worktree.path, repo.path().join(".claude/worktrees/clean"));
    assert_eq!(worktree.branch, "worktree-clean");
    assert!(worktree.path.join("README").is_file());
    assert!(branch_exists(repo.path(), "worktree-clean"));
    assert!(!vcs.has_changes(&worktree).unwrap());

    let outcome = finish(&vcs, repo.path(), &worktree, &journal).unwrap();
    assert_eq!(outcome, WorktreeOutcome::Removed);
    assert!(!worktree.path.exists());
    assert!(!branch_exists(repo.path(), "worktree-clean"));
    assert!(!git(repo.path(), &["worktree", "list"]).contains("clean"));
    assert_eq!(
        journal.events(),
        vec![RuntimeEvent::WorktreeRemoved {
            path: worktree.path.clone()
        }]
    );
}

#[test]
fn worktree_with_a_modified_file_is_kept() {
    // Goal: uncommitted changes → kept with path and branch, WorktreeKept journaled.
    // Method: modify a tracked file in the worktree, then finish.
    let repo = repo();
    let vcs = GitVcs::new();
    let journal = MemoryJournal::new();
    let worktree = prepare(&vcs, repo.path(), &slug("edit")).unwrap();
    std::fs::write(worktree.path.join("README"), "changed\n").unwrap();
    let outcome = finish(&vcs, repo.path(), &worktree, &journal).unwrap();
    assert_eq!(
        outcome,
        WorktreeOutcome::Kept {
            path: worktree.path.clone(),
            branch: "worktree-edit".into()
        }
    );
    assert!(worktree.path.join("README").is_file());
    assert!(branch_exists(repo.path(), "worktree-edit"));
    assert_eq!(
        journal.events(),
        vec![RuntimeEvent::WorktreeKept {
            path: worktree.path.clone(),
            branch: "worktree-edit".into()
        }]
    );
}

#[test]
fn worktree_with_a_commit_is_kept_even_when_clean() {
    // Goal: commits beyond the base count as changes. Method: commit in the
    // worktree so its status is clean, then finish.
    let repo = repo();
    let vcs = GitVcs::new();
    let journal = MemoryJournal::new();
    let worktree = prepare(&vcs, repo.path(), &slug("feature/commit")).unwrap();
    assert_eq!(
        worktree.path,
        repo.path().join(".claude/worktrees/feature+commit")
    );
    std::fs::write(worktree.path.join("new.rs"), "fn main() {}\n").unwrap();
    git(&worktree.path, &["add", "new.rs"]);
    git(&worktree.path, &["commit", "-q", "-m", "work"]);
    assert!(git(&worktree.path, &["status", "--porcelain"])
        .trim()
        .is_empty());
    assert!(vcs.has_changes(&worktree).unwrap());
    let outcome = finish(&vcs, repo.path(), &worktree, &journal).unwrap();
    assert_eq!(
        outcome,
        WorktreeOutcome::Kept {
            path: worktree.path.clone(),
            branch: "worktree-feature+commit".into()
        }
    );
    assert!(branch_exists(repo.path(), "worktree-feature+commit"));
}

#[test]
fn has_changes_sees_untracked_files_and_ignores_the_repo_moving_on() {
    // Goal: untracked files are changes; new commits on the main branch are not the
    // worktree's changes. Method: commit on main, check; add an untracked file, check.
    let repo = repo();
    let vcs = GitVcs::new();
    let worktree = prepare(&vcs, repo.path(), &slug("untracked")).unwrap();
    std::fs::write(repo.path().join("later"), "x").unwrap();
    git(repo.path(), &["add", "later"]);
    git(repo.path(), &["commit", "-q", "-m", "main moves on"]);
    assert!(
        !vcs.has_changes(&worktree).unwrap(),
        "main's commit is not ours"
    );

    std::fs::create_dir_all(worktree.path.join("deep/dir")).unwrap();
    std::fs::write(worktree.path.join("deep/dir/new.txt"), "x").unwrap();
    assert!(vcs.has_changes(&worktree).unwrap());
    // A kept worktree can still be removed explicitly, branch included.
    vcs.remove_worktree(repo.path(), &worktree).unwrap();
    assert!(!worktree.path.exists());
    assert!(!branch_exists(repo.path(), "worktree-untracked"));
}

#[test]
fn git_failures_and_bad_slugs_are_io_errors_with_the_reason() {
    // Goal: bad slugs are refused before git runs; git's own failures carry its
    // stderr. Method: a `..` slug, a duplicate slug, and a directory that is no repo.
    let repo = repo();
    let vcs = GitVcs::new();
    let bad = vcs.create_worktree(repo.path(), "../escape").unwrap_err();
    assert_eq!(bad.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!repo.path().join(".claude").exists());

    vcs.create_worktree(repo.path(), "twice").unwrap();
    let duplicate = vcs.create_worktree(repo.path(), "twice").unwrap_err();
    let message = duplicate.to_string();
    assert!(message.contains("git worktree add"), "{message}");
    assert!(message.contains("worktree-twice"), "{message}");

    let not_a_repo = tempfile::tempdir().unwrap();
    let error = vcs.create_worktree(not_a_repo.path(), "x").unwrap_err();
    assert!(
        error
            .to_string()
            .to_lowercase()
            .contains("not a git repository"),
        "{error}"
    );
}
