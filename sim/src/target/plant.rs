//! `symlink-at-output` on the Claude Code CLI: its task output directory planted as
//! a symlink out of the session before the first spawn.
//!
//! The CLI keeps a task's output at
//! `$TMPDIR/claude-<uid>/<cwd slug>/<session id>/tasks/<task id>.output`. The task
//! id is drawn at the launch, so the file itself cannot be planted beforehand; the
//! directory can. When the first request arrives (it names the session in its
//! `metadata.user_id`), and before any answer has launched a worker, the host makes
//! `tasks` a symlink to the scratch `outside/` directory. Whatever the CLI then
//! writes through it lands in `outside/`, where the observation finds it
//! ([`super::observation`]): a write through a symlink, out of the session
//! (invariant 7). Only the first spawn can be planted: once a task has been
//! launched the directory exists.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::fault::{Fault, FaultBook};

/// The directory of the scratch root the planted link points into.
pub const OUTSIDE_DIR: &str = "outside";

/// The plan to plant the task directory, and whether it was carried out.
#[derive(Debug)]
pub struct TaskDirPlant {
    /// The scratch `TMPDIR`.
    tmp: PathBuf,
    /// The CLI's working directory, whose slug names its temp folder.
    workspace: PathBuf,
    /// Where the planted link points.
    outside: PathBuf,
    /// The owner of the scratch directories: the CLI runs as this user.
    uid: u32,
    /// The fault's index in the schedule, and the fault.
    fault: (usize, Fault),
    planted: AtomicBool,
}

impl TaskDirPlant {
    /// The plant for `scenario`'s first `symlink-at-output` fault, if it has one.
    pub fn for_faults(
        faults: &[Fault],
        tmp: &Path,
        workspace: &Path,
        outside: &Path,
    ) -> Option<Self> {
        let (index, fault) = faults
            .iter()
            .enumerate()
            .find(|(_, fault)| matches!(fault, Fault::SymlinkAtOutput { .. }))?;
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(tmp).ok()?);
        Some(Self {
            tmp: tmp.to_owned(),
            workspace: workspace.to_owned(),
            outside: outside.to_owned(),
            uid,
            fault: (index, fault.clone()),
            planted: AtomicBool::new(false),
        })
    }

    /// Plants the link once `body`, a request as the CLI sent it, names the session;
    /// records the fault in `book` when it is planted, and what went wrong if it
    /// could not be.
    pub fn on_request(&self, body: &Value, book: &FaultBook) {
        if self.planted.load(Ordering::Acquire) {
            return;
        }
        let Some(session) = session_id(body) else {
            return;
        };
        self.planted.store(true, Ordering::Release);
        let tasks = self.task_dir(&session);
        let detail = match plant(&tasks, &self.outside) {
            Ok(()) => format!(
                "{} is a symlink to {}",
                self.shown(&tasks),
                self.shown(&self.outside)
            ),
            Err(error) => format!("could not plant {}: {error}", self.shown(&tasks)),
        };
        book.record(self.fault.0, &self.fault.1, detail);
    }

    /// `$TMPDIR/claude-<uid>/<cwd slug>/<session>/tasks`.
    fn task_dir(&self, session: &str) -> PathBuf {
        self.tmp
            .join(format!("claude-{}", self.uid))
            .join(cwd_slug(&self.workspace))
            .join(session)
            .join("tasks")
    }

    /// `path` relative to the scratch root, as the observation names files.
    fn shown(&self, path: &Path) -> String {
        let root = self.tmp.parent().unwrap_or(&self.tmp);
        path.strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// Makes `tasks` a symlink to `outside`, creating the folders above it.
fn plant(tasks: &Path, outside: &Path) -> std::io::Result<()> {
    if let Some(parent) = tasks.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::create_dir_all(outside)?;
    std::os::unix::fs::symlink(outside, tasks)
}

/// The session id in a CLI request's `metadata.user_id`, a JSON object in a string
/// (`{"device_id":…,"account_uuid":…,"session_id":…}` in 2.1.328).
fn session_id(body: &Value) -> Option<String> {
    let user_id = body.get("metadata")?.get("user_id")?.as_str()?;
    let fields: Value = serde_json::from_str(user_id).ok()?;
    let session = fields.get("session_id")?.as_str()?;
    // It becomes a path segment: nothing but a plain name is planted.
    let plain = !session.is_empty()
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    plain.then(|| session.to_owned())
}

/// The CLI's name for a working directory's folders: every character other than a
/// letter or digit becomes `-` (`/tmp/x/workspace` → `-tmp-x-workspace`).
fn cwd_slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{cwd_slug, session_id};
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn the_session_is_read_from_the_user_id_json() {
        let body = json!({ "metadata": { "user_id": "{\"device_id\":\"d2\",\"account_uuid\":\"\",\"session_id\":\"2360ab85-77ec-4725-b787-9251bf2f47e8\"}" } });
        assert_eq!(
            session_id(&body).as_deref(),
            Some("2360ab85-77ec-4725-b787-9251bf2f47e8")
        );
        let traversal = json!({ "metadata": { "user_id": "{\"session_id\":\"../../etc\"}" } });
        assert_eq!(session_id(&traversal), None);
        assert_eq!(session_id(&json!({ "metadata": {} })), None);
    }

    #[test]
    fn the_cwd_slug_is_the_clis() {
        assert_eq!(
            cwd_slug(Path::new("/tmp/coordsim-claude-code-LAS7gg/workspace")),
            "-tmp-coordsim-claude-code-LAS7gg-workspace"
        );
    }
}
