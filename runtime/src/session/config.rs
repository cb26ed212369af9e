//! Session configuration, the effects a session drives, and coordinator-mode activation.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "defects")]
use crate::defects::Defects;
use crate::ipc::OutputLimits;
use crate::profile::Profile;
use crate::route::BindingKey;
use crate::world::{Model, Remote, Shell, Tools, Vcs};

/// The environment variable that switches coordinator mode on (`1` or `true`), in a
/// build with the `coordinator-mode` feature.
pub const COORDINATOR_MODE_ENV: &str = "COORDSIM_COORDINATOR_MODE";

/// Whether a new session runs in coordinator mode: the build feature and the
/// environment switch must both be on. A resumed session ignores both and restores
/// the mode it stored ([`SessionMeta::coordinator_mode`]).
pub fn coordinator_mode_requested(env_value: Option<&str>) -> bool {
    let compiled_in = cfg!(feature = "coordinator-mode");
    let switched_on = matches!(
        env_value.map(|value| value.trim().to_ascii_lowercase()),
        Some(ref value) if value == "1" || value == "true"
    );
    compiled_in && switched_on
}

/// What a session stores about itself, so that a resume restores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session's id.
    pub session_id: String,
    /// Its profile.
    pub profile: Profile,
    /// Whether it runs in coordinator mode.
    pub coordinator_mode: bool,
    /// The main thread's agent id (its id as a team lead).
    #[serde(default)]
    pub main_agent_id: Option<crate::task::TaskId>,
}

/// How a session behaves. Every default is listed on its field.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// The session's id. Default `session`.
    pub session_id: String,
    /// The profile. Default `hardened`.
    pub profile: Profile,
    /// Coordinator mode. Default off; see [`coordinator_mode_requested`].
    pub coordinator_mode: bool,
    /// The model the coordinator and `inherit` workers use. Default `claude-sonnet-4-5`.
    pub model: String,
    /// `max_tokens` of every request. Default 8,192.
    pub max_tokens: u32,
    /// Every spawn's deadline: at its expiry an unfinished worker is ended and a
    /// `timeout` (nexo) or `killed` (claude-code) notification is synthesized.
    /// Default 10 minutes.
    pub spawn_deadline: Duration,
    /// Most model turns one agent loop takes before it fails. Default 200.
    pub turns_max: u32,
    /// How often an idle teammate checks its mailbox, and a permission request its
    /// answer: files other processes write, which nothing signals. Default 1 s.
    pub idle_poll: Duration,
    /// How long a coordinator with nothing to do waits for a task to end or a
    /// notification to arrive before it checks its tasks again. Both wake it at
    /// once, so this only bounds the wait for a change that arrives unsignalled.
    /// Default 60 s.
    pub idle_recheck: Duration,
    /// Background tasks disabled: forces every spawn to run synchronously. Default off.
    pub background_tasks_disabled: bool,
    /// The fork experiment (spawns are forks unless a type is given). Default off.
    pub fork_experiment: bool,
    /// Assistant mode. Default off.
    pub assistant_mode: bool,
    /// Proactive mode. Default off.
    pub proactive_mode: bool,
    /// How long terminal, notified tasks stay in memory. Default 30 s.
    pub eviction_grace: Duration,
    /// Task output file limits. Default 5 GiB cap, 8 MiB reads.
    pub output_limits: OutputLimits,
    /// The repository worktrees are made from. Default none (worktree isolation fails).
    pub repo: Option<PathBuf>,
    /// The directory same-dir workers and the coordinator work in. Default `.`.
    /// With the session root and `repo`, it is where agents without a worktree may
    /// write (invariant 7): make it absolute for absolute paths inside it to be
    /// writable, since a relative root admits relative paths only.
    pub cwd: PathBuf,
    /// The channel binding this session serves (nexo): workers it spawns belong to
    /// it, and SendMessageToWorker reaches only those. Default none.
    pub binding: Option<BindingKey>,
    /// Explicit consent to send messages to other machines (`bridge:`). Default off.
    pub bridge_consent: bool,
    /// How long a teammate waits for the lead to answer a permission request before
    /// the call is refused. Default 5 minutes.
    pub permission_timeout: Duration,
    /// How many times a model call that failed with a transient error
    /// ([`ModelError::is_transient`](crate::world::ModelError::is_transient): 429,
    /// 529, a timeout, a failed connection) is retried before the agent fails: the
    /// runtime's one retry budget, since models make one attempt per call.
    /// Default 10.
    pub model_retries_max: u32,
    /// The first retry's delay; each later one doubles, up to 32 times this, and a
    /// `retry-after` the API sent wins. Default 1 s.
    pub model_retry_backoff: Duration,
    /// The context size, in tokens (the last response's input, cache and output
    /// tokens), at which an agent's conversation is compacted before its next
    /// request. Default none: the profile's rule
    /// ([`Profile::compaction`](crate::profile::Profile::compaction)): past
    /// 167,000 tokens in `claude-code` and `hardened`, never in `nexo`. Set, it
    /// applies in every profile (a scenario lowers it so that small sessions
    /// compact).
    pub compact_threshold_tokens: Option<u64>,
    /// Deliberately wrong behaviours, for proving the simulator's checkers; never on
    /// in production. Default none. Only with the `defects` feature.
    #[cfg(feature = "defects")]
    pub defects: Defects,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            session_id: "session".to_owned(),
            profile: Profile::Hardened,
            coordinator_mode: false,
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 8_192,
            spawn_deadline: Duration::from_secs(600),
            turns_max: 200,
            idle_poll: Duration::from_secs(1),
            idle_recheck: Duration::from_secs(60),
            background_tasks_disabled: false,
            fork_experiment: false,
            assistant_mode: false,
            proactive_mode: false,
            eviction_grace: Duration::from_secs(30),
            output_limits: OutputLimits::default(),
            repo: None,
            cwd: PathBuf::from("."),
            binding: None,
            bridge_consent: false,
            permission_timeout: Duration::from_secs(300),
            model_retries_max: 10,
            model_retry_backoff: Duration::from_secs(1),
            compact_threshold_tokens: None,
            #[cfg(feature = "defects")]
            defects: Defects::none(),
        }
    }
}

impl SessionConfig {
    /// The default config under `profile`.
    pub fn new(profile: Profile) -> Self {
        Self {
            profile,
            ..Self::default()
        }
    }

    /// The context size, in tokens, past which an agent is compacted: the
    /// override, else the profile's rule; `None` for never.
    pub fn compact_threshold(&self) -> Option<u64> {
        self.compact_threshold_tokens.or_else(|| {
            self.profile
                .compaction()
                .map(|policy| policy.threshold_tokens())
        })
    }
}

/// The effects a session drives besides time, randomness and files: the model, the
/// tools, version control, other hosts and the shell.
#[derive(Debug, Clone)]
pub struct Effects {
    /// The model every agent calls.
    pub model: Arc<dyn Model>,
    /// The tools worker calls reach, after the gate.
    pub tools: Arc<dyn Tools>,
    /// Version control, for worktree isolation.
    pub vcs: Option<Arc<dyn Vcs>>,
    /// Other hosts, for remote isolation.
    pub remote: Option<Arc<dyn Remote>>,
    /// The shell, for background shell tasks.
    pub shell: Option<Arc<dyn Shell>>,
}
