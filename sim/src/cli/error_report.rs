//! How a command that could not finish is reported: its message, its exit status,
//! and with `--json` an `error` object on stdout.
//!
//! Exit statuses (also in `docs/cli.md`):
//!
//! | status | meaning |
//! | --- | --- |
//! | 0 | success: every check passed |
//! | 1 | a check failed (an invariant was violated) |
//! | 2 | bad input or usage: the command could not run |
//! | 70 | a bug in coordsim: an unexpected panic ([`INTERNAL_ERROR_STATUS`], sysexits' `EX_SOFTWARE`) |
//! | 130, 143 | a sweep stopped by SIGINT or SIGTERM, after printing what ran ([`super::interrupt`]) |
//! | 141 | standard output was closed by its reader ([`super::stdout`]) |
//!
//! Never 101, Rust's status for a panic: [`install_panic_hook`] records where a
//! panic happened, and the command line catches it and reports it as status 70.
//!
//! An error is printed once per cause: `anyhow`'s `{:#}` repeats a cause that an
//! error's own message already holds (`cannot read x: No such file or directory (os
//! error 2): No such file or directory (os error 2)`), so [`message`] walks the
//! chain and skips every cause the text so far already says.
//!
//! With `--json`, stdout receives one object whatever went wrong, so a consumer
//! always reads valid JSON:
//!
//! ```json
//! {"error": {"kind": "bad_input", "message": "…", "path": "a.toml", "line": 3, "column": 7}}
//! ```
//!
//! `kind` is `usage` (the arguments), `bad_input` (a file or value the command
//! refused) or `internal` (a panic); `path`, `line` and `column` are `null` where
//! the error does not name them.

use std::any::Any;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use serde::Serialize;

use super::output_file::OutputFileError;
use super::stdout::{errln, write_stdout, StdoutError, CLOSED_STDOUT_STATUS};

/// The exit status of bad input or usage.
pub const BAD_INPUT_STATUS: u8 = 2;
/// The exit status of an unexpected panic: sysexits' `EX_SOFTWARE`, an internal
/// software error.
pub const INTERNAL_ERROR_STATUS: u8 = 70;

/// What kind of error ended the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments did not parse.
    Usage,
    /// A file or value the command refused.
    BadInput,
    /// A panic: a bug in coordsim.
    Internal,
}

/// The `error` object of `--json` output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorObject {
    /// What kind of error.
    pub kind: ErrorKind,
    /// The whole message, each cause once.
    pub message: String,
    /// The file the error is about, when it names one.
    pub path: Option<String>,
    /// The 1-based line in that file, when known.
    pub line: Option<usize>,
    /// The 1-based column in that line, when known.
    pub column: Option<usize>,
}

impl ErrorObject {
    /// The error object of `error`, its file and position read from the typed errors
    /// in its chain.
    pub fn of(kind: ErrorKind, error: &anyhow::Error) -> ErrorObject {
        let (path, line, column) = location(error);
        ErrorObject {
            kind,
            message: message(error),
            path,
            line,
            column,
        }
    }

    /// `{"error": {...}}` on one line.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Wrapper<'a> {
            error: &'a ErrorObject,
        }
        serde_json::to_string(&Wrapper { error: self })
            .expect("an error object is strings and numbers")
    }
}

/// The error's message with each cause once: a cause whose text the message so far
/// already holds (because an outer error printed its source) is skipped.
pub fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += &part;
    }
    text
}

/// The file, line and column the first located error in the chain names.
fn location(error: &anyhow::Error) -> (Option<String>, Option<usize>, Option<usize>) {
    use coord_sim::cassette::CassetteError;
    use coord_sim::cost::PricingError;
    use coord_sim::import::ImportError;
    use coord_sim::scenario::ScenarioError;
    use coord_sim::sweep::SweepError;

    let shown = |path: &Path| Some(path.display().to_string());
    let cassette = |error: &CassetteError| match error {
        CassetteError::Read { path, .. } | CassetteError::Write { path, .. } => {
            (shown(path), None, None)
        }
        CassetteError::Invalid {
            path, line, column, ..
        } => (shown(path), Some(*line), Some(*column)),
        _ => (None, None, None),
    };
    let scenario = |error: &ScenarioError| match error {
        ScenarioError::Read { path, .. } => (shown(path), None, None),
        ScenarioError::Invalid {
            path, line, column, ..
        } => (shown(path), Some(*line), Some(*column)),
        ScenarioError::Cassette(error) => cassette(error),
        ScenarioError::DuplicateName { second, .. } => (shown(second), Some(1), Some(1)),
    };
    for cause in error.chain() {
        // A transparent error forwards its `source()` past the error it wraps, so the
        // wrappers are unpacked here.
        let found = if let Some(error) = cause.downcast_ref::<ScenarioError>() {
            scenario(error)
        } else if let Some(error) = cause.downcast_ref::<SweepError>() {
            match error {
                SweepError::Discover { path, .. } => (Some(path.clone()), None, None),
                SweepError::Scenario(error) => scenario(error),
                _ => continue,
            }
        } else if let Some(error) = cause.downcast_ref::<CassetteError>() {
            match cassette(error) {
                (None, ..) => continue,
                found => found,
            }
        } else if let Some(error) = cause.downcast_ref::<ImportError>() {
            match error {
                ImportError::Read { path, .. } | ImportError::NoPrompt { path } => {
                    (shown(path), None, None)
                }
                ImportError::Malformed { path, line, .. } => (shown(path), Some(*line), None),
                _ => continue,
            }
        } else if let Some(error) = cause.downcast_ref::<PricingError>() {
            match error {
                PricingError::Read { path, .. } => (shown(path), None, None),
                PricingError::Invalid {
                    source_name,
                    line,
                    column,
                    ..
                } => (Some(source_name.clone()), Some(*line), Some(*column)),
                _ => continue,
            }
        } else if let Some(error) = cause.downcast_ref::<OutputFileError>() {
            (shown(error.path()), None, None)
        } else {
            continue;
        };
        return found;
    }
    (None, None, None)
}

/// Reports `error`, which ended a command, and returns its exit status: quietly 141
/// for a closed stdout, else the message on stderr (and the `error` object on stdout
/// with `--json`) and 2.
pub fn report_error(error: &anyhow::Error, json: bool) -> ExitCode {
    if let Some(StdoutError::Closed) = error.downcast_ref() {
        return ExitCode::from(CLOSED_STDOUT_STATUS);
    }
    let object = ErrorObject::of(ErrorKind::BadInput, error);
    errln!("coordsim: error: {}", object.message);
    if json {
        // Stdout may be the very thing that failed; stderr has the message anyway.
        let _ = write_stdout(&(object.to_json() + "\n"));
    }
    ExitCode::from(BAD_INPUT_STATUS)
}

/// Reports a command line clap refused (or the help and version it was asked
/// for), and returns its exit status: 0 for help and version (141 when stdout was
/// closed), else 2.
pub fn report_usage(error: &clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind as ClapKind;
    let asked_for_text = matches!(
        error.kind(),
        ClapKind::DisplayHelp
            | ClapKind::DisplayVersion
            | ClapKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if asked_for_text && error.exit_code() == 0 {
        // Help and version go to stdout, and end as any output does when its
        // reader has gone.
        return match write_stdout(&error.render().to_string()) {
            Err(StdoutError::Closed) => ExitCode::from(CLOSED_STDOUT_STATUS),
            _ => ExitCode::SUCCESS,
        };
    }
    // clap prints the message, its tip and the usage line, in colour on a terminal.
    let _ = error.print();
    if json {
        let object = ErrorObject {
            kind: ErrorKind::Usage,
            message: usage_message(error),
            path: None,
            line: None,
            column: None,
        };
        let _ = write_stdout(&(object.to_json() + "\n"));
    }
    ExitCode::from(BAD_INPUT_STATUS)
}

/// The first line of clap's message, without its `error: ` prefix.
fn usage_message(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// Where and why the last panic happened, kept by the hook for the report.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Keeps the place and message of every panic for [`report_panic`], then lets the
/// hook that was there before print it as usual (a panic the simulator catches on
/// purpose is still shown, as it always was).
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let place = info
            .location()
            .map(|location| format!(" at {}:{}", location.file(), location.line()))
            .unwrap_or_default();
        let text = format!("{}{place}", payload_text(info.payload()));
        *LAST_PANIC
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(text);
        previous(info);
    }));
}

/// The panic's message, when it carries text.
fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Reports a panic that ended the command, and returns status 70.
pub fn report_panic(payload: &(dyn Any + Send), json: bool) -> ExitCode {
    let recorded = LAST_PANIC
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .take();
    // The hook saw every panic, caught ones too: its last record is this panic's
    // (with its place) only when it carries the same message.
    let message = payload_text(payload);
    let what = recorded
        .filter(|recorded| recorded.starts_with(&message))
        .unwrap_or(message);
    let object = ErrorObject {
        kind: ErrorKind::Internal,
        message: format!("internal error (a bug in coordsim, please report it): {what}"),
        path: None,
        line: None,
        column: None,
    };
    errln!("coordsim: {}", object.message);
    if json {
        let _ = write_stdout(&(object.to_json() + "\n"));
    }
    ExitCode::from(INTERNAL_ERROR_STATUS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        // Goal: the doubled `os error 2` of issue 24 is printed once; a cause the
        // message does not hold is still appended.
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read x.toml: {source}")]
        struct Repeating {
            source: std::io::Error,
        }
        let error = anyhow::Error::new(Repeating { source: io });
        assert_eq!(message(&error), "cannot read x.toml: No such file");
        let context = anyhow::anyhow!("inner cause").context("outer step");
        assert_eq!(message(&context), "outer step: inner cause");
    }

    #[test]
    fn the_error_object_is_one_json_line_with_every_key() {
        // Goal: the `--json` error shape is stable: every key, null where unknown.
        let object = ErrorObject::of(ErrorKind::BadInput, &anyhow::anyhow!("bad"));
        assert_eq!(
            object.to_json(),
            r#"{"error":{"kind":"bad_input","message":"bad","path":null,"line":null,"column":null}}"#
        );
    }
}
