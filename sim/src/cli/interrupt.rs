//! SIGINT and SIGTERM: a sweep that is asked to stop ends with the summary of what ran.
//!
//! [`Interrupt::install`] replaces the default action of both signals (which kills
//! the process at once, losing every failure found so far) with a flag. Sweeps read
//! the flag through [`Interrupt::signal`] before they start each seed: once it is
//! set they start no new seed, let the running ones finish, print what ran marked
//! `interrupted`, and exit with `128 + signal` (130 for SIGINT, 143 for SIGTERM), the
//! status a shell gives a command the signal killed.
//!
//! A second signal, for a seed that takes too long to finish, ends the process at
//! once with the same status and prints nothing more.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// Set by the first SIGINT or SIGTERM; arms the immediate exit on the second.
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// The number of the last signal received, 0 before any.
static SIGNAL_NUMBER: AtomicUsize = AtomicUsize::new(0);

/// A termination signal a sweep stops for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, a CI runner's timeout).
    Terminate,
}

impl Signal {
    /// The exit status of a command this signal stopped: `128 + signal number`.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.exit_status())
    }

    /// `128 + signal number`, as a byte: 130 for SIGINT, 143 for SIGTERM.
    pub fn exit_status(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    /// The signal's name, as the reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// The process's termination signals, routed to a flag.
#[derive(Debug, Clone, Copy)]
pub struct Interrupt;

impl Interrupt {
    /// Routes SIGINT and SIGTERM to the flag (and a second one to an immediate exit).
    /// Called once per process, by the sweeps; registering again adds nothing.
    pub fn install() -> std::io::Result<Interrupt> {
        static INSTALLED: std::sync::OnceLock<Result<(), std::io::ErrorKind>> =
            std::sync::OnceLock::new();
        let installed = INSTALLED.get_or_init(|| {
            for (signal, status) in [(SIGINT, 130), (SIGTERM, 143)] {
                // The shutdown is registered first, so it sees the flag as the
                // previous signal left it: only a second signal exits at once.
                signal_hook::flag::register_conditional_shutdown(signal, status, &SIGNALLED)
                    .and_then(|_| {
                        signal_hook::flag::register_usize(signal, &SIGNAL_NUMBER, signal as usize)
                    })
                    .and_then(|_| signal_hook::flag::register(signal, &SIGNALLED))
                    .map_err(|error| error.kind())?;
            }
            Ok(())
        });
        match installed {
            Ok(()) => Ok(Interrupt),
            Err(kind) => Err(std::io::Error::new(
                *kind,
                "cannot install the SIGINT and SIGTERM handlers",
            )),
        }
    }

    /// The signal received, if any: the sweep should start no new seed.
    pub fn signal(self) -> Option<Signal> {
        if !SIGNALLED.load(Ordering::SeqCst) {
            return None;
        }
        match SIGNAL_NUMBER.load(Ordering::SeqCst) as i32 {
            SIGTERM => Some(Signal::Terminate),
            _ => Some(Signal::Interrupt),
        }
    }
}
