//! A worker's own stall is not its endpoints' fault: the only worker is
//! stopped (`SIGSTOP`) for longer than the request timeout while requests to three tenants'
//! channels on one host are in flight; the endpoints answer within a second, into sockets the
//! frozen node does not read. On waking (`SIGCONT`) it must read those answers (or, where it
//! cannot judge, try again without counting anything): no failed attempt is recorded, no
//! failure is counted, no channel circuit and no host circuit opens, and every delivery is
//! delivered. The failure this guards against: every request in flight recorded as a timeout,
//! and the host circuit and the channels' circuits opened on a host that answered everything.

use crate::cluster::{Cluster, Role};
use crate::verdict::settle;
use breakwater::receiver::Behavior;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// One channel per tenant, all on the cluster's receiver: one host.
const ENDPOINTS: &[&str] = &["t1", "t2", "t3"];
/// Deliveries per channel: each channel runs 8 at once, so all of them are in flight together.
const PER_CHANNEL: usize = 8;
/// How long the node stands still: past the request timeout (3 s in the chaos settings).
const FREEZE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_past_its_request_timeout_blames_no_endpoint_for_its_own_stall() {
    // A failure threshold the scenario reaches at once without the fix: 2 failures open a
    // channel, 3 channels of 2 tenants a host (the default). Nobody rescues: it is the only
    // worker.
    let mut c = Cluster::start(
        "worker_stalled",
        &[("BREAKWATER_CIRCUIT__FAILURE_THRESHOLD", "2")],
    )
    .await;
    c.spawn(Role::Api).await;
    let victim = c.spawn(Role::Worker).await;
    let victim_id = c.node(victim).id().to_string();
    // Three tenants, a channel each on the receiver, answered in 1 s.
    let mut ids = Vec::new();
    let mut channels = Vec::new();
    for ep in ENDPOINTS {
        let key = c.tenant().await;
        let ch = c
            .channel(&key, ep, Behavior::Delay(Duration::from_secs(1), 200))
            .await;
        channels.push(ch);
        ids.extend(c.enqueue(&key, ch, PER_CHANNEL).await);
    }
    // Every request is in flight (sent, not yet answered): freeze the node now.
    c.wait_received(ENDPOINTS, ids.len(), Duration::from_secs(20))
        .await;
    c.node(victim).signal("STOP");
    let frozen_at = Instant::now();
    let in_flight: BTreeSet<_> = c.executing(Some(&victim_id)).await;
    assert!(
        in_flight.len() >= ids.len() / 2,
        "only {} of {} deliveries were in flight at the freeze: the scenario tests little",
        in_flight.len(),
        ids.len()
    );
    tokio::time::sleep(FREEZE.saturating_sub(frozen_at.elapsed())).await;
    c.node(victim).signal("CONT");
    let woken = Instant::now();

    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &in_flight,
        woken,
        Duration::from_secs(30),
    )
    .await;
    // No failure was recorded or counted, and nothing opened.
    let failed_attempts: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT outcome, error FROM delivery_attempts WHERE outcome <> 'success' LIMIT 5",
    )
    .fetch_all(&c.db)
    .await
    .expect("reading attempts");
    assert!(
        failed_attempts.is_empty(),
        "the node's own stall was recorded as failed attempts: {failed_attempts:?}"
    );
    let channel_states: Vec<(String, i32)> = sqlx::query_as(
        "SELECT circuit_state::text, consecutive_failures FROM channels WHERE id = ANY($1)",
    )
    .bind(&channels)
    .fetch_all(&c.db)
    .await
    .expect("reading channels");
    assert!(
        channel_states
            .iter()
            .all(|(s, f)| s.as_str() == "closed" && *f == 0),
        "a channel counted the node's stall against its endpoint: {channel_states:?}"
    );
    let hosts: Vec<(String, String)> =
        sqlx::query_as("SELECT host_key, state::text FROM host_circuits")
            .fetch_all(&c.db)
            .await
            .expect("reading host circuits");
    assert!(
        hosts.iter().all(|(_, s)| s.as_str() == "closed"),
        "the host circuit opened on the node's stall: {hosts:?}"
    );
    let host_failures: i64 = sqlx::query_scalar("SELECT count(*) FROM host_failures")
        .fetch_one(&c.db)
        .await
        .expect("counting host failures");
    let opened: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action IN ('circuit.opened', 'host.opened')",
    )
    .fetch_one(&c.db)
    .await
    .expect("counting audit rows");
    assert_eq!(
        (host_failures, opened),
        (0, 0),
        "host failures and circuit openings"
    );
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[worker_stalled]: frozen {FREEZE:?} with {} requests in flight; no failure \
         counted; {verdict}; {:.1} s in all",
        in_flight.len(),
        c.started.elapsed().as_secs_f64()
    );
}
