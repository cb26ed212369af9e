//! One boot of the coordinator host on the tokio world (the default).
//!
//! Each boot is a paused current-thread tokio runtime: when every task waits, its
//! clock jumps to the next timer, so a ten-minute model latency costs nothing. The
//! run's [`BootClock`] keeps the boots on one time line. The remote-worker host is a
//! task on the same runtime, reached over in-memory pipes, and an HTTP model
//! transport reaches an in-memory API host the same way. Dropping the runtime at the
//! end of a boot drops every task of it: a crashed process does nothing more.

use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::Clock;

use super::boot::{api_timeout, boot_model, run_boot as run_session_boot, BootEnd};
use super::{ModelLayer, RunContext, RunError};
use crate::fault::ScheduledPartitions;
use crate::world::{over_http, start_remote_host, BootClock, Streams};

/// Runs boot number `boot`, starting at `booted_at` on the run's time line, on a
/// fresh paused tokio runtime whose clock readings `clock` follows; returns how it
/// ended.
pub(super) fn run_boot(
    context: &Arc<RunContext>,
    clock: &Arc<BootClock>,
    boot: u32,
    booted_at: Duration,
    model_layer: &ModelLayer<'_>,
) -> Result<BootEnd, RunError> {
    let (parking, unparked) = (clock.clone(), clock.clone());
    let mut builder = tokio::runtime::Builder::new_current_thread();
    // The I/O driver only where a real child process runs: parking on it costs
    // every run a system call per park.
    if context.real_timeouts {
        builder.enable_io();
    }
    let runtime = builder
        .enable_time()
        .start_paused(true)
        .on_thread_park(move || parking.forget_reading())
        .on_thread_unpark(move || unparked.forget_reading())
        .build()
        .map_err(RunError::Executor)?;
    let end = runtime.block_on(async {
        context.clock.reboot(booted_at);
        let clock: Arc<dyn Clock> = context.clock.clone();
        let api_timeout = api_timeout(&context.scenario);
        let host_seed = context.streams.seed_for(Streams::API_HOST);
        let model = boot_model(context, boot, model_layer, &|model, streaming| {
            over_http(model, host_seed, clock.clone(), streaming, api_timeout)
        });
        let partitions = Arc::new(ScheduledPartitions::new(context.book.clone()));
        let remote = start_remote_host(model.clone(), clock, partitions);
        let end = run_session_boot(context, boot, booted_at, model, Arc::new(remote)).await;
        // Read the time while the executor's clock still runs.
        context.clock.freeze();
        end
    })?;
    // Dropping the executor drops every task of this boot: a dead process does
    // nothing more.
    drop(runtime);
    Ok(end)
}
