//! The range of every number a scenario carries, checked when it is loaded.
//!
//! A number out of its range is refused with the value's `file:line:column`, before
//! any run: a typo such as `size_bytes = 18446744073709551615` must not become an
//! allocation the host cannot make, a `run_limit_ms = 0` must not become a run that
//! checks nothing, and a token count near `u64::MAX` must not overflow the cost
//! meter's sums halfway through a sweep. Every range here is listed, with why, in
//! `docs/scenario-format.md` ("Ranges"); the two must be changed together.
//!
//! The upper bounds are generous for what scenarios model (minutes to hours of
//! virtual time, a few workers, messages of kilobytes) and keep every run's time
//! and memory bounded by the size of its file.

use super::locate::Step;
use super::{
    Comparison, CoordinatorCrashPoint, CrashPoint, DiskOpClass, Fault, FaultKind, LeadActionKind,
    Scenario,
};
use crate::model::{AgentScript, Latency, ScriptedTurn, ShellAnswer, Trigger};

/// The longest virtual duration any setting, latency or fault may carry: thirty
/// days, room for a recorded session that was resumed days later.
pub const VIRTUAL_MS_MAX: u64 = 30 * 24 * 3_600_000;
/// The most model turns one agent loop may take (`turns_max`), and the highest
/// call, spawn or launch number a fault or lead action may name.
pub const COUNT_MAX: u64 = 1_000_000;
/// The highest nth disk operation a disk fault may name.
pub const DISK_OPERATION_NTH_MAX: u64 = 1_000_000_000;
/// The most producers one `mailbox-producers` fault may start: each is a writer
/// task and a message the mailbox file then holds.
pub const PRODUCERS_MAX: u64 = 10_000;
/// The largest message an `oversize-message` fault may send: 512 times the
/// runtime's mailbox limit, and a size the host can copy into every request that
/// carries it.
pub const OVERSIZE_MESSAGE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// The most tokens one usage field or recorded prompt may carry: a thousand times
/// the largest context window, and small enough that no run's sums overflow.
pub const TOKENS_MAX: u64 = 1_000_000_000;
/// The least compaction threshold: below it, the summary that replaces a
/// conversation (its request alone is a few hundred tokens) would pass the
/// threshold again at once, and every turn would be a compaction.
pub const COMPACT_THRESHOLD_TOKENS_MIN: u64 = 1_000;
/// The least idle poll: a poll every few milliseconds is most of a run's work.
pub const IDLE_POLL_MS_MIN: u64 = 10;
/// The most idle polls one agent may make over a run and its liveness phase
/// (`(run_limit_ms + liveness_bound_ms) / idle_poll_ms`): each poll is work and a
/// trace entry, and teammates idling for a week at one poll a second took a
/// minute and 900 MB.
pub const IDLE_POLLS_MAX: u64 = 200_000;
/// The longest turmoil tick: coarser ticks round every wait up past what any
/// scenario times.
pub const TURMOIL_TICK_MS_MAX: u64 = 60_000;
/// The 5-minute cache TTL: forks staggered by this much or more find their
/// siblings' cache entries expired, so the staggered variant makes other calls
/// than the simultaneous one and the two are no longer a comparison.
pub const STAGGER_MS_LIMIT: u64 = 300_000;
/// The tools a teammate asks its lead about, as a permission request names them.
const PERMISSION_TOOLS: [&str; 3] = ["Bash", "Edit", "Write"];
/// The most faults swarm mode may draw for one seed.
pub const SWARM_FAULTS_MAX: u64 = 1_000;
/// The most envelopes and messages `traffic_min` may ask for.
pub const TRAFFIC_MIN_MAX: u64 = 1_000_000_000;
/// The most workers one `[[workers]]` table's `count` may stand for, and the most
/// calls one tool call's `count` may: ten times the largest sessions users report.
pub const AGENT_COUNT_MAX: u64 = 10_000;
/// The most times one turn may be played in a row (`repeat`).
pub const TURN_REPEAT_MAX: u64 = 100_000;
/// The most turns a scenario's scripts may hold once counts and repeats are
/// expanded, counting the turns that workers of one `count` share once: each is a
/// value in memory (a few hundred bytes) before the run starts.
pub const SCRIPTED_TURNS_MAX: u64 = 2_000_000;

/// The largest file a scenario's `[[files]]` may put in the workspace: eight times
/// the Read tool's 8 MiB cap, room to go past any tool's limit, and a size every
/// run holds in memory.
pub const WORKSPACE_FILE_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// The largest standard output a scripted shell answer may be repeated to: as large
/// as a workspace file, eight times TaskOutput's 8 MiB read limit.
pub const SHELL_STDOUT_BYTES_MAX: u64 = WORKSPACE_FILE_BYTES_MAX;

/// A number out of its range: where it is and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// The value's path in the scenario's tree.
    pub path: Vec<Step>,
    /// What was wrong and what was expected.
    pub message: String,
}

/// Where a check stands in the tree, and how to name a value under it.
struct At<'a> {
    path: &'a [Step],
}

impl At<'_> {
    /// Checks that `value` (at `key` under this path) is in `min..=max`.
    fn range(&self, key: &'static str, value: u64, min: u64, max: u64) -> Result<(), OutOfRange> {
        if (min..=max).contains(&value) {
            return Ok(());
        }
        Err(self.refuse(
            key,
            format!("`{key}` = {value} is out of range: expected {min} to {max}"),
        ))
    }

    fn refuse(&self, key: &'static str, message: String) -> OutOfRange {
        let mut path = self.path.to_vec();
        path.push(Step::Key(key));
        OutOfRange { path, message }
    }

    fn under(&self, steps: &[Step]) -> Vec<Step> {
        let mut path = self.path.to_vec();
        path.extend_from_slice(steps);
        path
    }
}

/// Checks every number of `scenario` against its documented range.
pub fn check(scenario: &Scenario) -> Result<(), OutOfRange> {
    check_settings(scenario)?;
    check_economics(scenario)?;
    let swarm = At {
        path: &[Step::Key("swarm")],
    };
    swarm.range(
        "faults_max",
        u64::from(scenario.swarm.faults_max),
        0,
        SWARM_FAULTS_MAX,
    )?;
    let expect = At {
        path: &[Step::Key("expect")],
    };
    expect.range(
        "traffic_min",
        scenario.expect.traffic_min,
        0,
        TRAFFIC_MIN_MAX,
    )?;
    for (index, action) in scenario.lead.iter().enumerate() {
        let at = At {
            path: &[Step::Key("lead"), Step::Index(index)],
        };
        at.range("after_call", u64::from(action.after_call), 1, COUNT_MAX)?;
        at.range("after_ms", action.after_ms, 0, VIRTUAL_MS_MAX)?;
        if action.message.is_some() && action.action != LeadActionKind::Redirect {
            return Err(at.refuse(
                "message",
                "`message` is a redirect's next input; only a `redirect` has one".to_owned(),
            ));
        }
        if let Some(tool) = &action.tool {
            if !action.action.answers_permission() {
                return Err(at.refuse(
                    "tool",
                    "`tool` names a permission request's tool; only a permission answer has one"
                        .to_owned(),
                ));
            }
            // Only the destructive tools ask: a request for another can never come.
            if !PERMISSION_TOOLS.contains(&tool.as_str()) {
                return Err(at.refuse(
                    "tool",
                    format!(
                        "`tool` = {tool:?} is no tool a teammate asks permission for: expected \
                         one of {}",
                        PERMISSION_TOOLS.join(", ")
                    ),
                ));
            }
        }
    }
    check_files(scenario)?;
    check_counts(scenario)?;
    let notifications_max = notifications_max(scenario);
    let coordinator_path = [Step::Key("coordinator")];
    check_script(
        &scenario.coordinator,
        &At {
            path: &coordinator_path,
        },
        notifications_max,
    )?;
    for (index, worker) in scenario.workers.iter().enumerate() {
        let path = [Step::Key("workers"), Step::Index(index)];
        check_script(worker, &At { path: &path }, notifications_max)?;
    }
    for (index, fault) in scenario.faults.iter().enumerate() {
        let path = [Step::Key("faults"), Step::Index(index)];
        check_fault(fault, &At { path: &path })?;
    }
    Ok(())
}

/// Each `[[files]]` entry: a path inside the workspace that no other entry and no
/// built-in file takes, and a size in range that its content can fill.
fn check_files(scenario: &Scenario) -> Result<(), OutOfRange> {
    for (index, file) in scenario.files.iter().enumerate() {
        let path = [Step::Key("files"), Step::Index(index)];
        let at = At { path: &path };
        if let Some(fault) = file.path_fault() {
            return Err(at.refuse("path", fault));
        }
        if scenario.files[..index]
            .iter()
            .any(|earlier| earlier.path == file.path)
        {
            return Err(at.refuse(
                "path",
                format!(
                    "`path` = {:?} names a file an earlier entry already holds",
                    file.path
                ),
            ));
        }
        let size_bytes = file.size_bytes.unwrap_or(file.content.len() as u64);
        at.range("size_bytes", size_bytes, 0, WORKSPACE_FILE_BYTES_MAX)?;
        if file.content.is_empty() && size_bytes > 0 {
            return Err(at.refuse(
                "content",
                "`content` is empty, so nothing can fill `size_bytes`".to_owned(),
            ));
        }
    }
    Ok(())
}

fn check_settings(scenario: &Scenario) -> Result<(), OutOfRange> {
    let settings = &scenario.settings;
    let at = At {
        path: &[Step::Key("settings")],
    };
    if let Some(deadline_ms) = settings.spawn_deadline_ms {
        at.range("spawn_deadline_ms", deadline_ms, 0, VIRTUAL_MS_MAX)?;
    }
    if let Some(poll_ms) = settings.idle_poll_ms {
        at.range("idle_poll_ms", poll_ms, IDLE_POLL_MS_MIN, VIRTUAL_MS_MAX)?;
    }
    let idle_poll_ms = settings.idle_poll_ms_or_default();
    at.range(
        "liveness_bound_ms",
        settings.liveness_bound_ms,
        1,
        VIRTUAL_MS_MAX,
    )?;
    at.range("run_limit_ms", settings.run_limit_ms, 1, VIRTUAL_MS_MAX)?;
    let run_ms = settings.run_limit_ms + settings.liveness_bound_ms;
    if run_ms / idle_poll_ms > IDLE_POLLS_MAX {
        return Err(at.refuse(
            "idle_poll_ms",
            format!(
                "`idle_poll_ms` = {} would let an idle agent poll {} times over \
                 run_limit_ms + liveness_bound_ms ({run_ms} ms): expected at most {} \
                 polls, so idle_poll_ms of at least {}, or a shorter run",
                idle_poll_ms,
                run_ms / idle_poll_ms,
                IDLE_POLLS_MAX,
                run_ms.div_ceil(IDLE_POLLS_MAX),
            ),
        ));
    }
    if let Some(turns_max) = settings.turns_max {
        at.range("turns_max", u64::from(turns_max), 1, COUNT_MAX)?;
    }
    at.range(
        "turmoil_tick_ms",
        settings.turmoil_tick_ms,
        1,
        TURMOIL_TICK_MS_MAX,
    )?;
    if let Some(size_bytes_max) = settings.output_bytes_max {
        at.range(
            "output_bytes_max",
            size_bytes_max,
            0,
            coord_runtime::ipc::OUTPUT_SIZE_BYTES_MAX_DEFAULT,
        )?;
    }
    if let Some(read_bytes_max) = settings.output_read_bytes_max {
        at.range(
            "output_read_bytes_max",
            read_bytes_max,
            1,
            coord_runtime::ipc::OUTPUT_READ_BYTES_MAX_DEFAULT,
        )?;
    }
    at.range("api_timeout_ms", settings.api_timeout_ms, 1, VIRTUAL_MS_MAX)?;
    if let Some(grace_ms) = settings.eviction_grace_ms {
        at.range("eviction_grace_ms", grace_ms, 0, VIRTUAL_MS_MAX)?;
    }
    if let Some(threshold_tokens) = settings.compact_threshold_tokens {
        at.range(
            "compact_threshold_tokens",
            threshold_tokens,
            COMPACT_THRESHOLD_TOKENS_MIN,
            TOKENS_MAX,
        )?;
    }
    Ok(())
}

fn check_economics(scenario: &Scenario) -> Result<(), OutOfRange> {
    let economics = &scenario.economics;
    let at = At {
        path: &[Step::Key("economics")],
    };
    if economics.stagger_ms >= STAGGER_MS_LIMIT {
        let comparison = match economics.compare {
            Some(Comparison::SimultaneousVsStaggered) => {
                " (simultaneous-vs-staggered would compare runs that make different calls)"
            }
            _ => "",
        };
        return Err(at.refuse(
            "stagger_ms",
            format!(
                "`stagger_ms` = {} is out of range: expected 0 to {}, below the 5-minute \
                 cache TTL, since forks sent that far apart find their siblings' cache \
                 entries expired{comparison}",
                economics.stagger_ms,
                STAGGER_MS_LIMIT - 1
            ),
        ));
    }
    if let Some(threshold_tokens) = economics.compact_earlier_threshold_tokens {
        at.range(
            "compact_earlier_threshold_tokens",
            threshold_tokens,
            COMPACT_THRESHOLD_TOKENS_MIN,
            TOKENS_MAX,
        )?;
    }
    Ok(())
}

/// Checks one agent's script. `notifications_max` is the most notifications any
/// agent of the scenario can receive.
fn check_script(
    script: &AgentScript,
    at: &At<'_>,
    notifications_max: u64,
) -> Result<(), OutOfRange> {
    if let Some(recorded) = &script.recorded_prompt {
        let path = at.under(&[Step::Key("recorded_prompt")]);
        let recorded_at = At { path: &path };
        recorded_at.range(
            "first_request_tokens",
            recorded.first_request_tokens,
            0,
            TOKENS_MAX,
        )?;
        recorded_at.range(
            "cached_before_tokens",
            recorded.cached_before_tokens,
            0,
            recorded.first_request_tokens,
        )?;
    }
    for (index, turn) in script.turns.iter().enumerate() {
        let path = at.under(&[Step::Key("turns"), Step::Index(index)]);
        check_turn(turn, &At { path: &path }, notifications_max)?;
        for (call_index, call) in turn.tool_calls.iter().enumerate() {
            if let Some(shell) = &call.shell {
                let shell_path = at.under(&[
                    Step::Key("turns"),
                    Step::Index(index),
                    Step::Key("tool_calls"),
                    Step::Index(call_index),
                    Step::Key("shell"),
                ]);
                check_shell_answer(shell, &At { path: &shell_path })?;
            }
        }
    }
    Ok(())
}

/// A scripted shell answer's output size: at most [`SHELL_STDOUT_BYTES_MAX`], and
/// a `stdout` to fill it.
fn check_shell_answer(shell: &ShellAnswer, at: &At<'_>) -> Result<(), OutOfRange> {
    let Some(size_bytes) = shell.stdout_size_bytes else {
        return Ok(());
    };
    at.range("stdout_size_bytes", size_bytes, 0, SHELL_STDOUT_BYTES_MAX)?;
    if shell.stdout.is_empty() && size_bytes > 0 {
        return Err(at.refuse(
            "stdout",
            "`stdout` is empty, so nothing can fill `stdout_size_bytes`".to_owned(),
        ));
    }
    Ok(())
}

/// Checks every `count` and `repeat` before [`super::expand`] acts on them: each in
/// its range, a counted worker's prompt numbered (or its workers would share one
/// prompt), and the turns they expand to within [`SCRIPTED_TURNS_MAX`].
fn check_counts(scenario: &Scenario) -> Result<(), OutOfRange> {
    let coordinator_path = [Step::Key("coordinator")];
    let coordinator_at = At {
        path: &coordinator_path,
    };
    if scenario.coordinator.count.is_some() {
        return Err(coordinator_at.refuse(
            "count",
            "the coordinator is one agent: `count` is for [[workers]] tables".to_owned(),
        ));
    }
    let mut scripted_turns = check_script_counts(&scenario.coordinator, &coordinator_at)?;
    for (index, worker) in scenario.workers.iter().enumerate() {
        let path = [Step::Key("workers"), Step::Index(index)];
        let at = At { path: &path };
        let turns = check_script_counts(worker, &at)?;
        let copies = match worker.count {
            None => 1,
            Some(count) => {
                at.range("count", u64::from(count), 1, AGENT_COUNT_MAX)?;
                if count > 1 && !worker.prompt.contains(super::expand::NUMBER_PLACEHOLDER) {
                    return Err(at.refuse(
                        "count",
                        format!(
                            "`count` = {count} makes {count} workers of one prompt: put `{}` \
                             in the prompt to number them",
                            super::expand::NUMBER_PLACEHOLDER
                        ),
                    ));
                }
                // Workers of one count share their turns unless the turns name the
                // worker's number.
                let numbered = serde_json::to_string(&*worker.turns)
                    .is_ok_and(|text| text.contains(super::expand::NUMBER_PLACEHOLDER));
                if numbered {
                    u64::from(count)
                } else {
                    1
                }
            }
        };
        scripted_turns = scripted_turns.saturating_add(turns.saturating_mul(copies));
    }
    if scripted_turns > SCRIPTED_TURNS_MAX {
        return Err(OutOfRange {
            path: vec![Step::Key("workers")],
            message: format!(
                "the scripts expand to {scripted_turns} turns: expected at most \
                 {SCRIPTED_TURNS_MAX} (a counted worker whose turns say `{}` holds its \
                 own copy of them)",
                super::expand::NUMBER_PLACEHOLDER
            ),
        });
    }
    Ok(())
}

/// Checks the `repeat`s and call `count`s of one script, and returns how many
/// turns it expands to.
fn check_script_counts(script: &AgentScript, at: &At<'_>) -> Result<u64, OutOfRange> {
    let mut turns = 0u64;
    for (index, turn) in script.turns.iter().enumerate() {
        let path = at.under(&[Step::Key("turns"), Step::Index(index)]);
        let turn_at = At { path: &path };
        for (call_index, call) in turn.tool_calls.iter().enumerate() {
            if let Some(count) = call.count {
                let call_path = turn_at.under(&[Step::Key("tool_calls"), Step::Index(call_index)]);
                At { path: &call_path }.range("count", u64::from(count), 1, AGENT_COUNT_MAX)?;
            }
        }
        let repeat = turn.repeat.unwrap_or(1);
        turn_at.range("repeat", u64::from(repeat), 1, TURN_REPEAT_MAX)?;
        turns = turns.saturating_add(u64::from(repeat));
    }
    Ok(turns)
}

/// The most notifications any one agent of `scenario` can receive, counted
/// generously: one for each worker the harness launches, one for each call of any
/// script that can start or resume a task (a worker's background shell notifies
/// the coordinator), and one for each placed fault that can end a worker again or
/// forge an envelope. Swarm mode's draws are left out: a script's turns must be
/// reachable in a run without them. A `when` count above it is a turn that can
/// never fire: the run would pass without playing it.
fn notifications_max(scenario: &Scenario) -> u64 {
    const NOTIFYING_TOOLS: [&str; 5] = [
        "Agent",
        "Bash",
        "SendMessage",
        "SendMessageToWorker",
        "SendToPeer",
    ];
    // Counted as expanded: a worker's calls once per worker of its `count`, a
    // turn's once per `repeat`, a call once per its own `count`.
    let calls: u64 = std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .flat_map(|script| {
            let workers = u64::from(script.count.unwrap_or(1));
            script.turns.iter().map(move |turn| {
                let repeat = u64::from(turn.repeat.unwrap_or(1));
                turn.tool_calls
                    .iter()
                    .filter(|call| NOTIFYING_TOOLS.contains(&call.name.as_str()))
                    .map(|call| u64::from(call.count.unwrap_or(1)))
                    .sum::<u64>()
                    .saturating_mul(repeat)
                    .saturating_mul(workers)
            })
        })
        .fold(0, u64::saturating_add);
    let notifying_kinds = [FaultKind::DuplicateNotify, FaultKind::ForgedEnvelope];
    let placed = scenario
        .faults
        .iter()
        .filter(|fault| notifying_kinds.contains(&fault.kind()))
        .count() as u64;
    (scenario.launches.len() as u64)
        .saturating_add(calls)
        .saturating_add(placed)
}

fn check_turn(turn: &ScriptedTurn, at: &At<'_>, notifiers: u64) -> Result<(), OutOfRange> {
    let latency_path = at.under(&[Step::Key("latency")]);
    let latency_at = At {
        path: &latency_path,
    };
    match turn.latency {
        Latency::Fixed { ms } => latency_at.range("ms", ms, 0, VIRTUAL_MS_MAX)?,
        Latency::Uniform { min_ms, max_ms } => {
            latency_at.range("min_ms", min_ms, 0, VIRTUAL_MS_MAX)?;
            latency_at.range("max_ms", max_ms, 0, VIRTUAL_MS_MAX)?;
            if min_ms > max_ms {
                return Err(latency_at.refuse(
                    "min_ms",
                    format!(
                        "a uniform latency's `min_ms` ({min_ms}) is above its `max_ms` \
                         ({max_ms}): expected min_ms <= max_ms"
                    ),
                ));
            }
        }
    }
    at.range("send_delay_ms", turn.send_delay_ms, 0, VIRTUAL_MS_MAX)?;
    if let Some(usage) = &turn.usage {
        let path = at.under(&[Step::Key("usage")]);
        let usage_at = At { path: &path };
        usage_at.range("input_tokens", usage.input_tokens, 0, TOKENS_MAX)?;
        usage_at.range(
            "cache_creation_input_tokens",
            usage.cache_creation_input_tokens,
            0,
            TOKENS_MAX,
        )?;
        usage_at.range(
            "cache_read_input_tokens",
            usage.cache_read_input_tokens,
            0,
            TOKENS_MAX,
        )?;
        usage_at.range("output_tokens", usage.output_tokens, 0, TOKENS_MAX)?;
        let split_path = at.under(&[Step::Key("usage"), Step::Key("cache_creation")]);
        let split_at = At { path: &split_path };
        split_at.range(
            "ephemeral_5m_input_tokens",
            usage.cache_creation.ephemeral_5m_input_tokens,
            0,
            TOKENS_MAX,
        )?;
        split_at.range(
            "ephemeral_1h_input_tokens",
            usage.cache_creation.ephemeral_1h_input_tokens,
            0,
            TOKENS_MAX,
        )?;
    }
    if let Some(Trigger::NotificationsAtLeast { count }) = &turn.when {
        let path = at.under(&[Step::Key("when")]);
        let when_at = At { path: &path };
        let count = u64::try_from(*count).unwrap_or(u64::MAX);
        if count > notifiers {
            return Err(when_at.refuse(
                "count",
                format!(
                    "`count` = {count} can never hold: the scenario's launches, task-starting \
                     calls and notifying faults bring an agent at most {notifiers} \
                     notification(s)"
                ),
            ));
        }
    }
    Ok(())
}

fn check_fault(fault: &Fault, at: &At<'_>) -> Result<(), OutOfRange> {
    match fault {
        Fault::WorkerCrash {
            at: CrashPoint::ModelCall { call },
            ..
        } => {
            let path = at.under(&[Step::Key("at")]);
            At { path: &path }.range("call", u64::from(*call), 1, COUNT_MAX)
        }
        Fault::CoordinatorCrash { at_ms, at: point } => match (at_ms, point) {
            (Some(at_ms), None) => at.range("at_ms", *at_ms, 0, VIRTUAL_MS_MAX),
            (None, Some(CoordinatorCrashPoint::ModelCall { call })) => {
                let path = at.under(&[Step::Key("at")]);
                At { path: &path }.range("call", u64::from(*call), 1, COUNT_MAX)
            }
            (None, Some(CoordinatorCrashPoint::DiskWrite { op, nth, .. })) => {
                let path = at.under(&[Step::Key("at")]);
                let point_at = At { path: &path };
                let unwritten = match op {
                    DiskOpClass::Read => Some("read"),
                    DiskOpClass::Sync => Some("sync"),
                    _ => None,
                };
                if let Some(unwritten) = unwritten {
                    return Err(point_at.refuse(
                        "op",
                        format!(
                            "a power cut in the middle of a write needs a class of writes \
                             (write, append, replace or create), not `{unwritten}`"
                        ),
                    ));
                }
                point_at.range("nth", *nth, 1, DISK_OPERATION_NTH_MAX)
            }
            (Some(_), Some(_)) => Err(at.refuse(
                "at",
                "a coordinator-crash is placed by `at_ms` or by `at`, not both".to_owned(),
            )),
            (None, None) => Err(at.refuse(
                "kind",
                "a coordinator-crash needs where it happens: `at_ms = N` (virtual \
                 milliseconds), `at = { point = \"model-call\", call = N }` or \
                 `at = { point = \"disk-write\", path = \"PATTERN\", nth = N }`"
                    .to_owned(),
            )),
        },
        Fault::DelayedNotification { delay_ms, .. } => {
            at.range("delay_ms", *delay_ms, 0, VIRTUAL_MS_MAX)
        }
        Fault::MailboxProducers { producers, .. } => {
            at.range("producers", u64::from(*producers), 1, PRODUCERS_MAX)
        }
        Fault::Disk { nth, .. } => at.range("nth", *nth, 1, DISK_OPERATION_NTH_MAX),
        Fault::ModelApi { call, .. } => at.range("call", u64::from(*call), 1, COUNT_MAX),
        Fault::SymlinkAtOutput { spawn, .. } => at.range("spawn", u64::from(*spawn), 1, COUNT_MAX),
        Fault::SymlinkedWorktreeDir { worktree, .. } => {
            at.range("worktree", u64::from(*worktree), 1, COUNT_MAX)
        }
        Fault::OversizeMessage { size_bytes, .. } => {
            at.range("size_bytes", *size_bytes, 1, OVERSIZE_MESSAGE_BYTES_MAX)
        }
        Fault::RemotePartition {
            launch,
            duration_ms,
            ..
        } => {
            at.range("launch", u64::from(*launch), 1, COUNT_MAX)?;
            at.range("duration_ms", *duration_ms, 1, VIRTUAL_MS_MAX)
        }
        Fault::CacheBreakingPromptChange { call } => {
            at.range("call", u64::from(*call), 1, COUNT_MAX)
        }
        Fault::SlowLockHolder {
            hold_ms, after_ms, ..
        } => {
            at.range("hold_ms", *hold_ms, 0, VIRTUAL_MS_MAX)?;
            at.range("after_ms", after_ms.unwrap_or(0), 0, VIRTUAL_MS_MAX)
        }
        Fault::BindingSwitch { after_call, .. } => {
            at.range("after_call", u64::from(*after_call), 1, COUNT_MAX)
        }
        Fault::StaleLock { returns, .. } => at.range("returns", u64::from(*returns), 0, COUNT_MAX),
        // An id can only repeat one drawn before it.
        Fault::TaskIdCollision { draw, repeats } => {
            at.range("draw", u64::from(*draw), 2, COUNT_MAX)?;
            match repeats {
                Some(repeats) => at.range("repeats", u64::from(*repeats), 1, u64::from(*draw) - 1),
                None => Ok(()),
            }
        }
        Fault::WorkerCrash { .. }
        | Fault::DuplicateNotify { .. }
        | Fault::ForgedEnvelope { .. }
        | Fault::ClobberedWrite { .. }
        | Fault::ClobberedScratch { .. }
        | Fault::MaliciousSlug { .. }
        | Fault::CorruptInbox { .. }
        | Fault::ForgedPermission { .. }
        | Fault::DuplicateMail { .. } => Ok(()),
    }
}
