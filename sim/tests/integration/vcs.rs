//! SimVcs: copy-on-write worktrees with a loud 3-way merge.
//!
//! Most tests run on `RealDisk` in a temp directory (no turmoil needed, since `SimVcs`
//! works over any `Disk`); one runs the whole lifecycle inside a turmoil host on
//! `MemDisk`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use coord_runtime::isolation::{finish, WorktreeOutcome};
use coord_runtime::world::{Disk, MemoryJournal, RealDisk, Vcs, Worktree};
use coord_sim::world::{
    sim_builder, AppliedChange, ChangeKind, ConflictKind, ConflictedFile, MemDisk, MergeError,
    MergeOutcome, SimVcs, Streams,
};

/// A repository in a temp directory on the real disk, with its `SimVcs`.
struct Fixture {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    disk: Arc<dyn Disk>,
    vcs: SimVcs,
}

impl Fixture {
    /// A repository holding `files` (path relative to the repo, contents).
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let disk: Arc<dyn Disk> = Arc::new(RealDisk::new());
        disk.create_dir_all(&repo).unwrap();
        for (path, contents) in files {
            put(disk.as_ref(), &repo.join(path), contents);
        }
        let vcs = SimVcs::new(disk.clone());
        Self {
            _dir: dir,
            repo,
            disk,
            vcs,
        }
    }

    fn create(&self, slug: &str) -> Worktree {
        self.vcs.create_worktree(&self.repo, slug).unwrap()
    }

    fn read_repo(&self, path: &str) -> Option<String> {
        read(self.disk.as_ref(), &self.repo.join(path))
    }
}

/// Writes `contents` at `path`, making its directory.
fn put(disk: &dyn Disk, path: &Path, contents: &str) {
    disk.create_dir_all(path.parent().unwrap()).unwrap();
    disk.replace_atomic(path, contents.as_bytes()).unwrap();
}

/// The file at `path` as text, or `None` if it is absent.
fn read(disk: &dyn Disk, path: &Path) -> Option<String> {
    match disk.read(path) {
        Ok(bytes) => Some(String::from_utf8(bytes).unwrap()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => panic!("reading {}: {error}", path.display()),
    }
}

/// Every file (not directory) under `root`, relative to it.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
    files.sort();
    files
}

fn bytes(text: &str) -> Option<Vec<u8>> {
    Some(text.as_bytes().to_vec())
}

fn conflicts(outcome: MergeOutcome) -> Vec<ConflictedFile> {
    match outcome {
        MergeOutcome::Conflicted { files } => files,
        MergeOutcome::Merged { changes } => panic!("expected a conflict, merged {changes:?}"),
    }
}

fn merged(outcome: MergeOutcome) -> Vec<AppliedChange> {
    match outcome {
        MergeOutcome::Merged { changes } => changes,
        MergeOutcome::Conflicted { files } => panic!("expected a clean merge, got {files:?}"),
    }
}

fn change(path: &str, kind: ChangeKind) -> AppliedChange {
    AppliedChange {
        path: PathBuf::from(path),
        kind,
    }
}

const LINES: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

#[test]
fn an_unchanged_worktree_is_a_copy_and_removal_leaves_no_file_and_no_branch() {
    // Goal: create → copy of the tracked files, no changes, and removal takes files and
    // branch. Method: make a worktree of a repo with nested and untracked (.git) files,
    // compare its files, then remove it through the runtime's `finish` lifecycle.
    let fx = Fixture::new(&[
        ("a.txt", "a\n"),
        ("src/b.rs", "b\n"),
        (".git/HEAD", "ref\n"),
    ]);
    let worktree = fx.create("feature/auth");
    assert_eq!(
        worktree.path,
        fx.repo.join(".claude/worktrees/feature+auth")
    );
    assert_eq!(worktree.branch, "worktree-feature+auth");
    assert_eq!(fx.vcs.branches(&fx.repo), vec!["worktree-feature+auth"]);
    assert_eq!(
        files_under(&worktree.path),
        vec![PathBuf::from("a.txt"), PathBuf::from("src/b.rs")],
        "tracked files copied, .git left out"
    );
    assert_eq!(
        read(fx.disk.as_ref(), &worktree.path.join("src/b.rs")).as_deref(),
        Some("b\n")
    );
    assert!(!fx.vcs.has_changes(&worktree).unwrap());

    let journal = MemoryJournal::new();
    let outcome = finish(&fx.vcs, &fx.repo, &worktree, &journal).unwrap();
    assert_eq!(outcome, WorktreeOutcome::Removed);
    assert!(
        files_under(&worktree.path).is_empty(),
        "no file left in the worktree"
    );
    assert!(fx.vcs.branches(&fx.repo).is_empty(), "branch gone");
    let error = fx.vcs.has_changes(&worktree).unwrap_err();
    assert_eq!(
        error.kind(),
        io::ErrorKind::NotFound,
        "a removed worktree is unknown"
    );
    // The empty directories left behind (Disk has no remove_dir) do not block the slug.
    let again = fx.create("feature/auth");
    assert_eq!(again, worktree);
    assert!(!fx.vcs.has_changes(&again).unwrap());
}

#[test]
fn writing_adding_or_deleting_a_worktree_file_is_a_change_and_the_worktree_is_kept() {
    // Goal: has_changes sees edits, adds and deletes, and `finish` keeps a changed
    // worktree. Method: three worktrees, one kind of change each; an edit under the
    // untracked `.claude/` is not a change.
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let edited = fx.create("edit");
    put(fx.disk.as_ref(), &edited.path.join("a.txt"), "A\n");
    let added = fx.create("add");
    put(fx.disk.as_ref(), &added.path.join("new/b.txt"), "b\n");
    let deleted = fx.create("delete");
    fx.disk.remove_file(&deleted.path.join("a.txt")).unwrap();
    let untracked = fx.create("untracked");
    put(
        fx.disk.as_ref(),
        &untracked.path.join(".claude/notes"),
        "n\n",
    );

    assert!(fx.vcs.has_changes(&edited).unwrap());
    assert!(fx.vcs.has_changes(&added).unwrap());
    assert!(fx.vcs.has_changes(&deleted).unwrap());
    assert!(!fx.vcs.has_changes(&untracked).unwrap());
    assert_eq!(
        fx.read_repo("a.txt").as_deref(),
        Some("a\n"),
        "repo untouched"
    );

    let outcome = finish(&fx.vcs, &fx.repo, &edited, &MemoryJournal::new()).unwrap();
    assert_eq!(
        outcome,
        WorktreeOutcome::Kept {
            path: edited.path.clone(),
            branch: "worktree-edit".into()
        }
    );
    assert_eq!(
        fx.vcs.branches(&fx.repo),
        vec![
            "worktree-add",
            "worktree-delete",
            "worktree-edit",
            "worktree-untracked"
        ]
    );
}

#[test]
fn a_merge_into_an_unchanged_repo_applies_every_change() {
    // Goal: with no repo change since creation, the worktree's edits, adds and deletes
    // all land. Method: one worktree does all three; merge; read the repo back.
    let fx = Fixture::new(&[("a.txt", "a\n"), ("gone.txt", "g\n"), ("keep.txt", "k\n")]);
    let worktree = fx.create("w");
    put(fx.disk.as_ref(), &worktree.path.join("a.txt"), "A\n");
    put(
        fx.disk.as_ref(),
        &worktree.path.join("dir/new.txt"),
        "new\n",
    );
    fx.disk
        .remove_file(&worktree.path.join("gone.txt"))
        .unwrap();

    let changes = merged(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    assert_eq!(
        changes,
        vec![
            change("a.txt", ChangeKind::Modified),
            change("dir/new.txt", ChangeKind::Added),
            change("gone.txt", ChangeKind::Deleted),
        ]
    );
    assert_eq!(fx.read_repo("a.txt").as_deref(), Some("A\n"));
    assert_eq!(fx.read_repo("dir/new.txt").as_deref(), Some("new\n"));
    assert_eq!(fx.read_repo("gone.txt"), None);
    assert_eq!(fx.read_repo("keep.txt").as_deref(), Some("k\n"));
    // Merging again is a no-op: the repo already has everything.
    assert!(merged(fx.vcs.merge(&fx.repo, &worktree).unwrap()).is_empty());
}

#[test]
fn disjoint_line_edits_to_one_file_merge_cleanly() {
    // Goal: repo and worktree editing different lines of one file both survive.
    // Method: the repo changes line 1, the worktree line 7 (unchanged lines between);
    // merge and compare the file with the hand-made result.
    let fx = Fixture::new(&[("f.txt", LINES)]);
    let worktree = fx.create("w");
    put(
        fx.disk.as_ref(),
        &fx.repo.join("f.txt"),
        &LINES.replace("one", "ONE"),
    );
    put(
        fx.disk.as_ref(),
        &worktree.path.join("f.txt"),
        &LINES.replace("seven", "SEVEN"),
    );

    let changes = merged(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    assert_eq!(changes, vec![change("f.txt", ChangeKind::LineMerged)]);
    assert_eq!(
        fx.read_repo("f.txt").as_deref(),
        Some("ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n")
    );
}

#[test]
fn edits_to_adjacent_lines_conflict_as_in_git() {
    // Goal: pin the merge's granularity: hunks with no unchanged line between them
    // conflict (git's rule), they are not interleaved. Method: repo edits line 1, the
    // worktree line 2; merge.
    let fx = Fixture::new(&[("f.txt", LINES)]);
    let worktree = fx.create("w");
    put(
        fx.disk.as_ref(),
        &fx.repo.join("f.txt"),
        &LINES.replace("one", "ONE"),
    );
    put(
        fx.disk.as_ref(),
        &worktree.path.join("f.txt"),
        &LINES.replace("two", "TWO"),
    );
    let files = conflicts(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].kind, ConflictKind::Content);
    assert_eq!(fx.read_repo("f.txt"), Some(LINES.replace("one", "ONE")));
}

#[test]
fn identical_changes_on_both_sides_merge_as_one() {
    // Goal: both sides making the same edit is not a conflict. Method: the same new
    // bytes in repo and worktree; merge reports nothing to do and keeps them.
    let fx = Fixture::new(&[("f.txt", LINES)]);
    let worktree = fx.create("w");
    put(fx.disk.as_ref(), &fx.repo.join("f.txt"), "same\n");
    put(fx.disk.as_ref(), &worktree.path.join("f.txt"), "same\n");
    assert!(merged(fx.vcs.merge(&fx.repo, &worktree).unwrap()).is_empty());
    assert_eq!(fx.read_repo("f.txt").as_deref(), Some("same\n"));
}

#[test]
fn overlapping_edits_conflict_loudly_and_nothing_is_written() {
    // Goal: an overlapping edit is a loud conflict carrying base, ours and theirs, and
    // the merge is all-or-nothing. Method: repo and worktree rewrite the same line;
    // the worktree also edits a second file cleanly; merge, then check both repo files
    // are as before.
    let fx = Fixture::new(&[("f.txt", LINES), ("other.txt", "o\n")]);
    let worktree = fx.create("w");
    let ours = LINES.replace("four", "FOUR-ours");
    let theirs = LINES.replace("four", "FOUR-theirs");
    put(fx.disk.as_ref(), &fx.repo.join("f.txt"), &ours);
    put(fx.disk.as_ref(), &worktree.path.join("f.txt"), &theirs);
    put(fx.disk.as_ref(), &worktree.path.join("other.txt"), "O\n");

    let files = conflicts(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    assert_eq!(files.len(), 1);
    let file = &files[0];
    assert_eq!(file.path, PathBuf::from("f.txt"));
    assert_eq!(file.kind, ConflictKind::Content);
    assert_eq!(file.base, bytes(LINES));
    assert_eq!(file.ours, bytes(&ours));
    assert_eq!(file.theirs, bytes(&theirs));
    let marked = String::from_utf8(file.marked.clone().unwrap()).unwrap();
    assert!(
        marked.contains("<<<<<<<") && marked.contains("FOUR-ours"),
        "{marked}"
    );
    assert!(
        marked.contains("FOUR-theirs") && marked.contains(">>>>>>>"),
        "{marked}"
    );

    assert_eq!(
        fx.read_repo("f.txt"),
        Some(ours),
        "conflicted file untouched"
    );
    assert_eq!(
        fx.read_repo("other.txt").as_deref(),
        Some("o\n"),
        "clean file not applied either"
    );
    assert!(
        fx.vcs.has_changes(&worktree).unwrap(),
        "the worktree keeps its work"
    );
}

#[test]
fn add_add_modify_delete_and_delete_modify_conflict() {
    // Goal: whole-file conflicts are reported with their kind and absent sides as None.
    // Method: one merge where both sides add a file differently, the repo modifies
    // what the worktree deletes, and the repo deletes what the worktree modifies.
    let fx = Fixture::new(&[("md.txt", "base-md\n"), ("dm.txt", "base-dm\n")]);
    let worktree = fx.create("w");
    put(fx.disk.as_ref(), &fx.repo.join("aa.txt"), "ours-aa\n");
    put(
        fx.disk.as_ref(),
        &worktree.path.join("aa.txt"),
        "theirs-aa\n",
    );
    put(fx.disk.as_ref(), &fx.repo.join("md.txt"), "ours-md\n");
    fx.disk.remove_file(&worktree.path.join("md.txt")).unwrap();
    fx.disk.remove_file(&fx.repo.join("dm.txt")).unwrap();
    put(
        fx.disk.as_ref(),
        &worktree.path.join("dm.txt"),
        "theirs-dm\n",
    );

    let files = conflicts(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    let summary: Vec<_> = files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                f.kind,
                f.base.clone(),
                f.ours.clone(),
                f.theirs.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                PathBuf::from("aa.txt"),
                ConflictKind::AddAdd,
                None,
                bytes("ours-aa\n"),
                bytes("theirs-aa\n")
            ),
            (
                PathBuf::from("dm.txt"),
                ConflictKind::DeleteModify,
                bytes("base-dm\n"),
                None,
                bytes("theirs-dm\n")
            ),
            (
                PathBuf::from("md.txt"),
                ConflictKind::ModifyDelete,
                bytes("base-md\n"),
                bytes("ours-md\n"),
                None
            ),
        ]
    );
    assert_eq!(fx.read_repo("aa.txt").as_deref(), Some("ours-aa\n"));
    assert_eq!(fx.read_repo("md.txt").as_deref(), Some("ours-md\n"));
    assert_eq!(fx.read_repo("dm.txt"), None);
}

#[test]
fn two_worktrees_editing_one_file_first_merges_second_conflicts() {
    // Goal: the "two same-dir writers" lost update becomes a loud conflict (invariant
    // 6). Method: two worktrees of one repo rewrite the same line; merge the first
    // (clean), then the second (conflict naming the first's version as ours).
    let fx = Fixture::new(&[("f.txt", LINES)]);
    let first = fx.create("first");
    let second = fx.create("second");
    let first_text = LINES.replace("three", "THREE-first");
    let second_text = LINES.replace("three", "THREE-second");
    put(fx.disk.as_ref(), &first.path.join("f.txt"), &first_text);
    put(fx.disk.as_ref(), &second.path.join("f.txt"), &second_text);

    let changes = merged(fx.vcs.merge(&fx.repo, &first).unwrap());
    assert_eq!(changes, vec![change("f.txt", ChangeKind::Modified)]);
    let files = conflicts(fx.vcs.merge(&fx.repo, &second).unwrap());
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].kind, ConflictKind::Content);
    assert_eq!(files[0].ours, bytes(&first_text));
    assert_eq!(files[0].theirs, bytes(&second_text));
    assert_eq!(
        fx.read_repo("f.txt"),
        Some(first_text),
        "the first writer's update is not lost"
    );
}

#[test]
fn a_worktree_file_where_the_repo_has_a_directory_is_a_path_clash() {
    // Goal: a merged tree that needs one path as file and directory conflicts rather
    // than failing halfway. Method: the repo adds `x/inner.txt`, the worktree adds
    // the file `x`; merge.
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let worktree = fx.create("w");
    put(fx.disk.as_ref(), &fx.repo.join("x/inner.txt"), "inner\n");
    put(fx.disk.as_ref(), &worktree.path.join("x"), "file\n");
    let files = conflicts(fx.vcs.merge(&fx.repo, &worktree).unwrap());
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, PathBuf::from("x"));
    assert_eq!(files[0].kind, ConflictKind::PathClash);
    assert_eq!(files[0].theirs, bytes("file\n"));
}

#[test]
fn bad_slugs_are_refused_and_make_no_branch() {
    // Goal: create_worktree validates slugs as GitVcs does. Method: try slugs that
    // break each rule; each is InvalidInput and no branch or directory appears.
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let too_long = "x".repeat(65);
    for slug in [
        "", "..", "a/../b", "a..b", "/abs", "a//b", "sp ace", "end.", "x.lock", &too_long,
    ] {
        let error = fx.vcs.create_worktree(&fx.repo, slug).unwrap_err();
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "slug {slug:?}: {error}"
        );
    }
    assert!(fx.vcs.branches(&fx.repo).is_empty());
    assert!(!fx.repo.join(".claude").exists());
}

#[test]
fn a_taken_slug_and_foreign_worktrees_are_refused() {
    // Goal: the bookkeeping refuses what git would. Method: create a slug twice; merge
    // and remove a worktree against the wrong repo; merge an unknown worktree.
    let fx = Fixture::new(&[("a.txt", "a\n")]);
    let worktree = fx.create("w");
    let error = fx.vcs.create_worktree(&fx.repo, "w").unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);

    let elsewhere = fx.repo.with_file_name("other");
    assert!(matches!(
        fx.vcs.merge(&elsewhere, &worktree),
        Err(MergeError::WrongRepo { .. })
    ));
    let error = fx.vcs.remove_worktree(&elsewhere, &worktree).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(fx.vcs.branches(&fx.repo), vec!["worktree-w"]);

    let unknown = Worktree {
        path: fx.repo.join(".claude/worktrees/nope"),
        branch: "worktree-nope".into(),
    };
    assert!(matches!(
        fx.vcs.merge(&fx.repo, &unknown),
        Err(MergeError::UnknownWorktree { .. })
    ));
}

/// One fixed sequence of operations: two worktrees, a clean merge, a conflicting
/// merge. Returns both outcomes and the repo's final files.
fn scripted_run() -> (MergeOutcome, MergeOutcome, Vec<(PathBuf, Option<String>)>) {
    let fx = Fixture::new(&[("f.txt", LINES), ("g.txt", "g\n")]);
    let first = fx.create("first");
    let second = fx.create("second");
    put(
        fx.disk.as_ref(),
        &fx.repo.join("f.txt"),
        &LINES.replace("one", "1"),
    );
    put(
        fx.disk.as_ref(),
        &first.path.join("f.txt"),
        &LINES.replace("six", "6"),
    );
    put(fx.disk.as_ref(), &first.path.join("z/new.txt"), "new\n");
    put(
        fx.disk.as_ref(),
        &second.path.join("f.txt"),
        &LINES.replace("six", "VI"),
    );
    fx.disk.remove_file(&second.path.join("g.txt")).unwrap();
    let clean = fx.vcs.merge(&fx.repo, &first).unwrap();
    let conflicted = fx.vcs.merge(&fx.repo, &second).unwrap();
    let files = files_under(&fx.repo)
        .into_iter()
        .filter(|path| !path.starts_with(".claude"))
        .map(|path| {
            let text = fx.read_repo(path.to_str().unwrap());
            (path, text)
        })
        .collect();
    (clean, conflicted, files)
}

#[test]
fn the_same_operations_give_the_same_outcomes_and_bytes() {
    // Goal: merges are deterministic. Method: run one scripted sequence twice in fresh
    // temp directories and compare outcomes and the repo's final bytes.
    let first_run = scripted_run();
    let second_run = scripted_run();
    assert_eq!(first_run, second_run);
    assert!(matches!(first_run.0, MergeOutcome::Merged { .. }));
    assert!(matches!(first_run.1, MergeOutcome::Conflicted { .. }));
}

#[test]
fn the_lifecycle_runs_inside_a_turmoil_host_on_mem_disk() {
    // Goal: SimVcs works on the turmoil world's disk. Method: inside a turmoil client
    // on MemDisk, create two worktrees, edit disjoint lines, merge one, conflict-free
    // line merge of the other, then remove both and check files and branches.
    let streams = Streams::new(11);
    let mut sim = sim_builder(&streams).build();
    let result = Arc::new(Mutex::new(None));
    let result_in = result.clone();
    sim.client("coordinator", async move {
        let disk: Arc<dyn Disk> = Arc::new(MemDisk::new());
        let repo = Path::new("/repo");
        put(disk.as_ref(), &repo.join("src/f.txt"), LINES);
        let vcs = SimVcs::new(disk.clone());
        let a = vcs.create_worktree(repo, "a")?;
        let b = vcs.create_worktree(repo, "b")?;
        assert!(!vcs.has_changes(&a)?);
        put(
            disk.as_ref(),
            &a.path.join("src/f.txt"),
            &LINES.replace("two", "2"),
        );
        put(
            disk.as_ref(),
            &b.path.join("src/f.txt"),
            &LINES.replace("six", "6"),
        );
        assert!(vcs.has_changes(&a)?);
        let first = vcs.merge(repo, &a)?;
        let second = vcs.merge(repo, &b)?;
        let text = read(disk.as_ref(), &repo.join("src/f.txt"));
        vcs.remove_worktree(repo, &a)?;
        vcs.remove_worktree(repo, &b)?;
        let leftover = disk.list_dir(&a.path.join("src"))?;
        *result_in.lock().unwrap() = Some((first, second, text, vcs.branches(repo), leftover));
        Ok(())
    });
    sim.run().unwrap();
    let (first, second, text, branches, leftover) = result.lock().unwrap().take().unwrap();
    assert_eq!(
        merged(first),
        vec![change("src/f.txt", ChangeKind::Modified)]
    );
    assert_eq!(
        merged(second),
        vec![change("src/f.txt", ChangeKind::LineMerged)]
    );
    assert_eq!(
        text.as_deref(),
        Some("one\n2\nthree\nfour\nfive\n6\nseven\n")
    );
    assert!(branches.is_empty());
    assert!(leftover.is_empty(), "no file left: {leftover:?}");
}
