//! The economics of a simulated run: what its model calls cost, and comparisons of
//! how a scenario could have been run.
//!
//! Every model call of a run goes through one simulated prompt cache
//! ([`CostMeter`]), which gives the response its `usage` and records a
//! `model_billed` trace event with the tokens, the price and any cache break.
//! [`RunCost`] sums those events per agent and per run, with the cache-hit ratio
//! (cache reads over all prompt tokens). [`compare`] runs the two variants a
//! scenario's `[economics] compare` names (fork vs fresh spawn, 5-minute vs 1-hour
//! TTL, simultaneous vs staggered forks, an intact vs an edited fork system prompt)
//! and tabulates them ([`EconomicsReport`]); `coordsim economics` prints it.

mod compare;
mod head;
mod ledger;
mod meter;

pub use compare::{compare, variants, EconomicsError, EconomicsReport, VariantCost};
pub(crate) use head::RequestHead;
pub use ledger::{BreakRecord, RunCost, Spend};
pub use meter::{built_in_prices, cost_micro_usd, to_cost_usage, CostMeter, ForkOrigin};
