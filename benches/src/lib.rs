//! Criterion benches for coordsim; the benches themselves are in `benches/`.
//!
//! `cargo bench -p coord-benches` runs them all:
//!
//! - `envelope`: render and parse throughput of `<task-notification>` envelopes.
//! - `mailbox`: locked mailbox appends per second with 1 and 8 contending writers.

use coord_runtime::envelope::{Envelope, EnvelopeStatus, EnvelopeUsage, EnvelopeWorktree};

/// A fully populated envelope whose result is `result_bytes` long and full of
/// characters that need escaping, the expensive case for the codec.
pub fn sample_envelope(result_bytes: usize) -> Envelope {
    let line = "fn check(a: &T) -> bool { a.expiry <= now && \"ok\" != 'x' }\n";
    let result: String = line.chars().cycle().take(result_bytes).collect();
    Envelope {
        task_id: "a3kx9zq2".into(),
        tool_use_id: Some("toolu_01ABCDEFGHIJKLMNOPQRSTUV".into()),
        output_file: Some("/tmp/session/tasks/a3kx9zq2.output".into()),
        status: EnvelopeStatus::Completed,
        summary: "Agent \"Find auth bug\" completed".into(),
        result: Some(result),
        usage: Some(EnvelopeUsage {
            total_tokens: 48_211,
            tool_uses: 17,
            duration_ms: 93_000,
        }),
        worktree: Some(EnvelopeWorktree {
            path: "/repo/.claude/worktrees/auth-fix".into(),
            branch: "worktree-auth-fix".into(),
        }),
        note: None,
        extra: Default::default(),
    }
}
