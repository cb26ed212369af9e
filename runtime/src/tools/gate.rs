//! The tool gate: the checks every tool call passes before it reaches any [`Tools`].
//!
//! Production wraps [`StandardTools`](super::StandardTools) in a [`ToolGate`]; the
//! simulator wraps its scripted tools in the same gate, so both get the same checks.
//! In order, for one call:
//!
//! 1. **Surface** (invariant 9): an unknown tool name, or a tool not on the caller's
//!    [`ToolSurface`], is refused and never reaches the inner tools.
//! 2. **Input**: the standard tools' inputs are parsed here (the same parser the
//!    tools use); bad input is refused before any effect.
//! 3. **Confinement** (invariant 7): a Write or Edit must land inside its writer's
//!    root: the caller's worktree when it works in one, else one of the gate's
//!    writable roots (the session and workspace roots, see
//!    [`ToolGate::with_writable_roots`]). A target outside is refused, and so is one
//!    whose path passes through a symlink below that root (a symlinked directory
//!    inside the root could point anywhere).
//! 4. **Lost updates** (invariant 6): the gate remembers, per agent and file, the
//!    version (FNV-1a digest and length) it last read or wrote. A Write or Edit of an
//!    existing file whose current version differs — or that the agent never read — is
//!    journaled as [`RuntimeEvent::WriteModifiedSinceRead`], and refused when
//!    [`Profile::refuses_write_modified_since_read`] (claude-code, hardened). Creating
//!    a new file is always fine. A `ScratchpadWrite` over a version the agent never
//!    saw is refused under [`ScratchOverwritePolicy::Refuse`] (hardened); under
//!    `Report` it goes through and the [`Scratchpad`] journals the overwrite.
//!
//! Every refusal is journaled as [`RuntimeEvent::ToolCallRefused`] and returned to the
//! model as an error output.
//!
//! Concurrency: the gate is used through `&self`. Its version table sits behind a
//! `std` mutex held only for lookups, never across an `.await`. Calls that touch one
//! file (or scratch key) are serialized by a per-path async lock held from the check
//! through the inner call to the recording of the new version: otherwise two agents
//! could both pass the check and both write, and one update would be lost unreported.
//! Changes made outside the gate (a Bash command, another process) are still caught,
//! because the check compares against the file's current content.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use foldhash::fast::FixedState;

use super::input::{resolve_path, ToolInput};
use super::surface::{ToolName, ToolSurface};
#[cfg(feature = "defects")]
use crate::defects::{Defect, Defects};
use crate::digest::Fnv1a64;
use crate::event::RuntimeEvent;
use crate::ipc::{ScratchKey, Scratchpad};
use crate::isolation::{contains, normalize, within};
use crate::probe::Probe;
use crate::profile::{Profile, ScratchOverwritePolicy};
use crate::world::{FileKind, ToolCall, ToolContext, ToolOutput, Tools, World};

/// Who is calling a tool, with what rights, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallContext {
    /// The calling agent's id (`coordinator` or a task id).
    pub agent_id: String,
    /// The tools the caller may use.
    pub surface: ToolSurface,
    /// The directory relative paths resolve against.
    pub cwd: PathBuf,
    /// The caller's worktree, if it works in one: writes must stay inside it.
    pub worktree_root: Option<PathBuf>,
}

/// A file's content fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    len_bytes: usize,
    digest: u64,
}

/// What the disk holds at a path right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Observed {
    /// Nothing.
    Absent,
    /// A readable file with this content.
    Present(Version),
    /// A directory, a symlink or another kind of entry: no version to compare. A
    /// write to it is the inner tool's to refuse, with its own reason.
    NotAFile,
    /// A file that could not be read (an I/O error): whether it changed is unknown.
    Unreadable,
}

/// The gate in front of a [`Tools`]. See the module docs for the checks.
#[derive(Debug)]
pub struct ToolGate {
    world: World,
    profile: Profile,
    inner: Arc<dyn Tools>,
    scratchpad: Option<Arc<Scratchpad>>,
    /// Where an agent without a worktree may write: the session and workspace
    /// roots. Empty: such agents are not confined (a gate without roots).
    writable_roots: Vec<PathBuf>,
    /// Defect `unchecked-tool-surface`: the surface check is skipped.
    #[cfg(feature = "defects")]
    surface_unchecked: bool,
    /// Defect `unconfined-writes`: the writable-roots check is skipped.
    #[cfg(feature = "defects")]
    roots_unchecked: bool,
    /// agent → path → what that agent last saw there (`None`: it saw it absent).
    /// By agent first: a call looks up its own agent's paths, and an ended agent's
    /// go in one removal. The agents' map is hashed (fixed seed, never iterated):
    /// a session of a thousand agents would otherwise compare the agent's id with
    /// some ten others on every call.
    seen: Mutex<HashMap<String, BTreeMap<PathBuf, Option<Version>>, FixedState>>,
    /// One async lock per path with a call in flight; entries go when unused.
    path_locks: Mutex<BTreeMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

/// Why a call is refused, before it becomes the event and the error text.
struct Refusal(String);

/// Why a write would replace a version its writer has not seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unseen {
    /// The writer read an older version.
    Changed,
    /// The writer never read the file (or saw it absent).
    NeverRead,
    /// The file is there but could not be read to compare: the check fails
    /// closed, since a write it cannot verify may land over an unseen version.
    Unverifiable,
}

impl ToolGate {
    /// A gate under `profile` in front of `inner`, reading file versions and
    /// journaling through `world`. Scratchpad checks need [`ToolGate::with_scratchpad`].
    pub fn new(world: World, profile: Profile, inner: Arc<dyn Tools>) -> Self {
        Self {
            world,
            profile,
            inner,
            scratchpad: None,
            writable_roots: Vec::new(),
            #[cfg(feature = "defects")]
            surface_unchecked: false,
            #[cfg(feature = "defects")]
            roots_unchecked: false,
            seen: Mutex::new(HashMap::default()),
            path_locks: Mutex::new(BTreeMap::new()),
        }
    }

    /// Tracks scratchpad versions on `scratchpad` (the one the inner tools use).
    /// Without it, under [`ScratchOverwritePolicy::Refuse`] every `ScratchpadWrite`
    /// is refused, since the gate cannot tell a lost update from a fresh write.
    pub fn with_scratchpad(mut self, scratchpad: Arc<Scratchpad>) -> Self {
        self.scratchpad = Some(scratchpad);
        self
    }

    /// Confines the writes of agents without a worktree to `roots` (the session
    /// root and the workspace): a Write or Edit whose target lies in none of them,
    /// or that passes through a symlink below the one it lies in, is refused.
    /// Without roots such agents may write anywhere; a session always sets them.
    ///
    /// A relative root (a working directory of `.`) admits relative targets only:
    /// where an absolute target lies relative to it is the process's business, and
    /// the gate does not guess. Give the session an absolute working directory for
    /// absolute paths in the workspace to be writable.
    pub fn with_writable_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        self.writable_roots.clear();
        for root in roots {
            // A session's working directory is often its repository too.
            if !self.writable_roots.contains(&root) {
                self.writable_roots.push(root);
            }
        }
        self
    }

    /// The gate with `defects` switched on (for proving the simulator's checkers;
    /// never in production). `unchecked-tool-surface` and `unconfined-writes`
    /// concern the gate.
    #[cfg(feature = "defects")]
    pub fn with_defects(mut self, defects: &Defects) -> Self {
        self.surface_unchecked = defects.has(Defect::UncheckedToolSurface);
        self.roots_unchecked = defects.has(Defect::UnconfinedWrites);
        self
    }

    /// Forgets every version `agent_id` has seen (call when the agent ends).
    pub fn forget_agent(&self, agent_id: &str) {
        self.seen
            .lock()
            .expect("gate versions poisoned")
            .remove(agent_id);
    }

    /// Checks `call` and, if it passes, runs it on the inner tools.
    pub async fn call(&self, context: ToolCallContext, call: ToolCall) -> ToolOutput {
        let Some(tool) = ToolName::parse(&call.name) else {
            Probe::ToolUnknownRefused.reach(&*self.world.journal);
            return self.refuse(&context, &call, format!("unknown tool {:?}", call.name));
        };
        let allowed = context.surface.allows(tool);
        // Defect `unchecked-tool-surface`: every known tool passes.
        #[cfg(feature = "defects")]
        let allowed = allowed || self.surface_unchecked;
        if !allowed {
            Probe::ToolSurfaceRefused.reach(&*self.world.journal);
            return self.refuse(
                &context,
                &call,
                format!(
                    "tool {tool} is not on the tool surface of {}",
                    context.agent_id
                ),
            );
        }
        let input = match ToolInput::parse(tool, &call.input) {
            Ok(input) => input,
            Err(failure) => {
                Probe::ToolInputRefused.reach(&*self.world.journal);
                return self.refuse(&context, &call, failure.to_string());
            }
        };
        match input {
            Some(ToolInput::Read(input)) => {
                let path = resolve_path(&context.cwd, &input.file_path);
                self.tracked_read(&context, call, path).await
            }
            Some(ToolInput::Write(input)) => {
                let path = resolve_path(&context.cwd, &input.file_path);
                self.tracked_write(&context, call, path).await
            }
            Some(ToolInput::Edit(input)) => {
                let path = resolve_path(&context.cwd, &input.file_path);
                self.tracked_write(&context, call, path).await
            }
            Some(ToolInput::ScratchpadRead(input)) => match self.scratch_path(&input.key) {
                Ok(Some(path)) => self.tracked_read(&context, call, path).await,
                Ok(None) => self.pass(&context, call).await,
                Err(Refusal(reason)) => self.refuse(&context, &call, reason),
            },
            Some(ToolInput::ScratchpadWrite(input)) => match self.scratch_path(&input.key) {
                Ok(Some(path)) => self.tracked_scratch_write(&context, call, path).await,
                Ok(None) => match self.profile.scratch_overwrite_policy() {
                    ScratchOverwritePolicy::Report => self.pass(&context, call).await,
                    ScratchOverwritePolicy::Refuse => self.refuse(
                        &context,
                        &call,
                        "the gate has no scratchpad to check this write against".to_owned(),
                    ),
                },
                Err(Refusal(reason)) => self.refuse(&context, &call, reason),
            },
            // Bash, Glob, Grep and the coordination tools: nothing more to check here.
            _ => self.pass(&context, call).await,
        }
    }

    fn refuse(&self, context: &ToolCallContext, call: &ToolCall, reason: String) -> ToolOutput {
        self.world.journal.record(RuntimeEvent::ToolCallRefused {
            agent: context.agent_id.clone(),
            tool: call.name.clone(),
            reason: reason.clone(),
        });
        ToolOutput {
            content: format!("refused: {reason}"),
            is_error: true,
        }
    }

    /// Runs a write and, if it succeeded, records the version it left as the one the
    /// writer has seen.
    async fn pass_and_record(
        &self,
        context: &ToolCallContext,
        call: ToolCall,
        path: &Path,
    ) -> ToolOutput {
        let output = self.pass(context, call).await;
        if !output.is_error {
            let after = self.observe(path);
            self.record(&context.agent_id, path, after);
        }
        output
    }

    async fn pass(&self, context: &ToolCallContext, call: ToolCall) -> ToolOutput {
        let inner_context = ToolContext {
            agent_id: context.agent_id.clone(),
            cwd: context.cwd.clone(),
        };
        self.inner.call(inner_context, call).await
    }

    /// The file behind a scratch key, if the gate tracks a scratchpad.
    fn scratch_path(&self, key: &str) -> Result<Option<PathBuf>, Refusal> {
        let key = ScratchKey::parse(key).map_err(|failure| Refusal(failure.to_string()))?;
        Ok(self
            .scratchpad
            .as_ref()
            .map(|scratchpad| scratchpad.path_of(&key)))
    }

    async fn tracked_read(
        &self,
        context: &ToolCallContext,
        call: ToolCall,
        path: PathBuf,
    ) -> ToolOutput {
        let lock = self.lock_path(&path);
        let guard = lock.lock().await;
        let output = self.pass(context, call).await;
        let after = self.observe(&path);
        // A failed read taught the agent nothing, unless it learnt the file is absent.
        if !output.is_error || after == Observed::Absent {
            self.record(&context.agent_id, &path, after);
        }
        drop(guard);
        self.unlock_path(&path, lock);
        output
    }

    async fn tracked_write(
        &self,
        context: &ToolCallContext,
        call: ToolCall,
        path: PathBuf,
    ) -> ToolOutput {
        if let Err((probe, Refusal(reason))) = self.check_confined(context, &path) {
            probe.reach(&*self.world.journal);
            return self.refuse(context, &call, reason);
        }
        let lock = self.lock_path(&path);
        let guard = lock.lock().await;
        let output = match self.check_unseen(&context.agent_id, &path) {
            Some(unseen) => {
                let refused = self.profile.refuses_write_modified_since_read();
                self.world
                    .journal
                    .record(RuntimeEvent::WriteModifiedSinceRead {
                        agent: context.agent_id.clone(),
                        path: path.clone(),
                        refused,
                    });
                let probe = match refused {
                    true => Probe::WriteUnseenRefused,
                    false => Probe::WriteUnseenReported,
                };
                probe.reach(&*self.world.journal);
                if refused {
                    let reason = match unseen {
                        Unseen::Changed => format!(
                            "{} has been modified since {} last read it; Read it again before \
                             writing",
                            path.display(),
                            context.agent_id
                        ),
                        Unseen::Unverifiable => format!(
                            "{} could not be read to check it for changes since {} read it; \
                             try again",
                            path.display(),
                            context.agent_id
                        ),
                        Unseen::NeverRead => format!(
                            "{} exists and {} has not read it; Read it before writing",
                            path.display(),
                            context.agent_id
                        ),
                    };
                    Some(self.refuse(context, &call, reason))
                } else {
                    None
                }
            }
            None => None,
        };
        let output = match output {
            Some(refused) => refused,
            None => self.pass_and_record(context, call, &path).await,
        };
        drop(guard);
        self.unlock_path(&path, lock);
        output
    }

    async fn tracked_scratch_write(
        &self,
        context: &ToolCallContext,
        call: ToolCall,
        path: PathBuf,
    ) -> ToolOutput {
        let lock = self.lock_path(&path);
        let guard = lock.lock().await;
        let unseen = self.check_unseen(&context.agent_id, &path).is_some();
        let output = if unseen
            && self.profile.scratch_overwrite_policy() == ScratchOverwritePolicy::Refuse
        {
            Probe::ScratchUnseenRefused.reach(&*self.world.journal);
            self.refuse(
                context,
                &call,
                format!(
                    "scratch file {} holds a version {} has not read; ScratchpadRead it first",
                    path.display(),
                    context.agent_id
                ),
            )
        } else {
            // Under Report the scratchpad itself journals the overwrite.
            self.pass_and_record(context, call, &path).await
        };
        drop(guard);
        self.unlock_path(&path, lock);
        output
    }

    /// Refuses a write by `context`'s agent to `path` outside its root (its worktree,
    /// else the writable root `path` lies in), or through a symlink below that root,
    /// with the probe the refusal reaches.
    fn check_confined(
        &self,
        context: &ToolCallContext,
        path: &Path,
    ) -> Result<(), (Probe, Refusal)> {
        let root = match &context.worktree_root {
            Some(worktree) => {
                if !contains(worktree, path) {
                    return Err((
                        Probe::WorktreeEscapeRefused,
                        Refusal(format!(
                            "{} is outside the worktree {}",
                            path.display(),
                            worktree.display()
                        )),
                    ));
                }
                worktree
            }
            None => match self.writable_root_of(path) {
                Ok(Some(root)) => root,
                Ok(None) => return Ok(()),
                Err(refusal) => return Err((Probe::RootsEscapeRefused, refusal)),
            },
        };
        self.check_no_symlink_below(root, path)
            .map_err(|refusal| (Probe::WriteSymlinkRefused, refusal))
    }

    /// The writable root `path` lies in: the outermost one, so that the symlink
    /// check covers every directory below a root. `Ok(None)` when the gate has no
    /// roots to confine to.
    fn writable_root_of(&self, path: &Path) -> Result<Option<&Path>, Refusal> {
        // Defect `unconfined-writes`: every target counts as inside.
        #[cfg(feature = "defects")]
        if self.roots_unchecked {
            return Ok(None);
        }
        if self.writable_roots.is_empty() {
            return Ok(None);
        }
        let outermost = self
            .writable_roots
            .iter()
            .filter(|root| within(root, path))
            .min_by_key(|root| root.components().count());
        match outermost {
            Some(root) => Ok(Some(root)),
            None => {
                let roots: Vec<String> = self
                    .writable_roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect();
                Err(Refusal(format!(
                    "{} is outside the session and workspace roots ({}); write inside them",
                    path.display(),
                    roots.join(", ")
                )))
            }
        }
    }

    /// Refuses a write to `path` (inside `root`) that passes through a symlink below
    /// `root`: a symlinked directory inside the root could point anywhere, and the
    /// disk would follow it. Each existing component from `root` down is asked for;
    /// the walk stops where nothing exists yet, as the write will create the rest.
    fn check_no_symlink_below(&self, root: &Path, path: &Path) -> Result<(), Refusal> {
        let (Some(root), Some(target)) = (normalize(root), normalize(path)) else {
            return Err(Refusal(format!(
                "{} or its root {} is not a plain path",
                path.display(),
                root.display()
            )));
        };
        let relative = target.strip_prefix(&root).unwrap_or(&target);
        let mut walked = root.clone();
        for component in relative.components() {
            walked.push(component);
            match self.world.disk.metadata(&walked) {
                Ok(meta) if meta.kind == FileKind::Symlink => {
                    return Err(Refusal(format!(
                        "{} passes through the symlink {}; writes never go through symlinks",
                        path.display(),
                        walked.display()
                    )))
                }
                Ok(_) => {}
                // Nothing further exists yet: the write will create it.
                Err(failure) if failure.kind() == io::ErrorKind::NotFound => break,
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// Whether a write by `agent` to `path` would replace a version the agent has not
    /// seen; `None` when the write is safe (no file there, or the version it saw).
    fn check_unseen(&self, agent: &str, path: &Path) -> Option<Unseen> {
        let current = match self.observe(path) {
            Observed::Present(current) => current,
            Observed::Absent | Observed::NotAFile => return None,
            Observed::Unreadable => return Some(Unseen::Unverifiable),
        };
        let seen = self
            .seen
            .lock()
            .expect("gate versions poisoned")
            .get(agent)
            .and_then(|paths| paths.get(path))
            .copied();
        match seen {
            Some(Some(version)) if version == current => None,
            Some(Some(_)) => Some(Unseen::Changed),
            Some(None) | None => Some(Unseen::NeverRead),
        }
    }

    fn observe(&self, path: &Path) -> Observed {
        match self.world.disk.metadata(path) {
            Ok(meta) if meta.kind == FileKind::File => {}
            Ok(_) => return Observed::NotAFile,
            Err(failure) if failure.kind() == io::ErrorKind::NotFound => return Observed::Absent,
            Err(_) => return Observed::Unreadable,
        }
        match self.world.disk.read(path) {
            Ok(bytes) => Observed::Present(Version {
                len_bytes: bytes.len(),
                digest: Fnv1a64::digest(&bytes),
            }),
            Err(failure) if failure.kind() == io::ErrorKind::NotFound => Observed::Absent,
            Err(_) => Observed::Unreadable,
        }
    }

    fn record(&self, agent: &str, path: &Path, observed: Observed) {
        let mut seen = self.seen.lock().expect("gate versions poisoned");
        let version = match observed {
            Observed::Absent => None,
            Observed::Present(version) => Some(version),
            Observed::NotAFile | Observed::Unreadable => {
                if let Some(paths) = seen.get_mut(agent) {
                    paths.remove(path);
                }
                return;
            }
        };
        let paths = match seen.get_mut(agent) {
            Some(paths) => paths,
            None => seen.entry(agent.to_owned()).or_default(),
        };
        paths.insert(path.to_path_buf(), version);
    }

    fn lock_path(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.path_locks
            .lock()
            .expect("gate path locks poisoned")
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }

    fn unlock_path(&self, path: &Path, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.path_locks.lock().expect("gate path locks poisoned");
        // Two references (the table's and ours) mean no other call waits on it.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(path);
        }
    }
}
