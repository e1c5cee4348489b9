//! LISTEN/NOTIFY wake-ups.

use crate::{JobState, Result};
use sqlx::postgres::{PgListener, PgPool};
use sqlx::PgExecutor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The Postgres channel the queue notifies on; the payload is the queue name.
pub const NOTIFY_CHANNEL: &str = "queue_jobs";

/// Sends one `NOTIFY` per queue name. Inside a transaction the notifications go out at commit
/// (and Postgres folds identical ones), so a woken worker always finds the committed rows.
pub async fn notify_queues(exec: impl PgExecutor<'_>, queues: &[String]) -> Result<()> {
    if queues.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q",
        NOTIFY_CHANNEL,
        queues
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// One row of a statement that made jobs due: a queue and how many of its jobs (read with
/// `query_as!` from `SELECT queue AS "queue!", count(*) AS "n!" … GROUP BY queue`).
pub(crate) struct Moved {
    pub queue: String,
    pub n: i64,
}

/// Wakes the queues of rows a statement just made due and returns how many rows that was.
pub(crate) async fn notify_moved(exec: impl PgExecutor<'_>, moved: Vec<Moved>) -> Result<u64> {
    let n = moved.iter().map(|m| m.n as u64).sum();
    let names: Vec<String> = moved.into_iter().map(|m| m.queue).collect();
    notify_queues(exec, &names).await?;
    Ok(n)
}

/// One job a statement moved (read with `query_as!` from `RETURNING queue, state AS "state:
/// JobState"`): its queue and its new state.
pub(crate) struct MovedJob {
    pub queue: String,
    pub state: JobState,
}

/// Wakes the queue of the job a statement moved (`None`: it matched none) if the job is now due
/// (`available`). Returns whether a job moved.
pub(crate) async fn notify_due(exec: impl PgExecutor<'_>, moved: Option<MovedJob>) -> Result<bool> {
    let Some(job) = moved else {
        return Ok(false);
    };
    if job.state == JobState::Available {
        notify_queues(exec, &[job.queue]).await?;
    }
    Ok(true)
}

/// One wake-up signal per queue name, shared by the listener and the pools of a node.
///
/// A wake-up is a [`Notify::notify_one`], so one that arrives while the pool is busy is kept
/// until the pool next waits: a pool never misses work it was told about.
#[derive(Debug, Clone, Default)]
pub struct Wakers {
    inner: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Wakers {
    /// The signal for `queue` (created on first use).
    pub fn get(&self, queue: &str) -> Arc<Notify> {
        let mut map = self.inner.lock().expect("wakers lock poisoned");
        map.entry(queue.to_string()).or_default().clone()
    }

    /// Wakes `queue`'s pool, if this node has one.
    pub fn wake(&self, queue: &str) {
        let map = self.inner.lock().expect("wakers lock poisoned");
        if let Some(n) = map.get(queue) {
            n.notify_one();
        }
    }

    /// Wakes every pool (after a listener reconnect, notifications may have been missed).
    pub fn wake_all(&self) {
        let map = self.inner.lock().expect("wakers lock poisoned");
        for n in map.values() {
            n.notify_one();
        }
    }

    /// Listens on [`NOTIFY_CHANNEL`] on a dedicated connection until `shutdown`, waking the
    /// named queue's pool on each notification. On a lost connection it logs, waits `retry`,
    /// reconnects and wakes every pool; polling covers whatever happened in between.
    pub async fn listen(self, pool: PgPool, retry: Duration, shutdown: CancellationToken) {
        loop {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "queue listener: connect failed; pools keep polling");
                    if sleep_or_cancel(retry, &shutdown).await {
                        return;
                    }
                    continue;
                }
            };
            if let Err(e) = listener.listen(NOTIFY_CHANNEL).await {
                tracing::warn!(error = %e, "queue listener: LISTEN failed; pools keep polling");
                if sleep_or_cancel(retry, &shutdown).await {
                    return;
                }
                continue;
            }
            self.wake_all();
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    msg = listener.try_recv() => match msg {
                        Ok(Some(n)) => self.wake(n.payload()),
                        Ok(None) => {
                            tracing::warn!("queue listener: connection lost; reconnecting");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "queue listener: receive failed; reconnecting");
                            break;
                        }
                    }
                }
            }
            if sleep_or_cancel(retry, &shutdown).await {
                return;
            }
        }
    }
}

/// Sleeps `d`; returns true if `shutdown` fired first.
pub(crate) async fn sleep_or_cancel(d: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}
