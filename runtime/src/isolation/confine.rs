//! Path confinement: does a path lie inside a directory?
//!
//! The check is lexical: `.` segments are dropped and `..` segments pop the previous
//! one, without asking the disk. That is what the tool gate needs before a write
//! (the target may not exist yet); symlinked directories inside the root are a
//! separate check made by the gate, because only the disk knows about them.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` segments dropped and each `..` applied to the segment before it.
/// Returns `None` if a `..` would climb above the start of `path` (above `/` for an
/// absolute path, above the first segment for a relative one): such a path names
/// something its text does not show, and callers must treat it as outside.
pub fn normalize(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    // How many normal segments `normal` holds; `..` may only pop one of those.
    let mut depth: usize = 0;
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => normal.push(prefix.as_os_str()),
            Component::RootDir => normal.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return None;
                }
                normal.pop();
                depth -= 1;
            }
            Component::Normal(segment) => {
                normal.push(segment);
                depth += 1;
            }
        }
    }
    Some(normal)
}

/// Whether `path` lies inside `worktree_root` (or is the root itself), after lexical
/// normalisation of both. A relative `path` is taken relative to `worktree_root`.
/// A path whose `..` segments climb out of the root, or above the filesystem root,
/// is outside.
pub fn contains(worktree_root: &Path, path: &Path) -> bool {
    let Some(root) = normalize(worktree_root) else {
        return false;
    };
    let Some(target) = normalize(&worktree_root.join(path)) else {
        return false;
    };
    target.starts_with(&root)
}

/// Whether the resolved path `target` lies at or below `root`, after lexical
/// normalisation of both. Unlike [`contains`], nothing is joined: `target` is a path
/// a tool already resolved against its caller's working directory, so a relative
/// `target` only lies within a relative `root` (both then name places below the
/// process's working directory), and an absolute one only within an absolute root.
/// A path whose `..` segments climb above its start lies nowhere.
pub fn within(root: &Path, target: &Path) -> bool {
    let (Some(root), Some(target)) = (normalize(root), normalize(target)) else {
        return false;
    };
    root.is_absolute() == target.is_absolute() && target.starts_with(&root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_compares_resolved_paths_without_joining_them() {
        // Goal: a write target is judged as the tools will write it. Method: absolute
        // and relative roots against paths in, out, climbing and of the other kind.
        let cases = [
            ("/work", "/work", true),
            ("/work", "/work/src/lib.rs", true),
            ("/work/", "/work/./src/../README.md", true),
            ("/work", "/workshop/x", false),
            ("/work", "/etc/passwd", false),
            ("/work", "/work/../etc/passwd", false),
            ("/work", "src/lib.rs", false),
            (".", "src/lib.rs", true),
            (".", "/etc/passwd", false),
            (".", "../outside", false),
            ("/", "/etc/passwd", true),
        ];
        for (root, target, inside) in cases {
            assert_eq!(
                within(Path::new(root), Path::new(target)),
                inside,
                "{target} within {root}"
            );
        }
    }
}
