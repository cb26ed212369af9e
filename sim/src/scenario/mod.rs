//! Scenario files: what a run drives the runtime through.
//!
//! A scenario names a runtime profile, the coordinator's and the workers' scripted
//! turns, the faults to place, which fault kinds swarm mode may draw, and what the
//! run must show. Unknown keys are errors, every number has a range ([`bounds`]),
//! and every error names `file:line:column` and what was expected, so a typo never
//! silently changes a run; loading a file also reads the cassette it names. Names
//! are unique within a folder ([`check_unique_names`]). The format is
//! documented in `docs/scenario-format.md`; `docs/scenario.schema.json` is generated
//! from these types ([`json_schema`]). Its faults are the fault engine's
//! vocabulary ([`crate::fault`]). Which files a folder holds is [`discover`]'s.

mod walk;
mod workspace;

pub use expand::NUMBER_PLACEHOLDER;
pub use walk::discover;
pub use workspace::{repeated_to, WorkspaceFile, WORKSPACE_FILES_BUILT_IN};

pub mod bounds;
mod expand;
mod locate;
mod names;

pub use locate::Step;
pub use names::check_unique_names;

pub use crate::fault::{
    ApiError, CoordinatorCrashPoint, CrashPoint, DiskEffect, DiskOpClass, Fault, FaultKind,
    LinkTarget, PartitionPhase,
};

use crate::position::line_column;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::check::Invariant;
use crate::model::AgentScript;

/// One scenario, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name, unique within its folder.
    pub name: String,
    /// What the scenario exercises.
    #[serde(default)]
    pub description: String,
    /// The runtime profile: `claude-code`, `nexo` or `hardened`.
    #[serde(default = "default_profile")]
    #[schemars(with = "ProfileName")]
    pub profile: coord_runtime::profile::Profile,
    /// Runtime and run settings.
    #[serde(default)]
    pub settings: Settings,
    /// The coordinator's script. Its `prompt` is the session's first user message.
    pub coordinator: AgentScript,
    /// The workers' scripts, each found by its prompt (the Agent call's `prompt`).
    #[serde(default)]
    pub workers: Vec<AgentScript>,
    /// Workers the embedding harness spawns for the coordinator before its first
    /// turn, under the binding it serves then. A nexo coordinator has no Agent tool:
    /// its harness hands it workers, which it continues with SendMessageToWorker.
    #[serde(default)]
    pub launches: Vec<Launch>,
    /// What the team lead's harness does that no tool of the coordinator does: ask a
    /// teammate to shut down, answer a teammate's permission request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lead: Vec<LeadAction>,
    /// Files the workspace (`/work`) holds when the run starts, besides its
    /// `README.md` and `shared/notes.md`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<WorkspaceFile>,
    /// Faults placed explicitly.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// What swarm mode may draw.
    #[serde(default)]
    pub swarm: SwarmSettings,
    /// What the run must show.
    #[serde(default)]
    pub expect: Expect,
    /// The cost model's settings, and the comparison `coordsim economics` runs.
    #[serde(default)]
    pub economics: Economics,
    /// Where the model's answers come from: the scripts (default), or a cassette.
    #[serde(default, skip_serializing_if = "ModelSettings::is_scripted")]
    pub model: ModelSettings,
    /// The recorded session the scenario replays (`coordsim import` writes it), for
    /// `coordsim replay --fidelity`. Runs ignore it. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<Recording>,
}

/// Where the model's answers come from. Default: the scripts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// A cassette (`docs/cli.md`, `coordsim record`) whose recorded exchanges
    /// answer the model calls instead of the scripts, relative to the scenario
    /// file. The scripts may then have no turns. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<String>,
    /// How a request finds its exchange in the cassette: `request-hash` (default),
    /// `in-order` or `in-order-per-agent`.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matching: Option<CassetteMatch>,
}

impl ModelSettings {
    /// Whether the scripts answer (no cassette, no match mode).
    pub fn is_scripted(&self) -> bool {
        self.cassette.is_none() && self.matching.is_none()
    }
}

/// How a replayed request finds its recorded exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CassetteMatch {
    /// By the request's canonical hash: the runtime must send exactly what it sent
    /// when the cassette was recorded.
    #[default]
    RequestHash,
    /// The n-th call gets the n-th recorded exchange, whatever it asks.
    InOrder,
    /// Each agent's n-th call gets that agent's n-th recorded exchange.
    InOrderPerAgent,
}

/// The recorded session a scenario replays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// The session file, relative to the scenario file (or absolute).
    pub source: PathBuf,
    /// Its format: `claude-code` (default), a Claude Code session transcript with its
    /// `subagents/` folder beside it.
    #[serde(default)]
    pub format: RecordingFormat,
}

impl Recording {
    /// The session file of a scenario loaded from `scenario_path`.
    pub fn source_from(&self, scenario_path: &Path) -> PathBuf {
        match scenario_path.parent() {
            Some(dir) if self.source.is_relative() => dir.join(&self.source),
            _ => self.source.clone(),
        }
    }
}

/// The formats of recorded sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RecordingFormat {
    /// A Claude Code session transcript (`<session>.jsonl`).
    #[default]
    ClaudeCode,
}

/// The cost model's settings and the comparison `coordsim economics` runs. Every
/// default is listed on its field.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Economics {
    /// The comparison `coordsim economics` runs: each of its two variants is this
    /// scenario transformed. Default none (the command refuses the scenario).
    pub compare: Option<Comparison>,
    /// The TTL of the cache breakpoints the simulated client places: `5m` (default)
    /// or `1h`.
    pub ttl: TtlSetting,
    /// How long the client waits between sending sibling forks' first requests (the
    /// forks one assistant message launched). Default 0: all at once.
    pub stagger_ms: u64,
    /// A deliberate edit to a fork's system prompt, made between the runtime and the
    /// API, so the fork's prefix leaves its parent's. Default none.
    pub fork_system_edit: Option<SystemEdit>,
    /// How many bytes of a request the simulated cache counts as one token (per
    /// block, rounded up): a number from 1.0 to 8.0, kept to the thousandth.
    /// Default 4.0; `coordsim import` sets the ratio it calibrated on the recording.
    pub bytes_per_token: crate::cache::BytesPerToken,
    /// The compaction threshold, in tokens, of the `earlier` variant of
    /// `compact-earlier-vs-later`, below the scenario's own
    /// (`[settings] compact_threshold_tokens`, or the profile's), which the `later`
    /// variant keeps. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_earlier_threshold_tokens: Option<u64>,
}

/// What `coordsim economics` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Comparison {
    /// Every Agent call as a fork (`subagent_type = "fork"`), against the same
    /// calls as fresh background spawns (no `subagent_type`).
    ForkVsFresh,
    /// Cache breakpoints with the 5-minute TTL, against the 1-hour TTL.
    #[serde(rename = "ttl-5m-vs-1h")]
    Ttl5mVs1h,
    /// Sibling forks sent together (`stagger_ms = 0`), against forks sent
    /// `stagger_ms` apart (the scenario's value, which must be positive).
    SimultaneousVsStaggered,
    /// The scenario without its `fork_system_edit`, against the scenario with it.
    IntactVsEdited,
    /// Agents compacted at `compact_earlier_threshold_tokens`, against the
    /// scenario's own threshold: more, smaller compactions against fewer, larger.
    CompactEarlierVsLater,
}

impl Comparison {
    /// The name written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::ForkVsFresh => "fork-vs-fresh",
            Comparison::Ttl5mVs1h => "ttl-5m-vs-1h",
            Comparison::SimultaneousVsStaggered => "simultaneous-vs-staggered",
            Comparison::IntactVsEdited => "intact-vs-edited",
            Comparison::CompactEarlierVsLater => "compact-earlier-vs-later",
        }
    }
}

/// A cache breakpoint TTL, as scenario files write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum TtlSetting {
    /// Five minutes, refreshed by every hit.
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour, refreshed by every hit; writes cost 2x input instead of 1.25x.
    #[serde(rename = "1h")]
    OneHour,
}

impl TtlSetting {
    /// The runtime's TTL.
    pub fn cache_ttl(self) -> coord_runtime::world::CacheTtl {
        match self {
            TtlSetting::FiveMinutes => coord_runtime::world::CacheTtl::FiveMinutes,
            TtlSetting::OneHour => coord_runtime::world::CacheTtl::OneHour,
        }
    }
}

/// Text appended to the first system block of the forks whose directive matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemEdit {
    /// The forks edited: a pattern over their directive (`*` is a wildcard).
    pub fork: String,
    /// The text appended.
    pub append: String,
}

/// A worker the harness spawns, as an Agent call's `description` and `prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The spawn's description.
    pub description: String,
    /// The worker's prompt; a `[[workers]]` script must have it.
    pub prompt: String,
}

/// One act of the team lead's harness (`Session::request_shutdown`,
/// `Session::answer_permission`), from the coordinator's nth model call on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeadAction {
    /// Once the coordinator has made this many model calls. Default 1.
    #[serde(default = "first_call")]
    pub after_call: u32,
    /// And not before this many ms of the run have passed. Default 0.
    #[serde(default)]
    pub after_ms: u64,
    /// The team, led by the main thread.
    pub team: String,
    /// The teammate, by name.
    pub member: String,
    /// What the lead does.
    pub action: LeadActionKind,
    /// For a permission action, the tool the request must name (`Bash`, `Edit`,
    /// `Write`): the lead answers only a request for it. Default any tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For a `redirect`, the teammate's next input. Default
    /// [`REDIRECT_MESSAGE_DEFAULT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a `redirect` tells its teammate when the scenario gives no `message`.
pub const REDIRECT_MESSAGE_DEFAULT: &str = "Drop that; the lead has something else for you.";

impl LeadAction {
    /// The text a `redirect` makes the teammate's next input.
    pub fn redirect_message(&self) -> &str {
        self.message.as_deref().unwrap_or(REDIRECT_MESSAGE_DEFAULT)
    }
}

fn first_call() -> u32 {
    1
}

/// What the lead does to a teammate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LeadActionKind {
    /// Sends it a shutdown request, then reads its answer from the lead's inbox.
    Shutdown,
    /// Approves its next permission request, once it is in the lead's inbox.
    ApprovePermission,
    /// Denies its next permission request, once it is in the lead's inbox.
    DenyPermission,
    /// Leaves its next permission request unanswered, once it is in the lead's
    /// inbox: the teammate's wait runs into its timeout.
    IgnorePermission,
    /// Redirects it (`Session::redirect`, PROTOCOL.md §5's current-work abort):
    /// its current turn is abandoned, the teammate stays, and the action's
    /// `message` is its next input.
    Redirect,
}

impl LeadActionKind {
    /// Whether it answers (or leaves) a permission request.
    pub fn answers_permission(self) -> bool {
        matches!(
            self,
            LeadActionKind::ApprovePermission
                | LeadActionKind::DenyPermission
                | LeadActionKind::IgnorePermission
        )
    }
}

/// The profile names, for the schema.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
enum ProfileName {
    ClaudeCode,
    Nexo,
    Hardened,
}

fn default_profile() -> coord_runtime::profile::Profile {
    coord_runtime::profile::Profile::Hardened
}

/// Every spawn's deadline when a scenario sets none: the runtime's documented
/// default (docs/profiles.md), 10 minutes.
pub const SPAWN_DEADLINE_MS_DEFAULT: u64 = 600_000;
/// How often an idle agent polls when a scenario sets nothing: the runtime's
/// documented default, 1 s.
pub const IDLE_POLL_MS_DEFAULT: u64 = 1_000;
/// Most model turns of one agent loop when a scenario sets none: the runtime's
/// documented default.
pub const TURNS_MAX_DEFAULT: u32 = 200;

/// Runtime and run settings. Every default is listed on its field.
///
/// The runtime's own settings (`spawn_deadline_ms`, `idle_poll_ms`, `turns_max`,
/// `eviction_grace_ms`) are options: one a scenario leaves unset is left at the
/// runtime's default, so that the sweep runs the defaults production runs with,
/// and a changed default changes what the world observes. The `*_DEFAULT`
/// constants are the documented values, for the simulator's own arithmetic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Every spawn's deadline. Default: the runtime's, 600,000 (10 minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_deadline_ms: Option<u64>,
    /// How often an idle teammate checks its mailbox, and a permission request its
    /// answer. Default: the runtime's, 1,000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_poll_ms: Option<u64>,
    /// Liveness: once faults heal, every task must be terminal within this. Default
    /// 900,000 (the spawn deadline plus 5 minutes).
    pub liveness_bound_ms: u64,
    /// The virtual time after which a run is cut off as hung. Default 3,600,000.
    pub run_limit_ms: u64,
    /// Most model turns one agent loop takes. Default: the runtime's, 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns_max: Option<u32>,
    /// Where entropy comes from: `seed` (default), or `os`, which makes runs
    /// irreproducible (for the determinism experiment).
    pub entropy: EntropySource,
    /// Whether the runtime's disk honours `O_NOFOLLOW`. Default true; false models a
    /// filesystem that follows a final symlink anyway. The `memory` and `turmoil`
    /// disks can model that; the `real` disk refuses false.
    pub disk_honours_nofollow: bool,
    /// Which disk the runtime writes to: `memory`, the in-memory disk with POSIX
    /// crash semantics; `turmoil`, turmoil's simulated filesystem; or `real`, the
    /// production `RealDisk` on a fresh temp directory, so its `O_NOFOLLOW` and
    /// atomic replace run under the scenario. Default: the world's own disk,
    /// `memory` on the tokio world and `turmoil` on the turmoil world. The real disk
    /// cannot lose unsynced data, so it refuses `coordinator-crash`. `coordsim run
    /// --disk` overrides it.
    pub disk: Option<DiskSetting>,
    /// Seeded runtime defects to switch on, by name (`duplicate-notification`,
    /// `raw-envelope-result`, …): deliberately wrong behaviours that prove a checker
    /// catches its bug. Default none.
    #[schemars(with = "Vec<DefectName>")]
    pub defects: Vec<coord_runtime::defects::Defect>,
    /// The channel binding the session serves at first (nexo), as
    /// `<channel>:<account>`. Default none.
    pub binding: Option<String>,
    /// The main thread's system prompt text (the profile's default-prompt section),
    /// ahead of what coordinator mode adds. Default none.
    pub system_prompt: Option<String>,
    /// The main thread's other prompt sources (PROTOCOL.md §7). Default none.
    pub prompt: PromptSettings,
    /// Whether the main thread runs in coordinator mode. Default true; forks
    /// (`subagent_type = "fork"`) need false, since the two modes exclude each other.
    pub coordinator_mode: bool,
    /// The coordinator-mode environment switch (`COORDSIM_COORDINATOR_MODE`) as
    /// the session starts with it. When set, the runtime's own activation rule
    /// decides the mode from it, and the judges hold that mode to PROTOCOL.md §7's
    /// rule (the build feature, which the simulator's build has, and the switch
    /// `1` or `true` in any case): it then stands in for `coordinator_mode`.
    /// Default none.
    pub coordinator_mode_switch: Option<String>,
    /// The session modes that also make every spawn run in the background
    /// (PROTOCOL.md §2's async decision): the fork experiment, assistant mode,
    /// proactive mode. Default false each.
    pub fork_experiment: bool,
    /// Assistant mode. Default false.
    pub assistant_mode: bool,
    /// Proactive mode. Default false.
    pub proactive_mode: bool,
    /// Background tasks disabled: every spawn runs in the foreground, whatever
    /// asks otherwise. Refused in coordinator mode. Default false.
    pub background_tasks_disabled: bool,
    /// How the runtime reaches its model: `direct` (default) calls the scripted model
    /// in process; `http` and `http-streaming` run the production Anthropic provider
    /// over an in-memory network to a simulated API host that answers from the
    /// scripts, as one JSON body or as an SSE stream. Model API faults then reach the
    /// provider on the wire.
    pub model_transport: ModelTransport,
    /// How long the client waits for a model call's answer before it gives up, in
    /// ms (Claude Code's `API_TIMEOUT_MS`). The HTTP transports' provider times out
    /// after it, and a `model-api` `timeout` fault takes this long to fail. Default
    /// 60,000; `coordsim import` writes 600,000, Claude Code's own default, since
    /// recorded answers can take two minutes.
    pub api_timeout_ms: u64,
    /// The simulated world the run happens in: `tokio` (default), one paused tokio
    /// executor with in-memory links; or `turmoil`, where the coordinator, the
    /// remote-worker host and the model API host are turmoil hosts on turmoil's
    /// network and clock. `--world` on the command line overrides it.
    pub world: WorldKind,
    /// The turmoil world's tick: how far turmoil's virtual time moves per step.
    /// Default 1. A coarser tick costs fewer steps for the same virtual time, and
    /// rounds every wait up to a whole tick. Ignored by the tokio world.
    pub turmoil_tick_ms: u64,
    /// The cap on each task's output file in bytes, the truncation marker included
    /// (the runtime's `OutputLimits::size_bytes_max`). Default none: the runtime's
    /// 5 GiB. It must hold at least the marker.
    pub output_bytes_max: Option<u64>,
    /// How many bytes of an output file the runtime reads at a time, for an
    /// envelope's result and for TaskOutput (the runtime's
    /// `OutputLimits::read_bytes_max`). Default none: the runtime's 8 MiB. A small
    /// one makes a short output span several reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_read_bytes_max: Option<u64>,
    /// How long a finished task whose notification was delivered stays in memory;
    /// after that it is evicted, and a continuation resumes it from its transcript.
    /// Default: the runtime's, 30,000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_grace_ms: Option<u64>,
    /// The context size, in tokens (the last response's input, cache and output
    /// tokens), at which an agent's conversation is compacted before its next
    /// request (the runtime's `compact_threshold_tokens`). Default none: the
    /// profile's rule, 167,000 tokens in `claude-code` and `hardened`, never in
    /// `nexo`. Lowered, small scenarios compact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_threshold_tokens: Option<u64>,
    /// Whether the session has a remote-worker host. Default true; false models a
    /// session configured without one, where a spawn asking for remote isolation
    /// must be refused and every other spawn goes on.
    pub remote_host: bool,
    /// Whether the workspace is a repository. Default true; false models a session
    /// whose workspace is none (version control is still installed), where a spawn
    /// asking for worktree isolation must be refused and every other spawn goes on.
    pub repository: bool,
}

/// Which simulated world a run happens in (`docs/worlds.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorldKind {
    /// One paused current-thread tokio executor per boot: time jumps to the next
    /// timer, and the remote-worker host and the model API host are reached over
    /// in-memory pipes.
    #[default]
    Tokio,
    /// Turmoil: each boot is a turmoil simulation whose hosts (coordinator,
    /// remote worker, model API) talk over turmoil TCP, on turmoil's ticked time.
    Turmoil,
}

impl std::fmt::Display for WorldKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorldKind::Tokio => "tokio",
            WorldKind::Turmoil => "turmoil",
        })
    }
}

/// How a run's runtime reaches its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ModelTransport {
    /// The scripted model, called in process.
    #[default]
    Direct,
    /// The Anthropic provider over HTTP/1.1, one JSON body per answer.
    Http,
    /// The Anthropic provider over HTTP/1.1, SSE streams.
    HttpStreaming,
}

/// The defect names, for the schema.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
enum DefectName {
    DuplicateNotification,
    RawEnvelopeResult,
    ForegroundSpawns,
    RedeliveredMessages,
    FollowSymlinks,
    UndeclaredCacheBreaks,
    UncheckedToolSurface,
    UnscopedWorkerLookup,
    UnconfinedWrites,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            spawn_deadline_ms: None,
            idle_poll_ms: None,
            liveness_bound_ms: 900_000,
            run_limit_ms: 3_600_000,
            turns_max: None,
            entropy: EntropySource::Seed,
            disk_honours_nofollow: true,
            disk: None,
            defects: Vec::new(),
            binding: None,
            system_prompt: None,
            prompt: PromptSettings::default(),
            coordinator_mode: true,
            coordinator_mode_switch: None,
            fork_experiment: false,
            assistant_mode: false,
            proactive_mode: false,
            background_tasks_disabled: false,
            model_transport: ModelTransport::Direct,
            api_timeout_ms: u64::try_from(crate::fault::API_TIMEOUT.as_millis())
                .expect("the default API timeout fits in u64 ms"),
            world: WorldKind::Tokio,
            turmoil_tick_ms: 1,
            output_bytes_max: None,
            output_read_bytes_max: None,
            eviction_grace_ms: None,
            compact_threshold_tokens: None,
            remote_host: true,
            repository: true,
        }
    }
}

impl Settings {
    /// How often an idle agent polls in this run: the scenario's setting, else
    /// the runtime's documented default.
    pub fn idle_poll_ms_or_default(&self) -> u64 {
        self.idle_poll_ms.unwrap_or(IDLE_POLL_MS_DEFAULT)
    }
}

/// The main thread's prompt sources beside `system_prompt` (PROTOCOL.md §7). An
/// empty text counts as absent. The claude-code and hardened profiles pick the
/// first of `override_prompt`, `coordinator_prompt`, `agent_prompt` and
/// `custom_prompt` that is present, else the default sections, then add
/// `append_prompt` unless the override won; nexo prepends its persona (when
/// `persona_tools` is set), then the agent prompt or else the default sections,
/// then the channel addendum. Every field defaults to none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PromptSettings {
    /// The override prompt: wins over every other source, and drops the append.
    pub override_prompt: Option<String>,
    /// The coordinator prompt.
    pub coordinator_prompt: Option<String>,
    /// The agent definition's prompt.
    pub agent_prompt: Option<String>,
    /// The custom prompt (`--system-prompt`).
    pub custom_prompt: Option<String>,
    /// More default-prompt sections after `system_prompt`, one system block each;
    /// an empty one is left out.
    pub default_sections: Vec<String>,
    /// The append prompt (`--append-system-prompt`).
    pub append_prompt: Option<String>,
    /// nexo: the channel addendum, after the agent prompt under its heading.
    pub channel_addendum: Option<String>,
    /// nexo: the binding's allowed tools. When set, the coordinator's prompt opens
    /// with the persona, whose tool section lists these tools that the coordinator
    /// surface has (matched ignoring case, sorted).
    pub persona_tools: Option<Vec<String>>,
}

/// Which disk a run gives the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DiskSetting {
    /// The in-memory disk: POSIX crash semantics, every fault kind.
    #[default]
    Memory,
    /// turmoil's simulated filesystem (`unstable-fs`), with POSIX crash semantics
    /// through turmoil's crash of the host that owns it: every fault kind.
    Turmoil,
    /// The production `RealDisk` on a temp directory removed after the run: every
    /// fault kind except those that need a power cut. The workspace is a git
    /// repository there, and the runtime's worktrees are the production `GitVcs`'s.
    Real,
    /// The production `RealDisk`, its every open, write, fsync, rename and
    /// directory sync made on the in-memory disk: a power cut keeps what the
    /// production code itself made durable. Every fault kind; `disk` faults meet
    /// the production code's own calls (a replace is a create, a write, a sync and
    /// a rename).
    RealOnMemory,
}

impl DiskSetting {
    /// The setting's name as written in scenarios and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            DiskSetting::Memory => "memory",
            DiskSetting::Turmoil => "turmoil",
            DiskSetting::Real => "real",
            DiskSetting::RealOnMemory => "real-on-memory",
        }
    }
}

impl std::fmt::Display for DiskSetting {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for DiskSetting {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "memory" => Ok(DiskSetting::Memory),
            "turmoil" => Ok(DiskSetting::Turmoil),
            "real" => Ok(DiskSetting::Real),
            "real-on-memory" => Ok(DiskSetting::RealOnMemory),
            other => Err(format!(
                "expected `memory`, `turmoil`, `real` or `real-on-memory`, got {other:?}"
            )),
        }
    }
}

/// Where a run's entropy comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EntropySource {
    /// Streams derived from the seed.
    #[default]
    Seed,
    /// The operating system: runs do not repeat.
    Os,
}

/// What swarm mode may draw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SwarmSettings {
    /// The fault kinds swarm mode may turn on. Default: every kind but
    /// `corrupt-inbox` ([`FaultKind::drawn_by_default`]).
    pub kinds: Vec<FaultKind>,
    /// Most faults one seed draws. Default 8.
    pub faults_max: u32,
}

impl Default for SwarmSettings {
    fn default() -> Self {
        Self {
            kinds: FaultKind::drawn_by_default(),
            faults_max: 8,
        }
    }
}

/// What the run must show.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// The invariant this scenario is an experiment against: each seed passes when
    /// that violation is found (and no other). Default: none, every invariant holds.
    pub violation: Option<Invariant>,
    /// The least number of envelopes and messages a run carries unless a fault
    /// swarm mode drew fired: envelopes accepted, mailbox writes, queued messages.
    /// A run below it fails as `traffic-min`. Default 0.
    pub traffic_min: u64,
}

/// The JSON Schema of scenario files, as written to `docs/scenario.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

/// A scenario file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong and what was expected.
        message: String,
    },
    /// The scenario's `[model] cassette` could not be read or is not a cassette.
    #[error(transparent)]
    Cassette(#[from] crate::cassette::CassetteError),
    /// Two scenarios of one folder have the same `name`: reports, shrunk failures
    /// and repro lines name a scenario by it, so it must say which file it means.
    #[error("{second}:1:1: scenario name {name:?} is already used by {first} in the same folder; names must be unique within a folder")]
    DuplicateName {
        /// The name.
        name: String,
        /// The file that has it first, in path order.
        first: PathBuf,
        /// The file that has it again.
        second: PathBuf,
    },
}

/// A scenario and the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub scenario: Scenario,
}

impl LoadedScenario {
    /// Reads and validates the scenario at `path`, and the cassette it names: a
    /// cassette that is missing or corrupt is bad input, found before any seed
    /// runs, not a failure of every seed.
    pub fn load(path: &Path) -> Result<LoadedScenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let loaded = Self::parse(path, &text)?;
        crate::cassette::CassettePolicy::for_scenario(&loaded)?;
        Ok(loaded)
    }

    /// Validates scenario `text`, reporting errors against `path`.
    pub fn parse(path: &Path, text: &str) -> Result<LoadedScenario, ScenarioError> {
        let mut scenario: Scenario = toml::from_str(text).map_err(|error| {
            let offset = error.span().map_or(0, |span| span.start);
            let (line, column) = line_column(text, offset);
            ScenarioError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message: error.message().trim().to_owned(),
            }
        })?;
        let invalid = |needle: String, message: String| {
            let offset = text.find(&needle).unwrap_or(0);
            let (line, column) = line_column(text, offset);
            ScenarioError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message,
            }
        };
        // Ranges are checked as written, where their paths point into the text;
        // references between agents once counts and repeats are expanded.
        bounds::check(&scenario).map_err(|out_of_range| {
            let offset = locate::offset_of(text, &out_of_range.path).unwrap_or(0);
            let (line, column) = line_column(text, offset);
            ScenarioError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message: out_of_range.message,
            }
        })?;
        expand::expand(&mut scenario);
        if let Some(switch) = &scenario.settings.coordinator_mode_switch {
            scenario.settings.coordinator_mode = switch_turns_coordinator_mode_on(switch);
        }
        validate(&scenario).map_err(|(needle, message)| invalid(needle, message))?;
        Ok(LoadedScenario {
            path: path.to_owned(),
            scenario,
        })
    }
}

/// Whether a session started with the coordinator-mode switch at `value` runs in
/// coordinator mode, in the simulator's build (which has the `coordinator-mode`
/// feature): PROTOCOL.md §7's activation, the simulator's own copy, so a runtime
/// that reads the rule otherwise is judged by it.
fn switch_turns_coordinator_mode_on(value: &str) -> bool {
    let value = value.trim();
    value == "1" || value.eq_ignore_ascii_case("true")
}

/// A semantic mistake: the text to point at, and what was expected.
type Mistake = (String, String);

/// Checks what serde cannot: that names refer to something and counts are positive.
fn validate(scenario: &Scenario) -> Result<(), Mistake> {
    if let Some(size_bytes_max) = scenario.settings.output_bytes_max {
        let marker_bytes = coord_runtime::ipc::truncation_marker(size_bytes_max).len() as u64;
        if size_bytes_max < marker_bytes {
            return Err((
                "output_bytes_max".to_owned(),
                format!(
                    "an output file must hold its truncation marker: `output_bytes_max` must be at least {marker_bytes}"
                ),
            ));
        }
    }
    if scenario.settings.turmoil_tick_ms == 0 {
        return Err((
            "turmoil_tick_ms".to_owned(),
            "turmoil's time moves one tick per step: `turmoil_tick_ms` must be at least 1"
                .to_owned(),
        ));
    }
    let replayed = scenario.model.cassette.is_some();
    if scenario.model.matching.is_some() && !replayed {
        return Err((
            "match".to_owned(),
            "[model] `match` needs a `cassette` to match against".to_owned(),
        ));
    }
    if replayed && scenario.economics.fork_system_edit.is_some() {
        return Err((
            "fork_system_edit".to_owned(),
            "a [model] cassette replays requests as the runtime sent them, before a \
             fork_system_edit: the two cannot be combined"
                .to_owned(),
        ));
    }
    if replayed && scenario.economics.stagger_ms > 0 {
        return Err((
            "stagger_ms".to_owned(),
            "a [model] cassette's latencies already include the stagger its forks were \
             sent with: `stagger_ms` must be 0 with a cassette"
                .to_owned(),
        ));
    }
    if scenario.coordinator.turns.is_empty() && !replayed {
        return Err((
            "[coordinator]".to_owned(),
            "expected at least one [[coordinator.turns]] table".to_owned(),
        ));
    }
    let mut prompts = std::collections::BTreeSet::new();
    for worker in &scenario.workers {
        if !prompts.insert(worker.prompt.as_str()) {
            return Err((
                worker.prompt.clone(),
                format!(
                    "two [[workers]] have the prompt {:?}; prompts must be unique",
                    worker.prompt
                ),
            ));
        }
    }
    if let Some(launch) = scenario
        .launches
        .iter()
        .find(|launch| !prompts.contains(launch.prompt.as_str()))
    {
        return Err((
            launch.prompt.clone(),
            format!(
                "a [[launches]] entry launches prompt {:?}, but no [[workers]] script has that prompt",
                launch.prompt
            ),
        ));
    }
    let forks = scenario
        .coordinator
        .turns
        .iter()
        .flat_map(|t| &t.tool_calls)
        // A fork the scenario expects refused is a test of that refusal.
        .any(|call| {
            call.name == "Agent"
                && call.input.get("subagent_type").and_then(|t| t.as_str()) == Some("fork")
                && call.expect != Some(crate::model::CallOutcome::Error)
        });
    if (forks || scenario.economics.compare == Some(Comparison::ForkVsFresh))
        && scenario.settings.coordinator_mode
    {
        return Err((
            "subagent_type".to_owned(),
            "forks need `coordinator_mode = false` in [settings]: a fork is refused in coordinator mode (give the call `expect = \"error\"` to test that refusal)"
                .to_owned(),
        ));
    }
    match scenario.economics.compare {
        Some(Comparison::SimultaneousVsStaggered) if scenario.economics.stagger_ms == 0 => {
            return Err((
                "simultaneous-vs-staggered".to_owned(),
                "the comparison simultaneous-vs-staggered needs a positive [economics] stagger_ms"
                    .to_owned(),
            ))
        }
        Some(Comparison::IntactVsEdited) if scenario.economics.fork_system_edit.is_none() => {
            return Err((
                "intact-vs-edited".to_owned(),
                "the comparison intact-vs-edited needs an [economics.fork_system_edit] table"
                    .to_owned(),
            ))
        }
        Some(Comparison::CompactEarlierVsLater) => {
            let later = scenario.settings.compact_threshold_tokens.or_else(|| {
                scenario
                    .profile
                    .compaction()
                    .map(|policy| policy.threshold_tokens())
            });
            match (scenario.economics.compact_earlier_threshold_tokens, later) {
                (Some(earlier), Some(later)) if earlier < later => {}
                (Some(_), _) => {
                    return Err((
                        "compact_earlier_threshold_tokens".to_owned(),
                        "compact_earlier_threshold_tokens must be below the scenario's own \
                         compaction threshold ([settings] compact_threshold_tokens, or the \
                         profile's)"
                            .to_owned(),
                    ))
                }
                (None, _) => {
                    return Err((
                        "compact-earlier-vs-later".to_owned(),
                        "the comparison compact-earlier-vs-later needs an [economics] \
                         compact_earlier_threshold_tokens"
                            .to_owned(),
                    ))
                }
            }
        }
        _ => {}
    }
    let scripts = std::iter::once(&scenario.coordinator).chain(&scenario.workers);
    for script in scripts.clone() {
        for call in script.turns.iter().flat_map(|turn| &turn.tool_calls) {
            let Some(answer) = &call.shell else {
                continue;
            };
            if call.name != "Bash" {
                return Err((
                    "shell".to_owned(),
                    format!(
                        "a `shell` answer is for a Bash call's command, but this call is {}",
                        call.name
                    ),
                ));
            }
            if answer.killed.is_some() && answer.exit_code != 0 {
                return Err((
                    "killed".to_owned(),
                    "a killed command has no exit code: leave `exit_code` out with `killed`"
                        .to_owned(),
                ));
            }
        }
    }
    for script in scripts {
        for turn in script.turns.iter() {
            for call in turn.tool_calls.iter().filter(|call| call.name == "Agent") {
                let Some(prompt) = call.input.get("prompt").and_then(|p| p.as_str()) else {
                    continue;
                };
                if !prompts.contains(prompt) {
                    return Err((
                        prompt.to_owned(),
                        format!("an Agent call launches prompt {prompt:?}, but no [[workers]] script has that prompt"),
                    ));
                }
            }
        }
    }
    let matches_worker = |pattern: &str| {
        scenario
            .workers
            .iter()
            .any(|worker| crate::model::wildcard_match(pattern, &worker.prompt))
    };
    for fault in &scenario.faults {
        let patterns: Vec<&str> = match fault {
            Fault::WorkerCrash { worker, .. }
            | Fault::DuplicateNotify { worker }
            | Fault::ForgedEnvelope { worker }
            | Fault::DelayedNotification { worker, .. }
            | Fault::MaliciousSlug { worker }
            | Fault::OversizeMessage { worker, .. } => vec![worker],
            Fault::ClobberedWrite { writers, .. } | Fault::ClobberedScratch { writers, .. } => {
                writers.iter().map(String::as_str).collect()
            }
            Fault::ModelApi { agent, .. } if agent != "coordinator" => vec![agent],
            _ => Vec::new(),
        };
        // A cassette's workers are known once it is read, not from the scripts.
        if let Some(pattern) = patterns
            .into_iter()
            .find(|p| !replayed && !matches_worker(p))
        {
            return Err((
                format!("\"{pattern}\""),
                format!(
                    "fault {}: no [[workers]] prompt matches {pattern:?}",
                    fault.kind()
                ),
            ));
        }
        if let Fault::SymlinkedWorktreeDir {
            worktree,
            dir,
            target,
        } = fault
        {
            check_link_dir(dir)?;
            if *target == LinkTarget::OtherWorktree && *worktree < 2 {
                return Err((
                    "other-worktree".to_owned(),
                    format!(
                        "fault {}: `target` = \"other-worktree\" points at the worktree made \
                         before this one, so `worktree` must be at least 2",
                        fault.kind()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a `symlinked-worktree-dir` link name that is not one plain path segment:
/// the link is planted in the worktree itself, never above it or in a directory the
/// fault would have to make.
fn check_link_dir(dir: &str) -> Result<(), (String, String)> {
    let plain = !dir.is_empty() && dir != "." && dir != ".." && !dir.contains(['/', '\0']);
    if plain {
        return Ok(());
    }
    Err((
        format!("\"{dir}\""),
        format!(
            "fault {}: `dir` = {dir:?} must be one plain path segment (a name in the \
             worktree, without `/`, `.` or `..`)",
            FaultKind::SymlinkedWorktreeDir
        ),
    ))
}

/// The binding key a scenario writes as `<channel>:<account>` (or just `<channel>`).
pub fn binding_key(text: &str) -> coord_runtime::route::BindingKey {
    match text.split_once(':') {
        Some((channel, account)) => coord_runtime::route::BindingKey::new(channel, Some(account)),
        None => coord_runtime::route::BindingKey::new(text, None),
    }
}
