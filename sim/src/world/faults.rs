//! Disk fault injection: the policy [`SimDisk`](super::SimDisk) consults before every
//! operation.
//!
//! A [`DiskFaultPolicy`] has one method, [`DiskFaultPolicy::decide`], which looks at a
//! [`DiskRequest`] (the operation, its path, how many bytes it writes) and returns a
//! [`Verdict`]:
//!
//! - [`Verdict::Pass`]: the operation runs normally.
//! - [`Verdict::Fail`]: the operation fails with the fault's error before it touches
//!   anything.
//! - [`Verdict::Torn`]: only for operations that write data ([`DiskOp::writes_data`]):
//!   the first `kept_bytes` of the write land (unsynced, like any write), then the
//!   call fails with `EIO`. A torn write is never acknowledged.
//!
//! [`DiskFaults`] is the policy the simulator installs. Its [`DiskFaultRule`]s are
//! evaluated in install order and the first one that fires wins, as turmoil's link
//! rules are. A rule fires either at a rate ([`Trigger::Rate`], a [`Ratio`]) or on
//! the nth operation it matches ([`Trigger::Nth`]: "fail the 3rd append under
//! `/session/tasks`"). Every rule that matches a request counts it and, for a rate
//! rule, draws from its own stream even when an earlier rule already fired; each rule
//! has its own stream (`faults/<index>` of the run's [`Streams`]). So the decisions
//! of one rule depend only on the seed and the requests it matched: adding a rule
//! never shifts another rule's draws, nor any other component's.
//!
//! # Errors the faults produce
//!
//! Faults surface as the errors the production [`RealDisk`](coord_runtime::world::RealDisk)
//! would return on Linux, built with `io::Error::from_raw_os_error`:
//!
//! | fault | errno | `io::ErrorKind` |
//! | --- | --- | --- |
//! | [`DiskFault::Eio`] (and every torn write) | `EIO` (5) | std's uncategorized kind: match on [`DiskFault::of`] or `raw_os_error()` |
//! | [`DiskFault::Enospc`] | `ENOSPC` (28) | [`io::ErrorKind::StorageFull`] |

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use rand_chacha::rand_core::RngCore;
use rand_chacha::ChaCha8Rng;

use super::streams::Streams;

/// Linux error numbers the simulated disk reports. `EIO` and `ENOSPC` have the same
/// values on the BSDs and macOS; `ELOOP` does not.
pub(crate) mod errno {
    /// I/O error.
    pub const EIO: i32 = 5;
    /// No space left on device.
    pub const ENOSPC: i32 = 28;
    /// Too many levels of symbolic links: what `O_NOFOLLOW` returns on a symlink.
    #[cfg(target_os = "linux")]
    pub const ELOOP: i32 = 40;
    /// Too many levels of symbolic links: what `O_NOFOLLOW` returns on a symlink.
    #[cfg(not(target_os = "linux"))]
    pub const ELOOP: i32 = 62;
}

/// The bytes of a write that land under `verdict`, and whether it was torn.
pub(crate) fn landed(bytes: &[u8], verdict: Verdict) -> (&[u8], bool) {
    match verdict {
        Verdict::Pass => (bytes, false),
        Verdict::Torn { kept_bytes } => {
            let kept = usize::try_from(kept_bytes).expect("kept_bytes <= a slice length");
            (&bytes[..kept], true)
        }
        Verdict::Fail(fault) => unreachable!("consult() returns {fault} as an error"),
    }
}

/// How many fault records [`DiskFaults::log`] keeps; later faults are only counted.
pub const FAULT_LOG_RECORDS_MAX: usize = 1 << 16;

/// A probability as `numerator / denominator`, never a float: the same ratio gives
/// the same decisions on every machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    numerator: u64,
    denominator: u64,
}

/// Why a [`Ratio`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RatioError {
    /// The denominator was zero.
    #[error("a ratio needs a non-zero denominator")]
    ZeroDenominator,
    /// The ratio was above one.
    #[error("ratio {numerator}/{denominator} is above 1")]
    AboveOne {
        /// The numerator given.
        numerator: u64,
        /// The denominator given.
        denominator: u64,
    },
}

impl Ratio {
    /// Probability zero.
    pub const NEVER: Ratio = Ratio {
        numerator: 0,
        denominator: 1,
    };
    /// Probability one.
    pub const ALWAYS: Ratio = Ratio {
        numerator: 1,
        denominator: 1,
    };

    /// `numerator / denominator`, which must lie in `[0, 1]`.
    pub fn new(numerator: u64, denominator: u64) -> Result<Ratio, RatioError> {
        if denominator == 0 {
            return Err(RatioError::ZeroDenominator);
        }
        if numerator > denominator {
            return Err(RatioError::AboveOne {
                numerator,
                denominator,
            });
        }
        Ok(Ratio {
            numerator,
            denominator,
        })
    }

    /// The numerator.
    pub const fn numerator(self) -> u64 {
        self.numerator
    }

    /// The denominator (never zero).
    pub const fn denominator(self) -> u64 {
        self.denominator
    }

    /// Draws once from `rng` and says whether the event happens. Always consumes
    /// draws, even for [`Ratio::NEVER`] and [`Ratio::ALWAYS`], so that changing a rate
    /// does not change how far its stream has advanced.
    pub fn sample(self, rng: &mut impl RngCore) -> bool {
        below(rng, self.denominator) < self.numerator
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.numerator, self.denominator)
    }
}

/// A uniform draw from `0..bound`, unbiased by rejection (as `Entropy::below`).
pub(crate) fn below(rng: &mut (impl RngCore + ?Sized), bound: u64) -> u64 {
    assert!(bound > 0, "a uniform draw needs a non-zero bound");
    let zone = u64::MAX - (u64::MAX % bound);
    // Each round is accepted with probability above 1/2; 64 rounds all rejected has
    // probability below 2^-64, so the bound only documents that the loop ends.
    for _ in 0..64 {
        let draw = rng.next_u64();
        if draw < zone {
            return draw % bound;
        }
    }
    panic!("64 rejected draws in a row: the random stream is broken");
}

/// The operations of [`Disk`](coord_runtime::world::Disk), one per trait method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DiskOp {
    /// `create_dir_all`.
    CreateDirAll,
    /// `create_new`.
    CreateNew,
    /// `append`.
    Append,
    /// `read_at`.
    ReadAt,
    /// `read`.
    Read,
    /// `replace_atomic`.
    ReplaceAtomic,
    /// `overwrite_in_place`.
    OverwriteInPlace,
    /// `rename`.
    Rename,
    /// `hard_link`.
    HardLink,
    /// `remove_file`.
    RemoveFile,
    /// `list_dir`.
    ListDir,
    /// `metadata`.
    Metadata,
    /// `sync_file`.
    SyncFile,
}

impl DiskOp {
    /// Every operation, in declaration order.
    pub const ALL: [DiskOp; 13] = [
        DiskOp::CreateDirAll,
        DiskOp::CreateNew,
        DiskOp::Append,
        DiskOp::ReadAt,
        DiskOp::Read,
        DiskOp::ReplaceAtomic,
        DiskOp::OverwriteInPlace,
        DiskOp::Rename,
        DiskOp::HardLink,
        DiskOp::RemoveFile,
        DiskOp::ListDir,
        DiskOp::Metadata,
        DiskOp::SyncFile,
    ];

    /// Whether the operation writes caller-supplied bytes, and so can be torn.
    pub const fn writes_data(self) -> bool {
        matches!(
            self,
            DiskOp::CreateNew | DiskOp::Append | DiskOp::ReplaceAtomic | DiskOp::OverwriteInPlace
        )
    }

    /// Whether the operation only reads file contents.
    pub const fn reads_data(self) -> bool {
        matches!(self, DiskOp::ReadAt | DiskOp::Read)
    }

    /// The trait method's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            DiskOp::CreateDirAll => "create_dir_all",
            DiskOp::CreateNew => "create_new",
            DiskOp::Append => "append",
            DiskOp::ReadAt => "read_at",
            DiskOp::Read => "read",
            DiskOp::ReplaceAtomic => "replace_atomic",
            DiskOp::OverwriteInPlace => "overwrite_in_place",
            DiskOp::Rename => "rename",
            DiskOp::HardLink => "hard_link",
            DiskOp::RemoveFile => "remove_file",
            DiskOp::ListDir => "list_dir",
            DiskOp::Metadata => "metadata",
            DiskOp::SyncFile => "sync_file",
        }
    }
}

impl fmt::Display for DiskOp {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Which operations a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpMatch {
    ops: BTreeSet<DiskOp>,
}

impl OpMatch {
    /// Every operation.
    pub fn any() -> Self {
        Self::of(DiskOp::ALL)
    }

    /// The operations that write data (see [`DiskOp::writes_data`]).
    pub fn data_writes() -> Self {
        Self::of(DiskOp::ALL.into_iter().filter(|op| op.writes_data()))
    }

    /// The operations that read file contents (see [`DiskOp::reads_data`]).
    pub fn data_reads() -> Self {
        Self::of(DiskOp::ALL.into_iter().filter(|op| op.reads_data()))
    }

    /// Just `op`.
    pub fn only(op: DiskOp) -> Self {
        Self::of([op])
    }

    /// The operations in `ops`.
    pub fn of(ops: impl IntoIterator<Item = DiskOp>) -> Self {
        Self {
            ops: ops.into_iter().collect(),
        }
    }

    /// Whether `op` is matched.
    pub fn contains(&self, op: DiskOp) -> bool {
        self.ops.contains(&op)
    }

    /// The matched operations, in order.
    pub fn iter(&self) -> impl Iterator<Item = DiskOp> + '_ {
        self.ops.iter().copied()
    }
}

/// Which paths a rule applies to. For `rename` and `hard_link` the path is the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// Every path.
    Any,
    /// Exactly this path.
    Exact(PathBuf),
    /// This path and everything beneath it (whole components: `/a` does not match `/ab`).
    Under(PathBuf),
    /// Paths whose file name ends with this text (`".json"`, `".lock"`).
    NameEndsWith(String),
}

impl PathMatch {
    /// Whether `path` is matched.
    pub fn matches(&self, path: &Path) -> bool {
        match self {
            PathMatch::Any => true,
            PathMatch::Exact(exact) => path == exact,
            PathMatch::Under(root) => path.starts_with(root),
            PathMatch::NameEndsWith(suffix) => path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with(suffix.as_str())),
        }
    }
}

/// A disk error the simulator can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DiskFault {
    /// `EIO`: the device reported an I/O error.
    Eio,
    /// `ENOSPC`: no space left on the device.
    Enospc,
}

impl DiskFault {
    /// The Linux error number.
    pub const fn errno(self) -> i32 {
        match self {
            DiskFault::Eio => errno::EIO,
            DiskFault::Enospc => errno::ENOSPC,
        }
    }

    /// The error an operation hit by this fault returns: the OS error itself, as the
    /// real disk would return it (`ENOSPC` has kind [`io::ErrorKind::StorageFull`]).
    pub fn to_io_error(self) -> io::Error {
        io::Error::from_raw_os_error(self.errno())
    }

    /// The fault an error stands for, if it is one of these.
    pub fn of(error: &io::Error) -> Option<DiskFault> {
        match error.raw_os_error()? {
            errno::EIO => Some(DiskFault::Eio),
            errno::ENOSPC => Some(DiskFault::Enospc),
            _ => None,
        }
    }
}

impl fmt::Display for DiskFault {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            DiskFault::Eio => "EIO",
            DiskFault::Enospc => "ENOSPC",
        })
    }
}

/// What happens to one disk operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It runs normally.
    Pass,
    /// It fails with this fault before touching anything.
    Fail(DiskFault),
    /// Only the first `kept_bytes` of its data land, then it fails with `EIO`. Only
    /// for operations that write data; `kept_bytes` is at most the write's length.
    Torn {
        /// Bytes of the write that land.
        kept_bytes: u64,
    },
}

/// One disk operation about to run, as a policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct DiskRequest<'a> {
    /// The operation.
    pub op: DiskOp,
    /// Its path (the source for `rename` and `hard_link`).
    pub path: &'a Path,
    /// Bytes it writes: the data length for [`DiskOp::writes_data`] operations, else 0.
    pub len_bytes: u64,
}

/// Decides the fate of every operation of a [`SimDisk`](super::SimDisk).
pub trait DiskFaultPolicy: Send + fmt::Debug {
    /// The verdict for `request`. Must return [`Verdict::Torn`] only for operations
    /// that write data, with `kept_bytes <= request.len_bytes`.
    fn decide(&mut self, request: &DiskRequest<'_>) -> Verdict;
}

/// Asks `policy` (if any) about one operation, for a disk that then carries out the
/// verdict: a failure comes back as the error, a torn write as the verdict.
///
/// # Panics
///
/// If the policy breaks its contract: a torn verdict for an operation that writes
/// no data, or one that keeps more bytes than the write has.
pub(crate) fn consult(
    policy: Option<&std::sync::Mutex<dyn DiskFaultPolicy>>,
    op: DiskOp,
    path: &Path,
    len_bytes: u64,
) -> io::Result<Verdict> {
    let Some(policy) = policy else {
        return Ok(Verdict::Pass);
    };
    let request = DiskRequest {
        op,
        path,
        len_bytes,
    };
    let verdict = policy
        .lock()
        .expect("fault policy poisoned")
        .decide(&request);
    match verdict {
        Verdict::Pass => Ok(Verdict::Pass),
        Verdict::Fail(fault) => Err(fault.to_io_error()),
        Verdict::Torn { kept_bytes } => {
            assert!(
                op.writes_data(),
                "torn verdict for {op}, which writes no data"
            );
            assert!(
                kept_bytes <= len_bytes,
                "torn verdict keeps {kept_bytes} of a {len_bytes}-byte write"
            );
            Ok(verdict)
        }
    }
}

/// When a rule fires, among the requests it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Each matched request independently, with this probability (drawn from the
    /// rule's own stream).
    Rate(Ratio),
    /// Only the nth matched request, counting from 1.
    Nth(u64),
}

/// How long the landed prefix of a torn write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornLength {
    /// This many bytes (or the whole write, if shorter).
    KeptBytes(u64),
    /// Drawn uniformly from `0..len` (a strict prefix) from the rule's stream.
    Drawn,
}

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultEffect {
    /// Fail the operation with this fault.
    Fail(DiskFault),
    /// Tear the write. Only for rules that match data-writing operations alone.
    Torn(TornLength),
}

/// One fault rule: which requests it matches, when it fires, and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFaultRule {
    /// The operations it matches.
    pub ops: OpMatch,
    /// The paths it matches.
    pub paths: PathMatch,
    /// When it fires among the requests it matches.
    pub trigger: Trigger,
    /// What it does when it fires.
    pub effect: FaultEffect,
}

impl DiskFaultRule {
    /// A rule that hits each matched request with probability `rate`.
    pub fn rate(rate: Ratio, ops: OpMatch, paths: PathMatch, effect: FaultEffect) -> Self {
        Self {
            ops,
            paths,
            trigger: Trigger::Rate(rate),
            effect,
        }
    }

    /// A rule that hits only the `nth` matched request (1-based).
    pub fn nth(nth: u64, ops: OpMatch, paths: PathMatch, effect: FaultEffect) -> Self {
        Self {
            ops,
            paths,
            trigger: Trigger::Nth(nth),
            effect,
        }
    }

    /// Whether this rule applies to `request`.
    pub fn matches(&self, request: &DiskRequest<'_>) -> bool {
        self.ops.contains(request.op) && self.paths.matches(request.path)
    }
}

/// Why a rule was refused by [`DiskFaults::install`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiskFaultRuleError {
    /// `Trigger::Nth(0)`: requests are counted from 1.
    #[error("Trigger::Nth counts from 1; Nth(0) would never fire")]
    NthZero,
    /// A torn-write rule that matches an operation writing no data.
    #[error("a torn-write rule matches {op}, which writes no data")]
    TornWithoutData {
        /// The first such operation.
        op: DiskOp,
    },
    /// A rule that matches no operation at all.
    #[error("the rule matches no operation")]
    NoOps,
}

/// One fault that fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRecord {
    /// Which request it was, counting every request the policy saw from 0.
    pub request_index: u64,
    /// The operation.
    pub op: DiskOp,
    /// The operation's path.
    pub path: PathBuf,
    /// The rule that fired (its install index).
    pub rule_index: usize,
    /// What the rule decided.
    pub verdict: Verdict,
}

#[derive(Debug)]
struct InstalledRule {
    rule: DiskFaultRule,
    matched_count: u64,
    rng: ChaCha8Rng,
}

/// The simulator's fault policy: rules in install order, first to fire wins, each
/// rule on its own seeded stream. With no rules every verdict is [`Verdict::Pass`].
#[derive(Debug)]
pub struct DiskFaults {
    streams: Streams,
    rules: Vec<InstalledRule>,
    requests_count: u64,
    faults_count: u64,
    log: Vec<FaultRecord>,
}

impl DiskFaults {
    /// A policy with no rules, whose rules will draw from `streams`.
    pub fn new(streams: &Streams) -> Self {
        Self {
            streams: *streams,
            rules: Vec::new(),
            requests_count: 0,
            faults_count: 0,
            log: Vec::new(),
        }
    }

    /// The stream name of rule `rule_index`: `faults/<index>`.
    pub fn rule_stream_name(rule_index: usize) -> String {
        format!("{}/{rule_index}", Streams::FAULTS)
    }

    /// Adds `rule` after the installed ones and returns its index.
    pub fn install(&mut self, rule: DiskFaultRule) -> Result<usize, DiskFaultRuleError> {
        if rule.trigger == Trigger::Nth(0) {
            return Err(DiskFaultRuleError::NthZero);
        }
        if rule.ops.iter().next().is_none() {
            return Err(DiskFaultRuleError::NoOps);
        }
        if let FaultEffect::Torn(_) = rule.effect {
            if let Some(op) = rule.ops.iter().find(|op| !op.writes_data()) {
                return Err(DiskFaultRuleError::TornWithoutData { op });
            }
        }
        let index = self.rules.len();
        let rng = self.streams.rng(&Self::rule_stream_name(index));
        self.rules.push(InstalledRule {
            rule,
            matched_count: 0,
            rng,
        });
        Ok(index)
    }

    /// [`DiskFaults::install`], builder style.
    pub fn with_rule(mut self, rule: DiskFaultRule) -> Result<Self, DiskFaultRuleError> {
        self.install(rule)?;
        Ok(self)
    }

    /// How many requests the policy has decided.
    pub fn requests_count(&self) -> u64 {
        self.requests_count
    }

    /// How many faults fired, including those past the log's cap.
    pub fn faults_count(&self) -> u64 {
        self.faults_count
    }

    /// The faults that fired, in order (at most [`FAULT_LOG_RECORDS_MAX`]).
    pub fn log(&self) -> &[FaultRecord] {
        &self.log
    }
}

impl DiskFaultPolicy for DiskFaults {
    fn decide(&mut self, request: &DiskRequest<'_>) -> Verdict {
        let request_index = self.requests_count;
        self.requests_count += 1;
        let mut decided: Option<(usize, Verdict)> = None;
        for (rule_index, installed) in self.rules.iter_mut().enumerate() {
            if !installed.rule.matches(request) {
                continue;
            }
            installed.matched_count += 1;
            // Every matching rate rule draws, fired or not, so that each rule's stream
            // advances with the requests it matched and nothing else.
            let fires = match installed.rule.trigger {
                Trigger::Rate(rate) => rate.sample(&mut installed.rng),
                Trigger::Nth(nth) => installed.matched_count == nth,
            };
            if !fires || decided.is_some() {
                continue;
            }
            let verdict = match installed.rule.effect {
                FaultEffect::Fail(fault) => Verdict::Fail(fault),
                FaultEffect::Torn(TornLength::KeptBytes(kept_bytes)) => Verdict::Torn {
                    kept_bytes: kept_bytes.min(request.len_bytes),
                },
                FaultEffect::Torn(TornLength::Drawn) => Verdict::Torn {
                    kept_bytes: if request.len_bytes == 0 {
                        0
                    } else {
                        below(&mut installed.rng, request.len_bytes)
                    },
                },
            };
            decided = Some((rule_index, verdict));
        }
        let Some((rule_index, verdict)) = decided else {
            return Verdict::Pass;
        };
        assert!(
            !matches!(verdict, Verdict::Torn { .. }) || request.op.writes_data(),
            "install() admits torn-write rules only for data-writing operations"
        );
        self.faults_count += 1;
        if self.log.len() < FAULT_LOG_RECORDS_MAX {
            self.log.push(FaultRecord {
                request_index,
                op: request.op,
                path: request.path.to_owned(),
                rule_index,
                verdict,
            });
        }
        verdict
    }
}
