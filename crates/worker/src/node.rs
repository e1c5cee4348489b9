//! Running a worker node.

use crate::retention::{self, RetentionConfig};
use crate::worker::Worker;
use crate::WorkerConfig;
use breakwater_core::circuit::{self, CircuitConfig};
use breakwater_core::hosts::HostsConfig;
use breakwater_core::jobs::{QUEUE_ALERTS, QUEUE_CIRCUIT};
use breakwater_core::Tier;
use breakwater_queue::maintenance::{self, MaintenanceConfig};
use breakwater_queue::runner::{run_pool, PoolConfig};
use breakwater_queue::{ListenConfig, Wakers};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A fresh node id: `<hostname>-<pid>-<random>`, unique per process start.
pub fn node_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "node".into());
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// What a worker node runs with.
#[derive(Debug, Clone)]
pub struct NodeParams {
    /// Worker settings.
    pub worker: WorkerConfig,
    /// Circuit settings.
    pub circuit: CircuitConfig,
    /// Host circuit settings.
    pub hosts: HostsConfig,
    /// This node's id.
    pub node_id: String,
    /// Whether deliveries may go to internal addresses.
    pub allow_private_targets: bool,
    /// Retention of finished deliveries, attempts and jobs (the pruner runs on every node).
    pub retention: RetentionConfig,
}

/// Runs a worker node until `shutdown` fires and every pool has drained (within
/// `worker.shutdown_grace_ms`; jobs still running then are handed back): the listener, the
/// upkeep loop, the health check, the retention pruner, one pool per tier queue and one on the
/// circuit queue.
pub async fn run_node(
    pool: PgPool,
    params: NodeParams,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let NodeParams {
        worker: cfg,
        circuit: circuit_cfg,
        hosts,
        node_id,
        allow_private_targets,
        retention,
    } = params;
    let client = crate::http::client(
        Duration::from_millis(cfg.connect_timeout_ms),
        allow_private_targets,
    )
    .map_err(|e| format!("building the HTTP client failed: {e}"))?;
    // The per-host cap (the gate's cap) defaults to hosts.max_in_flight (0: none, a host is then
    // capped only by its own override).
    // The stall watch ticks from now until the node has stopped (`background`, below).
    let stall = crate::stall::StallWatch::new(Duration::from_millis(cfg.stall_threshold_ms));
    let mut limits = cfg.channel_limits();
    limits.gate_ceiling = hosts.default_cap().map(|m| m as u32);
    let handler = Arc::new(Worker {
        pool: pool.clone(),
        client,
        node_id: node_id.clone(),
        backoff: cfg.backoff(),
        max_attempts: cfg.max_attempts,
        excerpt_bytes: cfg.response_excerpt_bytes,
        allow_private: allow_private_targets,
        circuit: circuit_cfg.clone(),
        hosts: hosts.clone(),
        limits: limits.clone(),
        recorder: crate::batch::Recorder::start(
            pool.clone(),
            node_id.clone(),
            limits.clone(),
            cfg.record_batch(),
        ),
        beginner: crate::begin::Beginners::new(pool.clone()),
        stall: stall.clone(),
        connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
        request_timeout: Duration::from_millis(cfg.request_timeout_ms),
        tokens: Default::default(),
    });
    // Channels created before host circuits existed get their host key (and circuit row).
    match pool.acquire().await {
        Ok(mut conn) => {
            match breakwater_core::hosts::rekey_missing(&mut conn, hosts.granularity).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(channels = n, "host keys given to channels that had none"),
                Err(e) => tracing::warn!(error = %e, "keying channels by host failed"),
            }
        }
        Err(e) => tracing::warn!(error = %e, "keying channels by host failed"),
    }
    // Heartbeat before the first fetch, so no other node's rescuer mistakes our jobs for orphans.
    maintenance::heartbeat(&pool, &node_id, Duration::ZERO)
        .await
        .map_err(|e| format!("first heartbeat failed: {e}"))?;

    let wakers = Wakers::default();
    let mut tasks = tokio::task::JoinSet::new();
    // The listener and upkeep stop with their own token, after the pools have drained, so that
    // heartbeats continue while in-flight jobs finish.
    let background = CancellationToken::new();
    tasks.spawn(stall.tick_until(background.clone()));
    tasks.spawn(wakers.clone().listen(
        pool.clone(),
        ListenConfig {
            retry: Duration::from_secs(1),
            ping_interval: Duration::from_millis(cfg.listener_ping_interval_ms),
            ping_timeout: Duration::from_millis(cfg.listener_ping_timeout_ms),
        },
        background.clone(),
    ));
    tasks.spawn(maintenance::run(
        pool.clone(),
        MaintenanceConfig {
            node_id: node_id.clone(),
            heartbeat_interval: Duration::from_millis(cfg.heartbeat_interval_ms),
            promote_interval: Duration::from_millis(cfg.promote_interval_ms),
            rescue_after: Duration::from_millis(cfg.rescue_after_ms),
            // The longest a run may take: its request (the longest a channel's retry policy
            // may set, if longer than the configuration's), a shutdown's grace, and a rescue
            // period for recording the result.
            max_run: Duration::from_millis(
                cfg.request_timeout_ms
                    .max(breakwater_core::retry_policy::MAX_TIMEOUT_MS as u64)
                    + cfg.shutdown_grace_ms
                    + cfg.rescue_after_ms,
            ),
            rescue_interval: Duration::from_millis(cfg.rescue_interval_ms),
            retention: Duration::from_millis(cfg.job_retention_ms),
            prune_interval: Duration::from_secs(60),
        },
        background.clone(),
    ));

    // The loops beside live work run on sessions of their own with a short lock_timeout
    // (maintenance::upkeep_pool): a row a live or frozen transaction holds makes a
    // step fail fast and run again next period instead of waiting, and they never take a
    // connection of the handlers' pool.
    let upkeep = maintenance::upkeep_pool(&pool, 3);
    tasks.spawn(health_loop(upkeep.clone(), circuit_cfg, background.clone()));
    tasks.spawn(reconcile_loop(upkeep.clone(), background.clone()));
    tasks.spawn(retention_loop(upkeep, retention, background.clone()));

    let mut pools = tokio::task::JoinSet::new();
    let mut queues: Vec<(&str, usize)> = Tier::ALL
        .iter()
        .map(|t| {
            let n = match t {
                Tier::High => cfg.pool_high,
                Tier::Default => cfg.pool_default,
                Tier::Bulk => cfg.pool_bulk,
            };
            (t.queue(), n)
        })
        .collect();
    queues.push((QUEUE_CIRCUIT, cfg.pool_circuit));
    queues.push((QUEUE_ALERTS, cfg.pool_alerts));
    for (queue, concurrency) in queues {
        if concurrency == 0 {
            tracing::warn!(
                queue,
                "pool size is 0: this node runs none of this queue's jobs"
            );
            continue;
        }
        pools.spawn(run_pool(
            pool.clone(),
            PoolConfig {
                queue: queue.to_string(),
                node_id: node_id.clone(),
                concurrency,
                poll_interval: Duration::from_millis(cfg.poll_interval_ms),
                shutdown_grace: Duration::from_millis(cfg.shutdown_grace_ms),
                backoff: cfg.backoff(),
                // The alerts queue's groups are tenants' alert groups, each capped at
                // `alert_concurrency_per_tenant`; the other queues' groups are
                // channels (and tenants' probe watchers) under the channel limits.
                limits: if queue == QUEUE_ALERTS {
                    cfg.alert_limits()
                } else {
                    limits.clone()
                },
            },
            handler.clone(),
            wakers.clone(),
            shutdown.clone(),
        ));
    }
    tracing::info!(node_id = %node_id, high = cfg.pool_high, default = cfg.pool_default, bulk = cfg.pool_bulk, "worker node started");
    while pools.join_next().await.is_some() {}
    background.cancel();
    while tasks.join_next().await.is_some() {}
    if let Err(e) = maintenance::deregister(&pool, &node_id).await {
        tracing::warn!(error = %e, "could not remove this node's heartbeat row");
    }
    tracing::info!(node_id = %node_id, "worker node stopped");
    Ok(())
}

/// How often the parking reconciler compares circuits with their job groups.
const RECONCILE_INTERVAL: Duration = Duration::from_secs(5);

/// Runs `step` every `period` until `shutdown`, the first time one period after the start.
async fn every<F, Fut>(period: Duration, shutdown: CancellationToken, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        step().await;
    }
}

/// Runs the parking reconciler ([`circuit::reconcile_parking`] for channels,
/// [`breakwater_core::hosts::reconcile_gates`] for hosts) every few seconds until `shutdown`:
/// the safety net for a missed park or release.
async fn reconcile_loop(pool: PgPool, shutdown: CancellationToken) {
    every(RECONCILE_INTERVAL, shutdown, || async {
        let r = async {
            let mut conn = pool.acquire().await?;
            circuit::reconcile_parking(&mut conn).await?;
            breakwater_core::hosts::reconcile_gates(&mut conn).await
        }
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "parking reconciler failed");
        }
    })
    .await
}

/// Runs the health check every `health_check_interval_ms` until `shutdown`.
async fn health_loop(pool: PgPool, cfg: CircuitConfig, shutdown: CancellationToken) {
    let period = Duration::from_millis(cfg.health_check_interval_ms);
    every(period, shutdown, || async {
        let r = async {
            let mut conn = pool.acquire().await?;
            circuit::health_check(&mut conn, &cfg).await
        }
        .await;
        // Each transition was committed in its own transaction inside health_check.
        if let Ok(t) = &r {
            let counted: Vec<_> = t.iter().map(|t| t.counted()).collect();
            crate::deliver::count_transitions(&counted);
        }
        match r {
            Ok(t) if !t.is_empty() => {
                tracing::warn!(opened = t.len(), "health check opened circuits")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "health check failed"),
        }
    })
    .await
}

/// Runs the retention pruner ([`retention::prune_once`]: everything due, batch by batch) every
/// `retention.interval_ms` until `shutdown`; nothing when `retention.deliveries_days` is 0.
async fn retention_loop(pool: PgPool, cfg: RetentionConfig, shutdown: CancellationToken) {
    if cfg.deliveries_days == 0 {
        return;
    }
    let period = Duration::from_millis(cfg.interval_ms);
    every(period, shutdown.clone(), || async {
        let started = std::time::Instant::now();
        match retention::prune_once(&pool, &cfg, &shutdown).await {
            Ok(r) if r.deliveries + r.jobs > 0 => tracing::info!(
                deliveries = r.deliveries,
                attempts = r.attempts,
                jobs = r.jobs,
                batches = r.batches,
                ms = started.elapsed().as_millis() as u64,
                "retention pruned finished rows"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention pruning failed"),
        }
    })
    .await
}
