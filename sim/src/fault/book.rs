//! The fault book: a run's fault schedule and what has fired, shared by every part
//! of the world that injects faults (the model, the disk, the adversary task).

use crate::label_map::LabelMap;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;

use super::catalogue::Fault;
use crate::model::wildcard_match;
use crate::trace::{Name, SimEvent, Trace};

/// The label of the coordinator in fault patterns and the trace.
pub const COORDINATOR_LABEL: &str = "coordinator";

/// The schedule and its bookkeeping. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct FaultBook {
    inner: Arc<Mutex<BookState>>,
    trace: Trace,
    /// Signalled when a coordinator crash placed at a model call or a disk write
    /// fires: the model adapter or the disk sees it, the boot carries out the power
    /// cut. A permit is kept if the boot is not waiting yet.
    power_cut: Arc<tokio::sync::Notify>,
    /// Set from a power cut placed in the middle of a disk write until the next
    /// boot: the host is down, so nothing more reaches its disk.
    power_out: Arc<AtomicBool>,
}

#[derive(Debug)]
struct BookState {
    /// Shared with every caller of [`FaultBook::schedule`]: the disk consults it on
    /// every operation.
    schedule: Arc<Vec<Fault>>,
    fired: Vec<bool>,
    healed: bool,
    /// Model calls so far per agent label.
    calls: LabelMap<String, u32>,
    /// Worker prompt by task id, learnt from the coordinator's launch results.
    task_prompts: BTreeMap<String, String>,
    /// Task ids in the order their launches were learnt.
    launch_order: Vec<String>,
    /// Background shells any agent's conversation started, as (task id, command),
    /// in the order they were learnt.
    shells: Vec<(String, String)>,
    /// Worker prompt by spawn description, from the coordinator's script.
    description_prompts: BTreeMap<String, String>,
    /// Workers that die right after their next output write.
    armed_crashes: BTreeSet<String>,
    /// Output files created so far.
    outputs_created: u32,
    /// The worktrees made so far, in order.
    worktrees_made: Vec<PathBuf>,
    /// Task ids whose ending is to be repeated.
    duplicate_requests: Vec<String>,
    /// Stale lock files that come back after a break, and how many more times.
    lock_returns: BTreeMap<PathBuf, u32>,
    /// Stale lock files that a racing writer takes between a contender's read and
    /// its move aside, with the index of their `stale-lock` fault.
    lock_races: BTreeMap<PathBuf, usize>,
    /// Output files whose symlink is swapped in once the runtime next looks at
    /// them, with their spawn's number.
    armed_output_races: Vec<(PathBuf, u32)>,
}

impl FaultBook {
    /// A book for `schedule`, firing into `trace`. `description_prompts` maps each
    /// spawn description in the scripts to the worker prompt it launches.
    pub fn new(
        schedule: Vec<Fault>,
        description_prompts: BTreeMap<String, String>,
        trace: Trace,
    ) -> Self {
        let fired = vec![false; schedule.len()];
        Self {
            inner: Arc::new(Mutex::new(BookState {
                schedule: Arc::new(schedule),
                fired,
                healed: false,
                calls: LabelMap::default(),
                task_prompts: BTreeMap::new(),
                launch_order: Vec::new(),
                shells: Vec::new(),
                description_prompts,
                armed_crashes: BTreeSet::new(),
                outputs_created: 0,
                worktrees_made: Vec::new(),
                duplicate_requests: Vec::new(),
                lock_returns: BTreeMap::new(),
                lock_races: BTreeMap::new(),
                armed_output_races: Vec::new(),
            })),
            trace,
            power_cut: Arc::new(tokio::sync::Notify::new()),
            power_out: Arc::new(AtomicBool::new(false)),
        }
    }

    fn state(&self) -> MutexGuard<'_, BookState> {
        self.inner.lock().expect("fault book poisoned")
    }

    /// The schedule.
    pub fn schedule(&self) -> Arc<Vec<Fault>> {
        Arc::clone(&self.state().schedule)
    }

    /// Stops every later fault: the liveness phase begins.
    pub fn heal(&self) {
        let mut state = self.state();
        if !state.healed {
            state.healed = true;
            drop(state);
            self.trace.push("sim", SimEvent::Healed);
        }
    }

    /// Whether any fault has fired.
    pub fn fired_any(&self) -> bool {
        self.state().fired.iter().any(|fired| *fired)
    }

    /// Whether the book has healed.
    pub fn healed(&self) -> bool {
        self.state().healed
    }

    /// Whether some fault `pick` accepts can still fire: it has not fired, and the
    /// book has not healed.
    pub fn may_fire(&self, mut pick: impl FnMut(&Fault) -> bool) -> bool {
        let state = self.state();
        !state.healed
            && (0..state.schedule.len()).any(|i| !state.fired[i] && pick(&state.schedule[i]))
    }

    /// Finds the first unfired fault `pick` accepts, marks it fired and records it.
    /// Returns its index and a copy. Nothing fires after [`FaultBook::heal`].
    pub fn fire(
        &self,
        detail: impl FnOnce(&Fault) -> String,
        pick: impl FnMut(&Fault) -> bool,
    ) -> Option<(usize, Fault)> {
        self.fire_struck(None, detail, pick)
    }

    /// [`FaultBook::fire`] for a fault that strikes one agent's model calls: the
    /// record names `agent` (its label), so the trace says whose script it may
    /// cut short.
    pub fn fire_on(
        &self,
        agent: &str,
        detail: impl FnOnce(&Fault) -> String,
        pick: impl FnMut(&Fault) -> bool,
    ) -> Option<(usize, Fault)> {
        self.fire_struck(Some(agent), detail, pick)
    }

    fn fire_struck(
        &self,
        agent: Option<&str>,
        detail: impl FnOnce(&Fault) -> String,
        mut pick: impl FnMut(&Fault) -> bool,
    ) -> Option<(usize, Fault)> {
        let mut state = self.state();
        if state.healed {
            return None;
        }
        let index =
            (0..state.schedule.len()).find(|&i| !state.fired[i] && pick(&state.schedule[i]))?;
        state.fired[index] = true;
        let fault = state.schedule[index].clone();
        drop(state);
        self.record_struck(index, &fault, detail(&fault), agent);
        Some((index, fault))
    }

    /// Fires fault `index` if it has not fired and the book has not healed.
    /// Returns whether it fired.
    pub fn fire_index(&self, index: usize, detail: String) -> bool {
        let mut state = self.state();
        if state.healed || state.fired.get(index) != Some(&false) {
            return false;
        }
        state.fired[index] = true;
        let fault = state.schedule[index].clone();
        drop(state);
        self.record(index, &fault, detail);
        true
    }

    /// Records that fault `index` fired.
    pub fn record(&self, index: usize, fault: &Fault, detail: String) {
        self.record_struck(index, fault, detail, None);
    }

    fn record_struck(&self, index: usize, fault: &Fault, detail: String, agent: Option<&str>) {
        self.trace.push(
            "sim",
            SimEvent::FaultFired {
                fault: index,
                kind: fault.kind(),
                detail,
                agent: agent.map(Name::new),
            },
        );
    }

    /// Counts a model call of `agent` and returns its number (from 1).
    pub fn count_call(&self, agent: &str) -> u32 {
        let mut state = self.state();
        match state.calls.get_mut(agent) {
            Some(count) => {
                *count += 1;
                *count
            }
            None => {
                state.calls.insert(agent.to_owned(), 1);
                1
            }
        }
    }

    /// Model calls `agent` has made so far.
    pub fn calls_of(&self, agent: &str) -> u32 {
        self.state().calls.get(agent).copied().unwrap_or(0)
    }

    /// Asks the coordinator host to lose power now: a coordinator crash placed at
    /// a model call fired, and the call it fired at is held unanswered (or, through
    /// [`FaultBook::cut_power_mid_write`], one placed at a disk write).
    pub fn cut_power(&self) {
        self.power_cut.notify_one();
    }

    /// Cuts the power in the middle of a disk write: as [`FaultBook::cut_power`],
    /// and every disk operation fails from now until [`FaultBook::restore_power`].
    pub fn cut_power_mid_write(&self) {
        self.power_out.store(true, Ordering::Relaxed);
        self.cut_power();
    }

    /// Whether the power was cut in the middle of a disk write and the host is not
    /// up again yet.
    pub fn power_is_out(&self) -> bool {
        self.power_out.load(Ordering::Relaxed)
    }

    /// Brings the host up again after a power cut: its disk works, and a cut the
    /// boot that ended never waited for is forgotten.
    pub fn restore_power(&self) {
        self.power_out.store(false, Ordering::Relaxed);
        let _ = self.power_cut.notified().now_or_never();
    }

    /// Completes once [`FaultBook::cut_power`] was called (at once if it was before
    /// anyone waited).
    pub async fn power_cut(&self) {
        self.power_cut.notified().await;
    }

    /// Learns that task `task_id` was launched with `description`.
    pub fn learn_launch(&self, task_id: &str, description: &str) {
        let mut state = self.state();
        // The coordinator's every call shows every launch so far: a task learned
        // before keeps the prompt its one description gave it.
        if state.task_prompts.contains_key(task_id) {
            return;
        }
        if let Some(prompt) = state.description_prompts.get(description).cloned() {
            state.task_prompts.insert(task_id.to_owned(), prompt);
            state.launch_order.push(task_id.to_owned());
        }
    }

    /// Learns that some agent's conversation started background shell `task_id`
    /// running `command`.
    pub fn learn_shell(&self, task_id: &str, command: &str) {
        let mut state = self.state();
        if !state.shells.iter().any(|(id, _)| id == task_id) {
            state.shells.push((task_id.to_owned(), command.to_owned()));
        }
    }

    /// The latest background shell any agent started whose command matches the
    /// `*` pattern, if any.
    pub fn shell_matching(&self, pattern: &str) -> Option<String> {
        self.state()
            .shells
            .iter()
            .rev()
            .find(|(_, command)| wildcard_match(pattern, command))
            .map(|(id, _)| id.clone())
    }

    /// The first launched task whose worker prompt matches the `*` pattern, if any.
    pub fn task_matching(&self, pattern: &str) -> Option<String> {
        let state = self.state();
        state
            .launch_order
            .iter()
            .find(|id| {
                state
                    .task_prompts
                    .get(*id)
                    .is_some_and(|prompt| wildcard_match(pattern, prompt))
            })
            .cloned()
    }

    /// The worker prompt of task `task_id`, if known.
    pub fn prompt_of(&self, task_id: &str) -> Option<String> {
        self.state().task_prompts.get(task_id).cloned()
    }

    /// Arms a crash of worker `prompt` right after its next output write.
    pub fn arm_crash(&self, prompt: &str) {
        self.state().armed_crashes.insert(prompt.to_owned());
    }

    /// Whether task `task_id`'s worker is armed to crash; disarms it.
    pub fn take_armed_crash(&self, task_id: &str) -> bool {
        let mut state = self.state();
        if state.healed {
            return false;
        }
        let Some(prompt) = state.task_prompts.get(task_id).cloned() else {
            return false;
        };
        state.armed_crashes.remove(&prompt)
    }

    /// Arms the stale lock file `lock` to come back `returns` times after it is
    /// broken.
    pub fn arm_lock_returns(&self, lock: &Path, returns: u32) {
        if returns > 0 {
            self.state().lock_returns.insert(lock.to_owned(), returns);
        }
    }

    /// Whether the stale lock file `lock`, just broken, comes back; counts the
    /// return.
    pub fn take_lock_return(&self, lock: &Path) -> bool {
        let mut state = self.state();
        if state.healed {
            return false;
        }
        match state.lock_returns.get_mut(lock) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        }
    }

    /// Arms the stale lock file `lock`, left by fault `index`, to be taken by a
    /// racing writer at a contender's first read of it.
    pub fn arm_lock_race(&self, lock: &Path, index: usize) {
        self.state().lock_races.insert(lock.to_owned(), index);
    }

    /// Whether a racing writer takes the stale lock file `lock` now, which a
    /// contender has just read; records the fault once, and disarms it.
    pub fn take_lock_race(&self, lock: &Path) -> bool {
        let mut state = self.state();
        if state.healed {
            return false;
        }
        let Some(index) = state.lock_races.remove(lock) else {
            return false;
        };
        let fault = state.schedule[index].clone();
        drop(state);
        self.record(
            index,
            &fault,
            format!(
                "a racing writer breaks {} and takes it between a contender's read and its move aside",
                lock.display()
            ),
        );
        true
    }

    /// Counts a created output file, returning its number (from 1).
    pub fn count_output(&self) -> u32 {
        let mut state = self.state();
        state.outputs_created += 1;
        state.outputs_created
    }

    /// Arms the check-then-use race of the output file `path`, the nth created: see
    /// [`Fault::SymlinkAtOutput`]'s `after_check`.
    pub fn arm_output_race(&self, path: &Path, nth: u32) {
        self.state().armed_output_races.push((path.to_owned(), nth));
    }

    /// Disarms the race armed at `path`, returning its output file's number.
    pub fn take_output_race(&self, path: &Path) -> Option<u32> {
        let mut state = self.state();
        let at = state
            .armed_output_races
            .iter()
            .position(|(armed, _)| armed == path)?;
        Some(state.armed_output_races.remove(at).1)
    }

    /// Counts a worktree made at `path`, returning its number (from 1).
    pub fn count_worktree(&self, path: &Path) -> u32 {
        let mut state = self.state();
        state.worktrees_made.push(path.to_owned());
        u32::try_from(state.worktrees_made.len()).unwrap_or(u32::MAX)
    }

    /// Where the nth worktree of the run (from 1) was made, if it was.
    pub fn worktree_made(&self, nth: u32) -> Option<PathBuf> {
        let index = usize::try_from(nth.checked_sub(1)?).ok()?;
        self.state().worktrees_made.get(index).cloned()
    }

    /// Whether fault `index` can still fire: it has not fired, and the book has
    /// not healed. For an adapter that must act before it fires, and fires only
    /// once its action took.
    pub fn can_fire(&self, index: usize) -> bool {
        let state = self.state();
        !state.healed && state.fired.get(index) == Some(&false)
    }

    /// Asks for task `task_id`'s ending to be repeated.
    pub fn request_duplicate(&self, task_id: &str) {
        self.state().duplicate_requests.push(task_id.to_owned());
    }

    /// The repeats asked for so far, leaving none.
    pub fn take_duplicates(&self) -> Vec<String> {
        std::mem::take(&mut self.state().duplicate_requests)
    }
}

/// Whether `pattern` names `label`: `coordinator` names only the coordinator, any
/// other pattern is a `*` pattern over worker prompts.
pub fn names(pattern: &str, label: &str) -> bool {
    if label == COORDINATOR_LABEL || pattern == COORDINATOR_LABEL {
        return pattern == label;
    }
    wildcard_match(pattern, label)
}
