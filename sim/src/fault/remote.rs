//! The remote adapter of the fault engine: the schedule's partitions between the
//! coordinator and the remote-worker host.
//!
//! Its verdict is the [`LinkFate`] of each launch's connection: open, refused while
//! a connect-phase partition lasts, or held for a report-phase partition.

use std::sync::Mutex;
use std::time::Duration;

use super::book::FaultBook;
use super::catalogue::{Fault, PartitionPhase};
use crate::world::{LinkFate, LinkPolicy};

/// Fires the schedule's remote partitions as the launches they name connect.
pub struct ScheduledPartitions {
    book: FaultBook,
    /// While a connect-phase partition lasts, every connect is refused.
    refused_until: Mutex<Option<tokio::time::Instant>>,
}

impl LinkPolicy for ScheduledPartitions {
    fn on_connect(&self, launch: u32) -> LinkFate {
        let now = tokio::time::Instant::now();
        let mut refused_until = self.refused_until.lock().expect("partition state poisoned");
        if refused_until.is_some_and(|until| now < until) {
            return LinkFate::Refused;
        }
        let fired = self.book.fire(
            |fault| match fault {
                Fault::RemotePartition {
                    during: PartitionPhase::Connect,
                    duration_ms,
                    ..
                } => format!("remote launch {launch}: connects refused for {duration_ms} ms"),
                _ => format!("remote launch {launch}: the host's report held for the partition"),
            },
            |fault| matches!(fault, Fault::RemotePartition { launch: nth, .. } if *nth == launch),
        );
        match fired {
            Some((
                _,
                Fault::RemotePartition {
                    during: PartitionPhase::Connect,
                    duration_ms,
                    ..
                },
            )) => {
                *refused_until = Some(now + Duration::from_millis(duration_ms));
                LinkFate::Refused
            }
            Some((
                _,
                Fault::RemotePartition {
                    during: PartitionPhase::Report,
                    duration_ms,
                    ..
                },
            )) => LinkFate::HeldFor(Duration::from_millis(duration_ms)),
            _ => LinkFate::Open,
        }
    }
}

impl ScheduledPartitions {
    /// The partitions of `book`'s schedule.
    pub fn new(book: FaultBook) -> Self {
        Self {
            book,
            refused_until: Mutex::new(None),
        }
    }
}
