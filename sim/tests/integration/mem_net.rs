//! The in-memory network the simulator's runs put between the coordinator and the
//! remote-worker host: the real `TcpRemote` and `serve_remote_worker` over it, with
//! every link fate a partition can give a connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use coord_runtime::world::{Clock, RemoteError, RemoteLaunch, RemoteReport};
use coord_sim::world::VirtualClock;
use coord_sim::world::{mem_network, serve_remote_worker, LinkFate, LinkPolicy, TcpRemote};

/// Gives the connections the fates listed, in order, then `Open`.
struct Fates(Mutex<Vec<LinkFate>>);

impl LinkPolicy for Fates {
    fn on_connect(&self, _launch: u32) -> LinkFate {
        let mut fates = self.0.lock().unwrap();
        if fates.is_empty() {
            LinkFate::Open
        } else {
            fates.remove(0)
        }
    }
}

fn launch(task_id: &str) -> RemoteLaunch {
    RemoteLaunch {
        task_id: task_id.into(),
        prompt: "count the lines".into(),
        model: "claude-sonnet-4-5".into(),
        messages: Vec::new(),
    }
}

/// A host whose worker takes 5 s, and the coordinator's remote to it.
fn network(fates: Vec<LinkFate>) -> (TcpRemote, Arc<dyn Clock>) {
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new(Duration::ZERO));
    let (connector, listener) = mem_network("remote:7000", Arc::new(Fates(Mutex::new(fates))));
    tokio::spawn(serve_remote_worker(
        listener,
        |launch: RemoteLaunch| async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            RemoteReport {
                task_id: launch.task_id,
                succeeded: true,
                text: "42 lines".into(),
                messages: Vec::new(),
            }
        },
    ));
    (TcpRemote::new(connector, clock.clone()), clock)
}

#[tokio::test(start_paused = true)]
async fn an_open_link_carries_the_launch_and_the_report() {
    let (remote, clock) = network(vec![]);
    let report = remote.call(launch("t1")).await.unwrap();
    assert_eq!(report.text, "42 lines");
    assert_eq!(clock.monotonic(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_connect_is_unreachable_at_once_and_the_next_gets_through() {
    let (remote, clock) = network(vec![LinkFate::Refused]);
    let error = remote.call(launch("t1")).await.unwrap_err();
    assert!(matches!(error, RemoteError::Unreachable(_)), "{error}");
    assert_eq!(clock.monotonic(), Duration::ZERO);
    assert_eq!(remote.call(launch("t2")).await.unwrap().task_id, "t2");
}

#[tokio::test(start_paused = true)]
async fn a_report_held_by_a_partition_arrives_when_it_heals() {
    let (remote, clock) = network(vec![LinkFate::HeldFor(Duration::from_secs(90))]);
    let report = remote.call(launch("t1")).await.unwrap();
    assert_eq!(report.text, "42 lines");
    assert_eq!(clock.monotonic(), Duration::from_secs(90));
}

#[tokio::test(start_paused = true)]
async fn a_held_report_past_the_read_timeout_is_unreachable() {
    let (remote, clock) = network(vec![LinkFate::HeldFor(Duration::from_secs(90))]);
    let remote = remote.with_read_timeout(Some(Duration::from_secs(30)));
    let error = remote.call(launch("t1")).await.unwrap_err();
    assert!(matches!(error, RemoteError::Unreachable(_)), "{error}");
    assert_eq!(clock.monotonic(), Duration::from_secs(30));
}
