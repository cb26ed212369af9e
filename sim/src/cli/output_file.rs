//! The one writer behind every `-o FILE` flag (`import`, `shrink`, `record`).
//!
//! A command's output file must never cost the user a file:
//!
//! - an existing file is refused unless `--force` is given;
//! - the command's own inputs (for a scenario, [`scenario_inputs`]) are always
//!   refused, `--force` or not, however they are spelled (`./a.toml`, a hard link);
//! - a symbolic link at the output path is refused, never followed: writing
//!   through it would replace whatever file it points at;
//! - the text goes to a temporary file in the output's folder, is synced, and is
//!   renamed into place, so a failed or interrupted write leaves the old file (or
//!   none) and never a truncated one. Without `--force` the rename refuses to
//!   replace a file that appeared in the meantime.
//!
//! Commands call [`OutputFile::check`] before their work, so a long shrink or
//! recording is not run only to be refused, and [`OutputFile::write`] at the end,
//! which checks again.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why an output file was refused or could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputFileError {
    /// The file exists and `--force` was not given.
    #[error("{}: the file exists; pass --force to replace it", path.display())]
    Exists {
        /// The output path.
        path: PathBuf,
    },
    /// The output is one of the command's inputs.
    #[error("{}: is the input {}; the output must be another file", path.display(), input.display())]
    IsInput {
        /// The output path.
        path: PathBuf,
        /// The input it resolves to.
        input: PathBuf,
    },
    /// A symbolic link is at the output path.
    #[error("{}: is a symbolic link; refusing to write through it", path.display())]
    Symlink {
        /// The output path.
        path: PathBuf,
    },
    /// Something other than a regular file is at the output path.
    #[error("{}: is not a regular file", path.display())]
    NotAFile {
        /// The output path.
        path: PathBuf,
    },
    /// The temporary file could not be made, written, synced or renamed.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The output path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl OutputFileError {
    /// The output path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            OutputFileError::Exists { path }
            | OutputFileError::IsInput { path, .. }
            | OutputFileError::Symlink { path }
            | OutputFileError::NotAFile { path }
            | OutputFileError::Write { path, .. } => path,
        }
    }
}

/// An output path, the inputs it must not be, and whether it may replace a file.
#[derive(Debug, Clone)]
pub struct OutputFile {
    path: PathBuf,
    inputs: Vec<PathBuf>,
    force: bool,
}

impl OutputFile {
    /// The output `path` of a command reading `inputs`; `force` lets it replace an
    /// existing file (never an input, never through a symbolic link).
    pub fn new(path: &Path, inputs: &[&Path], force: bool) -> OutputFile {
        OutputFile {
            path: path.to_owned(),
            inputs: inputs.iter().map(|input| input.to_path_buf()).collect(),
            force,
        }
    }

    /// The output also refuses to be any of `inputs`.
    pub fn and_inputs(mut self, inputs: impl IntoIterator<Item = PathBuf>) -> OutputFile {
        self.inputs.extend(inputs);
        self
    }

    /// The output path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses the output path if writing it now would lose a file.
    pub fn check(&self) -> Result<(), OutputFileError> {
        let path = || self.path.clone();
        let metadata = match std::fs::symlink_metadata(&self.path) {
            Ok(metadata) => metadata,
            // Nothing there: nothing to lose (a missing folder fails at write time).
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(OutputFileError::Write {
                    path: path(),
                    source,
                })
            }
        };
        if metadata.file_type().is_symlink() {
            return Err(OutputFileError::Symlink { path: path() });
        }
        if let Some(input) = self
            .inputs
            .iter()
            .find(|input| same_file(input, &self.path))
        {
            return Err(OutputFileError::IsInput {
                path: path(),
                input: input.clone(),
            });
        }
        if !metadata.is_file() {
            return Err(OutputFileError::NotAFile { path: path() });
        }
        if !self.force {
            return Err(OutputFileError::Exists { path: path() });
        }
        Ok(())
    }

    /// Writes `contents` to the output path: checked, then a synced temporary file
    /// in the same folder renamed into place.
    pub fn write(&self, contents: &[u8]) -> Result<(), OutputFileError> {
        self.check()?;
        let failed = |source: std::io::Error| OutputFileError::Write {
            path: self.path.clone(),
            source,
        };
        let folder = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".coordsim-").suffix(".tmp");
        // A temporary file is private (0600); the output is an ordinary file, so it
        // gets the mode `std::fs::write` would give it (0666 less the umask).
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let mut temporary = builder.tempfile_in(folder).map_err(failed)?;
        temporary
            .write_all(contents)
            .and_then(|()| temporary.as_file().sync_all())
            .map_err(failed)?;
        let persisted = if self.force {
            temporary.persist(&self.path)
        } else {
            temporary.persist_noclobber(&self.path)
        };
        match persisted {
            Ok(_) => {}
            Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(OutputFileError::Exists {
                    path: self.path.clone(),
                })
            }
            Err(error) => return Err(failed(error.error)),
        }
        // The rename is durable once the folder is synced; a folder that cannot be
        // opened for syncing (some platforms) still holds the renamed file.
        if let Ok(folder) = std::fs::File::open(folder) {
            let _ = folder.sync_all();
        }
        Ok(())
    }
}

/// The files a run of `scenario` reads: the scenario file, the cassette it replays
/// and the session it was imported from. None of them may be a command's output.
pub fn scenario_inputs(scenario: &coord_sim::scenario::LoadedScenario) -> Vec<PathBuf> {
    let folder = scenario.path.parent().unwrap_or(Path::new(""));
    let mut inputs = vec![scenario.path.clone()];
    if let Some(cassette) = &scenario.scenario.model.cassette {
        inputs.push(folder.join(cassette));
    }
    if let Some(recording) = &scenario.scenario.recording {
        inputs.push(recording.source_from(&scenario.path));
    }
    inputs
}

/// Whether `input` and `output` are the same file: the same resolved path, or (on
/// Unix) the same device and inode, which also catches hard links.
fn same_file(input: &Path, output: &Path) -> bool {
    let (Ok(input_meta), Ok(output_meta)) = (std::fs::metadata(input), std::fs::metadata(output))
    else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if (input_meta.dev(), input_meta.ino()) == (output_meta.dev(), output_meta.ino()) {
            return true;
        }
    }
    let _ = (input_meta, output_meta);
    matches!(
        (input.canonicalize(), output.canonicalize()),
        (Ok(input), Ok(output)) if input == output
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_is_kept_without_force_and_replaced_with_it() {
        // Goal: no file is replaced by accident; --force replaces it whole.
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.toml");
        std::fs::write(&out, "old").unwrap();
        let error = OutputFile::new(&out, &[], false).write(b"new").unwrap_err();
        assert!(matches!(error, OutputFileError::Exists { .. }), "{error}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
        OutputFile::new(&out, &[], true).write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }

    #[test]
    fn the_input_and_a_symlink_are_refused_even_with_force() {
        // Goal: --force never overwrites an input, nor writes through a link.
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.toml");
        std::fs::write(&input, "input").unwrap();
        let spelled = dir.path().join(".").join("in.toml");
        let error = OutputFile::new(&spelled, &[&input], true)
            .write(b"x")
            .unwrap_err();
        assert!(matches!(error, OutputFileError::IsInput { .. }), "{error}");
        #[cfg(unix)]
        {
            let link = dir.path().join("link.toml");
            std::os::unix::fs::symlink(&input, &link).unwrap();
            let error = OutputFile::new(&link, &[], true).write(b"x").unwrap_err();
            assert!(matches!(error, OutputFileError::Symlink { .. }), "{error}");
        }
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "input");
    }
}
