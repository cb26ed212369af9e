//! What a session makes durable, and how a restarted runtime picks it up.
//!
//! When the coordinator host crashes, every task and the coordinator's loop die with
//! the process. What the disk made durable is all a restarted runtime has, so two
//! things are kept under the session root:
//!
//! ```text
//! <session>/records/<taskId>.json   one task record per task (atomic replace)
//! <session>/coordinator.jsonl       the coordinator's conversation (append + fsync)
//! ```
//!
//! **Task records** are small and rewritten whole on every change of status or
//! notification ([`TaskStore::save`], called by the registry under its lock), with
//! [`Disk::replace_atomic`](crate::world::Disk::replace_atomic): temp file, fsync,
//! rename, fsync of the directory. A crash leaves the old record or the new one,
//! never a mix, and a record never needs a compaction pass. One file per task, rather
//! than one journal for all, also keeps a damaged record from hiding any other task,
//! and its file name still says which task it was: an unreadable record is
//! journaled ([`RuntimeEvent::TaskRecordUnreadable`]) and its task recovered as
//! failed, never skipped silently. A resumed worker's record names the task it
//! continues, so a restarted runtime still sends a message to a worker's latest
//! continuation, not to a transcript that lacks the messages since. A record the
//! disk refuses to write is journaled ([`RuntimeEvent::TaskRecordUnsaved`]); the
//! next change of that task rewrites the whole record, so the gap closes at the
//! next successful write.
//!
//! **The coordinator's conversation** is an append-only JSONL log, each line synced
//! before the coordinator goes on: the prompt (written with an atomic replace, so a
//! session starts from a fresh log), every assistant message before its tool calls
//! run, every tool-result message, every injection of notifications, and every
//! amendment of its system prompt (so its cache prefix survives a restart), and
//! every compaction (the summary that replaced the conversation: a reopened log
//! continues from the last one). An
//! injection line names the tasks it delivers, so **delivering an envelope and
//! recording that it was delivered are one synced append**: there is no window
//! between the two for a crash to fall into. The log line is synced before the
//! model call that carries the envelopes, so a model never sees an envelope the log
//! could lose. A log line the disk refuses stops the coordinator
//! ([`SessionError::Conversation`]): a coordinator that goes on without a durable
//! conversation could, after a crash, be told twice about a task or not at all.
//! A crash mid-append leaves a torn last line; it was never synced, so no one relied
//! on it, and reopening the log drops it (rewriting the log atomically without it).
//!
//! **On restart** ([`Session::resume`]) every record is reloaded and settled:
//!
//! - a task that was still `pending` or `running` died with the process: it becomes
//!   `failed` ("the coordinator host restarted") and the coordinator gets exactly one
//!   notification for it (a foreground task's waiter died too, so it gets none, as a
//!   foreground task never does);
//! - a terminal task whose delivery is in the log was notified: nothing more;
//! - a terminal task whose notification was suppressed (a stopped shell): nothing;
//! - a terminal task whose envelope was enqueued but never reached the log died in
//!   the process's memory: it is notified again, once.
//!
//! The notified bit that counts is therefore the log's, and a task is notified at
//! most once per durable conversation and at least once per restart: notify-once
//! holds across crashes. [`Session::resume_coordinator`] then continues the durable
//! conversation: tool calls of the last assistant message that never got a result
//! get an error result (their effect is unknown), and the synthesized notifications
//! arrive at its next turn boundary.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ending::{envelope_status_of, FinishedTask};
use super::{Session, SessionError, SummaryStyle};
use crate::envelope::{Envelope, EnvelopeStatus};
use crate::event::RuntimeEvent;
use crate::ipc::SessionLayout;
use crate::probe::Probe;
use crate::task::{TaskId, TaskRecord, TaskState, TaskStatus, TaskStore, TASK_RECORD_VERSION};
use crate::world::{ContentBlock, Message, Role, SystemBlock, World};

/// Why a task died on restart; the text its envelope carries.
pub const HOST_RESTARTED: &str = "the coordinator host restarted while the task ran";

/// The text of a tool result the coordinator never got because its host went down.
pub const CALL_LOST_ON_RESTART: &str =
    "the coordinator host restarted before this call returned; its effect is unknown";

/// The directory of task records.
pub(crate) fn records_dir(layout: &SessionLayout) -> PathBuf {
    layout.root().join("records")
}

/// The coordinator's conversation log.
pub fn coordinator_log_path(layout: &SessionLayout) -> PathBuf {
    layout.root().join("coordinator.jsonl")
}

/// Writes task records to `<session>/records/<id>.json`.
#[derive(Debug)]
pub(crate) struct DiskTaskStore {
    world: World,
    dir: PathBuf,
}

impl DiskTaskStore {
    pub(crate) fn new(world: &World, dir: PathBuf) -> Self {
        Self {
            world: world.clone(),
            dir,
        }
    }
}

impl TaskStore for DiskTaskStore {
    fn save(&self, task: &TaskState) {
        let bytes = crate::json::to_vec(&TaskRecord::of(task)).expect("task records serialize");
        let path = self.dir.join(format!("{}.json", task.id));
        if let Err(error) = self.world.disk.replace_atomic(&path, &bytes) {
            self.world.journal.record(RuntimeEvent::TaskRecordUnsaved {
                task_id: task.id.clone(),
                error: error.to_string(),
            });
        }
    }
}

/// One line of the coordinator's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum LogLine {
    /// A message appended to the conversation.
    Message { message: Message },
    /// Envelopes injected at a turn boundary: added to the trailing user message, or
    /// as a new user message after an assistant one. Naming the delivered tasks here
    /// is what makes delivery and its record one write.
    Notifications {
        blocks: Vec<ContentBlock>,
        delivered: Vec<Delivered>,
    },
    /// A block added to the main thread's system prompt mid-session
    /// ([`Session::amend_system_prompt`]), written before the first request that
    /// carries it: a restarted coordinator keeps the prompt its model saw.
    SystemAmendment { block: SystemBlock },
    /// The conversation was compacted: `message` (the continuation preamble and the
    /// summary) replaced every message before it. Deliveries and amendments logged
    /// before it still count.
    CompactBoundary {
        trigger: String,
        pre_tokens: u64,
        message: Message,
    },
}

/// A task whose envelope a log line delivered, and the status it reported.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Delivered {
    task_id: String,
    status: EnvelopeStatus,
}

/// The coordinator's conversation as its log kept it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replayed {
    /// The messages, in order.
    pub(crate) messages: Vec<Message>,
    /// Every task whose envelope reached the conversation, with the status it had.
    pub(crate) delivered: BTreeMap<String, TaskStatus>,
    /// Blocks added to the system prompt, in order.
    pub(crate) amendments: Vec<SystemBlock>,
    /// Bytes of complete lines; anything after them is a torn append.
    complete_bytes: usize,
    /// Whether a torn last line followed them.
    torn: bool,
}

/// Adds injected notification blocks to `messages` the way the coordinator does.
pub(crate) fn add_notification_blocks(messages: &mut Vec<Message>, blocks: Vec<ContentBlock>) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message {
            role: Role::User,
            content: blocks,
        }),
    }
}

/// The coordinator's append-only conversation log.
#[derive(Debug)]
pub(crate) struct CoordinatorLog {
    world: World,
    path: PathBuf,
    /// System prompt amendments the log held when it was opened.
    amendments_at_open: usize,
}

impl CoordinatorLog {
    /// Starts a fresh log holding only `first`, replacing any earlier one.
    pub(crate) fn create(
        world: &World,
        layout: &SessionLayout,
        first: &Message,
    ) -> Result<Self, SessionError> {
        let path = coordinator_log_path(layout);
        let line = encode(&LogLine::Message {
            message: first.clone(),
        });
        world
            .disk
            .replace_atomic(&path, &line)
            .map_err(|e| conversation_error(&path, e.to_string()))?;
        Ok(Self {
            world: world.clone(),
            path,
            amendments_at_open: 0,
        })
    }

    /// Reads the log of `layout`: empty if there is none. A torn last line is left
    /// out; any other bad line is an error naming it.
    pub(crate) fn read(world: &World, layout: &SessionLayout) -> Result<Replayed, SessionError> {
        let path = coordinator_log_path(layout);
        let bytes = match world.disk.read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Replayed::default()),
            Err(error) => return Err(conversation_error(&path, error.to_string())),
        };
        let mut replayed = Replayed::default();
        let mut start = 0;
        for (number, raw) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
            let end = start + raw.len();
            let complete = raw.last() == Some(&b'\n');
            let parsed = serde_json::from_slice::<LogLine>(raw.trim_ascii_end());
            match (parsed, complete) {
                (Ok(line), true) => replay(&mut replayed, line),
                // The last write never finished (so it was never synced): drop it.
                (_, false) => {
                    replayed.torn = true;
                    break;
                }
                (Err(error), true) => {
                    return Err(conversation_error(
                        &path,
                        format!("line {}: {error}", number + 1),
                    ))
                }
            }
            start = end;
            replayed.complete_bytes = end;
        }
        Ok(replayed)
    }

    /// Opens the log of `layout` to continue it: reads it and, if its last line is
    /// torn, rewrites it atomically without that line, so later appends follow a
    /// complete line.
    pub(crate) fn reopen(
        world: &World,
        layout: &SessionLayout,
    ) -> Result<(Self, Replayed), SessionError> {
        let replayed = Self::read(world, layout)?;
        let path = coordinator_log_path(layout);
        if replayed.torn {
            Probe::TornLogLineDropped.reach(&*world.journal);
            let bytes = world
                .disk
                .read(&path)
                .map_err(|e| conversation_error(&path, e.to_string()))?;
            world
                .disk
                .replace_atomic(&path, &bytes[..replayed.complete_bytes])
                .map_err(|e| conversation_error(&path, e.to_string()))?;
        }
        let log = Self {
            world: world.clone(),
            path,
            amendments_at_open: replayed.amendments.len(),
        };
        Ok((log, replayed))
    }

    /// How many system prompt amendments the log held when it was opened.
    pub(crate) fn amendments_logged(&self) -> usize {
        self.amendments_at_open
    }

    /// Appends `message` durably.
    pub(crate) fn append_message(&self, message: &Message) -> Result<(), SessionError> {
        self.append(&LogLine::Message {
            message: message.clone(),
        })
    }

    /// Appends an injection of `envelopes`, rendered as `blocks`, durably.
    pub(crate) fn append_notifications(
        &self,
        blocks: &[ContentBlock],
        envelopes: &[Envelope],
    ) -> Result<(), SessionError> {
        self.append(&LogLine::Notifications {
            blocks: blocks.to_vec(),
            delivered: envelopes
                .iter()
                .map(|e| Delivered {
                    task_id: e.task_id.clone(),
                    status: e.status,
                })
                .collect(),
        })
    }

    /// Appends a compaction boundary durably: the conversation became `message`.
    pub(crate) fn append_compact_boundary(
        &self,
        trigger: &str,
        pre_tokens: u64,
        message: &Message,
    ) -> Result<(), SessionError> {
        self.append(&LogLine::CompactBoundary {
            trigger: trigger.to_owned(),
            pre_tokens,
            message: message.clone(),
        })
    }

    /// Appends a system prompt amendment durably.
    pub(crate) fn append_amendment(&self, block: &SystemBlock) -> Result<(), SessionError> {
        self.append(&LogLine::SystemAmendment {
            block: block.clone(),
        })
    }

    fn append(&self, line: &LogLine) -> Result<(), SessionError> {
        let bytes = encode(line);
        let disk = &self.world.disk;
        disk.append(&self.path, &bytes)
            .and_then(|_| disk.sync_file(&self.path))
            .map_err(|e| conversation_error(&self.path, e.to_string()))
    }
}

fn encode(line: &LogLine) -> Vec<u8> {
    let mut bytes = crate::json::to_vec(line).expect("log lines serialize");
    bytes.push(b'\n');
    bytes
}

fn replay(replayed: &mut Replayed, line: LogLine) {
    match line {
        LogLine::Message { message } => replayed.messages.push(message),
        LogLine::Notifications { blocks, delivered } => {
            add_notification_blocks(&mut replayed.messages, blocks);
            for d in delivered {
                replayed
                    .delivered
                    .insert(d.task_id, task_status_of(d.status));
            }
        }
        LogLine::SystemAmendment { block } => replayed.amendments.push(block),
        LogLine::CompactBoundary { message, .. } => replayed.messages = vec![message],
    }
}

fn conversation_error(path: &Path, detail: String) -> SessionError {
    SessionError::Conversation {
        path: path.to_owned(),
        detail,
    }
}

/// The task status an envelope status reports.
fn task_status_of(status: EnvelopeStatus) -> TaskStatus {
    match status {
        EnvelopeStatus::Completed => TaskStatus::Completed,
        EnvelopeStatus::Failed => TaskStatus::Failed,
        EnvelopeStatus::Killed | EnvelopeStatus::Timeout => TaskStatus::Killed,
    }
}

/// Closes tool calls of the conversation's last assistant message that never got a
/// result with an error result, so the conversation is valid again. Returns the
/// message it added, if any.
pub(crate) fn close_unresolved_calls(messages: &[Message]) -> Option<Message> {
    let last = messages.last()?;
    if last.role != Role::Assistant {
        return None;
    }
    let content: Vec<ContentBlock> = last
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: CALL_LOST_ON_RESTART.to_owned(),
                is_error: true,
                cache_control: None,
            }),
            _ => None,
        })
        .collect();
    (!content.is_empty()).then_some(Message {
        role: Role::User,
        content,
    })
}

/// Rebuilds which task continues which from the records that name one
/// ([`TaskRecord::continues`]), so a message to a resumed worker still goes to its
/// latest continuation after a restart. Records are taken in the order their tasks
/// started, so of two continuations of one task (a record from before the chain
/// was followed) the later one wins. A link that would close a cycle, which only a
/// damaged record can name, is left out: following the chain must end.
fn restore_continuations(
    continued_as: &mut HashMap<TaskId, TaskId, foldhash::fast::FixedState>,
    records: &[TaskRecord],
) {
    let mut links: Vec<(&TaskRecord, &TaskId)> = records
        .iter()
        .filter_map(|record| Some((record, record.continues.as_ref()?)))
        .collect();
    links.sort_by(|(a, _), (b, _)| {
        (a.started_at_unix_ms, a.id.as_str()).cmp(&(b.started_at_unix_ms, b.id.as_str()))
    });
    for (record, continued) in links {
        let mut chain = std::iter::successors(Some(&record.id), |id| continued_as.get(*id));
        if !chain.any(|id| id == continued) {
            continued_as.insert(continued.clone(), record.id.clone());
        }
    }
}

/// A record stand-in for a task whose record could not be read: all that is known
/// is its id (the file name), so it is treated as a task that was running.
fn unreadable_record(id: TaskId, layout: &SessionLayout) -> TaskRecord {
    TaskRecord {
        version: TASK_RECORD_VERSION,
        kind: id.kind(),
        output_path: layout.task_output(&id),
        id,
        description: "(record unreadable after restart)".to_owned(),
        tool_use_id: None,
        parent: None,
        background: true,
        status: TaskStatus::Running,
        notification: crate::task::NotificationState::Pending,
        started_at_unix_ms: 0,
        ended_at_unix_ms: None,
        continues: None,
    }
}

impl Session {
    /// Reloads every task record and settles each task (see the module docs).
    /// `delivered` is what the coordinator's log says reached it.
    pub(crate) fn restore_tasks(
        &self,
        delivered: &BTreeMap<String, TaskStatus>,
    ) -> Result<(), SessionError> {
        let world = &self.inner.world;
        let layout = &self.inner.layout;
        let dir = records_dir(layout);
        let records_error = |path: &Path, detail: String| SessionError::TaskRecords {
            path: path.to_owned(),
            detail,
        };
        let entries = match world.disk.list_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(records_error(&dir, error.to_string())),
        };
        let mut records = Vec::new();
        for path in entries {
            // Anything else there is a temp file of an unfinished replace.
            let Some(stem) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".json"))
            else {
                continue;
            };
            // An unreadable disk is not a damaged record: guessing would risk a second
            // ending for a task that already ended, so the restart fails instead.
            let bytes = world
                .disk
                .read(&path)
                .map_err(|e| records_error(&path, e.to_string()))?;
            let parsed = serde_json::from_slice::<TaskRecord>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|record| match record.version {
                    TASK_RECORD_VERSION if record.id.as_str() == stem => Ok(record),
                    TASK_RECORD_VERSION => Err(format!("the record is of task {}", record.id)),
                    other => Err(format!("unknown record version {other}")),
                });
            match parsed {
                Ok(record) => records.push(record),
                Err(detail) => {
                    world.journal.record(RuntimeEvent::TaskRecordUnreadable {
                        path: path.clone(),
                        detail,
                    });
                    if let Ok(id) = TaskId::parse(stem) {
                        records.push(unreadable_record(id, layout));
                    }
                }
            }
        }
        let now_ms = world.clock.unix_ms();
        let mut died = Vec::new();
        let mut renotified = Vec::new();
        let mut state = self.state();
        let tasks = records.len();
        restore_continuations(&mut state.continued_as, &records);
        for record in records {
            let id = record.id.clone();
            let reached = delivered.get(id.as_str()).copied();
            state.registry.restore(record.into_state(reached, now_ms));
            let task = state.registry.get(&id).expect("just restored");
            let (status, notified, background) = (task.status(), task.notified(), task.background);
            if !status.is_terminal() {
                state
                    .registry
                    .transition(&id, TaskStatus::Failed, now_ms)
                    .expect("a live task can fail");
                if background {
                    let build = |task: &TaskState| {
                        restart_envelope(task, EnvelopeStatus::Failed, HOST_RESTARTED.to_owned())
                    };
                    state
                        .registry
                        .notify(&id, build)
                        .expect("a failed task can be notified");
                } else {
                    let _ = state.registry.suppress_notification(&id);
                }
                died.push(id);
            } else if !notified {
                let text = self.output_text(&id, &state);
                let envelope_status = envelope_status_of(status);
                state
                    .registry
                    .notify(&id, |task| restart_envelope(task, envelope_status, text))
                    .expect("a terminal task can be notified");
                renotified.push(id);
            }
        }
        drop(state);
        world.journal.record(RuntimeEvent::SessionRestored {
            tasks,
            died,
            renotified,
        });
        self.inner.changed.notify_waiters();
        Ok(())
    }
}

/// The envelope a restarted runtime sends for a task it reloaded: it no longer
/// knows the task's usage, worktree or summary style beyond a shell's.
fn restart_envelope(task: &TaskState, status: EnvelopeStatus, text: String) -> Envelope {
    let summary_style = match task.kind() {
        crate::task::TaskKind::LocalBash => SummaryStyle::Shell,
        _ => SummaryStyle::Agent,
    };
    FinishedTask {
        status,
        summary_style,
        text,
        usage_at_unix_ms: None,
        worktree: None,
    }
    .envelope(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    #[test]
    fn a_reopened_log_continues_from_its_last_compaction_and_keeps_its_deliveries() {
        // Goal: the messages before the last boundary are what its summary covers;
        // the deliveries and amendments logged before it still count, so a task
        // delivered before a compaction is not notified again after a restart.
        let dir = tempfile::tempdir().unwrap();
        let world = World::real();
        let layout = SessionLayout::new(dir.path());
        let log = CoordinatorLog::create(&world, &layout, &user("plan")).unwrap();
        log.append_message(&Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("launched")],
        })
        .unwrap();
        let envelope = Envelope {
            task_id: "a1".to_owned(),
            tool_use_id: None,
            output_file: None,
            status: EnvelopeStatus::Completed,
            summary: "done".to_owned(),
            note: None,
            result: None,
            usage: None,
            worktree: None,
            extra: BTreeMap::new(),
        };
        log.append_notifications(&[ContentBlock::text("<task-notification/>")], &[envelope])
            .unwrap();
        log.append_amendment(&SystemBlock::text("amended")).unwrap();
        log.append_compact_boundary("auto", 170_000, &user("first summary"))
            .unwrap();
        log.append_message(&user("after the first")).unwrap();
        log.append_compact_boundary("auto", 171_000, &user("second summary"))
            .unwrap();
        log.append_notifications(&[ContentBlock::text("later envelope")], &[])
            .unwrap();

        let (_, replayed) = CoordinatorLog::reopen(&world, &layout).unwrap();
        assert_eq!(
            replayed.messages,
            vec![Message {
                role: Role::User,
                content: vec![
                    ContentBlock::text("second summary"),
                    ContentBlock::text("later envelope"),
                ],
            }]
        );
        assert_eq!(replayed.delivered.get("a1"), Some(&TaskStatus::Completed));
        assert_eq!(replayed.amendments, vec![SystemBlock::text("amended")]);
        let raw =
            String::from_utf8(world.disk.read(&coordinator_log_path(&layout)).unwrap()).unwrap();
        let boundary = raw
            .lines()
            .find(|line| line.contains("compact_boundary"))
            .unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(boundary).unwrap()["pre_tokens"],
            170_000
        );
    }
}
