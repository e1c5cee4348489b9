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
    /// named queue's pool on each notification. On a lost connection it logs, waits
    /// `cfg.retry`, reconnects and wakes every pool; polling covers whatever happened in
    /// between.
    ///
    /// A connection can also die silently: when the path to Postgres drops packets (a
    /// blackhole: a failover, a lost NAT entry) no error ever comes, the listener waits for
    /// good, and wake-ups fall back to polling. So the connection is
    /// checked: after `cfg.ping_interval` without a notification a `SELECT 1` must answer
    /// within `cfg.ping_timeout`, and a new connection and its `LISTEN` must be made within
    /// `cfg.ping_timeout` too; otherwise it is presumed dead, logged (warn), dropped and
    /// replaced. A dead listener is noticed within `ping_interval + ping_timeout`.
    pub async fn listen(self, pool: PgPool, cfg: ListenConfig, shutdown: CancellationToken) {
        loop {
            let connected = tokio::time::timeout(cfg.ping_timeout, async {
                let mut l = PgListener::connect_with(&pool).await?;
                l.listen(NOTIFY_CHANNEL).await?;
                Ok::<_, sqlx::Error>(l)
            })
            .await;
            let mut listener = match connected {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "queue listener: connect or LISTEN failed; pools keep polling");
                    if sleep_or_cancel(cfg.retry, &shutdown).await {
                        return;
                    }
                    continue;
                }
                Err(_) => {
                    tracing::warn!(
                        timeout_ms = cfg.ping_timeout.as_millis() as u64,
                        "queue listener: connect or LISTEN got no answer in time; pools keep polling"
                    );
                    if sleep_or_cancel(cfg.retry, &shutdown).await {
                        return;
                    }
                    continue;
                }
            };
            self.wake_all();
            let mut ping = tokio::time::interval_at(
                tokio::time::Instant::now() + cfg.ping_interval,
                cfg.ping_interval,
            );
            ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                // `try_recv` is cancel-safe (sqlx reads a message whole or not at all), so the
                // ping may interrupt it.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    msg = listener.try_recv() => match msg {
                        Ok(Some(n)) => {
                            // A notification proves the connection: the next check waits.
                            ping.reset();
                            self.wake(n.payload());
                        }
                        Ok(None) => {
                            tracing::warn!("queue listener: connection lost; reconnecting");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "queue listener: receive failed; reconnecting");
                            break;
                        }
                    },
                    _ = ping.tick() => {
                        // A simple-protocol `SELECT 1` on the listener's own connection; a
                        // notification that arrives meanwhile is buffered for `try_recv`.
                        let check = tokio::time::timeout(
                            cfg.ping_timeout,
                            sqlx::Executor::execute(&mut listener, "SELECT 1"),
                        )
                        .await;
                        match check {
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => {
                                tracing::warn!(error = %e, "queue listener: liveness check failed; reconnecting");
                                break;
                            }
                            Err(_) => {
                                tracing::warn!(
                                    timeout_ms = cfg.ping_timeout.as_millis() as u64,
                                    "queue listener: no answer to the liveness check; the connection is presumed dead (a blackholed path?); reconnecting"
                                );
                                break;
                            }
                        }
                    }
                }
            }
            // The old connection is dropped (sqlx closes it in the background; on a dead path
            // that close never completes, and the socket goes with the process).
            drop(listener);
            if sleep_or_cancel(cfg.retry, &shutdown).await {
                return;
            }
        }
    }
}

/// How [`Wakers::listen`] keeps its connection honest.
#[derive(Debug, Clone, Copy)]
pub struct ListenConfig {
    /// Wait after a failed or dead connection before the next one.
    pub retry: Duration,
    /// How long without a notification before the connection is checked with `SELECT 1`
    /// (`worker.listener_ping_interval_ms`).
    pub ping_interval: Duration,
    /// How long that check, or a new connection and its `LISTEN`, may take before the
    /// connection is presumed dead (`worker.listener_ping_timeout_ms`).
    pub ping_timeout: Duration,
}

/// Sleeps `d`; returns true if `shutdown` fired first.
pub(crate) async fn sleep_or_cancel(d: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}
