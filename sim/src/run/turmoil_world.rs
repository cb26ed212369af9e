//! One boot of the coordinator host on the turmoil world (`world = "turmoil"`).
//!
//! Each boot is a new turmoil simulation on the run's one time line
//! ([`TurmoilBootClock`]): its time starts at zero and the clock adds the boot's
//! start. Its hosts:
//!
//! - **`coordinator`**, a turmoil client running the same boot as the tokio world
//!   (`run_boot`: the real [`Session`](coord_runtime::session::Session), its
//!   adversary and its crash timer) on turmoil's ticked virtual time. When its
//!   software returns, the simulation ends and is dropped with every host's
//!   software: a crashed coordinator's process and the hosts' connections die
//!   together, and the next boot restarts from what the disk kept, as on the tokio
//!   world.
//! - **`remote-worker`**, the remote-worker host's software
//!   ([`serve_remote_host`]) behind turmoil TCP. The coordinator reaches it through
//!   a [`PartitionedTurmoilConnector`]: the fault engine's partition verdicts
//!   ([`ScheduledPartitions`]) become turmoil partitions and holds on the link.
//! - **`api`**, for an HTTP model transport: an [`ApiHost`] answering from the
//!   scripted model, reached by the production provider over
//!   [`TurmoilApiConnector`](crate::world::TurmoilApiConnector).
//!
//! The disk is turmoil's filesystem on a host of its own
//! ([`TurmoilFsHost`](crate::world::TurmoilFsHost)), unless the scenario or the
//! command line chose another: it outlives the simulation of a boot, and a crash
//! keeps only what was synced. Turmoil's network adds its own message latency (0 to
//! 100 ms per segment, drawn from turmoil's generator, which [`sim_builder`] seeds
//! from the run's seed).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use coord_runtime::world::{Clock, Model, Remote};

use super::boot::{api_timeout, boot_model, BootEnd};
use super::{ModelLayer, RunContext, RunError};
use crate::fault::ScheduledPartitions;
use crate::world::{
    over_turmoil_http, serve_remote_host, sim_builder, ApiHost, HoldingListener,
    PartitionedTurmoilConnector, Streams, TcpRemote, TurmoilLink,
};

/// The coordinator's host name.
const COORDINATOR_HOST: &str = "coordinator";
/// The remote-worker host's name and port.
const REMOTE_HOST: &str = "remote-worker";
const REMOTE_PORT: u16 = 7000;
/// The model API host's name; it serves on port 80.
const API_HOST: &str = "api";
const API_PORT: u16 = 80;
/// Virtual time a boot's simulation may run past the run's limit and liveness
/// bound before turmoil calls it hung: the steps a run's last waits round up to.
const SIMULATION_SLACK: Duration = Duration::from_secs(60);

/// Runs boot number `boot`, starting at `booted_at` on the run's time line, as a
/// turmoil simulation stepping by `tick`; returns how it ended.
pub(super) fn run_boot(
    context: &Arc<RunContext>,
    boot: u32,
    booted_at: Duration,
    tick: Duration,
    model_layer: &ModelLayer<'_>,
) -> Result<BootEnd, RunError> {
    let settings = &context.scenario.settings;
    let run_left = Duration::from_millis(settings.run_limit_ms).saturating_sub(booted_at);
    let mut builder = sim_builder(&context.streams);
    builder.tick_duration(tick).simulation_duration(
        run_left + Duration::from_millis(settings.liveness_bound_ms) + SIMULATION_SLACK,
    );
    let mut sim = builder.build();
    context.clock.reboot(booted_at);
    let clock: Arc<dyn Clock> = context.clock.clone();
    // The model the API host answers from, when the transport is HTTP.
    let api_upstream: RefCell<Option<Arc<dyn Model>>> = RefCell::new(None);
    let api_timeout = api_timeout(&context.scenario);
    let model = boot_model(context, boot, model_layer, &|upstream, streaming| {
        *api_upstream.borrow_mut() = Some(upstream);
        over_turmoil_http(API_HOST, clock.clone(), streaming, api_timeout)
    });
    if let Some(upstream) = api_upstream.into_inner() {
        let api =
            ApiHost::new(upstream).drawing_forms_from(context.streams.seed_for(Streams::API_HOST));
        sim.host(API_HOST, move || api.clone().serve(API_PORT));
    }
    let link = TurmoilLink::new(COORDINATOR_HOST, REMOTE_HOST);
    let (worker_model, worker_link) = (model.clone(), link.clone());
    sim.host(REMOTE_HOST, move || {
        let (model, link) = (worker_model.clone(), worker_link.clone());
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", REMOTE_PORT)).await?;
            serve_remote_host(HoldingListener::new(listener, link), model).await?;
            Ok(())
        }
    });
    let partitions = Arc::new(ScheduledPartitions::new(context.book.clone()));
    let connector = PartitionedTurmoilConnector::new(link, REMOTE_PORT, partitions);
    let remote: Arc<dyn Remote> = Arc::new(TcpRemote::new(connector, clock));
    let end: Rc<RefCell<Option<Result<BootEnd, RunError>>>> = Rc::default();
    let (boot_context, boot_end) = (context.clone(), end.clone());
    sim.client(COORDINATOR_HOST, async move {
        let result = super::boot::run_boot(&boot_context, boot, booted_at, model, remote).await;
        // Read the time while the simulation still runs.
        boot_context.clock.freeze();
        *boot_end.borrow_mut() = Some(result);
        Ok(())
    });
    let simulated = sim.run();
    // Dropping the simulation drops every host's software: a dead process does
    // nothing more, and its peers' connections die with the simulation.
    drop(sim);
    simulated.map_err(|error| RunError::Turmoil(error.to_string()))?;
    end.take().unwrap_or_else(|| {
        Err(RunError::Turmoil(
            "the coordinator's software ended without a result".to_owned(),
        ))
    })
}
