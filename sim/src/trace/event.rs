//! What the simulator itself records in the trace, beside the runtime's events.

use coord_runtime::envelope::EnvelopeStatus;
use coord_runtime::world::Usage;
use serde::{Deserialize, Serialize};

use super::name::Name;
use crate::scenario::{Fault, FaultKind};

/// A step the simulator observed or caused. Digests are FNV-1a of the text, as 16
/// hex digits, so the trace stays small and its hash does not depend on text sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SimEvent {
    /// The run began: what it runs, logged first.
    RunStarted {
        /// The scenario's name.
        scenario: Name,
        /// The runtime profile.
        profile: Name,
        /// Whether the runtime runs in coordinator mode.
        coordinator_mode: bool,
        /// The liveness bound: how long after faults heal every task must be terminal.
        liveness_bound_ms: u64,
        /// Whether a session mode besides coordinator mode (the fork experiment,
        /// assistant or proactive mode) makes every spawn run in the background.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        background_forced: bool,
        /// Whether background tasks are disabled, which makes every spawn run in
        /// the foreground.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        background_disabled: bool,
        /// The binding key the session serves from its start and after each
        /// restart (`settings.binding`), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<String>,
    },
    /// The scenario sets each spawn's deadline (`settings.spawn_deadline_ms`):
    /// logged after the fault schedule only then, the runtime's documented default
    /// of 600,000 ms holding otherwise.
    SpawnDeadlineSet {
        /// The deadline, in ms after the spawn.
        spawn_deadline_ms: u64,
    },
    /// Swarm mode's choice for this seed, logged before anything runs.
    SwarmChose {
        /// The fault kinds turned on.
        kinds: Vec<FaultKind>,
    },
    /// The run's whole fault schedule (explicit and swarm-drawn), logged before
    /// anything runs.
    FaultsScheduled {
        /// Every fault, in placement order.
        faults: Vec<Fault>,
    },
    /// A fault fired.
    FaultFired {
        /// Its index in the schedule.
        fault: usize,
        /// Its kind.
        kind: FaultKind,
        /// What it did.
        detail: String,
        /// The one agent it struck, for a fault that strikes one agent's model
        /// calls (a worker crash, a failed API call): the scripts it may cut short
        /// are that agent's, the coordinator's (which reacts to it), and those of
        /// agents that had not yet run. `None` for a fault whose reach is wider.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<Name>,
    },
    /// An agent called the model.
    ModelCalled {
        /// `coordinator`, or the worker's prompt digest.
        agent: Name,
        /// The agent's call number in this conversation (from 1).
        call: u32,
        /// Digest of the system prompt and tool definitions: the cached prefix.
        prefix_digest: Name,
        /// For a fork, the agent whose conversation it copied: its first request
        /// must carry that agent's prefix (invariant 8).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forked_from: Option<Name>,
        /// For a fork's first call: how many messages of its request precede its
        /// directive (the parent's history, its assistant message and the directive
        /// message), and the digest of everything before the directive text. Sibling
        /// forks of one parent turn share both (invariant 8).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fork_shared: Option<Box<(u64, Name)>>,
        /// Whether the request asks for a compaction of the agent's conversation
        /// (its last block is the runtime's compaction instruction), as the model
        /// received it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        compaction: bool,
        /// Where the request's cache key first differs from the key it is held to
        /// (invariant 8), when it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head_change: Option<Box<HeadChange>>,
    },
    /// A model call went through the simulated prompt cache (`sim/src/run/meter.rs`):
    /// its usage and price, logged when the API received it.
    ModelBilled {
        /// `coordinator`, or the worker's prompt (a fork's directive).
        agent: Name,
        /// The agent's call number, as in `model_called`.
        call: u32,
        /// The model the request named.
        model: Name,
        /// The response's `usage` block, in the Messages API's shape.
        usage: Box<Usage>,
        /// Whether the usage was recorded (a script's `usage`) rather than simulated.
        usage_recorded: bool,
        /// When the usage was recorded: what the simulated cache predicted for the
        /// same request, which `coordsim replay --fidelity` compares with it. Absent
        /// otherwise (the usage is the prediction).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        predicted_usage: Option<Box<Usage>>,
        /// Its price at the built-in price table, in micro-dollars (rounded).
        cost_micro_usd: u64,
        /// Set when the request missed a prefix its conversation had cached because
        /// the prefix changed.
        cache_break: Option<Box<CacheBreakSeen>>,
    },
    /// The scenario's deliberate edit (`[economics] fork_system_edit`) changed a
    /// fork's system prompt on its way to the API.
    ForkSystemEdited {
        /// The fork.
        agent: String,
    },
    /// An agent's model received the answer to one of its Agent calls, without an
    /// error: a launch in the background, or the worker's result inline.
    SpawnAnswered {
        /// The calling agent's label.
        agent: Name,
        /// The call's `run_in_background`, if it set one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asked_background: Option<bool>,
        /// The call's `subagent_type`, if it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_type: Option<Name>,
        /// Whether the answer was a background launch.
        background: bool,
        /// What the answer said of its task, beside the call's mode.
        #[serde(flatten)]
        said: Box<SpawnAnswerSaid>,
    },
    /// The harness launched one of the scenario's `launches` for the coordinator,
    /// and the runtime answered with this task id.
    HarnessLaunched {
        /// The task id.
        task_id: String,
    },
    /// An agent's model received the answer to a `Bash` call in the background:
    /// the shell's task id, as the answer gave it.
    ShellLaunched {
        /// The calling agent's label.
        agent: Name,
        /// The task id.
        task_id: String,
        /// The command line the call ran.
        #[serde(default)]
        command: Name,
    },
    /// Follows a worker's [`SimEvent::ShellLaunched`]: the task ids the calling
    /// worker ran as, by its prompt (several for workers of one prompt).
    ShellLauncherTasks {
        /// The shell's task id.
        task_id: String,
        /// The launching worker's task ids.
        launcher_tasks: Box<[String]>,
    },
    /// The world's shell ended a command: how, as the shell answered the runtime.
    ShellEnded {
        /// The command line.
        command: Name,
        /// The directory the shell ran it in.
        #[serde(default)]
        cwd: Name,
        /// Its exit code; none when it was killed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Whether it was killed at its timeout.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        timed_out: bool,
    },
    /// The production shell timed a command out (`world::time_out_for_real`), and
    /// processes of it still ran once the Bash call had returned: the shell never
    /// killed them. They were killed afterwards.
    ShellLeftRunning {
        /// The command line the runtime asked for.
        command: Name,
        /// Its timeout.
        timeout_ms: u64,
        /// How many of its processes still ran.
        processes_count: u64,
    },
    /// The host's git ran a command a Bash call gave, on the real disk
    /// (`world::GitShell`): what git did to the repository, as the world saw it.
    GitRan {
        /// The agent whose Bash call it was, if a Bash call's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<Name>,
        /// The directory it ran in: the agent's worktree, if it has one.
        cwd: Name,
        /// Its subcommand (`commit`, `config`, …).
        subcommand: Name,
        /// Its exit code; none when git did not run to its end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    /// The coordinator's model received TaskStop results without an error: the
    /// tasks it stopped, as it was told (PROTOCOL.md §2). A background shell
    /// stopped so sends no envelope (invariant 1).
    TasksStopped {
        /// The task ids the calls named, in order.
        task_ids: Vec<String>,
    },
    /// The coordinator read envelopes from the conversation it was given (its view,
    /// as its model sees it): these are the notifications it accepted.
    ///
    /// Boxed slices, not vectors: this is the largest of the simulator's events,
    /// and every trace entry is as large as the largest.
    EnvelopesAccepted {
        /// Task ids, in order.
        task_ids: Box<[String]>,
        /// Their statuses.
        statuses: Box<[EnvelopeStatus]>,
        /// Their bodies beside what the world saw of their tasks, in the same
        /// order; empty where the observer cannot see the workers (a real
        /// coordinator's).
        #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
        bodies: Box<[EnvelopeBodySeen]>,
    },
    /// A tool call's result came back to its caller without an error.
    ToolSucceeded {
        /// `coordinator` or `worker`.
        role: Name,
        /// The tool.
        tool: Name,
    },
    /// A tool that reads or writes a file or a scratchpad key finished, as the
    /// tools beneath the runtime's gate saw it.
    ToolRan {
        /// The calling agent's id (`coordinator` or a task id).
        agent: Name,
        /// The tool.
        tool: Name,
        /// The resolved file path, or `scratch:<key>`.
        target: Name,
        /// The agent's working directory: its worktree, if it has one.
        cwd: Name,
        /// For a Write or ScratchpadWrite, the digest of the content it writes: a
        /// write of the bytes already there makes no new version.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_digest: Option<Name>,
        /// Whether the call succeeded.
        ok: bool,
    },
    /// The coordinator's model received a TaskList answer: the task ids it listed,
    /// as the model read them.
    TasksListed {
        /// Every `task_id` of the answer, in its order.
        task_ids: Vec<Name>,
    },
    /// The coordinator's model received a successful TaskGet answer, with the
    /// progress it reported beside the calls the task's worker made (PROTOCOL.md
    /// §1, Progress). Boxed: a list inline would make every trace entry larger.
    TaskProgressRead(Box<TaskProgressSeen>),
    /// The coordinator's model received a successful TaskGet or SendMessageToWorker
    /// answer about one task: the id the answer named.
    TaskAnswered {
        /// `TaskGet` or `SendMessageToWorker`.
        tool: Name,
        /// The task's id, as the answer gave it.
        task_id: String,
    },
    /// A tool call's result came back to its caller as an error.
    ToolFailed {
        /// `coordinator` or `worker`.
        role: Name,
        /// The tool.
        tool: Name,
        /// The error's first line, cut at 160 characters.
        error: String,
    },
    /// Data landed on disk.
    DiskWrite {
        /// The path written.
        path: Name,
        /// The path the write reached after symlinks.
        resolved_path: Name,
        /// Whether it went through a symlink.
        through_symlink: bool,
        /// A torn atomic replace: its temporary file took the bytes beside the
        /// target and was removed, so the target kept what it held. The write still
        /// reached the target's directory (what `no-escape` judges), but changed no
        /// file (what the worktree checks judge).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        target_kept: bool,
        /// Whether the write replaced the file atomically (a temporary file renamed
        /// over it) rather than rewriting it in place.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replaced: bool,
        /// For a write a Write or Edit tool carried out, the calling agent, as the
        /// tools beneath the runtime's gate saw it; absent for the runtime's own
        /// writes (output files, mailboxes, transcripts, the scratchpad).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<Name>,
        /// With `agent`, that agent's working directory: its worktree, if it has
        /// one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<Name>,
    },
    /// The coordinator host lost power.
    HostCrashed {
        /// Files lost entirely.
        lost: Vec<String>,
        /// Files whose contents changed.
        changed: Vec<String>,
    },
    /// The runtime started again from its disk.
    HostRestarted {
        /// The boot number (1 for the first restart).
        boot: u32,
    },
    /// A mailbox as the restarted runtime read it.
    MailboxRecovered {
        /// The mailbox file.
        path: String,
        /// Digests of its messages, `from` and text, in order.
        message_digests: Vec<String>,
        /// Whether it could be read at all.
        readable: bool,
    },
    /// A mailbox write the runtime acknowledged, as its sender saw it.
    MailboxAcked {
        /// The mailbox file.
        path: Name,
        /// The sender: also the owner its lock file names.
        from: Name,
        /// Digest of `from` and text.
        message_digest: String,
    },
    /// A mailbox write an outside producer was refused, as its sender saw it.
    MailboxRefused {
        /// The mailbox file.
        path: Name,
        /// The sender: also the owner its lock file names.
        from: Name,
        /// Digest of `from` and text.
        message_digest: String,
        /// Whether the refusal said the lock stayed held through every attempt
        /// (`LockError::Contended`), rather than a disk or parse error.
        contended: bool,
        /// For a contended refusal, how many attempts it said it made.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempts: Option<u32>,
    },
    /// One taking of a lock file that did not succeed at its first attempt, as the
    /// disk saw it: every `create_new` of the lock file made with one holder's
    /// token, logged when the run is over.
    LockAcquisition {
        /// The lock file.
        lock: Name,
        /// The owner the lock record names.
        owner: Name,
        /// How finely the run's clock moves, in µs: a wait is seen rounded up to it.
        clock_step_us: u64,
        /// Each attempt, in order.
        attempts: Box<[LockAttempt]>,
        /// How many stale locks this taking broke (moved aside right after one of
        /// its attempts).
        #[serde(default, skip_serializing_if = "is_zero")]
        breaks: u32,
    },
    /// A lock file moved aside (a stale lock broken), as the disk saw it, logged
    /// when the run is over.
    LockBroken {
        /// The lock file.
        lock: Name,
        /// When, in ms of the run's virtual time.
        at_ms: u64,
        /// The owner its record named, if the record parsed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<Name>,
        /// How old its record was then, by the time it names and the run's clock.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        age_ms: Option<u64>,
    },
    /// A teammate's model received a request while its team's file, as the disk
    /// held it then, listed the member as idle (PROTOCOL.md §5: `isIdle` is true
    /// only while a teammate has nothing to do).
    IdleMemberCalled {
        /// The team, as its file names it.
        team: Name,
        /// The member, as the file lists it.
        member: Name,
        /// The agent's call number.
        call: u32,
    },
    /// A lock taken with a record naming another time than the run's clock, by more
    /// than the witness's slack (PROTOCOL.md §4: a lock record names when it was
    /// taken, in wall-clock ms), logged once a lock when the run is over.
    LockMisstamped {
        /// The lock file.
        lock: Name,
        /// When it was taken, in ms of the run's virtual time.
        at_ms: u64,
        /// The time its record named, in ms since the Unix epoch.
        stamped_unix_ms: u64,
        /// The run's clock then, in ms since the Unix epoch.
        clock_unix_ms: u64,
    },
    /// A lock file removed by a writer whose record it no longer held: the release
    /// of a lock that was broken as stale and taken by someone else, which must
    /// leave the new holder's lock alone (PROTOCOL.md §4), logged when the run is
    /// over.
    LockMisreleased {
        /// The lock file.
        lock: Name,
        /// When, in ms of the run's virtual time.
        at_ms: u64,
        /// The owner named by the record it removed.
        holder: Name,
        /// The owner named by the record the remover had written.
        remover: Name,
    },
    /// A lock taken by an exclusive create while the disk's witness knew another
    /// writer held it: two writers inside one lock at once (PROTOCOL.md §4),
    /// logged when the run is over.
    LockOverlapped {
        /// The lock file.
        lock: Name,
        /// When, in ms of the run's virtual time.
        at_ms: u64,
        /// The owner named by the record of the writer that held it.
        holder: Name,
        /// The owner named by the record of the writer that took it.
        taker: Name,
    },
    /// An inbox written while no one held its lock, the first such write of it,
    /// logged when the run is over: PROTOCOL.md §4 writes every inbox under its
    /// lock.
    InboxWrittenUnlocked {
        /// The inbox.
        inbox: Name,
        /// When, in ms of the run's virtual time.
        at_ms: u64,
    },
    /// An inbox read while no one held its lock, the first such read of it, logged
    /// when the run is over: PROTOCOL.md §4 has an atomically written inbox read
    /// under its lock.
    InboxReadUnlocked {
        /// The inbox.
        inbox: Name,
        /// When, in ms of the run's virtual time.
        at_ms: u64,
    },
    /// Lock files still on the disk once the run is over, with the owners their
    /// records name. Absent when none is.
    LocksLeft {
        /// Each lock file and its owner (absent when its record does not parse).
        locks: Vec<(Name, Option<Name>)>,
    },
    /// Faults stopped: the liveness phase began.
    Healed,
    /// How far each scripted agent's script was played, once the run is over: a
    /// turn counts once its response reached the runtime (waiting turns excluded).
    ScriptsPlayed {
        /// Every scripted agent, the coordinator first, then the workers in
        /// scenario order.
        agents: Vec<ScriptPlayed>,
    },
    /// The permission requests the team leads' inboxes hold on the disk once the run
    /// is over, beside the ones the scenario's lead harness was scripted to answer.
    /// Only in runs with either.
    PermissionsAsked {
        /// Each `permission_request` in a lead's inbox, in inbox order.
        asked: Vec<PermissionAsked>,
        /// Each permission action of the scenario's `[[lead]]`, in scenario order; a
        /// `tool` of `None` answers a request for any tool.
        scripted: Vec<PermissionAsked>,
    },
    /// The shutdowns the scenario's lead harness was scripted to ask for, beside the
    /// shutdown responses the leads' inboxes hold on the disk once the run is over
    /// and who each team's file still lists. Only in runs with a scripted shutdown.
    /// Boxed: four lists inline would make every trace entry 40 bytes larger.
    ShutdownsWitnessed(Box<ShutdownsSeen>),
    /// The members each team's file marks as asked to shut down, once the run is
    /// over, beside the names the lead was scripted or its model called to ask.
    /// Only in runs whose team files mark a member.
    ShutdownsMarked {
        /// Each member whose `shutdown_requested` its team's file sets.
        marked: Vec<TeamMember>,
        /// Every name a lead's shutdown request went to: the scenario's `[[lead]]`
        /// shutdowns and the coordinator's model's SendMessage calls.
        asked: Vec<String>,
    },
    /// What each accepted message's recipient received, once the run is over.
    MessagesWitnessed {
        /// Every SendMessage the runtime accepted whose recipient is known by name.
        messages: Vec<MessageWitness>,
    },
    /// Team-inbox messages, as the disk holds them once the run is over, whose
    /// `timestamp` is earlier than the first model response that asked to send
    /// them, or is no RFC 3339 time (`run/mail_stamps.rs`). Absent when every
    /// stamp holds.
    MailStampedEarly {
        /// The messages, inbox by inbox.
        mail: Vec<MailStampEarly>,
    },
    /// A task output file at or over its size cap, or holding a truncation marker,
    /// as its bytes stand on the disk once the run is over (invariant 13's cap
    /// half). Files well under the cap without a marker are not listed.
    OutputFileWitnessed {
        /// The file.
        path: String,
        /// Its length.
        size_bytes: u64,
        /// The run's cap on an output file.
        size_bytes_max: u64,
        /// How many truncation markers it holds.
        markers_count: u64,
        /// Whether it ends with the marker.
        ends_with_marker: bool,
    },
    /// The TaskOutput answers about a task did not give its output file's bytes one
    /// after another from its start, as the disk holds them once the run is over.
    TaskOutputWrong {
        /// The task.
        task_id: String,
        /// Which answer, and how it differs.
        detail: String,
    },
    /// The terminal task records on the disk once the run is over: each task id,
    /// with the status its record ends it in (what a restarted runtime reloads).
    TaskRecordsWitnessed {
        /// Task id and status, in id order.
        ended: Vec<(String, coord_runtime::task::TaskStatus)>,
    },
    /// The compaction summaries the workers' requests went on from, each against
    /// the boundaries the disk's transcripts hold once the run is over
    /// (`run/transcript_boundaries.rs`). Absent when no worker compacted.
    SummariesContinued {
        /// In worker label order, each worker's summaries in the order its
        /// requests went on from them.
        summaries: Vec<SummaryContinued>,
    },
    /// An inbox a `corrupt-inbox` fault left cut off, as the disk holds it once the
    /// run is over (invariant 5).
    CorruptInboxWitnessed {
        /// The inbox.
        path: String,
        /// Whether the inbox, or a file beside it, still starts with the bytes the
        /// fault left.
        kept: bool,
        /// The digests of the messages the inbox holds as a JSON array; none when
        /// it is not one.
        message_digests: Vec<String>,
    },
    /// The worktrees still on the disk once the run is over: the entries of
    /// `.claude/worktrees/` (PROTOCOL.md §2). Absent when that directory is not
    /// there, as in a run that made no worktree.
    WorktreesLeft {
        /// Their paths, sorted.
        paths: Vec<String>,
    },
    /// The worktree branches (`worktree-*`) still in the repository once the run is
    /// over, as the host's git lists them (PROTOCOL.md §2: a worktree without
    /// changes is removed together with its branch). Only on the production
    /// version control: the simulated one keeps a branch exactly as long as its
    /// worktree.
    WorktreeBranchesLeft {
        /// Their names, sorted.
        branches: Vec<String>,
    },
    /// Tasks the coordinator's model was told it launched in the background but never
    /// received an envelope for, once the run is over (invariant 1, judged on what
    /// the model received). Absent when every launch was answered.
    LaunchesUnanswered {
        /// Their task ids.
        task_ids: Vec<String>,
    },
    /// The answers scripted calls with an `expect` got, once the run is over.
    CallsAnswered {
        /// Every such call the agent's model received an answer for.
        calls: Vec<CallAnswered>,
    },
    /// What the model API saw once the coordinator had stopped a task, at the
    /// run's end: which agent launched which task, and how each model call still
    /// open at a stop ended (PROTOCOL.md §1: a kill cascades to children).
    /// Absent when nothing was stopped.
    StopsWitnessed {
        /// Every task some model was told it launched in the background.
        tasks: Vec<TaskLaunched>,
        /// The model calls that ended after the first stop, in the order they
        /// ended, then those still open when the run was over.
        calls: Vec<CallEnded>,
    },
    /// The simulated model API refused a request as the real one would (HTTP 400):
    /// a tool call of its last assistant message left unanswered
    /// (`check/request_rules.rs`).
    RequestRefused {
        /// The agent whose request it was.
        agent: Name,
        /// The API's error message.
        detail: String,
    },
    /// The system prompt the coordinator's model received in its first request is
    /// not what PROTOCOL.md §7 gives for the scenario's prompt sources
    /// (`check/prompt_assembly.rs`).
    SystemPromptWrong {
        /// What differs.
        detail: String,
    },
    /// A model received an envelope with a character of an element's body
    /// unescaped (PROTOCOL.md §3).
    EnvelopeUnescaped {
        /// Which element, and which character.
        detail: String,
    },
    /// The reader the coordinator's model reads envelopes with misread a hostile
    /// variant of an envelope text the run delivered (PROTOCOL.md §3,
    /// `model/misreading.rs`).
    EnvelopeMisread {
        /// Which variant, and what was read.
        detail: String,
    },
    /// The lead's API took a permission answer under a request id that is not the
    /// request's own (`run/lead.rs`): any id could carry an approval.
    LeadAnswerMisaccepted {
        /// Which answer, under which id.
        detail: String,
    },
    /// An agent's model was offered a tool outside its PROTOCOL.md §7 surface
    /// (`run/surface_witness.rs`).
    ToolsOfferedWrong {
        /// `coordinator`, or the worker's prompt.
        agent: Name,
        /// What was offered, to whom.
        detail: String,
    },
    /// An agent retried a failed model call against the documented policy: an
    /// error that is final, a wait cut short, or past the retry budget
    /// (`run/retry_witness.rs`).
    ModelRetryWrong {
        /// `coordinator`, or the worker's prompt.
        agent: Name,
        /// What the API saw.
        detail: String,
    },
    /// The model calls whose latest attempt the API failed with an error the
    /// retry policy retries, with retries left, and that no attempt followed, at
    /// the run's end (`run/retry_witness.rs`). Absent when there are none.
    RetriesAbandoned {
        /// Each such call.
        calls: Vec<AbandonedCall>,
    },
    /// An agent asked for a compaction its last reported context did not call
    /// for, or sent its next round without the compaction it did call for
    /// (`run/compaction_witness.rs`).
    CompactionMistimed {
        /// `coordinator`, or the worker's prompt.
        agent: Name,
        /// The agent's call number, as in `model_called`.
        call: u32,
        /// Whether the request was a compaction (early) or a round (late).
        compaction: bool,
        /// The context the agent's last answer reported, if it had one in this
        /// boot.
        context_tokens: Option<u64>,
        /// The context at which the agent must compact.
        threshold_tokens: u64,
    },
    /// A request whose conversation holds its compaction summary after other
    /// messages: the history the summary replaced was sent again
    /// (`check/call_policies.rs`). Logged once per agent.
    SummaryBehindHistory {
        /// `coordinator`, or the worker's prompt.
        agent: Name,
        /// The agent's call number, as in `model_called`.
        call: u32,
        /// The summary message's index in the request.
        message_index: u64,
    },
    /// A fork's first request answered its parent's calls, in its directive
    /// message, with results that are not PROTOCOL.md §6's placeholder.
    ForkResultsNotPlaceholder {
        /// The fork's label.
        agent: Name,
        /// The texts of those results.
        results: Vec<String>,
    },
    /// Code under test panicked during the run (a runtime task dies quietly in
    /// its executor): the panic's message and where it was raised.
    RuntimePanicked {
        /// The message and its location.
        message: String,
    },
    /// The run ended.
    RunEnded {
        /// Tasks not in a terminal state.
        open_tasks: Vec<String>,
        /// How the coordinator's loop ended.
        coordinator: String,
    },
}

/// `run_ended`'s `coordinator` when the coordinator's loop was still running at
/// the run limit.
pub const COORDINATOR_CUT_OFF: &str = "cut off at the run limit";

/// How `run_ended`'s `coordinator` begins when virtual time stood still: something
/// kept reading the clock at one instant without ever waiting for it to move (a
/// busy loop), so the run could not go on. The instant, in ms, follows.
pub const CLOCK_STOOD_STILL: &str = "stopped: the clock stood still at ";

/// How `run_ended`'s `coordinator` begins when the runtime could not restart after
/// a power cut; the error follows.
pub const RESTART_FAILED: &str = "restart failed: ";

/// One attempt to create a lock file, as the disk saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockAttempt {
    /// When, in µs of the run's virtual time.
    pub at_us: u64,
    /// What the create did.
    pub outcome: LockAttemptOutcome,
    /// Whether, since the same holder's previous attempt, the lock file was moved
    /// aside (a stale lock broken) or found gone: the runtime retries at once then,
    /// without a backoff.
    pub after_break: bool,
}

/// What one attempt to create a lock file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockAttemptOutcome {
    /// The file was created: the lock was taken.
    Taken,
    /// The file existed: someone held the lock.
    Held,
    /// Another error (a disk fault).
    Failed,
}

/// A model call left failed with retries to spare (`retries_abandoned`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbandonedCall {
    /// The calling agent's label.
    pub agent: String,
    /// The runtime's ids for that agent: its task ids, or `coordinator`.
    pub agent_ids: Vec<String>,
    /// Attempts the API saw of the call.
    pub attempts: u32,
    /// When the last one's error reached the runtime, in ms of virtual time.
    pub failed_at_ms: u64,
    /// That error, as the runtime would word it.
    pub error: String,
}

/// A scripted call with an expected answer, and the answer it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallAnswered {
    /// The calling agent's label.
    pub agent: String,
    /// The script step (from 0) and the call's index in that turn.
    pub step: u64,
    /// The call's index in its turn.
    pub index: u64,
    /// The tool.
    pub tool: String,
    /// The answer the scenario expects, when it says (`expect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<crate::model::CallOutcome>,
    /// The answer the agent's model received.
    pub got: crate::model::CallOutcome,
    /// When the model received it, in ms of virtual time: a fault that fired
    /// later cannot have changed it.
    #[serde(default)]
    pub received_ms: u64,
    /// A text the scenario expects the answer to hold (`expect_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_text: Option<String>,
    /// Whether the answer lacked `expected_text`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_missing: bool,
    /// A text the scenario expects the answer not to hold (`expect_no_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexpected_text: Option<String>,
    /// Whether the answer held `unexpected_text`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_present: bool,
}

/// What an Agent answer said of its task (PROTOCOL.md §1's ids, §2's results),
/// with what the call asked that decides them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnAnswerSaid {
    /// The task id the answer gave: the launch's `agentId`, or the id in an inline
    /// result's continuation trailer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The call's `isolation`, if it asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_isolation: Option<String>,
    /// Whether the call named a team (`team_name`): the worker is a teammate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asked_team: bool,
    /// An inline answer's continuation trailer: the status it gave the task.
    /// `None` for a launch, and for a result without a trailer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trailer_status: Option<String>,
    /// For an inline answer: whether its result (the text before any trailer) is
    /// one whole response of the worker's model, as the API saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_said: Option<bool>,
    /// For a launch: its `status` word, as the answer gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_status: Option<String>,
    /// For a launch: whether its `description` was the call's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_description_kept: Option<bool>,
}

/// A task some agent's model was told it launched in the background.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLaunched {
    /// Its task id.
    pub task_id: String,
    /// Its agent label (its prompt).
    pub agent: String,
    /// The label of the agent whose model received the launch.
    pub launched_by: String,
}

/// How one model call ended, as the API saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEnded {
    /// The calling agent's label.
    pub agent: String,
    /// Its call number, as in `model_called`.
    pub call: u32,
    /// When it was sent, in ms of virtual time.
    pub sent_ms: u64,
    /// When it ended; `None` if it was still open when the run was over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// Whether its caller dropped it before the answer came.
    pub abandoned: bool,
    /// For an abandoned call, when its scripted answer was due (sent, plus the
    /// request's hold and the reply's latency): a call abandoned before then was
    /// cut short while the script was still slow on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<u64>,
}

/// An accepted envelope's body set beside what the world saw of its task
/// (PROTOCOL.md §3): what the worker's model said, and its output file's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeBodySeen {
    /// Its `<summary>`, cut at [`BODY_TEXT_CHARS_MAX`] characters.
    pub summary: String,
    /// The description the coordinator's Agent call gave the task, when the
    /// coordinator's model saw the launch in its conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The start of its `<result>`, cut at [`BODY_TEXT_CHARS_MAX`] characters;
    /// absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_head: Option<String>,
    /// Whether its result is text the worker's model said: one whole response's
    /// text, or empty from a worker whose model said none. Absent when it has no
    /// result or the worker's conversation is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_said: Option<bool>,
    /// Whether its result is its output file's whole content as the disk held it
    /// when the envelope reached the coordinator: a stopped task's partial output,
    /// or the output of a completed task whose worker died before it notified.
    /// Absent for a failed task, whose result is its error, and when the file could
    /// not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_is_output: Option<bool>,
    /// Whether its result is the start of its output file followed by the
    /// runtime's notice that the file failed to read from there on
    /// ([`coord_runtime::session::OUTPUT_UNREADABLE_OPEN`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_is_output_cut: bool,
    /// The name the coordinator's Agent call gave the worker: its worktree slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_asked: Option<String>,
    /// Its `<worktree>`: the path and branch of the worktree kept for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<(String, String)>,
    /// Its `<usage>`, beside what the model API billed the task's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageSeen>,
    /// Whether it has no `<usage>` though the runtime that sent it knew the task's:
    /// its host never restarted, or the task's worker answered a call since it
    /// last did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_owed: bool,
    /// Whether the coordinator's Agent call asked for a fork.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forked: bool,
    /// Its `<tool-use-id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// The `tool_use` id of the Agent call whose answer launched the task, when
    /// the coordinator's model saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_call_id: Option<String>,
    /// Its `<output-file>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
    /// The `outputFile` the launching call's answer named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file_answered: Option<String>,
}

/// An envelope's `<usage>` beside the model API's bills (PROTOCOL.md §1's
/// progress: the latest request's input tokens, the sum of the output tokens, the
/// tool calls made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSeen {
    /// Its `<total_tokens>`.
    pub total_tokens: u64,
    /// Its `<tool_uses>`.
    pub tool_uses: u64,
    /// The same two from the worker's answered calls, as the API billed them;
    /// absent where the worker's calls are not known (a remote worker's, or a task
    /// the coordinator did not launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billed: Option<(u64, u64)>,
    /// Its `<duration_ms>`.
    #[serde(default)]
    pub duration_ms: u64,
    /// The least the task can have run, in ms: its worker's first call, from its
    /// sending to its answer. Absent where the worker's calls are not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_ms_min: Option<u64>,
    /// The most it can have run: from the coordinator's model answering with the
    /// call that launched it to the request that carried its envelope. Absent
    /// where the launch is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_ms_max: Option<u64>,
}

/// How many characters of an envelope's summary and result the trace keeps.
pub const BODY_TEXT_CHARS_MAX: usize = 200;

/// One accepted message and how often its recipient's model received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageWitness {
    /// The sender's label.
    pub from: String,
    /// The recipient's label.
    pub to: String,
    /// [`message_digest_hex`] of the sender and the text.
    pub message_digest: String,
    /// How many user texts of the recipient's latest request hold the message.
    pub received_count: u64,
    /// The digest of a message the same sender sent the same recipient later, which
    /// the recipient's model received first: delivery out of order. Absent when
    /// the order held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overtaken_by: Option<String>,
    /// Whether the recipient may rightly never receive it: a member that approved
    /// its shutdown may have left the team before a broadcast was sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_miss: bool,
    /// For a message its recipient never received: when the sender's model was
    /// told it was accepted (or made the approval that ends it), in ms of virtual
    /// time. A stop of the recipient at or after it may rightly have dropped it.
    /// Absent for a message received, and where no clock saw it (a real CLI's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<u64>,
    /// Whether the recipient is the broadcast's own sender, which must never
    /// receive it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub to_sender: bool,
}

/// An inbox message stamped before it could have been sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailStampEarly {
    /// The inbox's owner.
    pub owner: String,
    /// The sender's member name, as the message holds it.
    pub from: String,
    /// [`message_digest_hex`] of the sender's member name and the text.
    pub message_digest: String,
    /// The `timestamp` as the inbox holds it.
    pub stamp: String,
    /// When the first model response asking to send this text to this owner
    /// reached the runtime, in ms of virtual time.
    pub called_ms: u64,
}

/// A compaction summary a worker's requests went on from, and whether its
/// transcript holds a boundary for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryContinued {
    /// The worker's label (its prompt).
    pub agent: Name,
    /// The tasks launched with that prompt, whose transcripts were read.
    pub task_ids: Vec<String>,
    /// The digest of the continuation message's text, in hex.
    pub summary_digest: String,
    /// Whether one of those transcripts holds a `compact_boundary` line carrying
    /// the same continuation message.
    pub in_transcript: bool,
}

/// A permission request to a team's lead: its member and the tool it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionAsked {
    /// The team.
    pub team: String,
    /// The member asking, by name.
    pub member: String,
    /// The tool the request names.
    pub tool: Option<String>,
}

/// What [`SimEvent::TaskProgressRead`] records: a TaskGet answer's progress, and
/// what its worker's model calls allow it to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskProgressSeen {
    /// The task, as the answer named it.
    pub task_id: String,
    /// The answer's `tool_uses`.
    pub tool_uses: u64,
    /// The answer's `recent_activities`, oldest first.
    pub activities: Vec<Name>,
    /// The worker's calls, when they are the task's alone: `None` when they cannot
    /// be told apart as this task's rounds (a resumed, compacted, forked, remote or
    /// shared-prompt worker, or a call answered twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundsSeen>,
}

/// A worker's tool rounds, as its model's answers and requests show them at the
/// moment of one TaskGet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundsSeen {
    /// The tools its model called, answer by answer in call order, over every
    /// answer given before the TaskGet answer reached the coordinator's model: no
    /// round the task counted can come after them.
    pub tools: Vec<Name>,
    /// How many of `tools` each answer ended at: the counts a task can report,
    /// since a round's tool uses are counted together as the round ends.
    pub round_ends: Vec<u64>,
    /// The tool calls in the conversation of the latest request the worker's model
    /// received before the coordinator's model asked for the TaskGet: rounds that
    /// had ended, so the count is at least this.
    pub tool_uses_min: u64,
}

/// What [`SimEvent::ShutdownsWitnessed`] records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownsSeen {
    /// Each shutdown action of the scenario's `[[lead]]`, in scenario order.
    pub scripted: Vec<TeamMember>,
    /// Each member whose `shutdown_response` approving its shutdown is in its
    /// lead's inbox.
    pub approved: Vec<TeamMember>,
    /// Those of `approved` whose approval the lead read (`read` in its inbox):
    /// reading it is what takes the member off its team's file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals_read: Vec<TeamMember>,
    /// Each member each team's file lists at the end, leads included.
    pub listed: Vec<TeamMember>,
    /// Each shutdown request the lead's inbox holds more than one answer to, with
    /// how many: a request that arrived twice is still answered once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered_twice: Vec<RequestAnswers>,
}

/// The answers one member sent to one shutdown request, as its lead's inbox holds
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestAnswers {
    /// Who answered.
    pub member: TeamMember,
    /// The request answered.
    pub request_id: String,
    /// How many answers name it.
    pub answers: u64,
}

/// A member of a team, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamMember {
    /// The team.
    pub team: String,
    /// The member's name.
    pub member: String,
}

/// How far one agent's script was played.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptPlayed {
    /// The agent's label: `coordinator`, or its prompt.
    pub agent: String,
    /// Turns whose response reached the runtime.
    pub turns_played: u64,
    /// Turns in its script.
    pub turns: u64,
}

/// Where a request's prefix first left the one its conversation had cached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheBreakSeen {
    /// The first block (tools, then system, then messages, from 0) that differs.
    pub block_index: u64,
    /// `tools`, `system` or `messages`: the section holding that block.
    pub section: String,
    /// Bytes of block content from the start of the prefix to the first differing
    /// byte.
    pub byte_offset: u64,
    /// `prefix`, `model`, `organization` or `thinking`: what changed.
    pub cause: String,
    /// Tokens the request would have read had its prefix matched.
    pub expected_read_tokens: u64,
}

/// Where a request's cache key (model, `max_tokens`, thinking, tools and system)
/// first differs from the key of the request it is held to: the agent's previous
/// one, or for a fork's first request its parent's last (`run/head_witness.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadChange {
    /// `model`, `max_tokens`, `thinking`, `tools` or `system`.
    pub part: String,
    /// For `tools` and `system`: the first block that differs, or the list's length
    /// when a block was added or removed at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_index: Option<u64>,
    /// The first differing byte of the canonical prefix.
    pub byte_offset: u64,
}

/// `text`'s digest as the trace writes it.
pub fn digest_hex(text: &str) -> String {
    let mut hasher = coord_runtime::digest::Fnv1a64::new();
    hasher.update(text.as_bytes());
    hasher.finish_hex()
}

/// A mailbox message's digest as the trace writes it: [`digest_hex`] of its sender
/// and text on two lines, without building that text.
pub fn message_digest_hex(from: &str, text: &str) -> String {
    let mut hasher = coord_runtime::digest::Fnv1a64::new();
    hasher.update(from.as_bytes());
    hasher.update(b"\n");
    hasher.update(text.as_bytes());
    hasher.finish_hex()
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_message_digest_is_the_digest_of_sender_and_text_on_two_lines(
            from in any::<String>(),
            text in any::<String>(),
        ) {
            prop_assert_eq!(
                message_digest_hex(&from, &text),
                digest_hex(&format!("{from}\n{text}"))
            );
        }
    }
}
