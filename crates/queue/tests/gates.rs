//! Gates (a parked flag, a probe slot and a cluster-wide cap shared by a set of groups) against
//! a real Postgres (a fresh database per test).

use breakwater_queue::maintenance::{heartbeat, rescue, RescuePolicy};
use breakwater_queue::runner::PoolConfig;
use breakwater_queue::{
    complete, define_group, enqueue, enqueue_many, explain_fetch, fetch, fetch_batch,
    fetch_batch_from, gate_state, group_state, index_rows, park_gate, park_group, parked_gates,
    recount_gate_slots, recount_group_slots, release_gate, set_gate_max_in_flight, set_group_gate,
    set_max_in_flight, slots_drift, snooze, wake_one_in_gate, Backoff, GroupLimits, Job, NewJob,
    SlotOwner, SlotsDrift, PRIORITY_URGENT,
};
use serde_json::json;
use sqlx::PgPool;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

mod support;
use support::{
    assert_backlog_flows_on_finished_jobs, beating_for_a_day, drain_concurrently,
    enqueue_round_robin, job, spawn_nodes, uncapped, Counters, BEAT_GAP,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Group caps high enough never to bind; the gate ceiling as given (`None`: a gate without its
/// own cap is not capped, and unless parked not counted).
fn limits(gate_ceiling: Option<u32>) -> GroupLimits {
    GroupLimits {
        gate_ceiling,
        ..uncapped()
    }
}

/// `n` new groups in gate `gate` (in share `share`, or each its own), `per` jobs each.
async fn gated_groups(
    pool: &PgPool,
    gate: &str,
    share: Option<Uuid>,
    n: usize,
    per: i64,
) -> Vec<Uuid> {
    let mut conn = pool.acquire().await.unwrap();
    let mut groups = Vec::new();
    for _ in 0..n {
        let g = Uuid::new_v4();
        define_group(&mut *conn, g, share).await.unwrap();
        set_group_gate(&mut conn, g, Some(gate)).await.unwrap();
        let jobs: Vec<NewJob> = (0..per).map(|i| job(i).group(g)).collect();
        enqueue_many(&mut conn, &jobs).await.unwrap();
        groups.push(g);
    }
    groups
}

async fn executing_in(pool: &PgPool, groups: &[Uuid]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'executing' AND group_id = ANY($1)")
        .bind(groups)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn gate_in_flight(pool: &PgPool, gate: &str) -> i32 {
    gate_state(pool, gate).await.unwrap().unwrap().in_flight
}

/// Every job row's version (ctid, xmin): unchanged means no job row was written.
async fn job_versions(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT ctid::text, xmin::text FROM jobs ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn parking_and_releasing_a_gate_of_many_groups_writes_no_job(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 20, 50).await;
    let mut conn = pool.acquire().await.unwrap();
    let outside = Uuid::new_v4();
    enqueue(&mut conn, &job(0).group(outside)).await.unwrap();
    let before = job_versions(&pool).await;

    assert_eq!(park_gate(&mut conn, "host-a").await.unwrap(), 1000);
    assert_eq!(
        parked_gates(&pool).await.unwrap(),
        vec!["host-a".to_string()]
    );
    assert_eq!(
        job_versions(&pool).await,
        before,
        "parking wrote no job row"
    );
    let got = fetch_batch(&pool, "q", "n", 100, &limits(None))
        .await
        .unwrap();
    assert_eq!(
        got.jobs.iter().map(|j| j.group_id).collect::<Vec<_>>(),
        vec![Some(outside)],
        "only the group outside the gate is fetched"
    );
    assert!(
        got.capped_gates.is_empty() && !got.waiting,
        "a parked gate is neither capped nor waiting: only a release wakes it"
    );
    complete(&pool, got.jobs[0].id, got.jobs[0].claim_token)
        .await
        .unwrap();
    let before = job_versions(&pool).await;

    assert_eq!(release_gate(&mut conn, "host-a").await.unwrap(), 1000);
    assert_eq!(
        job_versions(&pool).await,
        before,
        "releasing wrote no job row"
    );
    assert!(parked_gates(&pool).await.unwrap().is_empty());
    let gate_row = gate_version(&pool, "host-a").await;
    let released = fetch(&pool, "q", "n", 2000, &limits(None)).await.unwrap();
    assert_eq!(released.len(), 1000);
    assert!(released
        .iter()
        .all(|j| j.gate_key.as_deref() == Some("host-a")));
    let distinct: HashSet<Option<Uuid>> = released.iter().map(|j| j.group_id).collect();
    assert_eq!(distinct.len(), groups.len());
    assert_eq!(
        gate_version(&pool, "host-a").await,
        gate_row,
        "a released gate without a cap is not counted: its row is not written"
    );
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
}

/// Gate `gate`'s row version (ctid, xmin): unchanged means the row was not written.
async fn gate_version(pool: &PgPool, gate: &str) -> (String, String) {
    sqlx::query_as("SELECT ctid::text, xmin::text FROM job_gates WHERE gate_key = $1")
        .bind(gate)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_gate_without_cap_and_not_parked_is_never_written_by_claims_or_results(pool: PgPool) {
    // Two tenants' groups on one shared host, no cap anywhere: four fetch-and-complete loops
    // run all 300 jobs. The gate's row is never locked for update or written meanwhile.
    gated_groups(&pool, "shared-host", Some(Uuid::new_v4()), 5, 30).await;
    gated_groups(&pool, "shared-host", Some(Uuid::new_v4()), 5, 30).await;
    let before = gate_version(&pool, "shared-host").await;
    let fetched = drain_concurrently(&pool, 4, 4, &limits(None), |_| async {}).await;
    assert_eq!(fetched.len(), 300, "every job flowed once");
    assert!(fetched
        .iter()
        .all(|j| j.gate_key.as_deref() == Some("shared-host")));
    assert_eq!(
        gate_version(&pool, "shared-host").await,
        before,
        "no claim or result wrote the gate's row"
    );
    let stamped: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE gate_slot IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stamped, 0, "no job was counted in a gate");
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

/// Runs `fetchers` concurrent fetch loops (limit 5 each) until each sees `rounds` empty fetches
/// in a row; returns every job claimed.
async fn hammer(pool: &PgPool, fetchers: usize, rounds: usize, lim: GroupLimits) -> Vec<Job> {
    let mut handles = Vec::new();
    for f in 0..fetchers {
        let (pool, lim) = (pool.clone(), lim.clone());
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut empty = 0;
            while empty < rounds {
                let batch = fetch(&pool, "q", &format!("n{f}"), 5, &lim).await.unwrap();
                if batch.is_empty() {
                    empty += 1;
                    tokio::task::yield_now().await;
                } else {
                    empty = 0;
                    got.extend(batch);
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_bound_probe_hands_out_exactly_the_woken_job_of_the_whole_gate(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 5, 20).await;
    let mut conn = pool.acquire().await.unwrap();
    // A group parked on its own is never the probe's group.
    park_group(&mut conn, groups[0]).await.unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();

    let (probe, group, args) =
        wake_one_in_gate(&mut conn, "host-a", "test", PRIORITY_URGENT, &[], &[])
            .await
            .unwrap()
            .expect("a waiting job");
    assert_ne!(group, groups[0], "the woken job's group is not parked");
    assert_eq!(args, json!({ "n": 0 }), "its oldest job");
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!(
        (st.parked, st.probe_slots, st.probe_group, st.groups),
        (true, 1, Some(group), 5)
    );

    // Six fetchers race: exactly one job of the gate comes out, the woken one.
    let got = hammer(&pool, 6, 10, limits(None)).await;
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![probe]);
    assert_eq!(got[0].priority, PRIORITY_URGENT);
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!((st.probe_slots, st.probe_group, st.in_flight), (0, None, 1));

    // Parking again withdraws a slot nobody used; releasing opens every group but the one
    // parked on its own.
    wake_one_in_gate(&mut conn, "host-a", "test", PRIORITY_URGENT, &[], &[])
        .await
        .unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();
    assert!(hammer(&pool, 3, 10, limits(None)).await.is_empty());
    release_gate(&mut conn, "host-a").await.unwrap();
    let rest = hammer(&pool, 3, 10, limits(None)).await;
    assert_eq!(rest.len(), 4 * 20 - 1);
    assert!(rest.iter().all(|j| j.group_id != Some(groups[0])));
}

/// The caller's ranking wins over fetch order: the head of the first ranked group that can run
/// is the probe (a parked group is skipped even when ranked first); unranked groups come after
/// every ranked one, in fetch order.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_probe_is_the_head_of_the_first_ranked_group_that_can_run(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 5, 3).await;
    let mut conn = pool.acquire().await.unwrap();
    park_group(&mut conn, groups[4]).await.unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();

    let wake = |prefer: Vec<Uuid>, avoid: Vec<Uuid>| {
        let pool = pool.clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            wake_one_in_gate(
                &mut conn,
                "host-a",
                "test",
                PRIORITY_URGENT,
                &prefer,
                &avoid,
            )
            .await
            .unwrap()
            .expect("a waiting job")
            .1
        }
    };
    assert_eq!(wake(vec![groups[3], groups[1]], vec![]).await, groups[3]);
    assert_eq!(
        wake(vec![groups[4], groups[2]], vec![]).await,
        groups[2],
        "parked: skipped"
    );
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!((st.probe_slots, st.probe_group), (1, Some(groups[2])));
    // Without a ranking, fetch order: the jobs woken before are urgent, the first woken (the
    // oldest `scheduled_at`) first.
    assert_eq!(wake(vec![], vec![]).await, groups[3]);
    // An unknown id ranks nothing.
    assert_eq!(
        wake(vec![Uuid::now_v7(), groups[0]], vec![]).await,
        groups[0]
    );
    // An avoided group is skipped, ranked or not: the ranked head, then fetch order's first.
    assert_eq!(
        wake(vec![groups[0], groups[1]], vec![groups[0]]).await,
        groups[1]
    );
    assert_eq!(
        wake(vec![], vec![groups[3], groups[2], groups[0]]).await,
        groups[1],
        "fetch order without the avoided groups"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_unbound_probe_takes_exactly_the_next_job_to_arrive_in_the_gate(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 4, 0).await;
    let mut conn = pool.acquire().await.unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();
    assert_eq!(
        wake_one_in_gate(&mut conn, "host-a", "test", PRIORITY_URGENT, &[], &[])
            .await
            .unwrap(),
        None,
        "nothing waits"
    );
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!(
        (st.probe_slots, st.probe_group),
        (1, None),
        "slot granted unbound"
    );

    // Jobs arrive in every group of the gate; racing fetchers take exactly one of them.
    let mut jobs = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        jobs.extend((0..10).map(|n| job(n + 10 * i as i64).group(*g)));
    }
    enqueue_many(&mut conn, &jobs).await.unwrap();
    let got = hammer(&pool, 6, 10, limits(None)).await;
    assert_eq!(got.len(), 1, "one job of the whole parked gate");
    assert_eq!(got[0].gate_key.as_deref(), Some("host-a"));
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!((st.probe_slots, st.in_flight), (0, 1));
}

fn pool_config(node: usize, poll: Duration, lim: GroupLimits) -> PoolConfig {
    PoolConfig {
        queue: "q".into(),
        node_id: format!("node-{node}"),
        concurrency: 10,
        poll_interval: poll,
        shutdown_grace: Duration::from_secs(1),
        backoff: Backoff::default(),
        limits: lim,
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_gate_cap_holds_across_three_nodes_and_many_groups(pool: PgPool) {
    // 8 groups of 2 shares in one gate (cap 3), group caps far above it.
    let a = gated_groups(&pool, "host-a", Some(Uuid::new_v4()), 6, 10).await;
    let b = gated_groups(&pool, "host-a", Some(Uuid::new_v4()), 2, 30).await;
    let mut conn = pool.acquire().await.unwrap();
    set_gate_max_in_flight(&mut conn, "host-a", Some(3))
        .await
        .unwrap();
    let total = 6 * 10 + 2 * 30;
    let counters = Counters::default();
    let nodes = spawn_nodes(&pool, 3, total, Duration::from_millis(30), &counters, |i| {
        pool_config(i, Duration::from_millis(200), limits(None))
    });
    // Meanwhile, sample the rows: never more than 3 of the gate's jobs executing.
    let groups: Vec<Uuid> = a.iter().chain(&b).copied().collect();
    let mut most_seen = 0;
    while counters.done() < total && nodes.iter().any(|n| !n.is_finished()) {
        let n = executing_in(&pool, &groups).await;
        assert!(n <= 3, "{n} of the gate's jobs executing: its cap is 3");
        most_seen = most_seen.max(n);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for n in nodes {
        n.join().unwrap();
    }
    assert_eq!(counters.done(), total);
    let most = counters.max();
    assert!(most <= 3, "{most} in flight at once: the gate's cap is 3");
    assert!(
        most >= 2 || most_seen >= 2,
        "the nodes did share the gate ({most} at most)"
    );
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn concurrent_fetchers_never_overshoot_the_gate_cap(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 10, 20).await;
    let fetched = drain_concurrently(&pool, 5, 3, &limits(Some(4)), move |pool| {
        let groups = groups.clone();
        async move {
            let running = executing_in(&pool, &groups).await;
            assert!(running <= 4, "{running} executing: the gate's cap is 4");
        }
    })
    .await;
    assert_eq!(fetched.len(), 200, "every job once");
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_gate_room_is_shared_across_shares_first(pool: PgPool) {
    let (tenant_a, tenant_b) = (Uuid::new_v4(), Uuid::new_v4());
    // B already runs 6 jobs elsewhere (outside the gate) and has 10 more waiting there, which
    // must not cost it its share of the gate.
    let elsewhere = Uuid::new_v4();
    define_group(&pool, elsewhere, Some(tenant_b))
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let busy: Vec<NewJob> = (0..16).map(|n| job(n).group(elsewhere)).collect();
    enqueue_many(&mut conn, &busy).await.unwrap();
    let lim = limits(Some(4));
    assert_eq!(fetch(&pool, "q", "n", 6, &lim).await.unwrap().len(), 6);
    // A has five groups in the gate, B one.
    let a = gated_groups(&pool, "host-a", Some(tenant_a), 5, 20).await;
    let b = gated_groups(&pool, "host-a", Some(tenant_b), 1, 20).await;

    let got = fetch_batch(&pool, "q", "n", 20, &lim).await.unwrap();
    let of = |gs: &[Uuid]| {
        got.jobs
            .iter()
            .filter(|j| gs.contains(&j.group_id.unwrap()))
            .count()
    };
    assert_eq!((of(&a), of(&b)), (2, 2), "the gate's 4 slots split 2 / 2");
    assert_eq!(
        of(&[elsewhere]),
        10,
        "outside the gate, no gate's cap applies"
    );
    assert_eq!(got.capped_gates, vec!["host-a".to_string()]);

    // A slot frees (one of A's): it goes to A (1 running in the gate against B's 2)...
    let a_job = got
        .jobs
        .iter()
        .find(|j| a.contains(&j.group_id.unwrap()))
        .unwrap();
    complete(&pool, a_job.id, a_job.claim_token).await.unwrap();
    let next = fetch(&pool, "q", "n", 20, &lim).await.unwrap();
    assert_eq!(next.len(), 1);
    assert!(a.contains(&next[0].group_id.unwrap()));
    // ...and when one of B's frees, to B.
    let b_job = got
        .jobs
        .iter()
        .find(|j| b.contains(&j.group_id.unwrap()))
        .unwrap();
    complete(&pool, b_job.id, b_job.claim_token).await.unwrap();
    let next = fetch(&pool, "q", "n", 20, &lim).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].group_id, Some(b[0]));
}

/// The counts as one snapshot: gates x's and y's `in_flight`, the jobs executing counted in each
/// (`gate_slot`), the group's `in_flight`, and its executing jobs.
async fn counts(pool: &PgPool, g: Uuid) -> (i32, i32, i64, i64, i32, i64) {
    sqlx::query_as(
        "SELECT (SELECT in_flight FROM job_gates WHERE gate_key = 'x'),
                (SELECT in_flight FROM job_gates WHERE gate_key = 'y'),
                (SELECT count(*) FROM jobs WHERE state = 'executing' AND gate_slot = 'x'),
                (SELECT count(*) FROM jobs WHERE state = 'executing' AND gate_slot = 'y'),
                (SELECT in_flight FROM job_groups WHERE group_id = $1),
                (SELECT count(*) FROM jobs WHERE group_id = $1 AND state = 'executing')",
    )
    .bind(g)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_group_moved_between_capped_gates_with_jobs_in_flight_keeps_every_count_exact(
    pool: PgPool,
) {
    let g = gated_groups(&pool, "x", None, 1, 200).await[0];
    let mut conn = pool.acquire().await.unwrap();
    set_gate_max_in_flight(&mut conn, "x", Some(100))
        .await
        .unwrap();
    set_gate_max_in_flight(&mut conn, "y", Some(100))
        .await
        .unwrap();
    set_group_gate(&mut conn, g, Some("y")).await.unwrap();
    set_group_gate(&mut conn, g, Some("x")).await.unwrap();
    let running = fetch(&pool, "q", "n", 3, &limits(None)).await.unwrap();
    assert_eq!(counts(&pool, g).await, (3, 0, 3, 0, 3, 3));
    set_group_gate(&mut conn, g, Some("y")).await.unwrap();
    assert_eq!(
        counts(&pool, g).await,
        (3, 0, 3, 0, 3, 3),
        "the 3 stay counted where they were claimed"
    );
    let more = fetch(&pool, "q", "n", 2, &limits(None)).await.unwrap();
    assert_eq!(
        counts(&pool, g).await,
        (3, 2, 3, 2, 5, 5),
        "new claims count in the new gate"
    );
    complete(&pool, running[0].id, running[0].claim_token)
        .await
        .unwrap();
    complete(&pool, more[0].id, more[0].claim_token)
        .await
        .unwrap();
    assert_eq!(
        counts(&pool, g).await,
        (2, 1, 2, 1, 3, 3),
        "each released on the gate it was counted in"
    );
    set_group_gate(&mut conn, g, None).await.unwrap();
    assert_eq!(
        counts(&pool, g).await,
        (2, 1, 2, 1, 3, 3),
        "out of every gate"
    );
    for j in running[1..].iter().chain(&more[1..]) {
        complete(&pool, j.id, j.claim_token).await.unwrap();
    }
    assert_eq!(counts(&pool, g).await, (0, 0, 0, 0, 0, 0));

    // Under load: four fetch-and-complete loops while the group flips between x and y. Every
    // snapshot keeps each gate's count equal to the jobs executing counted in it, and x + y
    // equal to the group's count and its executing jobs (both gates are capped: every claim
    // is counted in one of them).
    set_group_gate(&mut conn, g, Some("x")).await.unwrap();
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for f in 0..4 {
        let (pool, stop) = (pool.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let batch = fetch(&pool, "q", &format!("n{f}"), 2, &limits(None))
                    .await
                    .unwrap();
                if batch.is_empty() {
                    return;
                }
                for j in batch {
                    complete(&pool, j.id, j.claim_token).await.unwrap();
                }
            }
        }));
    }
    for i in 0..40 {
        let to = if i % 2 == 0 { "y" } else { "x" };
        set_group_gate(&mut conn, g, Some(to)).await.unwrap();
        let (x, y, in_x, in_y, group, executing) = counts(&pool, g).await;
        assert_eq!(
            (i64::from(x), i64::from(y)),
            (in_x, in_y),
            "each gate's count is its counted jobs"
        );
        assert_eq!(x + y, group, "gates {x} + {y} against the group's {group}");
        assert_eq!(i64::from(group), executing);
    }
    stop.cancel();
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(counts(&pool, g).await, (0, 0, 0, 0, 0, 0));
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn rescue_and_delete_give_the_gate_its_slots_back(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 2, 5).await;
    let lim = limits(Some(3));
    heartbeat(&pool, "dead-node", BEAT_GAP).await.unwrap();
    let running = fetch(&pool, "q", "dead-node", 10, &lim).await.unwrap();
    assert_eq!(running.len(), 3, "the gate's cap");
    assert!(fetch(&pool, "q", "other", 10, &lim)
        .await
        .unwrap()
        .is_empty());
    // Both groups move to another gate (capped too, by the ceiling) while their jobs run: the
    // slots still belong to the gate the jobs were counted in.
    let mut conn = pool.acquire().await.unwrap();
    for g in &groups {
        set_group_gate(&mut conn, *g, Some("host-b")).await.unwrap();
    }
    assert_eq!(gate_in_flight(&pool, "host-b").await, 0);
    sqlx::query("UPDATE queue_nodes SET heartbeat_at = now() - interval '1 hour'")
        .execute(&pool)
        .await
        .unwrap();
    // One of the dead node's jobs is deleted outright; rescue takes the other two back.
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(running[0].id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(gate_in_flight(&pool, "host-a").await, 2);
    let policy = RescuePolicy {
        stale_after: Duration::from_secs(30),
        max_run: Duration::from_secs(3600),
        own_node: "live".into(),
    };
    beating_for_a_day(&pool, "live").await;
    assert_eq!(rescue(&mut conn, &policy).await.unwrap(), 2);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
    assert_eq!(gate_in_flight(&pool, "host-b").await, 0);
    let next = fetch(&pool, "q", "live", 10, &lim).await.unwrap();
    assert_eq!(next.len(), 3);
    assert!(next.iter().all(|j| j.gate_key.as_deref() == Some("host-b")));
    assert_eq!(gate_in_flight(&pool, "host-b").await, 3);
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_gate_cap_below_the_group_caps_binds_and_its_own_max_overrides_the_ceiling(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 3, 10).await;
    let ungated = Uuid::new_v4();
    let mut conn = pool.acquire().await.unwrap();
    let plain: Vec<NewJob> = (0..10).map(|n| job(n).group(ungated)).collect();
    enqueue_many(&mut conn, &plain).await.unwrap();
    assert!(matches!(
        set_gate_max_in_flight(&mut conn, "host-a", Some(0)).await,
        Err(breakwater_queue::Error::InvalidArgument(_))
    ));
    set_gate_max_in_flight(&mut conn, "host-a", Some(5))
        .await
        .unwrap();
    let got = fetch_batch(&pool, "q", "n", 100, &limits(Some(2)))
        .await
        .unwrap();
    let gated = got.jobs.iter().filter(|j| j.gate_key.is_some()).count();
    assert_eq!(
        gated, 5,
        "the gate's own max (5), not the pool's gate ceiling (2)"
    );
    assert_eq!(
        got.jobs
            .iter()
            .filter(|j| j.group_id == Some(ungated))
            .count(),
        10,
        "a group without a gate is not limited by any gate"
    );
    assert_eq!(got.capped_gates, vec!["host-a".to_string()]);
    assert!(groups.iter().all(|g| !got.capped.contains(g)));
    let st = group_state(&pool, ungated).await.unwrap().unwrap();
    assert_eq!(st.in_flight, 10);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_reads_no_more_index_rows_beside_a_parked_or_capped_gate_of_10000_jobs(
    pool: PgPool,
) {
    let mut conn = pool.acquire().await.unwrap();
    let healthy: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    enqueue_round_robin(&mut conn, &healthy, 30).await;
    let lim = GroupLimits {
        initial: 4,
        floor: 1,
        ceiling: 4,
        gate_ceiling: Some(2),
        ..GroupLimits::default()
    };
    let baseline = index_rows(&explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap());
    assert!(baseline > 0);

    // A parked gate of 4 groups holding 10 000 jobs.
    gated_groups(&pool, "parked-host", None, 4, 2_500).await;
    park_gate(&mut conn, "parked-host").await.unwrap();
    let beside_parked = index_rows(&explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap());
    // A gate of 4 groups holding 10 000 jobs, at its cap (2 of its jobs executing).
    let full = gated_groups(&pool, "full-host", None, 4, 2_500).await;
    let claimed = fetch(&pool, "q", "n", 100, &lim).await.unwrap();
    let in_full = claimed
        .iter()
        .filter(|j| full.contains(&j.group_id.unwrap()))
        .count();
    assert_eq!(in_full, 2);
    for j in claimed
        .iter()
        .filter(|j| !full.contains(&j.group_id.unwrap()))
    {
        snooze(&mut conn, j.id, j.claim_token, Duration::ZERO, None)
            .await
            .unwrap();
    }
    let beside_both = index_rows(&explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap());
    // Each group of a parked or full gate costs its one head entry, never its backlog.
    assert!(
        beside_parked <= baseline + 4 && beside_both <= baseline + 8,
        "index rows: {baseline} alone, {beside_parked} beside the parked gate, {beside_both} beside both"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_capped_gates_backlog_flows_on_finished_jobs_not_on_the_poll(pool: PgPool) {
    gated_groups(&pool, "host-a", None, 5, 6).await;
    let cfg = pool_config(0, Duration::from_secs(600), limits(Some(2)));
    assert_backlog_flows_on_finished_jobs(&pool, cfg, Duration::from_millis(30), "the gate's cap")
        .await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_group_parked_on_its_own_stays_parked_inside_an_open_gate(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 2, 5).await;
    let mut conn = pool.acquire().await.unwrap();
    park_group(&mut conn, groups[0]).await.unwrap();
    let got = fetch(&pool, "q", "n", 100, &limits(None)).await.unwrap();
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|j| j.group_id == Some(groups[1])));
    // Its own cap still applies inside a gate too.
    let more: Vec<NewJob> = (0..5).map(|n| job(n).group(groups[1])).collect();
    enqueue_many(&mut conn, &more).await.unwrap();
    set_max_in_flight(&pool, groups[1], Some(6)).await.unwrap();
    let got = fetch_batch(&pool, "q", "n", 100, &limits(None))
        .await
        .unwrap();
    assert_eq!(got.jobs.len(), 1, "6 of the group at most");
    assert_eq!(got.capped, vec![groups[1]]);
    assert!(got.capped_gates.is_empty());
}

/// `parked_count_sql` (for lists of many groups) and `backlog` (one group) count the same parked
/// jobs: a group parked on its own, a group parked by its gate, neither, and no group row.
#[sqlx::test(migrator = "MIGRATOR")]
async fn the_parked_count_of_a_list_is_the_backlogs(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 2, 3).await;
    let other = gated_groups(&pool, "host-b", None, 2, 4).await;
    let missing = Uuid::new_v4();
    let listed = |pool: PgPool, g: Uuid| async move {
        let sql = format!("SELECT {}", breakwater_queue::parked_count_sql("$1::uuid"));
        sqlx::query_scalar::<_, i64>(&sql)
            .bind(g)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let both = |pool: PgPool, g: Uuid| async move {
        let one = breakwater_queue::backlog(&pool, g).await.unwrap().parked;
        (one, listed(pool, g).await)
    };
    let mut conn = pool.acquire().await.unwrap();
    for g in groups.iter().chain(&other) {
        assert_eq!(both(pool.clone(), *g).await, (0, 0), "nothing parked yet");
    }
    park_group(&mut conn, groups[0]).await.unwrap();
    park_gate(&mut conn, "host-b").await.unwrap();
    assert_eq!(
        both(pool.clone(), groups[0]).await,
        (3, 3),
        "parked on its own"
    );
    assert_eq!(
        both(pool.clone(), groups[1]).await,
        (0, 0),
        "its gate is open"
    );
    for g in &other {
        assert_eq!(both(pool.clone(), *g).await, (4, 4), "parked by its gate");
    }
    assert_eq!(both(pool.clone(), missing).await, (0, 0), "no group row");
}

/// One check finds drifted counters of both kinds (a group's and a gate's), each repaired by its
/// own recount.
#[sqlx::test(migrator = "MIGRATOR")]
async fn drifted_group_and_gate_counters_are_found_and_recounted(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 2, 3).await;
    let running = fetch(&pool, "q", "n", 4, &limits(Some(1000)))
        .await
        .unwrap();
    assert_eq!(running.len(), 4);
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
    let executing = executing_in(&pool, &groups[..1]).await;
    // A hand edit (or a bug) breaks the counters.
    sqlx::query("UPDATE job_gates SET in_flight = 9")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE job_groups SET in_flight = 7 WHERE group_id = $1")
        .bind(groups[0])
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        slots_drift(&pool, 10).await.unwrap(),
        vec![
            SlotsDrift {
                owner: SlotOwner::Group(groups[0]),
                in_flight: 7,
                executing,
            },
            SlotsDrift {
                owner: SlotOwner::Gate("host-a".to_string()),
                in_flight: 9,
                executing: 4,
            },
        ]
    );
    let mut conn = pool.acquire().await.unwrap();
    assert!(recount_gate_slots(&mut conn, "host-a").await.unwrap());
    assert!(!recount_gate_slots(&mut conn, "host-a").await.unwrap());
    assert!(recount_group_slots(&mut *conn, groups[0]).await.unwrap());
    assert_eq!(gate_in_flight(&pool, "host-a").await, 4);
    let group = group_state(&pool, groups[0]).await.unwrap().unwrap();
    assert_eq!(i64::from(group.in_flight), executing);
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn racing_probe_wakers_still_let_exactly_one_job_of_the_gate_through(pool: PgPool) {
    gated_groups(&pool, "host-a", None, 5, 10).await;
    let mut conn = pool.acquire().await.unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();
    // Five nodes' probe timers fire at once.
    let mut wakers = Vec::new();
    for _ in 0..5 {
        let pool = pool.clone();
        wakers.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await.unwrap();
            wake_one_in_gate(&mut conn, "host-a", "test", PRIORITY_URGENT, &[], &[])
                .await
                .unwrap()
                .expect("a waiting job")
        }));
    }
    for w in wakers {
        w.await.unwrap();
    }
    let got = hammer(&pool, 6, 10, limits(None)).await;
    assert_eq!(got.len(), 1, "one probe slot, one job");
    let st = gate_state(&pool, "host-a").await.unwrap().unwrap();
    assert_eq!((st.probe_slots, st.in_flight), (0, 1));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn no_fetch_started_after_park_gate_returns_takes_a_job_of_the_gate(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 10, 100).await;
    let parked_at: Arc<std::sync::Mutex<Option<std::time::Instant>>> = Arc::default();
    let mut fetchers = Vec::new();
    for f in 0..4 {
        let (pool, parked_at) = (pool.clone(), parked_at.clone());
        fetchers.push(tokio::spawn(async move {
            let mut late = 0;
            let mut after_park = 0;
            while after_park < 20 {
                let started = std::time::Instant::now();
                let batch = fetch(&pool, "q", &format!("n{f}"), 3, &limits(None))
                    .await
                    .unwrap();
                let parked = *parked_at.lock().unwrap();
                if parked.is_some_and(|p| started > p) {
                    after_park += 1;
                    late += batch.len();
                }
                for j in batch {
                    complete(&pool, j.id, j.claim_token).await.unwrap();
                }
            }
            late
        }));
    }
    // Let the fetchers take some of the gate's jobs, then park it under their feet.
    let mut conn = pool.acquire().await.unwrap();
    loop {
        let done: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
            .fetch_one(&pool)
            .await
            .unwrap();
        if done >= 30 {
            break;
        }
        tokio::task::yield_now().await;
    }
    park_gate(&mut conn, "host-a").await.unwrap();
    *parked_at.lock().unwrap() = Some(std::time::Instant::now());
    let mut late = 0;
    for f in fetchers {
        late += f.await.unwrap();
    }
    assert_eq!(
        late, 0,
        "a fetch that started after the park took the gate's jobs"
    );
    assert!(executing_in(&pool, &groups).await == 0);
    let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'available'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        waiting > 0 && waiting < 1000,
        "parked mid-way ({waiting} left)"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn turning_a_cap_on_while_jobs_run_counts_them(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 3, 20).await;
    let mut conn = pool.acquire().await.unwrap();
    // Six run uncounted (no cap yet), then the cap (4) is turned on: they are counted at once.
    let running = fetch(&pool, "q", "n", 6, &limits(None)).await.unwrap();
    assert_eq!(running.len(), 6);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
    set_gate_max_in_flight(&mut conn, "host-a", Some(4))
        .await
        .unwrap();
    assert_eq!(gate_in_flight(&pool, "host-a").await, 6);
    let got = fetch_batch(&pool, "q", "n", 10, &limits(None))
        .await
        .unwrap();
    assert!(got.jobs.is_empty(), "6 running against a cap of 4");
    assert_eq!(got.capped_gates, vec!["host-a".to_string()]);
    for j in &running[..3] {
        complete(&pool, j.id, j.claim_token).await.unwrap();
    }
    assert_eq!(gate_in_flight(&pool, "host-a").await, 3);
    assert_eq!(
        fetch(&pool, "q", "n", 10, &limits(None))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(executing_in(&pool, &groups).await, 4);
    // Setting the same cap again counts nothing twice.
    set_gate_max_in_flight(&mut conn, "host-a", Some(4))
        .await
        .unwrap();
    assert_eq!(gate_in_flight(&pool, "host-a").await, 4);
    // Removing the cap: the counted jobs lower the count as they finish; new claims are not
    // counted.
    set_gate_max_in_flight(&mut conn, "host-a", None)
        .await
        .unwrap();
    let uncounted = fetch(&pool, "q", "n", 5, &limits(None)).await.unwrap();
    assert_eq!(uncounted.len(), 5);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 4);
    let counted: Vec<&Job> = running[3..].iter().collect();
    for j in counted {
        complete(&pool, j.id, j.claim_token).await.unwrap();
    }
    assert_eq!(gate_in_flight(&pool, "host-a").await, 1);
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_cap_turned_on_under_load_holds_once_the_fetches_running_then_are_done(pool: PgPool) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let groups = gated_groups(&pool, "host-a", None, 8, 60).await;
    // Four fetch-and-complete loops, each job held a moment, no cap at first.
    let rounds: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for f in 0..4 {
        let (pool, stop, rounds) = (pool.clone(), stop.clone(), rounds.clone());
        workers.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let batch = fetch(&pool, "q", &format!("n{f}"), 3, &limits(None))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                for j in batch {
                    complete(&pool, j.id, j.claim_token).await.unwrap();
                }
                rounds[f].fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // Let them get going uncounted, then turn the cap on under their feet.
    let mut conn = pool.acquire().await.unwrap();
    while rounds.iter().map(|r| r.load(Ordering::SeqCst)).sum::<u64>() < 8 {
        tokio::task::yield_now().await;
    }
    set_gate_max_in_flight(&mut conn, "host-a", Some(3))
        .await
        .unwrap();
    // Once every loop has finished a whole round that started after that (any batch fetched
    // by a fetch already running then is completed), never more than 3 run.
    let after: Vec<u64> = rounds.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    while rounds
        .iter()
        .zip(&after)
        .any(|(r, a)| r.load(Ordering::SeqCst) < a + 2)
    {
        tokio::task::yield_now().await;
    }
    let mut samples = 0;
    loop {
        let n = executing_in(&pool, &groups).await;
        assert!(n <= 3, "{n} of the gate's jobs executing: its cap is 3");
        samples += 1;
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state <> 'completed'")
            .fetch_one(&pool)
            .await
            .unwrap();
        if left == 0 {
            break;
        }
    }
    stop.cancel();
    for w in workers {
        w.await.unwrap();
    }
    assert!(samples > 1);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
    assert!(slots_drift(&pool, 10).await.unwrap().is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_says_whether_counted_gates_took_part_and_either_statement_claims_alike(
    pool: PgPool,
) {
    gated_groups(&pool, "open-host", None, 2, 5).await;
    gated_groups(&pool, "capped-host", None, 2, 5).await;
    let mut conn = pool.acquire().await.unwrap();
    // Only the uncapped gate has work that can run: no counted gate took part, whichever
    // statement starts.
    park_gate(&mut conn, "capped-host").await.unwrap();
    for full_first in [false, true] {
        let got = fetch_batch_from(&pool, "q", "n", 2, &limits(None), full_first)
            .await
            .unwrap();
        assert_eq!(got.jobs.len(), 2);
        assert!(got
            .jobs
            .iter()
            .all(|j| j.gate_key.as_deref() == Some("open-host")));
        assert!(!got.counted_gates, "full_first {full_first}");
    }
    // The capped gate (cap 1) released: its claim is counted, and then it is at its cap.
    set_gate_max_in_flight(&mut conn, "capped-host", Some(1))
        .await
        .unwrap();
    release_gate(&mut conn, "capped-host").await.unwrap();
    let got = fetch_batch_from(&pool, "q", "n", 100, &limits(None), false)
        .await
        .unwrap();
    assert_eq!(
        got.jobs.len(),
        6 + 1,
        "the open host's 6 left, one of the capped host's"
    );
    assert!(got.counted_gates);
    assert_eq!(got.capped_gates, vec!["capped-host".to_string()]);
    let again = fetch_batch_from(&pool, "q", "n", 100, &limits(None), true)
        .await
        .unwrap();
    assert!(again.jobs.is_empty());
    assert!(again.counted_gates, "still at its cap");
    assert_eq!(gate_in_flight(&pool, "capped-host").await, 1);
    assert_eq!(gate_in_flight(&pool, "open-host").await, 0);
}

// ---- A held row never stalls a fetch ----

/// A second pool on the test's database whose sessions end any statement after 2 s: a fetch
/// that waits for a lock fails with a clear error instead of hanging the test.
async fn bounded_pool(pool: &PgPool) -> PgPool {
    let opts = (*pool.connect_options())
        .clone()
        .options([("statement_timeout", "2000")]);
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(opts)
        .await
        .unwrap()
}

/// A transaction that holds what a result transaction of a job of group `group`, counted in
/// gate `gate`, holds after its job update: the group's row, then the gate's row (the
/// slot-release trigger's writes, lock order group then gate). Open until dropped or rolled back.
async fn result_in_progress(
    pool: &PgPool,
    group: Option<Uuid>,
    gate: Option<&str>,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = pool.begin().await.unwrap();
    if let Some(g) = group {
        sqlx::query("UPDATE job_groups SET in_flight = in_flight WHERE group_id = $1")
            .bind(g)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    if let Some(x) = gate {
        sqlx::query("UPDATE job_gates SET in_flight = in_flight WHERE gate_key = $1")
            .bind(x)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx
}

/// A fetch with the 2 s bound; panics with the error (a lock wait past it) and fails if it
/// took longer than 1 s.
async fn prompt_fetch(bounded: &PgPool, lim: &GroupLimits) -> breakwater_queue::Fetched {
    let started = std::time::Instant::now();
    let got = fetch_batch(bounded, "q", "n", 100, lim)
        .await
        .unwrap_or_else(|e| panic!("the fetch waited for the held row: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the fetch took {:?}",
        started.elapsed()
    );
    got
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_skips_a_capped_gate_a_result_holds_and_serves_every_other_group(pool: PgPool) {
    // Two groups in a capped gate (one of them the holder's), two groups outside it (another
    // share, and one in an uncapped gate).
    let gated = gated_groups(&pool, "host-a", None, 2, 3).await;
    let outside = gated_groups(&pool, "host-b", Some(Uuid::new_v4()), 1, 3).await;
    let mut conn = pool.acquire().await.unwrap();
    let plain = Uuid::new_v4();
    enqueue_many(&mut conn, &[job(0).group(plain), job(1).group(plain)])
        .await
        .unwrap();
    set_gate_max_in_flight(&mut conn, "host-a", Some(10))
        .await
        .unwrap();
    let bounded = bounded_pool(&pool).await;
    let lim = limits(None);

    let held = result_in_progress(&pool, Some(gated[0]), Some("host-a")).await;
    // Both statements: the lean one finds a counted gate with room and hands over to the full
    // one, which locks that gate's row.
    let got = prompt_fetch(&bounded, &lim).await;
    let served: HashSet<Option<Uuid>> = got.jobs.iter().map(|j| j.group_id).collect();
    assert_eq!(
        served,
        HashSet::from([Some(outside[0]), Some(plain)]),
        "every group outside the held gate is served, none inside it"
    );
    assert_eq!(got.jobs.len(), 5);
    assert!(got.waiting, "the held gate's groups are reported waiting");
    // The full statement first (a runner after a fetch that counted gates) skips it alike.
    let again = fetch_batch_from(&bounded, "q", "n", 100, &lim, true)
        .await
        .unwrap();
    assert!(again.jobs.is_empty() && again.waiting);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);

    // Once the result commits, the gate's groups are served and counted.
    held.rollback().await.unwrap();
    let got = prompt_fetch(&bounded, &lim).await;
    assert_eq!(got.jobs.len(), 6);
    assert!(got
        .jobs
        .iter()
        .all(|j| gated.contains(&j.group_id.unwrap())));
    assert_eq!(gate_in_flight(&pool, "host-a").await, 6);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_skips_a_group_row_a_result_holds_and_serves_the_others(pool: PgPool) {
    let gated = gated_groups(&pool, "host-a", None, 2, 3).await;
    let mut conn = pool.acquire().await.unwrap();
    set_gate_max_in_flight(&mut conn, "host-a", Some(10))
        .await
        .unwrap();
    let other = Uuid::new_v4();
    enqueue_many(&mut conn, &[job(0).group(other)])
        .await
        .unwrap();
    let bounded = bounded_pool(&pool).await;

    // Another group's row only (e.g. a result of a job not counted in a gate).
    let held = result_in_progress(&pool, Some(other), None).await;
    let got = prompt_fetch(&bounded, &limits(None)).await;
    assert_eq!(got.jobs.len(), 6, "both gated groups are served");
    assert!(got
        .jobs
        .iter()
        .all(|j| gated.contains(&j.group_id.unwrap())));
    assert!(got.waiting, "the held group is reported waiting");
    held.rollback().await.unwrap();
    let got = prompt_fetch(&bounded, &limits(None)).await;
    assert_eq!(
        got.jobs.iter().map(|j| j.group_id).collect::<Vec<_>>(),
        vec![Some(other)]
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_rescue_leaves_jobs_whose_gate_a_result_holds_and_takes_the_rest(pool: PgPool) {
    let gated = gated_groups(&pool, "host-a", None, 2, 1).await;
    let mut conn = pool.acquire().await.unwrap();
    set_gate_max_in_flight(&mut conn, "host-a", Some(10))
        .await
        .unwrap();
    let other = Uuid::new_v4();
    enqueue_many(&mut conn, &[job(0).group(other)])
        .await
        .unwrap();
    // A dead node (no heartbeat row) holds all three.
    let got = fetch(&pool, "q", "dead", 10, &limits(None)).await.unwrap();
    assert_eq!(got.len(), 3);
    // A live result holds the gate's row (and one gated group's).
    let held = result_in_progress(&pool, Some(gated[0]), Some("host-a")).await;
    let bounded = bounded_pool(&pool).await;
    let mut rescuer = bounded.acquire().await.unwrap();
    heartbeat(&mut *rescuer, "alive", BEAT_GAP).await.unwrap();
    beating_for_a_day(&pool, "alive").await;
    let policy = RescuePolicy {
        stale_after: Duration::from_secs(60),
        max_run: Duration::from_secs(3600),
        own_node: "alive".into(),
    };
    let started = std::time::Instant::now();
    let n = rescue(&mut rescuer, &policy)
        .await
        .unwrap_or_else(|e| panic!("the rescue waited for the held rows: {e}"));
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(n, 1, "only the job outside the held gate");
    assert_eq!(executing_in(&pool, &gated).await, 2);
    held.rollback().await.unwrap();
    assert_eq!(rescue(&mut rescuer, &policy).await.unwrap(), 2);
    assert_eq!(gate_in_flight(&pool, "host-a").await, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_job_at_the_largest_attempt_does_not_stop_its_queue(pool: PgPool) {
    // A bad job in a group, one without a group, and good jobs beside them.
    let g = Uuid::new_v4();
    let mut conn = pool.acquire().await.unwrap();
    let ids = enqueue_many(
        &mut conn,
        &[
            job(0).group(g),
            job(1),
            job(2).group(Uuid::new_v4()),
            job(3),
        ],
    )
    .await
    .unwrap();
    sqlx::query("UPDATE jobs SET attempt = 2147483647 WHERE id = ANY($1)")
        .bind(&ids[..2])
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        breakwater_queue::attempts_out_of_range(&pool, 10)
            .await
            .unwrap()
            .iter()
            .map(|a| (a.job_id, a.attempt))
            .collect::<Vec<_>>(),
        vec![(ids[0], i32::MAX), (ids[1], i32::MAX)],
        "the doctor's check finds them"
    );
    let got = fetch(&pool, "q", "n", 10, &limits(None)).await.unwrap();
    let mut fetched: Vec<(i64, i32)> = got.iter().map(|j| (j.id, j.attempt)).collect();
    fetched.sort();
    assert_eq!(
        fetched,
        vec![
            (ids[0], i32::MAX),
            (ids[1], i32::MAX),
            (ids[2], 1),
            (ids[3], 1)
        ],
        "every job is fetched; the bad ones keep the largest attempt (their last)"
    );
    // Handed back, a saturated counter goes down by one like any other.
    let claims: Vec<(i64, Uuid)> = got.iter().map(|j| (j.id, j.claim_token)).collect();
    breakwater_queue::hand_back(&mut conn, &claims)
        .await
        .unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn counters_at_the_largest_integer_do_not_stop_the_queue(pool: PgPool) {
    // A parked gate with a probe slot whose counter went wrong (a hand edit) at i32::MAX, and a
    // group whose counter did: neither may make the statement fail for the queue.
    let gated = gated_groups(&pool, "host-a", None, 1, 2).await;
    let broken = gated_groups(&pool, "host-b", None, 1, 2).await;
    let mut conn = pool.acquire().await.unwrap();
    let fine = Uuid::new_v4();
    enqueue_many(&mut conn, &[job(0).group(fine)])
        .await
        .unwrap();
    park_gate(&mut conn, "host-a").await.unwrap();
    wake_one_in_gate(&mut conn, "host-a", "test", PRIORITY_URGENT, &[], &[])
        .await
        .unwrap()
        .expect("a waiting job");
    sqlx::query("UPDATE job_gates SET in_flight = 2147483647 WHERE gate_key = 'host-a'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE job_groups SET in_flight = 2147483647 WHERE group_id = $1")
        .bind(broken[0])
        .execute(&pool)
        .await
        .unwrap();
    let got = fetch_batch(&pool, "q", "n", 10, &limits(None))
        .await
        .unwrap();
    let groups: HashSet<Option<Uuid>> = got.jobs.iter().map(|j| j.group_id).collect();
    assert_eq!(
        groups,
        HashSet::from([Some(fine), Some(gated[0])]),
        "the good group and the gate's probe are served; the broken group is at its cap"
    );
    assert_eq!(gate_in_flight(&pool, "host-a").await, i32::MAX, "saturated");
}

/// The gate row is skipped, not waited for, when a result holds it: a hot capped
/// gate — three nodes' fetches and every result of its jobs on one row — must still fill.
/// Measured here as the time to run 240 jobs of 20 ms through a cap of 4 (1.2 s if the gate
/// were always full) beside the same gate's results; the fetch's waiting groups are fetched
/// again after `runner::WAITING_RETRY`, and a finished job of the gate makes its node fetch.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_hot_capped_gate_still_fills_while_its_results_hold_its_row(pool: PgPool) {
    let groups = gated_groups(&pool, "host-a", None, 8, 30).await;
    let mut conn = pool.acquire().await.unwrap();
    set_gate_max_in_flight(&mut conn, "host-a", Some(4))
        .await
        .unwrap();
    let total = groups.len() * 30;
    let counters = Counters::default();
    let started = std::time::Instant::now();
    let nodes = spawn_nodes(&pool, 3, total, Duration::from_millis(20), &counters, |i| {
        pool_config(i, Duration::from_secs(600), limits(None))
    });
    for n in nodes {
        n.join().unwrap();
    }
    let took = started.elapsed();
    assert_eq!(counters.done(), total, "every job ran (no poll: 600 s)");
    assert!(counters.max() <= 4, "the cap held");
    let full = Duration::from_millis(20) * (total as u32) / 4;
    println!(
        "a hot capped gate: {total} jobs of 20 ms through a cap of 4 in {took:?} \
         (always full: {full:?}; {:.0} % of that)",
        100.0 * full.as_secs_f64() / took.as_secs_f64()
    );
    assert!(
        took < full * 4,
        "{took:?} for {full:?} of work at the cap: the gate starved"
    );
}
