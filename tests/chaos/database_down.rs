//! Postgres stopped for [`OUTAGE`] while results are being written: a channel whose endpoint
//! answers 503 after 2 s (its answers arrive during the outage; then it is made healthy) and two
//! healthy channels under load. One worker node, so no other node can rescue its claims: it must
//! record or give back every result itself once the database is back. Nothing is lost, and only
//! deliveries in flight at the outage may arrive twice.

use crate::cluster::{Cluster, Role};
use crate::verdict::settle;
use breakwater::receiver::Behavior;
use breakwater_e2e::wait_until;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long the database is down: 25 s, the top of a 10–25 s failover. A node waits up to 10 s for a connection (its pools' acquire timeout), so an outage
/// under 20 s ends before even a single retry of a failed result write gives up: only a longer
/// one tells "retried until written" from "tried twice".
pub const OUTAGE: Duration = Duration::from_secs(25);

const SLOW: &str = "slow";
const BUSY: &[&str] = &["a", "b"];
const ENDPOINTS: &[&str] = &["slow", "a", "b"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_while_results_are_written_loses_nothing_and_strands_nothing() {
    let mut c = Cluster::start("database_down", &[]).await;
    c.spawn(Role::Api).await;
    c.spawn(Role::Worker).await;
    let key = c.tenant().await;
    let slow = c
        .channel(&key, SLOW, Behavior::Delay(Duration::from_secs(2), 503))
        .await;
    let mut ids = c.enqueue(&key, slow, 16).await;
    let slow_ids: BTreeSet<Uuid> = ids.iter().copied().collect();
    for ep in BUSY {
        let ch = c
            .channel(&key, ep, Behavior::Delay(Duration::from_millis(200), 200))
            .await;
        ids.extend(c.enqueue(&key, ch, 300).await);
    }
    // The slow endpoint's first requests are on their way (answered 2 s after they arrive, so
    // during the outage), and their jobs are executing.
    c.wait_received(&[SLOW], 1, Duration::from_secs(20)).await;
    wait_until(
        Duration::from_secs(10),
        "a request to the slow endpoint is in flight",
        || async {
            c.executing(None)
                .await
                .iter()
                .any(|id| slow_ids.contains(id))
        },
    )
    .await;

    // In flight at the outage: what is executing just before the stop, and every delivery whose
    // request arrives from then until the restart (it can only have been claimed before the
    // stop; no claim is possible while the database is down).
    let executing = c.executing(None).await;
    let snapshot_at = Instant::now();
    assert!(
        executing.iter().any(|id| slow_ids.contains(id)),
        "no request to the slow endpoint was in flight at the outage"
    );
    c.pg().stop().await.expect("stopping postgres");
    let stopped_at = Instant::now();
    // The slow endpoint answers its 503s while nothing can be written; then it heals. (The
    // fault's script, not a wait: 1.5 s into the 25 s outage, and the outage's own length.)
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.receiver
        .set(SLOW, Behavior::Delay(Duration::from_millis(200), 200));
    tokio::time::sleep(OUTAGE.saturating_sub(stopped_at.elapsed())).await;
    let restart_at = Instant::now();
    c.pg().restart().await.expect("restarting postgres");
    let back_at = Instant::now();

    let during: BTreeSet<Uuid> = c
        .received(ENDPOINTS)
        .iter()
        .filter(|r| r.at >= snapshot_at && r.at <= restart_at)
        .filter_map(|r| r.webhook_id.as_deref()?.parse().ok())
        .collect();
    let in_flight: BTreeSet<Uuid> = executing.union(&during).copied().collect();
    for n in 0..2 {
        c.node(n).assert_survived("the outage");
    }

    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &in_flight,
        back_at,
        Duration::from_secs(45),
    )
    .await;
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[database_down]: postgres down {:.1} s with {} jobs executing ({} of them slow \
         503s), {} requests arrived while it was down; {verdict}; {:.1} s in all",
        (restart_at - stopped_at).as_secs_f64(),
        executing.len(),
        executing.intersection(&slow_ids).count(),
        during.len(),
        c.started.elapsed().as_secs_f64()
    );
}
