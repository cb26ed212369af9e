//! Finding the scenario files under the paths a command was given.
//!
//! A path named on the command line is taken as it is: a file (or a symbolic link
//! to one) is a scenario whatever its name, a folder (or a link to one) is searched.
//! Inside a folder the search takes every `*.toml` file, in every subfolder, and
//! follows symbolic links to files, but **not symbolic links to folders**, as
//! `find`, `git` and `ripgrep` do not: a link to `..` would otherwise make the
//! search endless, and a link elsewhere would run scenarios nobody named. Name
//! such a folder on the command line to search it.
//!
//! A folder named `demo` inside a searched folder is not entered: it holds
//! scenarios that fail by design (`scenarios/demo/`, the README's tour), which a
//! sweep of `scenarios/` must not run. Name it on the command line to run it.
//!
//! Every file is run once, however many ways it was reached (`run a/ ./a/`, a file
//! named beside its folder, two links to one file): files are told apart by their
//! resolved path, and the first spelling in sorted order is kept. The list is
//! sorted, so a sweep runs its scenarios in the same order on every machine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The folder of scenarios that fail by design, left out of a folder's search.
const DEMO_FOLDER: &str = "demo";

/// Every scenario file under `paths`, each once, sorted: see the module header.
pub fn discover(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            collect_toml(path, &mut found)?;
        } else {
            found.push(path.clone());
        }
    }
    found.sort();
    found.dedup();
    let mut seen = BTreeSet::new();
    // A file that cannot be resolved (a missing file named on the command line) is
    // kept as it is spelled: loading it reports why.
    found.retain(|file| seen.insert(file.canonicalize().unwrap_or_else(|_| file.clone())));
    Ok(found)
}

/// Every `*.toml` file in the tree under `root`, without entering linked folders.
/// The walk keeps its own stack, so a deep tree cannot overflow the thread's.
fn collect_toml(root: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut folders = vec![root.to_owned()];
    // Bounded: each folder is a distinct directory of the tree (links to folders
    // are not entered, so no folder is reached twice), and each is popped once.
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let is_file = if kind.is_symlink() {
                // A link is followed to a file only; a broken link is no scenario.
                std::fs::metadata(&path).is_ok_and(|target| target.is_file())
            } else if kind.is_dir() {
                if entry.file_name() != DEMO_FOLDER {
                    folders.push(path);
                }
                continue;
            } else {
                kind.is_file()
            };
            if is_file && path.extension().is_some_and(|ext| ext == "toml") {
                found.push(path);
            }
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_to_folders_are_not_entered_and_each_file_is_found_once() {
        // Goal: issue 24's folder with `..` links walks once, and a file reached
        // through a link or a second spelling runs once. Method: a tree with two
        // links to `..`, a link to a file, and the folder named twice.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("one.toml"), "").unwrap();
        std::fs::write(root.join("sub/two.toml"), "").unwrap();
        std::fs::write(root.join("notes.txt"), "").unwrap();
        symlink("..", root.join("sub/up")).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink("one.toml", root.join("z-link.toml")).unwrap();
        let spelled_twice = [root.clone(), dir.path().join("./a/sub/..")];
        let files = discover(&spelled_twice).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|file| file.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["one.toml", "two.toml"], "{files:?}");
    }

    #[test]
    fn a_demo_folder_is_left_out_of_a_search_but_runs_when_named() {
        // Goal: `run scenarios/` leaves out scenarios/demo/ (which fails by design),
        // and `run scenarios/demo/` runs it. Method: a tree with a demo folder,
        // searched from above and named itself.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("demo")).unwrap();
        std::fs::write(dir.path().join("kept.toml"), "").unwrap();
        std::fs::write(dir.path().join("demo/fails.toml"), "").unwrap();
        let from_above = discover(&[dir.path().to_owned()]).unwrap();
        assert_eq!(from_above, [dir.path().join("kept.toml")]);
        let named = discover(&[dir.path().join("demo")]).unwrap();
        assert_eq!(named, [dir.path().join("demo/fails.toml")]);
    }
}
