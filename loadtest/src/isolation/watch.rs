//! What runs beside the loaded stream: the queue monitor (one sample a second) and the watchers
//! that poll every 10 ms for the moment a channel circuit or the host circuit opens.

use crate::clock::now_us;
use crate::receiver::InFlight;
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// One monitor sample of the queue.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct Sample {
    pub t_s: f64,
    pub dead_available: i64,
    pub dead_executing: i64,
    pub dead_scheduled: i64,
    pub healthy_available: i64,
    pub healthy_executing: i64,
}

pub(super) async fn monitor(
    pool: PgPool,
    dead: Vec<Uuid>,
    healthy: Uuid,
    origin_us: u64,
    stop: CancellationToken,
) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Bounded: at most one hour of samples.
    for _ in 0..3600 {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let t_s = (now_us() as f64 - origin_us as f64) / 1e6;
        let r: Result<(i64, i64, i64, i64, i64), _> = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE group_id = ANY($1) AND state = 'available'),
                    count(*) FILTER (WHERE group_id = ANY($1) AND state = 'executing'),
                    count(*) FILTER (WHERE group_id = ANY($1) AND state = 'scheduled'),
                    count(*) FILTER (WHERE group_id = $2 AND state = 'available'),
                    count(*) FILTER (WHERE group_id = $2 AND state = 'executing')
             FROM jobs WHERE (group_id = ANY($1) OR group_id = $2)
               AND state IN ('available', 'executing', 'scheduled')",
        )
        .bind(&dead)
        .bind(healthy)
        .fetch_one(&pool)
        .await;
        if let Ok((a, e, s, ha, he)) = r {
            out.push(Sample {
                t_s: (t_s * 10.0).round() / 10.0,
                dead_available: a,
                dead_executing: e,
                dead_scheduled: s,
                healthy_available: ha,
                healthy_executing: he,
            });
        }
    }
    out
}

/// Polls the channels' circuit states every 10 ms until one leaves `closed` (or `stop`, or an
/// hour): the harness time at which the opening became visible, i.e. committed. The audit row's
/// `at` is the opening transaction's start (`now()`), which can be much earlier.
pub(super) async fn watch_open(
    pool: PgPool,
    channels: Vec<Uuid>,
    stop: CancellationToken,
) -> Option<u64> {
    for _ in 0..360_000 {
        let open: Result<bool, _> = sqlx::query_scalar(
            "SELECT coalesce(bool_or(circuit_state <> 'closed'), false) FROM channels WHERE id = ANY($1)",
        )
        .bind(&channels)
        .fetch_one(&pool)
        .await;
        let at = now_us();
        if open.is_ok_and(|o| o) {
            return Some(at);
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    None
}

/// Polls the host circuit `host_key` every 10 ms until it leaves `closed` (or `stop`, or an
/// hour): the harness time (µs) at which the opening became visible (committed), and the
/// requests the dead endpoint held at that moment (`None` for `refuse`: nothing listens).
pub(super) async fn watch_host(
    pool: PgPool,
    host_key: String,
    gauge: Option<std::sync::Arc<InFlight>>,
    stop: CancellationToken,
) -> Option<(u64, Option<u64>)> {
    for _ in 0..360_000 {
        let state: Result<Option<String>, _> =
            sqlx::query_scalar("SELECT state FROM host_circuits WHERE host_key = $1")
                .bind(&host_key)
                .fetch_optional(&pool)
                .await;
        let at = now_us();
        if state.is_ok_and(|s| s.is_some_and(|s| s != "closed")) {
            return Some((at, gauge.as_ref().map(|g| g.current())));
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    None
}
