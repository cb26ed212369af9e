//! The model tap: what each agent's model received, recorded into the trace before
//! the call goes on to the simulated model.

use crate::label_map::{LabelMap, LabelSet};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::digest::Fnv1a64;
use coord_runtime::profile::Profile;
use coord_runtime::route::RequestId;
use coord_runtime::session::CONTINUATION_PREAMBLE;
use coord_runtime::team::{TeamMessage, TEAM_LEAD_NAME};
use coord_runtime::world::{
    BoxFuture, Clock, ContentBlock, Disk, Message, Model, ModelError, ModelRequest, ModelResponse,
    Role,
};

use super::compaction_witness::CompactionWitness;
use super::envelope_witness::{body_seen, spawn_answer_said, WorkerTexts};
use super::head_witness::HeadWitness;
use super::idle_witness::idle_in_team_files;
use super::mail_stamps::StampedMail;
use super::output_reads::{BlockingWait, OutputReads};
use super::progress_witness::{shared_labels, ProgressWitness};
use super::retry_witness::{RetryRecord, RetryWitness};
use super::stop_witness::StopWitness;
use super::surface_witness::SurfaceWitness;
use super::LeadMail;
use crate::check::{api_refusal, SystemRule};
use crate::economics::{CostMeter, ForkOrigin, RequestHead};
use crate::fault::{agent_label, FaultBook, COORDINATOR_LABEL};
use crate::model::{
    scripted_tool_use_position, ConversationView, EnvelopeMemo, LaunchInput, PolicyReply,
    SimulatedModel, WAITING_TEXT,
};
use crate::trace::{
    message_digest_hex, MailStampEarly, MessageWitness, Name, SimEvent, TaskProgressSeen, Trace,
};

/// What the tap remembers of one agent's conversation between calls.
#[derive(Debug, Default)]
struct Seen {
    envelopes: usize,
    /// TaskStop results received without an error.
    stops: usize,
    /// Script steps whose response reached the runtime: one past the last step
    /// played, waiting turns excluded.
    steps_played: usize,
    /// Background launches the agent's model was told of, as the stop witness
    /// has them.
    launches_noted: usize,
    /// Agent calls whose answers the trace has (`spawn_answered`).
    spawn_answers_noted: usize,
    /// Background shells whose launches the trace has (`shell_launched`).
    shells_noted: usize,
    /// The user texts after the prompt in the agent's latest request (queued and
    /// mailbox messages, resumes): what its model received, as the API saw it.
    received_texts: Vec<String>,
    /// The compaction summaries the agent's conversation went on from, by the
    /// digest of the continuation message's text (`summary_digest`): each one its
    /// requests started from, as the API saw them.
    summaries_continued_from: Vec<u64>,
    /// A request already showed the summary behind history (`summary_behind_history`).
    summary_behind_history_noted: bool,
}

/// A SendMessage the runtime accepted, as its sender's model saw the call and
/// its result.
#[derive(Debug, Clone)]
struct SentMessage {
    from: String,
    to: String,
    /// The `message` as sent: a string, or a structured message's object.
    body: serde_json::Value,
    /// When the sender's model was told it was accepted, or made it (an approval
    /// that ends its sender), in ms of virtual time.
    sent_ms: u64,
    /// The id a `shutdown_request` to an agent was given, as SendMessage's answer
    /// named it to the sender's model: the request reaches its recipient in its
    /// delivered form, which carries the id.
    request_id: Option<RequestId>,
}

impl MessageLog {
    /// Whether `agent`'s conversation starts from a message sent to a teammate by
    /// name: a teammate resumed by that message after its transcript was lost
    /// (a failed write ended it before its prompt was kept) is still a teammate.
    /// A structured message starts it as its delivered JSON, compared as JSON.
    fn resumes_teammate(&self, agent: &str) -> bool {
        let structured = || serde_json::from_str::<serde_json::Value>(agent).ok();
        self.sent.iter().any(|sent| {
            self.team_of.contains_key(&sent.to.to_ascii_lowercase())
                && match sent.body.as_str() {
                    Some(text) => text == agent,
                    None => structured().is_some_and(|value| value == sent.body),
                }
        })
    }
}

impl SentMessage {
    /// The message as text: a string as written, an object as its JSON.
    fn text(&self) -> String {
        match &self.body {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }

    /// Whether mail `text` in an inbox is this message.
    fn is_in(&self, text: &str) -> bool {
        body_is_in(&self.body, text)
    }

    /// Whether this is a `shutdown_response` that approves: it ends its sender with
    /// the tool round that sends it (PROTOCOL.md §5), so its sender's model never
    /// sees the call's answer.
    fn is_approval(&self) -> bool {
        self.body.get("type").and_then(|t| t.as_str()) == Some("shutdown_response")
            && self.body.get("approve") == Some(&serde_json::Value::Bool(true))
    }
}

/// A scripted call's answer as the calling agent's model received it.
#[derive(Debug, Clone)]
pub struct ReceivedAnswer {
    /// Whether it was an error.
    pub is_error: bool,
    /// Its text.
    pub text: String,
    /// When the model received it: the virtual time of the request carrying it.
    pub received_ms: u64,
}

/// What the tap saw of the messages agents sent one another, and of the answers
/// scripted calls got.
#[derive(Debug, Default)]
struct MessageLog {
    /// Agent label by the name its Agent call gave it.
    names: BTreeMap<String, String>,
    /// The team of each member launched into one, by its name in lower case (names
    /// are matched case-insensitively): whom a broadcast goes to.
    team_of: BTreeMap<String, String>,
    /// The calls behind `sent`, by sender label and tool-use id: a request sent
    /// again (a retried call, a restarted coordinator's durable conversation)
    /// shows the same answered calls again, and each is one message.
    sent_calls: BTreeSet<(String, String)>,
    /// Agent label (its prompt) by the task id its launch result gave it: a
    /// SendMessage or SendMessageToWorker may address a worker by its id.
    task_prompts: BTreeMap<String, String>,
    /// Every launch an agent's model was told of, by task id, as its conversation
    /// showed it: kept through the launcher's compactions, whose summaries drop
    /// them.
    launch_inputs: BTreeMap<String, LaunchInput>,
    sent: Vec<SentMessage>,
    /// Each scripted call's answer, by agent label, script step and index in the
    /// turn: whether it was an error, its text, and when the model received it.
    answers: BTreeMap<(String, usize, usize), ReceivedAnswer>,
    /// Tasks the coordinator's model was told it launched in the background.
    launched: BTreeSet<String>,
    /// Tasks with an envelope that reached the coordinator's model.
    notified: BTreeSet<String>,
    /// The prompts of the agents launched into a team (teammates), whose tool
    /// surface has SendMessage.
    teammates: LabelSet<String>,
    /// The prompts of the agents a model asked to launch into a team, known from
    /// the call before its launch runs (and so before the teammate's first request,
    /// whose offered tools are judged); the launch may yet be refused.
    team_launches_asked: LabelSet<String>,
    /// Approving shutdown responses to the team lead that a model made and whose
    /// answer it has not seen, by agent label and tool-use id: the sender ends with
    /// that round, so an approval never answered counts as sent.
    approvals: BTreeMap<(String, String), SentMessage>,
    /// The prompts of the agents launched with `isolation: "remote"`: their loops
    /// run on the remote host, which compacts by its own rules, not this session's.
    remote_prompts: BTreeSet<String>,
    /// The `subagent_type` a model asked for each prompt it launched (empty when
    /// it named none), known before the worker's first request (whose offered
    /// tools a read-only definition narrows); `None` once one prompt was asked
    /// for with two types.
    asked_types: BTreeMap<String, Option<String>>,
    /// Every SendMessage call a model made, as the response carrying it reached
    /// the runtime: the earliest moment its message could have been stamped.
    sends_called: Vec<SendCalled>,
}

/// A SendMessage call in a model's response, and when the response was answered.
#[derive(Debug, Clone)]
struct SendCalled {
    /// The agent whose model called it.
    from: String,
    /// The `to` it named: a member's name, or `*` for a broadcast.
    to: String,
    /// The `message` as called.
    body: serde_json::Value,
    /// When the response reached the runtime, in ms of virtual time.
    called_ms: u64,
}

/// What a tap remembers, shareable by the taps of successive boots: a restarted
/// coordinator continues its durable conversation, and the envelopes an earlier
/// boot's model already saw in it must not count as accepted again.
#[derive(Debug, Clone, Default)]
pub struct TapMemory(
    Arc<Mutex<LabelMap<String, Seen>>>,
    Arc<Mutex<MessageLog>>,
    /// Whether some scripted call expects an answer: only then are answers kept.
    Arc<std::sync::atomic::AtomicBool>,
    /// What the workers' models said, for the envelopes that report them.
    Arc<Mutex<WorkerTexts>>,
    /// Who launched whom, and how calls ended once a task was stopped.
    StopWitness,
    /// Each agent's latest request and how its attempts failed.
    RetryRecord,
    /// What TaskOutput answers gave of each task's output file.
    OutputReads,
    /// Each agent's cache keys; the coordinator's carry over a restart.
    HeadWitness,
    /// The workers' rounds, in a run whose coordinator asks TaskGet.
    Arc<Mutex<Option<ProgressWitness>>>,
);

impl TapMemory {
    /// How many steps of `agent`'s script reached the runtime, across boots.
    pub fn steps_played(&self, agent: &str) -> usize {
        let seen = self.0.lock().expect("tap memory poisoned");
        seen.get(agent).map_or(0, |seen| seen.steps_played)
    }

    /// Notes that the response to `agent`'s step `step` reached the runtime.
    fn played(&self, agent: &str, step: usize) {
        let mut seen = self.0.lock().expect("tap memory poisoned");
        let seen = seen.entry(agent.to_owned()).or_default();
        seen.steps_played = seen.steps_played.max(step + 1);
    }

    /// Notes that the embedding harness launched `task_id` with `prompt` for the
    /// coordinator (a scenario's `launches`): the task is the coordinator's, as if
    /// its model had launched it, so a stop of it cascades from there.
    pub fn harness_launched(&self, task_id: &str, prompt: &str) {
        self.1
            .lock()
            .expect("message log poisoned")
            .task_prompts
            .entry(task_id.to_owned())
            .or_insert_with(|| prompt.to_owned());
        self.4.note_launches(
            COORDINATOR_LABEL,
            std::iter::once(&task_id.to_owned()),
            |_| Some(prompt.to_owned()),
        );
    }

    /// The closing `retries_abandoned` event, if some call was left failed with
    /// retries to spare.
    pub fn retries_abandoned(&self) -> Option<SimEvent> {
        let calls = self.5.abandoned(|label| {
            if label == COORDINATOR_LABEL {
                return vec![COORDINATOR_LABEL.to_owned()];
            }
            let log = self.1.lock().expect("message log poisoned");
            log.task_prompts
                .iter()
                .filter(|(_, prompt)| prompt.as_str() == label)
                .map(|(task_id, _)| task_id.clone())
                .collect()
        });
        (!calls.is_empty()).then_some(SimEvent::RetriesAbandoned { calls })
    }

    /// Each worker whose conversation went on from a compaction's summary: its
    /// label, the tasks launched with its prompt (a resume is one more), and the
    /// digests of the summaries, in the order its requests started from them.
    pub fn summaries_continued_from(&self) -> Vec<(String, Vec<String>, Vec<u64>)> {
        let seen = self.0.lock().expect("tap memory poisoned");
        let log = self.1.lock().expect("message log poisoned");
        let mut continued: Vec<(String, Vec<String>, Vec<u64>)> = seen
            .iter()
            .filter(|(_, seen)| !seen.summaries_continued_from.is_empty())
            .map(|(agent, seen)| {
                let task_ids = log
                    .task_prompts
                    .iter()
                    .filter(|(_, prompt)| *prompt == agent)
                    .map(|(task_id, _)| task_id.clone())
                    .collect();
                (
                    agent.clone(),
                    task_ids,
                    seen.summaries_continued_from.clone(),
                )
            })
            .collect();
        // The map is hashed: its order must not reach the trace.
        continued.sort();
        continued
    }

    /// What TaskOutput answers gave of each task's output file.
    pub fn output_reads(&self) -> &OutputReads {
        &self.6
    }

    /// The closing `stops_witnessed` event, if the coordinator stopped a task.
    pub fn stops_witnessed(&self) -> Option<SimEvent> {
        self.4.closing_event()
    }

    /// Keeps the answers scripted calls get, for a run whose scripts expect some.
    pub fn keep_answers(&self) {
        self.2.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Keeps the workers' rounds, for a run whose coordinator asks TaskGet: each
    /// answer's progress is judged against them.
    pub fn keep_rounds(&self) {
        *self.8.lock().expect("progress witness poisoned") = Some(ProgressWitness::default());
    }

    /// The answer `agent`'s model received for the `index`th call of its script
    /// step `step`; `None` if it never received one.
    pub fn answer_of(&self, agent: &str, step: usize, index: usize) -> Option<ReceivedAnswer> {
        let log = self.1.lock().expect("message log poisoned");
        log.answers.get(&(agent.to_owned(), step, index)).cloned()
    }

    /// Notes a SendMessage call with `input` in a response to `agent`'s model
    /// answered at `called_ms`.
    fn send_called(&self, agent: &str, input: &serde_json::Value, called_ms: u64) {
        let (Some(to), Some(body)) = (
            input.get("to").and_then(|to| to.as_str()),
            input.get("message"),
        ) else {
            return;
        };
        let mut log = self.1.lock().expect("message log poisoned");
        log.sends_called.push(SendCalled {
            from: agent.to_owned(),
            to: to.to_owned(),
            body: body.clone(),
            called_ms,
        });
    }

    /// The names the coordinator's model (a team's lead) asked SendMessage to send
    /// a shutdown request to, whether or not it saw the call's answer.
    pub(super) fn lead_shutdown_requests(&self) -> Vec<String> {
        let log = self.1.lock().expect("message log poisoned");
        log.sends_called
            .iter()
            .filter(|call| {
                call.from == COORDINATOR_LABEL
                    && call.body.get("type").and_then(|kind| kind.as_str())
                        == Some("shutdown_request")
            })
            .map(|call| call.to.clone())
            .collect()
    }

    /// Whether some model response called SendMessage to `owner` (or to everyone):
    /// the messages of any other inbox are not a model's to judge, and that inbox
    /// need not be read.
    pub(super) fn sent_to(&self, owner: &str) -> bool {
        self.1
            .lock()
            .expect("message log poisoned")
            .sends_called
            .iter()
            .any(|call| call.to == BROADCAST || call.to.eq_ignore_ascii_case(owner))
    }

    /// The messages of `mail` stamped before the first SendMessage call that asked
    /// to send them reached the runtime, or stamped with no time at all. Only plain
    /// messages are judged: the runtime writes structured ones of its own (a
    /// shutdown response for an idle member), which may equal one a model sends
    /// later. A message no model call asked for is not judged either.
    pub(super) fn mail_stamped_early(&self, mail: &[StampedMail]) -> Vec<MailStampEarly> {
        let log = self.1.lock().expect("message log poisoned");
        mail.iter()
            .filter_map(|mail| {
                let called_ms = log
                    .sends_called
                    .iter()
                    .filter(|call| {
                        (call.to == BROADCAST || call.to.eq_ignore_ascii_case(&mail.owner))
                            && call.body.as_str() == Some(mail.text.as_str())
                    })
                    .map(|call| call.called_ms)
                    .min()?;
                let early = mail
                    .stamped_ms()
                    .is_none_or(|stamped_ms| stamped_ms < i128::from(called_ms));
                early.then(|| MailStampEarly {
                    owner: mail.owner.clone(),
                    from: mail.from.clone(),
                    message_digest: message_digest_hex(&mail.from, &mail.text),
                    stamp: mail.stamp.clone(),
                    called_ms,
                })
            })
            .collect()
    }

    /// The tasks the coordinator's model was told it launched in the background for
    /// which no envelope ever reached it, in id order.
    pub fn launches_unanswered(&self) -> Vec<String> {
        let log = self.1.lock().expect("message log poisoned");
        log.launched.difference(&log.notified).cloned().collect()
    }

    /// Notes that the lead's harness redirected the teammate named `member` at
    /// `sent_ms` with `message`: a message from the coordinator that must reach
    /// the teammate's model once (invariant 4).
    pub fn note_redirect(&self, member: &str, message: &str, sent_ms: u64) {
        let mut log = self.1.lock().expect("message log poisoned");
        log.sent.push(SentMessage {
            from: COORDINATOR_LABEL.to_owned(),
            to: member.to_owned(),
            body: serde_json::Value::String(message.to_owned()),
            sent_ms,
            request_id: None,
        });
    }

    /// Every accepted message whose recipient is known, with how many times the
    /// recipient received it: once when delivered, never twice. An agent known by
    /// name or by task id receives plain text in the texts its model received
    /// (the continued worker, for SendMessageToWorker), matched as
    /// written or XML-escaped (the two ways a runtime may wrap it). The team lead
    /// receives plain and structured messages in its inbox, `lead_mail` (the texts
    /// of every lead's inbox as the disk holds them once the run is over); an
    /// approving shutdown response counts as accepted even unanswered, since it
    /// ends its sender before the answer can reach its model. A broadcast is
    /// looked for at every other member of its sender's team (a member's, in its
    /// lead's inbox too), and its sender receiving it is witnessed too
    /// (`to_sender`).
    pub fn messages_witnessed(&self, lead_mail: &[LeadMail]) -> Vec<MessageWitness> {
        let seen = self.0.lock().expect("tap memory poisoned");
        let log = self.1.lock().expect("message log poisoned");
        // Where each message delivered to an agent's model first appears in the
        // texts it received (text index, then byte offset: one boundary may hand
        // over several messages in one text), for the order check below.
        let mut first_received: Vec<Option<(usize, usize)>> = Vec::new();
        let mut witnesses: Vec<MessageWitness> = log
            .sent
            .iter()
            .chain(log.approvals.values())
            .filter_map(|message| {
                let text = message.text();
                if message.to.eq_ignore_ascii_case(TEAM_LEAD_NAME) {
                    first_received.push(None);
                    return Some(received_by_lead(&log, lead_mail, message, &text));
                }
                // A structured message reaches an agent in its delivered form (a
                // request gets its id), not as sent: only a shutdown request whose
                // id its sender was told is looked for, in that form.
                let delivered = match message.body.is_string() {
                    true => None,
                    false => Some(delivered_shutdown_request(message)?),
                };
                let recipient = log
                    .names
                    .get(&message.to)
                    .or_else(|| log.task_prompts.get(&message.to))?;
                let looked_for = delivered.as_deref().unwrap_or(&text);
                let (mut witness, first) = received_by(&seen, message, looked_for, recipient);
                // An idle recipient agrees to a request its model never reads, and
                // one that ends first never reads it: only its order and its
                // copies are judged.
                witness.may_miss |= delivered.is_some();
                first_received.push(first);
                Some(witness)
            })
            .collect();
        for message in log.sent.iter().filter(|m| m.to == BROADCAST) {
            let text = message.text();
            let recipients = broadcast_recipients(&log, &message.from);
            // A member's broadcast goes to its lead too, which reads it from its
            // inbox on the disk.
            if message.from != COORDINATOR_LABEL && !recipients.is_empty() {
                first_received.push(None);
                witnesses.push(received_by_lead(&log, lead_mail, message, &text));
            }
            for (recipient, member_may_miss) in recipients {
                let (mut witness, first) = received_by(&seen, message, &text, recipient);
                witness.may_miss = member_may_miss;
                first_received.push(first);
                witnesses.push(witness);
            }
            let echoed = if message.from == COORDINATOR_LABEL {
                lead_mail
                    .iter()
                    .filter(|mail| message.is_in(&mail.text))
                    .count()
            } else {
                received_by(&seen, message, &text, &message.from)
                    .0
                    .received_count as usize
            };
            if echoed > 0 {
                first_received.push(None);
                witnesses.push(MessageWitness {
                    from: message.from.clone(),
                    to: message.from.clone(),
                    message_digest: message_digest_hex(&message.from, &text),
                    received_count: echoed as u64,
                    overtaken_by: None,
                    may_miss: false,
                    sent_ms: None,
                    to_sender: true,
                });
            }
        }
        // Messages from one sender to one recipient are witnessed in the order they
        // were accepted, and must be received in that order (PROTOCOL.md §5).
        for later in 0..witnesses.len() {
            for earlier in 0..later {
                let (a, b) = (&witnesses[earlier], &witnesses[later]);
                let same_pair = a.from == b.from && a.to == b.to;
                let overtaken = matches!(
                    (first_received[earlier], first_received[later]),
                    (Some(at_earlier), Some(at_later)) if at_later < at_earlier
                );
                if same_pair && overtaken && witnesses[earlier].overtaken_by.is_none() {
                    witnesses[earlier].overtaken_by = Some(witnesses[later].message_digest.clone());
                }
            }
        }
        witnesses
    }
}

/// The delivered form of `message`, a `shutdown_request` sent to an agent, as its
/// recipient's model reads it: the request with the id SendMessage gave it.
/// `None` for any other structured message, or when the id is not known.
fn delivered_shutdown_request(message: &SentMessage) -> Option<String> {
    let request_id = message.request_id.clone()?;
    let reason = message
        .body
        .get("reason")
        .and_then(|reason| reason.as_str())
        .map(str::to_owned);
    Some(TeamMessage::ShutdownRequest { request_id, reason }.to_text())
}

/// The first shutdown request id in `answer`, a tool's answer: SendMessage names
/// the id it gave a shutdown request when it accepts one.
fn shutdown_request_id_in(answer: &str) -> Option<RequestId> {
    answer
        .match_indices("shutdown-")
        .filter_map(|(at, _)| answer[at..].split_whitespace().next())
        .find_map(|word| RequestId::parse(word).ok())
}

/// The address of a broadcast to the sender's whole team (PROTOCOL.md §5).
const BROADCAST: &str = "*";

/// How many times the team lead's inbox on the disk (`lead_mail`) holds `message`
/// (`text`) from its sender. Mail is matched to its sender by the name the sender
/// was launched under: two members may send the lead the same text (one request
/// id answered by both, minted in one millisecond).
fn received_by_lead(
    log: &MessageLog,
    lead_mail: &[LeadMail],
    message: &SentMessage,
    text: &str,
) -> MessageWitness {
    let sender_names: Vec<&str> = log
        .names
        .iter()
        .filter(|(_, prompt)| **prompt == message.from)
        .map(|(name, _)| name.as_str())
        .collect();
    let from_sender = |mail: &LeadMail| {
        sender_names.is_empty()
            || sender_names
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&mail.from))
    };
    let received = lead_mail
        .iter()
        .filter(|mail| from_sender(mail) && message.is_in(&mail.text))
        .count();
    delivery_witness(message, text, TEAM_LEAD_NAME, received)
}

/// `message` (`text`) witnessed `received` times by `recipient`.
fn delivery_witness(
    message: &SentMessage,
    text: &str,
    recipient: &str,
    received: usize,
) -> MessageWitness {
    MessageWitness {
        from: message.from.clone(),
        to: recipient.to_owned(),
        message_digest: message_digest_hex(&message.from, text),
        received_count: received as u64,
        overtaken_by: None,
        may_miss: false,
        sent_ms: (received == 0).then_some(message.sent_ms),
        to_sender: false,
    }
}

/// How many of the texts `recipient`'s model received hold `message` (`text`),
/// matched as written or XML-escaped, and where it first appears.
fn received_by(
    seen: &LabelMap<String, Seen>,
    message: &SentMessage,
    text: &str,
    recipient: &str,
) -> (MessageWitness, Option<(usize, usize)>) {
    let escaped = quick_xml::escape::escape(text);
    let found = |received: &str| received.find(text).or_else(|| received.find(&*escaped));
    let texts = seen
        .get(recipient)
        .map_or(&[][..], |seen| seen.received_texts.as_slice());
    let received = texts.iter().filter(|t| found(t).is_some()).count();
    let first = texts
        .iter()
        .enumerate()
        .find_map(|(index, t)| Some((index, found(t)?)));
    (delivery_witness(message, text, recipient, received), first)
}

/// The labels of the members a broadcast from `sender` goes to: every member of
/// its team but itself (a team's names are compared case-insensitively), the
/// lead's broadcast going to the one team it launched members into. Each comes
/// with whether it may rightly miss the broadcast: a member that approved its
/// shutdown may have left the team before the broadcast was sent. Empty when the
/// team is not known.
fn broadcast_recipients<'a>(log: &'a MessageLog, sender: &str) -> Vec<(&'a String, bool)> {
    let team = if sender == COORDINATOR_LABEL {
        let Some(team) = log.team_of.values().next() else {
            return Vec::new();
        };
        if log.team_of.values().any(|other| other != team) {
            return Vec::new();
        }
        team
    } else {
        let own_name = log
            .names
            .iter()
            .find(|(_, prompt)| prompt.as_str() == sender)
            .map(|(name, _)| name.to_ascii_lowercase());
        match own_name.and_then(|name| log.team_of.get(&name)) {
            Some(team) => team,
            None => return Vec::new(),
        }
    };
    let left = |label: &str| {
        log.approvals.keys().any(|(from, _)| from == label)
            || log.sent.iter().any(|m| m.from == label && m.is_approval())
    };
    log.names
        .iter()
        .filter(|(name, prompt)| {
            log.team_of.get(&name.to_ascii_lowercase()) == Some(team) && prompt.as_str() != sender
        })
        .map(|(_, prompt)| (prompt, left(prompt)))
        .collect()
}

/// A model that records every call into the trace before passing it on: which agent
/// called, its cache prefix, which envelopes the coordinator accepted, and which
/// tool calls came back without an error. It hands the conversation view it read to
/// the simulated model, which would otherwise read the request again.
#[derive(Debug)]
pub struct TappedModel {
    inner: Arc<SimulatedModel>,
    book: FaultBook,
    trace: Trace,
    coordinator_prompt: String,
    seen: TapMemory,
    meter: Arc<Mutex<CostMeter>>,
    envelopes: Mutex<EnvelopeMemo>,
    prefix_digests: Mutex<PrefixDigests>,
    /// Each agent's cache key, to find where the next one changes.
    heads: HeadWitness,
    /// The run's disk without its fault hooks: an accepted envelope's output file
    /// is read from it.
    disk: Arc<dyn Disk>,
    /// Whether the client holds each request before sending it ([`ClientHold`],
    /// for a network transport), so that the tap holds none.
    ///
    /// [`ClientHold`]: super::client_hold::ClientHold
    held_by_client: bool,
    /// PROTOCOL.md §7's rule for the coordinator's system prompt, until its first
    /// request has been judged by it.
    system_rule: Mutex<Option<SystemRule>>,
    /// When each agent compacts, held to the scenario's threshold; `None` when no
    /// threshold rule applies.
    compactions: Option<CompactionWitness>,
    /// The tools each agent is offered, held to PROTOCOL.md §7's surfaces; `None`
    /// until [`TappedModel::judging_tool_surfaces`] names the run's profile.
    surfaces: Option<Arc<SurfaceWitness>>,
    /// How each agent retries the calls the API fails.
    retries: RetryWitness,
    /// When this boot's host started, if it is a restarted one, in ms of the run's
    /// clock.
    restarted_at_ms: Option<u64>,
}

/// The [`prefix_digest`] of each distinct head the tap has seen, most recent last.
/// An agent sends the same head, shared, with every request, so it is nearly always
/// recognised by pointer.
#[derive(Debug, Default)]
struct PrefixDigests {
    digests: Vec<(RequestHead, String)>,
}

/// How many heads [`PrefixDigests`] keeps: a run has one per kind of agent.
const PREFIX_DIGESTS_MAX: usize = 16;

impl PrefixDigests {
    /// [`prefix_digest`] of `request`, computed once per head.
    fn of(&mut self, request: &ModelRequest) -> String {
        let known = self.digests.iter().find(|(head, _)| head.is_of(request));
        if let Some((_, digest)) = known {
            return digest.clone();
        }
        let digest = prefix_digest(request);
        if self.digests.len() == PREFIX_DIGESTS_MAX {
            self.digests.remove(0);
        }
        self.digests
            .push((RequestHead::of(request), digest.clone()));
        digest
    }
}

impl TappedModel {
    /// Taps `inner`, pricing every call with `meter` (one per run, shared by its
    /// boots: the API's cache outlives a crashed host), and reading output files
    /// the envelopes name from `disk` (the run's disk without its fault hooks).
    pub fn new(
        inner: Arc<SimulatedModel>,
        book: FaultBook,
        trace: Trace,
        coordinator_prompt: String,
        meter: Arc<Mutex<CostMeter>>,
        disk: Arc<dyn Disk>,
    ) -> Self {
        let retries =
            RetryWitness::new(inner.clock().clone(), trace.clone(), RetryRecord::default());
        Self {
            inner,
            book,
            trace,
            coordinator_prompt,
            seen: TapMemory::default(),
            meter,
            envelopes: Mutex::new(EnvelopeMemo::default()),
            prefix_digests: Mutex::new(PrefixDigests::default()),
            heads: HeadWitness::default(),
            disk,
            held_by_client: false,
            system_rule: Mutex::new(None),
            compactions: None,
            surfaces: None,
            retries,
            restarted_at_ms: None,
        }
    }

    /// The tap of a host started again after a crash, now.
    pub fn restarted(mut self) -> Self {
        self.restarted_at_ms = Some(clock_ms(self.inner.clock().as_ref()));
        self
    }

    /// The tap that holds the tools each agent is offered to PROTOCOL.md §7's
    /// surfaces in `profile`, with the main thread in coordinator mode or not.
    pub fn judging_tool_surfaces(mut self, profile: Profile, coordinator_mode: bool) -> Self {
        self.surfaces = Some(Arc::new(SurfaceWitness::new(
            profile,
            coordinator_mode,
            self.trace.clone(),
        )));
        self
    }

    /// The tap that holds each agent's compactions to `threshold_tokens`.
    pub fn judging_compactions(mut self, threshold_tokens: Option<u64>) -> Self {
        self.compactions =
            threshold_tokens.map(|threshold| CompactionWitness::new(threshold, self.trace.clone()));
        self
    }

    /// The tap that holds the coordinator's first request to `rule`.
    pub fn judging_system_prompt(self, rule: SystemRule) -> Self {
        *self.system_rule.lock().expect("system rule poisoned") = Some(rule);
        self
    }

    /// The tap of a network transport, whose client holds each request before it
    /// reaches the wire (through [`Self::client_hold`]): the tap holds none.
    pub fn held_by_client(mut self) -> Self {
        self.held_by_client = true;
        self.retries = self.retries.over_network();
        self
    }

    /// How long the client holds `request` before sending it: what
    /// [`CostMeter::send_delay`] says for the agent, fork and script step the
    /// request's conversation shows. For [`Self::held_by_client`] taps.
    pub fn client_hold(&self, request: &ModelRequest) -> Duration {
        let view = self.read_view(request);
        let (agent, fork) = self.agent_and_fork(&view);
        let step = (!view.compaction_requested).then_some(view.steps_taken);
        self.meter
            .lock()
            .expect("meter poisoned")
            .send_delay(&agent, fork.as_ref(), step)
    }

    /// The view of `request`'s conversation, read on from the tap's last reading of
    /// it: reading the same request again reads nothing new.
    fn read_view(&self, request: &ModelRequest) -> ConversationView {
        let mut memo = self.envelopes.lock().expect("envelope memo poisoned");
        let view = ConversationView::read(request, &mut memo);
        for detail in memo.take_unescaped() {
            self.trace
                .push(COORDINATOR_LABEL, SimEvent::EnvelopeUnescaped { detail });
        }
        for detail in memo.take_misread() {
            self.trace
                .push(COORDINATOR_LABEL, SimEvent::EnvelopeMisread { detail });
        }
        view
    }

    /// The agent whose conversation `view` is, and the fork it started as, if any.
    fn agent_and_fork(&self, view: &ConversationView) -> (String, Option<ForkOrigin>) {
        let agent = agent_label(view, &self.coordinator_prompt);
        let fork = view.forked_from.as_ref().map(|parent| ForkOrigin {
            parent: if *parent == self.coordinator_prompt {
                COORDINATOR_LABEL.to_owned()
            } else {
                parent.clone()
            },
            messages_len: view.fork_messages_len,
        });
        (agent, fork)
    }

    /// Holds the system prompt of the coordinator's first request to the rule, if
    /// the tap has one left.
    fn judge_system_prompt(&self, request: &ModelRequest) {
        let Some(rule) = self
            .system_rule
            .lock()
            .expect("system rule poisoned")
            .take()
        else {
            return;
        };
        let received: Vec<&str> = request
            .system
            .iter()
            .map(|block| block.text.as_str())
            .collect();
        if let Some(detail) = rule.judge(&received) {
            self.trace
                .push(COORDINATOR_LABEL, SimEvent::SystemPromptWrong { detail });
        }
    }

    /// The tap remembering into `memory` (shared with the taps of earlier boots).
    pub fn remembering(mut self, memory: TapMemory) -> Self {
        // Each boot's tap is made as its host starts.
        memory.5.restart();
        memory.7.keep_only(&Name::new(COORDINATOR_LABEL));
        self.heads = memory.7.clone();
        self.retries = self.retries.keeping(memory.5.clone());
        self.seen = memory;
        self
    }

    /// Records the call of `agent`, whose conversation `view` summarises, and
    /// returns its call number.
    fn observe(&self, request: &ModelRequest, view: &ConversationView, agent: &str) -> u32 {
        let agent = agent.to_owned();
        if !view.launch_inputs.is_empty() {
            let mut log = self.seen.1.lock().expect("message log poisoned");
            for (task_id, input) in &view.launch_inputs {
                if log.launch_inputs.contains_key(task_id) {
                    continue;
                }
                if let Some(prompt) = &input.prompt {
                    log.task_prompts
                        .entry(task_id.clone())
                        .or_insert_with(|| prompt.clone());
                }
                log.launch_inputs.insert(task_id.clone(), input.clone());
            }
        }
        let call = {
            let mut seen = self.seen.0.lock().expect("tap poisoned");
            let entry = seen.entry(agent.clone()).or_default();
            if agent != COORDINATOR_LABEL {
                if let Some(digest) = continued_summary(request, view) {
                    if !entry.summaries_continued_from.contains(&digest) {
                        entry.summaries_continued_from.push(digest);
                    }
                }
            }
            let new_envelopes =
                &view.notifications[entry.envelopes.min(view.notifications.len())..];
            if agent == COORDINATOR_LABEL && !new_envelopes.is_empty() {
                let now_ms = clock_ms(self.inner.clock().as_ref());
                let bodies = {
                    let log = self.seen.1.lock().expect("message log poisoned");
                    let texts = self.seen.3.lock().expect("worker texts poisoned");
                    let (launches, disk) = (&log.launch_inputs, self.disk.as_ref());
                    let restarted_at_ms = self.restarted_at_ms;
                    new_envelopes
                        .iter()
                        .map(|e| {
                            body_seen(e, view, launches, &texts, disk, now_ms, restarted_at_ms)
                        })
                        .collect()
                };
                self.trace.push(
                    COORDINATOR_LABEL,
                    SimEvent::EnvelopesAccepted {
                        task_ids: new_envelopes.iter().map(|e| e.task_id.clone()).collect(),
                        statuses: new_envelopes.iter().map(|e| e.status).collect(),
                        bodies,
                    },
                );
                for envelope in new_envelopes {
                    self.book.request_duplicate(&envelope.task_id);
                }
                // A task killed at its deadline is stopped as a TaskStop stops it
                // (PROTOCOL.md §1): the stop witness watches its calls from here.
                if new_envelopes
                    .iter()
                    .any(|e| crate::check::ends_by_kill(e.status))
                {
                    self.seen.4.note_stop(self.trace.now_ms());
                }
                let mut log = self.seen.1.lock().expect("message log poisoned");
                log.notified
                    .extend(new_envelopes.iter().map(|e| e.task_id.clone()));
            }
            entry.envelopes = view.notifications.len();
            if agent == COORDINATOR_LABEL && view.stopped.len() > entry.stops {
                self.seen.4.note_stop(self.trace.now_ms());
                self.trace.push(
                    COORDINATOR_LABEL,
                    SimEvent::TasksStopped {
                        task_ids: view.stopped[entry.stops..].to_vec(),
                    },
                );
            }
            entry.stops = view.stopped.len();
            // The conversation only grows: keep what was added since the last request.
            if view.later_user_texts.len() > entry.received_texts.len() {
                let added = &view.later_user_texts[entry.received_texts.len()..];
                entry.received_texts.extend(added.iter().cloned());
            }
            let launched_more = view.launched.len() > entry.launches_noted;
            entry.launches_noted = view.launched.len();
            // A compacted conversation's view starts its answers again.
            if view.spawn_answers.len() < entry.spawn_answers_noted {
                entry.spawn_answers_noted = 0;
            }
            let new_answers = &view.spawn_answers[entry.spawn_answers_noted..];
            if !new_answers.is_empty() {
                let texts = self.seen.3.lock().expect("worker texts poisoned");
                for answer in new_answers {
                    self.trace.push(
                        &agent,
                        SimEvent::SpawnAnswered {
                            agent: Name::new(&agent),
                            asked_background: answer.asked.run_in_background,
                            subagent_type: answer.asked.subagent_type.as_deref().map(Name::new),
                            background: answer.launched.is_some(),
                            said: Box::new(spawn_answer_said(answer, &texts)),
                        },
                    );
                }
            }
            entry.spawn_answers_noted = view.spawn_answers.len();
            if view.shells.len() < entry.shells_noted {
                entry.shells_noted = 0;
            }
            let new_shells = &view.shells[entry.shells_noted..];
            let launcher_tasks: Box<[String]> = if new_shells.is_empty() {
                Box::default()
            } else {
                let log = self.seen.1.lock().expect("message log poisoned");
                log.task_prompts
                    .iter()
                    .filter(|(_, prompt)| **prompt == agent)
                    .map(|(task_id, _)| task_id.clone())
                    .collect()
            };
            for (task_id, command) in new_shells {
                self.book.learn_shell(task_id, command);
                self.trace.push(
                    &agent,
                    SimEvent::ShellLaunched {
                        agent: Name::new(&agent),
                        task_id: task_id.clone(),
                        command: Name::new(command),
                    },
                );
                if !launcher_tasks.is_empty() {
                    self.trace.push(
                        &agent,
                        SimEvent::ShellLauncherTasks {
                            task_id: task_id.clone(),
                            launcher_tasks: launcher_tasks.clone(),
                        },
                    );
                }
            }
            entry.shells_noted = view.shells.len();
            // A fork's calls count from its directive: the history before it is its
            // parent's. The view counted them as it read the conversation.
            (view.assistant_messages + 1, launched_more)
        };
        let (call, launched_more) = call;
        let call = u32::try_from(call).unwrap_or(u32::MAX);
        if agent == COORDINATOR_LABEL {
            self.judge_system_prompt(request);
        }
        if launched_more {
            let log = self.seen.1.lock().expect("message log poisoned");
            self.seen
                .4
                .note_launches(&agent, view.launched.keys(), |task_id| {
                    log.task_prompts.get(task_id).cloned()
                });
        }
        if agent == COORDINATOR_LABEL {
            for (task_id, description) in &view.launched {
                self.book.learn_launch(task_id, description);
            }
            let mut log = self.seen.1.lock().expect("message log poisoned");
            // Every call carries every launch so far: only new ones are copied.
            for task_id in view.launched.keys() {
                if !log.launched.contains(task_id) {
                    log.launched.insert(task_id.clone());
                }
            }
        }
        let agent_name = Name::new(&agent);
        let forked_from = view.forked_from.as_ref().map(|parent| {
            if *parent == self.coordinator_prompt {
                Name::new(COORDINATOR_LABEL)
            } else {
                Name::new(parent)
            }
        });
        let head_change = self
            .heads
            .observe(&agent_name, forked_from.as_ref(), request)
            .map(Box::new);
        self.trace.push(
            &agent,
            SimEvent::ModelCalled {
                agent: agent_name,
                call,
                prefix_digest: self
                    .prefix_digests
                    .lock()
                    .expect("prefix digests poisoned")
                    .of(request)
                    .into(),
                forked_from,
                fork_shared: (view.forked_from.is_some() && call == 1).then(|| {
                    Box::new((
                        view.fork_messages_len as u64,
                        Name::new(&fork_shared_digest(request, view.fork_messages_len)),
                    ))
                }),
                compaction: view.compaction_requested,
                head_change,
            },
        );
        if let Some(message_index) = view.summary_behind_history_at {
            let first = {
                let mut seen = self.seen.0.lock().expect("tap poisoned");
                let entry = seen.entry(agent.clone()).or_default();
                !std::mem::replace(&mut entry.summary_behind_history_noted, true)
            };
            if first {
                self.trace.push(
                    &agent,
                    SimEvent::SummaryBehindHistory {
                        agent: Name::new(&agent),
                        call,
                        message_index: message_index as u64,
                    },
                );
            }
        }
        if call == 1 && !view.fork_results_not_placeholder.is_empty() {
            self.trace.push(
                &agent,
                SimEvent::ForkResultsNotPlaceholder {
                    agent: Name::new(&agent),
                    results: view.fork_results_not_placeholder.clone(),
                },
            );
        }
        if agent != COORDINATOR_LABEL {
            self.note_idle_member_called(&agent, call);
        }
        // A fork's first request ends with its parent's launch message and the
        // placeholder results: rounds of the parent, not of the fork.
        if view.forked_from.is_none() || request.messages.len() > view.fork_messages_len {
            self.record_tool_results(&agent, call, view.forked_from.is_some(), request);
        }
        call
    }

    /// Logs each team file that lists `agent` as idle now, when its model received
    /// call `call`: only an agent launched under a name can be a member.
    fn note_idle_member_called(&self, agent: &str, call: u32) {
        let names: Vec<String> = {
            let log = self.seen.1.lock().expect("message log poisoned");
            log.names
                .iter()
                .filter(|(_, label)| label.as_str() == agent)
                .map(|(name, _)| name.clone())
                .collect()
        };
        if names.is_empty() {
            return;
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let root = std::path::Path::new(super::SESSION_DIR);
        for (team, member) in idle_in_team_files(self.disk.as_ref(), root, &names) {
            self.trace.push(
                agent,
                SimEvent::IdleMemberCalled {
                    team: Name::from(team),
                    member: Name::from(member),
                    call,
                },
            );
        }
    }

    /// Notes the approving shutdown responses to the team lead among the calls of
    /// `agent`'s `response`, until their answers are seen.
    fn note_approvals(&self, agent: &str, response: &ModelResponse) {
        for block in &response.content {
            let ContentBlock::ToolUse { id, name, input } = block else {
                continue;
            };
            let (Some(to), Some(body)) = (
                input.get("to").and_then(|to| to.as_str()),
                input.get("message"),
            ) else {
                continue;
            };
            let message = SentMessage {
                from: agent.to_owned(),
                to: to.to_owned(),
                body: body.clone(),
                sent_ms: self.trace.now_ms(),
                request_id: None,
            };
            if name == "SendMessage"
                && message.to.eq_ignore_ascii_case(TEAM_LEAD_NAME)
                && message.is_approval()
            {
                let mut log = self.seen.1.lock().expect("message log poisoned");
                log.approvals
                    .insert((agent.to_owned(), id.clone()), message);
            }
        }
    }

    /// Notes the prompts of the remote workers and the teammates `response`
    /// launches, and the type each launch asks for: known before the launch runs,
    /// so before the worker's first request (whose tools are judged by the
    /// teammate's surface, or a read-only definition's).
    fn note_launches_asked(&self, response: &ModelResponse) {
        for block in &response.content {
            let ContentBlock::ToolUse { name, input, .. } = block else {
                continue;
            };
            let (true, Some(prompt)) = (
                name == "Agent",
                input.get("prompt").and_then(|p| p.as_str()),
            ) else {
                continue;
            };
            let text = |key: &str| input.get(key).and_then(|v| v.as_str());
            let remote = text("isolation") == Some("remote");
            let teammate = text("team_name").is_some() && text("name").is_some();
            // A launch that names no type asks for the default definition, which
            // narrows nothing; noted all the same, so that a prompt also launched
            // as Explore is not held to Explore's tools.
            let agent_type = text("subagent_type").unwrap_or_default();
            self.retries.launch_asked(prompt);
            let mut log = self.seen.1.lock().expect("message log poisoned");
            log.asked_types
                .entry(prompt.to_owned())
                .and_modify(|asked| {
                    if asked.as_deref() != Some(agent_type) {
                        *asked = None;
                    }
                })
                .or_insert_with(|| Some(agent_type.to_owned()));
            if remote {
                log.remote_prompts.insert(prompt.to_owned());
            }
            if teammate {
                log.team_launches_asked.insert(prompt.to_owned());
            }
        }
    }

    /// Whether `agent` was launched on the remote host.
    fn runs_remote(&self, agent: &str) -> bool {
        let log = self.seen.1.lock().expect("message log poisoned");
        !log.remote_prompts.is_empty() && log.remote_prompts.contains(agent)
    }

    /// Notes an Agent call that launched a named worker, or a SendMessage or
    /// SendMessageToWorker the runtime accepted: the witnesses of message delivery.
    fn note_accepted(
        &self,
        agent: &str,
        assistant: &Message,
        tool_use_id: &str,
        tool: &str,
        answer: &str,
    ) {
        if !matches!(tool, "Agent" | "SendMessage" | "SendMessageToWorker") {
            return;
        }
        let Some(input) = assistant.content.iter().find_map(|b| match b {
            ContentBlock::ToolUse { id, input, .. } if id == tool_use_id => Some(input),
            _ => None,
        }) else {
            return;
        };
        let text = |key: &str| input.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        // A worker the harness launched (nexo) is known to the fault book, not to
        // any conversation the tap read.
        let harness_launched = match (tool, text("worker_id")) {
            ("SendMessageToWorker", Some(id)) => {
                self.book.prompt_of(&id).map(|prompt| (id, prompt))
            }
            _ => None,
        };
        let sent_ms = self.trace.now_ms();
        let mut log = self.seen.1.lock().expect("message log poisoned");
        if let Some((id, prompt)) = harness_launched {
            log.task_prompts.entry(id).or_insert(prompt);
        }
        if tool != "Agent"
            && !log
                .sent_calls
                .insert((agent.to_owned(), tool_use_id.to_owned()))
        {
            return;
        }
        match tool {
            "Agent" => {
                if let (Some(name), Some(prompt)) = (text("name"), text("prompt")) {
                    if let Some(team) = text("team_name") {
                        log.teammates.insert(prompt.clone());
                        log.team_of.insert(name.to_ascii_lowercase(), team);
                    }
                    log.names.insert(name, prompt);
                }
            }
            "SendMessage" => {
                if let (Some(to), Some(message)) = (text("to"), input.get("message")) {
                    let is_request =
                        message.get("type").and_then(|t| t.as_str()) == Some("shutdown_request");
                    log.sent.push(SentMessage {
                        from: agent.to_owned(),
                        to,
                        body: message.clone(),
                        sent_ms,
                        request_id: is_request.then(|| shutdown_request_id_in(answer)).flatten(),
                    });
                }
            }
            // A continuation of a finished worker (PROTOCOL.md §5, NX): its message
            // is the continued worker's next prompt.
            "SendMessageToWorker" => {
                if let (Some(to), Some(message)) = (text("worker_id"), input.get("message")) {
                    log.sent.push(SentMessage {
                        from: agent.to_owned(),
                        to,
                        body: message.clone(),
                        sent_ms,
                        request_id: None,
                    });
                }
            }
            _ => {}
        }
    }

    /// The progress a TaskGet answer (`answer`, to call `tool_use_id`) reported,
    /// beside the rounds its task's worker can have counted by now; `None` in a run
    /// that keeps no rounds, or for an answer that is no task's progress.
    fn task_progress_read(&self, tool_use_id: &str, answer: &str) -> Option<SimEvent> {
        let progress = self.seen.8.lock().expect("progress witness poisoned");
        let progress = progress.as_ref()?;
        let serde_json::Value::Object(fields) = serde_json::from_str(answer).ok()? else {
            return None;
        };
        let task_id = fields.get("task_id")?.as_str()?.to_owned();
        let tool_uses = fields.get("tool_uses")?.as_u64()?;
        let activities = fields
            .get("recent_activities")
            .and_then(|list| list.as_array())
            .map(|list| {
                list.iter()
                    .map(|activity| Name::new(activity.as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        let rounds = {
            let log = self.seen.1.lock().expect("message log poisoned");
            let label = log.task_prompts.get(&task_id);
            let messaged = log.sent.iter().filter_map(|sent| {
                log.names
                    .get(&sent.to)
                    .or_else(|| log.task_prompts.get(&sent.to))
            });
            let shared = shared_labels(log.task_prompts.values(), messaged);
            label
                .filter(|label| {
                    !shared.contains(label.as_str())
                        && !log.remote_prompts.contains(label.as_str())
                        && !log.teammates.contains(label.as_str())
                })
                .and_then(|label| {
                    let read_ms = self.trace.now_ms();
                    progress.rounds(label, tool_use_id, read_ms, self.restarted_at_ms)
                })
        };
        Some(SimEvent::TaskProgressRead(Box::new(TaskProgressSeen {
            task_id,
            tool_uses,
            activities,
            rounds,
        })))
    }

    /// The role of `agent` whose conversation is, or is not, a fork's: what its
    /// tool surface is named after.
    fn role_of(&self, agent: &str, fork: bool) -> &'static str {
        let log = self.seen.1.lock().expect("message log poisoned");
        if agent == COORDINATOR_LABEL {
            "coordinator"
        } else if log.teammates.contains(agent) || log.resumes_teammate(agent) {
            "teammate"
        } else if fork {
            "fork"
        } else {
            "worker"
        }
    }

    /// Records the tool results of the request's last user message: the round that
    /// just ended. `fork` says the conversation is a fork's (PROTOCOL.md §6), whose
    /// tool surface is a worker's without the destructive tools.
    fn record_tool_results(&self, agent: &str, call: u32, fork: bool, request: &ModelRequest) {
        let [.., assistant, last] = request.messages.as_slice() else {
            return;
        };
        if last.role != Role::User || assistant.role != Role::Assistant {
            return;
        }
        let role = self.role_of(agent, fork);
        for block in &last.content {
            let ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                content,
                ..
            } = block
            else {
                continue;
            };
            let tool_use = assistant.content.iter().find_map(|b| match b {
                ContentBlock::ToolUse { id, name, input } if id == tool_use_id => {
                    Some((name, input))
                }
                _ => None,
            });
            let Some((tool, input)) = tool_use else {
                continue;
            };
            let tool = tool.clone();
            if tool == "TaskOutput" && !*is_error {
                if let Some(task_id) = input.get("task_id").and_then(|id| id.as_str()) {
                    let round_calls = assistant
                        .content
                        .iter()
                        .filter(|block| matches!(block, ContentBlock::ToolUse { .. }))
                        .count();
                    let wait = BlockingWait::of(
                        input,
                        self.seen.6.called_ms(tool_use_id),
                        self.trace.now_ms(),
                        round_calls == 1,
                    );
                    self.seen
                        .6
                        .note(task_id, tool_use_id, (agent, call), content, wait);
                }
            }
            // Answered: an approval is judged by its answer like any other call.
            self.seen
                .1
                .lock()
                .expect("message log poisoned")
                .approvals
                .remove(&(agent.to_owned(), tool_use_id.clone()));
            if !*is_error {
                self.note_accepted(agent, assistant, tool_use_id, &tool, content);
            }
            let answer_wanted = self.seen.2.load(std::sync::atomic::Ordering::Relaxed);
            let position = answer_wanted
                .then(|| scripted_tool_use_position(tool_use_id))
                .flatten();
            if let Some((step, index)) = position {
                let mut log = self.seen.1.lock().expect("message log poisoned");
                log.answers.insert(
                    (agent.to_owned(), step, index),
                    ReceivedAnswer {
                        is_error: *is_error,
                        text: content.clone(),
                        received_ms: self.trace.now_ms(),
                    },
                );
            }
            if tool == "TaskList" && !*is_error && role == "coordinator" {
                self.trace.push(
                    agent,
                    SimEvent::TasksListed {
                        task_ids: listed_task_ids(content),
                    },
                );
            }
            if tool == "TaskGet" && !*is_error && role == "coordinator" {
                if let Some(event) = self.task_progress_read(tool_use_id, content) {
                    self.trace.push(agent, event);
                }
            }
            if (tool == "TaskGet" || tool == "SendMessageToWorker")
                && !*is_error
                && role == "coordinator"
            {
                if let Some(task_id) = answered_task_id(content) {
                    self.trace.push(
                        agent,
                        SimEvent::TaskAnswered {
                            tool: Name::new(&tool),
                            task_id,
                        },
                    );
                }
            }
            let role = role.to_owned();
            let event = if *is_error {
                let first_line = content.lines().next().unwrap_or_default();
                SimEvent::ToolFailed {
                    role: role.into(),
                    tool: tool.into(),
                    error: first_line.chars().take(160).collect(),
                }
            } else {
                SimEvent::ToolSucceeded {
                    role: role.into(),
                    tool: tool.into(),
                }
            };
            self.trace.push(agent, event);
        }
    }
}

/// The `task_id` of every entry of a TaskList answer (a JSON array of task
/// objects); none if the answer is no such array.
fn listed_task_ids(answer: &str) -> Vec<Name> {
    let Ok(serde_json::Value::Array(tasks)) = serde_json::from_str(answer) else {
        return Vec::new();
    };
    tasks
        .iter()
        .filter_map(|task| task.get("task_id")?.as_str().map(Name::new))
        .collect()
}

/// The task a successful TaskGet or SendMessageToWorker answer is about: its
/// `task_id`, or the `worker_id` a continuation names.
fn answered_task_id(answer: &str) -> Option<String> {
    let serde_json::Value::Object(fields) = serde_json::from_str(answer).ok()? else {
        return None;
    };
    fields
        .get("task_id")
        .or_else(|| fields.get("worker_id"))?
        .as_str()
        .map(str::to_owned)
}

/// Digest of what the prompt cache keys on first: tool definitions and system blocks.
/// The digest of what a fork's first request holds before its directive: the
/// messages before the directive message, then that message's blocks but its last
/// (the directive's text). Siblings forked in one parent turn must agree on it byte
/// for byte: only their directives differ.
fn fork_shared_digest(request: &ModelRequest, fork_messages_len: usize) -> String {
    let mut hasher = Fnv1a64::new();
    let Some(directive_at) = fork_messages_len.checked_sub(1) else {
        return hasher.finish_hex();
    };
    let messages = &request.messages[..fork_messages_len.min(request.messages.len())];
    for (index, message) in messages.iter().enumerate() {
        let blocks = match index == directive_at {
            true => &message.content[..message.content.len().saturating_sub(1)],
            false => &message.content[..],
        };
        // Block JSON is what the API receives; a block that fails to serialize would
        // fail the request itself, and hashes as nothing here.
        for block in blocks {
            hasher.update(&serde_json::to_vec(block).unwrap_or_default());
            hasher.update(&[0]);
        }
        hasher.update(&[1]);
    }
    hasher.finish_hex()
}

/// Whether mail `text` in an inbox is the message `body` a model sent: the same
/// string, or JSON equal to the structured message.
fn body_is_in(body: &serde_json::Value, text: &str) -> bool {
    match body {
        serde_json::Value::String(sent) => sent == text,
        object => serde_json::from_str::<serde_json::Value>(text).is_ok_and(|mail| mail == *object),
    }
}

/// `clock`'s time in whole ms, as the runtime's own clock readings are taken.
fn clock_ms(clock: &dyn Clock) -> u64 {
    u64::try_from(clock.monotonic().as_millis()).unwrap_or(u64::MAX)
}

fn prefix_digest(request: &ModelRequest) -> String {
    let mut hasher = Fnv1a64::new();
    for tool in request.tools.iter() {
        hasher.update(tool.name.as_bytes());
        hasher.update(&[0]);
        hasher.update(tool.description.as_bytes());
        hasher.update(&[0]);
    }
    for block in request.system.iter() {
        hasher.update(block.text.as_bytes());
        hasher.update(&[0]);
    }
    hasher.finish_hex()
}

impl Model for TappedModel {
    fn send(
        &self,
        mut request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        let view = self.read_view(&request);
        let (agent, fork) = self.agent_and_fork(&view);
        // The real API answers such a request with a 400, before any work.
        if let Some(detail) = api_refusal(&request) {
            let refusal = ModelError::Api {
                status: 400,
                message: detail.clone(),
            };
            self.retries.requested(&agent, 0, &request);
            self.retries
                .failed(&agent, &request, &refusal, Duration::ZERO);
            self.trace.push(
                &agent,
                SimEvent::RequestRefused {
                    agent: Name::new(&agent),
                    detail: detail.clone(),
                },
            );
            return Box::pin(async move { Err(refusal) });
        }
        let (edited, delay) = {
            let mut meter = self.meter.lock().expect("meter poisoned");
            let edited = meter.edit_fork_request(&agent, fork.as_ref(), &mut request);
            // A client that held the request asked the meter already (which also
            // counts a fork's stagger): asked again, it would count it twice.
            let delay = if self.held_by_client {
                Duration::ZERO
            } else {
                let step = (!view.compaction_requested).then_some(view.steps_taken);
                meter.send_delay(&agent, fork.as_ref(), step)
            };
            (edited, delay)
        };
        if edited {
            self.trace.push(
                &agent,
                SimEvent::ForkSystemEdited {
                    agent: agent.clone(),
                },
            );
        }
        let call = self.observe(&request, &view, &agent);
        if agent != COORDINATOR_LABEL && !view.compaction_requested {
            if let Some(progress) = self
                .seen
                .8
                .lock()
                .expect("progress witness poisoned")
                .as_mut()
            {
                let fork = view.forked_from.is_some();
                progress.requested(&agent, self.trace.now_ms(), &request.messages, fork);
            }
        }
        if let Some(surfaces) = &self.surfaces {
            // A teammate's first request can come before its launch's answer
            // reaches the coordinator's model: its role is known from the call.
            let (asked_as_teammate, asked_type) = {
                let log = self.seen.1.lock().expect("message log poisoned");
                (
                    log.team_launches_asked.contains(agent.as_str()),
                    log.asked_types.get(agent.as_str()).cloned().flatten(),
                )
            };
            let role = if asked_as_teammate {
                "teammate"
            } else {
                self.role_of(&agent, view.forked_from.is_some())
            };
            surfaces.offered(&agent, role, asked_type.as_deref(), &request.tools);
        }
        self.retries.requested(&agent, call, &request);
        if let Some(compactions) = self
            .compactions
            .as_ref()
            .filter(|_| !self.runs_remote(&agent))
        {
            compactions.requested(&agent, call, &request, view.compaction_requested);
        }
        let reply = self.inner.reply_viewed(&request, &view);
        let PolicyReply::Respond {
            mut response,
            latency,
            usage_recorded,
        } = reply
        else {
            if let PolicyReply::Fail { error, latency } = &reply {
                self.retries.failed(&agent, &request, error, *latency);
            }
            return self.inner.deliver(reply);
        };
        self.note_approvals(&agent, &response);
        self.note_launches_asked(&response);
        let clock = self.inner.clock().clone();
        let meter = self.meter.clone();
        let trace = self.trace.clone();
        let memory = self.seen.clone();
        let step = view.steps_taken;
        let compaction = view.compaction_requested;
        let due_ms = trace
            .now_ms()
            .saturating_add((delay + latency).as_millis() as u64);
        let watch = memory.4.watch(&trace, &agent, call, due_ms);
        let compactions = self.compactions.clone();
        // A compaction's summary plays no script step, as a waiting turn plays none.
        let waiting = view.compaction_requested
            || response.content.iter().any(
                |block| matches!(block, ContentBlock::Text { text, .. } if text == WAITING_TEXT),
            );
        Box::pin(async move {
            let sent_ms = clock_ms(clock.as_ref());
            if !delay.is_zero() {
                clock.sleep(delay).await;
            }
            let (simulated, event) = {
                let mut meter = meter.lock().expect("meter poisoned");
                meter.bill(
                    &agent,
                    call,
                    fork.as_ref(),
                    &request,
                    clock.monotonic(),
                    latency,
                    usage_recorded.then_some(response.usage),
                    response.usage.output_tokens,
                )
            };
            trace.push(&agent, event);
            if !usage_recorded {
                response.usage = simulated;
            }
            // The request is no longer needed; free it before the wait.
            drop(request);
            clock.sleep(latency).await;
            // Played only once delivered: a host that dies during the call never
            // saw the turn.
            if !waiting {
                memory.played(&agent, step);
            }
            let answered_ms = clock_ms(clock.as_ref());
            for block in &response.content {
                if let ContentBlock::ToolUse { id, name, input } = block {
                    match name.as_str() {
                        "TaskOutput" => memory.6.called(id, answered_ms),
                        "SendMessage" => memory.send_called(&agent, input, answered_ms),
                        _ => {}
                    }
                }
            }
            {
                let mut texts = memory.3.lock().expect("worker texts poisoned");
                if agent == COORDINATOR_LABEL {
                    texts.note_agent_calls(&response.content, answered_ms);
                } else {
                    texts.note(&agent, call, &response.content, &response.usage, compaction);
                    if !compaction {
                        texts.note_timing(&agent, call, sent_ms, answered_ms);
                    }
                }
            }
            if let Some(progress) = memory.8.lock().expect("progress witness poisoned").as_mut() {
                if agent == COORDINATOR_LABEL {
                    progress.note_task_gets(&response.content, answered_ms);
                } else {
                    progress.answered(&agent, call, answered_ms, &response.content, compaction);
                }
            }
            if let Some(compactions) = compactions {
                compactions.answered(&agent, &response.content, &response.usage, compaction);
            }
            watch.answered();
            Ok(response)
        })
    }

    fn compaction_wanted(&self, messages: &[coord_runtime::world::Message]) -> Option<bool> {
        self.inner.compaction_wanted(messages)
    }
}

/// The digest of the compaction summary `request`'s conversation starts from: its
/// first message is the runtime's continuation (the preamble and the summary), so
/// the conversation before it was replaced. A fork of a compacted parent starts
/// from its parent's summary, which is not the fork's own.
fn continued_summary(request: &ModelRequest, view: &ConversationView) -> Option<u64> {
    if view.forked_from.is_some() && view.fork_messages_len > 0 {
        return None;
    }
    let first = request.messages.first()?;
    if first.role != Role::User {
        return None;
    }
    match first.content.first()? {
        ContentBlock::Text { text, .. } if text.starts_with(CONTINUATION_PREAMBLE) => {
            Some(summary_digest(text))
        }
        _ => None,
    }
}

/// The digest by which a continuation message's text is known, in the tap and in
/// the transcripts read back: its first text block only, since a resume may add the
/// new prompt to the same message as a second block.
pub fn summary_digest(text: &str) -> u64 {
    Fnv1a64::digest(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coord_runtime::world::{SystemBlock, ToolDefinition};

    #[test]
    fn a_shutdown_request_is_looked_for_in_its_delivered_form() {
        // Goal: the witness finds a shutdown request where its recipient reads it:
        // the id comes from SendMessage's answer to the sender, and anything in the
        // answer that is not an id is passed over.
        assert_eq!(
            shutdown_request_id_in(
                "shutdown request shutdown-1767225602000@t00000000 queued for a0000abcd"
            ),
            RequestId::parse("shutdown-1767225602000@t00000000").ok()
        );
        assert_eq!(shutdown_request_id_in("shutdown-soon, shutdown-x@y"), None);
        let sent = |request_id: Option<&str>| SentMessage {
            from: COORDINATOR_LABEL.into(),
            to: "indexer".into(),
            body: serde_json::json!({"type": "shutdown_request", "reason": "over budget"}),
            sent_ms: 0,
            request_id: request_id.map(|id| RequestId::parse(id).unwrap()),
        };
        let delivered = delivered_shutdown_request(&sent(Some("shutdown-5@t00000000"))).unwrap();
        assert_eq!(
            TeamMessage::parse(&delivered),
            Some(TeamMessage::ShutdownRequest {
                request_id: RequestId::parse("shutdown-5@t00000000").unwrap(),
                reason: Some("over budget".into()),
            })
        );
        assert_eq!(delivered_shutdown_request(&sent(None)), None);
    }

    #[test]
    fn a_message_to_the_lead_is_found_in_its_inbox_from_its_sender_once() {
        // Goal: a message to the team lead counts where it lands, in the lead's
        // inbox, and only as its own sender wrote it: two members answering one
        // request id send the same JSON. An approval never answered (its sender
        // ended with it) counts as sent. Method: two answers to one id, from two
        // members, in one inbox; keys in another order than the inbox's.
        let memory = TapMemory::default();
        {
            let mut log = memory.1.lock().unwrap();
            log.names
                .insert("indexer".into(), "Build the index.".into());
            log.names
                .insert("watcher".into(), "Watch the build.".into());
            log.sent.push(SentMessage {
                from: "Build the index.".into(),
                to: "team-lead".into(),
                body: serde_json::json!({"reason": "busy", "approve": false, "request_id": "shutdown-1@t00000000", "type": "shutdown_response"}),
                sent_ms: 0,
                request_id: None,
            });
            log.approvals.insert(
                ("Watch the build.".into(), "toolu_s0_0".into()),
                SentMessage {
                    from: "Watch the build.".into(),
                    to: "TEAM-LEAD".into(),
                    body: serde_json::json!({"type": "shutdown_response", "request_id": "shutdown-1@t00000000", "approve": true}),
                    sent_ms: 0,
                    request_id: None,
                },
            );
        }
        let mail = |from: &str, text: &str| LeadMail {
            team: "crew".into(),
            from: from.into(),
            text: text.into(),
            read: false,
        };
        let reject = r#"{"type":"shutdown_response","request_id":"shutdown-1@t00000000","approve":false,"reason":"busy"}"#;
        let approve =
            r#"{"type":"shutdown_response","request_id":"shutdown-1@t00000000","approve":true}"#;
        let counts = |inbox: &[LeadMail]| -> Vec<u64> {
            memory
                .messages_witnessed(inbox)
                .iter()
                .map(|witness| witness.received_count)
                .collect()
        };
        assert_eq!(
            counts(&[mail("indexer", reject), mail("watcher", approve)]),
            [1, 1]
        );
        // The approval written under the other member's name is not the watcher's.
        assert_eq!(
            counts(&[mail("indexer", reject), mail("indexer", approve)]),
            [1, 0]
        );
        assert_eq!(
            counts(&[mail("indexer", reject), mail("Indexer", reject)]),
            [2, 0]
        );
        let witnessed = memory.messages_witnessed(&[]);
        assert!(witnessed.iter().all(|w| w.to == TEAM_LEAD_NAME));
    }

    #[test]
    fn an_inbox_message_is_stamped_no_earlier_than_the_first_call_that_sent_it() {
        // Goal: the stamp is held against the earliest SendMessage that asked for
        // its text and its inbox (a broadcast asks for every inbox); a stamp that is
        // no time fails; structured messages and mail no call asked for are not
        // judged. Method: one text sent twice (the later call must not make the
        // earlier stamp look early), a broadcast, and the unjudged cases.
        let memory = TapMemory::default();
        let called = |to: &str, body: serde_json::Value, ms: u64| {
            let input = serde_json::json!({ "to": to, "message": body });
            memory.send_called("teammate", &input, ms);
        };
        called("team-lead", "The fixes section is read.".into(), 1_500);
        called("team-lead", "The fixes section is read.".into(), 1_250);
        called("*", "Stop reading.".into(), 2_000);
        called(
            "team-lead",
            serde_json::json!({"type": "shutdown_response", "approve": true}),
            4_500,
        );
        let mail = |owner: &str, text: &str, stamp: &str| StampedMail {
            owner: owner.into(),
            from: "reader".into(),
            text: text.into(),
            stamp: stamp.into(),
        };
        let early = |inbox: &[StampedMail]| -> Vec<String> {
            memory
                .mail_stamped_early(inbox)
                .into_iter()
                .map(|early| format!("{} {} {}", early.owner, early.stamp, early.called_ms))
                .collect()
        };
        let fixes = "The fixes section is read.";
        assert!(early(&[mail("team-lead", fixes, "2026-01-01T00:00:01.250Z")]).is_empty());
        assert_eq!(
            early(&[mail("team-lead", fixes, "2026-01-01T00:00:01.000Z")]),
            ["team-lead 2026-01-01T00:00:01.000Z 1250"]
        );
        assert_eq!(
            early(&[mail("TEAM-LEAD", fixes, "soon")]),
            ["TEAM-LEAD soon 1250"]
        );
        assert_eq!(
            early(&[
                mail("checker", "Stop reading.", "2026-01-01T00:00:02.000Z"),
                mail("writer", "Stop reading.", "2026-01-01T00:00:01.999Z"),
            ]),
            ["writer 2026-01-01T00:00:01.999Z 2000"]
        );
        let runtime_answer = r#"{"type":"shutdown_response","approve":true}"#;
        assert!(early(&[
            mail("team-lead", runtime_answer, "2026-01-01T00:00:03.000Z"),
            mail("team-lead", "Nobody sent this.", "2025-01-01T00:00:00.000Z"),
            mail("checker", fixes, "2025-01-01T00:00:00.000Z"),
        ])
        .is_empty());
    }

    #[test]
    fn a_broadcast_is_witnessed_at_every_other_member_and_never_at_its_sender() {
        // Goal: a teammate's broadcast goes to each other member of its team and
        // to its lead's inbox, not to itself nor to another team; a member that
        // approved its shutdown may have missed it. Method: three members of
        // `crew` and one of `other`, the sender's own model shown the broadcast
        // once, the lead's inbox holding it once.
        let memory = TapMemory::default();
        let text = "Rebase on the first shard.";
        {
            let mut log = memory.1.lock().unwrap();
            for (name, prompt, team) in [
                ("Alpha", "First shard.", "crew"),
                ("beta", "Second shard.", "crew"),
                ("gamma", "Third shard.", "crew"),
                ("delta", "Other shard.", "other"),
            ] {
                log.names.insert(name.into(), prompt.into());
                log.team_of.insert(name.to_ascii_lowercase(), team.into());
            }
            log.sent.push(SentMessage {
                from: "First shard.".into(),
                to: BROADCAST.into(),
                body: serde_json::json!(text),
                sent_ms: 0,
                request_id: None,
            });
            log.sent.push(SentMessage {
                from: "Third shard.".into(),
                to: TEAM_LEAD_NAME.into(),
                body: serde_json::json!({"type": "shutdown_response", "request_id": "shutdown-1@t00000000", "approve": true}),
                sent_ms: 0,
                request_id: None,
            });
        }
        {
            let mut seen = memory.0.lock().unwrap();
            for agent in ["First shard.", "Second shard."] {
                seen.entry(agent.to_owned()).or_default().received_texts =
                    vec![format!("<teammate-message>{text}</teammate-message>")];
            }
        }
        let lead_inbox = [LeadMail {
            team: "crew".into(),
            from: "alpha".into(),
            text: text.into(),
            read: true,
        }];
        let witnessed = memory.messages_witnessed(&lead_inbox);
        let summary: Vec<(&str, u64, bool, bool)> = witnessed
            .iter()
            .map(|w| (w.to.as_str(), w.received_count, w.may_miss, w.to_sender))
            .collect();
        assert_eq!(
            summary,
            [
                (TEAM_LEAD_NAME, 0, false, false),
                (TEAM_LEAD_NAME, 1, false, false),
                ("Second shard.", 1, false, false),
                ("Third shard.", 0, true, false),
                ("First shard.", 1, false, true),
            ]
        );
    }

    fn request(tools: &Arc<Vec<ToolDefinition>>, system: &Arc<Vec<SystemBlock>>) -> ModelRequest {
        ModelRequest {
            model: "claude-sonnet-4-5".to_owned(),
            max_tokens: 1024,
            tools: Arc::clone(tools),
            system: Arc::clone(system),
            messages: Vec::new(),
            thinking: None,
        }
    }

    #[test]
    fn a_remembered_prefix_digest_is_the_digest_of_the_lists_sent() {
        // Goal: a head recognised by its shared lists gets the digest of their
        // contents, and another head, even of the same length, gets its own.
        let tools = Arc::new(vec![ToolDefinition {
            name: "Read".to_owned(),
            description: "Reads a file.".to_owned(),
            input_schema: Arc::new(serde_json::json!({"type": "object"})),
            cache_control: None,
        }]);
        let lead = Arc::new(vec![SystemBlock::text("the lead's rules")]);
        let worker = Arc::new(vec![SystemBlock::text("a worker's rules")]);
        let mut digests = PrefixDigests::default();
        for _ in 0..2 {
            for system in [&lead, &worker] {
                let sent = request(&tools, system);
                assert_eq!(digests.of(&sent), prefix_digest(&sent));
            }
        }
        assert_eq!(digests.digests.len(), 2);
        assert_ne!(
            digests.of(&request(&tools, &lead)),
            digests.of(&request(&tools, &worker))
        );
    }
}
