//! Invariant 10: no worker of one binding is visible to another.
//!
//! The binding a task belongs to is the one the harness served when the task was
//! spawned, as the run's own record shows it: the scenario's binding from the start
//! and after each restart, a `binding-switch` fault's once it fired. The runtime's
//! `worker_bound` events are claims, held to that record; the answers the
//! coordinator's model read (lookups, refusals, TaskList listings) are judged
//! against it. The same record judges a listing from the other side
//! ([`TASK_LIST`]): it must hold the binding's own tasks still running.

use std::collections::{BTreeMap, BTreeSet};

use coord_runtime::RuntimeEvent;

use super::invariants::runtime_events;
use super::{Invariant, Violation};
use crate::fault::Fault;
use crate::trace::{EventRef, SimEvent, TraceEntry};

/// Invariant 10: a SendMessageToWorker lookup under one binding never finds a worker
/// that only another binding spawned: it must answer exactly as for a worker that
/// does not exist.
pub fn binding_isolation(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut bound: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut violations = Vec::new();
    for (time, event) in runtime_events(trace) {
        match event {
            RuntimeEvent::WorkerBound { binding, worker } => {
                bound.entry(worker.to_string()).or_default().insert(binding);
            }
            RuntimeEvent::WorkerLookedUp {
                binding,
                worker_id,
                found: true,
            } => {
                let owners = bound.get(worker_id.as_str());
                let own = owners.is_some_and(|owners| owners.contains(binding.as_str()));
                if !own {
                    let owners = owners
                        .map(|owners| owners.iter().copied().collect::<Vec<_>>().join(", "))
                        .unwrap_or_else(|| "no binding".to_owned());
                    violations.push(Violation::new(
                        Invariant::BindingIsolation,
                        format!("at {time} ms binding {binding} found worker {worker_id}, which belongs to {owners}"),
                    ));
                }
            }
            _ => {}
        }
    }
    violations.extend(refusals_differ(trace));
    violations.extend(witnessed_owners(trace));
    violations
}

/// The binding the harness serves, followed through the trace.
#[derive(Debug, Default)]
struct Served<'t> {
    /// The scenario's binding: served from the start and after each restart.
    scenario: Option<&'t str>,
    schedule: &'t [Fault],
    /// What is served now; `None` for no binding.
    now: Option<String>,
    /// Counts every change of what is served (a switch fired, a host restarted):
    /// two moments with the same epoch served the same binding throughout.
    epoch: u32,
    /// Each agent's latest call number, with the epoch when that call's first
    /// request reached the model, and when the call before it did. A call sent
    /// again (a retry after a failed attempt) is still the same call: the tool
    /// results it carries were made before its first attempt.
    at_request: BTreeMap<&'t str, (u32, u32, Option<u32>)>,
    /// Requests the coordinator's model received so far.
    coordinator_requests: u32,
    /// Whether a host crashed so far.
    crashed: bool,
}

impl<'t> Served<'t> {
    /// Follows `event`: what is served, and when each agent's requests were made.
    fn follow(&mut self, event: EventRef<'t>) {
        match event {
            EventRef::Sim(SimEvent::RunStarted { binding, .. }) => {
                self.scenario = binding.as_deref();
                self.now = binding.clone();
            }
            EventRef::Sim(SimEvent::FaultsScheduled { faults }) => self.schedule = faults,
            EventRef::Sim(SimEvent::FaultFired { fault, .. }) => {
                if let Some(Fault::BindingSwitch { binding, .. }) = self.schedule.get(*fault) {
                    self.now = Some(crate::scenario::binding_key(binding).to_string());
                    self.epoch += 1;
                }
            }
            // A restarted host serves the scenario's own binding again: a switch
            // that fired before the crash is not made again.
            EventRef::Sim(SimEvent::HostRestarted { .. }) => {
                self.now = self.scenario.map(str::to_owned);
                self.epoch += 1;
            }
            EventRef::Sim(SimEvent::HostCrashed { .. }) => self.crashed = true,
            EventRef::Sim(SimEvent::ModelCalled { agent, call, .. }) => {
                let epoch = self.epoch;
                let seen = self.at_request.get(agent.as_str()).copied();
                let again = seen.is_some_and(|(latest_call, ..)| latest_call == *call);
                if again {
                    return;
                }
                if agent == crate::fault::COORDINATOR_LABEL {
                    self.coordinator_requests += 1;
                }
                let before = seen.map(|(_, latest, _)| latest);
                self.at_request
                    .insert(agent.as_str(), (*call, epoch, before));
            }
            _ => {}
        }
    }

    /// Whether nothing changed since `agent`'s latest request: a call its model made
    /// in the answer to it ran under what is served now.
    fn unchanged_since_latest(&self, agent: &str) -> bool {
        self.at_request
            .get(agent)
            .is_some_and(|&(_, latest, _)| latest == self.epoch)
    }

    /// Whether nothing changed since the request before `agent`'s latest: a tool
    /// result the latest request carries was made under what is served now.
    fn unchanged_since_before_latest(&self, agent: &str) -> bool {
        self.at_request
            .get(agent)
            .is_some_and(|&(_, _, before)| before == Some(self.epoch))
    }

    /// Who a task spawned now belongs to.
    fn owner(&self) -> Owner {
        match &self.now {
            Some(binding) => Owner::Binding(binding.clone()),
            None => Owner::Everyone,
        }
    }
}

/// Every task whose spawn the world witnessed, placed under the binding served then.
#[derive(Debug, Default)]
struct Spawns<'t> {
    placed: BTreeMap<&'t str, Placed>,
}

/// One witnessed spawn.
#[derive(Debug)]
struct Placed {
    owner: Owner,
    /// Whether the coordinator (or the harness, for it) launched the task in the
    /// background: its end reaches the coordinator as an envelope.
    coordinators_launch: bool,
    /// The coordinator's requests before the spawn was witnessed: the spawn was
    /// made while the coordinator waited on the answer to the last of them.
    coordinator_requests: u32,
}

impl<'t> Spawns<'t> {
    /// Places the spawn `event` witnesses, if any. A spawn seen again (an answer
    /// read again after a restart or a compaction) keeps its first placing.
    fn follow(&mut self, served: &Served<'t>, event: EventRef<'t>) {
        let (task_id, owner, coordinators_launch) = match event {
            // The harness launches before the coordinator's first request, under
            // what it serves then.
            EventRef::Sim(SimEvent::HarnessLaunched { task_id }) => {
                (task_id.as_str(), served.owner(), true)
            }
            EventRef::Sim(SimEvent::SpawnAnswered {
                agent,
                said,
                background,
                ..
            }) => {
                let Some(task_id) = &said.task_id else { return };
                // The answer comes with the agent's next request, before that
                // request's `model_called`.
                let owner = if served.unchanged_since_latest(agent) {
                    served.owner()
                } else {
                    Owner::Unknown
                };
                let coordinators = *background && agent == crate::fault::COORDINATOR_LABEL;
                (task_id.as_str(), owner, coordinators)
            }
            _ => return,
        };
        self.placed.entry(task_id).or_insert(Placed {
            owner,
            coordinators_launch,
            coordinator_requests: served.coordinator_requests,
        });
    }

    fn owner(&self, task_id: &str) -> Option<&Owner> {
        self.placed.get(task_id).map(|placed| &placed.owner)
    }
}

/// Who a task belongs to, by what was served when it was spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// Spawned while no binding was served: anyone may see it.
    Everyone,
    /// Spawned while this binding was served: it alone may see it.
    Binding(String),
    /// The served binding changed while the spawn was made: not judged.
    Unknown,
}

/// The binding served now and the one `task_id` was spawned under, when the
/// coordinator's latest request read an answer about it made under another binding
/// than its own. Judged only when nothing changed what was served between the
/// request that asked and the one that read the answer.
fn foreign<'o>(
    served: &'o Served<'_>,
    spawns: &'o Spawns<'_>,
    task_id: &str,
) -> Option<(&'o str, &'o str)> {
    let now = served.now.as_deref()?;
    if !served.unchanged_since_before_latest(crate::fault::COORDINATOR_LABEL) {
        return None;
    }
    match spawns.owner(task_id)? {
        Owner::Binding(owner) if owner != now => Some((now, owner.as_str())),
        _ => None,
    }
}

/// Invariant 10, judged on the world's record of who spawned what under which
/// binding:
///
/// - a TaskList answer the coordinator's model read may list no task that another
///   binding than the one served spawned, and no successful TaskGet or
///   SendMessageToWorker answer may be about one (judged when nothing changed what
///   was served between the request that asked and the one that read the answer);
/// - each `worker_bound` claim names the binding served when the worker was
///   spawned.
///
/// A task's spawn is witnessed by the harness's launch, or by the Agent answer the
/// calling agent's model read; it is placed under a binding only when nothing
/// changed what was served between that agent's request and the answer.
fn witnessed_owners(trace: &[TraceEntry]) -> Vec<Violation> {
    // Nothing to judge, as in most runs: no following of every request.
    let judged = trace.iter().any(|entry| {
        matches!(
            entry.typed.as_ref(),
            EventRef::Sim(SimEvent::TasksListed { .. } | SimEvent::TaskAnswered { .. })
                | EventRef::Runtime(RuntimeEvent::WorkerBound { .. })
        )
    });
    if !judged {
        return Vec::new();
    }
    let mut served = Served::default();
    let mut spawns = Spawns::default();
    let mut claims: Vec<(u64, &str, &str)> = Vec::new();
    // What the coordinator read about another binding's workers.
    let mut foreign_reads: Vec<String> = Vec::new();
    for entry in trace {
        let event = entry.typed.as_ref();
        served.follow(event);
        spawns.follow(&served, event);
        match event {
            EventRef::Runtime(RuntimeEvent::WorkerBound { binding, worker }) => {
                claims.push((entry.time_ms, worker.as_str(), binding));
            }
            EventRef::Sim(SimEvent::TasksListed { task_ids }) => {
                for task_id in task_ids {
                    foreign_reads.extend(foreign(&served, &spawns, task_id).map(|(now, owner)| format!(
                        "at {} ms the coordinator, serving binding {now}, read a TaskList that lists worker {task_id}, spawned while {owner} was served",
                        entry.time_ms
                    )));
                }
            }
            EventRef::Sim(SimEvent::TaskAnswered { tool, task_id }) => {
                foreign_reads.extend(foreign(&served, &spawns, task_id).map(|(now, owner)| format!(
                    "at {} ms the coordinator, serving binding {now}, read a {tool} answer about worker {task_id}, spawned while {owner} was served",
                    entry.time_ms
                )));
            }
            _ => {}
        }
    }
    let mut violations: Vec<Violation> = foreign_reads
        .into_iter()
        .map(|detail| Violation::new(Invariant::BindingIsolation, detail))
        .collect();
    for (time_ms, worker, binding) in claims {
        let spawned_under = match spawns.owner(worker) {
            Some(Owner::Binding(owner)) if owner != binding => owner.as_str(),
            Some(Owner::Everyone) => "no binding",
            _ => continue,
        };
        violations.push(Violation::new(
            Invariant::BindingIsolation,
            format!(
                "at {time_ms} ms the runtime bound worker {worker} to {binding}, but it was spawned while {spawned_under} was served"
            ),
        ));
    }
    violations
}

/// A TaskList answer the coordinator's model read, as [`listings_incomplete`]
/// judges it.
struct Listing<'t> {
    /// Its place in the trace.
    index: usize,
    time_ms: u64,
    /// The binding served when it was asked for and read.
    served: Option<String>,
    /// The task ids it gave.
    listed: BTreeSet<&'t str>,
    /// The coordinator's requests when it was read.
    coordinator_requests: u32,
}

/// The failure name of a TaskList answer that leaves out a task it must list.
pub const TASK_LIST: &str = "task-list";

/// A TaskList answer the coordinator's model read lists every task the coordinator
/// launched in the background that the binding served may see and that was not
/// yet over when the list was made: one whose envelope reached the coordinator's
/// model only with a later request. (A task leaves the runtime's memory only once
/// it is notified, and every request carries the envelopes notified before it, so
/// one notified before the list was made comes with the request that reads it.)
///
/// Judged when what was served did not change between the request whose answer
/// asked for the list and the one that read it, for tasks launched before that
/// asking request, and until a host crashes.
pub fn listings_incomplete(trace: &[TraceEntry]) -> Vec<Violation> {
    let listed = trace.iter().any(|entry| {
        matches!(
            entry.typed.as_ref(),
            EventRef::Sim(SimEvent::TasksListed { .. })
        )
    });
    if !listed {
        return Vec::new();
    }
    let mut served = Served::default();
    let mut spawns = Spawns::default();
    let mut listings: Vec<Listing> = Vec::new();
    let mut first_envelope: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, entry) in trace.iter().enumerate() {
        let event = entry.typed.as_ref();
        served.follow(event);
        spawns.follow(&served, event);
        match event {
            EventRef::Sim(SimEvent::EnvelopesAccepted { task_ids, .. }) => {
                for task_id in task_ids.iter() {
                    first_envelope.entry(task_id).or_insert(index);
                }
            }
            EventRef::Sim(SimEvent::TasksListed { task_ids })
                if !served.crashed
                    && served.unchanged_since_before_latest(crate::fault::COORDINATOR_LABEL) =>
            {
                listings.push(Listing {
                    index,
                    time_ms: entry.time_ms,
                    served: served.now.clone(),
                    listed: task_ids.iter().map(|id| id.as_str()).collect(),
                    coordinator_requests: served.coordinator_requests,
                });
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for Listing {
        index,
        time_ms,
        served: now,
        listed,
        coordinator_requests: requests,
    } in &listings
    {
        for (task_id, placed) in &spawns.placed {
            let visible = match &placed.owner {
                Owner::Everyone => true,
                Owner::Binding(owner) => now.as_ref() == Some(owner),
                Owner::Unknown => false,
            };
            // Launched while the coordinator waited on a request before the one
            // whose answer asked for the list.
            let launched_before = placed.coordinator_requests + 2 <= *requests;
            let over_after = first_envelope
                .get(task_id)
                .is_some_and(|envelope| envelope > index);
            if placed.coordinators_launch
                && visible
                && launched_before
                && over_after
                && !listed.contains(task_id)
            {
                violations.push(Violation {
                    invariant: TASK_LIST,
                    detail: format!(
                        "at {time_ms} ms the coordinator read a TaskList without task {task_id}, which it launched and which was still running{}",
                        now.as_ref()
                            .map(|binding| format!(" under binding {binding}"))
                            .unwrap_or_default()
                    ),
                });
            }
        }
    }
    violations
}

/// Invariant 10, judged on what the coordinator's model read: in a tool round where
/// a SendMessageToWorker lookup found nothing, every SendMessageToWorker refusal of
/// that round reads the same once the worker ids are blanked out, and so does
/// every TaskGet refusal. A refusal worded
/// otherwise for a worker of another binding than for one that never existed tells
/// the caller that the worker exists.
///
/// A round is the refusals the coordinator's model received at one instant. A
/// scenario that asks about a foreign and a missing worker asks in one round and
/// sends nothing else through SendMessageToWorker in it.
fn refusals_differ(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut ids: BTreeSet<&str> = BTreeSet::new();
    let mut unfound_at: BTreeSet<u64> = BTreeSet::new();
    // By instant and tool: SendMessageToWorker's refusals, and TaskGet's.
    let mut rounds: BTreeMap<(u64, &str), Vec<&str>> = BTreeMap::new();
    for entry in trace {
        match entry.typed.as_ref() {
            EventRef::Runtime(RuntimeEvent::WorkerBound { worker, .. }) => {
                ids.insert(worker.as_str());
            }
            EventRef::Sim(SimEvent::HarnessLaunched { task_id }) => {
                ids.insert(task_id);
            }
            EventRef::Sim(SimEvent::SpawnAnswered { said, .. }) => {
                ids.extend(said.task_id.as_deref());
            }
            EventRef::Runtime(RuntimeEvent::WorkerLookedUp {
                worker_id, found, ..
            }) => {
                ids.insert(worker_id);
                if !found {
                    unfound_at.insert(entry.time_ms);
                }
            }
            EventRef::Sim(SimEvent::ToolFailed { role, tool, error })
                if role == "coordinator"
                    && (tool == "SendMessageToWorker" || tool == "TaskGet") =>
            {
                rounds
                    .entry((entry.time_ms, tool.as_str()))
                    .or_default()
                    .push(error);
            }
            _ => {}
        }
    }
    let blanked = |error: &str| {
        ids.iter()
            .fold(error.to_owned(), |text, id| text.replace(id, "<worker id>"))
    };
    rounds
        .iter()
        // The lookups run before the refusals reach the model, in the same round.
        .filter(|((time, _), _)| unfound_at.range(..=*time).next_back().is_some())
        .filter_map(|((time, tool), refusals)| {
            let texts: BTreeSet<String> = refusals.iter().map(|error| blanked(error)).collect();
            (texts.len() > 1).then(|| {
                Violation::new(
                    Invariant::BindingIsolation,
                    format!(
                        "at {time} ms the coordinator's {tool} refusals differ beyond the worker id: {}",
                        texts.into_iter().collect::<Vec<_>>().join(" | ")
                    ),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultKind;
    use crate::trace::TraceEvent;
    use coord_runtime::task::TaskId;

    fn entry(time_ms: u64, event: RuntimeEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "runtime".into(),
            typed: TraceEvent::runtime(event),
        }
    }

    fn sim(time_ms: u64, event: SimEvent) -> TraceEntry {
        TraceEntry {
            time_ms,
            actor: "sim".into(),
            typed: TraceEvent::Sim(event),
        }
    }

    /// Asserts that `violations` is one violation whose detail contains `wanted`.
    fn only_violation(violations: &[Violation], wanted: &str) {
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].detail.contains(wanted),
            "{}",
            violations[0].detail
        );
    }

    fn bound(time_ms: u64, binding: &str, worker: &str) -> TraceEntry {
        entry(
            time_ms,
            RuntimeEvent::WorkerBound {
                binding: binding.to_owned(),
                worker: TaskId::parse(worker).unwrap(),
            },
        )
    }

    fn looked_up(time_ms: u64, binding: &str, worker_id: &str, found: bool) -> TraceEntry {
        entry(
            time_ms,
            RuntimeEvent::WorkerLookedUp {
                binding: binding.to_owned(),
                worker_id: worker_id.to_owned(),
                found,
            },
        )
    }

    #[test]
    fn binding_isolation_flags_a_worker_found_from_another_binding() {
        // Goal: the checker catches one binding reaching another's worker. Method: a
        // handcrafted trace where bob's lookup finds alice's worker.
        let trace = [
            bound(0, "telegram:alice", "a00000001"),
            looked_up(100, "telegram:bob", "a00000001", true),
        ];
        let violations = binding_isolation(&trace);
        only_violation(
            &violations,
            "binding telegram:bob found worker a00000001, which belongs to telegram:alice",
        );
        assert_eq!(violations[0].invariant, "binding-isolation");
    }

    #[test]
    fn binding_isolation_accepts_own_lookups_and_refused_foreign_ones() {
        // Goal: no false alarm on what isolation allows. Method: alice finds her own
        // worker, bob's lookup of it is refused, and bob finds a worker bound to him.
        let trace = [
            bound(0, "telegram:alice", "a00000001"),
            looked_up(100, "telegram:alice", "a00000001", true),
            looked_up(200, "telegram:bob", "a00000001", false),
            bound(300, "telegram:bob", "a00000002"),
            looked_up(400, "telegram:bob", "a00000002", true),
        ];
        assert!(binding_isolation(&trace).is_empty());
    }

    /// A run of the nexo profile serving telegram:alice, whose schedule switches it
    /// to telegram:bob.
    fn started_with_switch() -> [TraceEntry; 2] {
        [
            sim(
                0,
                SimEvent::RunStarted {
                    scenario: "s".into(),
                    profile: "nexo".into(),
                    coordinator_mode: false,
                    liveness_bound_ms: 1,
                    background_forced: false,
                    background_disabled: false,
                    binding: Some("telegram:alice".to_owned()),
                },
            ),
            sim(
                0,
                SimEvent::FaultsScheduled {
                    faults: vec![Fault::BindingSwitch {
                        after_call: 1,
                        binding: "telegram:bob".to_owned(),
                    }],
                },
            ),
        ]
    }

    fn switched(time_ms: u64) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::FaultFired {
                fault: 0,
                kind: FaultKind::BindingSwitch,
                detail: "the session serves binding telegram:bob".to_owned(),
                agent: None,
            },
        )
    }

    fn launched(time_ms: u64, task_id: &str) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::HarnessLaunched {
                task_id: task_id.to_owned(),
            },
        )
    }

    fn spawn_answered(time_ms: u64, task_id: &str) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::SpawnAnswered {
                agent: "coordinator".into(),
                asked_background: None,
                subagent_type: None,
                background: true,
                said: Box::new(crate::trace::SpawnAnswerSaid {
                    task_id: Some(task_id.to_owned()),
                    asked_isolation: None,
                    asked_team: false,
                    trailer_status: None,
                    result_said: None,
                    launch_status: Some("async_launched".to_owned()),
                    launch_description_kept: Some(true),
                }),
            },
        )
    }

    /// The coordinator's request at `time_ms`: each one a call of its own,
    /// numbered by its time.
    fn called(time_ms: u64) -> TraceEntry {
        called_again(time_ms, time_ms)
    }

    /// The coordinator's request at `time_ms` for its call `call`, which an
    /// earlier attempt may have sent already.
    fn called_again(time_ms: u64, call: u64) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::ModelCalled {
                agent: "coordinator".into(),
                call: u32::try_from(call).expect("a test's call number fits"),
                prefix_digest: "p".into(),
                forked_from: None,
                fork_shared: None,
                compaction: false,
                head_change: None,
            },
        )
    }

    fn listed(time_ms: u64, task_ids: &[&str]) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::TasksListed {
                task_ids: task_ids.iter().map(|id| (*id).into()).collect(),
            },
        )
    }

    #[test]
    fn binding_isolation_flags_a_task_list_that_shows_another_bindings_worker() {
        // Goal: once the session serves bob, a TaskList answer bob's coordinator
        // reads lists none of alice's workers, whatever the runtime said it bound.
        // Method: handcrafted traces where the harness launched alice's worker and
        // the runtime never claimed a binding for it; the listing is read with the
        // switch fired before it was asked for, and with it fired in between.
        let [started, schedule] = started_with_switch();
        let trace = [
            started.clone(),
            schedule.clone(),
            launched(10, "a00000001"),
            called(50),
            called(100),
            listed(100, &["a00000001"]),
            switched(200),
            called(250),
            spawn_answered(400, "a00000002"),
            called(400),
            listed(400, &["a00000001", "a00000002"]),
        ];
        only_violation(&binding_isolation(&trace), "serving binding telegram:bob, read a TaskList that lists worker a00000001, spawned while telegram:alice was served");
        // Asked for before the switch and read after it: made under alice, not
        // judged.
        let asked_before = [
            started.clone(),
            schedule.clone(),
            launched(10, "a00000001"),
            called(100),
            switched(200),
            called(400),
            listed(400, &["a00000001"]),
        ];
        assert!(binding_isolation(&asked_before).is_empty());
        // The same, with the reading request sent again after a failed attempt:
        // the retry carries the listing made before the switch.
        let mut read_again = asked_before[..6].to_vec();
        read_again.extend([called_again(500, 400), listed(500, &["a00000001"])]);
        assert!(binding_isolation(&read_again).is_empty());
        // After a restart the host serves alice again, and lists her worker.
        let restarted = [
            started,
            schedule,
            launched(10, "a00000001"),
            called(100),
            switched(200),
            sim(300, SimEvent::HostRestarted { boot: 1 }),
            called(350),
            called(400),
            listed(400, &["a00000001"]),
        ];
        assert!(binding_isolation(&restarted).is_empty());
    }

    #[test]
    fn binding_isolation_flags_a_task_answer_about_another_bindings_worker() {
        // Goal: a TaskGet or SendMessageToWorker answer bob's coordinator reads is
        // about none of alice's workers. Method: the harness launched alice's
        // worker; after the switch, one answer about it and one about bob's own.
        let [started, schedule] = started_with_switch();
        let answered = |time_ms, tool: &str, task_id: &str| {
            sim(
                time_ms,
                SimEvent::TaskAnswered {
                    tool: tool.into(),
                    task_id: task_id.to_owned(),
                },
            )
        };
        let trace = [
            started,
            schedule,
            launched(10, "a00000001"),
            called(100),
            switched(200),
            called(250),
            spawn_answered(400, "a00000002"),
            called(400),
            answered(400, "SendMessageToWorker", "a00000001"),
            answered(400, "TaskGet", "a00000002"),
        ];
        only_violation(&binding_isolation(&trace), "read a SendMessageToWorker answer about worker a00000001, spawned while telegram:alice was served");
    }

    #[test]
    fn a_task_list_must_hold_every_running_task_of_the_binding() {
        // Goal: a listing that leaves out a task the coordinator launched, which
        // was still running when the list was made, fails; one whose envelope came
        // with the request that read the list (it may have ended and left memory)
        // does not. Method: two harness launches under alice, no switch; a list
        // read at the second request that holds only the first.
        let [started, schedule] = started_with_switch();
        let accepted = |time_ms, task_id: &str| {
            sim(
                time_ms,
                SimEvent::EnvelopesAccepted {
                    task_ids: vec![task_id.to_owned()].into(),
                    statuses: vec![coord_runtime::envelope::EnvelopeStatus::Completed].into(),
                    bodies: Box::default(),
                },
            )
        };
        let running = [
            started.clone(),
            schedule.clone(),
            launched(0, "a00000001"),
            launched(0, "a00000002"),
            called(100),
            called(200),
            listed(200, &["a00000001"]),
            accepted(300, "a00000001"),
            accepted(300, "a00000002"),
        ];
        let violations = listings_incomplete(&running);
        only_violation(
            &violations,
            "read a TaskList without task a00000002, which it launched and which was still running under binding telegram:alice",
        );
        assert_eq!(violations[0].invariant, TASK_LIST);
        let ended_before = [
            started,
            schedule,
            launched(0, "a00000001"),
            launched(0, "a00000002"),
            called(100),
            accepted(200, "a00000002"),
            called(200),
            listed(200, &["a00000001"]),
            accepted(300, "a00000001"),
        ];
        assert!(listings_incomplete(&ended_before).is_empty());
    }

    #[test]
    fn binding_isolation_holds_the_runtimes_bindings_to_what_was_served() {
        // Goal: a worker the runtime says it bound to another binding than the one
        // served at its spawn is flagged; one spawned across a switch is not
        // judged. Method: a worker spawned under bob claimed bound to alice, and
        // one whose answer came after a switch that fell between its request and
        // its answer.
        let [started, schedule] = started_with_switch();
        let trace = [
            started,
            schedule,
            called(100),
            switched(200),
            bound(210, "telegram:alice", "a00000001"),
            spawn_answered(400, "a00000001"),
            called(400),
            bound(500, "telegram:alice", "a00000002"),
            spawn_answered(600, "a00000002"),
            called(600),
        ];
        only_violation(&binding_isolation(&trace), "the runtime bound worker a00000002 to telegram:alice, but it was spawned while telegram:bob was served");
    }

    fn refused(time_ms: u64, error: &str) -> TraceEntry {
        sim(
            time_ms,
            SimEvent::ToolFailed {
                role: "coordinator".into(),
                tool: "SendMessageToWorker".into(),
                error: error.to_owned(),
            },
        )
    }

    #[test]
    fn binding_isolation_flags_a_foreign_worker_refused_otherwise_than_a_missing_one() {
        // Goal: the two answers bob gets, for alice's worker and for an id that never
        // existed, must be the same bytes but for the id. Method: one round where
        // both read "unknown_worker", then one where the foreign worker's refusal
        // gives it away.
        let unknown = |id: &str| format!("{{\"error\":\"unknown_worker\",\"worker_id\":\"{id}\"}}");
        let alike = [
            bound(0, "telegram:alice", "a00000001"),
            looked_up(100, "telegram:bob", "a00000001", false),
            looked_up(100, "telegram:bob", "a0zzzzzzz", false),
            refused(100, &unknown("a00000001")),
            refused(100, &unknown("a0zzzzzzz")),
        ];
        assert!(binding_isolation(&alike).is_empty());
        let telling = [
            bound(0, "telegram:alice", "a00000001"),
            looked_up(100, "telegram:bob", "a0zzzzzzz", false),
            refused(100, "{\"error\":\"binding_unresolved\"}"),
            refused(100, &unknown("a0zzzzzzz")),
        ];
        only_violation(
            &binding_isolation(&telling),
            "refusals differ beyond the worker id",
        );
    }
}
