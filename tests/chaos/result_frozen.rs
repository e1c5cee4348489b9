//! A worker node frozen inside its result transaction: it holds its job's group row,
//! its host's gate row, its channel, delivery and job rows until the server ends the
//! transaction (`idle_in_transaction_timeout`, 15 s here as in production). Meanwhile:
//! - another tenant's deliveries, to another host, through a second worker, arrive as fast as
//!   usual (a fetch that waited for the frozen gate row stalled every tenant of the queue);
//! - the second worker's rescuer, which finds the frozen node's other job stale and counted in
//!   that gate, skips it instead of waiting, and its heartbeat keeps beating.
//!
//! The freeze is placed by the test, not by chance: a statement trigger the test adds on `jobs`
//! (after the slot release, so the group and gate rows are already written) takes a shared
//! advisory lock the test holds, for results of one channel only. The victim's result
//! transaction stops there; the test sends `SIGSTOP`, checks the gate row is held, and lets the
//! lock go: the transaction's statement ends and it stays open, its client frozen.

use crate::cluster::{Cluster, Role};
use breakwater::receiver::{Behavior, Receiver};
use breakwater_e2e::{eventually_every, wait_until};
use sqlx::Connection;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The advisory lock key of the freeze point.
const FREEZE_POINT: i64 = 31;
/// How long the victim stays frozen while the other tenant is served: past the rescue time
/// (2 s of silence), so the other node's rescuer meets the frozen node's jobs.
const FROZEN: Duration = Duration::from_secs(5);
/// The latency every delivery of the other tenant must keep while the victim is frozen (they
/// take ~10–50 ms here; a fetch waiting for the frozen transaction takes up to 15 s).
const PROMPT: Duration = Duration::from_secs(1);

/// Installs the freeze point: results (a job leaving `executing`) of jobs of group `group`
/// wait for the shared advisory lock [`FREEZE_POINT`]. A statement trigger named after every
/// trigger of the schema, so it runs after the slot release whether that is a row or a
/// statement trigger.
async fn install_freeze_point(c: &Cluster, group: Uuid) {
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION chaos_freeze_point() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF EXISTS (SELECT 1 FROM chaos_old o JOIN chaos_new n ON n.id = o.id
                        WHERE o.state = 'executing' AND n.state <> 'executing'
                          AND o.group_id = '{group}') THEN
                 PERFORM pg_advisory_xact_lock_shared({FREEZE_POINT});
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER zz_chaos_freeze_point AFTER UPDATE ON jobs
             REFERENCING OLD TABLE AS chaos_old NEW TABLE AS chaos_new
             FOR EACH STATEMENT EXECUTE FUNCTION chaos_freeze_point();"
    ))
    .execute(&c.db)
    .await
    .expect("installing the freeze point");
}

/// The backend of node `name` that waits at the freeze point (an advisory lock), if one does.
async fn waiting_at_freeze_point(c: &Cluster, name: &str) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE application_name = $1 AND state = 'active'
           AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
    )
    .bind(name)
    .fetch_optional(&c.db)
    .await
    .expect("reading pg_stat_activity")
}

/// Whether backend `pid` is open and idle inside a transaction (`pg_stat_activity`). Only the
/// victim's result connection is asked about: another of its connections may have been
/// stopped inside a transaction of its own (a fetch, a begin), which says nothing here.
async fn idle_in_transaction(c: &Cluster, pid: i32) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                        WHERE pid = $1 AND state = 'idle in transaction')",
    )
    .bind(pid)
    .fetch_one(&c.db)
    .await
    .expect("reading pg_stat_activity")
}

/// Whether another transaction holds gate `gate`'s row (a `NOWAIT` lock attempt fails).
async fn gate_row_held(c: &Cluster, gate: &str) -> bool {
    let mut conn = c.db.acquire().await.expect("a connection");
    let mut tx = conn.begin().await.expect("a transaction");
    let r = sqlx::query("SELECT 1 FROM job_gates WHERE gate_key = $1 FOR UPDATE NOWAIT")
        .bind(gate)
        .execute(&mut *tx)
        .await;
    tx.rollback().await.expect("rollback");
    r.is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_frozen_in_its_result_transaction_stalls_neither_other_tenants_nor_the_rescuer() {
    // Two deliveries at a time per node, so the victim holds exactly what the test gives it.
    let mut c = Cluster::start(
        "result_frozen",
        &[
            (
                "BREAKWATER_DATABASE__IDLE_IN_TRANSACTION_TIMEOUT_MS",
                "15000",
            ),
            ("BREAKWATER_WORKER__POOL_DEFAULT", "2"),
            ("BREAKWATER_WORKER__REQUEST_TIMEOUT_MS", "10000"),
        ],
    )
    .await;
    c.spawn(Role::Api).await;
    let victim = c.spawn(Role::Worker).await;
    let victim_name = c.node(victim).name.clone();
    let victim_id = c.node(victim).id().to_string();

    // Tenant A, three channels on the cluster's receiver: one host, one capped gate.
    let a = c.tenant().await;
    let slow = c
        .channel(&a, "a-slow", Behavior::Delay(Duration::from_secs(3), 200))
        .await;
    let frozen = c
        .channel(
            &a,
            "a-frozen",
            Behavior::Delay(Duration::from_millis(100), 200),
        )
        .await;
    let more = c
        .channel(
            &a,
            "a-more",
            Behavior::Delay(Duration::from_millis(100), 200),
        )
        .await;
    let gate: String = sqlx::query_scalar("SELECT gate_key FROM job_groups WHERE group_id = $1")
        .bind(frozen)
        .fetch_one(&c.db)
        .await
        .expect("the channel's gate");
    install_freeze_point(&c, frozen).await;
    let mut holder = sqlx::PgConnection::connect(&c.url)
        .await
        .expect("the freeze point's holder");
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(FREEZE_POINT)
        .execute(&mut holder)
        .await
        .expect("holding the freeze point");

    // The victim runs a slow delivery (still in flight while it is frozen: a stale job the
    // rescuer meets, counted in the gate) and records the result of one of `frozen`, which
    // stops at the freeze point with the group and gate rows written.
    let mut accepted = c.enqueue(&a, slow, 1).await;
    c.wait_holding(&victim_id, 1, Duration::from_secs(10)).await;
    accepted.extend(c.enqueue(&a, frozen, 1).await);
    wait_until(
        Duration::from_secs(10),
        "the victim's result transaction reaches the freeze point",
        || async { waiting_at_freeze_point(&c, &victim_name).await.is_some() },
    )
    .await;
    let result_pid = waiting_at_freeze_point(&c, &victim_name)
        .await
        .expect("the victim's result connection at the freeze point");
    c.node(victim).signal("STOP");
    let frozen_at = Instant::now();
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(FREEZE_POINT)
        .execute(&mut holder)
        .await
        .expect("letting the freeze point go");
    // 10 s: on a 2-core machine at load ~10 (CI beside other builds) the released statement
    // took over 5 s to finish; still well inside the 15-s idle-in-transaction bound.
    wait_until(
        Duration::from_secs(10),
        "the frozen victim's transaction is open and idle",
        || async { idle_in_transaction(&c, result_pid).await },
    )
    .await;
    assert!(
        gate_row_held(&c, &gate).await,
        "the frozen transaction does not hold the gate row: the scenario tests nothing"
    );
    // Due work in the same gate, in a group nobody holds: a fetch serving it meets the gate.
    accepted.extend(c.enqueue(&a, more, 3).await);

    // Tenant B, on another host, served by a second worker.
    let other_host = Receiver::start().await.expect("a second receiver");
    let b = c.tenant().await;
    let b_channel = c
        .channel_on(
            &other_host,
            &b,
            "b",
            Behavior::Delay(Duration::from_millis(10), 200),
        )
        .await;
    let second = c.spawn(Role::Worker).await;
    let second_id = c.node(second).id().to_string();

    // While the victim stays frozen: each of B's deliveries arrives promptly, and the second
    // node's heartbeat stays fresh (its rescuer meets the victim's stale, gated job).
    let mut latencies = Vec::new();
    let mut oldest_beat = Duration::ZERO;
    while frozen_at.elapsed() < FROZEN {
        let sent = Instant::now();
        accepted.extend(c.enqueue(&b, b_channel, 1).await);
        let n = latencies.len() + 1;
        let arrived = eventually_every(PROMPT, Duration::from_millis(5), || async {
            other_host.count("b") >= n
        })
        .await;
        assert!(
            arrived,
            "tenant B's delivery {n} took more than {PROMPT:?} while a worker was frozen in \
             its result transaction ({:?} into the freeze; earlier ones: {latencies:?})",
            frozen_at.elapsed()
        );
        latencies.push(sent.elapsed());
        let beat: f64 = sqlx::query_scalar(
            "SELECT extract(epoch FROM now() - heartbeat_at)::float8 FROM queue_nodes WHERE id = $1",
        )
        .bind(&second_id)
        .fetch_one(&c.db)
        .await
        .expect("the second node's heartbeat");
        oldest_beat = oldest_beat.max(Duration::from_secs_f64(beat.max(0.0)));
        assert!(
            oldest_beat < PROMPT,
            "the second node's heartbeat is {beat:.1} s old ({:?} into the freeze)",
            frozen_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        idle_in_transaction(&c, result_pid).await,
        "the victim's transaction ended during the observation: the scenario tested less"
    );

    // The victim wakes and commits; everything is delivered and the invariants hold.
    c.node(victim).signal("CONT");
    let mut conn = c.db.acquire().await.expect("a connection");
    wait_until(
        Duration::from_secs(30),
        "every accepted delivery is delivered",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM deliveries WHERE id = ANY($1) AND status <> 'delivered'",
            )
            .bind(&accepted)
            .fetch_one(&c.db)
            .await
            .expect("counting deliveries")
                == 0
        },
    )
    .await;
    let findings = breakwater_core::doctor::check(&mut conn, 100)
        .await
        .expect("the doctor's check runs");
    assert!(findings.is_empty(), "invariants broken: {findings:?}");
    drop(conn);
    c.stop_all(Duration::from_secs(10)).await;
    println!(
        "chaos[result_frozen]: victim frozen {FROZEN:?} in its result transaction holding gate \
         {gate}; tenant B latencies {latencies:?}; second node's heartbeat at most {oldest_beat:?} \
         old; {:.1} s in all",
        c.started.elapsed().as_secs_f64()
    );
}
