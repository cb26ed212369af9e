//! A rule-based disk fault policy for the disk tests: each rule gives its verdict to
//! the operations it matches, every time or only the nth time. Runs install the
//! fault engine's `ScheduledDiskFaults`; these tests only need the disks to carry
//! out verdicts, wherever they come from.

use coord_sim::world::{DiskFaultPolicy, DiskOp, DiskRequest, Verdict};

/// One rule: an operation, a path suffix, and on which match it fires.
#[derive(Debug)]
pub struct DiskRule {
    op: DiskOp,
    path_suffix: &'static str,
    nth: Option<u64>,
    verdict: Verdict,
    matched_count: u64,
}

impl DiskRule {
    /// `verdict` for every `op` on a path ending with `path_suffix`.
    pub fn always(op: DiskOp, path_suffix: &'static str, verdict: Verdict) -> Self {
        Self {
            op,
            path_suffix,
            nth: None,
            verdict,
            matched_count: 0,
        }
    }

    /// `verdict` for the `nth` (from 1) `op` on a path ending with `path_suffix`.
    pub fn nth(nth: u64, op: DiskOp, path_suffix: &'static str, verdict: Verdict) -> Self {
        Self {
            nth: Some(nth),
            ..Self::always(op, path_suffix, verdict)
        }
    }
}

/// The rules, first firing rule wins; counts the faults given.
#[derive(Debug, Default)]
pub struct DiskRules {
    rules: Vec<DiskRule>,
    /// The requests that got a verdict other than `Pass`, in order.
    pub faulted: Vec<(DiskOp, std::path::PathBuf, Verdict)>,
}

impl DiskRules {
    /// A policy of `rules`.
    pub fn new(rules: impl IntoIterator<Item = DiskRule>) -> Self {
        Self {
            rules: rules.into_iter().collect(),
            faulted: Vec::new(),
        }
    }
}

impl DiskFaultPolicy for DiskRules {
    fn decide(&mut self, request: &DiskRequest<'_>) -> Verdict {
        let mut verdict = Verdict::Pass;
        for rule in &mut self.rules {
            let matches =
                rule.op == request.op && request.path.to_string_lossy().ends_with(rule.path_suffix);
            if !matches {
                continue;
            }
            rule.matched_count += 1;
            let fires = rule.nth.is_none_or(|nth| nth == rule.matched_count);
            if fires && verdict == Verdict::Pass {
                verdict = rule.verdict;
            }
        }
        if verdict != Verdict::Pass {
            self.faulted
                .push((request.op, request.path.to_owned(), verdict));
        }
        verdict
    }
}
