//! Shrinking: from a failing seed to the smallest explicit fault schedule that still
//! fails the same way.
//!
//! A seed's schedule (explicit faults plus, in swarm mode, the drawn ones) is
//! written down event-placed ([`crate::scenario::Fault`]), so any subset of it is an
//! ordinary scenario. The shrinker runs subsets of the schedule under the same seed
//! with swarm drawing switched off, and keeps a subset while the run still breaks
//! the target invariant:
//!
//! 1. delta debugging (Zeller's ddmin) removes faults, ending with a schedule from
//!    which no single fault can be dropped;
//! 2. each remaining fault's parameters are then made smaller (fewer producers,
//!    shorter delays, earlier calls) while the failure holds.
//!
//! "The same way" means the same broken invariant. Virtual times and the exact
//! events may move: removing a fault shifts what follows it, which is why faults are
//! placed at events rather than at times.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::run::{repro_command, run_seed, RunError, RunOptions};
use crate::scenario::{
    CoordinatorCrashPoint, CrashPoint, Fault, LoadedScenario, ModelSettings, Recording, Scenario,
    SwarmSettings,
};

/// How a shrink is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShrinkOptions {
    /// How the failing seed was run (swarm or not).
    pub run: RunOptions,
    /// Most candidate runs before the shrinker stops with the smallest schedule it
    /// has found so far.
    pub runs_max: u32,
}

impl Default for ShrinkOptions {
    fn default() -> Self {
        Self {
            run: RunOptions::default(),
            runs_max: 500,
        }
    }
}

/// A shrunk failure.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The scenario that fails the same way: the original with the minimal schedule
    /// as its explicit faults, and swarm drawing off.
    pub scenario: Scenario,
    /// The seed it fails under.
    pub seed: u64,
    /// The invariant the original and the shrunk run break.
    pub invariant: &'static str,
    /// How the shrunk run breaks it.
    pub detail: String,
    /// How many faults the failing seed's schedule had.
    pub faults_before: usize,
    /// Candidate runs the shrink took.
    pub runs: u32,
    /// Whether the run budget ran out before the schedule was minimal.
    pub budget_exhausted: bool,
}

/// Why a seed could not be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// A run could not be carried out.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `--invariant` names no invariant the checkers report.
    #[error("unknown invariant {name:?}: expected one of {}", known.join(", "))]
    UnknownInvariant {
        /// The name given.
        name: String,
        /// Every name a failure can carry.
        known: Vec<&'static str>,
    },
    /// The run budget allows no run, so not even the failure can be reproduced.
    #[error("a shrink needs a run budget of at least 1 run")]
    NoRunBudget,
    /// The seed passes: there is nothing to shrink.
    #[error("seed {seed} of {scenario} passes: there is no failure to shrink")]
    Passes {
        /// The scenario file.
        scenario: String,
        /// The seed.
        seed: u64,
    },
    /// The seed's schedule, written out explicitly, does not fail the same way. This
    /// is a simulator bug: a swarm schedule must mean the same as its explicit form.
    #[error(
        "seed {seed} of {scenario} fails {invariant}, but its schedule placed explicitly \
         does not: the explicit form of a swarm schedule must reproduce it"
    )]
    NotReproducible {
        /// The scenario file.
        scenario: String,
        /// The seed.
        seed: u64,
        /// The invariant the original run broke.
        invariant: &'static str,
    },
}

/// Every name a run's failure can carry: the invariants, then the scenario's own
/// expectations and a cassette's replay checks.
pub fn failure_names() -> Vec<&'static str> {
    crate::check::Invariant::ALL
        .iter()
        .map(|invariant| invariant.as_str())
        .chain([
            crate::check::TRAFFIC_MIN,
            crate::check::EXPECTED_OUTCOME,
            crate::check::RUNTIME_PANIC,
            crate::check::PROMPT_ASSEMBLY,
            crate::check::SPAWN_MODE,
            crate::check::TASK_IDS,
            crate::check::LAUNCH_ANSWER,
            crate::check::TASK_LIST,
            crate::check::TASK_OUTPUT,
            crate::check::TASK_PROGRESS,
            crate::check::INLINE_RESULT,
            crate::check::COMPACTION_TIMING,
            crate::check::COMPACTION_KEPT,
            crate::check::MODEL_RETRIES,
            crate::check::API_REQUEST,
            crate::cassette::REPLAY_MISS,
            crate::cassette::REPLAY_UNUSED,
        ])
        .collect()
}

/// Shrinks the failure of `seed` of `scenario` (run as `options.run` says).
/// `invariant` picks which broken invariant to keep when the seed breaks several;
/// by default the first one reported.
pub fn shrink(
    scenario: &LoadedScenario,
    seed: u64,
    invariant: Option<&str>,
    options: &ShrinkOptions,
) -> Result<Shrunk, ShrinkError> {
    if options.runs_max == 0 {
        return Err(ShrinkError::NoRunBudget);
    }
    if let Some(name) = invariant {
        let known = failure_names();
        if !known.contains(&name) {
            return Err(ShrinkError::UnknownInvariant {
                name: name.to_owned(),
                known,
            });
        }
    }
    let original = run_seed(scenario, seed, &options.run)?;
    let target = original
        .failures
        .iter()
        .find(|failure| invariant.is_none_or(|name| failure.invariant == name))
        .map(|failure| failure.invariant)
        .ok_or_else(|| ShrinkError::Passes {
            scenario: scenario.path.display().to_string(),
            seed,
        })?;
    let schedule = original.schedule;
    let mut oracle = Oracle {
        scenario,
        seed,
        target,
        runs: 0,
        runs_max: options.runs_max,
        seen: BTreeMap::new(),
    };
    let everything: Vec<Fault> = schedule.clone();
    if oracle.fails(&everything)?.is_none() {
        return Err(ShrinkError::NotReproducible {
            scenario: scenario.path.display().to_string(),
            seed,
            invariant: target,
        });
    }
    let kept = ddmin(&mut oracle, (0..schedule.len()).collect(), &schedule)?;
    let mut faults: Vec<Fault> = kept.iter().map(|&i| schedule[i].clone()).collect();
    // Smaller parameters can make a fault unnecessary (an earlier crash no longer
    // needs the fault that delayed the worker), so both passes repeat to a fixpoint.
    while simplify(&mut oracle, &mut faults)? | drop_singles(&mut oracle, &mut faults)? {}
    let detail = oracle
        .fails(&faults)?
        .expect("the kept schedule was seen failing");
    Ok(Shrunk {
        scenario: explicit(&scenario.scenario, faults),
        seed,
        invariant: target,
        detail,
        faults_before: schedule.len(),
        runs: oracle.runs,
        budget_exhausted: oracle.runs >= oracle.runs_max,
    })
}

/// The scenario with `faults` as its whole schedule: swarm mode draws nothing more.
fn explicit(scenario: &Scenario, faults: Vec<Fault>) -> Scenario {
    let mut scenario = scenario.clone();
    scenario.faults = faults;
    scenario.swarm = SwarmSettings {
        kinds: Vec::new(),
        ..scenario.swarm
    };
    scenario
}

/// Runs candidate schedules and remembers their verdicts.
struct Oracle<'a> {
    scenario: &'a LoadedScenario,
    seed: u64,
    target: &'static str,
    runs: u32,
    runs_max: u32,
    /// Verdicts by schedule (faults in their TOML form): the failure detail, or
    /// `None` for a pass.
    seen: BTreeMap<String, Option<String>>,
}

impl Oracle<'_> {
    /// Whether the seed still breaks the target invariant under `faults`: the
    /// failure's detail if it does. Once the run budget is spent every new schedule
    /// counts as passing, so the shrinker keeps what it has.
    fn fails(&mut self, faults: &[Fault]) -> Result<Option<String>, RunError> {
        let key = serde_json::to_string(faults).expect("faults serialize");
        if let Some(verdict) = self.seen.get(&key) {
            return Ok(verdict.clone());
        }
        if self.runs >= self.runs_max {
            return Ok(None);
        }
        self.runs += 1;
        let candidate = LoadedScenario {
            path: self.scenario.path.clone(),
            scenario: explicit(&self.scenario.scenario, faults.to_vec()),
        };
        let run = run_seed(&candidate, self.seed, &RunOptions::default())?;
        let verdict = run
            .failures
            .iter()
            .find(|failure| failure.invariant == self.target)
            .map(|failure| failure.detail.clone());
        self.seen.insert(key, verdict.clone());
        Ok(verdict)
    }
}

/// Delta debugging over schedule positions: returns a subset of `kept` that still
/// fails and from which no single position can be removed (unless the budget ran out).
fn ddmin(
    oracle: &mut Oracle<'_>,
    mut kept: Vec<usize>,
    schedule: &[Fault],
) -> Result<Vec<usize>, RunError> {
    let faults_of = |positions: &[usize]| -> Vec<Fault> {
        positions.iter().map(|&i| schedule[i].clone()).collect()
    };
    if oracle.fails(&[])?.is_some() {
        return Ok(Vec::new());
    }
    let mut granularity = 2usize;
    while kept.len() >= 2 {
        let chunks = split(&kept, granularity);
        let mut reduced = false;
        for chunk in &chunks {
            if oracle.fails(&faults_of(chunk))?.is_some() {
                kept = chunk.clone();
                granularity = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && chunks.len() > 2 {
            for skipped in 0..chunks.len() {
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skipped)
                    .flat_map(|(_, chunk)| chunk.iter().copied())
                    .collect();
                if oracle.fails(&faults_of(&complement))?.is_some() {
                    kept = complement;
                    granularity = (granularity - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if granularity >= kept.len() {
                break;
            }
            granularity = (granularity * 2).min(kept.len());
        }
    }
    Ok(kept)
}

/// `items` in `parts` contiguous chunks of near-equal size, none empty.
fn split(items: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.clamp(1, items.len().max(1));
    let mut chunks = Vec::with_capacity(parts);
    let mut start = 0;
    for part in 0..parts {
        let end = start + (items.len() - start) / (parts - part);
        chunks.push(items[start..end].to_vec());
        start = end;
    }
    chunks
}

/// Makes each fault's parameters as small as the failure allows, one step at a
/// time, until no step keeps it. Returns whether any fault changed.
fn simplify(oracle: &mut Oracle<'_>, faults: &mut [Fault]) -> Result<bool, RunError> {
    let mut changed = false;
    for index in 0..faults.len() {
        'steps: loop {
            for smaller in simpler(&faults[index]) {
                let original = std::mem::replace(&mut faults[index], smaller);
                if oracle.fails(faults)?.is_some() {
                    changed = true;
                    continue 'steps;
                }
                faults[index] = original;
            }
            break;
        }
    }
    Ok(changed)
}

/// Removes every fault the failure does not need, one at a time. Returns whether
/// any was removed.
fn drop_singles(oracle: &mut Oracle<'_>, faults: &mut Vec<Fault>) -> Result<bool, RunError> {
    let mut changed = false;
    let mut index = 0;
    while index < faults.len() {
        let mut without = faults.clone();
        without.remove(index);
        if oracle.fails(&without)?.is_some() {
            *faults = without;
            changed = true;
        } else {
            index += 1;
        }
    }
    Ok(changed)
}

/// Smaller versions of `fault`, most reduced first: counts, delays and call
/// numbers moved towards their floor by halving the distance, so a value `v` takes
/// O(log v) candidates, not `v`. A kind with nothing to reduce has none.
fn simpler(fault: &Fault) -> Vec<Fault> {
    let reductions = |value: u64, floor: u64| -> Vec<u64> {
        let mut smaller = Vec::new();
        if value > floor {
            smaller.push(floor);
            let mut distance = (value - floor) / 2;
            while distance > 0 {
                let candidate = value - distance;
                if smaller.last() != Some(&candidate) {
                    smaller.push(candidate);
                }
                distance /= 2;
            }
        }
        smaller
    };
    match fault {
        Fault::MailboxProducers { inbox, producers } => reductions(u64::from(*producers), 1)
            .into_iter()
            .map(|n| Fault::MailboxProducers {
                inbox: inbox.clone(),
                producers: u32::try_from(n).expect("a reduced count fits"),
            })
            .collect(),
        Fault::DelayedNotification { worker, delay_ms } => reductions(*delay_ms, 0)
            .into_iter()
            .map(|delay_ms| Fault::DelayedNotification {
                worker: worker.clone(),
                delay_ms,
            })
            .collect(),
        Fault::CoordinatorCrash {
            at_ms: Some(at_ms),
            at: None,
        } => reductions(*at_ms, 0)
            .into_iter()
            .map(Fault::coordinator_crash_at_ms)
            .collect(),
        Fault::CoordinatorCrash {
            at_ms: None,
            at: Some(CoordinatorCrashPoint::ModelCall { call }),
        } => reductions(u64::from(*call), 1)
            .into_iter()
            .map(|call| {
                Fault::coordinator_crash_at_call(u32::try_from(call).expect("a reduced call fits"))
            })
            .collect(),
        Fault::CoordinatorCrash {
            at_ms: None,
            at: Some(CoordinatorCrashPoint::DiskWrite { op, path, nth }),
        } => reductions(*nth, 1)
            .into_iter()
            .map(|nth| Fault::CoordinatorCrash {
                at_ms: None,
                at: Some(CoordinatorCrashPoint::DiskWrite {
                    op: *op,
                    path: path.clone(),
                    nth,
                }),
            })
            .collect(),
        Fault::WorkerCrash {
            worker,
            at: CrashPoint::ModelCall { call },
        } => reductions(u64::from(*call), 1)
            .into_iter()
            .map(|call| Fault::WorkerCrash {
                worker: worker.clone(),
                at: CrashPoint::ModelCall {
                    call: u32::try_from(call).expect("a reduced call fits"),
                },
            })
            .collect(),
        Fault::ModelApi { agent, call, error } => reductions(u64::from(*call), 1)
            .into_iter()
            .map(|call| Fault::ModelApi {
                agent: agent.clone(),
                call: u32::try_from(call).expect("a reduced call fits"),
                error: *error,
            })
            .collect(),
        Fault::Disk {
            op,
            path,
            nth,
            effect,
        } => reductions(*nth, 1)
            .into_iter()
            .map(|nth| Fault::Disk {
                op: *op,
                path: path.clone(),
                nth,
                effect: *effect,
            })
            .collect(),
        Fault::RemotePartition {
            launch,
            during,
            duration_ms,
        } => reductions(*duration_ms, 0)
            .into_iter()
            .map(|duration_ms| Fault::RemotePartition {
                launch: *launch,
                during: *during,
                duration_ms,
            })
            .collect(),
        Fault::SlowLockHolder {
            inbox,
            hold_ms,
            after_ms,
        } => reductions(*hold_ms, 0)
            .into_iter()
            .map(|hold_ms| Fault::SlowLockHolder {
                inbox: inbox.clone(),
                hold_ms,
                after_ms: *after_ms,
            })
            .collect(),
        Fault::CacheBreakingPromptChange { call } => reductions(u64::from(*call), 1)
            .into_iter()
            .map(|call| Fault::CacheBreakingPromptChange {
                call: u32::try_from(call).expect("a reduced call fits"),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The complete command that shrinks seed `seed` of `scenario_path`, run as
/// `options` says, into `<scenario>-seed-<seed>.toml` in the current directory,
/// from any directory: `coordsim shrink <absolute path> --seed N …`, as
/// [`repro_command`] names the scenario.
pub fn shrink_command(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    format!(
        "coordsim {}",
        shrink_arguments(scenario_path, seed, options)
    )
}

/// The same command through `cargo run`, when the current directory is inside the
/// repository this binary was built from; `None` elsewhere.
pub fn shrink_cargo_command(
    scenario_path: &Path,
    seed: u64,
    options: &RunOptions,
) -> Option<String> {
    crate::run::inside_repository().then(|| {
        format!(
            "cargo run --release --locked -p coord-sim -- {}",
            shrink_arguments(scenario_path, seed, options)
        )
    })
}

/// `shrink <absolute path> --seed N`, the flags of `options` and `-o` the output
/// file in the current directory.
fn shrink_arguments(scenario_path: &Path, seed: u64, options: &RunOptions) -> String {
    let swarm = if options.swarm { " --swarm" } else { "" };
    let world = crate::run::world_flags(options);
    let mut output = scenario_path
        .file_stem()
        .unwrap_or("scenario".as_ref())
        .to_owned();
    output.push(format!("-seed-{seed}.toml"));
    let output = crate::shell_word::quote_path(Path::new(&output));
    format!(
        "shrink {} --seed {seed}{swarm}{world} -o {output}",
        crate::shell_word::quote_path(&crate::run::absolute(scenario_path))
    )
}

/// The shrunk scenario as a scenario file, headed by where it came from and the
/// command that runs it.
///
/// The original file's text is kept (its comments, layout and inline tables), with
/// its `[[faults]]` and `[swarm]` tables replaced by the minimal schedule. If that
/// edit cannot be made safely (the text does not read back as the shrunk
/// scenario), the whole scenario is written out from its value instead.
pub fn scenario_file(
    shrunk: &Shrunk,
    source: &Path,
    source_text: &str,
    output: &Path,
    source_options: &RunOptions,
) -> Result<String, toml::ser::Error> {
    let swarm = if source_options.swarm { " --swarm" } else { "" };
    let header = format!(
        "# Shrunk from `{source} --seed {seed}{swarm}`: {kept} of {before} faults remain,\n\
         # and the run still breaks {invariant}.\n\
         # Reproduce: {repro}\n\n",
        // Quoted: a path with a newline would otherwise end the comment.
        source = crate::shell_word::quote_path(source),
        seed = shrunk.seed,
        kept = shrunk.scenario.faults.len(),
        before = shrunk.faults_before,
        invariant = shrunk.invariant,
        repro = repro_command(output, shrunk.seed, &RunOptions::default()),
    );
    let scenario = rebased(&shrunk.scenario, source, output);
    let mut replaced = vec!["faults", "swarm"];
    let mut moved_tables = String::new();
    if scenario.model != shrunk.scenario.model || scenario.recording != shrunk.scenario.recording {
        replaced.extend(["model", "recording"]);
        moved_tables = format!(
            "\n\n# Paths relative to this file.\n{}",
            file_tables(&scenario)?.trim_end()
        );
    }
    let edited = format!(
        "{header}{}{moved_tables}\n\n# The minimal fault schedule. Swarm mode draws nothing more.\n{}\n",
        without_tables(source_text, &replaced).trim_end(),
        schedule_tables(&scenario)?.trim_end()
    );
    let reads_back = toml::from_str::<Scenario>(&edited).is_ok_and(|read| read == scenario);
    if reads_back {
        return Ok(edited);
    }
    let mut whole = format!("{header}{}", toml::to_string(&scenario)?);
    if !whole.ends_with('\n') {
        whole.push('\n');
    }
    Ok(whole)
}

/// `scenario` with the files it names relative to its own file (a cassette, a
/// recorded session) named relative to `output`'s folder instead of `source`'s, so
/// the written scenario finds them wherever it is written.
fn rebased(scenario: &Scenario, source: &Path, output: &Path) -> Scenario {
    let from = folder_of(source);
    let to = folder_of(output);
    let mut rebased = scenario.clone();
    if from == to {
        return rebased;
    }
    let rebase = |path: &Path| -> PathBuf {
        if path.is_absolute() {
            return path.to_owned();
        }
        relative_to(&normalized(&from.join(path)), &to)
    };
    if let Some(cassette) = &scenario.model.cassette {
        rebased.model.cassette = Some(rebase(Path::new(cassette)).display().to_string());
    }
    if let Some(recording) = &mut rebased.recording {
        recording.source = rebase(&recording.source);
    }
    rebased
}

/// The absolute, lexically normalized folder of the file at `path`.
fn folder_of(path: &Path) -> PathBuf {
    let folder = path.parent().unwrap_or(Path::new(""));
    normalized(&std::path::absolute(folder).unwrap_or_else(|_| folder.to_owned()))
}

/// `path` with `.` and `..` resolved lexically (symlinks are not followed).
fn normalized(path: &Path) -> PathBuf {
    let mut parts = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !parts.pop() {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    parts
}

/// `target` as a path relative to the folder `base` (both absolute and normalized).
fn relative_to(target: &Path, base: &Path) -> PathBuf {
    let target_parts: Vec<Component<'_>> = target.components().collect();
    let base_parts: Vec<Component<'_>> = base.components().collect();
    let shared = target_parts
        .iter()
        .zip(&base_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = PathBuf::new();
    for _ in shared..base_parts.len() {
        relative.push("..");
    }
    for part in &target_parts[shared..] {
        relative.push(part);
    }
    relative
}

/// The `model` and `recording` of `scenario` as TOML tables.
fn file_tables(scenario: &Scenario) -> Result<String, toml::ser::Error> {
    #[derive(serde::Serialize)]
    struct Files<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<&'a ModelSettings>,
        #[serde(skip_serializing_if = "Option::is_none")]
        recording: Option<&'a Recording>,
    }
    toml::to_string(&Files {
        model: Some(&scenario.model).filter(|model| !model.is_scripted()),
        recording: scenario.recording.as_ref(),
    })
}

/// The `faults` and `swarm` of `scenario` as TOML tables.
fn schedule_tables(scenario: &Scenario) -> Result<String, toml::ser::Error> {
    #[derive(serde::Serialize)]
    struct Schedule<'a> {
        faults: &'a [Fault],
        swarm: &'a SwarmSettings,
    }
    toml::to_string(&Schedule {
        faults: &scenario.faults,
        swarm: &scenario.swarm,
    })
}

/// `text` without the tables (and their sub-tables) named by `names`: every line
/// from such a table's header up to the next header of another table, and the
/// comment lines right above the header, which speak of it. A text where
/// a header-like line sits inside a multi-line string is cut wrongly; the caller
/// checks the result reads back.
fn without_tables(text: &str, names: &[&str]) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut dropping = false;
    for line in text.split_inclusive('\n') {
        if let Some(header) = table_header(line) {
            let root = header.split('.').next().unwrap_or_default().trim();
            dropping = names.contains(&root);
            if dropping {
                drop_trailing_comments(&mut kept);
            }
        }
        if !dropping {
            kept.push_str(line);
        }
    }
    kept
}

/// Removes the comment and blank lines at the end of `text`.
fn drop_trailing_comments(text: &mut String) {
    loop {
        let body = text.strip_suffix('\n').unwrap_or(text);
        let last_line_start = body.rfind('\n').map_or(0, |i| i + 1);
        let last_line = body[last_line_start..].trim();
        if text.is_empty() || !(last_line.is_empty() || last_line.starts_with('#')) {
            return;
        }
        text.truncate(last_line_start);
    }
}

/// The dotted name of the table a header line opens (`[a.b]` or `[[a.b]]`).
fn table_header(line: &str) -> Option<&str> {
    let line = line.trim();
    let inner = line
        .strip_prefix("[[")
        .and_then(|l| l.split_once("]]"))
        .or_else(|| line.strip_prefix('[').and_then(|l| l.split_once(']')))?;
    Some(inner.0.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_cut_with_their_sub_tables() {
        let text = "name = \"x\"\n\n# Swarm off.\n[swarm]\nkinds = []\n[[faults]]\nkind = \"worker-crash\"\n[faults.at]\npoint = \"after-output\"\n[[workers]]\nprompt = \"p\"\n";
        assert_eq!(
            without_tables(text, &["faults", "swarm"]),
            "name = \"x\"\n[[workers]]\nprompt = \"p\"\n"
        );
        assert_eq!(table_header("  [[ faults ]] # placed"), Some("faults"));
        assert_eq!(table_header("kind = \"x\""), None);
    }

    #[test]
    fn files_a_scenario_names_are_rebased_onto_the_output_folder() {
        // Goal: a shrunk scenario written to another folder still finds its cassette
        // and its recorded session; one written beside its source is left alone.
        let text = "name = \"x\"\n\n[coordinator]\nprompt = \"p\"\n\n[model]\ncassette = \"../../fixtures/cassettes/x.json\"\n\n[recording]\nsource = \"x.jsonl\"\n";
        let scenario: Scenario = toml::from_str(text).unwrap();
        let source = Path::new("/repo/scenarios/replay/x.toml");

        let moved = rebased(&scenario, source, Path::new("/tmp/out/x.toml"));
        assert_eq!(
            moved.model.cassette.as_deref(),
            Some("../../repo/fixtures/cassettes/x.json")
        );
        assert_eq!(
            moved.recording.as_ref().unwrap().source,
            Path::new("../../repo/scenarios/replay/x.jsonl")
        );
        let tables = file_tables(&moved).unwrap();
        assert!(
            tables.contains("cassette = \"../../repo/fixtures/cassettes/x.json\""),
            "{tables}"
        );

        let beside = rebased(
            &scenario,
            source,
            Path::new("/repo/scenarios/replay/y.toml"),
        );
        assert_eq!(beside, scenario);
        let below = rebased(
            &scenario,
            source,
            Path::new("/repo/scenarios/replay/min/y.toml"),
        );
        assert_eq!(below.recording.unwrap().source, Path::new("../x.jsonl"));
    }

    #[test]
    fn split_covers_every_item_once_in_order() {
        let items: Vec<usize> = (0..7).collect();
        for parts in 1..=9 {
            let chunks = split(&items, parts);
            assert!(chunks.iter().all(|chunk| !chunk.is_empty()));
            assert_eq!(chunks.concat(), items, "{parts} parts");
            assert_eq!(chunks.len(), parts.min(items.len()));
        }
    }

    #[test]
    fn simpler_faults_are_strictly_smaller() {
        let producers = Fault::MailboxProducers {
            inbox: "team-lead".to_owned(),
            producers: 40,
        };
        assert_eq!(
            simpler(&producers)
                .iter()
                .map(|fault| match fault {
                    Fault::MailboxProducers { producers, .. } => *producers,
                    other => panic!("changed kind: {other:?}"),
                })
                .collect::<Vec<_>>(),
            vec![1, 21, 31, 36, 38, 39]
        );
        let first_call = Fault::ModelApi {
            agent: "coordinator".to_owned(),
            call: 1,
            error: crate::scenario::ApiError::RateLimited,
        };
        assert!(simpler(&first_call).is_empty());
        // A coordinator crash keeps its placement while it moves earlier.
        assert_eq!(
            simpler(&Fault::coordinator_crash_at_call(5)),
            [1, 3, 4].map(Fault::coordinator_crash_at_call)
        );
        assert_eq!(
            simpler(&Fault::coordinator_crash_at_ms(8)),
            [0, 4, 6, 7].map(Fault::coordinator_crash_at_ms)
        );
        assert!(simpler(&Fault::coordinator_crash_at_call(1)).is_empty());
    }
}
