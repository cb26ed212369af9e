//! `coordsim envelope parse|render`.
//!
//! `parse` prints every envelope found and a warning for every candidate it refused or
//! repaired (stderr in text mode, a `warnings` array with `--json`). `render` reads
//! envelopes as JSON and writes XML that parses back to them: an envelope that would
//! not (an empty task id, a duplicate key, an unknown key) is an error naming it, and
//! then nothing is written. It reads the JSON twice, once to check every envelope and
//! once to write, holding one envelope at a time, so its memory is the input plus one
//! envelope, whatever the number of envelopes.

use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use coord_runtime::envelope::{
    parse_block_with_warnings, render_to, Dialect, Envelope, EnvelopeWarning, ParsedBlock,
    RenderError,
};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::stdout::{errln, write_stdout, StdoutError};

#[derive(Debug, Subcommand)]
pub enum EnvelopeCommand {
    /// Find every `<task-notification>` in a text and print them.
    Parse {
        /// The text to read; `-` or nothing reads standard input.
        file: Option<PathBuf>,
        /// Print a JSON object: {"envelopes": [...], "warnings": [...]}.
        #[arg(long)]
        json: bool,
        /// Read the input as JSON Lines (a Claude Code transcript) and search the
        /// string values of every line. The default for files ending in `.jsonl`.
        #[arg(long)]
        jsonl: bool,
    },
    /// Render envelopes given as JSON (the shape `parse --json` prints) as XML.
    Render {
        /// The JSON to read (what `parse --json` prints, an array of envelopes, or one
        /// envelope); `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// Which wire dialect to write.
        #[arg(long, value_enum, default_value_t = DialectArg::ClaudeCode)]
        dialect: DialectArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DialectArg {
    /// Claude Code: a deadline expiry renders as `killed`.
    ClaudeCode,
    /// nexo-rs: a deadline expiry renders as `timeout`.
    Nexo,
}

impl From<DialectArg> for Dialect {
    fn from(arg: DialectArg) -> Dialect {
        match arg {
            DialectArg::ClaudeCode => Dialect::ClaudeCode,
            DialectArg::Nexo => Dialect::Nexo,
        }
    }
}

pub fn run(command: EnvelopeCommand) -> Result<ExitCode> {
    match command {
        EnvelopeCommand::Parse { file, json, jsonl } => {
            let jsonl = jsonl
                || file
                    .as_ref()
                    .is_some_and(|path| path.extension().is_some_and(|ext| ext == "jsonl"));
            parse(file, json, jsonl)
        }
        EnvelopeCommand::Render { file, dialect } => render_json(file, dialect.into()),
    }
}

/// Reads `file` (or stdin for `None` and `-`) as bytes, with the name to report it by.
fn read_bytes(file: Option<&PathBuf>) -> Result<(String, Vec<u8>)> {
    match file {
        Some(path) if path.as_os_str() != "-" => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            Ok((path.display().to_string(), bytes))
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
            Ok(("<stdin>".to_owned(), bytes))
        }
    }
}

/// Reads `file` (or stdin for `None` and `-`) as UTF-8 text.
fn read_input(file: Option<&PathBuf>) -> Result<(String, String)> {
    let (name, bytes) = read_bytes(file)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((name, text)),
        Err(error) => bail!(
            "{name} is not UTF-8 text (invalid byte at offset {})",
            error.utf8_error().valid_up_to()
        ),
    }
}

/// A warning as printed: where in the input, and what.
#[derive(Debug, serde::Serialize)]
struct PrintedWarning {
    /// `FILE:LINE:COLUMN` of the construct; for a `.jsonl` input, `FILE:LINE` of the
    /// transcript line, then the line and column inside the JSON string.
    at: String,
    #[serde(flatten)]
    warning: EnvelopeWarning,
}

/// What `parse --json` prints.
#[derive(serde::Serialize)]
struct ParseOutput<'a> {
    envelopes: &'a [Envelope],
    warnings: &'a [PrintedWarning],
}

fn parse(file: Option<PathBuf>, json: bool, jsonl: bool) -> Result<ExitCode> {
    let (name, text) = read_input(file.as_ref())?;
    let (envelopes, warnings) = if jsonl {
        envelopes_in_jsonl(&name, &text)?
    } else {
        let ParsedBlock {
            envelopes,
            warnings,
        } = parse_block_with_warnings(&text);
        let warnings = warnings
            .into_iter()
            .map(|warning| PrintedWarning {
                at: format!("{name}:{}:{}", warning.line, warning.column),
                warning,
            })
            .collect();
        (envelopes, warnings)
    };
    drop(text);
    let mut out = String::new();
    if json {
        let output = ParseOutput {
            envelopes: &envelopes,
            warnings: &warnings,
        };
        out = serde_json::to_string_pretty(&output)?;
        out.push('\n');
    } else {
        for warning in &warnings {
            errln!(
                "coordsim: warning: {}: {}",
                warning.at,
                warning.warning.message
            );
        }
        use std::fmt::Write as _;
        if envelopes.is_empty() {
            out.push_str("no envelopes\n");
        }
        for (index, envelope) in envelopes.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}. task {} {}: {}",
                index + 1,
                envelope.task_id,
                envelope.status,
                envelope.summary
            );
            if let Some(output_file) = &envelope.output_file {
                let _ = writeln!(out, "   output: {output_file}");
            }
            if let Some(note) = &envelope.note {
                let _ = writeln!(out, "   note: {note}");
            }
            if let Some(result) = &envelope.result {
                let _ = writeln!(out, "   result: {} bytes", result.len());
            }
            for (key, body) in &envelope.extra {
                let _ = writeln!(out, "   {key}: {body}");
            }
        }
    }
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Every envelope in the string values of a JSON Lines text, in line order, and the
/// warnings of each. A line that is not JSON is an error naming it: a transcript is
/// never half-read silently.
fn envelopes_in_jsonl(name: &str, text: &str) -> Result<(Vec<Envelope>, Vec<PrintedWarning>)> {
    fn strings<'v>(value: &'v serde_json::Value, found: &mut Vec<&'v str>) {
        match value {
            serde_json::Value::String(text) => found.push(text),
            serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, found)),
            serde_json::Value::Object(fields) => fields.values().for_each(|v| strings(v, found)),
            _ => {}
        }
    }
    let mut envelopes = Vec::new();
    let mut warnings = Vec::new();
    for (index, line) in text.lines().enumerate() {
        // A byte order mark opens some files written on Windows; it is not data.
        let line = if index == 0 {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{name}:{}:{}: not JSON: {e}", index + 1, e.column()))?;
        let mut found = Vec::new();
        strings(&value, &mut found);
        for text in found {
            if !text.contains("<task-notification") {
                continue;
            }
            let parsed = parse_block_with_warnings(text);
            envelopes.extend(parsed.envelopes);
            warnings.extend(parsed.warnings.into_iter().map(|warning| PrintedWarning {
                at: format!(
                    "{name}:{} (in a string, at {}:{})",
                    index + 1,
                    warning.line,
                    warning.column
                ),
                warning,
            }));
        }
    }
    Ok((envelopes, warnings))
}

/// Why `envelope render` refused its input.
#[derive(Debug, thiserror::Error)]
enum RenderInputError {
    /// The JSON is malformed, or an envelope in it does not deserialize or round-trip.
    #[error("{name}:{line}:{column}: {message}")]
    Invalid {
        name: String,
        line: usize,
        column: usize,
        message: String,
    },
}

fn render_json(file: Option<PathBuf>, dialect: Dialect) -> Result<ExitCode> {
    let (name, bytes) = read_bytes(file.as_ref())?;
    let invalid = |error: serde_json::Error| {
        let message = error.to_string();
        // The position goes first, as `FILE:LINE:COLUMN`, not again at the end.
        let message = match message.rsplit_once(" at line ") {
            Some((message, _)) => message.to_owned(),
            None => message,
        };
        RenderInputError::Invalid {
            name: name.clone(),
            line: error.line(),
            column: error.column(),
            message,
        }
    };
    // First pass: every envelope deserializes and round-trips; nothing is written.
    let mut sink = std::io::sink();
    render_all(&bytes, dialect, &mut sink).0.map_err(invalid)?;
    // Second pass: write them.
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::new(stdout);
    let written = match render_all(&bytes, dialect, &mut out) {
        (_, Some(write_error)) => Err(write_error),
        (Ok(()), None) => out.flush(),
        (Err(error), None) => Err(invalid(error))?,
    };
    match written {
        // A reader that stops early (`| head`) ends the command as every other
        // closed stdout does (status 141).
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutError::Closed)?,
        written => written.context("cannot write the envelopes")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Deserializes the JSON in `bytes` one envelope at a time, rendering each to `out` as
/// soon as it is read. Returns the outcome, and the write error if writing failed.
fn render_all<W: Write>(
    bytes: &[u8],
    dialect: Dialect,
    out: &mut W,
) -> (serde_json::Result<()>, Option<std::io::Error>) {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let mut renderer = Renderer {
        out,
        dialect,
        rendered: 0,
        write_error: None,
    };
    let outcome = TopLevel(&mut renderer)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
    (outcome, renderer.write_error)
}

struct Renderer<'w, W: Write> {
    out: &'w mut W,
    dialect: Dialect,
    /// Envelopes rendered so far, to name the one that fails.
    rendered: usize,
    /// Why writing failed, kept whole (a broken pipe is not an error).
    write_error: Option<std::io::Error>,
}

impl<W: Write> Renderer<'_, W> {
    fn render<E: de::Error>(&mut self, envelope: &Envelope) -> Result<(), E> {
        self.rendered += 1;
        let number = self.rendered;
        match render_to(self.out, envelope, self.dialect)
            .and_then(|()| self.out.write_all(b"\n").map_err(RenderError::Write))
        {
            Ok(()) => Ok(()),
            Err(RenderError::Write(error)) => {
                let message = error.to_string();
                self.write_error = Some(error);
                Err(E::custom(message))
            }
            Err(error) => Err(E::custom(format_args!("envelope {number}: {error}"))),
        }
    }
}

/// The document: an array of envelopes, one envelope, or `parse --json`'s object.
struct TopLevel<'r, 'w, W: Write>(&'r mut Renderer<'w, W>);

impl<'de, W: Write> DeserializeSeed<'de> for TopLevel<'_, '_, W> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, W: Write> Visitor<'de> for TopLevel<'_, '_, W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an envelope object, an array of them, or what `envelope parse --json` prints")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Envelopes(self.0).visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some(first_key) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field("task_id"));
        };
        if first_key != "envelopes" && first_key != "warnings" {
            // One envelope, whose first key is already read.
            let envelope =
                Envelope::deserialize(de::value::MapAccessDeserializer::new(Prepended {
                    first_key: Some(first_key),
                    map,
                }))?;
            return self.0.render(&envelope);
        }
        // `parse --json`'s output: its warnings are not rendered.
        let mut key = Some(first_key);
        let mut envelopes_seen = false;
        while let Some(name) = key {
            match name.as_str() {
                "envelopes" if !envelopes_seen => {
                    envelopes_seen = true;
                    map.next_value_seed(Envelopes(&mut *self.0))?;
                }
                "warnings" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "envelopes" => return Err(de::Error::duplicate_field("envelopes")),
                other => return Err(de::Error::unknown_field(other, &["envelopes", "warnings"])),
            }
            key = map.next_key::<String>()?;
        }
        if !envelopes_seen {
            return Err(de::Error::missing_field("envelopes"));
        }
        Ok(())
    }
}

/// An array of envelopes, each rendered as it is read.
struct Envelopes<'r, 'w, W: Write>(&'r mut Renderer<'w, W>);

impl<'de, W: Write> DeserializeSeed<'de> for Envelopes<'_, '_, W> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, W: Write> Visitor<'de> for Envelopes<'_, '_, W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of envelope objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(envelope) = seq.next_element::<Envelope>()? {
            self.0.render(&envelope)?;
        }
        Ok(())
    }
}

/// A map whose first key was read ahead, given back before the rest.
struct Prepended<A> {
    first_key: Option<String>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Prepended<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.first_key.take() {
            Some(key) => seed
                .deserialize(de::value::StringDeserializer::<A::Error>::new(key))
                .map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}
