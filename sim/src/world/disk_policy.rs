//! The disk's fault hook: the verdict a disk asks for before every operation.
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
//! [`MemDisk`](super::MemDisk) and [`RootedRealDisk`](super::RootedRealDisk) consult
//! the policy; the fault engine's
//! [`ScheduledDiskFaults`](crate::fault::ScheduledDiskFaults) is the one a run
//! installs, so this module holds only the interface both sides share.
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

use std::fmt;
use std::io;
use std::path::Path;

use rand_chacha::rand_core::RngCore;

/// Linux error numbers the simulated disks report. `EIO`, `ENOSPC`, `ENOTDIR` and
/// `EISDIR` have the same values on the BSDs and macOS; `ELOOP` does not.
pub(crate) mod errno {
    /// I/O error.
    pub const EIO: i32 = 5;
    /// No space left on device.
    pub const ENOSPC: i32 = 28;
    /// Not a directory.
    pub const ENOTDIR: i32 = 20;
    /// Is a directory.
    pub const EISDIR: i32 = 21;
    /// Bad file descriptor: a read of a file opened for writing only, or the reverse.
    pub const EBADF: i32 = 9;
    /// Invalid argument: an open that asks for no access at all.
    pub const EINVAL: i32 = 22;
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

/// Decides the fate of every operation of a simulated disk.
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
