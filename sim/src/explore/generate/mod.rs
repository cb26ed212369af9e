//! The program generator: one seed, one valid coordinator program.
//!
//! Every choice is drawn from a `ChaCha8Rng` seeded with the seed alone, in a fixed
//! order ([`draw`]), so the same seed always yields the same [`Scenario`] (and so
//! the same TOML text). The seed first picks the program's shape for the profile,
//! then its parts; each part is built so that its outcome does not depend on
//! timing, and every script is playable to its end on the shipped runtime:
//!
//! - [`coordinator`]: a main thread in coordinator mode with the Agent tool
//!   (`claude-code`, `hardened`): background, worktree and remote workers,
//!   messages to running and finished workers, `TaskStop` in the spawning turn, a
//!   spawn under a taken name, an off-surface call, and maybe a [`team`].
//! - [`solo`]: a main thread out of coordinator mode (every profile): forks from one
//!   message (one of which may try to fork again), background and foreground
//!   spawns, and the main thread's own calls on the shared files.
//! - [`nexo`]: a nexo coordinator with the harness's launches, TaskList, TaskGet,
//!   TaskStop and SendMessageToWorker, and a binding switch after which another
//!   chat probes the first one's worker ids.
//!
//! Workers' scripts ([`worker`]) read, write the shared notes, write files of their
//! own, use the scratchpad and start background shells. Swarm faults come on top,
//! drawn by the run from the same seed.

mod coordinator;
mod draw;
mod nexo;
mod solo;
mod team;
mod worker;

use coord_runtime::defects::Defect;
use coord_runtime::profile::Profile;

use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn, Trigger};
use crate::scenario::{Fault, FaultKind, Launch, LeadAction, Scenario, Settings, SwarmSettings};
use draw::Draw;

/// What a generated program is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExploreOptions {
    /// The runtime profile every program names. Default hardened.
    pub profile: Profile,
    /// The seeded defects every program switches on. Default none.
    pub defects: Vec<Defect>,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            profile: Profile::Hardened,
            defects: Vec::new(),
        }
    }
}

/// The shape of a program: which kind of main thread it scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Coordinator mode with the Agent tool ([`coordinator`]).
    Coordinator,
    /// Out of coordinator mode, with forks ([`solo`]).
    Solo,
    /// A nexo coordinator driving the harness's launches ([`nexo`]).
    NexoCoordinator,
}

/// What a program's parts add up to, before they become a scenario.
struct Parts {
    /// Whether the main thread runs in coordinator mode.
    coordinator_mode: bool,
    /// The coordinator's turns before its last, which waits for `notifications`.
    turns: Vec<ScriptedTurn>,
    /// Notifications the program causes the coordinator.
    notifications: usize,
    workers: Vec<AgentScript>,
    launches: Vec<Launch>,
    lead: Vec<LeadAction>,
    faults: Vec<Fault>,
    binding: Option<String>,
    system_prompt: Option<String>,
    /// Fault kinds swarm may not draw for this program.
    unfit_kinds: Vec<FaultKind>,
    /// What the program is, for its description.
    summary: String,
}

impl Parts {
    fn new(coordinator_mode: bool) -> Self {
        Self {
            coordinator_mode,
            turns: Vec::new(),
            notifications: 0,
            workers: Vec::new(),
            launches: Vec::new(),
            lead: Vec::new(),
            faults: Vec::new(),
            binding: None,
            system_prompt: None,
            unfit_kinds: Vec::new(),
            summary: String::new(),
        }
    }
}

/// The lowest compaction threshold a program draws: above the largest first request
/// a generated worker sends, so that an agent compacts only after a turn of its
/// own.
const COMPACT_THRESHOLD_MIN_TOKENS: u64 = 1_000;

/// A tool call without an expected answer.
fn call(name: &str, input: serde_json::Value) -> ScriptedToolCall {
    ScriptedToolCall::new(name, input)
}

fn tool_turn(calls: Vec<ScriptedToolCall>, latency: Latency) -> ScriptedTurn {
    ScriptedTurn {
        tool_calls: calls,
        latency,
        ..ScriptedTurn::default()
    }
}

/// The program of `seed`: a scenario that passes validation and whose scripts play
/// to their end on the shipped runtime.
pub fn generate(seed: u64, options: &ExploreOptions) -> Scenario {
    let mut draw = Draw::new(seed);
    let shape = match options.profile {
        Profile::Nexo if draw.chance(1, 2) => Shape::NexoCoordinator,
        Profile::Nexo => Shape::Solo,
        _ if draw.chance(1, 4) => Shape::Solo,
        _ => Shape::Coordinator,
    };
    let mut parts = match shape {
        Shape::Coordinator => coordinator::program(&mut draw, seed),
        Shape::Solo => solo::program(&mut draw, seed),
        Shape::NexoCoordinator => nexo::program(&mut draw, seed),
    };
    let notifications = parts.notifications;
    parts.turns.push(ScriptedTurn {
        text: Some(format!(
            "Program {seed} done: {notifications} notifications."
        )),
        when: Some(Trigger::NotificationsAtLeast {
            count: notifications,
        }),
        latency: draw.latency_ms(200, 2_000),
        ..ScriptedTurn::default()
    });

    let mut settings = Settings {
        spawn_deadline_ms: Some(300_000),
        liveness_bound_ms: 600_000,
        defects: options.defects.clone(),
        coordinator_mode: parts.coordinator_mode,
        binding: parts.binding,
        system_prompt: parts.system_prompt,
        ..Settings::default()
    };
    // Drawn last, so the rest of each seed's program is the same with or without
    // it. A threshold this low makes the coordinator and the longer workers
    // compact mid-program (and a worker resumed later start from its transcript's
    // boundary).
    if draw.chance(1, 4) {
        settings.compact_threshold_tokens = Some(COMPACT_THRESHOLD_MIN_TOKENS + draw.below(3_000));
    }
    if options.defects.contains(&Defect::FollowSymlinks) {
        // The defect only shows on a filesystem that ignores O_NOFOLLOW.
        settings.disk_honours_nofollow = false;
    }
    Scenario {
        name: format!("explore-{seed}"),
        description: format!(
            "Generated by `coordsim explore --seed {seed}`: {}.",
            parts.summary
        ),
        profile: options.profile,
        settings,
        coordinator: AgentScript {
            prompt: format!("Run explore program {seed}."),
            recorded_prompt: None,
            turns: parts.turns.into(),
            count: None,
        },
        workers: parts.workers,
        launches: parts.launches,
        lead: parts.lead,
        files: Vec::new(),
        faults: parts.faults,
        swarm: SwarmSettings {
            kinds: FaultKind::drawn_by_default()
                .into_iter()
                .filter(|kind| !parts.unfit_kinds.contains(kind))
                .collect(),
            ..SwarmSettings::default()
        },
        expect: Default::default(),
        economics: Default::default(),
        model: Default::default(),
        recording: None,
    }
}
