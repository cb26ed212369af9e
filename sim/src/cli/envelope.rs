//! `coordsim envelope parse|render`.

use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use coord_runtime::envelope::{parse_block, render, Dialect, Envelope};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use super::stdout::outln;

#[derive(Debug, Subcommand)]
pub enum EnvelopeCommand {
    /// Find every `<task-notification>` in a text and print them.
    Parse {
        /// The text to read; `-` or nothing reads standard input.
        file: Option<PathBuf>,
        /// Print a JSON array, one object per envelope, in order.
        #[arg(long)]
        json: bool,
        /// Read the input as JSON Lines (a Claude Code transcript) and search the
        /// string values of every line. The default for files ending in `.jsonl`.
        #[arg(long)]
        jsonl: bool,
    },
    /// Render envelopes given as JSON (the shape `parse --json` prints) as XML.
    Render {
        /// The JSON to read (an array, or one object); `-` or nothing reads stdin.
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

/// Reads `file` (or stdin for `None` and `-`) as UTF-8 text.
fn read_input(file: Option<&PathBuf>) -> Result<(String, String)> {
    let (name, bytes) = match file {
        Some(path) if path.as_os_str() != "-" => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            (path.display().to_string(), bytes)
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
            ("<stdin>".to_owned(), bytes)
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok((name, text)),
        Err(error) => bail!(
            "{name} is not UTF-8 text (invalid byte at offset {})",
            error.utf8_error().valid_up_to()
        ),
    }
}

fn parse(file: Option<PathBuf>, json: bool, jsonl: bool) -> Result<ExitCode> {
    let (name, text) = read_input(file.as_ref())?;
    let envelopes = if jsonl {
        envelopes_in_jsonl(&name, &text)?
    } else {
        parse_block(&text)
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&envelopes)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if envelopes.is_empty() {
        outln!("no envelopes")?;
    }
    for (index, envelope) in envelopes.iter().enumerate() {
        outln!(
            "{}. task {} {}: {}",
            index + 1,
            envelope.task_id,
            envelope.status,
            envelope.summary
        )?;
        if let Some(output_file) = &envelope.output_file {
            outln!("   output: {output_file}")?;
        }
        if let Some(result) = &envelope.result {
            outln!("   result: {} bytes", result.len())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every envelope in the string values of a JSON Lines text, in line order. A line
/// that is not JSON is an error naming it: a transcript is never half-read silently.
fn envelopes_in_jsonl(name: &str, text: &str) -> Result<Vec<Envelope>> {
    fn strings<'v>(value: &'v serde_json::Value, found: &mut Vec<&'v str>) {
        match value {
            serde_json::Value::String(text) => found.push(text),
            serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, found)),
            serde_json::Value::Object(fields) => fields.values().for_each(|v| strings(v, found)),
            _ => {}
        }
    }
    let mut envelopes = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{name}:{}:{}: not JSON: {e}", index + 1, e.column()))?;
        let mut found = Vec::new();
        strings(&value, &mut found);
        for text in found {
            envelopes.extend(parse_block(text));
        }
    }
    Ok(envelopes)
}

fn render_json(file: Option<PathBuf>, dialect: Dialect) -> Result<ExitCode> {
    let (name, text) = read_input(file.as_ref())?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{name}:{}:{}: {e}", e.line(), e.column()))?;
    let items = match value {
        serde_json::Value::Array(items) => items,
        object @ serde_json::Value::Object(_) => vec![object],
        _ => bail!("{name}: expected an envelope object or an array of them"),
    };
    for (index, item) in items.into_iter().enumerate() {
        let envelope: Envelope = serde_json::from_value(item)
            .with_context(|| format!("{name}: envelope {} is not valid", index + 1))?;
        outln!("{}", render(&envelope, dialect))?;
    }
    Ok(ExitCode::SUCCESS)
}
