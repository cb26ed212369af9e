//! What Claude Code sessions cost: token accounting over session transcripts, priced from
//! a table of per-model rates.
//!
//! - [`transcript`]: finds transcripts and tells whose each one is.
//! - [`ledger`]: deduplicates the lines of each API response into a [`Ledger`].
//! - [`lines`]: reads a file's lines a chunk at a time.
//! - [`read`]: reads many files on several threads into one ledger.
//! - [`pricing`]: the per-model price table, `pricing/anthropic.toml` or a replacement.
//! - [`report`]: prices a ledger per session, agent and model.
//! - [`usage`]: token counts.
//!
//! ```no_run
//! use coord_sim::cost::{account, default_threads, PriceTable};
//! use std::path::PathBuf;
//!
//! let paths = [PathBuf::from("fixtures/claude-code/spotter")];
//! let report = account(&paths, &PriceTable::built_in(), default_threads())?;
//! println!("{} output tokens, ${:.2}", report.totals.usage.output_tokens, report.totals.cost_usd);
//! # Ok::<(), coord_sim::cost::CostError>(())
//! ```
//!
//! Malformed lines never stop the accounting: each is listed in
//! [`CostReport::malformed`] with its file and line. What does stop it is an unreadable
//! path, a bad price table, or a model the table does not price.

pub mod ledger;
pub mod lines;
pub mod pricing;
pub mod read;
pub mod report;
pub mod transcript;
pub mod usage;

use std::fmt;
use std::num::NonZeroUsize;
use std::path::PathBuf;

pub use ledger::Ledger;
pub use pricing::{PriceTable, PricingError};
pub use read::default_threads;
pub use report::CostReport;
pub use transcript::discover;
pub use usage::Usage;

/// Reads every transcript under `paths` on up to `threads` threads and prices it with
/// `prices`. The report is the same whatever the thread count.
pub fn account(
    paths: &[PathBuf],
    prices: &PriceTable,
    threads: NonZeroUsize,
) -> Result<CostReport, CostError> {
    let ledger = Ledger::read_all(discover(paths)?, threads)?;
    CostReport::build(&ledger, prices)
}

/// Why an accounting could not be completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CostError {
    /// A path could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The price table could not be loaded.
    #[error(transparent)]
    Pricing(#[from] PricingError),
    /// Some responses used models the price table does not price.
    #[error("{}", UnknownModelsMessage { models, price_table })]
    UnknownModels {
        /// Each unpriced model, sorted by id.
        models: Vec<UnknownModel>,
        /// The table that lacked them.
        price_table: String,
    },
}

/// A model that appeared in the transcripts but not in the price table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownModel {
    /// The id as written in `message.model` (empty if the line had none).
    pub model: String,
    /// Deduplicated responses that used it.
    pub requests: u64,
    /// The file of its first response.
    pub first_path: PathBuf,
    /// The 1-based line of its first response.
    pub first_line: usize,
}

struct UnknownModelsMessage<'a> {
    models: &'a [UnknownModel],
    price_table: &'a str,
}

impl fmt::Display for UnknownModelsMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no price for ")?;
        for (i, model) in self.models.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(
                f,
                "model {:?} ({} responses, first at {}:{})",
                model.model,
                model.requests,
                model.first_path.display(),
                model.first_line
            )?;
        }
        write!(
            f,
            " in {}; add them to a price table and pass it with --pricing FILE",
            self.price_table
        )
    }
}
