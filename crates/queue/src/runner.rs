//! Running a pool of handlers on one queue.

use crate::wake::sleep_or_cancel;
use crate::{fetch_excluding, fetch_per_group, hand_back, retry, Backoff, Job, Wakers};
use futures::FutureExt;
use sqlx::PgPool;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Runs one claimed job. The handler records the job's result itself (with
/// [`crate::complete`], [`crate::retry`], [`crate::snooze`], [`crate::discard`]), usually in the
/// same transaction as its own writes. If it returns an error or panics, the runner retries the
/// job with the pool's backoff.
pub trait Handler: Send + Sync + 'static {
    /// Handles `job`. An `Err` is a failure of the handler itself (e.g. the database was
    /// unreachable), not a failure the handler already recorded.
    fn handle(&self, job: Job) -> impl Future<Output = Result<(), String>> + Send;

    /// Groups whose jobs this node should not fetch right now (e.g. groups at their per-node
    /// concurrency cap). Asked before every fetch; the default excludes none.
    fn excluded_groups(&self, _queue: &str) -> Vec<Uuid> {
        Vec::new()
    }

    /// The most jobs of one group to take in one fetch (`None`: no limit). A handler that caps
    /// a group's concurrency returns its cap, so a fetch does not claim jobs it must hand back.
    fn per_group_limit(&self, _queue: &str) -> Option<usize> {
        None
    }
}

/// One pool's settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The queue to fetch from.
    pub queue: String,
    /// This node's id (written to `jobs.attempted_by`; see rescue).
    pub node_id: String,
    /// Handlers running at once on this node.
    pub concurrency: usize,
    /// Fallback poll period when no wake-up arrives.
    pub poll_interval: Duration,
    /// On shutdown, how long in-flight jobs may run before they are handed back.
    pub shutdown_grace: Duration,
    /// Backoff used when a handler fails or panics.
    pub backoff: Backoff,
}

type InFlight = Arc<Mutex<HashMap<i64, Uuid>>>;

/// Fetches and runs jobs of `cfg.queue` until `shutdown` fires, at most `cfg.concurrency` at a
/// time. Wakes on `wakers` (LISTEN/NOTIFY), on a freed slot, or every `poll_interval`.
///
/// No transaction or pooled connection is held while a handler runs: the fetch is one short
/// statement, so the database pool's size does not cap concurrency.
///
/// On shutdown it stops fetching at once, waits up to `shutdown_grace` for in-flight handlers,
/// then aborts the rest and hands their jobs back (available, attempt not used).
pub async fn run_pool<H: Handler>(
    pool: PgPool,
    cfg: PoolConfig,
    handler: Arc<H>,
    wakers: Wakers,
    shutdown: CancellationToken,
) {
    let wake = wakers.get(&cfg.queue);
    let slots = Arc::new(Semaphore::new(cfg.concurrency));
    let in_flight: InFlight = Arc::default();
    let mut tasks = JoinSet::new();
    let mut db_errors = 0u32;

    loop {
        if shutdown.is_cancelled() {
            break;
        }
        // Reap finished tasks without waiting.
        while let Some(r) = tasks.try_join_next() {
            log_join(r);
        }
        let free = slots.available_permits();
        let mut fetched_full = false;
        let mut excluded_some = false;
        if free > 0 {
            let exclude = handler.excluded_groups(&cfg.queue);
            excluded_some = !exclude.is_empty();
            let per_group = handler.per_group_limit(&cfg.queue);
            let fetched = match per_group {
                Some(n) => {
                    fetch_per_group(
                        &pool,
                        &cfg.queue,
                        &cfg.node_id,
                        free as i64,
                        &exclude,
                        n as i64,
                    )
                    .await
                }
                None => {
                    fetch_excluding(&pool, &cfg.queue, &cfg.node_id, free as i64, &exclude).await
                }
            };
            match fetched {
                Ok(jobs) => {
                    db_errors = 0;
                    // "Full" also when some group reached the per-group limit: more of its jobs
                    // are likely waiting, so fetch again as soon as one finishes.
                    fetched_full =
                        jobs.len() == free || per_group.is_some_and(|n| group_hit_limit(&jobs, n));
                    for job in jobs {
                        let permit = slots.clone().try_acquire_owned().expect("slot counted");
                        in_flight.lock().unwrap().insert(job.id, job.claim_token);
                        let (h, p, c, f) = (
                            handler.clone(),
                            pool.clone(),
                            cfg.clone(),
                            in_flight.clone(),
                        );
                        tasks.spawn(async move {
                            run_one(h, &p, &c, job, &f).await;
                            drop(permit);
                        });
                    }
                }
                Err(e) => {
                    db_errors += 1;
                    tracing::warn!(queue = %cfg.queue, error = %e, "fetch failed");
                    let backoff = Duration::from_millis(100 * 2u64.pow(db_errors.min(6)));
                    if sleep_or_cancel(backoff, &shutdown).await {
                        break;
                    }
                    continue;
                }
            }
        }
        if fetched_full && slots.available_permits() > 0 {
            continue;
        }
        // Wait for: a wake-up, a finished job, the poll period, or shutdown.
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = wake.notified() => {}
            // A finished job frees a slot; fetch again at once if the pool was full, if more work
            // may be waiting, or if a group was excluded (its per-node cap may have lifted).
            // Otherwise idle slots wait for a wake-up, so a lightly loaded pool does not fetch
            // after every job.
            Some(r) = tasks.join_next(), if !tasks.is_empty() && (free == 0 || fetched_full || excluded_some) => log_join(r),
            _ = tokio::time::sleep(cfg.poll_interval) => {}
        }
    }

    // Graceful shutdown: no more fetches; give in-flight jobs the grace period.
    let drained = tokio::time::timeout(cfg.shutdown_grace, async {
        while let Some(r) = tasks.join_next().await {
            log_join(r);
        }
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        let claims: Vec<(i64, Uuid)> = in_flight.lock().unwrap().drain().collect();
        let handed = async {
            let mut conn = pool.acquire().await?;
            hand_back(&mut conn, &claims).await
        }
        .await;
        match handed {
            Ok(n) => tracing::info!(queue = %cfg.queue, jobs = n, "handed unfinished jobs back"),
            Err(e) => tracing::warn!(queue = %cfg.queue, error = %e,
                "could not hand jobs back; they will be rescued when this node's heartbeat goes stale"),
        }
    }
}

async fn run_one<H: Handler>(
    handler: Arc<H>,
    pool: &PgPool,
    cfg: &PoolConfig,
    job: Job,
    in_flight: &InFlight,
) {
    let (id, token, attempt) = (job.id, job.claim_token, job.attempt);
    let result = AssertUnwindSafe(handler.handle(job)).catch_unwind().await;
    let error = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(panic) => Some(format!("handler panicked: {}", panic_message(&panic))),
    };
    if let Some(error) = error {
        tracing::warn!(queue = %cfg.queue, job_id = id, %error, "job handler failed; retrying");
        if let Err(e) = retry(pool, id, token, cfg.backoff.delay(attempt), &error).await {
            tracing::warn!(job_id = id, error = %e, "could not record handler failure; rescue will retry it");
        }
    }
    in_flight.lock().unwrap().remove(&id);
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_string()
    }
}

/// Whether any group has at least `n` jobs in `jobs`.
fn group_hit_limit(jobs: &[Job], n: usize) -> bool {
    let mut counts: HashMap<Uuid, usize> = HashMap::new();
    jobs.iter().filter_map(|j| j.group_id).any(|g| {
        let c = counts.entry(g).or_default();
        *c += 1;
        *c >= n
    })
}

fn log_join(r: Result<(), tokio::task::JoinError>) {
    if let Err(e) = r {
        if !e.is_cancelled() {
            tracing::error!(error = %e, "job task failed");
        }
    }
}
