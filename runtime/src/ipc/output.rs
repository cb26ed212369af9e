//! Task output files: one producer appends, the coordinator reads incrementally.
//!
//! The file is created with `O_CREAT | O_EXCL | O_NOFOLLOW` and appended with
//! `O_APPEND | O_NOFOLLOW`, so a symlink planted at the path makes the open fail and
//! its target is never touched. The file never grows past its cap: the output that
//! fits is kept, followed by one truncation marker, and later output is dropped.

use crate::probe::Probe;
use std::io;
use std::path::{Path, PathBuf};

use crate::event::RuntimeEvent;
use crate::world::{FileKind, FileMeta, World};

/// Default cap on an output file's size: 5 GiB.
pub const OUTPUT_SIZE_BYTES_MAX_DEFAULT: u64 = 5 * 1024 * 1024 * 1024;
/// Default cap on one incremental read: 8 MiB.
pub const OUTPUT_READ_BYTES_MAX_DEFAULT: u64 = 8 * 1024 * 1024;

/// Limits of task output files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputLimits {
    /// The most bytes a file may hold, marker included. Default 5 GiB.
    pub size_bytes_max: u64,
    /// The most bytes one incremental read returns. Default 8 MiB.
    pub read_bytes_max: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            size_bytes_max: OUTPUT_SIZE_BYTES_MAX_DEFAULT,
            read_bytes_max: OUTPUT_READ_BYTES_MAX_DEFAULT,
        }
    }
}

/// What goes at the end of a file that reached its cap.
pub fn truncation_marker(size_bytes_max: u64) -> String {
    format!("\n[output truncated: the task wrote more than {size_bytes_max} bytes]\n")
}

/// Why an output file operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// A symlink sits at the output path. Nothing was written through it.
    #[error("refusing the symlink at task output path {path}")]
    SymlinkRefused {
        /// The output path.
        path: PathBuf,
    },
    /// A file already exists at the output path.
    #[error("task output file {path} already exists")]
    AlreadyExists {
        /// The output path.
        path: PathBuf,
    },
    /// The cap is too small to hold even the truncation marker.
    #[error("output size cap of {size_bytes_max} bytes is smaller than the truncation marker")]
    CapTooSmall {
        /// The cap asked for.
        size_bytes_max: u64,
    },
    /// Any other I/O failure (ENOSPC, EIO, …).
    #[error("task output {path}: {source}")]
    Io {
        /// The output path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Turns an I/O error at `path` into the clearest [`OutputError`]: a symlink at the
/// path (`ELOOP` from `O_NOFOLLOW`, or `EEXIST` from `O_EXCL`) is named as such.
fn classify(world: &World, path: &Path, source: io::Error) -> OutputError {
    let symlink_at_path = matches!(
        world.disk.metadata(path),
        Ok(meta) if meta.kind == FileKind::Symlink
    );
    if symlink_at_path {
        Probe::OutputSymlinkRefused.reach(&*world.journal);
        OutputError::SymlinkRefused {
            path: path.to_owned(),
        }
    } else if source.kind() == io::ErrorKind::AlreadyExists {
        OutputError::AlreadyExists {
            path: path.to_owned(),
        }
    } else {
        OutputError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// What [`OutputWriter::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Everything was written.
    Written,
    /// This append reached the cap: its head was written, then the marker.
    Truncated {
        /// Bytes of this append that were kept.
        kept_bytes: u64,
    },
    /// The file was already truncated; nothing was written.
    Dropped,
}

/// The producer side of one task output file.
#[derive(Debug)]
pub struct OutputWriter {
    world: World,
    path: PathBuf,
    size_bytes_max: u64,
    marker: String,
    size_bytes: u64,
    truncated: bool,
}

impl OutputWriter {
    /// Creates the output file at `path` (and its directory), which must not exist.
    pub fn create(world: &World, path: &Path, limits: OutputLimits) -> Result<Self, OutputError> {
        let marker = truncation_marker(limits.size_bytes_max);
        if limits.size_bytes_max < marker.len() as u64 {
            return Err(OutputError::CapTooSmall {
                size_bytes_max: limits.size_bytes_max,
            });
        }
        if let Some(dir) = path.parent() {
            world
                .disk
                .create_dir_all(dir)
                .map_err(|source| classify(world, path, source))?;
        }
        world
            .disk
            .create_new(path, b"")
            .map_err(|source| classify(world, path, source))?;
        Ok(Self {
            world: world.clone(),
            path: path.to_owned(),
            size_bytes_max: limits.size_bytes_max,
            marker,
            size_bytes: 0,
            truncated: false,
        })
    }

    /// Opens the existing output file at `path` to append more. A file that already
    /// ends with the truncation marker stays truncated.
    pub fn open(world: &World, path: &Path, limits: OutputLimits) -> Result<Self, OutputError> {
        let meta = world
            .disk
            .metadata(path)
            .map_err(|source| classify(world, path, source))?;
        if meta.kind == FileKind::Symlink {
            Probe::OutputSymlinkRefused.reach(&*world.journal);
            return Err(OutputError::SymlinkRefused {
                path: path.to_owned(),
            });
        }
        Self::open_existing(world, path, limits, meta)
    }

    /// Opens the existing output file at `path` like [`OutputWriter::open`], but
    /// without looking for a symlink at the path first: the writer relies on the
    /// disk honouring `O_NOFOLLOW`. Only for the `follow-symlinks` defect.
    #[cfg(feature = "defects")]
    pub fn open_trusting_nofollow(
        world: &World,
        path: &Path,
        limits: OutputLimits,
    ) -> Result<Self, OutputError> {
        let meta = world
            .disk
            .metadata(path)
            .map_err(|source| classify(world, path, source))?;
        Self::open_existing(world, path, limits, meta)
    }

    /// The writer for the file at `path`, whose metadata `meta` was just read.
    fn open_existing(
        world: &World,
        path: &Path,
        limits: OutputLimits,
        meta: FileMeta,
    ) -> Result<Self, OutputError> {
        let marker = truncation_marker(limits.size_bytes_max);
        let marker_bytes = marker.len() as u64;
        let tail = if meta.len_bytes >= marker_bytes {
            world
                .disk
                .read_at(path, meta.len_bytes - marker_bytes, marker_bytes)
                .map_err(|source| classify(world, path, source))?
        } else {
            Vec::new()
        };
        Ok(Self {
            world: world.clone(),
            path: path.to_owned(),
            size_bytes_max: limits.size_bytes_max,
            truncated: tail == marker.as_bytes(),
            marker,
            size_bytes: meta.len_bytes,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file, marker included.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Whether the cap was reached.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Appends `bytes`, keeping the file within its cap.
    pub fn append(&mut self, bytes: &[u8]) -> Result<AppendOutcome, OutputError> {
        if self.truncated {
            return Ok(AppendOutcome::Dropped);
        }
        let marker_bytes = self.marker.len() as u64;
        let fits_whole = self.size_bytes + bytes.len() as u64 + marker_bytes <= self.size_bytes_max;
        if fits_whole {
            self.write(bytes)?;
            return Ok(AppendOutcome::Written);
        }
        // Keep what fits in front of the marker, so the file ends exactly at the cap.
        let room_bytes = self.size_bytes_max - marker_bytes - self.size_bytes;
        let kept_bytes = room_bytes.min(bytes.len() as u64);
        let mut tail = Vec::with_capacity(kept_bytes as usize + self.marker.len());
        tail.extend_from_slice(&bytes[..kept_bytes as usize]);
        tail.extend_from_slice(self.marker.as_bytes());
        self.write(&tail)?;
        self.truncated = true;
        assert!(self.size_bytes <= self.size_bytes_max);
        self.world.journal.record(RuntimeEvent::OutputTruncated {
            path: self.path.clone(),
            size_bytes_max: self.size_bytes_max,
        });
        Probe::OutputCapped.reach(&*self.world.journal);
        Ok(AppendOutcome::Truncated { kept_bytes })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        let len_bytes = self
            .world
            .disk
            .append(&self.path, bytes)
            .map_err(|source| classify(&self.world, &self.path, source))?;
        self.size_bytes = len_bytes;
        Ok(())
    }
}

/// One incremental read of an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// Where the next read starts.
    pub next_offset_bytes: u64,
}

/// Reads up to `limits.read_bytes_max` bytes of the output file at `path` from
/// `offset_bytes`: the consumer side, which keeps its offset between reads.
pub fn read_output(
    world: &World,
    path: &Path,
    offset_bytes: u64,
    limits: OutputLimits,
) -> Result<OutputChunk, OutputError> {
    let bytes = world
        .disk
        .read_at(path, offset_bytes, limits.read_bytes_max)
        .map_err(|source| classify(world, path, source))?;
    let next_offset_bytes = offset_bytes + bytes.len() as u64;
    Ok(OutputChunk {
        bytes,
        next_offset_bytes,
    })
}
