//! The queue against a real Postgres (a fresh database per test).

use breakwater_queue::maintenance::{heartbeat, promote_due, rescue, RescuePolicy};
use breakwater_queue::runner::{run_pool, Handler, PoolConfig};
use breakwater_queue::{
    complete, define_group, enqueue, enqueue_many, explain_fetch, fetch, group_state,
    hand_back_unknown, index_rows, park_group, release_group, reschedule_unique, retry,
    set_max_in_flight, snooze, wake_one, Backoff, GroupLimits, Job, NewJob, RetryOutcome, Wakers,
    PRIORITY_NORMAL, PRIORITY_URGENT,
};
use serde_json::json;
use sqlx::PgPool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
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

async fn state_of(pool: &PgPool, id: i64) -> (String, i32, i16) {
    sqlx::query_as("SELECT state, attempt, priority FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn fetch_is_priority_first_then_oldest(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let p3 = enqueue(&mut conn, &job(1).priority(3))
        .await
        .unwrap()
        .unwrap();
    let p1a = enqueue(&mut conn, &job(2).priority(1))
        .await
        .unwrap()
        .unwrap();
    let p2 = enqueue(&mut conn, &job(3).priority(2))
        .await
        .unwrap()
        .unwrap();
    let p1b = enqueue(&mut conn, &job(4).priority(1))
        .await
        .unwrap()
        .unwrap();
    // Another queue's job is never returned.
    enqueue(&mut conn, &NewJob::new("other", "test", json!({})))
        .await
        .unwrap();

    let first = fetch(&pool, "q", "n1", 1, &uncapped()).await.unwrap();
    assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), vec![p1a]);
    let rest = fetch(&pool, "q", "n1", 10, &uncapped()).await.unwrap();
    assert_eq!(
        rest.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![p1b, p2, p3]
    );
    assert!(rest.iter().all(|j| j.attempt == 1));
    assert!(fetch(&pool, "q", "n1", 10, &uncapped())
        .await
        .unwrap()
        .is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn concurrent_fetchers_never_get_the_same_job(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = (0..400).map(job).collect();
    assert_eq!(enqueue_many(&mut conn, &jobs).await.unwrap().len(), 400);
    drop(conn);

    let mut handles = Vec::new();
    for f in 0..6 {
        let pool = pool.clone();
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = fetch(&pool, "q", &format!("node{f}"), 7, &uncapped())
                    .await
                    .unwrap();
                if batch.is_empty() {
                    return got;
                }
                got.extend(batch.into_iter().map(|j| j.id));
            }
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), 400, "every job fetched exactly once");
    assert_eq!(distinct.len(), 400);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn snooze_keeps_the_attempt_count(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let id = enqueue(&mut conn, &job(1)).await.unwrap().unwrap();
    for _ in 0..3 {
        let j = fetch(&pool, "q", "n", 1, &uncapped())
            .await
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(j.attempt, 1, "a snooze never uses an attempt");
        assert!(snooze(&mut conn, j.id, j.claim_token, Duration::ZERO, None)
            .await
            .unwrap());
    }
    let (state, attempt, _) = state_of(&pool, id).await;
    assert_eq!((state.as_str(), attempt), ("available", 0));

    // A snooze into the future leaves the job off the fetch path until it is due.
    let j = fetch(&pool, "q", "n", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert!(snooze(
        &mut conn,
        j.id,
        j.claim_token,
        Duration::from_secs(3600),
        Some(5)
    )
    .await
    .unwrap());
    assert!(fetch(&pool, "q", "n", 1, &uncapped())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(state_of(&pool, id).await, ("scheduled".to_string(), 0, 5));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn retry_backs_off_then_discards_after_max_attempts(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let id = enqueue(&mut conn, &job(1).max_attempts(2))
        .await
        .unwrap()
        .unwrap();

    let j = fetch(&pool, "q", "n", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    let before: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let out = retry(&pool, j.id, j.claim_token, Duration::from_secs(60), "boom")
        .await
        .unwrap();
    let Some(RetryOutcome::Retried(at)) = out else {
        panic!("expected a retry, got {out:?}")
    };
    let wait = (at - before).num_milliseconds();
    assert!(
        (59_000..=61_000).contains(&wait),
        "scheduled {wait} ms ahead"
    );
    assert!(
        fetch(&pool, "q", "n", 1, &uncapped())
            .await
            .unwrap()
            .is_empty(),
        "not fetchable while backing off"
    );

    // Make it due, promote, run the last attempt and fail it: discarded (dead letter).
    sqlx::query("UPDATE jobs SET scheduled_at = now() WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(promote_due(&mut conn, 100).await.unwrap(), 1);
    let j = fetch(&pool, "q", "n", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(j.attempt, 2);
    assert!(j.is_last_attempt());
    let out = retry(
        &pool,
        j.id,
        j.claim_token,
        Duration::from_secs(60),
        "boom again",
    )
    .await
    .unwrap();
    assert_eq!(out, Some(RetryOutcome::Discarded));
    let (state, errors): (String, serde_json::Value) =
        sqlx::query_as("SELECT state, errors FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(state, "discarded");
    assert_eq!(errors.as_array().unwrap().len(), 2);
}

#[test]
fn backoff_grows_exponentially_with_bounded_jitter() {
    let b = Backoff {
        base: Duration::from_secs(1),
        factor: 2.0,
        cap: Duration::from_secs(10),
        jitter: 0.1,
    };
    assert_eq!(b.nominal(1), Duration::from_secs(1));
    assert_eq!(b.nominal(3), Duration::from_secs(4));
    assert_eq!(b.nominal(10), Duration::from_secs(10));
    let d = b.delay(3).as_secs_f64();
    assert!((3.6..=4.4).contains(&d));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn unique_key_allows_one_live_job(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let first = enqueue(&mut conn, &job(1).unique_key("k")).await.unwrap();
    assert!(first.is_some());
    assert_eq!(
        enqueue(&mut conn, &job(2).unique_key("k")).await.unwrap(),
        None
    );
    // Same key twice in one batch: one insert.
    assert_eq!(
        enqueue_many(&mut conn, &[job(3).unique_key("b"), job(4).unique_key("b")])
            .await
            .unwrap()
            .len(),
        1
    );

    // Once the job is final, the key is free again.
    let j = fetch(&pool, "q", "n", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(Some(j.id), first);
    assert!(complete(&pool, j.id, j.claim_token).await.unwrap());
    assert!(enqueue(&mut conn, &job(5).unique_key("k"))
        .await
        .unwrap()
        .is_some());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn unique_key_holds_under_concurrent_inserts(pool: PgPool) {
    let mut handles = Vec::new();
    for i in 0..20 {
        let pool = pool.clone();
        handles.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await.unwrap();
            enqueue(&mut conn, &job(i).unique_key("probe:1"))
                .await
                .unwrap()
        }));
    }
    let mut inserted = 0;
    for h in handles {
        inserted += h.await.unwrap().is_some() as usize;
    }
    assert_eq!(inserted, 1);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn reschedule_unique_moves_the_waiting_job_later_or_earlier_and_never_duplicates(
    pool: PgPool,
) {
    /// The database's now + `secs`.
    async fn at(pool: &PgPool, secs: i64) -> chrono::DateTime<chrono::Utc> {
        sqlx::query_scalar("SELECT now() + $1::float8 * interval '1 second'")
            .bind(secs as f64)
            .fetch_one(pool)
            .await
            .unwrap()
    }
    let mut conn = pool.acquire().await.unwrap();
    let timer = |when| {
        let mut j = job(0).unique_key("timer:1");
        j.scheduled_at = Some(when);
        j
    };
    assert!(reschedule_unique(&mut conn, &timer(at(&pool, 60).await))
        .await
        .unwrap());
    let later = at(&pool, 3_600).await;
    assert!(!reschedule_unique(&mut conn, &timer(later)).await.unwrap());
    let rows: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT state, scheduled_at FROM jobs WHERE unique_key = 'timer:1'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![("scheduled".to_string(), later)],
        "pushed back, one job"
    );
    assert!(!reschedule_unique(&mut conn, &timer(at(&pool, -1).await))
        .await
        .unwrap());
    let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE unique_key = 'timer:1'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "available", "due now: fetchable at once");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn rescue_frees_jobs_of_silent_nodes_only_and_fences_late_results(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let a = enqueue(&mut conn, &job(1)).await.unwrap().unwrap();
    let b = enqueue(&mut conn, &job(2)).await.unwrap().unwrap();
    heartbeat(&pool, "dead-node", BEAT_GAP).await.unwrap();
    heartbeat(&pool, "live-node", BEAT_GAP).await.unwrap();
    let ja = fetch(&pool, "q", "dead-node", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    let jb = fetch(&pool, "q", "live-node", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((ja.id, jb.id), (a, b));

    // dead-node stops heartbeating (its last beat is an hour old); live-node keeps beating.
    sqlx::query(
        "UPDATE queue_nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'dead-node'",
    )
    .execute(&pool)
    .await
    .unwrap();
    beating_for_a_day(&pool, "live-node").await;
    let policy = |own: &str| RescuePolicy {
        stale_after: Duration::from_secs(30),
        max_run: Duration::from_secs(3600),
        own_node: own.to_string(),
    };
    // The dead node itself, waking from a freeze, never rescues its own claims.
    assert_eq!(rescue(&mut conn, &policy("dead-node")).await.unwrap(), 0);
    assert_eq!(rescue(&mut conn, &policy("live-node")).await.unwrap(), 1);
    assert_eq!(state_of(&pool, a).await.0, "available");
    assert_eq!(
        state_of(&pool, b).await.0,
        "executing",
        "a job whose node heartbeats is never rescued"
    );

    // The rescued job runs again elsewhere; the dead node's late result changes nothing.
    let again = fetch(&pool, "q", "live-node", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(again.id, a);
    assert_eq!(again.attempt, 2);
    assert!(
        !complete(&pool, ja.id, ja.claim_token).await.unwrap(),
        "stale claim token is fenced"
    );
    assert_eq!(
        retry(&pool, ja.id, ja.claim_token, Duration::ZERO, "late")
            .await
            .unwrap(),
        None
    );
    assert_eq!(state_of(&pool, a).await.0, "executing");
    assert!(complete(&pool, again.id, again.claim_token).await.unwrap());
    assert_eq!(state_of(&pool, a).await.0, "completed");
    // A claim older than the longest a run may take is abandoned even though its node beats.
    let old_claim = enqueue(&mut conn, &job(3)).await.unwrap().unwrap();
    let stuck = fetch(&pool, "q", "live-node", 1, &uncapped())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(stuck.id, old_claim);
    sqlx::query("UPDATE jobs SET attempted_at = now() - interval '2 hours' WHERE id = $1")
        .bind(old_claim)
        .execute(&pool)
        .await
        .unwrap();
    heartbeat(&pool, "live-node", BEAT_GAP).await.unwrap();
    beating_for_a_day(&pool, "other-node").await;
    assert_eq!(rescue(&mut conn, &policy("other-node")).await.unwrap(), 1);
    assert_eq!(state_of(&pool, old_claim).await.0, "available");
    assert!(
        !complete(&pool, stuck.id, stuck.claim_token).await.unwrap(),
        "its late result is fenced"
    );
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(old_claim)
        .execute(&pool)
        .await
        .unwrap();
}

/// Moves the database's view of the past: every node's heartbeat and run of heartbeats `secs`
/// seconds earlier (as if that much time had gone by since).
async fn age_nodes(pool: &PgPool, secs: i32, only: Option<&str>) {
    sqlx::query(
        "UPDATE queue_nodes SET heartbeat_at = heartbeat_at - make_interval(secs => $1),
                beating_since = beating_since - make_interval(secs => $1)
         WHERE $2::text IS NULL OR id = $2",
    )
    .bind(f64::from(secs))
    .bind(only)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn after_an_outage_rescue_waits_until_its_own_heartbeat_ran_a_whole_horizon(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let id = enqueue(&mut conn, &job(1)).await.unwrap().unwrap();
    // Two nodes that have run for a day; "busy" holds the job.
    beating_for_a_day(&pool, "rescuer").await;
    beating_for_a_day(&pool, "busy").await;
    let claimed = fetch(&pool, "q", "busy", 1, &uncapped()).await.unwrap();
    assert_eq!(claimed[0].id, id);
    let policy = RescuePolicy {
        stale_after: Duration::from_secs(30),
        max_run: Duration::from_secs(3600),
        own_node: "rescuer".into(),
    };

    // A 45 s database outage: nobody could beat. The rescuer is back first and beats (its
    // 45 s gap breaks its run), then judges: "busy"'s heartbeat is 45 s old, but "busy" is
    // alive and its request went out; nothing may be taken from it.
    age_nodes(&pool, 45, None).await;
    heartbeat(&pool, "rescuer", BEAT_GAP).await.unwrap();
    assert_eq!(
        rescue(&mut conn, &policy).await.unwrap(),
        0,
        "rescued a live node's claim right after an outage"
    );
    assert_eq!(state_of(&pool, id).await.0, "executing");
    // Beats on time go on with the new run; a failed beat (max_gap zero) starts another.
    age_nodes(&pool, 5, Some("rescuer")).await;
    heartbeat(&pool, "rescuer", BEAT_GAP).await.unwrap();
    assert_eq!(rescue(&mut conn, &policy).await.unwrap(), 0);

    // "busy" really died: it never beats again. Once the rescuer's own run is a whole horizon
    // long (26 s more of beats on time), "busy" is judged dead and its job rescued, as before.
    age_nodes(&pool, 26, Some("rescuer")).await;
    heartbeat(&pool, "rescuer", Duration::ZERO).await.unwrap();
    assert_eq!(
        rescue(&mut conn, &policy).await.unwrap(),
        0,
        "a beat after a failed one starts a new run"
    );
    age_nodes(&pool, 31, Some("rescuer")).await;
    heartbeat(&pool, "rescuer", BEAT_GAP).await.unwrap();
    assert_eq!(
        rescue(&mut conn, &policy).await.unwrap(),
        0,
        "a gap of 31 s between beats breaks the run too"
    );
    for _ in 0..4 {
        age_nodes(&pool, 8, Some("rescuer")).await;
        heartbeat(&pool, "rescuer", BEAT_GAP).await.unwrap();
    }
    assert_eq!(rescue(&mut conn, &policy).await.unwrap(), 1);
    assert_eq!(state_of(&pool, id).await.0, "available");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_parked_group_is_never_fetched_until_released_except_its_one_probe(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let g = Uuid::new_v4();
    let other = Uuid::new_v4();
    let jobs: Vec<NewJob> = (0..50).map(|n| job(n).group(g)).collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    enqueue(&mut conn, &job(99).group(other)).await.unwrap();

    assert_eq!(park_group(&mut conn, g).await.unwrap(), 50);
    // Parking wrote the group's row, not its jobs: they wait as they were.
    let untouched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE group_id = $1 AND state = 'available' AND priority = 1",
    )
    .bind(g)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(untouched, 50);
    for _ in 0..3 {
        let fetched = fetch(&pool, "q", "n", 100, &uncapped()).await.unwrap();
        assert!(
            fetched.iter().all(|j| j.group_id != Some(g)),
            "parked jobs are never fetched"
        );
        for j in fetched {
            complete(&pool, j.id, j.claim_token).await.unwrap();
        }
    }

    // A probe: exactly one job of the parked group, the one woken, and only once.
    let (probe, _) = wake_one(&mut conn, g, "test", PRIORITY_URGENT)
        .await
        .unwrap()
        .unwrap();
    let got = fetch(&pool, "q", "n", 100, &uncapped()).await.unwrap();
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![probe]);
    assert!(fetch(&pool, "q", "n", 100, &uncapped())
        .await
        .unwrap()
        .is_empty());
    // It fails and is retried: parking again demotes nothing it should not, and the group stays shut.
    retry(
        &pool,
        probe,
        got[0].claim_token,
        Duration::ZERO,
        "probe failed",
    )
    .await
    .unwrap();
    park_group(&mut conn, g).await.unwrap();
    promote_due(&mut conn, 100).await.unwrap();
    assert!(fetch(&pool, "q", "n", 100, &uncapped())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        state_of(&pool, probe).await.2,
        PRIORITY_NORMAL,
        "a re-park demotes the old probe"
    );

    assert_eq!(release_group(&mut conn, g).await.unwrap(), 50);
    let released = fetch(&pool, "q", "n", 100, &uncapped()).await.unwrap();
    assert_eq!(released.len(), 50);
    assert!(released.iter().all(|j| j.priority == 1));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn notify_wakes_a_listening_pool_before_the_poll(pool: PgPool) {
    let wakers = Wakers::default();
    let wake = wakers.get("q");
    let stop = CancellationToken::new();
    let listener = tokio::spawn(wakers.clone().listen(
        pool.clone(),
        breakwater_queue::ListenConfig {
            retry: Duration::from_millis(100),
            ping_interval: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(3),
        },
        stop.clone(),
    ));
    // The listener wakes every pool once when it (re)connects; consume that.
    tokio::time::timeout(Duration::from_secs(5), wake.notified())
        .await
        .expect("connect wake-up");

    let mut conn = pool.acquire().await.unwrap();
    enqueue(&mut conn, &job(1)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), wake.notified())
        .await
        .expect("NOTIFY wake-up");
    stop.cancel();
    listener.await.unwrap();
}

/// Counts runs; sleeps `delay` in each; completes.
struct Slow {
    pool: PgPool,
    runs: Arc<AtomicUsize>,
    delay: Duration,
}

impl Handler for Slow {
    async fn handle(&self, job: Job) -> Result<(), String> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        complete(&self.pool, job.id, job.claim_token)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

fn pool_config(grace: Duration) -> PoolConfig {
    PoolConfig {
        queue: "q".into(),
        node_id: "runner-node".into(),
        concurrency: 4,
        poll_interval: Duration::from_millis(50),
        shutdown_grace: grace,
        backoff: Backoff::default(),
        limits: uncapped(),
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_cap_holds_across_three_nodes(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let slow = Uuid::new_v4();
    let jobs: Vec<NewJob> = (0..60).map(|n| job(n).group(slow)).collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    // Three nodes: each its own thread, Tokio runtime and connection pool, 10 slots each.
    let counters = Counters::default();
    let nodes = spawn_nodes(&pool, 3, 60, Duration::from_millis(60), &counters, |i| {
        PoolConfig {
            node_id: format!("node-{i}"),
            concurrency: 10,
            limits: capped(3),
            ..pool_config(Duration::from_secs(1))
        }
    });
    for n in nodes {
        n.join().unwrap();
    }
    assert_eq!(counters.done(), 60);
    let most = counters.max();
    assert!(
        most <= 3,
        "{most} in flight at once: the cap is 3 cluster-wide"
    );
    assert!(
        most >= 2,
        "the three nodes did share the work ({most} at most)"
    );
    assert_eq!(
        group_state(&pool, slow).await.unwrap().unwrap().in_flight,
        0
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn runner_runs_everything_and_shutdown_hands_back_unfinished_jobs(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    heartbeat(&pool, "runner-node", BEAT_GAP).await.unwrap();
    enqueue_many(&mut conn, &(0..8).map(job).collect::<Vec<_>>())
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let h = Slow {
        pool: pool.clone(),
        runs: runs.clone(),
        delay: Duration::from_millis(10),
    };
    let task = tokio::spawn(run_pool(
        pool.clone(),
        pool_config(Duration::from_secs(5)),
        Arc::new(h),
        Wakers::default(),
        stop.clone(),
    ));
    let done = async {
        loop {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
                .fetch_one(&pool)
                .await
                .unwrap();
            if n == 8 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .expect("all 8 jobs complete");
    assert_eq!(runs.load(Ordering::SeqCst), 8);
    stop.cancel();
    task.await.unwrap();

    // Now jobs that outlive the grace period: they are handed back, attempt not used.
    enqueue_many(&mut conn, &(0..3).map(job).collect::<Vec<_>>())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let h = Slow {
        pool: pool.clone(),
        runs: runs.clone(),
        delay: Duration::from_secs(3600),
    };
    let task = tokio::spawn(run_pool(
        pool.clone(),
        pool_config(Duration::from_millis(200)),
        Arc::new(h),
        Wakers::default(),
        stop.clone(),
    ));
    let started = async {
        while runs.load(Ordering::SeqCst) < 11 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("3 jobs start");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("shutdown within grace + margin")
        .unwrap();
    let rows: Vec<(String, i32)> =
        sqlx::query_as("SELECT state, attempt FROM jobs WHERE state <> 'completed'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(rows, vec![("available".to_string(), 0); 3]);
}

fn capped(cap: u32) -> GroupLimits {
    GroupLimits {
        initial: cap,
        floor: 1,
        ceiling: cap,
        ..GroupLimits::default()
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_group_never_exceeds_its_cap_and_finished_jobs_free_their_slots(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let mut jobs: Vec<NewJob> = (0..30).map(|n| job(n).group(a)).collect();
    jobs.extend((30..40).map(|n| job(n).group(b)));
    jobs.push(job(99)); // no group: not limited
    enqueue_many(&mut conn, &jobs).await.unwrap();

    let got = fetch(&pool, "q", "n", 20, &capped(4)).await.unwrap();
    let of = |js: &[Job], g: Uuid| js.iter().filter(|j| j.group_id == Some(g)).count();
    assert_eq!((of(&got, a), of(&got, b)), (4, 4), "at most 4 per group");
    assert_eq!(got.iter().filter(|j| j.group_id.is_none()).count(), 1);
    assert!(
        fetch(&pool, "q", "n", 20, &capped(4))
            .await
            .unwrap()
            .is_empty(),
        "both groups are full"
    );
    assert_eq!(group_state(&pool, a).await.unwrap().unwrap().in_flight, 4);

    // Every way out of `executing` frees the slot: complete, retry, snooze, discard.
    let mine: Vec<&Job> = got.iter().filter(|j| j.group_id == Some(a)).collect();
    complete(&pool, mine[0].id, mine[0].claim_token)
        .await
        .unwrap();
    retry(
        &pool,
        mine[1].id,
        mine[1].claim_token,
        Duration::from_secs(60),
        "x",
    )
    .await
    .unwrap();
    snooze(
        &mut conn,
        mine[2].id,
        mine[2].claim_token,
        Duration::from_secs(60),
        None,
    )
    .await
    .unwrap();
    breakwater_queue::discard(&pool, mine[3].id, mine[3].claim_token, "x")
        .await
        .unwrap();
    assert_eq!(group_state(&pool, a).await.unwrap().unwrap().in_flight, 0);
    let again = fetch(&pool, "q", "n", 20, &capped(4)).await.unwrap();
    assert_eq!(of(&again, a), 4);

    // A group's own ceiling overrides the pool's.
    set_max_in_flight(&pool, b, Some(6)).await.unwrap();
    let more = fetch(&pool, "q", "n", 20, &capped(4)).await.unwrap();
    assert_eq!(
        of(&more, b),
        0,
        "b's adaptive limit is still 4 (its initial)"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn concurrent_fetchers_drain_every_job_once_within_the_caps(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let groups: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    enqueue_round_robin(&mut conn, &groups, 200).await;
    let fetched = drain_concurrently(&pool, 4, 5, &capped(2), |pool| async move {
        // The cap holds at every moment: no group has more than 2 executing.
        let worst: Option<i64> = sqlx::query_scalar(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM jobs WHERE state = 'executing' GROUP BY group_id) x",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(worst.unwrap_or(0) <= 2, "a group over its cap: {worst:?}");
    })
    .await;
    let all: Vec<i64> = fetched.iter().map(|j| j.id).collect();
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!((all.len(), distinct.len()), (200, 200));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fetch_reads_no_more_index_rows_beside_a_parked_or_capped_10000_job_group(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let healthy: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    enqueue_round_robin(&mut conn, &healthy, 30).await;
    let lim = capped(4);
    let rows = |plan: serde_json::Value| index_rows(&plan);
    let p0 = explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap();
    let baseline = rows(p0);
    assert!(baseline > 0);

    let big = |g: Uuid| -> Vec<NewJob> { (0..10_000).map(|n| job(n).group(g)).collect() };
    // 10 000 jobs of a parked group.
    let parked = Uuid::new_v4();
    enqueue_many(&mut conn, &big(parked)).await.unwrap();
    park_group(&mut conn, parked).await.unwrap();
    let p1 = explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap();
    let beside_parked = rows(p1);
    // 10 000 jobs of a group at its cap (2 executing, its ceiling 2).
    let full = Uuid::new_v4();
    enqueue_many(&mut conn, &big(full)).await.unwrap();
    set_max_in_flight(&pool, full, Some(2)).await.unwrap();
    let claimed = fetch(&pool, "q", "n", 100, &lim).await.unwrap();
    assert_eq!(
        claimed.iter().filter(|j| j.group_id == Some(full)).count(),
        2
    );
    for j in claimed.iter().filter(|j| j.group_id != Some(full)) {
        snooze(&mut conn, j.id, j.claim_token, Duration::ZERO, None)
            .await
            .unwrap();
    }
    let plan_both = explain_fetch(&mut conn, "q", "n", 4, &lim).await.unwrap();
    let beside_both = rows(plan_both);
    // Each extra group costs its one head entry, never its backlog.
    assert!(
        beside_parked <= baseline + 1 && beside_both <= baseline + 2,
        "index rows: {baseline} alone, {beside_parked} beside the parked group, {beside_both} beside both"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn fair_share_puts_a_quiet_share_ahead_of_a_burst(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let (tenant_a, tenant_b) = (Uuid::new_v4(), Uuid::new_v4());
    let a_groups: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    for g in &a_groups {
        define_group(&pool, *g, Some(tenant_a)).await.unwrap();
    }
    let b = Uuid::new_v4();
    define_group(&pool, b, Some(tenant_b)).await.unwrap();
    enqueue_round_robin(&mut conn, &a_groups, 1000).await;
    // A is already running some of its burst when B's single job arrives.
    let first = fetch(&pool, "q", "n", 10, &uncapped()).await.unwrap();
    assert_eq!(first.len(), 10);
    let b_job = enqueue(&mut conn, &job(5000).group(b))
        .await
        .unwrap()
        .unwrap();
    let next = fetch(&pool, "q", "n", 3, &uncapped()).await.unwrap();
    assert_eq!(next.len(), 3);
    assert!(
        next.iter().any(|j| j.id == b_job),
        "B is among the first fetched"
    );
    // Inside a share, a channel does not get everything: A's 10 went over its 5 channels.
    let per_group = |g: Uuid| first.iter().filter(|j| j.group_id == Some(g)).count();
    assert!(
        a_groups.iter().all(|g| per_group(*g) == 2),
        "A's turns are spread over its groups"
    );
    // And inside a group, oldest first.
    let g0: Vec<i64> = first
        .iter()
        .filter(|j| j.group_id == Some(a_groups[0]))
        .map(|j| j.id)
        .collect();
    let oldest: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM jobs WHERE group_id = $1 ORDER BY id LIMIT 2")
            .bind(a_groups[0])
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(g0, oldest);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_capped_groups_backlog_flows_on_finished_jobs_not_on_the_poll(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let g = Uuid::new_v4();
    let jobs: Vec<NewJob> = (0..30).map(|n| job(n).group(g)).collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    let cfg = PoolConfig {
        limits: capped(2),
        ..pool_config(Duration::from_secs(1))
    };
    assert_backlog_flows_on_finished_jobs(&pool, cfg, Duration::from_millis(60), "the cap").await;
}

/// An enqueue to a group never waits for another transaction that updated the group's row (a
/// claim or a result not yet committed, here an UPDATE held open): the group row already exists,
/// so the enqueue does not insert it again, and an insert's unique check would have waited for
/// that transaction. (Under a slow disk's commits, enqueues waited past the API's 250-ms
/// `lock_timeout` behind in-flight results: 503s for a healthy tenant.)
#[sqlx::test(migrator = "MIGRATOR")]
async fn an_enqueue_does_not_wait_for_an_open_update_of_its_group(pool: PgPool) {
    let group = Uuid::now_v7();
    let mut conn = pool.acquire().await.unwrap();
    enqueue(&mut conn, &job(1).group(group)).await.unwrap();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("UPDATE job_groups SET max_in_flight = max_in_flight WHERE group_id = $1")
        .bind(group)
        .execute(&mut *holder)
        .await
        .unwrap();
    sqlx::query("SET lock_timeout = '200ms'")
        .execute(&mut *conn)
        .await
        .unwrap();
    let id = enqueue(&mut conn, &job(2).group(group)).await;
    assert!(id.is_ok(), "the enqueue waited for the open update: {id:?}");
    holder.rollback().await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE group_id = $1")
        .bind(group)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 2);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_batch_of_results_ends_each_fenced_job_and_releases_each_group_and_gate_once(
    pool: PgPool,
) {
    use breakwater_queue::{
        finish_batch, gate_state, set_gate_max_in_flight, set_group_gate, Finish,
    };
    let mut conn = pool.acquire().await.unwrap();
    let (g1, g2) = (Uuid::new_v4(), Uuid::new_v4());
    define_group(&mut *conn, g1, None).await.unwrap();
    define_group(&mut *conn, g2, None).await.unwrap();
    // g1 is in a capped gate, so its jobs are counted in it too.
    set_group_gate(&mut conn, g1, Some("host")).await.unwrap();
    set_gate_max_in_flight(&mut conn, "host", Some(100))
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| job(i).group(if i < 3 { g1 } else { g2 }))
        .collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    let claimed = fetch(&pool, "q", "n1", 10, &uncapped()).await.unwrap();
    assert_eq!(claimed.len(), 5);
    let in_flight = |g| {
        let pool = pool.clone();
        async move { group_state(&pool, g).await.unwrap().unwrap().in_flight }
    };
    let gate = || {
        let pool = pool.clone();
        async move { gate_state(&pool, "host").await.unwrap().unwrap().in_flight }
    };
    assert_eq!(
        (in_flight(g1).await, in_flight(g2).await, gate().await),
        (3, 2, 3)
    );

    let of = |g: Uuid| claimed.iter().filter(move |j| j.group_id == Some(g));
    let (a, b, d) = {
        let mut it = of(g1);
        (it.next().unwrap(), it.next().unwrap(), it.next().unwrap())
    };
    let (c, e) = {
        let mut it = of(g2);
        (it.next().unwrap(), it.next().unwrap())
    };
    let batch = [
        Finish {
            id: a.id,
            claim_token: a.claim_token,
            cancel_reason: None,
        },
        Finish {
            id: b.id,
            claim_token: b.claim_token,
            cancel_reason: Some("called off"),
        },
        Finish {
            id: c.id,
            claim_token: c.claim_token,
            cancel_reason: None,
        },
        // A result whose claim no longer holds (rescued since): fenced, changes nothing.
        Finish {
            id: d.id,
            claim_token: Uuid::new_v4(),
            cancel_reason: None,
        },
    ];
    let limits = GroupLimits::default();
    let mut done = finish_batch(&pool, &batch, &[], &limits).await.unwrap();
    done.sort();
    let mut want = vec![a.id, b.id, c.id];
    want.sort();
    assert_eq!(done, want);
    assert_eq!(state_of(&pool, a.id).await.0, "completed");
    assert_eq!(state_of(&pool, b.id).await.0, "cancelled");
    assert_eq!(state_of(&pool, c.id).await.0, "completed");
    assert_eq!(state_of(&pool, d.id).await.0, "executing");
    assert_eq!(state_of(&pool, e.id).await.0, "executing");
    let reason: String = sqlx::query_scalar("SELECT errors->-1->>'error' FROM jobs WHERE id = $1")
        .bind(b.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(reason, "called off");
    // Each slot released exactly once: by the batch for a, b, c; none for the fenced d.
    assert_eq!(
        (in_flight(g1).await, in_flight(g2).await, gate().await),
        (1, 1, 1)
    );
    // A result recorded alone afterwards releases through the trigger as before (the batch's
    // setting ended with its transaction).
    assert!(complete(&pool, d.id, d.claim_token).await.unwrap());
    assert!(complete(&pool, e.id, e.claim_token).await.unwrap());
    assert_eq!(
        (in_flight(g1).await, in_flight(g2).await, gate().await),
        (0, 0, 0)
    );
    assert!(finish_batch(&pool, &[], &[], &limits)
        .await
        .unwrap()
        .is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_pool_hands_back_the_claims_of_a_fetch_whose_answer_it_lost(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    for n in 1..=4 {
        enqueue(&mut conn, &job(n)).await.unwrap().unwrap();
    }
    // One fetch answered (the pool runs its job), one whose answer was lost (its claims
    // committed, the pool never saw them), and another node's claim.
    let kept = fetch(&pool, "q", "node-a", 1, &uncapped()).await.unwrap();
    let lost = fetch(&pool, "q", "node-a", 2, &uncapped()).await.unwrap();
    let other = fetch(&pool, "q", "node-b", 1, &uncapped()).await.unwrap();
    assert_eq!((kept.len(), lost.len(), other.len()), (1, 2, 1));
    let known: Vec<i64> = kept.iter().map(|j| j.id).collect();
    assert_eq!(
        hand_back_unknown(&mut conn, "q", "node-a", &known)
            .await
            .unwrap(),
        2
    );
    for j in &lost {
        assert_eq!(
            state_of(&pool, j.id).await.0,
            "available",
            "a lost claim is back, no attempt used"
        );
        assert_eq!(state_of(&pool, j.id).await.1, 0);
    }
    assert_eq!(state_of(&pool, kept[0].id).await.0, "executing");
    assert_eq!(state_of(&pool, other[0].id).await.0, "executing");
    // Another queue's claims of the same node are its own pool's business.
    assert_eq!(
        hand_back_unknown(&mut conn, "other-queue", "node-a", &[])
            .await
            .unwrap(),
        0
    );
    assert_eq!(state_of(&pool, kept[0].id).await.0, "executing");
}
