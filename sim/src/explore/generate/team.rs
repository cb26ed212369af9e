//! A team led by the main thread (PROTOCOL.md §6): teammates spawned into team
//! `crew` with the Agent tool, each in a permission mode; their destructive calls
//! forwarded to the lead, whose harness approves a write in the workspace and
//! denies one into `/etc`; a message to one teammate, a plan approval to a planner,
//! or a broadcast to the whole team, read from the mailboxes; and a shutdown request
//! to each, through the lead's harness as in
//! `scenarios/teams/shutdown-and-permission.toml`.
//!
//! A teammate idles between turns and ends only when it agrees to shut down, so the
//! program is timed around idleness rather than notifications: each teammate's own
//! script takes seconds, the messages go out a long fixed latency later (when every
//! teammate idles, so each message wakes it for exactly one more scripted turn),
//! and the shutdown requests a long fixed latency after that (when every teammate
//! has answered and idles again). A teammate gets at most one message: two could
//! wake it once or twice, depending on its mailbox polls.

use serde_json::json;

use super::draw::Draw;
use super::worker::read_only;
use super::{call, tool_turn};
use crate::model::{AgentScript, Latency, ScriptedToolCall, ScriptedTurn};
use crate::scenario::{LeadAction, LeadActionKind};

/// The team's name.
pub(super) const TEAM: &str = "crew";
/// Most teammates.
const TEAMMATES_MAX: u64 = 3;
/// Most tool turns of a teammate.
const TEAMMATE_TOOL_TURNS_MAX: u64 = 2;
/// How long after the spawns the messages go out, and after them the shutdown
/// requests: past a teammate's whole script (a few seconds per turn, a permission
/// answer within two harness polls) and past the longest delay swarm puts on a
/// worker's last turn (61 s), so each teammate idles when its message arrives.
pub(super) const TEAM_GAP_MS: u64 = 90_000;
/// Turns after the mail that only let time pass (see [`Team::lead_turns`]).
const FILLER_TURNS: u32 = 4;
/// How long each of them takes.
const FILLER_MS: u64 = 20_000;

/// A teammate's permission mode, as the Agent call's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Default,
    Plan,
    AcceptEdits,
    BypassPermissions,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Plan => "plan",
            Mode::AcceptEdits => "acceptEdits",
            Mode::BypassPermissions => "bypassPermissions",
        }
    }
}

/// What the lead sends a teammate once it idles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mail {
    /// Nothing.
    None,
    /// A SendMessage to its name.
    Direct,
    /// A `plan_approval_response` (plan mode only).
    PlanApproval,
    /// The team-wide broadcast (`to = "*"`), which every teammate gets.
    Broadcast,
}

/// One teammate, as drawn.
#[derive(Debug, Clone)]
struct Teammate {
    /// 1-based, unique in the team.
    index: usize,
    mode: Mode,
    mail: Mail,
    tool_turns: Vec<ScriptedTurn>,
    /// The lead's answers to its permission requests, in the order it asks.
    permissions: Vec<LeadActionKind>,
}

impl Teammate {
    fn name(&self) -> String {
        format!("mate-{}", self.index)
    }

    fn prompt(&self, seed: u64) -> String {
        format!("Explore as teammate {} of program {seed}.", self.index)
    }

    fn spawn(&self, seed: u64) -> ScriptedToolCall {
        let mut input = json!({
            "description": self.name(),
            "name": self.name(),
            "team_name": TEAM,
            "prompt": self.prompt(seed),
        });
        if self.mode != Mode::Default {
            input["mode"] = json!(self.mode.as_str());
        }
        call("Agent", input)
    }

    fn script(&self, seed: u64) -> AgentScript {
        let mut turns = self.tool_turns.clone();
        let short = Latency::Uniform {
            min_ms: 500,
            max_ms: 2_000,
        };
        turns.push(ScriptedTurn {
            text: Some(format!("Teammate {} is done.", self.index)),
            latency: short,
            ..ScriptedTurn::default()
        });
        if self.mail != Mail::None {
            turns.push(ScriptedTurn {
                text: Some(format!("Teammate {} read the lead's mail.", self.index)),
                latency: short,
                ..ScriptedTurn::default()
            });
        }
        AgentScript {
            prompt: self.prompt(seed),
            recorded_prompt: None,
            turns: turns.into(),
            count: None,
        }
    }
}

/// The calls of one teammate turn, and the lead's answers to the permission
/// requests they make. Writes into `/etc` are drawn only where the lead is asked
/// (and always denies them): a mode that writes without asking would rightly land
/// them outside the workspace.
fn teammate_calls(
    draw: &mut Draw,
    index: usize,
    mode: Mode,
) -> (Vec<ScriptedToolCall>, Vec<LeadActionKind>) {
    let asks = mode == Mode::Default;
    match draw.below(5) {
        0 | 1 => (vec![read_only(draw)], Vec::new()),
        2 => (
            vec![call(
                "Write",
                json!({
                    "file_path": format!("/work/src/explore/mate_{index}.rs"),
                    "content": format!("pub const MATE: u32 = {index};\n"),
                }),
            )],
            if asks {
                vec![LeadActionKind::ApprovePermission]
            } else {
                Vec::new()
            },
        ),
        3 if matches!(mode, Mode::Default | Mode::Plan) => (
            vec![call(
                "Write",
                json!({
                    "file_path": format!("/etc/cron.d/explore-{index}"),
                    "content": "* * * * * root true\n",
                }),
            )],
            if asks {
                vec![LeadActionKind::DenyPermission]
            } else {
                Vec::new()
            },
        ),
        _ => (
            vec![call(
                "ScratchpadWrite",
                json!({ "key": format!("mate-{index}/notes"), "content": "draft" }),
            )],
            Vec::new(),
        ),
    }
}

/// The team part of a program.
pub(super) struct Team {
    teammates: Vec<Teammate>,
}

impl Team {
    /// Draws one to three teammates and what the lead sends them.
    pub(super) fn draw(draw: &mut Draw) -> Team {
        let count = 1 + draw.below(TEAMMATES_MAX) as usize;
        let broadcast = draw.chance(1, 4);
        let teammates = (1..=count)
            .map(|index| {
                let mode = match draw.below(8) {
                    0..=3 => Mode::Default,
                    4 | 5 => Mode::Plan,
                    6 => Mode::AcceptEdits,
                    _ => Mode::BypassPermissions,
                };
                let mail = if broadcast {
                    Mail::Broadcast
                } else {
                    match draw.below(3) {
                        0 => Mail::None,
                        1 if mode == Mode::Plan => Mail::PlanApproval,
                        _ => Mail::Direct,
                    }
                };
                let mut tool_turns = Vec::new();
                let mut permissions = Vec::new();
                for _ in 0..draw.below(TEAMMATE_TOOL_TURNS_MAX + 1) {
                    let (calls, answers) = teammate_calls(draw, index, mode);
                    tool_turns.push(tool_turn(calls, draw.latency_ms(500, 1_500)));
                    permissions.extend(answers);
                }
                Teammate {
                    index,
                    mode,
                    mail,
                    tool_turns,
                    permissions,
                }
            })
            .collect();
        Team { teammates }
    }

    /// The Agent calls that spawn the team.
    pub(super) fn spawns(&self, seed: u64) -> Vec<ScriptedToolCall> {
        self.teammates.iter().map(|mate| mate.spawn(seed)).collect()
    }

    /// The coordinator's turns for the team's mail, to be played as turns
    /// `mail_turn`, `mail_turn + 1`, … of its script, each one model call after the
    /// other (no `when` before them), and the lead's harness acts to go with them.
    ///
    /// The mail turn's response takes [`TEAM_GAP_MS`], so every teammate idles when
    /// its mail arrives. [`FILLER_TURNS`] turns follow that only let time pass
    /// (SyntheticOutput, [`FILLER_MS`] each), and the shutdown requests go out once
    /// the coordinator has made its call after the last of them. Swarm
    /// fails only the coordinator's calls 1 to 3, and the runtime's retry of each
    /// counts as a call, so the mail turn is answered by call `mail_turn + 3` at the
    /// latest; call `mail_turn + 4` is then a filler after the mail whatever failed,
    /// and the shutdowns follow the mail by at least one filler: time for every
    /// teammate to take its mail before the request lands in its mailbox.
    /// Without mail the shutdowns are asked for at once: a running teammate reads
    /// its request when it next idles.
    pub(super) fn lead_turns(
        &self,
        seed: u64,
        mail_turn: u32,
    ) -> (Vec<ScriptedTurn>, Vec<LeadAction>) {
        let mut mail = Vec::new();
        if self
            .teammates
            .iter()
            .any(|mate| mate.mail == Mail::Broadcast)
        {
            mail.push(call(
                "SendMessage",
                json!({ "to": "*", "summary": "wrap up", "message": "Wrap up and report." }),
            ));
        }
        for mate in &self.teammates {
            match mate.mail {
                Mail::Direct => mail.push(call(
                    "SendMessage",
                    json!({
                        "to": mate.name(),
                        "summary": "one more thing",
                        "message": format!("Teammate {}: check the tests too.", mate.index),
                    }),
                )),
                Mail::PlanApproval => mail.push(call(
                    "SendMessage",
                    json!({
                        "to": mate.name(),
                        "message": {
                            "type": "plan_approval_response",
                            "request_id": format!("plan_approval-1767225600000@t{:08}", mate.index),
                            "approve": true,
                        },
                    }),
                )),
                Mail::None | Mail::Broadcast => {}
            }
        }
        if mail.is_empty() {
            return (Vec::new(), self.lead_actions(1));
        }
        let mut turns = vec![tool_turn(mail, Latency::Fixed { ms: TEAM_GAP_MS })];
        for filler in 1..=FILLER_TURNS {
            turns.push(tool_turn(
                vec![call(
                    "SyntheticOutput",
                    json!({ "output": { "program": seed, "team": TEAM, "waited": filler } }),
                )],
                Latency::Fixed { ms: FILLER_MS },
            ));
        }
        let shutdown_after_call = mail_turn + FILLER_TURNS + 1;
        (turns, self.lead_actions(shutdown_after_call))
    }

    /// The lead's harness acts: every permission answer from the start, and each
    /// shutdown request once the coordinator has made `shutdown_after_call` calls.
    fn lead_actions(&self, shutdown_after_call: u32) -> Vec<LeadAction> {
        let mut actions = Vec::new();
        for mate in &self.teammates {
            for answer in &mate.permissions {
                actions.push(LeadAction {
                    after_call: 1,
                    after_ms: 0,
                    team: TEAM.to_owned(),
                    member: mate.name(),
                    action: *answer,
                    // Every permission a teammate of these programs asks is a Write's.
                    tool: Some("Write".to_owned()),
                    message: None,
                });
            }
        }
        for mate in &self.teammates {
            actions.push(LeadAction {
                after_call: shutdown_after_call,
                after_ms: 0,
                team: TEAM.to_owned(),
                member: mate.name(),
                action: LeadActionKind::Shutdown,
                tool: None,
                message: None,
            });
        }
        actions
    }

    /// Whether a teammate asks the lead before its destructive calls.
    pub(super) fn asks_lead(&self) -> bool {
        self.teammates.iter().any(|mate| mate.mode == Mode::Default)
    }

    pub(super) fn scripts(&self, seed: u64) -> Vec<AgentScript> {
        self.teammates
            .iter()
            .map(|mate| mate.script(seed))
            .collect()
    }

    /// One notification per teammate, when it ends after agreeing to shut down.
    pub(super) fn notifications(&self) -> usize {
        self.teammates.len()
    }
}
