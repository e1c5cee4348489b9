//! Endpoint rejections (401/403): the streak on the channel, audited and alerted once.

use super::{
    channel_alert, has_alert_url, policy, ACTION_ENDPOINT_REJECTED, EVENT_ENDPOINT_REJECTED,
};
use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::jobs::AlertArgs;
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;
/// A delivery to the channel was rejected (401/403): records it on the channel
/// (`last_failure_at`, `last_failure_reason`; the circuit does not move) and, for the first
/// rejection of a streak only, writes one audit row (system actor) and one
/// `channel.endpoint_rejected` alert. The streak's start is one conditional UPDATE (`WHERE
/// rejected_since IS NULL`): of 50 rejections racing on several nodes exactly one sees the
/// column still null after the row lock, and only it audits and alerts. Returns true for that
/// winner. In the caller's transaction.
pub(crate) async fn endpoint_rejected(
    tx: &mut PgConnection,
    channel_id: Uuid,
    status: u16,
    reason: &str,
) -> Result<bool> {
    let won: Option<(Uuid, String, i64, i32, DateTime<Utc>)> = sqlx::query_as(
        "UPDATE channels
         SET rejected_since = now(), last_failure_at = now(), last_failure_reason = $2,
             updated_at = now()
         WHERE id = $1 AND rejected_since IS NULL AND deleted_at IS NULL
         RETURNING tenant_id, circuit_state, circuit_generation, consecutive_failures, now()",
    )
    .bind(channel_id)
    .bind(reason)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((tenant_id, state, generation, failures, at)) = won else {
        // The streak is already known: only the last failure moves.
        sqlx::query(
            "UPDATE channels SET last_failure_at = now(), last_failure_reason = $2
             WHERE id = $1 AND deleted_at IS NULL",
        )
        .bind(channel_id)
        .bind(reason)
        .execute(&mut *tx)
        .await?;
        return Ok(false);
    };
    let why = format!(
        "the endpoint rejects our requests ({reason}); check its credentials and the channel's \
         signing secret. The circuit does not open for this; deliveries rejected meanwhile are \
         dead letters (replay them once it is fixed)"
    );
    audit::record(
        &mut *tx,
        &audit::Entry {
            reason: Some(&why),
            details: serde_json::json!({ "status": status, "circuit_state": state }),
            ..audit::Entry::channel(
                tenant_id,
                channel_id,
                ACTOR_CIRCUIT_BREAKER,
                ACTION_ENDPOINT_REJECTED,
            )
        },
    )
    .await?;
    tracing::warn!(%channel_id, %tenant_id, status, "endpoint rejects our requests: streak started");
    if has_alert_url(&mut *tx, tenant_id).await? {
        let policy = policy(&mut *tx).await?;
        let in_window: i32 = sqlx::query_scalar(
            "SELECT count(*)::int4 FROM circuit_alert_state s, unnest(s.recent) AS x
             WHERE s.channel_id = $1 AND x > now() - $2::float8 * interval '1 millisecond'",
        )
        .bind(channel_id)
        .bind(policy.flapping_window_ms)
        .fetch_one(&mut *tx)
        .await?;
        let args = AlertArgs {
            from_state: Some(state.to_string()),
            to_state: state.to_string(),
            reason: why.to_string(),
            status: Some(status),
            failure_count: Some(failures),
            generation,
            transition_count: Some(in_window),
            flapping_window_ms: Some(policy.flapping_window_ms),
            at,
            ..channel_alert(tx, EVENT_ENDPOINT_REJECTED, tenant_id, channel_id).await?
        };
        let key = format!(
            "alert:{channel_id}:{EVENT_ENDPOINT_REJECTED}:{}",
            at.timestamp_micros()
        );
        crate::jobs::enqueue_alert_job(&mut *tx, &args, key).await?;
    }
    Ok(true)
}

/// A delivery to the channel succeeded while a rejection streak was on: ends it, so the next
/// 401/403 starts a new streak (and alerts again). The caller calls it only when the channel it
/// read had a streak on, so the common success costs no statement; the `IS NOT NULL` condition
/// keeps a racing call from writing either. Returns true if this call ended the streak.
pub(crate) async fn rejection_cleared(exec: impl PgExecutor<'_>, channel_id: Uuid) -> Result<bool> {
    let n = sqlx::query(
        "UPDATE channels SET rejected_since = NULL, updated_at = now()
         WHERE id = $1 AND rejected_since IS NOT NULL",
    )
    .bind(channel_id)
    .execute(exec)
    .await?
    .rows_affected();
    if n == 1 {
        tracing::info!(%channel_id, "endpoint accepts our requests again: rejection streak over");
    }
    Ok(n == 1)
}
