//! Where a delivery's latency goes, read from the database after a run: the wait between its
//! acceptance and its first attempt's start, and that attempt's request, as percentiles per
//! stream phase ([`split`]).
//!
//! - `accepted → attempt started` (`wait_ms`): `delivery_attempts.started_at` of its first attempt
//!   minus `deliveries.created_at`. Both are Postgres's `now()`, the start of a transaction: the
//!   enqueue's (so its remaining statements and its commit are inside this span) and the
//!   attempt's admission. Between them: the commit, the notification, the fetch, the admission.
//! - `request` (`request_ms`): that attempt's `duration_ms`, the request as the worker timed it.
//!
//! What is left of an end-to-end latency is the API request up to its transaction's start and
//! the time from the attempt's admission to its request being sent. The healthy receivers answer
//! at once, so a large `request_ms` is time the service spent before the request left it (a busy
//! runtime or pool) or the receiver's own delay.

use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

/// Percentiles (p50, p95, p99, max) of `wait_ms` and `request_ms` of the first attempts of
/// `channels`' deliveries, per value of the payload's `phase` field (a delivery without one
/// counts as phase `null`). An empty object if the read fails (the report says so).
pub async fn split(pool: &PgPool, channels: &[Uuid]) -> Value {
    type Row = (Option<i32>, i64, Vec<f64>, Vec<f64>);
    let rows: Result<Vec<Row>, _> = sqlx::query_as(
        "SELECT (d.payload::jsonb->>'phase')::int AS phase, count(*),
                percentile_cont(ARRAY[0.5, 0.95, 0.99, 1.0]) WITHIN GROUP
                    (ORDER BY extract(epoch FROM a.started_at - d.created_at) * 1000.0),
                percentile_cont(ARRAY[0.5, 0.95, 0.99, 1.0]) WITHIN GROUP
                    (ORDER BY a.duration_ms::float8)
         FROM deliveries d
         CROSS JOIN LATERAL (SELECT started_at, duration_ms FROM delivery_attempts
                             WHERE delivery_id = d.id ORDER BY started_at LIMIT 1) a
         WHERE d.channel_id = ANY($1)
         GROUP BY 1 ORDER BY 1",
    )
    .bind(channels)
    .fetch_all(pool)
    .await;
    let pct = |v: &[f64]| {
        let at = |i: usize| v.get(i).map(|x| (x * 100.0).round() / 100.0);
        json!({"p50": at(0), "p95": at(1), "p99": at(2), "max": at(3)})
    };
    match rows {
        Ok(rows) => {
            let phases: serde_json::Map<String, Value> = rows
                .iter()
                .map(|(phase, n, wait, request)| {
                    let key = phase.map_or("null".to_string(), |p| p.to_string());
                    (
                        key,
                        json!({"count": n, "wait_ms": pct(wait), "request_ms": pct(request)}),
                    )
                })
                .collect();
            json!({
                "definition": "per payload phase: wait_ms = first attempt's started_at − the delivery's created_at (both transaction starts: the enqueue's, the admission's); request_ms = that attempt's duration_ms",
                "phases": phases,
            })
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// One line per phase of a [`split`] (`report[key]`), for the human summaries: `name` is the
/// phase's label (`labels` maps a phase key to it; a key it lacks is shown as is).
pub fn summary_lines(split: &Value, labels: &[(&str, &str)]) -> Vec<String> {
    let Some(phases) = split["phases"].as_object() else {
        return Vec::new();
    };
    phases
        .iter()
        .map(|(key, p)| {
            let name = labels
                .iter()
                .find(|l| l.0 == key)
                .map_or(key.as_str(), |l| l.1);
            let f = |v: &Value| format!("{}/{}/{}", v["p50"], v["p95"], v["p99"]);
            format!(
                "  {name}: accepted → attempt started p50/p95/p99 {} ms; request {} ms (n={})",
                f(&p["wait_ms"]),
                f(&p["request_ms"]),
                p["count"]
            )
        })
        .collect()
}
