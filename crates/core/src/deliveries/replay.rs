//! Re-enqueueing dead deliveries (dead letters).

use super::{delivery_job, Status};
use crate::{Result, Tier};
use breakwater_queue::NewJob;
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
pub const MAX_REPLAY: i64 = 10_000;

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
    let status = if parked {
        Status::Paused
    } else {
        Status::Pending
    };
    let rows = sqlx::query!(
        r#"
        WITH picked AS (
            SELECT id FROM deliveries
            WHERE tenant_id = $1 AND status = 'dead' AND payload_purged_at IS NULL
              AND channel_id IN (SELECT id FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL)
              AND channel_id = $3
              AND ($2::uuid IS NULL OR id = $2)
              AND ($4::timestamptz IS NULL OR updated_at BETWEEN $4 AND $5)
            ORDER BY updated_at
            LIMIT $6
            FOR UPDATE
        )
        UPDATE deliveries d SET status = $7, updated_at = now()
        FROM picked, tenants t
        WHERE d.id = picked.id AND t.id = d.tenant_id
        RETURNING d.id, d.channel_id, t.tier, (d.retry_policy->>'max_attempts')::int AS max_attempts
        "#,
        tenant_id,
        delivery_id,
        channel_id,
        from,
        to,
        MAX_REPLAY,
        status as _,
    )
    .fetch_all(&mut *tx)
    .await?;
    // A replayed delivery keeps the retry policy it was accepted with ([`crate::retry_policy`]).
    let rows: Vec<(Uuid, Uuid, String, Option<i32>)> = rows
        .into_iter()
        .map(|r| (r.id, r.channel_id, r.tier, r.max_attempts))
        .collect();
    let jobs: Vec<NewJob> = rows
        .iter()
        .map(|(id, channel, tier, own)| {
            let tier: Tier = tier.parse().unwrap_or_default();
            delivery_job(tier, *channel, *id, own.unwrap_or(max_attempts))
        })
        .collect();
    breakwater_queue::enqueue_many(&mut *tx, &jobs).await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}
