//! What stops a running sweep early, and how it prints as it goes.
//!
//! A sweep (`run`, `check-determinism`, `explore`) prints each failure as it is
//! found, through [`SweepControl::print`], and asks [`SweepControl::should_stop`]
//! before it starts each seed. It stops for two reasons: a SIGINT or SIGTERM
//! ([`super::interrupt`]), after which it prints the summary of what ran, marked
//! interrupted, and exits 130 or 143; or a stdout that can no longer be written (its
//! reader has gone), after which nothing more can be said and it exits 141.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use super::interrupt::{Interrupt, Signal};
use super::stdout::{write_stdout, StdoutError};

/// The stop conditions of one sweep, shared by its threads.
#[derive(Debug)]
pub struct SweepControl {
    interrupt: Interrupt,
    output_failed: AtomicBool,
    output_error: Mutex<Option<StdoutError>>,
}

/// How a sweep ended, besides its own report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepEnd {
    /// Every seed ran.
    Complete,
    /// A signal stopped it before its last seed.
    Interrupted(Signal),
}

impl SweepEnd {
    /// `, interrupted by SIGINT` for the summary line; empty for a complete sweep.
    pub fn note(self) -> String {
        match self {
            SweepEnd::Complete => String::new(),
            SweepEnd::Interrupted(signal) => format!(", INTERRUPTED by {}", signal.name()),
        }
    }

    /// Whether a signal stopped the sweep.
    pub fn interrupted(self) -> bool {
        matches!(self, SweepEnd::Interrupted(_))
    }
}

impl SweepControl {
    /// Routes SIGINT and SIGTERM to this sweep.
    pub fn install() -> anyhow::Result<SweepControl> {
        Ok(SweepControl {
            interrupt: Interrupt::install()?,
            output_failed: AtomicBool::new(false),
            output_error: Mutex::new(None),
        })
    }

    /// Whether the sweep should start no new seed.
    pub fn should_stop(&self) -> bool {
        self.interrupt.signal().is_some() || self.output_failed.load(Ordering::SeqCst)
    }

    /// Prints `line` and a newline; a failure to write stops the sweep, and is
    /// returned by [`SweepControl::finish`].
    pub fn print(&self, line: &str) {
        if self.output_failed.load(Ordering::SeqCst) {
            return;
        }
        if let Err(error) = write_stdout(&format!("{line}\n")) {
            self.output_failed.store(true, Ordering::SeqCst);
            let mut kept = self
                .output_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            kept.get_or_insert(error);
        }
    }

    /// How the sweep ended, once its seeds are done: an error when stdout failed,
    /// else whether a signal cut it short (`stopped_early` is the sweep's own word).
    pub fn finish(self, stopped_early: bool) -> Result<SweepEnd, StdoutError> {
        if let Some(error) = self
            .output_error
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(error);
        }
        Ok(match self.interrupt.signal() {
            Some(signal) if stopped_early => SweepEnd::Interrupted(signal),
            _ => SweepEnd::Complete,
        })
    }
}
