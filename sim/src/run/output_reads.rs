//! What TaskOutput answers gave of a task's output file, held to the bytes the disk
//! holds once the run is over.
//!
//! PROTOCOL.md §4: a task's output file is read incrementally, from the offset the
//! last read reached, at most the read limit (8 MiB) at a time: an answer that
//! gives more is wrong. The file only ever grows,
//! so the chunks a task's TaskOutput answers gave, in the order the models received
//! them, must be the file's bytes one after another from its start: a read that
//! repeats bytes, skips some, or gives others than the file holds is a
//! [`SimEvent::TaskOutputWrong`]. Once an answer said the task was over (and the
//! read was not cut at exactly the limit), the chunks so far are the whole file; and an
//! answer that says so cannot also say its wait timed out: a blocking read returns
//! as the task ends.
//!
//! A blocking read waits for the task's end or its timeout, the call's `timeout_ms`
//! or 30 s without one (Claude Code's TaskOutput default, docs/profiles.md): an
//! answer that says its wait timed out must reach the model no sooner than that
//! after the model made the call, and, when it was the only call of its round (so
//! nothing else held the round open), no later either.
//!
//! Not judged: a task read twice in one tool round (the runtime runs a round's
//! calls side by side, in no order the models see), a run whose host crashed (a
//! read may have given bytes the crash took back), and an answer that says the
//! file could not be read (the offset stays where it was).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use coord_runtime::session::OUTPUT_UNREADABLE_OPEN;
use coord_runtime::world::Disk;

use super::output_files::{OUTPUT_SUFFIX, TASKS_DIR};
use crate::trace::{SimEvent, Trace};

/// How long a blocking TaskOutput call without `timeout_ms` waits: Claude Code's
/// default, as docs/profiles.md states it for every profile.
const BLOCKING_WAIT_DEFAULT_MS: u64 = 30_000;

/// The most one TaskOutput answer gives of an output file: PROTOCOL.md §4's read
/// limit, 8 MiB (the documented number, not the runtime's setting).
const READ_BYTES_MAX: u64 = 8 * 1024 * 1024;

/// One TaskOutput answer a model received.
#[derive(Debug)]
struct Read {
    tool_use_id: String,
    /// The model's request that carried the answer: its agent and call.
    round: (String, u32),
    output: String,
    /// Whether the answer said the task was over.
    over: bool,
    /// Whether the answer said its wait timed out.
    timed_out: bool,
    /// For a blocking call, how long it was to wait and how long it took.
    wait: Option<BlockingWait>,
}

/// A blocking TaskOutput call's wait, as the model saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockingWait {
    /// How long the call asked to wait at most: its `timeout_ms`, or the default.
    pub limit_ms: u64,
    /// From the model's response that made the call to the request that carried
    /// its answer, in ms of virtual time; `None` if the call's time is unknown.
    pub waited_ms: Option<u64>,
    /// Whether it was the only call of its round.
    pub alone: bool,
}

impl BlockingWait {
    /// The wait of a call with `input`, made at `called_ms` and answered at
    /// `received_ms`; `None` for a call that does not block.
    pub fn of(
        input: &serde_json::Value,
        called_ms: Option<u64>,
        received_ms: u64,
        alone: bool,
    ) -> Option<Self> {
        if input.get("block").and_then(|block| block.as_bool()) != Some(true) {
            return None;
        }
        let limit_ms = input
            .get("timeout_ms")
            .and_then(|timeout| timeout.as_u64())
            .unwrap_or(BLOCKING_WAIT_DEFAULT_MS);
        Some(Self {
            limit_ms,
            waited_ms: called_ms.map(|called_ms| received_ms.saturating_sub(called_ms)),
            alone,
        })
    }
}

/// Every TaskOutput answer of a run, by task id, in the order the models received
/// them, and when each TaskOutput call was made. Shared by the taps of a run's
/// boots.
#[derive(Debug, Clone, Default)]
pub struct OutputReads(Arc<Mutex<ReadLog>>);

#[derive(Debug, Default)]
struct ReadLog {
    by_task: BTreeMap<String, Vec<Read>>,
    /// When the model's response that made each TaskOutput call reached the
    /// runtime, by tool-use id.
    called_ms: BTreeMap<String, u64>,
}

impl OutputReads {
    /// Notes that the TaskOutput call `tool_use_id` reached the runtime at
    /// `called_ms`.
    pub fn called(&self, tool_use_id: &str, called_ms: u64) {
        let mut log = self.0.lock().expect("output reads poisoned");
        log.called_ms.insert(tool_use_id.to_owned(), called_ms);
    }

    /// When the TaskOutput call `tool_use_id` reached the runtime, if noted.
    pub fn called_ms(&self, tool_use_id: &str) -> Option<u64> {
        let log = self.0.lock().expect("output reads poisoned");
        log.called_ms.get(tool_use_id).copied()
    }

    /// Notes the answer `answer` to the TaskOutput call `tool_use_id` about
    /// `task_id`, received with `agent`'s call `call`, and the call's `wait` if it
    /// blocked. An answer seen again (a retried or restored request) is noted once.
    pub fn note(
        &self,
        task_id: &str,
        tool_use_id: &str,
        (agent, call): (&str, u32),
        answer: &str,
        wait: Option<BlockingWait>,
    ) {
        let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(answer) else {
            return;
        };
        let Some(output) = fields.get("output").and_then(|output| output.as_str()) else {
            return;
        };
        let over = fields
            .get("status")
            .and_then(|status| status.as_str())
            .is_some_and(|status| matches!(status, "completed" | "failed" | "killed"));
        let timed_out = fields.get("timed_out").and_then(|t| t.as_bool()) == Some(true);
        let mut log = self.0.lock().expect("output reads poisoned");
        let reads = log.by_task.entry(task_id.to_owned()).or_default();
        if reads.iter().any(|read| read.tool_use_id == tool_use_id) {
            return;
        }
        reads.push(Read {
            tool_use_id: tool_use_id.to_owned(),
            round: (agent.to_owned(), call),
            output: output.to_owned(),
            over,
            timed_out,
            wait,
        });
    }

    /// Holds every task's reads to its output file on `disk` and logs each
    /// mismatch. `crashed`: whether a host crashed during the run.
    pub fn witness(&self, disk: &dyn Disk, crashed: bool, trace: &Trace) {
        if crashed {
            return;
        }
        let log = self.0.lock().expect("output reads poisoned");
        for (task_id, reads) in log.by_task.iter() {
            let mut rounds: Vec<&(String, u32)> = reads.iter().map(|read| &read.round).collect();
            rounds.sort();
            if rounds.windows(2).any(|pair| pair[0] == pair[1]) {
                continue;
            }
            let path = PathBuf::from(TASKS_DIR).join(format!("{task_id}{OUTPUT_SUFFIX}"));
            let Ok(file) = disk.read(&path) else {
                continue;
            };
            if let Some(detail) = judge(&file, reads) {
                trace.push(
                    "disk",
                    SimEvent::TaskOutputWrong {
                        task_id: task_id.clone(),
                        detail,
                    },
                );
            }
        }
    }
}

/// What is wrong with `reads` of a file holding `file`, if anything.
fn judge(file: &[u8], reads: &[Read]) -> Option<String> {
    let mut offset = 0usize;
    for (number, read) in reads.iter().enumerate() {
        // The wait ends as the task does: one that ran out its time and found the
        // task over missed the task's end.
        if read.over && read.timed_out {
            return Some(format!(
                "TaskOutput answer {} waited out its timeout, and said the task was over",
                number + 1
            ));
        }
        if let Some(detail) = read.wait.and_then(|wait| wait_unfit(wait, read.timed_out)) {
            return Some(format!("TaskOutput answer {} {detail}", number + 1));
        }
        if read.output.starts_with(OUTPUT_UNREADABLE_OPEN) {
            continue;
        }
        let chunk = read.output.as_bytes();
        if chunk.len() as u64 > READ_BYTES_MAX {
            return Some(format!(
                "TaskOutput answer {} gave {} bytes, over the read limit of {READ_BYTES_MAX}",
                number + 1,
                chunk.len()
            ));
        }
        let expected = file.get(offset..offset + chunk.len());
        if expected != Some(chunk) {
            return Some(format!(
                "TaskOutput answer {} gave {} bytes that are not the output file's bytes from offset {offset} (the file holds {} bytes)",
                number + 1,
                chunk.len(),
                file.len()
            ));
        }
        offset += chunk.len();
        let cut_at_limit = chunk.len() as u64 == READ_BYTES_MAX;
        if read.over && !read.timed_out && !cut_at_limit && offset != file.len() {
            return Some(format!(
                "TaskOutput answer {} said the task was over, and the answers so far gave {offset} of the output file's {} bytes",
                number + 1,
                file.len()
            ));
        }
    }
    None
}

/// What is wrong with a blocking read's `wait`, given whether its answer said the
/// wait timed out: one that timed out waited its whole limit, and, alone in its
/// round, no longer.
fn wait_unfit(wait: BlockingWait, timed_out: bool) -> Option<String> {
    let waited_ms = wait.waited_ms?;
    if !timed_out {
        return None;
    }
    if waited_ms < wait.limit_ms {
        return Some(format!(
            "said its wait timed out {waited_ms} ms after the call, before its {} ms limit",
            wait.limit_ms
        ));
    }
    if wait.alone && waited_ms > wait.limit_ms {
        return Some(format!(
            "said its wait timed out {waited_ms} ms after the call, past its {} ms limit, with no other call in its round",
            wait.limit_ms
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(call: u32, output: &str, over: bool) -> Read {
        Read {
            tool_use_id: format!("toolu_{call}"),
            round: ("main".to_owned(), call),
            output: output.to_owned(),
            over,
            timed_out: false,
            wait: None,
        }
    }

    #[test]
    fn reads_must_follow_one_another_through_the_file() {
        // Goal: chunks that continue the file from where the last one stopped pass;
        // a chunk read again from the start, or a last answer that leaves bytes
        // unread, does not. Method: a 12-byte file read in two chunks, then the
        // same with the offset never advanced, then with the tail never read.
        let file = b"hello world\n";
        let good = [read(1, "hello ", false), read(2, "world\n", true)];
        assert_eq!(judge(file, &good), None);
        let repeated = [read(1, "hello ", false), read(2, "hello world\n", true)];
        let detail = judge(file, &repeated).expect("a repeated read is flagged");
        assert!(detail.contains("answer 2 gave 12 bytes"), "{detail}");
        assert!(detail.contains("from offset 6"), "{detail}");
        let short = [read(1, "hello ", true)];
        let detail = judge(file, &short).expect("a short last read is flagged");
        assert!(
            detail.contains("gave 6 of the output file's 12 bytes"),
            "{detail}"
        );
        let unreadable = [
            read(
                1,
                &format!("{OUTPUT_UNREADABLE_OPEN}0 bytes: injected]"),
                false,
            ),
            read(2, "hello world\n", true),
        ];
        assert_eq!(judge(file, &unreadable), None);
        let waited_out = [Read {
            timed_out: true,
            ..read(1, "hello world\n", true)
        }];
        let detail = judge(file, &waited_out).expect("a missed end is flagged");
        assert!(detail.contains("waited out its timeout"), "{detail}");
    }

    #[test]
    fn a_read_gives_at_most_the_documented_limit_and_stops_short_only_at_the_end() {
        // Goal: one answer never gives more than PROTOCOL.md's 8 MiB, and an answer
        // that says the task is over gives the rest of the file unless it was cut at
        // exactly 8 MiB. Method: a file 3 bytes over the limit, read whole at once,
        // in a chunk of the limit and its rest, and in a chunk short of the limit
        // that says the task is over.
        let limit = usize::try_from(READ_BYTES_MAX).unwrap();
        let text = "x".repeat(limit + 3);
        let file = text.as_bytes();
        let whole = judge(file, &[read(1, &text, true)]).expect("an oversize read is flagged");
        assert!(
            whole.contains(&format!(
                "gave {} bytes, over the read limit of {limit}",
                limit + 3
            )),
            "{whole}"
        );
        let in_two = [read(1, &text[..limit], true), read(2, &text[limit..], true)];
        assert_eq!(judge(file, &in_two), None);
        let short = [read(1, &text[..limit - 1], true)];
        let detail = judge(file, &short).expect("a read cut short of the limit is flagged");
        assert!(detail.contains("said the task was over"), "{detail}");
    }

    #[test]
    fn a_blocking_read_that_timed_out_waited_its_whole_limit_and_no_more() {
        // Goal: a timed-out blocking read is held to its limit from both sides (the
        // upper only when nothing else shared its round); a read whose call time is
        // unknown, or that did not time out, is not judged. Method: one timed-out
        // answer with each wait.
        let file = b"partial\n";
        let timed_out = |waited_ms: Option<u64>, alone: bool| {
            let read = Read {
                timed_out: true,
                wait: Some(BlockingWait {
                    limit_ms: 30_000,
                    waited_ms,
                    alone,
                }),
                ..read(1, "partial\n", false)
            };
            judge(file, &[read])
        };
        assert_eq!(timed_out(Some(30_000), true), None);
        let early = timed_out(Some(3_000), true).expect("an early timeout is flagged");
        assert!(
            early.contains("timed out 3000 ms after the call, before its 30000 ms limit"),
            "{early}"
        );
        let late = timed_out(Some(300_000), true).expect("a late timeout is flagged");
        assert!(late.contains("past its 30000 ms limit"), "{late}");
        assert_eq!(timed_out(Some(300_000), false), None);
        assert_eq!(timed_out(None, true), None);
        let blocking = serde_json::json!({"task_id": "a1", "block": true});
        assert_eq!(
            BlockingWait::of(&blocking, Some(1_000), 31_000, true),
            Some(BlockingWait {
                limit_ms: 30_000,
                waited_ms: Some(30_000),
                alone: true
            })
        );
        let given = serde_json::json!({"task_id": "a1", "block": true, "timeout_ms": 5000});
        assert_eq!(
            BlockingWait::of(&given, None, 9_000, false).map(|wait| wait.limit_ms),
            Some(5_000)
        );
        let polling = serde_json::json!({"task_id": "a1", "block": false});
        assert_eq!(BlockingWait::of(&polling, Some(0), 0, true), None);
    }
}
