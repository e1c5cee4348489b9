//! What the queue's test binaries share: a handler that measures concurrency, and several
//! nodes (each its own thread, Tokio runtime and connection pool) running pools on one database.

#![allow(dead_code)] // each test binary uses part of it

use breakwater_queue::runner::{run_pool, Handler, PoolConfig};
use breakwater_queue::{complete, Job, Wakers};
use sqlx::PgPool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                    while counters.done() < total && tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    stop.cancel();
                    runner.await.unwrap();
                })
            })
        })
        .collect()
}
