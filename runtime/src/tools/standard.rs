//! The standard tools: Read, Write, Edit, Bash, Glob, Grep and the scratchpad, over
//! the World's disk and shell.
//!
//! [`StandardTools`] is the production [`Tools`]: every file access goes through
//! [`Disk`](crate::world::Disk) (so never through a symlink in the last path
//! component), every command through [`Shell`]. It does no permission checking of its
//! own: surfaces, lost-update detection and worktree confinement are the
//! [`ToolGate`](super::ToolGate)'s, which every call passes first.
//!
//! Behaviour, tool by tool (relative paths resolve against [`ToolContext::cwd`]):
//!
//! - `Read {file_path, offset?, limit?}`: the file's text (lossily decoded UTF-8), or
//!   the lines `offset..offset+limit` (1-based) of it, without line numbers. Files
//!   over 8 MiB are refused.
//! - `Write {file_path, content}`: creates missing parent directories, then replaces
//!   the file atomically. A symlink or directory at `file_path` is refused.
//! - `Edit {file_path, old_string, new_string, replace_all?}`: see [`apply_edit`].
//! - `Bash {command, timeout_ms?}`: `sh -c` in the working directory; stdout, then
//!   stderr; a non-zero exit or a timeout is an error. Default timeout 2 minutes,
//!   at most 10 minutes.
//! - `Glob {pattern, path?}`: files under `path` (default: the working directory)
//!   whose relative path matches [`GlobPattern`], one absolute path per line, sorted.
//! - `Grep {pattern, path?, glob?}`: `path:line:text` for each matching line, sorted
//!   by path then line.
//! - `ScratchpadRead {key}` / `ScratchpadWrite {key, content}`: the session's
//!   [`Scratchpad`]; keys are full [`ScratchKey`]s (by convention `<agentId>/<name>`).
//!
//! Glob and Grep walk directories without following symlinks, skip `.git`
//! directories, and stop at fixed bounds (depth, entries, results), saying so in the
//! output when a bound cut the result short.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::glob::GlobPattern;
use super::input::{
    resolve_path, BashInput, EditInput, GlobInput, GrepInput, ReadInput, ScratchpadReadInput,
    ScratchpadWriteInput, ToolInput, WriteInput,
};
use super::surface::ToolName;
use crate::ipc::{ScratchKey, Scratchpad, WriteOutcome};
use crate::world::{
    BoxFuture, FileKind, Shell, ShellCommand, ToolCall, ToolContext, ToolOutput, Tools, World,
};

/// Largest file Read, Edit and Grep will load.
pub const FILE_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// Bash's timeout when the call gives none.
pub const BASH_TIMEOUT_MS_DEFAULT: u64 = 120_000;
/// Longest timeout a Bash call may ask for.
pub const BASH_TIMEOUT_MS_MAX: u64 = 600_000;
/// Most results (paths or lines) Glob and Grep return.
pub const SEARCH_RESULTS_MAX: usize = 1_000;
/// Deepest directory level Glob and Grep descend to.
const WALK_DEPTH_MAX: usize = 64;
/// Most directory entries one Glob or Grep call visits.
const WALK_ENTRIES_MAX: usize = 100_000;

/// Why an Edit could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// `old_string` is empty.
    #[error("old_string is empty; use Write to create or replace a whole file")]
    EmptyOldString,
    /// `old_string` and `new_string` are the same.
    #[error("old_string and new_string are identical; nothing to change")]
    Unchanged,
    /// `old_string` does not occur.
    #[error("old_string was not found in the file")]
    NotFound,
    /// `old_string` occurs more than once and `replace_all` is false.
    #[error(
        "old_string occurs {occurrences_count} times; give more context to make it unique, \
         or set replace_all"
    )]
    Ambiguous {
        /// How many times it occurs.
        occurrences_count: usize,
    },
}

/// Applies an Edit to `text`: `old_string` must occur exactly once (or, with
/// `replace_all`, at least once) and differ from `new_string`.
pub fn apply_edit(
    text: &str,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<String, EditError> {
    if old_string.is_empty() {
        return Err(EditError::EmptyOldString);
    }
    if old_string == new_string {
        return Err(EditError::Unchanged);
    }
    let occurrences_count = text.matches(old_string).count();
    match occurrences_count {
        0 => Err(EditError::NotFound),
        1 => Ok(text.replacen(old_string, new_string, 1)),
        _ if replace_all => Ok(text.replace(old_string, new_string)),
        _ => Err(EditError::Ambiguous { occurrences_count }),
    }
}

/// The production tools. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StandardTools {
    world: World,
    shell: Arc<dyn Shell>,
    scratchpad: Arc<Scratchpad>,
}

fn ok(content: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: content.into(),
        is_error: false,
    }
}

fn error(content: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: content.into(),
        is_error: true,
    }
}

/// Says what an I/O error on `path` means, in words a model can act on.
fn describe_io(path: &Path, failure: &io::Error) -> String {
    if failure.raw_os_error() == Some(libc::ELOOP) {
        return format!(
            "{} is a symlink; symlinks are never followed (read or write its target directly)",
            path.display()
        );
    }
    match failure.kind() {
        io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        io::ErrorKind::PermissionDenied => format!("permission denied: {}", path.display()),
        _ => format!("{}: {failure}", path.display()),
    }
}

impl StandardTools {
    /// Tools over `world`'s disk, `shell` for Bash, and the session's `scratchpad`.
    pub fn new(world: World, shell: Arc<dyn Shell>, scratchpad: Arc<Scratchpad>) -> Self {
        Self {
            world,
            shell,
            scratchpad,
        }
    }

    /// Runs one call to completion.
    pub async fn run(&self, context: ToolContext, call: ToolCall) -> ToolOutput {
        let Some(tool) = ToolName::parse(&call.name) else {
            return error(format!("unknown tool {:?}", call.name));
        };
        let input = match ToolInput::parse(tool, &call.input) {
            Ok(Some(input)) => input,
            Ok(None) => return error(format!("tool {tool} is not provided by the standard tools")),
            Err(failure) => return error(failure.to_string()),
        };
        match input {
            ToolInput::Read(input) => self.read(&context, input),
            ToolInput::Write(input) => self.write(&context, input),
            ToolInput::Edit(input) => self.edit(&context, input),
            ToolInput::Bash(input) => self.bash(&context, input).await,
            ToolInput::Glob(input) => self.glob(&context, input),
            ToolInput::Grep(input) => self.grep(&context, input),
            ToolInput::ScratchpadRead(input) => self.scratch_read(&context, input),
            ToolInput::ScratchpadWrite(input) => self.scratch_write(&context, input),
        }
    }

    /// Loads a regular file for Read or Edit, refusing symlinks, directories and
    /// files over [`FILE_BYTES_MAX`] with a clear message.
    fn load_text(&self, path: &Path) -> Result<String, String> {
        let meta = self
            .world
            .disk
            .metadata(path)
            .map_err(|failure| describe_io(path, &failure))?;
        match meta.kind {
            FileKind::File => {}
            FileKind::Symlink => {
                return Err(format!(
                    "{} is a symlink; symlinks are never followed (use its target's path)",
                    path.display()
                ))
            }
            FileKind::Dir => return Err(format!("{} is a directory, not a file", path.display())),
            FileKind::Other => return Err(format!("{} is not a regular file", path.display())),
        }
        if meta.len_bytes > FILE_BYTES_MAX {
            return Err(format!(
                "{} is {} bytes; files over {FILE_BYTES_MAX} bytes are not loaded",
                path.display(),
                meta.len_bytes
            ));
        }
        let bytes = self
            .world
            .disk
            .read(path)
            .map_err(|failure| describe_io(path, &failure))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Replaces (or creates) `path` atomically, refusing to replace a symlink or a
    /// directory.
    fn store(&self, path: &Path, content: &[u8]) -> Result<(), String> {
        match self.world.disk.metadata(path) {
            Ok(meta) if meta.kind == FileKind::Symlink => {
                return Err(format!(
                    "refusing to write {}: it is a symlink, and writes never go through symlinks",
                    path.display()
                ))
            }
            Ok(meta) if meta.kind != FileKind::File => {
                return Err(format!(
                    "{} exists and is not a regular file",
                    path.display()
                ))
            }
            Ok(_) => {}
            Err(failure) if failure.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = path.parent() {
                    self.world
                        .disk
                        .create_dir_all(parent)
                        .map_err(|failure| describe_io(parent, &failure))?;
                }
            }
            Err(failure) => return Err(describe_io(path, &failure)),
        }
        self.world
            .disk
            .replace_atomic(path, content)
            .map_err(|failure| describe_io(path, &failure))
    }

    fn read(&self, context: &ToolContext, input: ReadInput) -> ToolOutput {
        let path = resolve_path(&context.cwd, &input.file_path);
        let text = match self.load_text(&path) {
            Ok(text) => text,
            Err(message) => return error(message),
        };
        if input.offset.is_none() && input.limit.is_none() {
            return ok(text);
        }
        let offset = input.offset.unwrap_or(1);
        if offset == 0 {
            return error("offset is a 1-based line number; 0 is not a line");
        }
        let skip = usize::try_from(offset - 1).unwrap_or(usize::MAX);
        let take = input.limit.map_or(usize::MAX, |limit| {
            usize::try_from(limit).unwrap_or(usize::MAX)
        });
        let lines: String = text.split_inclusive('\n').skip(skip).take(take).collect();
        ok(lines)
    }

    fn write(&self, context: &ToolContext, input: WriteInput) -> ToolOutput {
        let path = resolve_path(&context.cwd, &input.file_path);
        match self.store(&path, input.content.as_bytes()) {
            Ok(()) => ok(format!(
                "wrote {} bytes to {}",
                input.content.len(),
                path.display()
            )),
            Err(message) => error(message),
        }
    }

    fn edit(&self, context: &ToolContext, input: EditInput) -> ToolOutput {
        let path = resolve_path(&context.cwd, &input.file_path);
        let text = match self.load_text(&path) {
            Ok(text) => text,
            Err(message) => return error(message),
        };
        let edited = match apply_edit(
            &text,
            &input.old_string,
            &input.new_string,
            input.replace_all,
        ) {
            Ok(edited) => edited,
            Err(failure) => return error(format!("cannot edit {}: {failure}", path.display())),
        };
        match self.store(&path, edited.as_bytes()) {
            Ok(()) => ok(format!("edited {}", path.display())),
            Err(message) => error(message),
        }
    }

    async fn bash(&self, context: &ToolContext, input: BashInput) -> ToolOutput {
        let timeout_ms = input.timeout_ms.unwrap_or(BASH_TIMEOUT_MS_DEFAULT);
        if timeout_ms == 0 || timeout_ms > BASH_TIMEOUT_MS_MAX {
            return error(format!(
                "timeout_ms must be between 1 and {BASH_TIMEOUT_MS_MAX}, not {timeout_ms}"
            ));
        }
        let command = ShellCommand {
            command: input.command,
            cwd: context.cwd.clone(),
            timeout: Duration::from_millis(timeout_ms),
        };
        let output = match self.shell.run(command).await {
            Ok(output) => output,
            Err(failure) => return error(format!("cannot run the command: {failure}")),
        };
        let mut content = output.stdout;
        if !output.stderr.is_empty() {
            if !content.is_empty() && !content.ends_with('\n') {
                content.push('\n');
            }
            content.push_str(&output.stderr);
        }
        let ending = if output.timed_out {
            Some(format!(
                "command timed out after {timeout_ms} ms and was killed"
            ))
        } else {
            match output.exit_code {
                Some(0) => None,
                Some(code) => Some(format!("exit code {code}")),
                None => Some("command was killed by a signal".to_owned()),
            }
        };
        match ending {
            None => ok(content),
            Some(ending) => {
                if !content.is_empty() && !content.ends_with('\n') {
                    content.push('\n');
                }
                content.push_str(&ending);
                error(content)
            }
        }
    }

    fn glob(&self, context: &ToolContext, input: GlobInput) -> ToolOutput {
        let pattern = match GlobPattern::new(&input.pattern) {
            Ok(pattern) => pattern,
            Err(failure) => return error(failure.to_string()),
        };
        let root = match &input.path {
            Some(path) => resolve_path(&context.cwd, path),
            None => context.cwd.clone(),
        };
        let walk = match self.walk_files(&root) {
            Ok(walk) => walk,
            Err(message) => return error(message),
        };
        let mut matched: Vec<&PathBuf> = walk
            .files
            .iter()
            .filter(|file| {
                file.strip_prefix(&root)
                    .is_ok_and(|relative| pattern.matches(relative))
            })
            .collect();
        matched.sort();
        let truncated = walk.truncated || matched.len() > SEARCH_RESULTS_MAX;
        matched.truncate(SEARCH_RESULTS_MAX);
        if matched.is_empty() && !truncated {
            return ok("No files found");
        }
        let mut lines: Vec<String> = matched
            .iter()
            .map(|file| file.display().to_string())
            .collect();
        if truncated {
            lines.push(format!("(results truncated at {SEARCH_RESULTS_MAX})"));
        }
        ok(lines.join("\n"))
    }

    fn grep(&self, context: &ToolContext, input: GrepInput) -> ToolOutput {
        let regex = match regex::Regex::new(&input.pattern) {
            Ok(regex) => regex,
            Err(failure) => return error(format!("invalid regular expression: {failure}")),
        };
        let filter = match input.glob.as_deref().map(GlobPattern::new).transpose() {
            Ok(filter) => filter,
            Err(failure) => return error(failure.to_string()),
        };
        let root = match &input.path {
            Some(path) => resolve_path(&context.cwd, path),
            None => context.cwd.clone(),
        };
        let (files, mut truncated) = match self.world.disk.metadata(&root) {
            Ok(meta) if meta.kind == FileKind::File => (vec![root.clone()], false),
            Ok(_) => match self.walk_files(&root) {
                Ok(walk) => (walk.files, walk.truncated),
                Err(message) => return error(message),
            },
            Err(failure) => return error(describe_io(&root, &failure)),
        };
        let mut hits: Vec<(PathBuf, usize, String)> = Vec::new();
        for file in files {
            if let Some(filter) = &filter {
                let candidate = if filter.has_separator() {
                    file.strip_prefix(&root).ok().map(Path::to_path_buf)
                } else {
                    file.file_name().map(PathBuf::from)
                };
                if !candidate.is_some_and(|candidate| filter.matches(&candidate)) {
                    continue;
                }
            }
            let Ok(meta) = self.world.disk.metadata(&file) else {
                continue;
            };
            if meta.kind != FileKind::File || meta.len_bytes > FILE_BYTES_MAX {
                continue;
            }
            let Ok(bytes) = self.world.disk.read(&file) else {
                continue;
            };
            // A NUL byte marks a binary file, as in grep and ripgrep.
            if bytes.contains(&0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (index, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    hits.push((file.clone(), index + 1, line.to_owned()));
                }
            }
            if hits.len() > SEARCH_RESULTS_MAX {
                truncated = true;
                break;
            }
        }
        hits.sort();
        hits.truncate(SEARCH_RESULTS_MAX);
        if hits.is_empty() && !truncated {
            return ok("No matches found");
        }
        let mut lines: Vec<String> = hits
            .iter()
            .map(|(file, line_number, text)| format!("{}:{line_number}:{text}", file.display()))
            .collect();
        if truncated {
            lines.push(format!("(results truncated at {SEARCH_RESULTS_MAX})"));
        }
        ok(lines.join("\n"))
    }

    fn scratch_read(&self, context: &ToolContext, input: ScratchpadReadInput) -> ToolOutput {
        let key = match ScratchKey::parse(&input.key) {
            Ok(key) => key,
            Err(failure) => return error(failure.to_string()),
        };
        match self.scratchpad.read(&context.agent_id, &key) {
            Ok(Some(bytes)) => ok(String::from_utf8_lossy(&bytes).into_owned()),
            Ok(None) => error(format!("scratch key {key} does not exist")),
            Err(failure) => error(failure.to_string()),
        }
    }

    fn scratch_write(&self, context: &ToolContext, input: ScratchpadWriteInput) -> ToolOutput {
        let key = match ScratchKey::parse(&input.key) {
            Ok(key) => key,
            Err(failure) => return error(failure.to_string()),
        };
        match self
            .scratchpad
            .write(&context.agent_id, &key, input.content.as_bytes())
        {
            Ok(WriteOutcome::Fresh) => ok(format!(
                "wrote {} bytes to scratch key {key}",
                input.content.len()
            )),
            Ok(WriteOutcome::Overwrote { previous_writer }) => ok(format!(
                "wrote {} bytes to scratch key {key}, overwriting a version you had not read \
                 (written by {previous_writer}); their update is lost",
                input.content.len()
            )),
            Err(failure) => error(failure.to_string()),
        }
    }

    /// Every file under `root`, depth first in name order, without following symlinks
    /// or entering `.git`. Symlinks are listed as entries but never descended.
    fn walk_files(&self, root: &Path) -> Result<Walk, String> {
        let meta = self
            .world
            .disk
            .metadata(root)
            .map_err(|failure| describe_io(root, &failure))?;
        if meta.kind != FileKind::Dir {
            return Err(format!("{} is not a directory", root.display()));
        }
        let mut walk = Walk::default();
        let mut pending: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
        let mut entries_visited: usize = 0;
        while let Some((dir, depth)) = pending.pop() {
            let Ok(entries) = self.world.disk.list_dir(&dir) else {
                // An unreadable subdirectory is skipped, as find and ripgrep do.
                continue;
            };
            for entry in entries {
                entries_visited += 1;
                if entries_visited > WALK_ENTRIES_MAX {
                    walk.truncated = true;
                    return Ok(walk);
                }
                let Ok(meta) = self.world.disk.metadata(&entry) else {
                    continue;
                };
                match meta.kind {
                    FileKind::Dir => {
                        if entry.file_name().is_some_and(|name| name == ".git") {
                            continue;
                        }
                        if depth + 1 >= WALK_DEPTH_MAX {
                            walk.truncated = true;
                            continue;
                        }
                        pending.push((entry, depth + 1));
                    }
                    FileKind::File | FileKind::Symlink => walk.files.push(entry),
                    FileKind::Other => {}
                }
            }
        }
        walk.files.sort();
        Ok(walk)
    }
}

#[derive(Debug, Default)]
struct Walk {
    files: Vec<PathBuf>,
    truncated: bool,
}

impl Tools for StandardTools {
    fn call(&self, context: ToolContext, call: ToolCall) -> BoxFuture<'static, ToolOutput> {
        let tools = self.clone();
        Box::pin(async move { tools.run(context, call).await })
    }
}
