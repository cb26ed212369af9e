//! Sweeps: every scenario under a set of paths, over a range of seeds.
//!
//! A sweep numbers its jobs, one per (scenario, seed) in scenario-then-seed order,
//! and hands them to [`run_in_order`]: a pool of up to [`SweepOptions::threads`]
//! scoped threads that take the next job number from a shared atomic counter. A job
//! is computed from its number, so a sweep of a huge range holds no list of its
//! seeds. Each seed runs on one thread from start to end, so a run stays
//! single-threaded and deterministic; the results are handed back in job order, as
//! soon as every earlier job is done, so a report (and what a caller prints as
//! seeds finish) is the same whatever the thread count (only the caller's
//! wall-clock figures differ).
//!
//! A caller stops a sweep early with its `stop` predicate (on SIGINT, say): no new
//! seed starts once it holds, the running ones finish, and the report covers the
//! seeds that ran, which are always the first ones in job order, with
//! `stopped_early` set.
//!
//! A [`Shard`] `K/N` keeps the seeds `s` of the range with `(s - start) % N == K - 1`:
//! the `N` shards partition the seeds, and together they run exactly what the
//! unsharded sweep runs. The shard's `n`th seed is computed, not searched for.
//!
//! [`check_determinism`] runs every job twice on the same pool and compares the two
//! traces.

use coord_runtime::probe::Probe;
use coord_runtime::RuntimeEvent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::run::{repro_cargo_command, repro_command, run_seed, RunError, RunOptions, SeedRun};
use crate::scenario::{LoadedScenario, ScenarioError};
use crate::shrink::{shrink_cargo_command, shrink_command};
use crate::trace::{EventRef, TraceEntry};

/// One failed seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The scenario file.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The broken invariant, or `harness` when the run itself could not be carried out.
    pub invariant: String,
    /// What went wrong.
    pub detail: String,
    /// The command that reproduces it, from any directory.
    pub repro: String,
    /// The same command through `cargo run`, when the sweep ran inside the
    /// repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repro_cargo: Option<String>,
    /// The command that shrinks it to a minimal scenario, from any directory; none
    /// for a run that could not be carried out.
    pub shrink: Option<String>,
    /// The same command through `cargo run`, when the sweep ran inside the
    /// repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrink_cargo: Option<String>,
}

/// `FAIL <scenario> seed <seed>: <invariant>: <detail>`, then the repro (and its
/// `cargo run` form), then how to shrink it (and its `cargo run` form).
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FAIL {} seed {}: {}: {}\n  repro: {}",
            self.scenario, self.seed, self.invariant, self.detail, self.repro
        )?;
        if let Some(cargo) = &self.repro_cargo {
            write!(f, "\n  or, in the repository: {cargo}")?;
        }
        if let Some(shrink) = &self.shrink {
            write!(f, "\n  shrink: {shrink}")?;
        }
        if let Some(cargo) = &self.shrink_cargo {
            write!(f, "\n  or, in the repository: {cargo}")?;
        }
        Ok(())
    }
}

/// What a sweep found. `wall_seconds` and rates are filled in by the caller, which
/// owns the wall clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SweepReport {
    /// Scenario files run.
    pub scenarios: usize,
    /// Seeds run, over all scenarios (only this shard's seeds when sharded).
    pub seeds_run: u64,
    /// Seeds with at least one failure.
    pub seeds_failed: u64,
    /// Virtual time covered by all runs.
    pub sim_seconds: f64,
    /// Every failure, in scenario then seed order.
    pub failures: Vec<Failure>,
    /// What every run's model calls cost at the built-in prices, in US dollars.
    pub cost_usd: f64,
    /// Prompt tokens of every run (uncached input, cache writes and reads).
    pub prompt_tokens: u64,
    /// Of those, tokens read from the simulated cache.
    pub cache_read_tokens: u64,
    /// How often each of the runtime's guards fired over every run, every probe
    /// listed (0 for a guard no run reached).
    pub coverage: BTreeMap<&'static str, u64>,
    /// What the runs survived, summed over every run.
    pub counts: crate::report::RunCounts,
    /// Whether the caller stopped the sweep before its last seed: the report covers
    /// the first `seeds_run` seeds in scenario-then-seed order.
    pub stopped_early: bool,
}

impl SweepReport {
    /// Cache reads over prompt tokens, over every run; 0 when nothing was sent.
    pub fn cache_hit_ratio(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cache_read_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

/// Why a sweep could not start.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A path could not be listed.
    #[error("cannot list scenarios under {path}: {source}")]
    Discover {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A scenario file is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// No scenario file was found.
    #[error("no scenario (*.toml) files under {0}")]
    Empty(String),
}

/// One part of a seed range: shard `index` of `count`, 1-based.
///
/// Written `K/N` on the command line. Shard `K/N` keeps the seeds `s` with
/// `(s - start) % N == K - 1`, so the `N` shards of a range are disjoint and their
/// union is the whole range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

/// Why a shard could not be made or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The text is not two numbers around a `/`.
    #[error("expected K/N (shard K of N, e.g. 2/4), got {0:?}")]
    Syntax(String),
    /// `K` is outside `1..=N` (every `K` is when `N` is 0).
    #[error("shard {index}/{count} does not exist: K/N needs 1 <= K <= N")]
    OutOfRange {
        /// The shard index `K` asked for.
        index: u64,
        /// The shard count `N` asked for.
        count: u64,
    },
}

impl Shard {
    /// The whole range: shard 1 of 1.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`, with `1 <= index <= count`.
    pub fn new(index: u64, count: u64) -> Result<Shard, ShardError> {
        if index == 0 || index > count {
            return Err(ShardError::OutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    /// The 1-based shard index `K`.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The number of shards `N`.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many seeds of `seeds` belong to this shard.
    pub fn seed_count(&self, seeds: Range<u64>) -> u64 {
        let len = seeds.end.saturating_sub(seeds.start);
        if len < self.index {
            return 0;
        }
        (len - self.index) / self.count + 1
    }

    /// The seeds of `seeds` that belong to this shard, in increasing order: computed
    /// one by one, never searched for, so a shard of a huge range starts at once.
    pub fn seeds(&self, seeds: Range<u64>) -> impl Iterator<Item = u64> {
        let shard = *self;
        (0..self.seed_count(seeds.clone())).map(move |n| shard.nth_seed(&seeds, n))
    }

    /// The `n`th (0-based) seed of `seeds` in this shard; `n` must be below
    /// [`Shard::seed_count`].
    pub fn nth_seed(&self, seeds: &Range<u64>, n: u64) -> u64 {
        assert!(
            n < self.seed_count(seeds.clone()),
            "seed {n} of the shard exists"
        );
        // Cannot overflow: the result is below `seeds.end`, by the assertion.
        seeds.start + (self.index - 1) + n * self.count
    }
}

impl Default for Shard {
    fn default() -> Shard {
        Shard::WHOLE
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(text.to_owned());
        let (index, count) = text.split_once('/').ok_or_else(syntax)?;
        let index: u64 = index.trim().parse().map_err(|_| syntax())?;
        let count: u64 = count.trim().parse().map_err(|_| syntax())?;
        Shard::new(index, count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How a sweep runs, besides its scenarios and seed range.
///
/// Defaults: [`RunOptions::default()`], one thread, the whole range
/// ([`Shard::WHOLE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepOptions {
    /// How each seed is run.
    pub run: RunOptions,
    /// Threads that run seeds side by side; each seed stays on one thread.
    pub threads: NonZeroUsize,
    /// Which part of the seed range to run.
    pub shard: Shard,
}

impl Default for SweepOptions {
    fn default() -> SweepOptions {
        SweepOptions {
            run: RunOptions::default(),
            threads: NonZeroUsize::MIN,
            shard: Shard::WHOLE,
        }
    }
}

/// Loads every scenario under `paths`, failing on the first invalid one.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<LoadedScenario>, SweepError> {
    let files = crate::scenario::discover(paths).map_err(|source| SweepError::Discover {
        path: paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
        source,
    })?;
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(SweepError::Empty(shown.join(" ")));
    }
    let scenarios = files
        .iter()
        .map(|file| LoadedScenario::load(file).map_err(SweepError::from))
        .collect::<Result<Vec<_>, _>>()?;
    crate::scenario::check_unique_names(&scenarios)?;
    Ok(scenarios)
}

/// Calls `work` on every job on up to `threads` threads and returns the results in
/// job order, whatever order the threads finished them in: [`run_in_order`] over a
/// slice, never stopped early.
pub fn run_jobs<J, R>(jobs: &[J], threads: NonZeroUsize, work: impl Fn(&J) -> R + Sync) -> Vec<R>
where
    J: Sync,
    R: Send,
{
    let mut results = Vec::with_capacity(jobs.len());
    let started = run_in_order(
        jobs.len() as u64,
        threads,
        &|| false,
        |index| work(&jobs[index as usize]),
        |result| results.push(result),
    );
    assert_eq!(started, jobs.len() as u64, "every job ran exactly once");
    results
}

/// Calls `work` on jobs `0..job_count` on up to `threads` threads, and `take` on
/// each result in job order, as soon as that job and every earlier one are done.
/// Returns how many jobs ran.
///
/// Each thread claims the next job number from a shared counter until none is left
/// or `stop` holds, so a slow job never holds up the others and a stopped run ends
/// once its running jobs are done. The jobs claimed are always `0..n` for some `n`,
/// and every one of them is run and taken. A panic in `work` or `take` stops the
/// other threads from claiming more, and is resumed on the calling thread once
/// every thread has stopped.
pub fn run_in_order<R: Send>(
    job_count: u64,
    threads: NonZeroUsize,
    stop: &(dyn Fn() -> bool + Sync),
    work: impl Fn(u64) -> R + Sync,
    take: impl FnMut(R) + Send,
) -> u64 {
    /// Results that finished before an earlier job, held until it is taken.
    struct InOrder<R, T> {
        next: u64,
        waiting: BTreeMap<u64, R>,
        take: T,
    }
    /// Stops the other threads from claiming jobs when its thread panics.
    struct StopOnPanic<'a>(&'a AtomicBool);
    impl Drop for StopOnPanic<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.store(true, Ordering::SeqCst);
            }
        }
    }
    let next_job = AtomicU64::new(0);
    let panicked = AtomicBool::new(false);
    let in_order = Mutex::new(InOrder {
        next: 0,
        waiting: BTreeMap::new(),
        take,
    });
    let thread_count = (threads.get() as u64).min(job_count);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..thread_count)
            .map(|_| {
                scope.spawn(|| {
                    let _guard = StopOnPanic(&panicked);
                    // Bounded: every pass claims a new number below `job_count`, and
                    // the claims end there (or at `stop`).
                    loop {
                        if stop() || panicked.load(Ordering::SeqCst) {
                            break;
                        }
                        let claimed =
                            next_job.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |job| {
                                (job < job_count).then_some(job + 1)
                            });
                        let Ok(index) = claimed else { break };
                        let result = work(index);
                        let mut in_order = in_order.lock().unwrap_or_else(PoisonError::into_inner);
                        in_order.waiting.insert(index, result);
                        let in_order = &mut *in_order;
                        while let Some(result) = in_order.waiting.remove(&in_order.next) {
                            (in_order.take)(result);
                            in_order.next += 1;
                        }
                    }
                })
            })
            .collect();
        let mut panic = None;
        for worker in workers {
            if let Err(payload) = worker.join() {
                panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
    });
    let in_order = in_order
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    assert!(in_order.waiting.is_empty(), "every job claimed was taken");
    assert_eq!(
        in_order.next,
        next_job.into_inner(),
        "the jobs taken are the jobs claimed"
    );
    in_order.next
}

/// The (scenario, seed) pairs of a sweep, numbered in scenario then seed order.
struct Jobs<'s> {
    scenarios: &'s [LoadedScenario],
    seeds: Range<u64>,
    shard: Shard,
    /// Seeds of the shard per scenario.
    per_scenario: u64,
}

impl<'s> Jobs<'s> {
    fn new(scenarios: &'s [LoadedScenario], seeds: Range<u64>, shard: Shard) -> Jobs<'s> {
        let per_scenario = shard.seed_count(seeds.clone());
        Jobs {
            scenarios,
            seeds,
            shard,
            per_scenario,
        }
    }

    /// How many jobs there are. Past `u64::MAX` jobs (several scenarios over nearly
    /// every seed) the count stops there: no sweep runs that long.
    fn count(&self) -> u64 {
        (self.scenarios.len() as u64).saturating_mul(self.per_scenario)
    }

    /// Job `index`: its scenario and seed.
    fn get(&self, index: u64) -> (&'s LoadedScenario, u64) {
        let scenario = &self.scenarios[(index / self.per_scenario) as usize];
        let seed = self.shard.nth_seed(&self.seeds, index % self.per_scenario);
        (scenario, seed)
    }
}

/// Calls `work` on the shard's (scenario, seed) pairs on the thread pool, and `take`
/// on each result in scenario then seed order, until `stop` holds. Returns whether
/// `stop` cut the sweep short.
fn each_seed<R: Send>(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    options: &SweepOptions,
    stop: &(dyn Fn() -> bool + Sync),
    work: impl Fn(&LoadedScenario, u64, &RunOptions) -> R + Sync,
    take: impl FnMut(R) + Send,
) -> bool {
    let jobs = Jobs::new(scenarios, seeds, options.shard);
    let ran = run_in_order(
        jobs.count(),
        options.threads,
        stop,
        |index| {
            let (scenario, seed) = jobs.get(index);
            work(scenario, seed, &options.run)
        },
        take,
    );
    ran < jobs.count()
}

/// The failure that stands for a run that could not be carried out.
fn harness_failure(
    scenario: &LoadedScenario,
    seed: u64,
    error: &RunError,
    options: &RunOptions,
) -> Failure {
    Failure {
        scenario: scenario.path.display().to_string(),
        seed,
        invariant: "harness".to_owned(),
        detail: error.to_string(),
        repro: repro_command(&scenario.path, seed, options),
        repro_cargo: repro_cargo_command(&scenario.path, seed, options),
        shrink: None,
        shrink_cargo: None,
    }
}

/// What one seed of a sweep left behind: small, so a long sweep holds no traces.
struct SeedOutcome {
    sim_duration: Duration,
    failures: Vec<Failure>,
    cost: crate::economics::Spend,
    probes: BTreeMap<Probe, u64>,
    counts: crate::report::RunCounts,
}

/// How often each probe was reached in `trace`.
pub fn probes_reached(trace: &[TraceEntry]) -> BTreeMap<Probe, u64> {
    let mut reached = BTreeMap::new();
    for entry in trace {
        if let EventRef::Runtime(RuntimeEvent::ProbeReached { probe }) = entry.typed.as_ref() {
            *reached.entry(*probe).or_default() += 1;
        }
    }
    reached
}

/// Runs `seed` of `scenario`; with `replayed`, runs it a second time and fails it
/// under `determinism` (invariant 12) if the two traces part.
fn sweep_seed(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
    replayed: bool,
) -> SeedOutcome {
    let failure = |invariant: &str, detail: String| Failure {
        scenario: scenario.path.display().to_string(),
        seed,
        invariant: invariant.to_owned(),
        detail,
        repro: repro_command(&scenario.path, seed, options),
        repro_cargo: repro_cargo_command(&scenario.path, seed, options),
        shrink: Some(shrink_command(&scenario.path, seed, options)),
        shrink_cargo: shrink_cargo_command(&scenario.path, seed, options),
    };
    let run = run_seed(scenario, seed, options).and_then(|run| {
        // Only the first run's fingerprint is kept through the second: a whale
        // run's trace is most of its memory.
        let fingerprint = replayed.then(|| TraceFingerprint::of(&run.trace));
        let outcome = seed_outcome(run, &failure);
        let Some(fingerprint) = fingerprint else {
            return Ok(outcome);
        };
        let again = run_seed(scenario, seed, options)?;
        Ok(SeedOutcome {
            failures: outcome
                .failures
                .into_iter()
                .chain(fingerprint.difference(&again.trace).map(|difference| Failure {
                    shrink: None,
                    shrink_cargo: None,
                    ..failure(
                        crate::check::Invariant::Determinism.as_str(),
                        format!(
                            "the seed, run twice, gave two traces (`coordsim check-determinism` runs every seed twice and shows both entries): {difference}"
                        ),
                    )
                }))
                .collect(),
            ..outcome
        })
    });
    match run {
        Ok(outcome) => outcome,
        Err(error) => SeedOutcome {
            sim_duration: Duration::ZERO,
            cost: crate::economics::Spend::default(),
            probes: BTreeMap::new(),
            counts: crate::report::RunCounts::default(),
            failures: vec![harness_failure(scenario, seed, &error, options)],
        },
    }
}

/// What the sweep keeps of one seed's run: its failures and what the report counts.
fn seed_outcome(run: SeedRun, failure: &impl Fn(&str, String) -> Failure) -> SeedOutcome {
    SeedOutcome {
        probes: probes_reached(&run.trace),
        counts: crate::report::RunCounts::of_trace(&run.trace),
        sim_duration: run.sim_duration,
        cost: run.cost.total,
        failures: run
            .failures
            .iter()
            .map(|violation| failure(violation.invariant, violation.detail.clone()))
            .collect(),
    }
}

/// A trace reduced to one hash an entry: enough to tell where a second run of the
/// same seed parts from it, at 8 bytes an entry instead of the entry itself.
struct TraceFingerprint {
    entry_hashes: Vec<u64>,
}

impl TraceFingerprint {
    fn of(trace: &[TraceEntry]) -> TraceFingerprint {
        TraceFingerprint {
            entry_hashes: crate::trace::entry_hashes(trace),
        }
    }

    /// Where `trace` parts from the fingerprinted one, in words, or `None` when
    /// every entry agrees.
    fn difference(&self, trace: &[TraceEntry]) -> Option<String> {
        let again = crate::trace::entry_hashes(trace);
        let index = first_difference(&self.entry_hashes, &again)?;
        Some(match trace.get(index) {
            Some(entry) if index < self.entry_hashes.len() => format!(
                "trace entry {index} differs\n  second run: {}",
                entry.line()
            ),
            Some(entry) => format!(
                "the first run's trace ({index} entries) is a prefix of the second run's, which goes on with entry {index}\n  second run: {}",
                entry.line()
            ),
            None => format!(
                "the second run's trace ({index} entries) is a prefix of the first run's, which has {} entries",
                self.entry_hashes.len()
            ),
        })
    }
}

/// Runs every scenario over the shard's seeds of `seeds`, calling `on_seed` after each
/// seed (for progress; it may be called from several threads at once).
pub fn sweep(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    options: &SweepOptions,
    on_seed: impl Fn() + Sync,
) -> SweepReport {
    sweep_until(scenarios, seeds, options, &|| false, |_| on_seed())
}

/// Runs every scenario over the shard's seeds of `seeds` until `stop` holds, and
/// calls `on_seed` with each seed's failures (empty when it passed) in scenario then
/// seed order, as soon as the seed and every earlier one are done, so a caller can
/// print failures as they are found.
pub fn sweep_until(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    options: &SweepOptions,
    stop: &(dyn Fn() -> bool + Sync),
    mut on_seed: impl FnMut(&[Failure]) + Send,
) -> SweepReport {
    let mut report = SweepReport {
        scenarios: scenarios.len(),
        coverage: Probe::ALL.iter().map(|probe| (probe.as_str(), 0)).collect(),
        ..SweepReport::default()
    };
    let mut sim_time = Duration::ZERO;
    // Each scenario's first seed is run twice: a runtime that draws ids or timing
    // from outside the world fails the sweep itself, at the cost of one run in a
    // scenario's hundred.
    let first_seed = options.shard.seeds(seeds.clone()).next();
    let work = |scenario: &LoadedScenario, seed: u64, run: &RunOptions| {
        sweep_seed(scenario, seed, run, Some(seed) == first_seed)
    };
    report.stopped_early = each_seed(scenarios, seeds, options, stop, work, |outcome| {
        on_seed(&outcome.failures);
        report.seeds_run += 1;
        sim_time += outcome.sim_duration;
        report.cost_usd += outcome.cost.cost_usd;
        report.prompt_tokens += outcome.cost.usage.prompt_tokens();
        report.cache_read_tokens += outcome.cost.usage.cache_read_input_tokens;
        if !outcome.failures.is_empty() {
            report.seeds_failed += 1;
        }
        for (probe, hits) in outcome.probes {
            *report.coverage.entry(probe.as_str()).or_default() += hits;
        }
        report.counts.add(&outcome.counts);
        report.failures.extend(outcome.failures);
    });
    report.sim_seconds = sim_time.as_secs_f64();
    report
}

/// Where two traces of one seed first part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TraceDifference {
    /// The entries at `index` differ.
    Entry {
        /// The 0-based index of the first differing entry.
        index: usize,
        /// The first run's entry.
        first: TraceEntry,
        /// The second run's entry.
        second: TraceEntry,
    },
    /// One trace is a prefix of the other, which goes on from `index`.
    Prefix {
        /// The length of the shorter trace: the index of the first extra entry.
        index: usize,
        /// Whether the first run's trace is the longer one.
        first_is_longer: bool,
        /// The longer trace's first extra entry.
        extra: TraceEntry,
    },
    /// Every entry agrees, yet the hashes differ.
    HashOnly {
        /// The first run's trace hash.
        first_hash: u64,
        /// The second run's trace hash.
        second_hash: u64,
    },
}

impl TraceDifference {
    /// Where `first` and `second` part, or `None` when they are the same run.
    pub fn between(first: &SeedRun, second: &SeedRun) -> Option<TraceDifference> {
        TraceDifference::first_entry(&first.trace, &second.trace).or_else(|| {
            let (first_hash, second_hash) = (first.trace_hash(), second.trace_hash());
            (first_hash != second_hash).then_some(TraceDifference::HashOnly {
                first_hash,
                second_hash,
            })
        })
    }

    /// Where the traces part, in words: the entry or entries that show it.
    pub fn describe(&self) -> String {
        match self {
            TraceDifference::Entry {
                index,
                first,
                second,
            } => format!(
                "trace entry {index} differs\n  first run:  {}\n  second run: {}",
                first.line(),
                second.line()
            ),
            TraceDifference::Prefix {
                index,
                first_is_longer,
                extra,
            } => {
                let (shorter, longer) = if *first_is_longer {
                    ("second", "first")
                } else {
                    ("first", "second")
                };
                format!(
                    "the {shorter} run's trace ({index} entries) is a prefix of the \
                     {longer} run's, which goes on with entry {index}\n  {longer} run: {}",
                    extra.line()
                )
            }
            TraceDifference::HashOnly {
                first_hash,
                second_hash,
            } => format!(
                "the traces agree entry by entry, but their hashes differ \
                 ({first_hash:016x} vs {second_hash:016x})"
            ),
        }
    }

    /// The first entry where two traces part, or `None` when they are equal.
    fn first_entry(first: &[TraceEntry], second: &[TraceEntry]) -> Option<TraceDifference> {
        let index = first_difference(first, second)?;
        Some(match (first.get(index), second.get(index)) {
            (Some(first), Some(second)) => TraceDifference::Entry {
                index,
                first: first.clone(),
                second: second.clone(),
            },
            (Some(extra), None) | (None, Some(extra)) => TraceDifference::Prefix {
                index,
                first_is_longer: first.len() > second.len(),
                extra: extra.clone(),
            },
            (None, None) => unreachable!("a difference lies inside the longer sequence"),
        })
    }
}

/// The index where two sequences first part: of the first unequal pair, or else of
/// the longer one's first extra item. `None` when they are equal.
fn first_difference<T: PartialEq>(first: &[T], second: &[T]) -> Option<usize> {
    let shared = first.len().min(second.len());
    (0..shared)
        .find(|&index| first[index] != second[index])
        .or((first.len() != second.len()).then_some(shared))
}

/// A seed whose two runs did not agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// The scenario file.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Where the traces part.
    pub difference: TraceDifference,
    /// The command that runs the seed again.
    pub repro: String,
}

/// What a determinism check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeterminismReport {
    /// Scenario files run.
    pub scenarios: usize,
    /// Seeds checked, each run twice.
    pub seeds_run: u64,
    /// Seeds whose two runs gave the same trace.
    pub seeds_agreed: u64,
    /// Seeds whose runs differ, in scenario then seed order.
    pub divergences: Vec<Divergence>,
    /// Seeds that could not be run at all (invariant `harness`), in the same order.
    pub harness_failures: Vec<Failure>,
    /// Whether the caller stopped the check before its last seed: the report covers
    /// the first `seeds_run` seeds in scenario-then-seed order.
    pub stopped_early: bool,
}

/// What checking one seed found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedCheck {
    /// Both runs left the same trace.
    Agreed,
    /// The runs' traces differ.
    Diverged(Box<Divergence>),
    /// The seed could not be run (invariant `harness`).
    Harness(Failure),
}

/// Set to a trace entry's index, it moves that entry of every seed's second run
/// 1 ms later: since no scenario diverges, the one way to show from outside how
/// `check-determinism` reports a divergence (docs/cli.md's example).
const DIVERGE_VARIABLE: &str = "COORDSIM_TEST_DIVERGE_AT";

fn check_seed(scenario: &LoadedScenario, seed: u64, options: &RunOptions) -> SeedCheck {
    let runs = run_seed(scenario, seed, options)
        .and_then(|first| Ok((first, run_seed(scenario, seed, options)?)));
    match runs {
        Err(error) => SeedCheck::Harness(harness_failure(scenario, seed, &error, options)),
        Ok((first, mut second)) => {
            let moved = std::env::var(DIVERGE_VARIABLE)
                .ok()
                .and_then(|index| index.parse::<usize>().ok())
                .and_then(|index| second.trace.get_mut(index));
            if let Some(entry) = moved {
                entry.time_ms += 1;
            }
            compared(scenario, seed, options, &first, &second)
        }
    }
}

/// What the two runs of a seed came to.
fn compared(
    scenario: &LoadedScenario,
    seed: u64,
    options: &RunOptions,
    first: &SeedRun,
    second: &SeedRun,
) -> SeedCheck {
    match TraceDifference::between(first, second) {
        None => SeedCheck::Agreed,
        Some(difference) => SeedCheck::Diverged(Box::new(Divergence {
            scenario: scenario.path.display().to_string(),
            seed,
            difference,
            repro: repro_command(&scenario.path, seed, options),
        })),
    }
}

/// Runs every seed of every scenario twice (on the sweep's thread pool, both runs of
/// a seed on one thread) and compares the two traces, calling `on_seed` after each
/// seed.
pub fn check_determinism(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    options: &SweepOptions,
    on_seed: impl Fn() + Sync,
) -> DeterminismReport {
    check_determinism_until(scenarios, seeds, options, &|| false, |_| on_seed())
}

/// [`check_determinism`] until `stop` holds, calling `on_seed` with what each seed
/// came to in scenario then seed order, as soon as it and every earlier seed are
/// done.
pub fn check_determinism_until(
    scenarios: &[LoadedScenario],
    seeds: Range<u64>,
    options: &SweepOptions,
    stop: &(dyn Fn() -> bool + Sync),
    mut on_seed: impl FnMut(&SeedCheck) + Send,
) -> DeterminismReport {
    let mut report = DeterminismReport {
        scenarios: scenarios.len(),
        ..DeterminismReport::default()
    };
    report.stopped_early = each_seed(scenarios, seeds, options, stop, check_seed, |check| {
        on_seed(&check);
        report.seeds_run += 1;
        match check {
            SeedCheck::Agreed => report.seeds_agreed += 1,
            SeedCheck::Diverged(divergence) => report.divergences.push(*divergence),
            SeedCheck::Harness(failure) => report.harness_failures.push(failure),
        }
    });
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_shard_of_a_huge_range_finds_its_seeds_at_once() {
        // Goal: issue 24's `--shard 1/N` of a huge range, which walked the whole
        // range to find its seeds. Method: the first and last seeds of shards of
        // the largest range; a search would take centuries.
        let range = 0..u64::MAX;
        let shard = Shard::new(3, 1 << 40).unwrap();
        let first: Vec<u64> = shard.seeds(range.clone()).take(2).collect();
        assert_eq!(first, [2, 2 + (1 << 40)]);
        let count = shard.seed_count(range.clone());
        assert_eq!(
            shard.nth_seed(&range, count - 1),
            2 + (count - 1) * (1 << 40)
        );
        let last_shard = Shard::new(7, 7).unwrap();
        let tail = 5..u64::MAX;
        let last = last_shard.nth_seed(&tail, last_shard.seed_count(tail.clone()) - 1);
        assert!(last < u64::MAX && (last - 5) % 7 == 6 && u64::MAX - last <= 7);
    }

    #[test]
    fn a_stopped_run_takes_a_prefix_of_the_jobs_in_order() {
        // Goal: once `stop` holds no job starts, and the jobs that ran are the first
        // ones, each taken once in order, on any thread count. Method: stop after
        // the tenth job of a near-endless list.
        for threads in [1, 3] {
            let threads = NonZeroUsize::new(threads).unwrap();
            let done = AtomicUsize::new(0);
            let stop = || done.load(Ordering::SeqCst) >= 10;
            let mut taken = Vec::new();
            let ran = run_in_order(
                u64::MAX,
                threads,
                &stop,
                |job| {
                    done.fetch_add(1, Ordering::SeqCst);
                    job
                },
                |job| taken.push(job),
            );
            assert!((10..10 + threads.get() as u64).contains(&ran), "{ran}");
            assert_eq!(taken, (0..ran).collect::<Vec<_>>());
        }
    }

    #[test]
    fn shards_partition_every_range() {
        // Goal: the N shards of a range are disjoint and cover it, and seed_count
        // counts what seeds yields. Method: every small range and shard count.
        for start in 0..4 {
            for len in 0..12 {
                for count in 1..6 {
                    let range = start..start + len;
                    let mut all = Vec::new();
                    for index in 1..=count {
                        let shard = Shard::new(index, count).unwrap();
                        let seeds: Vec<u64> = shard.seeds(range.clone()).collect();
                        assert_eq!(shard.seed_count(range.clone()), seeds.len() as u64);
                        assert!(seeds.iter().all(|s| (s - start) % count == index - 1));
                        all.extend(seeds);
                    }
                    all.sort_unstable();
                    assert_eq!(all, range.collect::<Vec<_>>(), "{count} shards");
                }
            }
        }
    }

    #[test]
    fn a_failure_prints_with_its_repro_line() {
        // Goal: the text report names the seed and invariant, then how to rerun it.
        let failure = Failure {
            scenario: "scenarios/core/a.toml".to_owned(),
            seed: 7,
            invariant: "notify-once".to_owned(),
            detail: "delivered twice".to_owned(),
            repro: "coordsim run scenarios/core/a.toml --seed 7".to_owned(),
            repro_cargo: None,
            shrink: Some("coordsim shrink scenarios/core/a.toml --seed 7 -o a.toml".to_owned()),
            shrink_cargo: None,
        };
        assert_eq!(
            failure.to_string(),
            "FAIL scenarios/core/a.toml seed 7: notify-once: delivered twice\n  \
             repro: coordsim run scenarios/core/a.toml --seed 7\n  \
             shrink: coordsim shrink scenarios/core/a.toml --seed 7 -o a.toml"
        );
        let in_repository = Failure {
            repro_cargo: Some("cargo run -- run scenarios/core/a.toml --seed 7".to_owned()),
            shrink_cargo: Some(
                "cargo run -- shrink scenarios/core/a.toml --seed 7 -o a.toml".to_owned(),
            ),
            ..failure
        };
        assert_eq!(
            in_repository.to_string(),
            "FAIL scenarios/core/a.toml seed 7: notify-once: delivered twice\n  \
             repro: coordsim run scenarios/core/a.toml --seed 7\n  \
             or, in the repository: cargo run -- run scenarios/core/a.toml --seed 7\n  \
             shrink: coordsim shrink scenarios/core/a.toml --seed 7 -o a.toml\n  \
             or, in the repository: cargo run -- shrink scenarios/core/a.toml --seed 7 -o a.toml"
        );
    }

    #[test]
    fn shards_parse_from_k_slash_n() {
        // Goal: `K/N` parses when 1 <= K <= N, and every other text says why not.
        assert_eq!("2/4".parse(), Shard::new(2, 4));
        assert_eq!("2/4".parse::<Shard>().unwrap().to_string(), "2/4");
        assert_eq!("1/1".parse(), Ok(Shard::WHOLE));
        for (text, index, count) in [("0/3", 0, 3), ("4/3", 4, 3), ("1/0", 1, 0)] {
            let error = text.parse::<Shard>().unwrap_err();
            assert_eq!(error, ShardError::OutOfRange { index, count });
        }
        for text in ["3", "a/3", "1/2/3", "", "-1/3"] {
            let error = text.parse::<Shard>().unwrap_err();
            assert_eq!(error, ShardError::Syntax(text.to_owned()));
        }
    }

    #[test]
    fn run_jobs_keeps_job_order_on_any_thread_count() {
        // Goal: results come back in job order whatever the thread count, and each
        // job runs once. Method: jobs that finish out of order (later jobs are quicker).
        let jobs: Vec<u64> = (0..40).collect();
        for threads in [1, 2, 3, 64] {
            let threads = NonZeroUsize::new(threads).unwrap();
            let calls = AtomicUsize::new(0);
            let results = run_jobs(&jobs, threads, |&job| {
                calls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(40 - job));
                job * 2
            });
            assert_eq!(results, jobs.iter().map(|job| job * 2).collect::<Vec<_>>());
            assert_eq!(calls.into_inner(), jobs.len());
        }
        let none: Vec<u64> = run_jobs(&[], NonZeroUsize::MIN, |&job: &u64| job);
        assert!(none.is_empty());
    }

    #[test]
    fn traces_part_at_their_first_differing_entry() {
        // Goal: a divergence names the first differing entry, or where the longer
        // trace goes on past the shorter one.
        let base = [10, 11, 12];
        assert_eq!(first_difference(&base, &base), None);
        assert_eq!(first_difference::<u8>(&[], &[]), None);
        assert_eq!(first_difference(&base, &[10, 99, 98]), Some(1));
        assert_eq!(first_difference(&base, &[99, 11, 12]), Some(0));
        assert_eq!(first_difference(&base[..2], &base), Some(2));
        assert_eq!(first_difference(&base, &base[..2]), Some(2));
        assert_eq!(first_difference(&base, &[]), Some(0));
        assert_eq!(first_difference(&base, &[10, 99]), Some(1));
    }

    #[test]
    fn a_fingerprint_finds_where_a_second_run_parts() {
        // Goal: the sweep's replay keeps one hash an entry of the first run, and
        // still names the entry where the second run parts from it.
        let entry = |time_ms: u64| TraceEntry {
            time_ms,
            actor: "sim".into(),
            typed: crate::trace::TraceEvent::Sim(crate::trace::SimEvent::Healed),
        };
        let first = vec![entry(0), entry(5), entry(9)];
        let fingerprint = TraceFingerprint::of(&first);
        assert_eq!(fingerprint.difference(&first), None);
        let parted = fingerprint
            .difference(&[entry(0), entry(6), entry(9)])
            .expect("the second entries differ");
        assert!(parted.starts_with("trace entry 1 differs"), "{parted}");
        assert!(parted.contains("0.006s"), "{parted}");
        let longer = fingerprint
            .difference(&[entry(0), entry(5), entry(9), entry(12)])
            .expect("the second run goes on");
        assert!(longer.contains("goes on with entry 3"), "{longer}");
        let shorter = fingerprint
            .difference(&first[..1])
            .expect("the second run stops short");
        assert!(shorter.contains("(1 entries)"), "{shorter}");
        assert!(shorter.contains("has 3 entries"), "{shorter}");
    }
}
