//! What the database and the dead endpoint saw once an isolation run was measured ([`Seen`]),
//! and the time helpers the report and its dead-host part share.

use super::cast::Cast;
use super::Measured;
use crate::api::Api;
use crate::receiver::DeadEndpoint;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// action, at, from_state, to_state, details.parked.
pub(super) type AuditRow = (
    String,
    DateTime<Utc>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// What the database and the dead endpoint saw, read once the run was measured.
pub(super) struct Seen {
    /// The dead channels' audit rows, oldest first.
    pub audit: Vec<AuditRow>,
    /// The dead channels' attempts, oldest first: started_at, duration_ms, probe, channel_id.
    pub attempts: Vec<(DateTime<Utc>, i32, bool, Uuid)>,
    /// The dead channels' deliveries by status: (status, count), by status.
    pub statuses: Vec<(String, i64)>,
    /// The healthy channel's attempts: (all, failed).
    pub healthy_attempts: (i64, i64),
    /// The first dead channel's `circuit` as the API shows it at the end (null if unread).
    pub circuit_end: Value,
    /// The dead host's audit rows, oldest first (a dead-host run only; else none).
    pub host_audit: Vec<HostAuditRow>,
    /// [`DeadEndpoint::arrivals`], read after the rows.
    pub arrivals: Vec<u64>,
    /// Where the healthy channel's latency went, per stream phase ([`crate::phases::split`]).
    pub healthy_phases: Value,
}

impl Seen {
    /// Reads the rows of the dead channels (and host), the healthy channel's attempts and the
    /// first dead channel's circuit (through the API), then the dead endpoint's arrivals.
    pub(super) async fn read(
        pool: &PgPool,
        api: &Api,
        cast: &Cast,
        m: &Measured,
        dead: &DeadEndpoint,
    ) -> anyhow::Result<Self> {
        let (ta, dead_ch) = (&cast.dead_tenants[0], &cast.dead_chs[0]);
        let audit: Vec<AuditRow> = sqlx::query_as(
            "SELECT action, at, from_state, to_state, (details->>'parked')::int8
             FROM audit_log WHERE channel_id = ANY($1) ORDER BY at, id",
        )
        .bind(&m.dead_uuids)
        .fetch_all(pool)
        .await?;
        let attempts: Vec<(DateTime<Utc>, i32, bool, Uuid)> = sqlx::query_as(
            "SELECT started_at, duration_ms, probe, channel_id FROM delivery_attempts
             WHERE channel_id = ANY($1) ORDER BY started_at",
        )
        .bind(&m.dead_uuids)
        .fetch_all(pool)
        .await?;
        let statuses: Vec<(String, i64)> = sqlx::query_as(
            "SELECT status, count(*) FROM deliveries WHERE channel_id = ANY($1) GROUP BY status ORDER BY status",
        )
        .bind(&m.dead_uuids)
        .fetch_all(pool)
        .await?;
        let healthy_attempts: (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE outcome <> 'success') FROM delivery_attempts WHERE channel_id = $1",
        )
        .bind(m.healthy_uuid)
        .fetch_one(pool)
        .await?;
        let circuit_end = api
            .channel(ta, dead_ch)
            .await
            .map(|v| v["circuit"].clone())
            .unwrap_or(Value::Null);
        // The dead host's rows: only with several dead channels or tenants.
        let host_audit: Vec<HostAuditRow> = match (&m.host_key, m.multi) {
            (Some(k), true) => {
                sqlx::query_as(
                    "SELECT action, at, from_state, to_state, (details->>'jobs')::int8,
                            (details->>'channels')::int8, (details->>'tenants')::int8
                     FROM audit_log WHERE action LIKE 'host.%' AND details->>'host_key' = $1
                     ORDER BY at, id",
                )
                .bind(k)
                .fetch_all(pool)
                .await?
            }
            _ => Vec::new(),
        };
        let healthy_phases = crate::phases::split(pool, &[m.healthy_uuid]).await;
        let arrivals = dead.arrivals();
        Ok(Self {
            audit,
            attempts,
            statuses,
            healthy_attempts,
            circuit_end,
            host_audit,
            arrivals,
            healthy_phases,
        })
    }
}

/// A host circuit's audit row: action, at, from_state, to_state, details.jobs, details.channels,
/// details.tenants.
pub(super) type HostAuditRow = (
    String,
    DateTime<Utc>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// Milliseconds from `from_us` to `to_us` (harness-clock µs), rounded to 0.1 ms.
pub(crate) fn ms_between(from_us: i64, to_us: i64) -> f64 {
    ((to_us - from_us) as f64 / 100.0).round() / 10.0
}

/// The number of probe times (cooldown, then doubling, capped) that fall within `span_ms` of
/// the opening: each may cost the dead endpoint one request.
pub fn probes_allowed(span_ms: f64, cooldown_ms: i64, max_cooldown_ms: i64) -> u64 {
    let mut t = 0.0;
    let mut c = cooldown_ms.max(1) as f64;
    let mut n = 0;
    while n < 10_000 {
        t += c;
        if t > span_ms {
            break;
        }
        n += 1;
        c = (c * 2.0).min(max_cooldown_ms.max(1) as f64);
    }
    n
}
