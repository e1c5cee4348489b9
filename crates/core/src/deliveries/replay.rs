//! Starting final deliveries again: the replay of dead deliveries (dead letters), the resend of
//! one final delivery, and the one statement all of them (and [`super::recover`]) end in,
//! [`restart`].
//!
//! A restarted delivery keeps its row and its id, so its `webhook-id` (the delivery id, or its
//! message's id) is the one the receiver saw before: Standard Webhooks has the header identify
//! the message ("the same when the same webhook is being resent"), and Svix's resend keeps the
//! message id with a new attempt. A receiver that deduplicates by `webhook-id` therefore treats
//! a resend as the message it already has (README, "Resend and recover").

use super::{delivery_job, Status};
use crate::{Result, Tier};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Which dead deliveries to replay.
#[derive(Debug, Clone, Copy)]
pub enum ReplaySelector {
    /// One delivery of a tenant.
    One {
        /// Owner (another tenant's delivery is not found).
        tenant_id: Uuid,
        /// The delivery's channel (another channel's delivery is not found).
        channel_id: Uuid,
        /// The delivery.
        delivery_id: Uuid,
    },
    /// A channel's dead deliveries that went dead (last changed) within `[from, to]`, at most
    /// [`MAX_REPLAY`] per call.
    ChannelWindow {
        /// Owner.
        tenant_id: Uuid,
        /// Channel.
        channel_id: Uuid,
        /// Window start.
        from: DateTime<Utc>,
        /// Window end.
        to: DateTime<Utc>,
    },
}

/// Most deliveries one channel replay re-enqueues.
pub(crate) const MAX_REPLAY: i64 = 10_000;

/// Re-enqueues dead deliveries (dead letters) of one channel: each goes back to `pending` with a
/// fresh job on its tenant's tier queue (the attempts of the retry policy it was accepted with,
/// else `max_attempts`), or to `paused` when `parked`:
/// the caller's decision for the channel, as for an enqueue ([`crate::circuit::enqueue_parked`],
/// which holds the channel's gate until the caller commits, so a transition waits for these
/// jobs). Only `dead` deliveries move whose payload was not purged and whose channel was not deleted,
/// and the job's unique key is the delivery, so a replay never creates a second live job for a
/// delivery, and replaying twice replays once. In the caller's transaction. Returns the ids
/// replayed.
pub async fn replay(
    tx: &mut PgConnection,
    selector: ReplaySelector,
    parked: bool,
    max_attempts: i32,
) -> Result<Vec<Uuid>> {
    let (tenant_id, channel_id, delivery_id, from, to) = match selector {
        ReplaySelector::One {
            tenant_id,
            channel_id,
            delivery_id,
        } => (tenant_id, channel_id, Some(delivery_id), None, None),
        ReplaySelector::ChannelWindow {
            tenant_id,
            channel_id,
            from,
            to,
        } => (tenant_id, channel_id, None, Some(from), Some(to)),
    };
    // The rows stay locked until the caller commits: a second replay waits, then finds them
    // no longer dead.
    let picked: Vec<Uuid> = sqlx::query_scalar(
        r#"
        SELECT id FROM deliveries
        WHERE tenant_id = $1 AND status = 'dead' AND payload_purged_at IS NULL
          AND channel_id IN (SELECT id FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL)
          AND channel_id = $3
          AND ($2::uuid IS NULL OR id = $2)
          AND ($4::timestamptz IS NULL OR updated_at BETWEEN $4 AND $5)
        ORDER BY updated_at
        LIMIT $6
        FOR UPDATE
        "#,
    )
    .bind(tenant_id)
    .bind(delivery_id)
    .bind(channel_id)
    .bind(from)
    .bind(to)
    .bind(MAX_REPLAY)
    .fetch_all(&mut *tx)
    .await?;
    restart(tx, &picked, parked, max_attempts).await
}

/// Resends `tenant_id`'s final delivery `delivery_id` (`delivered`, `dead` or `cancelled`, its
/// payload not purged, its channel not deleted): a new attempt series of the same delivery
/// ([`restart`]), `parked` as the caller decided for its channel
/// ([`crate::circuit::enqueue_parked`]). In the caller's transaction; the row is locked until it
/// commits, so two resends of one delivery resend it once. Returns whether it was resent
/// (`false`: not the tenant's, not final, purged, or its channel deleted; the caller read the
/// delivery first and names which).
pub async fn resend(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    delivery_id: Uuid,
    parked: bool,
    max_attempts: i32,
) -> Result<bool> {
    let picked: Vec<Uuid> = sqlx::query_scalar(
        r#"
        SELECT d.id FROM deliveries d
        WHERE d.id = $1 AND d.tenant_id = $2
          AND d.status IN ('delivered', 'dead', 'cancelled') AND d.payload_purged_at IS NULL
          AND EXISTS (SELECT 1 FROM channels c WHERE c.id = d.channel_id AND c.deleted_at IS NULL)
        FOR UPDATE OF d
        "#,
    )
    .bind(delivery_id)
    .bind(tenant_id)
    .fetch_all(&mut *tx)
    .await?;
    Ok(!restart(tx, &picked, parked, max_attempts).await?.is_empty())
}

/// Starts the final deliveries `ids` again, the one place a final delivery leaves its final
/// status: each that is still `delivered`, `dead` or `cancelled` goes to `pending` (or `paused`
/// when `parked`; its channel's job group is then parked, so its job waits like any parked
/// delivery's), `delivered_at` cleared, with a fresh `deliver` job of `max_attempts` attempts on
/// its tenant's tier queue. The delivery keeps its id, attempt count and attempt log (the next
/// attempt is numbered after the last), so its `webhook-id` does not change.
///
/// The caller has locked the rows (`FOR UPDATE`) and, for the channel, decided `parked` under
/// its gate lock. The job's unique key is the delivery, so a delivery never gets a second live
/// job. In the caller's transaction. Returns the ids restarted.
pub(super) async fn restart(
    tx: &mut PgConnection,
    ids: &[Uuid],
    parked: bool,
    max_attempts: i32,
) -> Result<Vec<Uuid>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let status = if parked {
        Status::Paused
    } else {
        Status::Pending
    };
    // A restarted delivery keeps the retry policy it was accepted with
    // ([`crate::retry_policy`]): its own `max_attempts`, else `max_attempts`.
    let rows: Vec<(Uuid, Uuid, String, Option<i32>)> = sqlx::query_as(
        r#"
        UPDATE deliveries d SET status = $2, updated_at = now(), delivered_at = NULL
        FROM tenants t
        WHERE d.id = ANY($1) AND t.id = d.tenant_id
          AND d.status IN ('delivered', 'dead', 'cancelled')
        RETURNING d.id, d.channel_id, t.tier, (d.retry_policy->>'max_attempts')::int
        "#,
    )
    .bind(ids)
    .bind(status)
    .fetch_all(&mut *tx)
    .await?;
    let jobs: Vec<_> = rows
        .iter()
        .map(|(id, channel, tier, own)| {
            let tier: Tier = tier.parse().unwrap_or_default();
            delivery_job(tier, *channel, *id, own.unwrap_or(max_attempts))
        })
        .collect();
    breakwater_queue::enqueue_many(&mut *tx, &jobs).await?;
    // In the order picked (the recover's cursor follows it).
    let restarted: std::collections::HashSet<Uuid> = rows.iter().map(|r| r.0).collect();
    Ok(ids
        .iter()
        .copied()
        .filter(|id| restarted.contains(id))
        .collect())
}
