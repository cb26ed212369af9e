//! Standard output and error that a closed reader cannot turn into a panic.
//!
//! `println!` panics when stdout is a pipe whose reader has gone (`coordsim run … |
//! head -1`): Rust ignores SIGPIPE, so the write fails with `EPIPE` instead of
//! killing the process. Every line the commands print goes through [`outln!`] (or
//! [`write_stdout`]), which turns that failure into [`StdoutError::Closed`]; the
//! command stops there and `coordsim` exits quietly with status 141, the status of a
//! command SIGPIPE killed (`128 + 13`), as `cat` or `grep` would end. Messages on
//! stderr go through [`errln!`], which drops what cannot be written: there is nobody
//! left to tell.

use std::io::Write;

/// The exit status of a command whose standard output was closed under it.
pub const CLOSED_STDOUT_STATUS: u8 = 141;

/// Why standard output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum StdoutError {
    /// The reader closed the pipe: the command stops quietly.
    #[error("standard output was closed")]
    Closed,
    /// Any other failure (a full disk under a redirection, …).
    #[error("cannot write to standard output: {0}")]
    Write(std::io::Error),
}

impl From<std::io::Error> for StdoutError {
    fn from(error: std::io::Error) -> StdoutError {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            StdoutError::Closed
        } else {
            StdoutError::Write(error)
        }
    }
}

/// Writes `text` to stdout and flushes it, so a closed pipe shows at once.
pub fn write_stdout(text: &str) -> Result<(), StdoutError> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Writes one formatted line to stdout: `outln!(...)?` where `println!` would be.
macro_rules! outln {
    () => {
        $crate::cli::stdout::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes one formatted line to stderr, dropping it if stderr cannot be written.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub(crate) use {errln, outln};
