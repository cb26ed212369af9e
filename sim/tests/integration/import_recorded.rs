//! What an imported session replays as its recording did: compactions at their
//! recorded points with their recorded summaries, prompt rewrites, background
//! shells whose notifications arrive where they were recorded, and the list of
//! what the import cannot reproduce.
//!
//! The expected points were read from the fixture transcripts independently of
//! the importer: the `compact_boundary` lines (754 in `4d5611e5`, 1256 in
//! `258c7280`) and the response each precedes; the requests that read back only
//! the client's head (21,460 tokens in `258c7280`, of responses 32 and 150,
//! lines 498 and 1848, counting from 1); and the `backgroundTaskId` of each `Bash`
//! result with the response its `<task-notification>` came before.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use coord_runtime::session::{COMPACT_INSTRUCTION, CONTINUATION_PREAMBLE};
use coord_runtime::world::{
    BoxFuture, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse,
};
use coord_sim::fidelity::measure;
use coord_sim::import::{import_claude_code, CompactionSummary, Imported};
use coord_sim::run::{run_seed_with_model_layer, RunOptions};
use coord_sim::scenario::LoadedScenario;

use crate::repo_root;

fn spotter(name: &str) -> PathBuf {
    repo_root().join("fixtures/claude-code/spotter").join(name)
}

const SESSION_4D: &str = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl";
const SESSION_25: &str = "258c7280-ae70-4798-800f-63464d01a85d.jsonl";

/// Every request the runtime sent, as the model received it.
#[derive(Debug)]
struct Recorder {
    inner: Arc<dyn Model>,
    requests: Arc<Mutex<Vec<Arc<ModelRequest>>>>,
}

impl Model for Recorder {
    fn send(
        &self,
        request: Arc<ModelRequest>,
    ) -> BoxFuture<'static, Result<ModelResponse, ModelError>> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.send(request)
    }

    fn compaction_wanted(&self, messages: &[Message]) -> Option<bool> {
        self.inner.compaction_wanted(messages)
    }
}

/// Runs seed 0 of `imported`'s scenario and returns the requests the model received.
fn requests_received(imported: &Imported) -> Vec<Arc<ModelRequest>> {
    let loaded = LoadedScenario::parse(Path::new("s.toml"), &imported.toml).unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let layer = {
        let requests = requests.clone();
        move |inner: Arc<dyn Model>, _clock| -> Arc<dyn Model> {
            Arc::new(Recorder {
                inner,
                requests: requests.clone(),
            })
        }
    };
    let run = run_seed_with_model_layer(&loaded, 0, &RunOptions::default(), &layer).unwrap();
    assert!(run.failures.is_empty(), "{:?}", run.failures);
    let received = requests.lock().unwrap().clone();
    received
}

fn first_text(message: &Message) -> &str {
    match message.content.first() {
        Some(ContentBlock::Text { text, .. }) => text,
        _ => "",
    }
}

fn ends_with_instruction(request: &ModelRequest) -> bool {
    request.messages.last().and_then(|m| m.content.last())
        == Some(&ContentBlock::text(COMPACT_INSTRUCTION))
}

/// The one compaction of `4d5611e5`: its main thread's boundary of line 754 and
/// its compaction agent's transcript.
fn main_thread_compaction() -> CompactionSummary {
    CompactionSummary {
        agent: "main".into(),
        line: 754,
        trigger: "auto".into(),
        pre_tokens: 170_251,
        transcript: Some("acompact-e1f845".into()),
        before_response: Some(61),
    }
}

#[test]
fn a_recorded_compaction_replays_at_its_point_with_its_summary_and_request() {
    // Goal: the boundary of line 754 and the agent-acompact-e1f845 transcript
    // become one compaction before the main thread's 62nd response: the model
    // receives a compaction request of the conversation after the 61st response,
    // and the next request is the continuation message with the recorded summary.
    // Method: the requests are those the model received, not what the runtime
    // journaled.
    let imported = import_claude_code(&spotter(SESSION_4D)).unwrap();
    assert_eq!(imported.summary.compactions, [main_thread_compaction()]);
    assert!(imported.summary.unpaired_subagents.is_empty());
    let turns = &imported.scenario.coordinator.turns;
    let compacted: Vec<usize> = (0..turns.len())
        .filter(|&i| turns[i].compact_before.is_some())
        .collect();
    assert_eq!(compacted, [61]);
    let compaction = turns[61].compact_before.as_ref().unwrap();
    assert!(compaction.summary.starts_with("Analysis:\n"));
    let usage = compaction.usage.expect("the compaction agent's usage");
    assert_eq!(
        (
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens
        ),
        (164_830, 8_681)
    );

    let requests = requests_received(&imported);
    let prompt = &imported.scenario.coordinator.prompt;
    let main: Vec<&Arc<ModelRequest>> = requests
        .iter()
        .filter(|r| {
            let first = r.messages.first().map(first_text).unwrap_or("");
            first == prompt || first.starts_with(CONTINUATION_PREAMBLE)
        })
        .collect();
    let compactions: Vec<usize> = (0..main.len())
        .filter(|&i| ends_with_instruction(main[i]))
        .collect();
    assert_eq!(compactions, [61], "after the main thread's 61 requests");
    // The compaction request is the conversation as sent, plus the instruction.
    let before = &main[60].messages;
    assert_eq!(
        &main[61].messages[..before.len() - 1],
        &before[..before.len() - 1]
    );
    let after = &main[62].messages;
    let continuation = first_text(&after[0]);
    assert!(continuation.starts_with(&format!("{CONTINUATION_PREAMBLE}{}", compaction.summary)));
}

#[test]
fn prompt_rewrites_are_the_requests_that_read_back_only_the_client_head() {
    // Goal: the two requests of 258c7280 that read back 21,460 tokens of a prompt
    // the previous request had cached whole are marked as rewrites, the compaction
    // is not one, and the client's head is the 21,460 tokens they read.
    let imported = import_claude_code(&spotter(SESSION_25)).unwrap();
    let turns = &imported.scenario.coordinator.turns;
    let rewritten: Vec<usize> = (0..turns.len())
        .filter(|&i| turns[i].prompt_rewritten)
        .collect();
    assert_eq!(rewritten, [31, 149]);
    assert_eq!(imported.summary.adaptations.prompt_rewrites, 2);
    let head = imported.scenario.coordinator.recorded_prompt.unwrap();
    assert_eq!(head.head_tokens, Some(21_460));
    // The subagent's requests never fell back: no rewrite, no known head.
    let worker = imported.scenario.workers[0].recorded_prompt.unwrap();
    assert_eq!(worker.head_tokens, None);
}

#[test]
fn background_shells_finish_where_their_notifications_were_recorded() {
    // Goal: the two Bash calls of 258c7280 the user moved to the background by
    // hand (responses 13 and 28) run in the background and finish before the
    // requests of responses 32 and 150, which received their notifications; the
    // background shell of tool_heavy the recording never heard from again runs in
    // the foreground.
    let imported = import_claude_code(&spotter(SESSION_25)).unwrap();
    let turns = &imported.scenario.coordinator.turns;
    let gated: Vec<(usize, usize, bool)> = turns
        .iter()
        .enumerate()
        .flat_map(|(i, t)| t.tool_calls.iter().map(move |c| (i, c)))
        .filter_map(|(i, call)| {
            let background = call.input.get("run_in_background") == Some(&true.into());
            Some((i, call.finishes_before_step?, background))
        })
        .collect();
    assert_eq!(gated, [(12, 31, true), (27, 149, true)]);
    assert_eq!(imported.summary.adaptations.shells_backgrounded, 2);

    let tool_heavy = import_claude_code(&spotter("tool_heavy.jsonl")).unwrap();
    let first = &tool_heavy.scenario.coordinator.turns[0].tool_calls[0];
    assert_eq!(first.name, "Bash");
    assert_eq!(first.input.get("run_in_background"), None);
    assert_eq!(first.finishes_before_step, None);
    assert_eq!(tool_heavy.summary.adaptations.shells_foreground, 1);

    // In the replay, the notifications reach the main thread with those requests:
    // the envelopes of the model's requests, as received.
    let requests = requests_received(&imported);
    let prompt = &imported.scenario.coordinator.prompt;
    let mut delivered = Vec::new();
    let mut index = 0;
    for request in &requests {
        let first = request.messages.first().map(first_text).unwrap_or("");
        if !(first == prompt || first.starts_with(CONTINUATION_PREAMBLE)) {
            continue;
        }
        if ends_with_instruction(request) {
            continue;
        }
        let envelopes = request
            .messages
            .last()
            .into_iter()
            .flat_map(|m| &m.content)
            .filter(|b| matches!(b, ContentBlock::Text { text, .. } if text.contains("<task-notification>") && text.contains("Background command")))
            .count();
        if envelopes > 0 {
            delivered.push(index);
        }
        index += 1;
    }
    assert_eq!(delivered, [31, 149]);
}

#[test]
fn the_import_summary_lists_what_it_cannot_reproduce() {
    // Goal: what `coordsim import` prints for each fixture session: the
    // compactions it replays and every part of the recording the replay does not
    // reproduce, one line each.
    for name in [
        "short.jsonl",
        "tool_heavy.jsonl",
        "subagent.jsonl",
        SESSION_4D,
        SESSION_25,
    ] {
        let imported = import_claude_code(&spotter(name)).unwrap();
        insta::with_settings!({ snapshot_suffix => name.trim_end_matches(".jsonl") }, {
            insta::assert_snapshot!(imported.summary.report());
        });
    }
}

/// A copy of `4d5611e5` in `dir` whose Explore subagent (`a2898e3`) also compacted:
/// a `compact_boundary` and its summary before the subagent's second response, and a
/// compaction transcript of its own (`acompact-b00001`, the main thread's with its
/// id and times moved to just before that boundary). Returns the main file.
fn session_with_a_subagent_compaction(dir: &Path) -> PathBuf {
    use serde_json::{json, Value};
    let source = spotter(SESSION_4D);
    let main = dir.join(SESSION_4D);
    std::fs::copy(&source, &main).unwrap();
    let subagents_from = source.with_extension("").join("subagents");
    let subagents = main.with_extension("").join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    for entry in std::fs::read_dir(&subagents_from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), subagents.join(entry.file_name())).unwrap();
    }
    let lines = |path: &Path| -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let write = |path: &Path, lines: &[Value]| {
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(path, text.join("\n") + "\n").unwrap();
    };
    // The subagent's line 22 (the last result of its first response's parallel
    // calls, 16:02:55.748) is followed by its second response (16:02:57.873): the
    // compaction goes between them.
    let explore = subagents.join("agent-a2898e3.jsonl");
    let mut thread = lines(&explore);
    let before = thread[21]["uuid"].as_str().unwrap().to_owned();
    assert_eq!(thread[22]["parentUuid"], before.as_str());
    let boundary = json!({
        "parentUuid": null, "logicalParentUuid": before, "isSidechain": true,
        "agentId": "a2898e3", "sessionId": thread[21]["sessionId"], "type": "system",
        "subtype": "compact_boundary", "content": "Conversation compacted",
        "timestamp": "2026-02-12T16:02:57.000Z", "uuid": "b0000000-0000-4000-8000-000000000001",
        "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
    });
    let summary = json!({
        "parentUuid": "b0000000-0000-4000-8000-000000000001", "isSidechain": true,
        "agentId": "a2898e3", "sessionId": thread[21]["sessionId"], "type": "user",
        "isCompactSummary": true, "timestamp": "2026-02-12T16:02:57.001Z",
        "uuid": "b0000000-0000-4000-8000-000000000002",
        "message": {"role": "user", "content": format!(
            "{CONTINUATION_PREAMBLE}Explored SessionLive and the transcript components."
        )},
    });
    thread[22]["parentUuid"] = json!("b0000000-0000-4000-8000-000000000002");
    thread.splice(22..22, [boundary, summary]);
    write(&explore, &thread);
    // Its compaction agent: the main thread's, moved to the seconds before.
    let mut compaction = lines(&subagents.join("agent-acompact-e1f845.jsonl"));
    for (index, line) in compaction.iter_mut().enumerate() {
        line["agentId"] = json!("acompact-b00001");
        line["timestamp"] = json!(format!("2026-02-12T16:02:56.{:03}Z", 100 + 50 * index));
    }
    write(&subagents.join("agent-acompact-b00001.jsonl"), &compaction);
    main
}

#[test]
fn a_subagents_compaction_is_paired_with_its_own_transcript_and_replayed() {
    // Goal: a compaction recorded in a subagent's transcript replays in that
    // worker, before the response it preceded, with its summary and its own
    // compaction agent's usage; the main thread keeps its own compaction and
    // transcript. Method: 4d5611e5 doctored so that its Explore subagent also
    // compacted (`session_with_a_subagent_compaction`), imported and run; the
    // worker's requests are those the model received.
    let dir = tempfile::tempdir().unwrap();
    let imported = import_claude_code(&session_with_a_subagent_compaction(dir.path())).unwrap();
    assert_eq!(
        imported.summary.compactions,
        [
            CompactionSummary {
                agent: "a2898e3".into(),
                line: 23,
                trigger: "auto".into(),
                pre_tokens: 150_000,
                transcript: Some("acompact-b00001".into()),
                before_response: Some(1),
            },
            main_thread_compaction(),
        ]
    );
    assert!(imported.summary.unpaired_subagents.is_empty());
    assert!(
        !imported
            .summary
            .not_reproduced
            .iter()
            .any(|line| line.contains("compaction")),
        "{:?}",
        imported.summary.not_reproduced
    );
    let worker = &imported.scenario.workers[0];
    let compacted: Vec<usize> = (0..worker.turns.len())
        .filter(|&i| worker.turns[i].compact_before.is_some())
        .collect();
    assert_eq!(compacted, [1]);
    let compaction = worker.turns[1].compact_before.as_ref().unwrap();
    assert_eq!(
        compaction.summary,
        "Explored SessionLive and the transcript components."
    );
    let usage = compaction.usage.expect("its own compaction agent's usage");
    assert_eq!(usage.cache_read_input_tokens, 164_830);
    // The main thread's compaction is still its own, at its own point.
    let main_turns = &imported.scenario.coordinator.turns;
    assert!(main_turns[61].compact_before.is_some());

    let requests = requests_received(&imported);
    let prompt = &worker.prompt;
    let explore: Vec<&Arc<ModelRequest>> = requests
        .iter()
        .filter(|r| {
            let first = r.messages.first().map(first_text).unwrap_or("");
            first == prompt
                || first.starts_with(CONTINUATION_PREAMBLE) && first.contains("SessionLive")
        })
        .collect();
    let compactions: Vec<usize> = (0..explore.len())
        .filter(|&i| ends_with_instruction(explore[i]))
        .collect();
    assert_eq!(compactions, [1], "after the worker's first request");
    let continuation = first_text(&explore[2].messages[0]);
    assert!(continuation.starts_with(&format!("{CONTINUATION_PREAMBLE}{}", compaction.summary)));

    // `replay --fidelity` gives the worker's compaction a row of its own, named by
    // its transcript, whose one item (the compaction, in its place) replays. Its
    // usage is the main thread's, moved: the cache figures are not compared.
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, &imported.toml).unwrap();
    let (report, _) = measure(&LoadedScenario::load(&scenario).unwrap(), 0).unwrap();
    let names: Vec<&str> = report.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["main", "acompact-e1f845", "a2898e3", "acompact-b00001"]
    );
    for agent in &report.agents {
        let sequence = agent.sequence.as_ref().unwrap();
        assert!(
            sequence.matches(),
            "{}: {:?}",
            agent.name,
            sequence.first_divergence
        );
    }
}
