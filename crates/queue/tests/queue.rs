//! The queue against a real Postgres (a fresh database per test).

use breakwater_queue::maintenance::{heartbeat, promote_due, rescue};
use breakwater_queue::runner::{run_pool, Handler, PoolConfig};
use breakwater_queue::{
    complete, enqueue, enqueue_many, fetch, park_group, release_group, retry, snooze, Backoff, Job,
    NewJob, RetryOutcome, Wakers, PRIORITY_PARKED,
};
use serde_json::json;
use sqlx::PgPool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

fn job(n: i64) -> NewJob {
    NewJob::new("q", "test", json!({ "n": n }))
}

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

    let first = fetch(&pool, "q", "n1", 1).await.unwrap();
    assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), vec![p1a]);
    let rest = fetch(&pool, "q", "n1", 10).await.unwrap();
    assert_eq!(
        rest.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![p1b, p2, p3]
    );
    assert!(rest.iter().all(|j| j.attempt == 1));
    assert!(fetch(&pool, "q", "n1", 10).await.unwrap().is_empty());
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
                let batch = fetch(&pool, "q", &format!("node{f}"), 7).await.unwrap();
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
        let j = fetch(&pool, "q", "n", 1).await.unwrap().pop().unwrap();
        assert_eq!(j.attempt, 1, "a snooze never uses an attempt");
        assert!(snooze(&mut conn, j.id, j.claim_token, Duration::ZERO, None)
            .await
            .unwrap());
    }
    let (state, attempt, _) = state_of(&pool, id).await;
    assert_eq!((state.as_str(), attempt), ("available", 0));

    // A snooze into the future leaves the job off the fetch path until it is due.
    let j = fetch(&pool, "q", "n", 1).await.unwrap().pop().unwrap();
    assert!(snooze(
        &mut conn,
        j.id,
        j.claim_token,
        Duration::from_secs(3600),
        Some(PRIORITY_PARKED)
    )
    .await
    .unwrap());
    assert!(fetch(&pool, "q", "n", 1).await.unwrap().is_empty());
    assert_eq!(
        state_of(&pool, id).await,
        ("scheduled".to_string(), 0, PRIORITY_PARKED)
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn retry_backs_off_then_discards_after_max_attempts(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let id = enqueue(&mut conn, &job(1).max_attempts(2))
        .await
        .unwrap()
        .unwrap();

    let j = fetch(&pool, "q", "n", 1).await.unwrap().pop().unwrap();
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
        fetch(&pool, "q", "n", 1).await.unwrap().is_empty(),
        "not fetchable while backing off"
    );

    // Make it due, promote, run the last attempt and fail it: discarded (dead letter).
    sqlx::query("UPDATE jobs SET scheduled_at = now() WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(promote_due(&mut conn, 100).await.unwrap(), 1);
    let j = fetch(&pool, "q", "n", 1).await.unwrap().pop().unwrap();
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
    let j = fetch(&pool, "q", "n", 1).await.unwrap().pop().unwrap();
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
async fn rescue_frees_jobs_of_silent_nodes_only_and_fences_late_results(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let a = enqueue(&mut conn, &job(1)).await.unwrap().unwrap();
    let b = enqueue(&mut conn, &job(2)).await.unwrap().unwrap();
    heartbeat(&pool, "dead-node").await.unwrap();
    heartbeat(&pool, "live-node").await.unwrap();
    let ja = fetch(&pool, "q", "dead-node", 1)
        .await
        .unwrap()
        .pop()
        .unwrap();
    let jb = fetch(&pool, "q", "live-node", 1)
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
    heartbeat(&pool, "live-node").await.unwrap();
    assert_eq!(rescue(&mut conn, Duration::from_secs(30)).await.unwrap(), 1);
    assert_eq!(state_of(&pool, a).await.0, "available");
    assert_eq!(
        state_of(&pool, b).await.0,
        "executing",
        "a job whose node heartbeats is never rescued"
    );

    // The rescued job runs again elsewhere; the dead node's late result changes nothing.
    let again = fetch(&pool, "q", "live-node", 1)
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
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn park_and_release_move_a_whole_group_in_one_update(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let g = Uuid::new_v4();
    let other = Uuid::new_v4();
    let jobs: Vec<NewJob> = (0..50).map(|n| job(n).group(g)).collect();
    enqueue_many(&mut conn, &jobs).await.unwrap();
    enqueue(&mut conn, &job(99).group(other)).await.unwrap();

    assert_eq!(
        park_group(
            &mut conn,
            g,
            Duration::from_secs(600),
            Duration::from_secs(60)
        )
        .await
        .unwrap(),
        50
    );
    let fetched = fetch(&pool, "q", "n", 100).await.unwrap();
    assert_eq!(fetched.len(), 1, "parked jobs are off the fetch path");
    assert_eq!(fetched[0].group_id, Some(other));
    let parked: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE group_id = $1 AND state = 'scheduled' AND priority = 3 AND scheduled_at >= now() + interval '600 s'")
        .bind(g)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(parked, 50);

    assert_eq!(release_group(&mut conn, g).await.unwrap(), 50);
    let released = fetch(&pool, "q", "n", 100).await.unwrap();
    assert_eq!(released.len(), 50);
    assert!(released.iter().all(|j| j.priority == 1 && j.attempt == 1));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn notify_wakes_a_listening_pool_before_the_poll(pool: PgPool) {
    let wakers = Wakers::default();
    let wake = wakers.get("q");
    let stop = CancellationToken::new();
    let listener = tokio::spawn(wakers.clone().listen(
        pool.clone(),
        Duration::from_millis(100),
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
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn runner_runs_everything_and_shutdown_hands_back_unfinished_jobs(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    heartbeat(&pool, "runner-node").await.unwrap();
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

#[sqlx::test(migrator = "MIGRATOR")]
async fn per_group_fetch_takes_at_most_n_of_one_group_and_never_twice(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let mut jobs: Vec<NewJob> = (0..30).map(|n| job(n).group(a)).collect();
    jobs.extend((30..40).map(|n| job(n).group(b)));
    jobs.push(job(99)); // no group: not limited
    enqueue_many(&mut conn, &jobs).await.unwrap();

    let got = breakwater_queue::fetch_per_group(&pool, "q", "n", 10, &[], 4)
        .await
        .unwrap();
    let of = |g: Uuid| got.iter().filter(|j| j.group_id == Some(g)).count();
    assert_eq!((of(a), of(b)), (4, 4), "at most 4 per group");
    assert_eq!(got.iter().filter(|j| j.group_id.is_none()).count(), 1);

    // Concurrent fetchers drain everything exactly once.
    let mut handles = Vec::new();
    for f in 0..4 {
        let pool = pool.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            loop {
                let batch =
                    breakwater_queue::fetch_per_group(&pool, "q", &format!("n{f}"), 5, &[], 2)
                        .await
                        .unwrap();
                if batch.is_empty() {
                    return ids;
                }
                ids.extend(batch.into_iter().map(|j| j.id));
            }
        }));
    }
    let mut all: Vec<i64> = got.iter().map(|j| j.id).collect();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), 41);
    assert_eq!(distinct.len(), 41);
}
