//! `kill -9` of a worker node mid-load: the other node rescues the dead node's jobs once its
//! heartbeat is stale, a replacement joins, nothing is lost, and only the dead node's in-flight
//! deliveries may arrive twice.

use crate::cluster::{Cluster, Role};
use crate::verdict::{assert_rescued_exactly, settle};
use breakwater_e2e::wait_until;
use std::time::{Duration, Instant};

const ENDPOINTS: &[&str] = &["a", "b", "c"];
/// Deliveries per channel (3 channels of 8 in flight at once, 200 ms each: ~7 s of load).
const PER_CHANNEL: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_worker_mid_load_loses_nothing_and_duplicates_only_its_in_flight_jobs() {
    // Each node runs at most 12 deliveries at once, half of the channels' 24 slots: both are
    // always busy, so the victim holds work whenever it is killed.
    let mut c = Cluster::start(
        "worker_killed",
        &[("BREAKWATER_WORKER__POOL_DEFAULT", "12")],
    )
    .await;
    let (victim, victim_id, ids) = c.two_busy_workers(ENDPOINTS, PER_CHANNEL).await;
    c.node(victim).kill9();
    let killed_at = Instant::now();
    // A dead process changes nothing more: what it held is in the database, until the rescue
    // (2 s of silence) moves it. A statement it sent just before dying is done once the server
    // has ended its sessions.
    c.wait_disconnected(victim, Duration::from_secs(5)).await;
    let in_flight = c.executing(Some(&victim_id)).await;
    assert!(
        !in_flight.is_empty(),
        "the killed node had nothing in flight: the scenario tests nothing"
    );
    let received_at_kill = c.received(ENDPOINTS).len();

    // A replacement joins while the rescue is due: the dead node's last heartbeat is older than
    // the rescue time (2 s) on the database clock.
    wait_until(
        Duration::from_secs(10),
        "the killed node's heartbeat is 2 s old",
        || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT heartbeat_at <= now() - interval '2 s' FROM queue_nodes WHERE id = $1",
            )
            .bind(&victim_id)
            .fetch_optional(&c.db)
            .await
            .expect("reading the heartbeat")
            .unwrap_or(true)
        },
    )
    .await;
    c.spawn(Role::Worker).await;

    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &in_flight,
        killed_at,
        Duration::from_secs(40),
    )
    .await;
    // Exactly the killed node's jobs were rescued, each once: no live node lost a job.
    let rescued = assert_rescued_exactly(&c, &in_flight, "the killed node").await;
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[worker_killed]: kill -9 after {received_at_kill} of {} requests; {} jobs \
         rescued; {verdict}; {:.1} s in all",
        ids.len(),
        rescued,
        c.started.elapsed().as_secs_f64()
    );
}
