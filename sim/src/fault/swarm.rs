//! Swarm mode: the seed picks which fault kinds are on, then draws a concrete fault
//! schedule from them, in the same form explicit faults take.
//!
//! As in FoundationDB's BUGGIFY and TigerBeetle's VOPR, turning whole kinds off per
//! seed matters as much as the faults themselves: a run where only disk faults are
//! on explores deeper disk-fault interleavings than one where every kind competes.

use rand_chacha::rand_core::RngCore;

use super::catalogue::{
    ApiError, CrashPoint, DiskEffect, DiskOpClass, Fault, FaultKind, LinkTarget, PartitionPhase,
};
use crate::scenario::{DiskSetting, LeadActionKind, Scenario};

/// Virtual time within which swarm places timed faults.
const TIMED_FAULT_HORIZON_MS: u64 = 120_000;
/// Longest a drawn slow lock holder keeps its lock: past the stale threshold, so
/// contenders also get to break it.
const LOCK_HOLD_MS_MAX: u64 = 15_000;
/// Largest drawn oversize message, in multiples of the runtime's message limit.
/// The draw starts one byte over the limit, where an off-by-one in the check
/// would let it through; a larger message tests nothing the limit does not.
const OVERSIZE_LIMITS_MAX: u64 = 4;
/// Bindings a drawn binding switch serves: never one a scenario is likely to start
/// with, so the switch changes the scope.
const SWITCHED_BINDINGS: [&str; 2] = ["telegram:mallory", "slack:intruder"];
/// The directory a drawn symlinked worktree directory takes the name of when no
/// worker's script writes below a directory of its own.
const LINK_DIR_FALLBACK: &str = "vendor";
/// Paths disk faults aim at.
const DISK_PATHS: [&str; 4] = [
    "*",
    "/session/tasks/*",
    "/session/teams/*",
    "/session/*.jsonl",
];

/// A uniform draw from `0..bound`, or 0 when the bound is 0.
fn below(rng: &mut dyn RngCore, bound: u64) -> u64 {
    if bound == 0 {
        0
    } else {
        crate::world::below(rng, bound)
    }
}

fn pick<'a, T>(rng: &mut dyn RngCore, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        None
    } else {
        Some(&items[below(rng, items.len() as u64) as usize])
    }
}

/// The kinds on for this seed: each kind the scenario allows and `disk` can carry
/// out, with probability 1/2, and at least one when any is allowed.
pub fn choose_kinds(
    scenario: &Scenario,
    disk: DiskSetting,
    rng: &mut dyn RngCore,
) -> Vec<FaultKind> {
    let allowed: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|kind| scenario.swarm.kinds.contains(kind))
        .filter(|kind| applicable(scenario, *kind))
        .filter(|kind| disk != DiskSetting::Real || kind.real_disk_refusal().is_none())
        .collect();
    let mut on: Vec<FaultKind> = allowed
        .iter()
        .copied()
        .filter(|_| rng.next_u64() & 1 == 1)
        .collect();
    if on.is_empty() {
        on.extend(pick(rng, &allowed).copied());
    }
    on
}

/// Whether `kind` can be placed in `scenario` at all.
fn applicable(scenario: &Scenario, kind: FaultKind) -> bool {
    match kind {
        FaultKind::ClobberedWrite | FaultKind::ClobberedScratch => scenario.workers.len() >= 2,
        FaultKind::WorkerCrash
        | FaultKind::DuplicateNotify
        | FaultKind::ForgedEnvelope
        | FaultKind::DelayedNotification
        | FaultKind::MaliciousSlug
        | FaultKind::OversizeMessage
        | FaultKind::SymlinkAtOutput => !scenario.workers.is_empty(),
        FaultKind::RemotePartition => launches(scenario, "remote") > 0,
        FaultKind::SymlinkedWorktreeDir => launches(scenario, "worktree") > 0,
        FaultKind::ForgedPermission => !refused_permissions(scenario).is_empty(),
        FaultKind::DuplicateMail => !shutdowns_asked(scenario).is_empty(),
        _ => true,
    }
}

/// How many Agent calls in the scenario's scripts launch a worker at `isolation`
/// (`remote`, `worktree`).
fn launches(scenario: &Scenario, isolation: &str) -> u64 {
    std::iter::once(&scenario.coordinator)
        .chain(&scenario.workers)
        .flat_map(|script| script.turns.iter())
        .flat_map(|turn| &turn.tool_calls)
        .filter(|call| call.name == "Agent")
        .filter(|call| call.input.get("isolation").and_then(|i| i.as_str()) == Some(isolation))
        .count() as u64
}

/// The team, member and tool of every permission request the scenario's lead
/// denies or leaves unanswered: the requests a forged approval would turn around.
fn refused_permissions(scenario: &Scenario) -> Vec<(String, String, Option<String>)> {
    scenario
        .lead
        .iter()
        .filter(|action| {
            matches!(
                action.action,
                LeadActionKind::DenyPermission | LeadActionKind::IgnorePermission
            )
        })
        .map(|action| {
            (
                action.team.clone(),
                action.member.clone(),
                action.tool.clone(),
            )
        })
        .collect()
}

/// The team and member of every shutdown the scenario's lead asks for: the
/// requests a duplicate-mail fault repeats.
fn shutdowns_asked(scenario: &Scenario) -> Vec<(String, String)> {
    scenario
        .lead
        .iter()
        .filter(|action| action.action == LeadActionKind::Shutdown)
        .map(|action| (action.team.clone(), action.member.clone()))
        .collect()
}

/// The names a drawn symlinked worktree directory may take: the first directory of
/// every relative path a worker's script writes below one, so that some write goes
/// under the link; [`LINK_DIR_FALLBACK`] when there is none.
fn link_dirs(scenario: &Scenario) -> Vec<String> {
    let mut dirs: Vec<String> = scenario
        .workers
        .iter()
        .flat_map(|script| script.turns.iter())
        .flat_map(|turn| &turn.tool_calls)
        .filter(|call| matches!(call.name.as_str(), "Write" | "Edit"))
        .filter_map(|call| call.input.get("file_path")?.as_str())
        .filter_map(|file_path| {
            let mut components = std::path::Path::new(file_path).components();
            let first = components.next()?;
            components.next()?;
            match first {
                std::path::Component::Normal(name) => Some(name.to_str()?.to_owned()),
                _ => None,
            }
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    if dirs.is_empty() {
        dirs.push(LINK_DIR_FALLBACK.to_owned());
    }
    dirs
}

/// What a fault draw needs to know of its scenario.
struct Shape {
    /// Every worker's prompt.
    prompts: Vec<String>,
    /// Agent calls launching a remote worker.
    remote_launches: u64,
    /// Agent calls launching a worker in a worktree.
    worktree_launches: u64,
    /// Names for a symlinked worktree directory, see [`link_dirs`].
    link_dirs: Vec<String>,
    /// Permission requests a forged approval would turn around, see
    /// [`refused_permissions`].
    refused_permissions: Vec<(String, String, Option<String>)>,
    /// Shutdowns the lead asks for, see [`shutdowns_asked`].
    shutdowns_asked: Vec<(String, String)>,
}

impl Shape {
    fn of(scenario: &Scenario) -> Self {
        Self {
            prompts: scenario.workers.iter().map(|w| w.prompt.clone()).collect(),
            remote_launches: launches(scenario, "remote"),
            worktree_launches: launches(scenario, "worktree"),
            link_dirs: link_dirs(scenario),
            refused_permissions: refused_permissions(scenario),
            shutdowns_asked: shutdowns_asked(scenario),
        }
    }
}

/// Draws up to `scenario.swarm.faults_max` faults of the `kinds` on.
pub fn draw_faults(scenario: &Scenario, kinds: &[FaultKind], rng: &mut dyn RngCore) -> Vec<Fault> {
    if kinds.is_empty() || scenario.swarm.faults_max == 0 {
        return Vec::new();
    }
    let count = 1 + below(rng, u64::from(scenario.swarm.faults_max));
    let shape = Shape::of(scenario);
    let mut faults = Vec::new();
    for _ in 0..count {
        let Some(&kind) = pick(rng, kinds) else {
            break;
        };
        if let Some(fault) = draw_one(kind, &shape, rng) {
            faults.push(fault);
        }
    }
    faults
}

fn draw_one(kind: FaultKind, shape: &Shape, rng: &mut dyn RngCore) -> Option<Fault> {
    let prompts = &shape.prompts;
    let remote_launches = shape.remote_launches;
    let worker = |rng: &mut dyn RngCore| pick(rng, prompts).cloned();
    Some(match kind {
        FaultKind::WorkerCrash => Fault::WorkerCrash {
            worker: worker(rng)?,
            at: if rng.next_u64() & 1 == 0 {
                CrashPoint::AfterOutput
            } else {
                CrashPoint::ModelCall {
                    call: 1 + below(rng, 2) as u32,
                }
            },
        },
        FaultKind::CoordinatorCrash => {
            Fault::coordinator_crash_at_ms(1 + below(rng, TIMED_FAULT_HORIZON_MS))
        }
        FaultKind::DuplicateNotify => Fault::DuplicateNotify {
            worker: worker(rng)?,
        },
        FaultKind::ForgedEnvelope => Fault::ForgedEnvelope {
            worker: worker(rng)?,
        },
        FaultKind::DelayedNotification => Fault::DelayedNotification {
            worker: worker(rng)?,
            delay_ms: 1_000 + below(rng, 60_000),
        },
        FaultKind::StaleLock => Fault::StaleLock {
            inbox: "team-lead".to_owned(),
            returns: 0,
            raced: false,
        },
        FaultKind::CorruptInbox => Fault::CorruptInbox {
            inbox: "team-lead".to_owned(),
        },
        FaultKind::MailboxProducers => Fault::MailboxProducers {
            inbox: "team-lead".to_owned(),
            producers: 2 + below(rng, 7) as u32,
        },
        FaultKind::ClobberedWrite | FaultKind::ClobberedScratch => {
            let first = worker(rng)?;
            let others: Vec<String> = prompts.iter().filter(|p| **p != first).cloned().collect();
            let second = pick(rng, &others)?.clone();
            if kind == FaultKind::ClobberedWrite {
                Fault::ClobberedWrite {
                    writers: [first, second],
                    path: "shared/notes.md".to_owned(),
                }
            } else {
                Fault::ClobberedScratch {
                    writers: [first, second],
                    key: "findings".to_owned(),
                }
            }
        }
        FaultKind::Disk => Fault::Disk {
            op: *pick(
                rng,
                &[
                    DiskOpClass::Write,
                    DiskOpClass::Append,
                    DiskOpClass::Replace,
                    DiskOpClass::Create,
                    DiskOpClass::Read,
                    DiskOpClass::Sync,
                ],
            )?,
            path: (*pick(rng, &DISK_PATHS)?).to_owned(),
            nth: 1 + below(rng, 30),
            effect: *pick(
                rng,
                &[DiskEffect::Eio, DiskEffect::Enospc, DiskEffect::Torn],
            )?,
        },
        FaultKind::ModelApi => Fault::ModelApi {
            agent: if rng.next_u64() % 3 == 0 {
                super::book::COORDINATOR_LABEL.to_owned()
            } else {
                worker(rng)?
            },
            call: 1 + below(rng, 3) as u32,
            error: *pick(
                rng,
                &[
                    ApiError::RateLimited,
                    ApiError::Overloaded,
                    ApiError::Timeout,
                    ApiError::Truncated,
                ],
            )?,
        },
        FaultKind::SymlinkAtOutput => Fault::SymlinkAtOutput {
            spawn: 1 + below(rng, prompts.len() as u64) as u32,
            after_check: false,
        },
        FaultKind::SymlinkedWorktreeDir => {
            let worktree = 1 + below(rng, shape.worktree_launches) as u32;
            let dir = pick(rng, &shape.link_dirs)?.clone();
            // Another worktree exists to point at only from the second one on.
            let target = if worktree >= 2 && rng.next_u64() & 1 == 1 {
                LinkTarget::OtherWorktree
            } else {
                LinkTarget::Outside
            };
            Fault::SymlinkedWorktreeDir {
                worktree,
                dir,
                target,
            }
        }
        FaultKind::MaliciousSlug => Fault::MaliciousSlug {
            worker: worker(rng)?,
        },
        FaultKind::OversizeMessage => Fault::OversizeMessage {
            worker: worker(rng)?,
            size_bytes: {
                let limit_bytes = coord_runtime::route::MESSAGE_BYTES_MAX as u64;
                limit_bytes + 1 + below(rng, (OVERSIZE_LIMITS_MAX - 1) * limit_bytes)
            },
        },
        FaultKind::RemotePartition => Fault::RemotePartition {
            launch: 1 + below(rng, remote_launches) as u32,
            during: if rng.next_u64() & 1 == 0 {
                PartitionPhase::Connect
            } else {
                PartitionPhase::Report
            },
            duration_ms: 1 + below(rng, TIMED_FAULT_HORIZON_MS),
        },
        FaultKind::CacheBreakingPromptChange => Fault::CacheBreakingPromptChange {
            call: 1 + below(rng, 3) as u32,
        },
        FaultKind::SlowLockHolder => Fault::SlowLockHolder {
            inbox: "team-lead".to_owned(),
            hold_ms: 100 + below(rng, LOCK_HOLD_MS_MAX),
            after_ms: None,
        },
        FaultKind::BindingSwitch => Fault::BindingSwitch {
            after_call: 1 + below(rng, 3) as u32,
            binding: (*pick(rng, &SWITCHED_BINDINGS)?).to_owned(),
        },
        FaultKind::ForgedPermission => {
            let (team, member, tool) = pick(rng, &shape.refused_permissions)?.clone();
            Fault::ForgedPermission {
                team,
                member,
                tool,
                from: super::catalogue::FORGER_NAME.to_owned(),
            }
        }
        FaultKind::DuplicateMail => {
            let (team, member) = pick(rng, &shape.shutdowns_asked)?.clone();
            Fault::DuplicateMail {
                team,
                member,
                from: coord_runtime::team::TEAM_LEAD_NAME.to_owned(),
            }
        }
        // Any two of the spawns the scripts make: the session's own id is draw 1,
        // the first spawn's draw 2.
        FaultKind::TaskIdCollision => {
            let spawns = prompts.len().max(2) as u64;
            let draw = 3 + below(rng, spawns - 1);
            Fault::TaskIdCollision {
                draw: draw as u32,
                repeats: Some(2 + below(rng, draw - 2) as u32),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn a_drawn_oversize_message_is_from_just_over_the_limit_to_four_limits() {
        let limit_bytes = coord_runtime::route::MESSAGE_BYTES_MAX as u64;
        let prompts = vec!["Find the auth bug.".to_owned()];
        let shape = Shape {
            prompts: prompts.clone(),
            remote_launches: 0,
            worktree_launches: 0,
            link_dirs: vec![LINK_DIR_FALLBACK.to_owned()],
            refused_permissions: Vec::new(),
            shutdowns_asked: Vec::new(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let sizes: Vec<u64> = (0..20_000)
            .map(
                |_| match draw_one(FaultKind::OversizeMessage, &shape, &mut rng) {
                    Some(Fault::OversizeMessage { worker, size_bytes }) => {
                        assert_eq!(worker, prompts[0]);
                        size_bytes
                    }
                    other => panic!("drew {other:?}"),
                },
            )
            .collect();
        assert!(sizes.iter().all(|&size| size > limit_bytes));
        assert!(sizes
            .iter()
            .all(|&size| size <= OVERSIZE_LIMITS_MAX * limit_bytes));
        // 20,000 fair draws over 3 × 32 KiB sizes miss the 64 at either end with
        // probability e^-13: the draw covers the whole range.
        assert!(sizes.iter().any(|&size| size <= limit_bytes + 64));
        assert!(sizes
            .iter()
            .any(|&size| size > OVERSIZE_LIMITS_MAX * limit_bytes - 64));
    }

    #[test]
    fn a_drawn_symlinked_worktree_dir_names_a_made_worktree_and_a_scripted_dir() {
        // Goal: every drawn link can be planted and met: its worktree is one the
        // scenario launches, it points at another worktree only when one was made
        // before it, and it takes the name of a directory the scripts write under.
        let shape = Shape {
            prompts: vec!["Implement the lexer.".to_owned()],
            remote_launches: 0,
            worktree_launches: 3,
            link_dirs: vec!["src".to_owned(), "vendor".to_owned()],
            refused_permissions: Vec::new(),
            shutdowns_asked: Vec::new(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut targets = std::collections::BTreeSet::new();
        for _ in 0..2_000 {
            match draw_one(FaultKind::SymlinkedWorktreeDir, &shape, &mut rng) {
                Some(Fault::SymlinkedWorktreeDir {
                    worktree,
                    dir,
                    target,
                }) => {
                    assert!((1..=3).contains(&worktree), "{worktree}");
                    assert!(shape.link_dirs.contains(&dir), "{dir}");
                    if target == LinkTarget::OtherWorktree {
                        assert!(worktree >= 2);
                    }
                    targets.insert(format!("{target:?}"));
                }
                other => panic!("drew {other:?}"),
            }
        }
        assert_eq!(targets.len(), 2, "both targets are drawn: {targets:?}");
    }

    #[test]
    fn team_faults_are_drawn_for_what_the_lead_refuses_and_asks() {
        // Goal: a forged permission answer turns around a request the lead denies
        // or ignores, for that request's tool, and a repeated message is a
        // shutdown the lead asks for; a scenario whose lead does neither draws
        // neither kind. Method: shapes with and without such actions.
        let request = (
            "crew".to_owned(),
            "tidier".to_owned(),
            Some("Write".to_owned()),
        );
        let shutdown = ("crew".to_owned(), "archivist".to_owned());
        let shape = Shape {
            prompts: vec!["Tidy the crontab.".to_owned()],
            remote_launches: 0,
            worktree_launches: 0,
            link_dirs: vec![LINK_DIR_FALLBACK.to_owned()],
            refused_permissions: vec![request.clone()],
            shutdowns_asked: vec![shutdown.clone()],
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert_eq!(
            draw_one(FaultKind::ForgedPermission, &shape, &mut rng),
            Some(Fault::ForgedPermission {
                team: request.0,
                member: request.1,
                tool: request.2,
                from: "intruder".to_owned(),
            })
        );
        assert_eq!(
            draw_one(FaultKind::DuplicateMail, &shape, &mut rng),
            Some(Fault::DuplicateMail {
                team: shutdown.0,
                member: shutdown.1,
                from: "team-lead".to_owned(),
            })
        );
        let bare = Shape {
            refused_permissions: Vec::new(),
            shutdowns_asked: Vec::new(),
            ..shape
        };
        assert_eq!(draw_one(FaultKind::ForgedPermission, &bare, &mut rng), None);
        assert_eq!(draw_one(FaultKind::DuplicateMail, &bare, &mut rng), None);
    }

    #[test]
    fn link_dirs_are_the_first_directories_of_relative_written_paths() {
        // Goal: a drawn link lies where a script writes. Method: a scenario whose
        // workers write relative paths below directories, a bare file name and an
        // absolute path.
        let scenario: Scenario = toml::from_str(
            r#"
name = "t"
profile = "hardened"
[coordinator]
prompt = "p"
[[coordinator.turns]]
text = "done"
[[workers]]
prompt = "w"
[[workers.turns]]
tool_calls = [
  { name = "Write", input = { file_path = "src/lib.rs", content = "x" } },
  { name = "Edit", input = { file_path = "docs/a/b.md", old_string = "a", new_string = "b" } },
  { name = "Write", input = { file_path = "top.md", content = "x" } },
  { name = "Write", input = { file_path = "/work/abs/x.md", content = "x" } },
  { name = "Read", input = { file_path = "reads/x.md" } },
]
"#,
        )
        .unwrap();
        assert_eq!(link_dirs(&scenario), ["docs", "src"]);
    }
}
