//! What runs beside the loaded stream: the queue monitor (one sample a second) and the watchers
//! that poll every 10 ms for the moment a channel circuit or the host circuit opens.
//!
//! The monitor's backlog counts read every waiting job of the dead channels: at a 100 000
//! backlog about 120 ms of Postgres CPU a sample (`pg_stat_statements`, 2 cores), a load the
//! service under test does not make and that fell on the healthy tenant's latency once a second.
//! So a sample counts the backlog only while it is still to be seen parked whole (the first
//! such sample is `backlog_all_parked_after_s`), and after that, or in slow mode (whose backlog
//! is never parked), one sample in [`FULL_EVERY`]; the others read only what is cheap (the
//! executing jobs, the groups' in-flight counts) and leave the backlog counts null.

use crate::clock::now_us;
use crate::receiver::InFlight;
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often (in samples) the monitor counts the backlog once it no longer needs to every
/// second (module doc).
pub(super) const FULL_EVERY: usize = 10;

/// One monitor sample of the queue: the dead channels' jobs and the healthy channel's, by state,
/// all of one moment (one snapshot). The backlog counts (`dead_available`, `dead_scheduled`,
/// `dead_parked`, `healthy_available`) are `None` in a sample that did not count them (module
/// doc).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct Sample {
    /// Seconds since the first backlog batch request, to 0.1 s.
    pub t_s: f64,
    pub dead_available: Option<i64>,
    pub dead_executing: i64,
    pub dead_scheduled: Option<i64>,
    /// The dead channels' waiting jobs that are parked, by the queue's own definition (their
    /// group is parked, or its gate is): the sum of [`breakwater_queue::parked_count`] over the
    /// dead channels. Parked jobs stay `available` (or `scheduled`) in the parked group.
    pub dead_parked: Option<i64>,
    pub healthy_available: Option<i64>,
    pub healthy_executing: i64,
    /// The dead channels' groups' `job_groups.in_flight` summed (the queue's own count of
    /// their jobs executing on any node, kept by the fetch and the completion trigger).
    pub dead_group_in_flight: i64,
    /// Requests the dead endpoint held at the sample's moment (its receiver's gauge; `None`
    /// for `refuse`).
    pub dead_endpoint_in_flight: Option<u64>,
}

impl Sample {
    /// Whether the dead channels' backlog is parked whole: they have waiting jobs, every one of
    /// them is parked, and none of theirs is executing.
    pub fn backlog_all_parked(&self) -> bool {
        let (Some(a), Some(s), Some(parked)) =
            (self.dead_available, self.dead_scheduled, self.dead_parked)
        else {
            return false;
        };
        let waiting = a + s;
        waiting > 0 && parked == waiting && self.dead_executing == 0
    }
}

/// Samples the queue once a second until `stop` (or an hour): the dead channels' (groups
/// `dead`) and the healthy channel's jobs, and the dead endpoint's `gauge`; `t_s` counts from
/// `origin_us`. A sample that fails to read is left out. `slow`: the dead channels are slow,
/// not dead (their backlog is never parked: count it one sample in [`FULL_EVERY`]).
pub(super) async fn monitor(
    pool: PgPool,
    dead: Vec<Uuid>,
    healthy: Uuid,
    gauge: Option<std::sync::Arc<InFlight>>,
    origin_us: u64,
    slow: bool,
    stop: CancellationToken,
) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Bounded: at most one hour of samples.
    let mut seen_parked = false;
    for n in 0..3600 {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let t_s = (now_us() as f64 - origin_us as f64) / 1e6;
        let held = gauge.as_ref().map(|g| g.current());
        let full = !(slow || seen_parked) || n % FULL_EVERY == 0;
        if let Ok(mut s) = sample(&pool, &dead, healthy, (t_s * 10.0).round() / 10.0, full).await {
            s.dead_endpoint_in_flight = held;
            seen_parked |= s.backlog_all_parked();
            out.push(s);
        }
    }
    out
}

/// Reads one [`Sample`] in one read-only `REPEATABLE READ` transaction, so that its counts by
/// state and its parked counts (one [`breakwater_queue::parked_count`] per dead channel) are of
/// the same snapshot, and "every waiting job is parked" is not a mix of two moments. Without
/// `full`, only the executing jobs and the in-flight counts (module doc).
async fn sample(
    pool: &PgPool,
    dead: &[Uuid],
    healthy: Uuid,
    t_s: f64,
    full: bool,
) -> anyhow::Result<Sample> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let (e, he): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE group_id = ANY($1)),
                count(*) FILTER (WHERE group_id = $2)
         FROM jobs WHERE state = 'executing' AND (group_id = ANY($1) OR group_id = $2)",
    )
    .bind(dead)
    .bind(healthy)
    .fetch_one(&mut *tx)
    .await?;
    let mut counts = None;
    if full {
        let (a, s, ha): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE group_id = ANY($1) AND state = 'available'),
                    count(*) FILTER (WHERE group_id = ANY($1) AND state = 'scheduled'),
                    count(*) FILTER (WHERE group_id = $2 AND state = 'available')
             FROM jobs WHERE (group_id = ANY($1) OR group_id = $2)
               AND state IN ('available', 'scheduled')",
        )
        .bind(dead)
        .bind(healthy)
        .fetch_one(&mut *tx)
        .await?;
        let mut parked = 0;
        for &group in dead {
            parked += breakwater_queue::parked_count(&mut *tx, group).await?;
        }
        counts = Some((a, s, parked, ha));
    }
    let group_in_flight: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(in_flight), 0)::int8 FROM job_groups WHERE group_id = ANY($1)",
    )
    .bind(dead)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Sample {
        t_s,
        dead_available: counts.map(|c| c.0),
        dead_executing: e,
        dead_scheduled: counts.map(|c| c.1),
        dead_parked: counts.map(|c| c.2),
        healthy_available: counts.map(|c| c.3),
        healthy_executing: he,
        dead_group_in_flight: group_in_flight,
        dead_endpoint_in_flight: None,
    })
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

#[cfg(test)]
mod tests {
    use super::Sample;

    #[test]
    fn the_backlog_is_all_parked_when_every_waiting_job_is_and_none_executes() {
        let s = |available, scheduled, executing, parked| Sample {
            t_s: 0.0,
            dead_available: Some(available),
            dead_executing: executing,
            dead_scheduled: Some(scheduled),
            dead_parked: Some(parked),
            healthy_available: Some(0),
            healthy_executing: 0,
            dead_group_in_flight: 0,
            dead_endpoint_in_flight: None,
        };
        // Parked jobs stay available in their parked group.
        assert!(s(10, 0, 0, 10).backlog_all_parked());
        assert!(s(7, 3, 0, 10).backlog_all_parked());
        // Not yet parked, parked but a probe (or a request from before the opening) still
        // executing, only part of it parked (a dead host's channels before their gate is).
        assert!(!s(10, 0, 0, 0).backlog_all_parked());
        assert!(!s(9, 0, 1, 9).backlog_all_parked());
        assert!(!s(10, 0, 0, 4).backlog_all_parked());
        // Nothing waiting: no backlog to be parked.
        assert!(!s(0, 0, 0, 0).backlog_all_parked());
        // A sample that did not count the backlog says nothing about it.
        let mut uncounted = s(10, 0, 0, 10);
        uncounted.dead_parked = None;
        assert!(!uncounted.backlog_all_parked());
    }
}
