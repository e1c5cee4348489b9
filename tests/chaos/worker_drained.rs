//! `SIGTERM` of a worker node with work in flight, as in a rolling deploy (its replacement starts
//! as it drains): it stops fetching, finishes what can finish within the shutdown grace (2 s),
//! hands the rest back (requests to a 4-s endpoint), removes its heartbeat and exits 0; the
//! replacement sends what was handed back, and nothing is left for a rescue. Nothing is lost,
//! and only the handed-back deliveries may arrive twice.

use crate::cluster::{Cluster, Role};
use crate::verdict::settle;
use breakwater::receiver::Behavior;
use breakwater_e2e::eventually;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use uuid::Uuid;

const SLOW: &str = "slow";
const QUICK: &[&str] = &["a", "b"];
const ENDPOINTS: &[&str] = &["slow", "a", "b"];
/// The node's shutdown grace (`worker.shutdown_grace_ms`, as in the cluster's settings).
const GRACE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_work_in_flight_drains_hands_back_the_rest_and_loses_nothing() {
    // Requests to the slow endpoint (4 s) outlive the grace but not the request timeout.
    let mut c = Cluster::start(
        "worker_drained",
        &[("BREAKWATER_WORKER__REQUEST_TIMEOUT_MS", "6000")],
    )
    .await;
    c.spawn(Role::Api).await;
    let victim = c.spawn(Role::Worker).await;
    let key = c.tenant().await;
    let slow = c
        .channel(&key, SLOW, Behavior::Delay(Duration::from_secs(4), 200))
        .await;
    let mut ids = c.enqueue(&key, slow, 12).await;
    let slow_ids: BTreeSet<Uuid> = ids.iter().copied().collect();
    for ep in QUICK {
        let ch = c
            .channel(&key, ep, Behavior::Delay(Duration::from_millis(300), 200))
            .await;
        ids.extend(c.enqueue(&key, ch, 250).await);
    }

    // Wait until the node holds both kinds of work (it is the only worker: at once).
    let victim_id = c.node(victim).id().to_string();
    let held = std::sync::Mutex::new(BTreeSet::new());
    let found = eventually(Duration::from_secs(20), || async {
        let now = c.executing(Some(&victim_id)).await;
        let both = now.iter().any(|id| slow_ids.contains(id))
            && now.iter().any(|id| !slow_ids.contains(id));
        *held.lock().unwrap() = now;
        both
    })
    .await;
    assert!(
        found,
        "the node never held a slow and a quick delivery at once"
    );
    let before = held.into_inner().unwrap();
    c.node(victim).signal("TERM");
    let termed_at = Instant::now();
    // A fetch in progress at the signal may still claim jobs: what the node holds from the
    // signal until it exits counts as in flight too.
    let holding = c.watch_holding(&victim_id);
    c.spawn(Role::Worker).await;

    let status = c
        .node(victim)
        .wait_exit(GRACE + Duration::from_secs(5))
        .await;
    let drained_in = termed_at.elapsed();
    let after = holding.stop().await;
    let in_flight: BTreeSet<Uuid> = before.union(&after).copied().collect();
    assert!(
        status.is_some_and(|s| s.success()),
        "the node did not exit 0 within {:?} of SIGTERM ({status:?}):\n{}",
        GRACE + Duration::from_secs(5),
        c.node(victim).tail(40)
    );
    // Its text log went to a file, not a terminal: plain text, no ANSI colour codes.
    let log = std::fs::read_to_string(&c.node(victim).log).expect("reading the node's log");
    assert!(
        log.contains(" INFO "),
        "no INFO line in the node's log:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "the node's redirected log carries ANSI escape codes:\n{}",
        c.node(victim).tail(5)
    );
    // It left nothing claimed and deregistered.
    let held = c.executing(Some(&victim_id)).await;
    assert!(held.is_empty(), "the stopped node still holds {held:?}");
    let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_nodes WHERE id = $1")
        .bind(&victim_id)
        .fetch_one(&c.db)
        .await
        .expect("reading queue_nodes");
    assert_eq!(
        registered, 0,
        "the stopped node's heartbeat row is still there"
    );
    // What could finish within the grace, it finished itself; the rest it handed back.
    let finished: Vec<Uuid> = sqlx::query_scalar(
        "SELECT DISTINCT delivery_id FROM delivery_attempts WHERE node_id = $1 AND delivery_id = ANY($2)",
    )
    .bind(&victim_id)
    .bind(in_flight.iter().copied().collect::<Vec<_>>())
    .fetch_all(&c.db)
    .await
    .expect("reading attempts");
    let finished: BTreeSet<Uuid> = finished.into_iter().collect();
    let handed_back: BTreeSet<Uuid> = in_flight.difference(&finished).copied().collect();
    let quick_unfinished: Vec<&Uuid> = handed_back
        .iter()
        .filter(|id| !slow_ids.contains(id))
        .collect();
    assert!(
        quick_unfinished.is_empty(),
        "the node did not finish quick deliveries within the grace: {quick_unfinished:?}"
    );
    assert!(
        !handed_back.is_empty(),
        "the node handed nothing back: the scenario tests only half of the drain"
    );
    let exited_at = Instant::now();

    let verdict = settle(
        &c,
        ENDPOINTS,
        &ids,
        &in_flight,
        exited_at,
        Duration::from_secs(40),
    )
    .await;
    let finished_dups: Vec<&Uuid> = verdict
        .duplicates
        .keys()
        .filter(|id| !handed_back.contains(id))
        .collect();
    assert!(
        finished_dups.is_empty(),
        "deliveries the node finished itself arrived twice: {finished_dups:?}"
    );
    let rescued = c.rescued().await;
    assert!(
        rescued.is_empty(),
        "jobs were left for the rescuer instead of handed back: {rescued:?}"
    );
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[worker_drained]: SIGTERM holding {} jobs ({} finished in the grace, {} handed \
         back), exited 0 after {:.1} s; {verdict}; {:.1} s in all",
        in_flight.len(),
        finished.len(),
        handed_back.len(),
        drained_in.as_secs_f64(),
        c.started.elapsed().as_secs_f64()
    );
}
