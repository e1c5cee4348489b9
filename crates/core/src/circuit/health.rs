//! The health check: opens closed channels whose transient-failure ratio crossed the line.

use super::{open_from_closed, CircuitConfig, Transition};
use crate::audit::ACTOR_CIRCUIT_BREAKER;
use crate::Result;
use sqlx::PgConnection;
use uuid::Uuid;
/// One health-check pass: for every closed channel with attempts since the later of the window
/// start and its last transition, computes the transient-failure ratio, stores the verdict in
/// `health_unhealthy`, and for each channel whose verdict moved from healthy to unhealthy opens
/// the circuit. Only that move trips, and only attempts since the circuit last changed count, so
/// a channel that was just closed is not re-opened by old failures still in the window. Safe on
/// several nodes at once: the verdict update is conditional on the old verdict, so one node wins
/// each move. Returns the transitions made.
pub async fn health_check(conn: &mut PgConnection, cfg: &CircuitConfig) -> Result<Vec<Transition>> {
    let verdicts: Vec<(Uuid, bool, i64, i64)> = sqlx::query_as(
        "SELECT c.id,
                (count(a.*) >= $2 AND count(a.*) FILTER (WHERE a.outcome = 'transient')::float8
                                      / greatest(count(a.*), 1) >= $3) AS unhealthy,
                count(a.*), count(a.*) FILTER (WHERE a.outcome = 'transient')
         FROM channels c
         JOIN delivery_attempts a
           ON a.channel_id = c.id
          AND a.started_at > greatest(now() - ($1::float8 * interval '1 millisecond'), c.circuit_changed_at)
         WHERE c.circuit_state = 'closed' AND c.deleted_at IS NULL
         GROUP BY c.id",
    )
    .bind(cfg.health_window_ms)
    .bind(cfg.health_min_attempts)
    .bind(cfg.health_failure_ratio)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::new();
    for (channel_id, unhealthy, total, failed) in verdicts {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let moved = sqlx::query(
            "UPDATE channels SET health_unhealthy = $2 WHERE id = $1 AND health_unhealthy <> $2",
        )
        .bind(channel_id)
        .bind(unhealthy)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if moved && unhealthy {
            let reason = format!(
                "health check: {failed} of {total} attempts failed in the window (ratio ≥ {})",
                cfg.health_failure_ratio
            );
            if let Some(t) =
                open_from_closed(&mut tx, channel_id, &reason, ACTOR_CIRCUIT_BREAKER, cfg).await?
            {
                out.push(t);
            }
        }
        tx.commit().await?;
    }
    Ok(out)
}
