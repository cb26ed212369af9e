//! What the Agent and background `Bash` answers agents' models received say of
//! their tasks, judged against the calls that asked for them:
//!
//! - `task-ids` (PROTOCOL.md §1): every task id an answer gives is its type's
//!   prefix and 8 characters from `0-9a-z`. The type is what the call asked for:
//!   a remote worker `r`, a teammate (a call naming a team) `t`, any other agent
//!   `a`, a background shell `b`. Ids are unique per session: no two answers give
//!   one id.
//! - `inline-result` (§2): a worker's result returned inline is the text its
//!   model said, and ends with the continuation trailer (its id and status)
//!   unless its definition is one-shot: Explore and Plan, as in Claude Code,
//!   whose one-shot agents cannot be continued.
//!
//! Both judge the answers as the model API carried them, so a runtime that gives
//! a teammate an agent's id, or a one-shot result a trailer, fails even though
//! its own records agree with each other.

use std::collections::BTreeMap;

use super::Violation;
use crate::trace::{SimEvent, SpawnAnswerSaid, TraceEntry, TraceEvent};

/// The name a task id of the wrong shape or type fails under.
pub const TASK_IDS: &str = "task-ids";
/// The name an inline result that is not the worker's, or has the wrong trailer,
/// fails under.
pub const INLINE_RESULT: &str = "inline-result";

/// The name a launch answer whose fixed fields break PROTOCOL.md §2 fails under.
pub const LAUNCH_ANSWER: &str = "launch-answer";

/// The `status` word of every async launch's answer (PROTOCOL.md §2): the
/// simulator's own copy, so a runtime that renames it is judged by it.
const ASYNC_LAUNCH_STATUS: &str = "async_launched";

/// The built-in definitions whose workers cannot be continued, so their inline
/// results carry no trailer.
const ONE_SHOT_DEFINITIONS: [&str; 2] = ["Explore", "Plan"];
/// PROTOCOL.md §1's id prefix of a local agent, a remote worker, a teammate and a
/// background shell: the simulator's own copy of the table, so that a runtime
/// that gives a type the wrong letter is judged by it.
const AGENT_PREFIX: char = 'a';
const REMOTE_PREFIX: char = 'r';
const TEAMMATE_PREFIX: char = 't';
const SHELL_PREFIX: char = 'b';

/// Whether `task_id` names a background shell.
pub(crate) fn is_shell_id(task_id: &str) -> bool {
    task_id.starts_with(SHELL_PREFIX)
}

/// Whether `task_id` names a remote worker.
pub(crate) fn is_remote_id(task_id: &str) -> bool {
    task_id.starts_with(REMOTE_PREFIX)
}

/// Characters of a canonical id body.
pub(crate) const ID_ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyz";
/// Length of a canonical id body.
pub(crate) const ID_BODY_LEN: usize = 8;
/// The statuses a terminal task can have (§1).
const TERMINAL_STATUSES: [&str; 3] = ["completed", "failed", "killed"];

/// A failure for each answer whose task id or inline result breaks §1 or §2.
pub fn judge_spawn_answers(trace: &[TraceEntry]) -> Vec<Violation> {
    let mut failures = Vec::new();
    // Each id an answer gave, with when and to whom.
    let mut given: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
    for entry in trace {
        let TraceEvent::Sim(event) = &entry.typed else {
            continue;
        };
        match event {
            SimEvent::SpawnAnswered {
                agent,
                subagent_type,
                background,
                said,
                ..
            } => {
                let at = format!("at {} ms {agent}'s Agent call", entry.time_ms);
                if let Some(task_id) = &said.task_id {
                    failures.extend(given_again(&mut given, task_id, entry.time_ms, agent));
                    let prefix = agent_prefix(said);
                    if let Some(wrong) = id_wrong(task_id, prefix) {
                        failures.push(Violation {
                            invariant: TASK_IDS,
                            detail: format!(
                                "{at} was answered with task id {task_id:?}, {wrong}, where PROTOCOL.md §1 gives {} {prefix:?} and 8 characters from 0-9a-z",
                                agent_kind(said)
                            ),
                        });
                    }
                }
                if *background {
                    failures.extend(launch_wrong(said).map(|wrong| Violation {
                        invariant: LAUNCH_ANSWER,
                        detail: format!("{at} was answered with a launch {wrong}"),
                    }));
                } else {
                    let definition = subagent_type
                        .as_ref()
                        .map_or("general-purpose", |n| n.as_str());
                    failures.extend(inline_wrong(definition, said).map(|wrong| Violation {
                        invariant: INLINE_RESULT,
                        detail: format!("{at} ({definition}) was answered inline with {wrong}"),
                    }));
                }
            }
            SimEvent::ShellLaunched { agent, task_id, .. } => {
                failures.extend(given_again(&mut given, task_id, entry.time_ms, agent));
                if let Some(wrong) = id_wrong(task_id, SHELL_PREFIX) {
                    failures.push(Violation {
                        invariant: TASK_IDS,
                        detail: format!(
                            "at {} ms {agent}'s background Bash call was answered with task id {task_id:?}, {wrong}, where PROTOCOL.md §1 gives a shell \"b\" and 8 characters from 0-9a-z",
                            entry.time_ms
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    failures
}

/// Notes that an answer to `agent` at `at_ms` gave `task_id`; a failure if an
/// earlier answer gave it too.
fn given_again<'a>(
    given: &mut BTreeMap<&'a str, (u64, &'a str)>,
    task_id: &'a str,
    at_ms: u64,
    agent: &'a str,
) -> Option<Violation> {
    let (earlier_ms, earlier_agent) = given.insert(task_id, (at_ms, agent))?;
    Some(Violation {
        invariant: TASK_IDS,
        detail: format!(
            "at {at_ms} ms {agent} was answered with task id {task_id:?}, which {earlier_agent} was given for another task at {earlier_ms} ms: PROTOCOL.md §1's ids are unique per session"
        ),
    })
}

/// The id prefix of the agent task the call asked for.
fn agent_prefix(said: &SpawnAnswerSaid) -> char {
    match (said.asked_isolation.as_deref(), said.asked_team) {
        (Some("remote"), _) => REMOTE_PREFIX,
        (_, true) => TEAMMATE_PREFIX,
        _ => AGENT_PREFIX,
    }
}

fn agent_kind(said: &SpawnAnswerSaid) -> &'static str {
    match agent_prefix(said) {
        REMOTE_PREFIX => "a remote worker",
        TEAMMATE_PREFIX => "a teammate",
        _ => "an agent",
    }
}

/// What is wrong with `task_id` as a canonical id with `prefix`, if anything.
fn id_wrong(task_id: &str, prefix: char) -> Option<String> {
    let Some(body) = task_id.strip_prefix(prefix) else {
        return Some(format!(
            "whose prefix is {:?}",
            task_id.chars().next().unwrap_or(' ')
        ));
    };
    if body.len() != ID_BODY_LEN {
        return Some(format!(
            "whose body has {} characters",
            body.chars().count()
        ));
    }
    body.chars()
        .find(|c| !ID_ALPHABET.contains(*c))
        .map(|c| format!("whose body holds {c:?}"))
}

/// What is wrong with a launch answer's fixed fields, if anything: §2 gives
/// `{status: "async_launched", agentId, description, outputFile}`, the
/// description being the call's own.
fn launch_wrong(said: &SpawnAnswerSaid) -> Option<String> {
    if said.launch_status.as_deref() != Some(ASYNC_LAUNCH_STATUS) {
        return Some(format!(
            "whose status is {:?}, where PROTOCOL.md §2 gives {ASYNC_LAUNCH_STATUS:?}",
            said.launch_status
        ));
    }
    (said.launch_description_kept == Some(false))
        .then(|| "whose description is not the one the call gave".to_owned())
}

/// What is wrong with an inline answer of a `definition` worker, if anything.
fn inline_wrong(definition: &str, said: &SpawnAnswerSaid) -> Option<String> {
    let one_shot = ONE_SHOT_DEFINITIONS.contains(&definition);
    match (&said.trailer_status, one_shot) {
        (Some(_), true) => {
            return Some(
                "a continuation trailer, where a one-shot worker cannot be continued".to_owned(),
            )
        }
        (None, false) => {
            return Some(
                "no continuation trailer (its id and status), where PROTOCOL.md §2 gives one to every worker but a one-shot one's".to_owned(),
            )
        }
        (Some(status), false) if !TERMINAL_STATUSES.contains(&status.as_str()) => {
            return Some(format!(
                "a trailer whose status {status:?} is no terminal status"
            ))
        }
        _ => {}
    }
    // A completed worker's result is its own last words; a failed or stopped one's
    // is the runtime's (an error, or the output so far).
    let completed = said.trailer_status.as_deref() == Some("completed");
    (completed && said.result_said == Some(false))
        .then(|| "a result its worker's model never said, for a completed worker".to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::sim_entry as sim;
    use super::*;
    use crate::trace::Name;

    fn answered(
        subagent_type: Option<&str>,
        background: bool,
        said: SpawnAnswerSaid,
    ) -> TraceEntry {
        sim(
            10,
            SimEvent::SpawnAnswered {
                agent: Name::new("main"),
                asked_background: None,
                subagent_type: subagent_type.map(Name::new),
                background,
                said: Box::new(said),
            },
        )
    }

    fn launch(task_id: &str, isolation: Option<&str>, team: bool) -> TraceEntry {
        answered(
            None,
            true,
            SpawnAnswerSaid {
                task_id: Some(task_id.to_owned()),
                asked_isolation: isolation.map(str::to_owned),
                asked_team: team,
                launch_status: Some("async_launched".to_owned()),
                launch_description_kept: Some(true),
                ..SpawnAnswerSaid::default()
            },
        )
    }

    fn inline(subagent_type: Option<&str>, trailer: Option<&str>, said: bool) -> TraceEntry {
        answered(
            subagent_type,
            false,
            SpawnAnswerSaid {
                // An id of its own per status: `a00failed`, `acomplete`.
                task_id: trailer.map(|status| format!("a{:0>8}", &status[..status.len().min(8)])),
                trailer_status: trailer.map(str::to_owned),
                result_said: Some(said),
                ..SpawnAnswerSaid::default()
            },
        )
    }

    fn names(trace: &[TraceEntry]) -> Vec<&'static str> {
        judge_spawn_answers(trace)
            .into_iter()
            .map(|failure| failure.invariant)
            .collect()
    }

    #[test]
    fn a_launchs_id_has_the_prefix_of_the_task_the_call_asked_for() {
        assert!(names(&[
            launch("a0123abcd", None, false),
            launch("r0123abcd", Some("remote"), false),
            launch("r0123abce", Some("remote"), true),
            launch("t0123abcd", None, true),
            launch("a0123abcf", Some("worktree"), false),
        ])
        .is_empty());
        for wrong in [
            launch("a0123abcd", None, true),
            launch("a0123abcd", Some("remote"), false),
            launch("t0123abcd", None, false),
            launch("a0123abc", None, false),
            launch("a0123abcde", None, false),
            launch("a0123ABCD", None, false),
        ] {
            assert_eq!(names(&[wrong]), vec![TASK_IDS]);
        }
    }

    #[test]
    fn no_two_answers_give_one_id() {
        // Goal: PROTOCOL.md §1's ids are unique per session, judged on the answers:
        // a second launch, or a shell, given an id an earlier answer gave fails,
        // naming both; distinct ids pass.
        assert!(names(&[
            launch("a0123abcd", None, false),
            launch("a0123abce", None, false)
        ])
        .is_empty());
        let again = judge_spawn_answers(&[
            launch("a0123abcd", None, false),
            launch("a0123abcd", None, false),
        ]);
        assert_eq!(again.len(), 1, "{again:?}");
        assert!(
            again[0]
                .detail
                .contains("task id \"a0123abcd\", which main was given for another task at 10 ms"),
            "{}",
            again[0].detail
        );
        let shell = sim(
            20,
            SimEvent::ShellLaunched {
                agent: Name::new("main"),
                task_id: "b0123abcd".to_owned(),
                command: Name::new("cargo test"),
            },
        );
        assert_eq!(names(&[shell.clone(), shell]), vec![TASK_IDS]);
    }

    #[test]
    fn a_shells_id_is_b_and_eight_characters() {
        let shell = |task_id: &str| {
            sim(
                10,
                SimEvent::ShellLaunched {
                    agent: Name::new("main"),
                    task_id: task_id.to_owned(),
                    command: Name::new("cargo test"),
                },
            )
        };
        assert!(names(&[shell("b0123abcd")]).is_empty());
        assert_eq!(names(&[shell("a0123abcd")]), vec![TASK_IDS]);
        assert_eq!(names(&[shell("b0123abc")]), vec![TASK_IDS]);
    }

    #[test]
    fn an_inline_result_has_a_trailer_unless_its_definition_is_one_shot() {
        assert!(names(&[
            inline(None, Some("completed"), true),
            inline(Some("verification"), Some("failed"), false),
            inline(Some("Explore"), None, true),
            inline(Some("Plan"), None, false),
        ])
        .is_empty());
        assert_eq!(names(&[inline(None, None, true)]), vec![INLINE_RESULT]);
        assert_eq!(
            names(&[inline(Some("Explore"), Some("completed"), true)]),
            vec![INLINE_RESULT]
        );
        assert_eq!(
            names(&[inline(None, Some("running"), true)]),
            vec![INLINE_RESULT]
        );
    }

    #[test]
    fn a_completed_workers_inline_result_is_what_its_model_said() {
        assert_eq!(
            names(&[inline(None, Some("completed"), false)]),
            vec![INLINE_RESULT]
        );
        assert!(names(&[inline(None, Some("killed"), false)]).is_empty());
    }

    #[test]
    fn a_launch_answers_async_launched_with_the_calls_description() {
        // Goal: §2's launch answer is judged word for word: another status word,
        // none at all, or a description that is not the call's fails.
        let with = |status: Option<&str>, kept: bool| {
            answered(
                None,
                true,
                SpawnAnswerSaid {
                    task_id: Some("a0123abcd".to_owned()),
                    launch_status: status.map(str::to_owned),
                    launch_description_kept: Some(kept),
                    ..SpawnAnswerSaid::default()
                },
            )
        };
        assert!(names(&[with(Some("async_launched"), true)]).is_empty());
        for wrong in [
            with(Some("launched"), true),
            with(None, true),
            with(Some("async_launched"), false),
        ] {
            assert_eq!(names(&[wrong]), vec![LAUNCH_ANSWER]);
        }
    }
}
