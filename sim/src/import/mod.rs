//! Importing real Claude Code sessions as replayable scenarios.
//!
//! [`import_claude_code`] reads a session transcript (and the subagent transcripts
//! in `<session>/subagents/` beside it) and writes a scenario whose coordinator
//! plays the main thread's recorded model decisions and whose workers play the
//! subagents', so that `coordsim run` drives the real runtime through the session:
//!
//! 1. `dag`: the lines, linked by `uuid` / `parentUuid`; the active thread.
//! 2. `extract`: per agent, the first user prompt, each API response (its split
//!    lines merged by `(message.id, requestId)`), and the tool results, envelopes
//!    and prompts that arrived between responses.
//! 3. `sidechain`: each subagent paired with the call that spawned it.
//! 4. `scenario`: turns, with the adaptations a replay needs (`paths`: recorded
//!    paths moved into the workspace).
//! 5. `calibrate`: the bytes a token the cost meter counts the session's requests
//!    at, measured on how the recorded prompts grew (`[economics] bytes_per_token`).
//!
//! The scenario names the session in its `[recording]` section, so that
//! `coordsim replay --fidelity` can import it again and compare the replay with it.
//!
//! Unknown line types are skipped and counted; a line that is not a JSON object
//! with a string `type`, or a response whose usage reports more than
//! [`USAGE_TOKENS_MAX`] tokens in a count, is an [`ImportError::Malformed`] naming its
//! line. A UTF-8 byte order mark before the first line is skipped.

mod calibrate;
mod dag;
mod error;
mod extract;
mod paths;
mod scenario;
mod sidechain;

pub use calibrate::{
    calibrate, measured_growths, Calibration, Growth, MEASURED_TOKENS_MIN, TRIM_PERCENT,
};
pub use dag::{Dag, Entry};
pub use error::ImportError;
pub use extract::{
    thread as extract_thread, timestamp_ms, Arrivals, RecordedCompaction, Response, Thread, ToolUse,
};
pub use paths::OUTSIDE_DIR;
pub use scenario::{
    continuation_tool, prompt_rewritten, shell_notified_before, Adaptations, CompactionRequest,
    Role, LATENCY_MS_MAX, REWRITE_MARGIN_TOKENS, SEND_DELAY_MS_MAX,
};
pub use sidechain::{Sidechain, Source, SPAWNING_TOOLS};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use coord_runtime::world::Usage;

use crate::model::AgentScript;
use crate::scenario::{
    Economics, Expect, LoadedScenario, Recording, RecordingFormat, Scenario, Settings,
    SwarmSettings, TtlSetting, SPAWN_DEADLINE_MS_DEFAULT, TURNS_MAX_DEFAULT,
};

/// One agent of an imported session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSummary {
    /// `main`, or the subagent's `agentId`.
    pub name: String,
    /// Where its lines came from: `main`, `file`, `progress` or `missing`.
    pub source: &'static str,
    /// Its deduplicated responses: the scenario's turns.
    pub turns: usize,
    /// Tool calls it made, as recorded.
    pub tool_calls: usize,
    /// Tool results it received.
    pub tool_results: usize,
    /// `<task-notification>` envelopes delivered to it.
    pub notifications: usize,
    /// Responses left on abandoned branches.
    pub abandoned_responses: usize,
}

/// One compaction the recording made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionSummary {
    /// The agent compacted: `main`, or a subagent's `agentId`.
    pub agent: String,
    /// Line of its `compact_boundary`.
    pub line: usize,
    /// `compactMetadata.trigger`.
    pub trigger: String,
    /// `compactMetadata.preTokens`.
    pub pre_tokens: u64,
    /// The compaction agent's transcript that made its request, by `agentId`.
    pub transcript: Option<String>,
    /// The response of the agent's thread it precedes (0 for the first), when
    /// the thread went on after it.
    pub before_response: Option<usize>,
}

/// What an import read and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session file's name.
    pub source: String,
    /// Lines read in every file, blank lines excluded.
    pub lines_read: usize,
    /// Lines of each known type.
    pub lines_by_type: BTreeMap<String, usize>,
    /// Lines of unknown types, skipped, by type.
    pub skipped_by_type: BTreeMap<String, usize>,
    /// The main thread first, then each subagent.
    pub agents: Vec<AgentSummary>,
    /// Subagent transcripts no call spawned (compaction agents), by `agentId`.
    pub unpaired_subagents: Vec<String>,
    /// User prompts after the first, which the replay cannot type.
    pub later_user_prompts: usize,
    /// What the mapping changed.
    pub adaptations: Adaptations,
    /// The bytes a token the scenario's requests are counted at, and what they
    /// were measured on.
    pub calibration: Calibration,
    /// The compactions the recording made, in order.
    pub compactions: Vec<CompactionSummary>,
    /// What the replay does not reproduce, one sentence each: never skipped
    /// silently.
    pub not_reproduced: Vec<String>,
}

impl ImportSummary {
    /// Turns over every agent.
    pub fn turns(&self) -> usize {
        self.agents.iter().map(|a| a.turns).sum()
    }

    /// Recorded tool calls over every agent.
    pub fn tool_calls(&self) -> usize {
        self.agents.iter().map(|a| a.tool_calls).sum()
    }

    fn skipped_text(&self) -> String {
        if self.skipped_by_type.is_empty() {
            return "none".to_owned();
        }
        let parts: Vec<String> = self
            .skipped_by_type
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        parts.join(", ")
    }

    /// What `coordsim import` prints: [`Self::describe`], then each compaction and
    /// each thing the replay does not reproduce, a line each.
    pub fn report(&self) -> String {
        let mut text = self.describe();
        for compaction in &self.compactions {
            let _ = write!(
                text,
                "\ncompaction of {} at line {} ({}, {} tokens before it){}: replayed",
                compaction.agent,
                compaction.line,
                compaction.trigger,
                compaction.pre_tokens,
                compaction
                    .transcript
                    .as_ref()
                    .map_or_else(String::new, |t| format!(", request in {t}")),
            );
            if let Some(index) = compaction.before_response {
                let _ = write!(text, " before response {}", index + 1);
            }
        }
        if self.not_reproduced.is_empty() {
            text.push_str("\nnot reproduced: nothing");
        }
        for item in &self.not_reproduced {
            let _ = write!(text, "\nnot reproduced: {item}");
        }
        text
    }

    /// One line: what was imported.
    pub fn describe(&self) -> String {
        format!(
            "Replay of Claude Code session {}: {} lines (skipped unknown types: {}), \
             {} agents, {} turns, {} tool calls, {} bytes a token.",
            self.source,
            self.lines_read,
            self.skipped_text(),
            self.agents.len(),
            self.turns(),
            self.tool_calls(),
            self.calibration.bytes_per_token
        )
    }
}

/// One agent of the recording and the script that plays it.
#[derive(Debug, Clone)]
pub struct RecordedAgent {
    /// `main`, or the subagent's `agentId`.
    pub name: String,
    /// The prompt its script is found by (the main thread's is the coordinator's).
    pub prompt: String,
    /// Its role in the replay.
    pub role: Role,
    /// Whether a script of its own plays it: false for a subagent whose prompt an
    /// earlier agent's script already has.
    pub scripted: bool,
    /// Its thread, as recorded.
    pub thread: Thread,
    /// The turns of its script whose last tool call is a continuation the import
    /// added, not a recorded call.
    pub continued_turns: Vec<usize>,
}

/// An imported session.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The scenario.
    pub scenario: Scenario,
    /// The scenario as a file: a header comment, then TOML.
    pub toml: String,
    /// What was read and written.
    pub summary: ImportSummary,
    /// The main thread first, then each subagent, as recorded.
    pub agents: Vec<RecordedAgent>,
}

/// Imports the Claude Code session at `path` (see the module documentation). The
/// scenario's `[recording] source` is `path` as given.
pub fn import_claude_code(path: &Path) -> Result<Imported, ImportError> {
    import_session(path, path.to_owned())
}

/// Imports the Claude Code session at `path` into a scenario to be written at
/// `scenario_file`, whose `[recording] source` is then relative to the scenario's
/// folder, so that the two can move together.
pub fn import_claude_code_to(path: &Path, scenario_file: &Path) -> Result<Imported, ImportError> {
    let dir = scenario_file
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    import_session(path, relative_path(dir, path))
}

/// `to` as a path relative to the folder `from`; `to` as given when either cannot
/// be resolved (a folder not yet made).
fn relative_path(from: &Path, to: &Path) -> std::path::PathBuf {
    let (Ok(from), Ok(to_resolved)) = (from.canonicalize(), to.canonicalize()) else {
        return to.to_owned();
    };
    let from: Vec<_> = from.components().collect();
    let target: Vec<_> = to_resolved.components().collect();
    let shared = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut relative = std::path::PathBuf::new();
    for _ in shared..from.len() {
        relative.push("..");
    }
    for component in &target[shared..] {
        relative.push(component);
    }
    relative
}

fn import_session(
    path: &Path,
    recording_source: std::path::PathBuf,
) -> Result<Imported, ImportError> {
    let main_dag = sidechain::read_dag(path)?;
    let main = extract::thread(&main_dag);
    let main_dag = main_dag.without_lines();
    check_usage(path, &main)?;
    let Some(prompt) = main.prompt.clone() else {
        return Err(ImportError::NoPrompt {
            path: path.to_owned(),
        });
    };
    let files = sidechain::subagent_files(path)?;
    let sidechains = sidechain::pair(&main, &files)?;
    let source = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );

    let mut summary = ImportSummary {
        source,
        lines_read: main_dag.lines_read,
        lines_by_type: main_dag.lines_by_type.clone(),
        skipped_by_type: main_dag.skipped_by_type.clone(),
        agents: vec![agent_summary("main".to_owned(), "main", &main)],
        unpaired_subagents: Vec::new(),
        later_user_prompts: main.responses.iter().map(|r| r.before.user_prompts).sum(),
        adaptations: Adaptations::default(),
        // Measured once the scripts are made, which it counts the bytes of.
        calibration: Calibration::default(),
        compactions: Vec::new(),
        not_reproduced: Vec::new(),
    };
    for sidechain in &sidechains {
        let file = match &sidechain.source {
            Source::File(file) => file,
            Source::Progress | Source::Missing => path,
        };
        check_usage(file, &sidechain.thread)?;
        let source = match sidechain.source {
            Source::File(_) => "file",
            Source::Progress => "progress",
            Source::Missing => "missing",
        };
        summary.agents.push(agent_summary(
            sidechain.agent_id.clone(),
            source,
            &sidechain.thread,
        ));
        if let Some(dag) = &sidechain.dag {
            summary.lines_read += dag.lines_read;
            add_counts(&mut summary.lines_by_type, &dag.lines_by_type);
            add_counts(&mut summary.skipped_by_type, &dag.skipped_by_type);
        }
    }
    let paired: BTreeSet<&str> = sidechains.iter().map(|s| s.agent_id.as_str()).collect();
    summary.unpaired_subagents = files
        .keys()
        .filter(|id| !paired.contains(id.as_str()))
        .cloned()
        .collect();

    let mut facts = session_facts(&main, &sidechains);
    let compaction_files: Vec<(String, std::path::PathBuf)> = files
        .iter()
        .filter(|(id, _)| !paired.contains(id.as_str()))
        .map(|(id, file)| (id.clone(), file.clone()))
        .collect();
    let threads = std::iter::once(("main", &main))
        .chain(sidechains.iter().map(|s| (s.agent_id.as_str(), &s.thread)));
    let compactions = compaction_requests(threads.clone(), &compaction_files, &mut summary)?;
    facts.compaction_requests = compactions;
    let mut listed = not_reproduced(threads, &summary.compactions);
    listed.append(&mut summary.not_reproduced);
    for id in &summary.unpaired_subagents {
        listed.push(format!(
            "subagent transcript {id}: no call spawned it and it is no compaction's, so \
             it is left out"
        ));
    }
    for call in &facts.shells_never_notified {
        listed.push(format!(
            "Bash call {call} ran in the background and the recording never heard from it \
             again: the replay runs it in the foreground, so that the runtime's \
             notification of it does not arrive"
        ));
    }
    summary.not_reproduced = listed;
    let adapted = &mut summary.adaptations;
    let mut coordinator =
        scenario::script("main", &prompt, &main, Role::Coordinator, &facts, adapted);
    let mut agents = vec![RecordedAgent {
        name: "main".to_owned(),
        prompt: prompt.clone(),
        role: Role::Coordinator,
        scripted: true,
        thread: main,
        continued_turns: coordinator.continued_turns,
    }];
    let mut workers: Vec<AgentScript> = Vec::new();
    for sidechain in sidechains {
        // The runtime finds a worker by its prompt, so two spawns of one prompt
        // play one script: the first recorded.
        let scripted =
            sidechain.prompt != prompt && workers.iter().all(|w| w.prompt != sidechain.prompt);
        let mut continued_turns = Vec::new();
        if scripted {
            let worker = scenario::script(
                &sidechain.agent_id,
                &sidechain.prompt,
                &sidechain.thread,
                Role::Worker,
                &facts,
                adapted,
            );
            continued_turns = worker.continued_turns;
            workers.push(worker.script);
        }
        agents.push(RecordedAgent {
            name: sidechain.agent_id,
            prompt: sidechain.prompt,
            role: Role::Worker,
            scripted,
            thread: sidechain.thread,
            continued_turns,
        });
    }
    let ttl = recorded_ttl(agents.iter().flat_map(|a| &a.thread.responses));
    // Each scripted agent with its script: the coordinator's, then the workers' in
    // the order they were made.
    let mut scripts = std::iter::once(&coordinator.script).chain(&workers);
    let scripted: Vec<(&Thread, &AgentScript)> = agents
        .iter()
        .filter(|agent| agent.scripted)
        .filter_map(|agent| Some((&agent.thread, scripts.next()?)))
        .collect();
    summary.calibration = calibrate(scripted.iter().copied());
    // An agent whose own prompts grew at more bytes a token than the session's (a
    // subagent writing prose among code) is counted at its own ratio: the session's
    // would overcount it, which nothing makes up for. (An agent the session's ratio
    // undercounts has each request padded to its recorded size by the cost meter.)
    let own_ratios: Vec<Option<crate::cache::BytesPerToken>> = scripted
        .iter()
        .map(|&(thread, script)| {
            let own = calibrate([(thread, script)]);
            let session = summary.calibration.bytes_per_token;
            (own.calibrated && summary.calibration.calibrated && own.bytes_per_token > session)
                .then_some(own.bytes_per_token)
        })
        .collect();
    drop(scripted);
    let mut own_ratios = own_ratios.into_iter();
    for script in std::iter::once(&mut coordinator.script).chain(workers.iter_mut()) {
        let ratio = own_ratios.next().flatten();
        if let (Some(ratio), Some(prompt)) = (ratio, script.recorded_prompt.as_mut()) {
            prompt.bytes_per_token = Some(ratio);
            summary.adaptations.agent_ratios += 1;
        }
    }
    let mut scenario = Scenario {
        name: scenario_name(path),
        description: summary.describe(),
        profile: coord_runtime::profile::Profile::ClaudeCode,
        settings: Settings {
            // Claude Code's main thread has every tool and waits for a foreground
            // Task: the runtime's main thread outside coordinator mode.
            coordinator_mode: false,
            // The replay compacts where the recording did (its scripts ask for
            // it), never by the runtime's threshold, which the replay's own token
            // counts would pass at other requests.
            compact_threshold_tokens: Some(crate::scenario::bounds::TOKENS_MAX),
            // Recorded answers take up to `LATENCY_MS_MAX`: the replay's client
            // waits as long as Claude Code's does, so that over an HTTP transport
            // no recorded answer times out.
            api_timeout_ms: CLAUDE_CODE_API_TIMEOUT_MS,
            ..Settings::default()
        },
        coordinator: coordinator.script,
        workers,
        files: Vec::new(),
        faults: Vec::new(),
        launches: Vec::new(),
        lead: Vec::new(),
        swarm: SwarmSettings {
            kinds: Vec::new(),
            ..SwarmSettings::default()
        },
        expect: Expect::default(),
        economics: Economics {
            ttl,
            bytes_per_token: summary.calibration.bytes_per_token,
            ..Economics::default()
        },
        recording: Some(Recording {
            source: recording_source,
            format: RecordingFormat::ClaudeCode,
        }),
        model: Default::default(),
    };
    if scenario.coordinator.turns.is_empty() {
        // A session the user left before the model answered: the coordinator says
        // nothing, which still exercises the runtime's start and end.
        std::sync::Arc::make_mut(&mut scenario.coordinator.turns)
            .push(crate::model::ScriptedTurn::default());
    }
    let shell_ms_max = agents
        .iter()
        .map(|agent| gated_shell_ms_max(&agent.thread))
        .max()
        .unwrap_or(0);
    size_settings(&mut scenario, shell_ms_max);
    let mut toml = header(&summary, scenario.economics.ttl);
    toml.push_str(&toml::to_string(&scenario).map_err(|e| ImportError::Scenario(e.to_string()))?);
    // The scenario returned is the one loaded back, so that the built one and the
    // loaded one are never held at once (their texts can be hundreds of megabytes).
    drop(scenario);
    let loaded = LoadedScenario::parse(Path::new(&summary.source), &toml)
        .map_err(|e| ImportError::Scenario(e.to_string()))?;
    Ok(Imported {
        scenario: loaded.scenario,
        toml,
        summary,
        agents,
    })
}

/// How long Claude Code waits for an answer before it gives up (its
/// `API_TIMEOUT_MS` default): ten minutes, past the longest latency an imported turn
/// keeps.
const CLAUDE_CODE_API_TIMEOUT_MS: u64 = 600_000;
const _: () = assert!(CLAUDE_CODE_API_TIMEOUT_MS > LATENCY_MS_MAX);

/// The most tokens one usage count of a response may report: a quarter of the
/// scenario format's bound on a token count
/// ([`TOKENS_MAX`](crate::scenario::bounds::TOKENS_MAX)), so that a recorded
/// prompt, the sum of three such counts, is within it too and an imported session is
/// always a scenario that loads. 250 million is still 250 times the largest context
/// window.
pub const USAGE_TOKENS_MAX: u64 = crate::scenario::bounds::TOKENS_MAX / 4;

/// Refuses a response whose usage reports a count above [`USAGE_TOKENS_MAX`], naming
/// the file and line of the response.
fn check_usage(path: &Path, thread: &Thread) -> Result<(), ImportError> {
    for response in &thread.responses {
        let Some(usage) = &response.usage else {
            continue;
        };
        let counts = [
            ("input_tokens", usage.input_tokens),
            ("output_tokens", usage.output_tokens),
            (
                "cache_creation_input_tokens",
                usage.cache_creation_input_tokens,
            ),
            ("cache_read_input_tokens", usage.cache_read_input_tokens),
            (
                "cache_creation.ephemeral_5m_input_tokens",
                usage.cache_creation.ephemeral_5m_input_tokens,
            ),
            (
                "cache_creation.ephemeral_1h_input_tokens",
                usage.cache_creation.ephemeral_1h_input_tokens,
            ),
        ];
        for (name, count) in counts {
            if count > USAGE_TOKENS_MAX {
                return Err(ImportError::Malformed {
                    path: path.to_owned(),
                    line: response.line,
                    message: format!(
                        "usage {name} is {count}, above the {USAGE_TOKENS_MAX} tokens a \
                         response can report"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// What the replay of `threads` (each agent's name and thread) does not
/// reproduce, one sentence each; `compactions` are the main thread's, paired.
fn not_reproduced<'a>(
    threads: impl Iterator<Item = (&'a str, &'a Thread)> + Clone,
    compactions: &[CompactionSummary],
) -> Vec<String> {
    let mut listed = Vec::new();
    for (name, thread) in threads.clone() {
        let delivered_before = |task: &str| {
            thread
                .responses
                .iter()
                .position(|r| r.before.notifications.iter().any(|id| id == task))
        };
        for (index, response) in thread.responses.iter().enumerate() {
            for call in &response.tool_calls {
                let Some(task) = thread.background_tasks.get(&call.id) else {
                    continue;
                };
                let asked =
                    call.input.get("run_in_background") == Some(&serde_json::Value::Bool(true));
                if asked || delivered_before(task).is_some() {
                    continue;
                }
                listed.push(format!(
                    "{name} response {}: the user moved Bash call {} (task {task}) to the \
                     background by hand and the recording never delivered its \
                     notification: the replay runs it in the foreground",
                    index + 1,
                    call.id
                ));
            }
            if let Some(compaction) = &response.before.compaction {
                if compaction.summary.is_none() {
                    listed.push(format!(
                        "{name} response {}: the compaction at line {} has no summary \
                         message after it, so the replay does not compact there",
                        index + 1,
                        compaction.line
                    ));
                }
            }
        }
        let prompts: usize = thread.responses.iter().map(|r| r.before.user_prompts).sum();
        if prompts > 0 {
            listed.push(format!(
                "{name}: {prompts} user prompts typed after the first, which the replay \
                 cannot type: each is billed as the result of the call that continues the \
                 turn before it"
            ));
        }
        let thinking: usize = thread.responses.iter().map(|r| r.thinking_blocks).sum();
        if thinking > 0 {
            listed.push(format!(
                "{name}: {thinking} thinking blocks, which the replay does not carry (their \
                 tokens are in the recorded usage of their responses)"
            ));
        }
    }
    for compaction in compactions.iter().filter(|c| c.transcript.is_none()) {
        listed.push(format!(
            "the compaction at line {} has no compaction transcript: its request's usage \
             is estimated",
            compaction.line
        ));
    }
    listed
}

/// Reads the compaction agents' transcripts (`agent-acompact-*` among `files`, the
/// subagent files no call spawned) and pairs them, in the order they ran, with the
/// compaction boundaries of every thread (the main thread's and the subagents'),
/// in the order they were made; lists every compaction in `summary`, and drops the
/// paired transcripts from its unpaired ones. The requests are keyed by the
/// compacted agent's name and its boundary's line.
fn compaction_requests<'a>(
    threads: impl Iterator<Item = (&'a str, &'a Thread)>,
    files: &[(String, std::path::PathBuf)],
    summary: &mut ImportSummary,
) -> Result<BTreeMap<(String, usize), scenario::CompactionRequest>, ImportError> {
    let mut transcripts = Vec::new();
    for (id, file) in files.iter().filter(|(id, _)| id.starts_with("acompact-")) {
        let dag = sidechain::read_dag(file)?;
        let thread = extract::thread(&dag);
        check_usage(file, &thread)?;
        summary.lines_read += dag.lines_read;
        add_counts(&mut summary.lines_by_type, &dag.lines_by_type);
        add_counts(&mut summary.skipped_by_type, &dag.skipped_by_type);
        transcripts.push((id.clone(), thread));
    }
    transcripts.sort_by_key(|(id, thread)| (thread.span_ms.map(|(first, _)| first), id.clone()));
    let mut transcripts = transcripts.into_iter();
    // Every thread's boundaries, each with the response it precedes. A stable sort
    // by time: one thread's stay in their order, and an unstamped one goes last.
    let mut boundaries: Vec<(&str, usize, &extract::RecordedCompaction)> = threads
        .flat_map(|(agent, thread)| {
            thread
                .responses
                .iter()
                .enumerate()
                .filter_map(move |(index, response)| {
                    Some((agent, index, response.before.compaction.as_ref()?))
                })
        })
        .collect();
    boundaries.sort_by_key(|(_, _, compaction)| compaction.at_ms.unwrap_or(u64::MAX));
    let mut requests = BTreeMap::new();
    for (agent, index, compaction) in boundaries {
        let transcript = transcripts.next();
        let mut entry = CompactionSummary {
            agent: agent.to_owned(),
            line: compaction.line,
            trigger: compaction.trigger.clone(),
            pre_tokens: compaction.pre_tokens,
            transcript: None,
            before_response: Some(index),
        };
        if let Some((id, thread)) = transcript {
            let answer = thread.responses.last();
            let duration_ms = compaction
                .at_ms
                .zip(answer.and_then(|a| a.sent_ms))
                .map(|(end, sent)| end.saturating_sub(sent));
            requests.insert(
                (agent.to_owned(), compaction.line),
                scenario::CompactionRequest {
                    usage: answer.and_then(|a| a.usage),
                    duration_ms,
                },
            );
            summary
                .unpaired_subagents
                .retain(|unpaired| *unpaired != id);
            entry.transcript = Some(id);
        }
        summary.compactions.push(entry);
    }
    for (id, _) in transcripts {
        summary.not_reproduced.push(format!(
            "compaction transcript {id}: no compaction boundary is left to pair it with, \
             so its request is not replayed"
        ));
    }
    Ok(requests)
}

/// The subagents' ids, and how long each foreground subagent ran.
fn session_facts(main: &Thread, sidechains: &[Sidechain]) -> scenario::SessionFacts {
    let mut facts = scenario::SessionFacts {
        agent_ids: sidechains.iter().map(|s| s.agent_id.clone()).collect(),
        ..Default::default()
    };
    let threads = std::iter::once(main).chain(sidechains.iter().map(|s| &s.thread));
    let notified: BTreeSet<&String> = threads
        .clone()
        .flat_map(|t| &t.responses)
        .flat_map(|r| &r.before.notifications)
        .collect();
    for thread in threads.clone() {
        for call in thread.tool_calls() {
            let background =
                call.input.get("run_in_background") == Some(&serde_json::Value::Bool(true));
            let task = thread.background_tasks.get(&call.id);
            if background && task.is_none_or(|task| !notified.contains(task)) {
                facts.shells_never_notified.insert(call.id.clone());
            }
        }
    }
    for thread in threads {
        for call in thread.tool_calls() {
            let background =
                call.input.get("run_in_background") == Some(&serde_json::Value::Bool(true));
            let agent_id = thread.agent_ids.get(&call.id);
            let span = agent_id
                .and_then(|id| sidechains.iter().find(|s| &s.agent_id == id))
                .and_then(|s| s.thread.span_ms);
            if let (false, Some((first, last))) = (background, span) {
                facts.foreground_ms.insert(call.id.clone(), last - first);
            }
        }
    }
    facts
}

/// The TTL most of the recorded cache writes had: Claude Code writes with one TTL
/// per session, which the simulated client's breakpoints then take.
fn recorded_ttl<'a>(responses: impl Iterator<Item = &'a Response>) -> TtlSetting {
    let (mut five_minutes, mut one_hour) = (0u64, 0u64);
    for usage in responses.filter_map(|r| r.usage.as_ref()) {
        let Usage { cache_creation, .. } = usage;
        five_minutes += cache_creation.ephemeral_5m_input_tokens;
        one_hour += cache_creation.ephemeral_1h_input_tokens;
    }
    if one_hour > five_minutes {
        TtlSetting::OneHour
    } else {
        TtlSetting::FiveMinutes
    }
}

fn agent_summary(name: String, source: &'static str, thread: &Thread) -> AgentSummary {
    let arrivals = thread.responses.iter().map(|r| &r.before);
    AgentSummary {
        name,
        source,
        turns: thread.responses.len(),
        tool_calls: thread.tool_calls().count(),
        tool_results: arrivals.clone().map(|a| a.tool_results).sum(),
        notifications: arrivals.map(|a| a.notifications.len()).sum(),
        abandoned_responses: thread.abandoned_responses,
    }
}

fn add_counts(into: &mut BTreeMap<String, usize>, from: &BTreeMap<String, usize>) {
    for (kind, n) in from {
        *into.entry(kind.clone()).or_default() += n;
    }
}

/// `imported-<file stem>`, in characters safe in any folder listing.
fn scenario_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let safe: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("imported-{safe}")
}

/// The longest a background shell of `thread` ran in the recording before the
/// response its notification came before: the replay holds it that long.
fn gated_shell_ms_max(thread: &Thread) -> u64 {
    let mut longest = 0;
    for response in &thread.responses {
        for call in &response.tool_calls {
            let Some(at) = scenario::shell_notified_before(thread, call) else {
                continue;
            };
            let delivered = thread.responses[at].started_ms;
            if let Some((called, delivered)) = response.started_ms.zip(delivered) {
                longest = longest.max(delivered.saturating_sub(called));
            }
        }
    }
    longest
}

/// Room for the recorded pace: every spawn (a background shell's too, which lives
/// `shell_ms_max`) must outlive its worker's recorded latencies, and the run and
/// its liveness bound the whole session's, so that a faithful replay is never cut
/// off as hung.
fn size_settings(scenario: &mut Scenario, shell_ms_max: u64) {
    let total_ms = |script: &AgentScript| -> u64 {
        script
            .turns
            .iter()
            .map(|t| match t.latency {
                crate::model::Latency::Fixed { ms } => ms,
                crate::model::Latency::Uniform { max_ms, .. } => max_ms,
            })
            .chain(script.turns.iter().map(|t| t.send_delay_ms))
            .sum()
    };
    let worker_ms_max = scenario.workers.iter().map(total_ms).max().unwrap_or(0);
    let all_ms: u64 = std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .map(total_ms)
        .sum();
    let turns_max = std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .map(|s| s.turns.len())
        .max()
        .unwrap_or(0);
    let defaults = Settings::default();
    let settings = &mut scenario.settings;
    settings.spawn_deadline_ms =
        Some(SPAWN_DEADLINE_MS_DEFAULT.max(worker_ms_max.max(shell_ms_max) + 60_000));
    let run_ms = defaults.run_limit_ms.max(all_ms * 2 + 600_000);
    settings.run_limit_ms = run_ms;
    settings.liveness_bound_ms = defaults.liveness_bound_ms.max(run_ms);
    // Waiting turns count against the limit too: at most one per worker.
    let turns_needed = turns_max + scenario.workers.len() + 10;
    settings.turns_max =
        Some(TURNS_MAX_DEFAULT.max(u32::try_from(turns_needed).unwrap_or(u32::MAX)));
}

/// The comment that opens an imported scenario: what was read, and what the
/// replay does differently from the recording.
fn header(summary: &ImportSummary, ttl: TtlSetting) -> String {
    let ttl = match ttl {
        TtlSetting::FiveMinutes => "5-minute",
        TtlSetting::OneHour => "1-hour",
    };
    let mut text = String::new();
    let mut line = |s: String| {
        text.push_str("# ");
        text.push_str(&s);
        text.push('\n');
    };
    line(format!(
        "Imported by `coordsim import claude-code` from {}.",
        summary.source
    ));
    let by_type: Vec<String> = summary
        .lines_by_type
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    line(format!(
        "Lines: {} read ({}); skipped unknown types: {}.",
        summary.lines_read,
        by_type.join(", "),
        summary.skipped_text()
    ));
    for agent in &summary.agents {
        line(format!(
            "Agent {} ({}): {} turns, {} tool calls, {} tool results, {} notifications, \
             {} abandoned responses.",
            agent.name,
            agent.source,
            agent.turns,
            agent.tool_calls,
            agent.tool_results,
            agent.notifications,
            agent.abandoned_responses
        ));
    }
    if !summary.unpaired_subagents.is_empty() {
        line(format!(
            "Subagent transcripts no call spawned (left out): {}.",
            summary.unpaired_subagents.join(", ")
        ));
    }
    let a = &summary.adaptations;
    line(format!(
        "Dropped: {} spawns without a prompt, {} Agent fields the runtime lacks, \
         {} agent types it does not define, {} null input values, {} thinking blocks.",
        a.spawns_without_prompt,
        a.agent_fields_dropped,
        a.agent_types_unknown,
        a.nulls_dropped,
        a.thinking_blocks
    ));
    line(format!(
        "Adapted: {} turns wait for notifications, {} turns continue past a recorded end \
         of turn (of {} later user prompts, those typed there are billed as that call's \
         result), {} latencies capped at {} ms, {} request holds capped at {} ms, {} input \
         strings with paths moved into the workspace, {} Bash timeouts renamed \
         timeout_ms, {} agents counted at bytes a token of their own.",
        a.triggers,
        a.continuations,
        summary.later_user_prompts,
        a.latencies_capped,
        LATENCY_MS_MAX,
        a.holds_capped,
        SEND_DELAY_MS_MAX,
        a.paths_moved,
        a.bash_timeouts_renamed,
        a.agent_ratios
    ));
    line(format!(
        "Billed as recorded (by the cost meter only): {} tool results, each agent's first \
         request size, the gaps between requests, and cache writes with a {} TTL.",
        a.results_recorded, ttl
    ));
    line(format!(
        "Replayed as recorded: {} compactions (their summaries and requests), {} prompt \
         rewrites (the cost meter writes the client's first message again there), {} shell \
         commands moved to the background by hand (background shells whose notifications \
         arrive where recorded).",
        a.compactions, a.prompt_rewrites, a.shells_backgrounded
    ));
    line(summary.calibration.describe());
    for item in &summary.not_reproduced {
        line(format!("Not reproduced: {item}."));
    }
    let _ = writeln!(text);
    text
}
