//! Worker settings.

use crate::batch::BatchConfig;
use breakwater_queue::{Backoff, GroupLimits};
use serde::Deserialize;
use std::time::Duration;

/// Worker settings (`[worker]` in `config/default.toml`; environment
/// `BREAKWATER_WORKER__<FIELD>`). Durations are in milliseconds, as the field names say.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// Workers per node on `deliveries_high`.
    pub pool_high: usize,
    /// Workers per node on `deliveries`.
    pub pool_default: usize,
    /// Workers per node on `deliveries_bulk`.
    pub pool_bulk: usize,
    /// Workers per node on `circuit` (probe watchers; each step is a short transaction).
    pub pool_circuit: usize,
    /// Workers per node on `alerts` (alert webhooks to tenants' on-call, and the flapping
    /// timers). Keep it above `alert_concurrency_per_tenant` × the number of tenants whose alert
    /// endpoints may hang at once, divided by the nodes: those hold their workers for the
    /// request timeout each.
    pub pool_alerts: usize,
    /// Alert webhooks of one tenant in flight at once, cluster-wide (≥ 1): each tenant's alerts
    /// are one job group ([`breakwater_core::jobs::TenantGroup::Alerts`]) with this cap, fetched
    /// fairly by tenant. So a tenant whose alert endpoint hangs holds at most this many alert
    /// workers (each for up to `request_timeout_ms`), and another tenant's alert goes out on the
    /// next free worker, not after the hanging tenant's backlog. Also the cap
    /// of a tenant's flapping timers (a group of their own).
    pub alert_concurrency_per_tenant: u32,
    /// A channel's concurrency limit (deliveries in flight at once, cluster-wide) before any
    /// feedback. The limit then adapts between the floor and the ceiling by the endpoint's own
    /// latency ([`breakwater_queue::adapt_limit`]: +1 per success while its recent latency is
    /// within `channel_latency_tolerance` × its baseline, × 0.5 on a rise past that or an
    /// overload).
    pub channel_concurrency_initial: u32,
    /// The adaptive limit never falls below this (≥ 1).
    pub channel_concurrency_floor: u32,
    /// Nor rises above this, unless the channel sets its own `max_in_flight`.
    pub channel_concurrency_ceiling: u32,
    /// How far a channel's recent latency may rise above its own baseline (a ratio, > 1)
    /// before its limit is halved; within it, successes grow the limit, however slow the
    /// endpoint is in absolute terms ([`GroupLimits::latency_tolerance`]).
    pub channel_latency_tolerance: f64,
    /// Weight of each success in a channel's recent latency (an EWMA), in (0, 1]
    /// ([`GroupLimits::latency_recent_weight`]).
    pub channel_latency_recent_weight: f64,
    /// How fast a channel's baseline latency drifts up towards its recent latency, per success,
    /// in (0, `channel_latency_recent_weight`] ([`GroupLimits::latency_baseline_weight`]).
    pub channel_latency_baseline_weight: f64,
    /// Latencies below this are noise, not a slowdown: the tolerance applies to a baseline of
    /// at least this, ms ([`GroupLimits::latency_noise`]).
    pub channel_latency_noise_ms: u64,
    /// Fallback poll period of an idle pool, ms (LISTEN/NOTIFY wakes pools sooner).
    pub poll_interval_ms: u64,
    /// On shutdown, how long in-flight deliveries may finish before their jobs are handed back, ms.
    pub shutdown_grace_ms: u64,
    /// TCP (+TLS) connect timeout of a delivery, ms.
    pub connect_timeout_ms: u64,
    /// Total timeout of a delivery (or alert) request, including reading the response excerpt,
    /// ms of this node's *running* time: a stall of the node itself (see `stall_threshold_ms`)
    /// extends it by the stall's length, so a response that arrived while the node stood still
    /// is read, not timed out.
    pub request_timeout_ms: u64,
    /// A gap longer than this between two ticks of the node's stall watch (a 100 ms ticker,
    /// [`crate::stall`]) is a stall of the node itself (a `SIGSTOP`, a frozen VM, a starved
    /// runtime), ms. A request timeout, connect timeout or connection failure of an attempt that
    /// such a stall overlapped says nothing about the endpoint: the attempt is inconclusive
    /// (retried at once, no attempt used, nothing counted against the channel or its host).
    /// Default 1000; at least 200.
    pub stall_threshold_ms: u64,
    /// How often the queue listener (LISTEN/NOTIFY) checks its connection with `SELECT 1` when
    /// no notification arrived, ms. Default 5000.
    pub listener_ping_interval_ms: u64,
    /// How long that check, or a new listener's connect and `LISTEN`, may take before the
    /// connection is presumed dead (a blackholed path: packets silently dropped), logged, and
    /// replaced, ms. Default 3000. A dead listener is noticed within the two together.
    pub listener_ping_timeout_ms: u64,
    /// How much of a response body is kept on the attempt, bytes.
    pub response_excerpt_bytes: usize,
    /// HTTP attempts per delivery before it is dead.
    pub max_attempts: i32,
    /// Backoff after the first failed attempt, ms.
    pub backoff_base_ms: u64,
    /// Backoff growth per failed attempt.
    pub backoff_factor: f64,
    /// Largest backoff, ms.
    pub backoff_cap_ms: u64,
    /// Proportional backoff jitter, 0.0–1.0.
    pub backoff_jitter: f64,
    /// Heartbeat period of a node, ms.
    pub heartbeat_interval_ms: u64,
    /// A node silent this long is presumed dead and its executing jobs are rescued, ms.
    pub rescue_after_ms: u64,
    /// Period of the rescuer, ms.
    pub rescue_interval_ms: u64,
    /// Period of the promoter of due scheduled jobs (the most a snoozed job waits past its
    /// time), ms.
    pub promote_interval_ms: u64,
    /// Finished jobs are deleted after this long, ms (deliveries and attempts are kept).
    pub job_retention_ms: u64,
    /// Most plain successes (no probe, no failures before, no circuit moved) recorded in one
    /// transaction by a node ([`crate::batch`]); 1 records each alone.
    pub record_batch_max: usize,
    /// How long a batch of results waits for more once it has one and a writer is free, ms
    /// (0: not at all; under load the results that arrive while the writers are busy batch
    /// anyway).
    pub record_batch_window_ms: u64,
    /// Batches of results a node writes at once.
    pub record_batch_writers: usize,
}

/// `d` in whole milliseconds, for the `_ms` settings (saturating; defaults are far below).
fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The defaults; the retry backoff's are [`Backoff::default`]'s and the result batching's
/// [`BatchConfig::default`]'s, so each default is written once (`config/default.toml` repeats
/// them for operators to read; a test in the server's config module checks it agrees).
impl Default for WorkerConfig {
    fn default() -> Self {
        let backoff = Backoff::default();
        let batch = BatchConfig::default();
        Self {
            pool_high: 100,
            pool_default: 200,
            pool_bulk: 50,
            pool_circuit: 2,
            pool_alerts: 8,
            alert_concurrency_per_tenant: 1,
            channel_concurrency_initial: 4,
            channel_concurrency_floor: 1,
            channel_concurrency_ceiling: 64,
            channel_latency_tolerance: 1.5,
            channel_latency_recent_weight: 0.2,
            channel_latency_baseline_weight: 0.01,
            channel_latency_noise_ms: 100,
            poll_interval_ms: 1_000,
            shutdown_grace_ms: 20_000,
            connect_timeout_ms: 5_000,
            request_timeout_ms: 15_000,
            stall_threshold_ms: 1_000,
            listener_ping_interval_ms: 5_000,
            listener_ping_timeout_ms: 3_000,
            response_excerpt_bytes: 1_024,
            max_attempts: 12,
            backoff_base_ms: duration_ms(backoff.base),
            backoff_factor: backoff.factor,
            backoff_cap_ms: duration_ms(backoff.cap),
            backoff_jitter: backoff.jitter,
            heartbeat_interval_ms: 5_000,
            rescue_after_ms: 30_000,
            rescue_interval_ms: 10_000,
            promote_interval_ms: 50,
            job_retention_ms: 24 * 3_600_000,
            record_batch_max: batch.max,
            record_batch_window_ms: duration_ms(batch.window),
            record_batch_writers: batch.flushers,
        }
    }
}

impl WorkerConfig {
    /// The retry backoff of deliveries.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(self.backoff_base_ms),
            factor: self.backoff_factor,
            cap: Duration::from_millis(self.backoff_cap_ms),
            jitter: self.backoff_jitter,
        }
    }

    /// The cluster-wide concurrency bounds of each channel (its job group).
    pub fn channel_limits(&self) -> GroupLimits {
        GroupLimits {
            initial: self.channel_concurrency_initial,
            floor: self.channel_concurrency_floor,
            ceiling: self.channel_concurrency_ceiling,
            decrease_factor: 0.5,
            latency_tolerance: self.channel_latency_tolerance,
            latency_recent_weight: self.channel_latency_recent_weight,
            latency_baseline_weight: self.channel_latency_baseline_weight,
            latency_noise: Duration::from_millis(self.channel_latency_noise_ms),
            // Set from `[hosts] max_in_flight` by the node (host circuits own that key).
            gate_ceiling: GroupLimits::default().gate_ceiling,
        }
    }

    /// The bounds of each group on the `alerts` queue (a tenant's alert group, or its timer
    /// group): fixed at `alert_concurrency_per_tenant` in flight, cluster-wide (initial = floor =
    /// ceiling; alerts feed back no latency, so the limit never moves).
    pub fn alert_limits(&self) -> GroupLimits {
        let n = self.alert_concurrency_per_tenant;
        GroupLimits {
            initial: n,
            floor: n,
            ceiling: n,
            ..GroupLimits::default()
        }
    }

    /// How this node batches its plain successes' results ([`crate::batch`]).
    pub(crate) fn record_batch(&self) -> crate::batch::BatchConfig {
        crate::batch::BatchConfig {
            max: self.record_batch_max,
            window: Duration::from_millis(self.record_batch_window_ms),
            flushers: self.record_batch_writers,
        }
    }

    /// Checks the settings; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        self.channel_limits().validate(|field| match field {
            "latency_noise" => "worker.channel_latency_noise_ms".into(),
            f if f.starts_with("latency_") => format!("worker.channel_{f}"),
            f => format!("worker.channel_concurrency_{f}"),
        })?;
        let positive = [
            ("worker.poll_interval_ms", self.poll_interval_ms),
            ("worker.connect_timeout_ms", self.connect_timeout_ms),
            ("worker.request_timeout_ms", self.request_timeout_ms),
            ("worker.heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("worker.rescue_interval_ms", self.rescue_interval_ms),
            ("worker.promote_interval_ms", self.promote_interval_ms),
            (
                "worker.listener_ping_interval_ms",
                self.listener_ping_interval_ms,
            ),
            (
                "worker.listener_ping_timeout_ms",
                self.listener_ping_timeout_ms,
            ),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if self.stall_threshold_ms < 2 * crate::stall::TICK.as_millis() as u64 {
            return Err(format!(
                "worker.stall_threshold_ms must be at least {} (twice the stall watch's tick)",
                2 * crate::stall::TICK.as_millis()
            ));
        }
        if self.alert_concurrency_per_tenant == 0 {
            return Err("worker.alert_concurrency_per_tenant must be at least 1".into());
        }
        if self.record_batch_max == 0 {
            return Err("worker.record_batch_max must be at least 1".into());
        }
        if self.record_batch_writers == 0 {
            return Err("worker.record_batch_writers must be at least 1".into());
        }
        if self.max_attempts < 1 {
            return Err("worker.max_attempts must be at least 1".into());
        }
        if self.rescue_after_ms < 2 * self.heartbeat_interval_ms {
            return Err(
                "worker.rescue_after_ms must be at least twice worker.heartbeat_interval_ms".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.backoff_jitter) {
            return Err("worker.backoff_jitter must be between 0.0 and 1.0".into());
        }
        if self.backoff_factor < 1.0 {
            return Err("worker.backoff_factor must be at least 1.0".into());
        }
        Ok(())
    }

    /// The pools this node leaves at 0 (`worker.pool_*`), each with its queue: valid (a node may
    /// serve only some tiers, e.g. one dedicated to `deliveries_high`), but that queue is then
    /// served only by the other nodes, and by none if every node leaves it at 0.
    pub fn empty_pools(&self) -> Vec<(&'static str, &'static str)> {
        [
            ("worker.pool_high", "deliveries_high", self.pool_high),
            ("worker.pool_default", "deliveries", self.pool_default),
            ("worker.pool_bulk", "deliveries_bulk", self.pool_bulk),
            ("worker.pool_circuit", "circuit", self.pool_circuit),
            ("worker.pool_alerts", "alerts", self.pool_alerts),
        ]
        .into_iter()
        .filter(|&(_, _, n)| n == 0)
        .map(|(key, queue, _)| (key, queue))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pools_left_at_zero_are_named_with_their_queues() {
        assert!(WorkerConfig::default().empty_pools().is_empty());
        let c = WorkerConfig {
            pool_default: 0,
            pool_alerts: 0,
            ..WorkerConfig::default()
        };
        assert_eq!(
            c.empty_pools(),
            [
                ("worker.pool_default", "deliveries"),
                ("worker.pool_alerts", "alerts")
            ]
        );
    }
}
