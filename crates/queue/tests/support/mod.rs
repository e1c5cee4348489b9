//! What the queue's test binaries share: group bounds that never bind, the job state as a row
//! says it, a handler that measures concurrency, and pools running it (on this runtime, or on
//! several nodes, each its own thread, Tokio runtime and connection pool) on one database.

#![allow(dead_code)] // each test binary uses part of it

use breakwater_queue::runner::{run_pool, Handler, PoolConfig};
use breakwater_queue::{complete, enqueue_many, fetch, GroupLimits, Job, NewJob, Wakers};
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Group bounds for tests that are not about caps: high enough never to bind.
pub fn uncapped() -> GroupLimits {
    GroupLimits {
        initial: 1_000,
        floor: 1,
        ceiling: 1_000,
        ..GroupLimits::default()
    }
}

/// Job `n` of kind `test` on queue `q` (args `{"n": n}`).
pub fn job(n: i64) -> NewJob {
    NewJob::new("q", "test", json!({ "n": n }))
}

/// Enqueues jobs `0..n` ([`job`]), dealt round-robin over `groups` (job `i` to group
/// `groups[i % groups.len()]`).
pub async fn enqueue_round_robin(conn: &mut PgConnection, groups: &[Uuid], n: i64) {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| job(i).group(groups[i as usize % groups.len()]))
        .collect();
    enqueue_many(conn, &jobs).await.unwrap();
}

/// Jobs running now (across every node of a test), the most ever seen at once, and jobs done.
#[derive(Clone, Default)]
pub struct Counters {
    pub now: Arc<AtomicUsize>,
    pub max: Arc<AtomicUsize>,
    pub done: Arc<AtomicUsize>,
}

impl Counters {
    pub fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// Waits until `total` jobs are done or `timeout` passes; whether they were.
    pub async fn wait_done(&self, total: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.done() < total {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

/// Holds each job for `hold`, counting it in `counters`, then completes it.
pub struct Gauge {
    pub pool: PgPool,
    pub counters: Counters,
    pub hold: Duration,
}

impl Handler for Gauge {
    async fn handle(&self, job: Job) -> Result<(), String> {
        let c = &self.counters;
        let n = c.now.fetch_add(1, Ordering::SeqCst) + 1;
        c.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(self.hold).await;
        c.now.fetch_sub(1, Ordering::SeqCst);
        complete(&self.pool, job.id, job.claim_token)
            .await
            .map_err(|e| e.to_string())?;
        c.done.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Starts `nodes` nodes on `pool`'s database, each on its own thread with its own runtime and a
/// pool of 4 connections, running `run_pool` with `cfg(node)` and a [`Gauge`] holding each job
/// `hold`, until `counters` shows `total` jobs done (or 60 s pass). Join the handles.
pub fn spawn_nodes(
    pool: &PgPool,
    nodes: usize,
    total: usize,
    hold: Duration,
    counters: &Counters,
    cfg: impl Fn(usize) -> PoolConfig,
) -> Vec<std::thread::JoinHandle<()>> {
    let opts = (*pool.connect_options()).clone();
    (0..nodes)
        .map(|i| {
            let (opts, counters, cfg) = (opts.clone(), counters.clone(), cfg(i));
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let pool = sqlx::postgres::PgPoolOptions::new()
                        .max_connections(4)
                        .connect_with(opts)
                        .await
                        .unwrap();
                    run_gauge(&pool, cfg, hold, &counters, total, Duration::from_secs(60)).await;
                })
            })
        })
        .collect()
}

/// Runs `run_pool` with `cfg` and a [`Gauge`] holding each job `hold` (no wake-ups: only the
/// poll and finished jobs make it fetch) on this runtime, until `counters` shows `total` jobs
/// done or `timeout` passes; then stops it. Returns whether all `total` were done in time.
pub async fn run_gauge(
    pool: &PgPool,
    cfg: PoolConfig,
    hold: Duration,
    counters: &Counters,
    total: usize,
    timeout: Duration,
) -> bool {
    let handler = Arc::new(Gauge {
        pool: pool.clone(),
        counters: counters.clone(),
        hold,
    });
    let stop = CancellationToken::new();
    let runner = tokio::spawn(run_pool(
        pool.clone(),
        cfg,
        handler,
        Wakers::default(),
        stop.clone(),
    ));
    let done = counters.wait_done(total, timeout).await;
    stop.cancel();
    runner.await.unwrap();
    done
}

/// The check of a capped backlog's flow: with 30 jobs enqueued under a cap of 2 (`capped`, e.g.
/// "the group's cap"), runs `cfg` with 20 slots, a poll far longer than the test and no
/// wake-ups (nothing listens), each job held `hold`. Only finished jobs of the capped backlog
/// can make the runner fetch again, so all 30 must run within 20 s, never more than 2 at once.
pub async fn assert_backlog_flows_on_finished_jobs(
    pool: &PgPool,
    cfg: PoolConfig,
    hold: Duration,
    capped: &str,
) {
    let cfg = PoolConfig {
        concurrency: 20,
        poll_interval: Duration::from_secs(600),
        ..cfg
    };
    let counters = Counters::default();
    let flowed = run_gauge(pool, cfg, hold, &counters, 30, Duration::from_secs(20)).await;
    assert!(
        flowed,
        "only {} of 30 ran: the runner waited for its poll",
        counters.done()
    );
    assert!(counters.max() <= 2, "{capped} held");
}

/// Runs `fetchers` fetch-and-complete loops at once on queue `q` (node ids `n0`, `n1`, …), each
/// fetching up to `batch` jobs under `limits` and completing them, until no job is left
/// uncompleted. `check` runs after every fetch, before its jobs complete (when the caps are at
/// their fullest). Returns every job fetched, by all loops together.
pub async fn drain_concurrently<C, F>(
    pool: &PgPool,
    fetchers: usize,
    batch: i64,
    limits: &GroupLimits,
    check: C,
) -> Vec<Job>
where
    C: Fn(PgPool) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let mut handles = Vec::new();
    for f in 0..fetchers {
        let (pool, limits, check) = (pool.clone(), limits.clone(), check.clone());
        handles.push(tokio::spawn(async move {
            let mut fetched = Vec::new();
            loop {
                let jobs = fetch(&pool, "q", &format!("n{f}"), batch, &limits)
                    .await
                    .unwrap();
                check(pool.clone()).await;
                if jobs.is_empty() {
                    let left: i64 =
                        sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state <> 'completed'")
                            .fetch_one(&pool)
                            .await
                            .unwrap();
                    if left == 0 {
                        return fetched;
                    }
                    tokio::task::yield_now().await;
                    continue;
                }
                for j in &jobs {
                    complete(&pool, j.id, j.claim_token).await.unwrap();
                }
                fetched.extend(jobs);
            }
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

/// The `max_gap` of a beat on time in these tests ([`breakwater_queue::maintenance::heartbeat`]).
pub const BEAT_GAP: Duration = Duration::from_secs(10);

/// Makes `node` a node that has beaten without a break for a day (heartbeat now, its run of
/// heartbeats a day old): a rescuer that may judge others at once.
pub async fn beating_for_a_day(pool: &PgPool, node: &str) {
    sqlx::query(
        "INSERT INTO queue_nodes (id, beating_since) VALUES ($1, now() - interval '1 day')
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(),
             beating_since = now() - interval '1 day'",
    )
    .bind(node)
    .execute(pool)
    .await
    .expect("a long-beating node");
}
