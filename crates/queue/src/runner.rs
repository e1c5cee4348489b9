//! Running a pool of handlers on one queue.

use crate::wake::sleep_or_cancel;
use crate::{
    fetch_batch_from, hand_back, hand_back_unknown, retry, Backoff, GroupLimits, Job, Wakers,
};
use futures::FutureExt;
use sqlx::PgPool;
use std::collections::{HashMap, HashSet};
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
    /// Cluster-wide concurrency bounds of each job group (see [`crate::fetch`]).
    pub limits: GroupLimits,
}

type InFlight = Arc<Mutex<HashMap<i64, Uuid>>>;

/// The limit a pool with `free` free slots asks a fetch for: the largest power of two ≤ `free`
/// (`free` ≥ 1).
fn ask_for(free: usize) -> usize {
    1 << (usize::BITS - 1 - free.max(1).leading_zeros())
}

/// How long a pool waits after `errors` failed fetches in a row: 200 ms doubling, capped at
/// 6.4 s.
fn fetch_backoff(errors: u32) -> Duration {
    Duration::from_millis(100 * 2u64.pow(errors.min(6)))
}

/// How soon a pool fetches again after a fetch that left a group waiting ([`Fetched::waiting`]:
/// its row, or its counted gate's row, held by another transaction — the fetch skips such rows
/// rather than wait). Each further retry in a row that claims nothing waits twice as
/// long, up to the poll interval, so a row held for long (a frozen node's transaction) costs a
/// handful of cheap fetches, and one held for a commit costs a few milliseconds.
///
/// [`Fetched::waiting`]: crate::Fetched::waiting
pub const WAITING_RETRY: Duration = Duration::from_millis(10);

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
    // Each task returns the finished job's group and gate.
    let mut tasks: JoinSet<Finished> = JoinSet::new();
    let mut db_errors = 0u32;
    // What the last fetch left waiting: when one of this node's jobs of a capped group (or of a
    // capped gate) finishes, a slot of that group (gate) is free and the next fetch may take the
    // next job waiting for it.
    let mut capped: HashSet<Uuid> = HashSet::new();
    let mut capped_gates: HashSet<String> = HashSet::new();
    let mut waiting = false;
    // When to fetch again because the last fetch left a group waiting (see WAITING_RETRY).
    let mut retry_in: Option<Duration> = None;
    // Whether the last fetch involved counted gates: start the next one with the full statement.
    let mut full_first = false;

    // Whether to fetch on this turn of the loop: at start, on a wake-up or poll, and when a
    // finished job may have made room for waiting work.
    let mut fetch_now = true;
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        // Reap finished tasks without waiting.
        while let Some(r) = tasks.try_join_next() {
            if frees_capped(log_join(r), &capped, &capped_gates) {
                fetch_now = true;
            }
        }
        // After a failed fetch: it may have claimed jobs whose answer never came (a lost
        // connection after its commit). Hand them back before fetching again.
        if db_errors > 0 {
            let known: Vec<i64> = in_flight.lock().unwrap().keys().copied().collect();
            let handed = async {
                let mut conn = pool.acquire().await?;
                hand_back_unknown(&mut conn, &cfg.queue, &cfg.node_id, &known).await
            }
            .await;
            match handed {
                Ok(n) => {
                    db_errors = 0;
                    if n > 0 {
                        tracing::info!(queue = %cfg.queue, jobs = n,
                            "handed back jobs a lost fetch had claimed");
                    }
                }
                Err(e) => {
                    db_errors += 1;
                    tracing::warn!(queue = %cfg.queue, error = %e,
                        "handing back a lost fetch's claims failed");
                    if sleep_or_cancel(fetch_backoff(db_errors), &shutdown).await {
                        break;
                    }
                    continue;
                }
            }
        }
        let free = slots.available_permits();
        let mut fetched_full = false;
        if free > 0 && fetch_now {
            // A power of two: each limit is a statement text of its own, which Postgres plans
            // once per connection (fetch/plan.rs), so a pool asks with a handful of them. A
            // fetch that fills its ask and leaves slots free fetches again at once (below).
            let ask = ask_for(free);
            let fetched = fetch_batch_from(
                &pool,
                &cfg.queue,
                &cfg.node_id,
                ask as i64,
                &cfg.limits,
                full_first,
            )
            .await;
            match fetched {
                Ok(fetched) => {
                    db_errors = 0;
                    full_first = fetched.counted_gates;
                    fetched_full = fetched.jobs.len() == ask;
                    capped = fetched.capped.into_iter().collect();
                    capped_gates = fetched.capped_gates.into_iter().collect();
                    waiting = fetched.waiting;
                    retry_in = match (waiting, retry_in) {
                        (false, _) => None,
                        (true, Some(d)) if fetched.jobs.is_empty() => {
                            Some((d * 2).min(cfg.poll_interval))
                        }
                        (true, _) => Some(WAITING_RETRY.min(cfg.poll_interval)),
                    };
                    for job in fetched.jobs {
                        let permit = slots.clone().try_acquire_owned().expect("slot counted");
                        in_flight.lock().unwrap().insert(job.id, job.claim_token);
                        let (h, p, c, f) = (
                            handler.clone(),
                            pool.clone(),
                            cfg.clone(),
                            in_flight.clone(),
                        );
                        tasks.spawn(async move {
                            let finished = (job.group_id, job.gate_key.clone());
                            run_one(h, &p, &c, job, &f).await;
                            drop(permit);
                            finished
                        });
                    }
                }
                Err(e) => {
                    db_errors += 1;
                    tracing::warn!(queue = %cfg.queue, error = %e, "fetch failed");
                    if sleep_or_cancel(fetch_backoff(db_errors), &shutdown).await {
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
            _ = wake.notified() => fetch_now = true,
            // A finished job frees a slot here, a slot of its group and one of its gate. Fetch
            // again when work is known to be waiting for it: the pool was full, some group was
            // left waiting, or the job's group or gate was at its cap. Otherwise idle slots wait
            // for a wake-up, so a lightly loaded pool does not fetch after every job.
            Some(r) = tasks.join_next(), if !tasks.is_empty() => {
                fetch_now = free == 0
                    || fetched_full
                    || waiting
                    || frees_capped(log_join(r), &capped, &capped_gates);
            }
            // A group was left waiting for a row another transaction held: try again soon.
            _ = tokio::time::sleep(retry_in.unwrap_or_default()),
                if retry_in.is_some() && slots.available_permits() > 0 => fetch_now = true,
            _ = tokio::time::sleep(cfg.poll_interval) => fetch_now = true,
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
        // Record the failure, retrying with backoff while the database is unreachable: the job
        // must not stay `executing` (its own node never rescues it). The claim token fences
        // this if the job was rescued or handed back meanwhile.
        let mut tries = 0;
        loop {
            match retry(pool, id, token, cfg.backoff.delay(attempt), &error).await {
                Ok(_) => break,
                Err(e) => {
                    tries += 1;
                    let wait = crate::outage_delay(tries);
                    tracing::warn!(job_id = id, error = %e, retry_in_ms = wait.as_millis() as u64,
                        "could not record the handler failure; trying again");
                    tokio::time::sleep(wait).await;
                }
            }
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

/// A finished job's group and gate.
type Finished = (Option<Uuid>, Option<String>);

/// Whether a finished job freed a slot of a group or gate the last fetch found at its cap.
fn frees_capped(
    finished: Finished,
    capped: &HashSet<Uuid>,
    capped_gates: &HashSet<String>,
) -> bool {
    finished.0.is_some_and(|g| capped.contains(&g))
        || finished.1.is_some_and(|g| capped_gates.contains(&g))
}

/// The finished task's job group and gate, logging a task that failed.
fn log_join(r: Result<Finished, tokio::task::JoinError>) -> Finished {
    match r {
        Ok(finished) => finished,
        Err(e) => {
            if !e.is_cancelled() {
                tracing::error!(error = %e, "job task failed");
            }
            (None, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ask_for;

    #[test]
    fn a_pool_asks_for_the_largest_power_of_two_it_has_room_for() {
        let asks: Vec<usize> = [1, 2, 3, 4, 7, 8, 63, 64, 100].map(ask_for).to_vec();
        assert_eq!(asks, vec![1, 2, 2, 4, 4, 8, 32, 64, 64]);
    }
}
