//! Batched results: a node records its plain successes many at a time.
//!
//! A success that moves no circuit ([`AttemptResult::moves_nothing`]: no probe, no failures
//! before it, no rejection streak) changes only its own delivery, attempt log and job, and the
//! slot and adaptive limit of its channel's job group. Recording each in its own transaction
//! costs a commit per delivery, and every completion of one channel queued on that channel's
//! group row for the previous one's commit. So the delivery handler hands such a result to this
//! node's [`Recorder`] and waits for it; the recorder writes many in one transaction of two
//! statements (and its BEGIN and COMMIT), whatever their number:
//! 1. [`deliveries::record_successes`]: the attempt rows and the deliveries `delivered` (one
//!    statement, each row fenced by its job's claim token);
//! 2. [`breakwater_queue::finish_batch`]: the jobs completed (or cancelled, for a delivery
//!    cancelled while in flight), fenced again, their slots released and each group's
//!    adaptive limit moved once by all its successes in the batch (their mean latency, counted
//!    as that many runs): one update per group (slots and limit together) and one per gate, in
//!    key order.
//!
//! **When a batch is written.** The recorder writes at most [`BatchConfig::flushers`] (`worker.record_batch_writers`) batches at
//! once. When a writer is free, the next batch takes every result waiting (up to
//! [`BatchConfig::max`]), after waiting [`BatchConfig::window`] for more if that is not zero.
//! So a lone result at low load is written at once (window 0, the default: no added latency),
//! and under load the results that arrive while the writers are busy go together: batches grow
//! with the load, as a database's group commit does.
//!
//! **What a node's death costs.** The handler returns only after its batch committed, so its
//! job stays `executing` until then: a node that dies with results not yet written leaves those
//! jobs to the rescue, and their deliveries are sent again (at least once, as any result not
//! recorded). The results waiting or being written at a node's death are at most
//! `(flushers + 1) × max` (the queue holds at most `max`), fewer than its pools' concurrency at
//! the defaults: that is the bound on the duplicates batching can add.
//!
//! **A batch the database cannot take now** (unreachable, failing over, a deadlock:
//! [`breakwater_core::Error::is_transient`]) is rolled back whole and kept
//! ([`crate::keep::until_recorded`]): written again after [`breakwater_queue::outage_delay`]
//! (doubling, capped at [`breakwater_queue::OUTAGE_RETRY_CAP`], jittered), however long the
//! outage, each row still
//! fenced by its claim token (a claim rescued meanwhile is refused and its result dropped, as
//! always). Its endpoints have answered, so giving the result up would send the deliveries
//! again. What this keeps in memory is bounded by the pools' concurrency: each kept
//! result holds its handler, and so its pool slot, until written, so a node holds at most as
//! many as it runs handlers (and it fetches nothing new while the database is away anyway).
//! A batch that fails otherwise is tried again up to [`WRITE_TRIES`] times; then each of its
//! handlers gets the error, and the runner retries their jobs as for any handler error.

use breakwater_core::circuit::AttemptResult;
use breakwater_core::deliveries::{self, Dispatch, Status, Success, SuccessRecorded};
use breakwater_core::{Error, Result};
use breakwater_queue::{Finish, GroupLimits, GroupSuccesses};
use sqlx::PgPool;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Semaphore};
use uuid::Uuid;

/// How many times a failed batch is written again before its handlers get the error.
const WRITE_TRIES: u32 = 3;

/// The reason a job ends with when its delivery was cancelled while the request was in flight.
pub(crate) const CANCELLED_IN_FLIGHT: &str = "cancelled while in flight";

/// How results are batched (`worker.record_batch_max`, `record_batch_window_ms`,
/// `record_batch_writers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    /// Most results in one batch (≥ 1; 1 writes each alone).
    pub max: usize,
    /// How long a batch waits for more results once it has one and a writer is free (zero: not
    /// at all, it takes what is waiting).
    pub window: Duration,
    /// Batches written at once (≥ 1).
    pub flushers: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            max: 128,
            window: Duration::ZERO,
            flushers: 1,
        }
    }
}

/// One plain success waiting to be written.
struct Pending {
    dispatch: Dispatch,
    job_id: i64,
    claim_token: Uuid,
    duration: Duration,
    status_code: i32,
    response_excerpt: Option<String>,
    reply: oneshot::Sender<Result<Option<SuccessRecorded>>>,
}

/// This node's batch recorder: a handle to its task. Cloning shares the task.
#[derive(Clone)]
pub(crate) struct Recorder {
    queue: mpsc::Sender<Pending>,
}

impl Recorder {
    /// Starts the recorder's task on `pool`, for results made by node `node_id`, whose groups'
    /// limits move within `limits`. The task ends when every handle is dropped and the results
    /// sent before have been written.
    pub(crate) fn start(
        pool: PgPool,
        node_id: String,
        limits: GroupLimits,
        cfg: BatchConfig,
    ) -> Self {
        let cfg = BatchConfig {
            max: cfg.max.max(1),
            flushers: cfg.flushers.max(1),
            ..cfg
        };
        let (queue, rx) = mpsc::channel(cfg.max);
        let writer = Arc::new(Writer {
            pool,
            node_id,
            limits,
        });
        tokio::spawn(collect(rx, writer, cfg));
        Self { queue }
    }

    /// Records the plain success `a` (of job `job_id` under claim `claim_token`; the caller
    /// checked [`AttemptResult::moves_nothing`]) in the next batch, and waits until that batch
    /// committed. `Ok(None)`: the job's claim no longer held (it was rescued or handed back),
    /// and nothing was recorded.
    pub(crate) async fn record(
        &self,
        a: &AttemptResult<'_>,
        job_id: i64,
        claim_token: Uuid,
    ) -> Result<Option<SuccessRecorded>> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            dispatch: a.dispatch.clone(),
            job_id,
            claim_token,
            duration: a.duration,
            status_code: a.observed.status_code().map_or(0, i32::from),
            response_excerpt: a.response_excerpt.map(str::to_owned),
            reply,
        };
        let stopped = || Error::Unrecorded("this node's batch recorder has stopped".into());
        self.queue.send(pending).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// What writes one batch of `T` and answers each of its callers: [`collect`] hands it batches.
pub(crate) trait Flush<T>: Send + Sync + 'static {
    /// Writes `batch` and answers each of its items' callers (on failure too).
    fn flush(&self, batch: Vec<T>) -> impl std::future::Future<Output = ()> + Send;
}

/// Gathers waiting items into batches and hands each to a free writer: at most
/// `cfg.flushers` batches at once, each taking every item waiting when a writer is free (up to
/// `cfg.max`), after waiting `cfg.window` for more if that is not zero. Ends when `rx` closes.
/// Used by the result [`Recorder`] and by the begin batcher ([`crate::begin`]).
pub(crate) async fn collect<T: Send + 'static, W: Flush<T>>(
    mut rx: mpsc::Receiver<T>,
    writer: Arc<W>,
    cfg: BatchConfig,
) {
    let writers = Arc::new(Semaphore::new(cfg.flushers));
    while let Some(first) = rx.recv().await {
        // Wait for a free writer first: what arrives meanwhile joins this batch.
        let Ok(permit) = writers.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        if !cfg.window.is_zero() {
            let deadline = tokio::time::Instant::now() + cfg.window;
            while batch.len() < cfg.max {
                tokio::select! {
                    next = rx.recv() => match next {
                        Some(p) => batch.push(p),
                        None => break,
                    },
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        while batch.len() < cfg.max {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let writer = writer.clone();
        tokio::spawn(async move {
            writer.flush(batch).await;
            drop(permit);
        });
    }
}

/// What a batch is written with.
struct Writer {
    pool: PgPool,
    node_id: String,
    limits: GroupLimits,
}

impl Flush<Pending> for Writer {
    async fn flush(&self, batch: Vec<Pending>) {
        self.write_and_reply(batch).await
    }
}

impl Writer {
    /// Writes `batch` and answers each of its handlers: kept and tried again until written
    /// while the database cannot take it ([`crate::keep::until_recorded`], module doc), else
    /// tried [`WRITE_TRIES`] times ([`Writer::write_tried`]).
    async fn write_and_reply(&self, batch: Vec<Pending>) {
        let written =
            crate::keep::until_recorded("a batch of results", || self.write_tried(&batch)).await;
        match written {
            Ok(mut written) => {
                for p in batch {
                    let _ = p.reply.send(Ok(written.remove(&p.dispatch.id)));
                }
            }
            Err(e) => {
                tracing::warn!(results = batch.len(), error = %e, "writing a batch of results failed");
                let text = e.to_string();
                for p in batch {
                    let _ = p.reply.send(Err(Error::Unrecorded(text.clone())));
                }
            }
        }
    }

    /// [`Writer::write`], tried again up to [`WRITE_TRIES`] times in all when it fails for
    /// another reason than the database being unreachable (which is returned at once, for the
    /// caller to keep the batch).
    async fn write_tried(&self, batch: &[Pending]) -> Result<HashMap<Uuid, SuccessRecorded>> {
        let mut tries = 1;
        loop {
            match self.write(batch).await {
                Err(e) if !e.is_transient() && tries < WRITE_TRIES => {
                    tracing::warn!(results = batch.len(), error = %e, "writing a batch of results failed; trying again");
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(tries))).await;
                    tries += 1;
                }
                done => return done,
            }
        }
    }

    /// One transaction: the attempts and deliveries, then the jobs, their slots and the
    /// adaptive limits (module doc). Returns what was recorded, by delivery id.
    async fn write(&self, batch: &[Pending]) -> Result<HashMap<Uuid, SuccessRecorded>> {
        let successes: Vec<Success<'_>> = batch
            .iter()
            .map(|p| Success {
                dispatch: &p.dispatch,
                job_id: p.job_id,
                claim_token: p.claim_token,
                duration_ms: i32::try_from(p.duration.as_millis()).unwrap_or(i32::MAX),
                status_code: p.status_code,
                response_excerpt: p.response_excerpt.as_deref(),
            })
            .collect();
        let mut tx = self.pool.begin().await?;
        let recorded = deliveries::record_successes(&mut tx, &self.node_id, &successes).await?;
        let by_delivery: HashMap<Uuid, &Pending> =
            batch.iter().map(|p| (p.dispatch.id, p)).collect();
        let finishes: Vec<Finish<'_>> = recorded
            .iter()
            .map(|r| {
                let p = by_delivery[&r.delivery_id];
                Finish {
                    id: p.job_id,
                    claim_token: p.claim_token,
                    cancel_reason: (r.status == Status::Cancelled).then_some(CANCELLED_IN_FLIGHT),
                }
            })
            .collect();
        // The adaptive limits learn from the channel's own endpoint only, once per group with
        // all its successes of the batch (their mean duration).
        let mut per_group: BTreeMap<Uuid, (Duration, u32)> = BTreeMap::new();
        for r in recorded
            .iter()
            .filter(|r| r.status == Status::Delivered && !r.url_changed)
        {
            let p = by_delivery[&r.delivery_id];
            let e = per_group.entry(p.dispatch.channel_id).or_default();
            e.0 += p.duration;
            e.1 += 1;
        }
        let successes: Vec<GroupSuccesses> = per_group
            .into_iter()
            .map(|(group_id, (total, runs))| GroupSuccesses {
                group_id,
                mean_latency: total / runs,
                runs,
            })
            .collect();
        let finished =
            breakwater_queue::finish_batch(&mut *tx, &finishes, &successes, &self.limits).await?;
        if finished.len() != finishes.len() {
            // A claim lost between the two statements (a rescue committed in between): roll
            // back; the next try records nothing of that job (its fence fails in the first).
            tx.rollback().await?;
            return Err(Error::Unrecorded(
                "a claim was lost while the batch was written".into(),
            ));
        }
        tx.commit().await?;
        Ok(recorded.into_iter().map(|r| (r.delivery_id, r)).collect())
    }
}
