//! `SIGSTOP` of a worker node past the rescue time, then `SIGCONT`:
//! - with a second worker, the other node rescues the frozen node's jobs while it is frozen (a
//!   transaction it froze in is ended by the server), and once it wakes it works again without
//!   taking back anything it or another live node holds;
//! - as the only worker (the smallest cluster), nobody rescues anything: on
//!   waking it records its own in-flight results and takes back none of its own jobs, even
//!   though its heartbeat is stale at that moment.
//!
//! Nothing is lost, and only the frozen node's in-flight deliveries may arrive twice.

use crate::cluster::{Cluster, Role};
use crate::verdict::{assert_rescued_exactly, settle};
use breakwater::receiver::Behavior;
use breakwater_e2e::wait_until;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const ENDPOINTS: &[&str] = &["a", "b", "c"];
/// Deliveries per channel: enough that work is left for the node when it wakes.
const PER_CHANNEL: usize = 350;
/// How long the node stays frozen: well past the rescue time (2 s of silence).
const FREEZE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_frozen_past_the_rescue_time_loses_nothing_and_takes_back_nothing_on_waking() {
    // A transaction the node froze in holds its rows for 2 s at most. Each node runs at most 12
    // deliveries at once, half of the channels' 24 slots: both are always busy, so the victim
    // holds work whenever it is frozen.
    let mut c = Cluster::start(
        "worker_frozen",
        &[
            (
                "BREAKWATER_DATABASE__IDLE_IN_TRANSACTION_TIMEOUT_MS",
                "2000",
            ),
            ("BREAKWATER_WORKER__POOL_DEFAULT", "12"),
        ],
    )
    .await;
    let (victim, victim_id, ids) = c.two_busy_workers(ENDPOINTS, PER_CHANNEL).await;
    c.node(victim).signal("STOP");
    let frozen_at = Instant::now();
    // What it sent just before freezing may still land; once it stands still, what it holds
    // stays put until the rescue.
    let in_flight = c
        .frozen_holding(victim, &victim_id, Duration::from_secs(2))
        .await;
    assert!(
        !in_flight.is_empty(),
        "the frozen node had nothing in flight: the scenario tests nothing"
    );

    // The other node takes them back while it is frozen.
    let mut rescued_after = None;
    while frozen_at.elapsed() < FREEZE {
        if rescued_after.is_none() && c.executing(Some(&victim_id)).await.is_empty() {
            rescued_after = Some(frozen_at.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rescued_after = rescued_after
        .unwrap_or_else(|| panic!("the frozen node's jobs were not rescued within {FREEZE:?}"));
    let delivered: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 'delivered'")
            .fetch_one(&c.db)
            .await
            .expect("counting deliveries");
    let left = ids.len() - delivered as usize;
    assert!(
        left > 0,
        "all delivered while the node was frozen: make the load larger"
    );

    let woke_at = c.db_now().await;
    c.node(victim).signal("CONT");
    let woken = Instant::now();
    // It works again: it records attempts of its own.
    c.wait_attempt_since(&victim_id, woke_at, Duration::from_secs(10))
        .await;

    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &in_flight,
        woken,
        Duration::from_secs(40),
    )
    .await;
    // Exactly the frozen node's jobs were rescued, each once: after waking it took back nothing
    // of its own, and no one took anything from it or from the other node.
    assert_rescued_exactly(&c, &in_flight, "the frozen node").await;
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[worker_frozen]: frozen {FREEZE:?} holding {} jobs, all rescued {:.1} s in; \
         {left} deliveries left at SIGCONT; {verdict}; {:.1} s in all",
        in_flight.len(),
        rescued_after.as_secs_f64(),
        c.started.elapsed().as_secs_f64()
    );
}

/// Freezes of the only worker (the test below):
/// whether a waking node beats or judges first is a race, so it gets several chances.
const ALONE_CYCLES: usize = 3;
/// Each of them: past the rescue time (2 s of silence), short of the request timeout (5 s there).
const ALONE_FREEZE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_worker_frozen_past_the_rescue_time_takes_back_none_of_its_own_jobs_on_waking() {
    const ALONE: &[&str] = &["a", "b"];
    // Requests in flight at a freeze outlive it (a timeout that fires on waking would make the
    // node send again deliveries the receiver had answered).
    let mut c = Cluster::start(
        "worker_frozen_alone",
        &[("BREAKWATER_WORKER__REQUEST_TIMEOUT_MS", "5000")],
    )
    .await;
    c.spawn(Role::Api).await;
    let victim = c.spawn(Role::Worker).await;
    // 16 requests in flight at a time (2 channels of 8), 1 s each: 7.5 s of work.
    let ids = c
        .load(ALONE, Behavior::Delay(Duration::from_secs(1), 200), 60)
        .await;
    let victim_id = c.node(victim).id().to_string();
    let mut in_flight = BTreeSet::new();
    let mut woken = Instant::now();
    for _ in 0..ALONE_CYCLES {
        c.wait_holding(&victim_id, 8, Duration::from_secs(10)).await;
        c.node(victim).signal("STOP");
        let frozen_at = Instant::now();
        // What it sent just before the STOP may still land; once it stands still, what it holds
        // stays put. The fault lasts ALONE_FREEZE.
        let held = c
            .frozen_holding(victim, &victim_id, Duration::from_secs(2))
            .await;
        tokio::time::sleep(ALONE_FREEZE.saturating_sub(frozen_at.elapsed())).await;
        // Still its own: no other node runs a rescuer.
        assert_eq!(
            c.executing(Some(&victim_id)).await,
            held,
            "the frozen node's jobs moved while it was frozen"
        );
        c.node(victim).signal("CONT");
        woken = Instant::now();
        // It works again: what it held before the freeze finishes (1 s each) before the next.
        wait_until(
            Duration::from_secs(10),
            "the woken node finished the jobs it held while frozen",
            || async { c.executing(Some(&victim_id)).await.is_disjoint(&held) },
        )
        .await;
        in_flight.extend(held);
    }

    let verdict = settle(&c, ALONE, &ids, &in_flight, woken, Duration::from_secs(30)).await;
    let rescued = c.rescued().await;
    assert!(
        rescued.is_empty(),
        "the woken node took back jobs of its own: {rescued:?} (it held {in_flight:?})"
    );
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[worker_frozen_alone]: frozen {ALONE_CYCLES} times for {ALONE_FREEZE:?}, holding {} \
         jobs in all, none rescued; {verdict}; {:.1} s in all",
        in_flight.len(),
        c.started.elapsed().as_secs_f64()
    );
}
