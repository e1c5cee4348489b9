//! A database outage of [`OUTAGE`] under load: two worker nodes deliver 1 000
//! deliveries to endpoints that answer after 0.5 s, and the path from both nodes to Postgres is
//! cut (a proxy in front of it closes every connection and refuses new ones) while ~64
//! requests are in flight; then it is restored. The endpoints answer those requests during the
//! outage, so each node holds results it cannot write.
//!
//! A result thrown away there (the handler failing, the job retried) sends its delivery again:
//! 64 duplicates; and after an outage longer than the rescue horizon the first node back could
//! rescue the other's live claims. So, asserted here: every kept result is written
//! once the database is back, no live claim is rescued (nodes judge others only after a rescue
//! horizon of their own continuous heartbeats), every delivery is delivered (0 lost), and the
//! receiver gets each one exactly once (0 duplicates, counted by `webhook-id`).
//!
//! The outage is the proxy's, not a stopped server: the scenario's own checks read the database
//! directly throughout, and nothing else is touched.

use crate::cluster::{Cluster, Role};
use crate::verdict::settle;
use breakwater::receiver::Behavior;
use breakwater_e2e::proxy::Proxy;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long the nodes cannot reach the database: far past the rescue horizon (2 s here) and
/// past the longest a run may take (`max_run`), so neither may be counted through an outage.
pub const OUTAGE: Duration = Duration::from_secs(45);

/// Eight channels of 125 deliveries each (1 000), 8 in flight per channel (the cluster's fixed
/// channel concurrency): 64 requests in flight at any time.
const ENDPOINTS: &[&str] = &["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"];
const PER_CHANNEL: usize = 125;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_45_s_database_outage_under_load_adds_no_duplicate_and_loses_nothing() {
    let mut c = Cluster::start("database_cut", &[]).await;
    let proxy = Proxy::start(c.pg_addr()).await;
    // The API reaches Postgres directly (the load is accepted before the cut); both workers go
    // through the proxy.
    c.spawn(Role::Api).await;
    c.route_through(proxy.port);
    let w1 = c.spawn(Role::Worker).await;
    let w2 = c.spawn(Role::Worker).await;
    let ids = c
        .load(
            ENDPOINTS,
            Behavior::Delay(Duration::from_millis(500), 200),
            PER_CHANNEL,
        )
        .await;
    assert_eq!(ids.len(), ENDPOINTS.len() * PER_CHANNEL);
    // Both nodes are busy: a few hundred requests have arrived and each holds some jobs.
    c.wait_received(ENDPOINTS, 200, Duration::from_secs(30))
        .await;
    for w in [w1, w2] {
        let id = c.node(w).id().to_string();
        c.wait_holding(&id, 4, Duration::from_secs(10)).await;
    }

    let cut_at = Instant::now();
    proxy.cut();
    // What the nodes hold: no claim can be made from now on (a claim's commit already on its
    // way may still land, so this is read after the cut).
    let executing = c.executing(None).await;
    // The fault's script, not a wait for a state: the outage's length.
    tokio::time::sleep(OUTAGE).await;
    // The requests that arrived in the last 0.5 s before the cut were answered during the
    // outage: their results are the ones the nodes had to keep.
    let answer_time = Duration::from_millis(500);
    let kept: BTreeSet<Uuid> = c
        .received(ENDPOINTS)
        .iter()
        .filter(|r| r.at + answer_time >= cut_at)
        .filter_map(|r| r.webhook_id.as_deref()?.parse().ok())
        .collect();
    assert!(
        !kept.is_empty(),
        "no request was answered during the outage: nothing was tested"
    );
    proxy.restore();
    let back_at = Instant::now();
    for w in [w1, w2] {
        c.node(w).assert_survived("the outage");
    }

    // No delivery may arrive twice: an empty set of deliveries allowed to.
    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &BTreeSet::new(),
        back_at,
        Duration::from_secs(60),
    )
    .await;
    // Counted by webhook-id at the receiver, whatever the answer: each exactly once.
    let mut requests: BTreeMap<Uuid, usize> = BTreeMap::new();
    for r in c.received(ENDPOINTS) {
        let id = r.webhook_id.as_deref().and_then(|s| s.parse().ok());
        *requests.entry(id.expect("a webhook-id")).or_default() += 1;
    }
    let twice: Vec<(&Uuid, &usize)> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(requests.len(), ids.len(), "every delivery was sent");
    let rescued = c.rescued().await;
    assert!(rescued.is_empty(), "live claims were rescued: {rescued:?}");
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[database_cut]: database cut {:.1} s with {} jobs executing, {} requests answered \
         during the outage (their results kept and written after it); {verdict}; 0 rescued; \
         {:.1} s in all",
        OUTAGE.as_secs_f64(),
        executing.len(),
        kept.len(),
        c.started.elapsed().as_secs_f64()
    );
}
