//! Fifo groups ([`set_group_fifo`]) against a real Postgres: one job at a time in id order, a
//! waiting head blocks the rest, and a blocked group costs the fetch its head only.

use breakwater_queue::maintenance::{heartbeat, promote_due, rescue, RescuePolicy};
use breakwater_queue::{
    complete, discard, enqueue_many, explain_fetch, fetch, fetch_batch, index_rows, park_group,
    release_group, retry, set_group_fifo, wake_one, Job, NewJob, PRIORITY_URGENT,
};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

mod support;
use support::{beating_for_a_day, enqueue_round_robin, job, uncapped, BEAT_GAP};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// `n` jobs of group `g` (args `{"n": 0..n}`), inserted in that order; their ids, ascending.
async fn fill(pool: &PgPool, g: Uuid, n: i64) -> Vec<i64> {
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = (0..n).map(|i| job(i).group(g)).collect();
    let mut ids = enqueue_many(&mut conn, &jobs).await.unwrap();
    ids.sort();
    ids
}

/// The ids of `g`'s jobs among `fetched`.
fn of(fetched: &[Job], g: Uuid) -> Vec<i64> {
    fetched
        .iter()
        .filter(|j| j.group_id == Some(g))
        .map(|j| j.id)
        .collect()
}

/// Makes every `scheduled` job due now and promotes it (a retry's backoff over).
async fn end_backoffs(pool: &PgPool) {
    sqlx::query("UPDATE jobs SET scheduled_at = now() WHERE state = 'scheduled'")
        .execute(pool)
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    promote_due(&mut conn, 1_000).await.unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fifo_group_runs_its_oldest_job_alone_and_a_retrying_head_blocks_the_rest(pool: PgPool) {
    let (g, plain) = (Uuid::new_v4(), Uuid::new_v4());
    let mut conn = pool.acquire().await.unwrap();
    assert!(set_group_fifo(&mut conn, g, true).await.unwrap());
    let ids = fill(&pool, g, 5).await;
    fill(&pool, plain, 5).await;

    // Only the head, however many are wanted; the plain group gives all it has.
    let first = fetch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert_eq!(of(&first, g), vec![ids[0]]);
    assert_eq!(of(&first, plain).len(), 5);
    for j in first.iter().filter(|j| j.group_id == Some(plain)) {
        complete(&pool, j.id, j.claim_token).await.unwrap();
    }
    // The head executes: nothing more of the group, and it is reported capped (its cap is 1),
    // not waiting (which would make runners fetch again at once).
    let during = fetch_batch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert!(during.jobs.is_empty(), "{:?}", during.jobs);
    assert_eq!(during.capped, vec![g]);
    assert!(!during.waiting);

    // The head fails and waits for its retry: it still blocks the jobs behind it.
    let head = &first.iter().find(|j| j.id == ids[0]).unwrap();
    retry(
        &pool,
        head.id,
        head.claim_token,
        Duration::from_secs(60),
        "500",
    )
    .await
    .unwrap();
    let blocked = fetch_batch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert!(blocked.jobs.is_empty(), "{:?}", blocked.jobs);
    assert!(blocked.capped.is_empty() && !blocked.waiting);

    // Its backoff over, the head goes again (second attempt), still alone.
    end_backoffs(&pool).await;
    let again = fetch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert_eq!(of(&again, g), vec![ids[0]]);
    assert_eq!(again[0].attempt, 2);
    complete(&pool, again[0].id, again[0].claim_token)
        .await
        .unwrap();

    // Delivered: the next one. A dead head releases the next too.
    let next = fetch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert_eq!(of(&next, g), vec![ids[1]]);
    discard(&pool, next[0].id, next[0].claim_token, "dead")
        .await
        .unwrap();
    let after_dead = fetch(&pool, "q", "n", 20, &uncapped()).await.unwrap();
    assert_eq!(of(&after_dead, g), vec![ids[2]]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_parked_fifo_group_probes_its_head_and_releases_in_order(pool: PgPool) {
    let g = Uuid::new_v4();
    let mut conn = pool.acquire().await.unwrap();
    set_group_fifo(&mut conn, g, true).await.unwrap();
    let ids = fill(&pool, g, 20).await;
    // The head is claimed, fails, and the group is parked (a circuit opened) with its head
    // waiting for a retry that comes sooner than the rest's position: a later job woken first
    // would break the order.
    let first = fetch(&pool, "q", "n", 5, &uncapped()).await.unwrap();
    assert_eq!(of(&first, g), vec![ids[0]]);
    retry(
        &pool,
        ids[0],
        first[0].claim_token,
        Duration::from_secs(60),
        "x",
    )
    .await
    .unwrap();
    park_group(&mut conn, g).await.unwrap();
    // The probe is the head, whatever its time or priority.
    let (probe, _) = wake_one(&mut conn, g, "test", PRIORITY_URGENT)
        .await
        .unwrap()
        .expect("a probe");
    assert_eq!(probe, ids[0]);
    let probed = fetch(&pool, "q", "n", 5, &uncapped()).await.unwrap();
    assert_eq!(of(&probed, g), vec![ids[0]]);
    complete(&pool, ids[0], probed[0].claim_token)
        .await
        .unwrap();
    // Released with one update: the backlog goes on in order, one at a time.
    release_group(&mut conn, g).await.unwrap();
    for want in &ids[1..] {
        let got = fetch(&pool, "q", "n", 5, &uncapped()).await.unwrap();
        assert_eq!(of(&got, g), vec![*want]);
        complete(&pool, got[0].id, got[0].claim_token)
            .await
            .unwrap();
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_reads_one_head_beside_a_blocked_10000_job_fifo_group(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let healthy: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    enqueue_round_robin(&mut conn, &healthy, 30).await;
    let lim = uncapped();
    let baseline = index_rows(&explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap());
    assert!(baseline > 0);

    // 10 000 jobs of a fifo group whose head waits for a retry.
    let blocked = Uuid::new_v4();
    set_group_fifo(&mut conn, blocked, true).await.unwrap();
    let ids = fill(&pool, blocked, 10_000).await;
    sqlx::query(
        "UPDATE jobs SET state = 'scheduled', scheduled_at = now() + interval '1 hour' WHERE id = $1",
    )
    .bind(ids[0])
    .execute(&pool)
    .await
    .unwrap();
    let beside = index_rows(&explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap());
    // Its head entry in the fetch index and its head in id order: never its backlog.
    assert!(
        beside <= baseline + 2,
        "index rows: {baseline} alone, {beside} beside the blocked fifo group"
    );
    // And it takes no turn from the others: a fetch of 30 gets all 30 of theirs.
    let got = fetch(&pool, "q", "n", 30, &lim).await.unwrap();
    assert_eq!(got.len(), 30);
    assert!(of(&got, blocked).is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn switching_a_group_back_from_fifo_runs_its_backlog_in_parallel(pool: PgPool) {
    let g = Uuid::new_v4();
    let mut conn = pool.acquire().await.unwrap();
    set_group_fifo(&mut conn, g, true).await.unwrap();
    fill(&pool, g, 10).await;
    assert_eq!(
        of(&fetch(&pool, "q", "n", 10, &uncapped()).await.unwrap(), g).len(),
        1
    );
    assert!(
        !set_group_fifo(&mut conn, g, true).await.unwrap(),
        "no change"
    );
    assert!(set_group_fifo(&mut conn, g, false).await.unwrap());
    assert_eq!(
        of(&fetch(&pool, "q", "n", 10, &uncapped()).await.unwrap(), g).len(),
        9
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_rescued_head_of_a_crashed_node_goes_again_before_the_rest(pool: PgPool) {
    let g = Uuid::new_v4();
    let mut conn = pool.acquire().await.unwrap();
    set_group_fifo(&mut conn, g, true).await.unwrap();
    let ids = fill(&pool, g, 3).await;
    heartbeat(&pool, "dead-node", BEAT_GAP).await.unwrap();
    heartbeat(&pool, "live-node", BEAT_GAP).await.unwrap();
    let claimed = fetch(&pool, "q", "dead-node", 5, &uncapped())
        .await
        .unwrap();
    assert_eq!(of(&claimed, g), vec![ids[0]]);
    // While the dead node holds the head, the live node gets nothing of the group.
    assert!(fetch(&pool, "q", "live-node", 5, &uncapped())
        .await
        .unwrap()
        .is_empty());
    sqlx::query(
        "UPDATE queue_nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'dead-node'",
    )
    .execute(&pool)
    .await
    .unwrap();
    // The rescuer has beaten without a break for longer than the rescue horizon.
    beating_for_a_day(&pool, "live-node").await;
    let policy = RescuePolicy {
        stale_after: Duration::from_secs(30),
        max_run: Duration::from_secs(3600),
        own_node: "live-node".to_string(),
    };
    assert_eq!(rescue(&mut conn, &policy).await.unwrap(), 1);
    let again = fetch(&pool, "q", "live-node", 5, &uncapped())
        .await
        .unwrap();
    assert_eq!(of(&again, g), vec![ids[0]], "the rescued head first, alone");
}
