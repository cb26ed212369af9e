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
