//! The checkers catch what they are for. Method: hand them traces that break each
//! invariant, built the way a run records them.

use coord_runtime::envelope::EnvelopeStatus;
use coord_sim::check::check_all;
use coord_sim::trace::{digest_hex, SimEvent, TraceEntry};

fn entry(time_ms: u64, actor: &str, event: SimEvent) -> TraceEntry {
    TraceEntry {
        time_ms,
        actor: actor.to_owned(),
        event: serde_json::to_string(&event).unwrap(),
    }
}

fn spawned(task_id: &str, result: &str) -> TraceEntry {
    entry(
        0,
        task_id,
        SimEvent::Spawned {
            task_id: task_id.to_owned(),
            expected_status: EnvelopeStatus::Completed,
            expected_result_digest: digest_hex(result),
        },
    )
}

fn delivered(time_ms: u64, task_id: &str, result: &str) -> TraceEntry {
    entry(
        time_ms,
        "coordinator",
        SimEvent::Delivered {
            task_id: task_id.to_owned(),
            status: EnvelopeStatus::Completed,
            result_digest: Some(digest_hex(result)),
        },
    )
}

#[test]
fn a_clean_trace_has_no_violation() {
    // Goal: no false alarms on a run that did everything right.
    let trace = vec![spawned("a00000001", "ok"), delivered(10, "a00000001", "ok")];
    assert!(check_all(&trace).is_empty());
}

#[test]
fn a_duplicate_delivery_breaks_notify_once() {
    // Goal: invariant 1 catches an envelope delivered twice, naming both times.
    let trace = vec![
        spawned("a00000001", "ok"),
        delivered(10, "a00000001", "ok"),
        delivered(20, "a00000001", "ok"),
    ];
    let violations = check_all(&trace);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].invariant, "notify-once");
    assert!(
        violations[0].detail.contains("[10, 20]"),
        "{}",
        violations[0].detail
    );
}

#[test]
fn a_missing_delivery_breaks_notify_once() {
    // Goal: invariant 1 catches a task whose notification never arrived.
    let violations = check_all(&[spawned("a00000001", "ok")]);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].invariant, "notify-once");
    assert!(violations[0].detail.contains("0 times"));
}

#[test]
fn a_forged_or_altered_envelope_breaks_no_forgery() {
    // Goal: invariant 2 catches an envelope for a task nobody spawned, and one whose
    // result is not its worker's text.
    let trace = vec![
        spawned("a00000001", "real"),
        delivered(10, "a00000001", "altered"),
        delivered(11, "a00000000", "grant all"),
    ];
    let invariants: Vec<_> = check_all(&trace)
        .into_iter()
        .filter(|v| v.invariant == "no-forgery")
        .map(|v| v.detail)
        .collect();
    assert_eq!(invariants.len(), 2, "{invariants:?}");
    assert!(invariants[1].contains("unknown task a00000000"));
}

#[test]
fn a_lost_acknowledged_message_breaks_mailbox_durability() {
    // Goal: invariant 5 catches an acknowledged message missing from the final inbox.
    let trace = vec![
        entry(
            5,
            "a00000001",
            SimEvent::MailboxAcked {
                from: "a00000001".into(),
                message_digest: digest_hex("hello"),
            },
        ),
        entry(
            9,
            "coordinator",
            SimEvent::InboxFinal {
                message_digests: vec![],
            },
        ),
    ];
    let violations = check_all(&trace);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].invariant, "mailbox-durability");
    assert!(violations[0].detail.contains("acknowledged at 5 ms"));
}
