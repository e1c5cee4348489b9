//! Ending things: deleting a channel or a tenant, cancelling a delivery, purging a delivery's
//! payload.
//!
//! Deletion is soft: the row stays (with `deleted_at`) so its deliveries, attempts and audit
//! rows remain readable history, but nothing finds it any more (every read in
//! [`crate::channels`] and [`crate::tenants`] skips it), no worker sends to it, and its circuit
//! never moves again (every statement in [`crate::circuit`] is conditional on `deleted_at IS
//! NULL`).
//!
//! A deletion, in one transaction: the channel rows are marked deleted (this takes their row
//! locks, so an enqueue holding a channel `FOR SHARE` finishes first and its deliveries are
//! cancelled too, and one that comes after finds no channel), their waiting jobs — parked ones
//! included — and probe watchers are cancelled through the queue ([`breakwater_queue::cancel_groups`]),
//! and every delivery that is not final becomes `cancelled` with the reason in `last_error`.
//!
//! An attempt already in flight finishes; its result changes nothing: the worker's
//! [`crate::deliveries::record_attempt`] finds the delivery cancelled, logs the attempt, leaves
//! the status, skips the circuit and ends the job as cancelled. Two rare paths are closed as
//! well: a delivery row locked by a worker recording a result at the very moment of the delete
//! is skipped (`SKIP LOCKED`: waiting for it could deadlock, as that worker may be waiting for
//! the job group row this transaction holds; a result that touches the channel locks the
//! channel row before the delivery row, [`crate::circuit::after_attempt`], so only a plain
//! success can be there, and it ends `delivered`); and a retry that outlives the delete is
//! cancelled when it is fetched: the gate finds the channel gone and the worker cancels it
//! without a request ([`crate::deliveries::cancel_orphan`]). A job group left parked (the
//! channel was open or paused) is released by the parking reconciler so such a retry can reach
//! the worker.

use crate::deliveries::Status;
use crate::{audit, circuit, keys, Error, Result};
use sqlx::PgConnection;
use uuid::Uuid;

/// `last_error` of the deliveries cancelled by their channel's deletion.
pub const REASON_CHANNEL_DELETED: &str = "cancelled: channel deleted";
/// `last_error` of the deliveries cancelled by their tenant's deletion.
pub(crate) const REASON_TENANT_DELETED: &str = "cancelled: tenant deleted";
/// `last_error` of a delivery its tenant cancelled.
pub(crate) const REASON_CANCELLED: &str = "cancelled by request";

/// What retiring channels cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Retired {
    /// Channels deleted.
    pub channels: u64,
    /// Deliveries that were not final, now `cancelled`.
    pub deliveries_cancelled: u64,
    /// Waiting jobs (deliveries and probe watchers) cancelled.
    pub jobs_cancelled: u64,
}

/// The effects of deleting `channel_ids`, whose rows the caller has just marked deleted (and
/// holds locked): cancels their waiting jobs and probe watchers, and their deliveries that are
/// not final. See the module docs for the in-flight and racing cases.
async fn retire_channels(
    tx: &mut PgConnection,
    channel_ids: &[Uuid],
    reason: &str,
) -> Result<Retired> {
    let mut jobs = breakwater_queue::cancel_groups(&mut *tx, channel_ids, reason).await?;
    let probes: Vec<String> = channel_ids.iter().map(|c| circuit::probe_key(*c)).collect();
    jobs += breakwater_queue::cancel_keys(&mut *tx, &probes, reason).await?;
    // A deleted channel's job group is released at once (lock order: the channel rows, held by
    // the caller, before the group rows): a job that outlives the deletion must be able to run
    // and be cancelled by the worker's gate, and the parking reconciler finds nothing to repair.
    // It also leaves its host's gate, so a parked host does not hold such a job either.
    for id in channel_ids {
        breakwater_queue::release_group(&mut *tx, *id).await?;
        breakwater_queue::set_group_gate(&mut *tx, *id, None).await?;
    }
    // SKIP LOCKED: a row locked now belongs to a worker recording a success, which may be
    // waiting for a job group row this transaction holds; waiting for it could deadlock (module
    // docs).
    let deliveries = sqlx::query!(
        "UPDATE deliveries d SET status = 'cancelled', last_error = $2, updated_at = now()
         FROM (SELECT id FROM deliveries
               WHERE channel_id = ANY($1) AND status NOT IN ('delivered', 'dead', 'cancelled')
               FOR UPDATE SKIP LOCKED) w
         WHERE d.id = w.id",
        channel_ids,
        reason,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(Retired {
        channels: channel_ids.len() as u64,
        deliveries_cancelled: deliveries,
        jobs_cancelled: jobs,
    })
}

/// Deletes `tenant_id`'s channel `channel_id` by `actor`, in the caller's transaction: marks it
/// deleted, cancels its waiting jobs and its deliveries that are not final (module docs), and
/// writes one `channel.deleted` audit row (name, URL as [`audit::url_summary`], counts).
/// Another tenant's channel, a missing one and one already deleted are [`Error::NotFound`].
pub async fn delete_channel(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    channel_id: Uuid,
    actor: &str,
) -> Result<Retired> {
    let row: Option<(Option<String>, String)> = sqlx::query_as(
        "UPDATE channels SET deleted_at = now(), updated_at = now()
         WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
         RETURNING name, url",
    )
    .bind(channel_id)
    .bind(tenant_id)
    .fetch_optional(&mut *tx)
    .await?;
    let (name, url) = row.ok_or(Error::NotFound("channel"))?;
    let retired = retire_channels(tx, &[channel_id], REASON_CHANNEL_DELETED).await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            details: serde_json::json!({
                "old": { "name": name, "url": audit::url_summary(&url) },
                "deliveries_cancelled": retired.deliveries_cancelled,
                "jobs_cancelled": retired.jobs_cancelled,
            }),
            ..audit::Entry::channel(tenant_id, channel_id, actor, "channel.deleted")
        },
    )
    .await?;
    tracing::info!(%tenant_id, %channel_id, deliveries_cancelled = retired.deliveries_cancelled, "channel deleted");
    Ok(retired)
}

/// What deleting a tenant did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TenantDeleted {
    /// Its channels, retired.
    #[serde(flatten)]
    pub retired: Retired,
    /// Its API keys, revoked.
    pub keys_revoked: u64,
}

/// Deletes tenant `tenant_id` by `actor` (the operator), in the caller's transaction: marks it
/// deleted, deletes every channel of it as [`delete_channel`] does, revokes all its API keys and
/// portal sessions (each refused from its next request on), and writes one `tenant.deleted` audit row with the
/// counts. A missing or already deleted tenant is [`Error::NotFound`].
///
/// The channel rows are locked in id order, so two transactions that lock several channels
/// never wait for each other in a cycle. The tenant's row is updated first: a channel creation
/// in flight holds it `FOR SHARE` ([`crate::channels::create`]), so the update waits for it, and
/// the channels are then read by a later statement that sees it.
pub async fn delete_tenant(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    actor: &str,
) -> Result<TenantDeleted> {
    let name: Option<String> = sqlx::query_scalar(
        "UPDATE tenants SET deleted_at = now(), updated_at = now()
         WHERE id = $1 AND deleted_at IS NULL RETURNING name",
    )
    .bind(tenant_id)
    .fetch_optional(&mut *tx)
    .await?;
    let name = name.ok_or(Error::NotFound("tenant"))?;
    let channels: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL ORDER BY id FOR UPDATE",
    )
    .bind(tenant_id)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query("UPDATE channels SET deleted_at = now(), updated_at = now() WHERE id = ANY($1)")
        .bind(&channels)
        .execute(&mut *tx)
        .await?;
    let retired = retire_channels(tx, &channels, REASON_TENANT_DELETED).await?;
    let keys_revoked = keys::revoke_all(&mut *tx, tenant_id).await?;
    crate::portal::revoke_all(&mut *tx, tenant_id).await?;
    let deleted = TenantDeleted {
        retired,
        keys_revoked,
    };
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            actor,
            action: "tenant.deleted",
            details: serde_json::json!({
                "old": { "name": name },
                "channels_deleted": retired.channels,
                "deliveries_cancelled": retired.deliveries_cancelled,
                "jobs_cancelled": retired.jobs_cancelled,
                "keys_revoked": keys_revoked,
            }),
            ..Default::default()
        },
    )
    .await?;
    tracing::info!(%tenant_id, channels = retired.channels, keys_revoked, "tenant deleted");
    Ok(deleted)
}

/// Whether a delivery in `status` may still be cancelled: it has not been delivered and is not
/// otherwise final. `pending`, `paused` (parked behind an open or paused circuit), `failed`
/// (waiting for its retry) and `delivering` (in flight: the attempt finishes, its result changes
/// nothing) may; `delivered`, `dead` (already given up; replay is the way back) and `cancelled`
/// may not.
pub(crate) fn cancellable(status: Status) -> bool {
    !status.is_final()
}

/// Cancels `tenant_id`'s delivery `delivery_id` by `actor`, in the caller's transaction: the
/// delivery becomes `cancelled` ([`REASON_CANCELLED`] in `last_error`), its waiting job is
/// cancelled, and one `delivery.cancelled` audit row is written (with the status it left).
/// Errors: another tenant's or a missing delivery → [`Error::NotFound`]; one that is not
/// [`cancellable`] → [`Error::Conflict`] naming its status.
///
/// The delivery's row is locked first: a worker recording a result for it either finished
/// before (its new status is what is checked) or waits and then finds it cancelled
/// ([`crate::deliveries::record_attempt`]).
pub async fn cancel_delivery(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    delivery_id: Uuid,
    actor: &str,
) -> Result<()> {
    let row = sqlx::query!(
        r#"SELECT channel_id, status AS "status: Status" FROM deliveries
         WHERE id = $1 AND tenant_id = $2 FOR UPDATE"#,
        delivery_id,
        tenant_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let (channel_id, status) = row
        .map(|r| (r.channel_id, r.status))
        .ok_or(Error::NotFound("delivery"))?;
    if !cancellable(status) {
        return Err(Error::Conflict(format!(
            "delivery is {status}; only a delivery that is pending, paused, failed (waiting for \
             a retry) or delivering can be cancelled"
        )));
    }
    sqlx::query!(
        "UPDATE deliveries SET status = 'cancelled', last_error = $2, updated_at = now()
         WHERE id = $1",
        delivery_id,
        REASON_CANCELLED,
    )
    .execute(&mut *tx)
    .await?;
    let jobs = breakwater_queue::cancel_keys(
        &mut *tx,
        &[format!("delivery:{delivery_id}")],
        REASON_CANCELLED,
    )
    .await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            details: serde_json::json!({
                "delivery_id": delivery_id,
                "old": { "status": status },
                "new": { "status": Status::Cancelled },
                "jobs_cancelled": jobs,
            }),
            ..audit::Entry::channel(tenant_id, channel_id, actor, "delivery.cancelled")
        },
    )
    .await?;
    Ok(())
}

/// Purges the payload of `tenant_id`'s delivery `delivery_id` by `actor`, in the caller's
/// transaction: `payload` becomes the JSON `null` and `payload_purged_at` is set, with one
/// `delivery.payload_purged` audit row (the purged size in bytes, never the payload). Returns
/// false, changing and auditing nothing, when it was already purged.
///
/// Only a final delivery (`delivered`, `dead`, `cancelled`) may be purged: one that may still
/// be sent needs its payload ([`Error::Conflict`]: cancel it first). A purged dead delivery can
/// no longer be replayed. Attempts keep their response excerpts (the receiver's answers, not
/// the payload). Another tenant's or a missing delivery → [`Error::NotFound`].
///
/// A delivery made by a message (`POST /api/v1/messages`) has no payload of its own: it sends
/// the message's, stored once for all of the message's deliveries. Purging it purges the
/// message's payload, so it needs every delivery of the message final ([`Error::Conflict`]
/// naming how many may still be sent), and marks every one of them purged, each with its audit
/// row (`details.message_id` names the message).
pub async fn purge_payload(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    delivery_id: Uuid,
    actor: &str,
) -> Result<bool> {
    // A message's delivery has no payload of its own (NULL): its size is the message's.
    struct Row {
        channel_id: Uuid,
        status: Status,
        purged: bool,
        bytes: Option<i32>,
        message_id: Option<Uuid>,
    }
    let row = sqlx::query_as!(
        Row,
        r#"SELECT channel_id, status AS "status: Status",
                  payload_purged_at IS NOT NULL AS "purged!",
                  octet_length(payload) AS bytes, message_id
           FROM deliveries WHERE id = $1 AND tenant_id = $2 FOR UPDATE"#,
        delivery_id,
        tenant_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Row {
        channel_id,
        status,
        purged,
        bytes,
        message_id,
    } = row.ok_or(Error::NotFound("delivery"))?;
    if !status.is_final() {
        return Err(Error::Conflict(format!(
            "delivery is {status} and may still be sent, so it needs its payload; cancel it \
             first (POST /api/v1/deliveries/{delivery_id}/cancel)"
        )));
    }
    if purged {
        return Ok(false);
    }
    if let Some(message_id) = message_id {
        return purge_message_payload(tx, tenant_id, message_id, actor).await;
    }
    sqlx::query!(
        "UPDATE deliveries SET payload = 'null', payload_purged_at = now() WHERE id = $1",
        delivery_id,
    )
    .execute(&mut *tx)
    .await?;
    let bytes = bytes.unwrap_or(0);
    audit::record(
        &mut *tx,
        &audit::Entry {
            details: serde_json::json!({ "delivery_id": delivery_id, "bytes": bytes }),
            ..audit::Entry::channel(tenant_id, channel_id, actor, "delivery.payload_purged")
        },
    )
    .await?;
    Ok(true)
}

/// [`purge_payload`] of a message's delivery: the message's payload, once every delivery of the
/// message is final (the message row is locked first, so no delivery of it starts meanwhile).
async fn purge_message_payload(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    message_id: Uuid,
    actor: &str,
) -> Result<bool> {
    let bytes: i32 = sqlx::query_scalar(
        "SELECT octet_length(payload) FROM messages WHERE id = $1 AND tenant_id = $2 FOR UPDATE",
    )
    .bind(message_id)
    .bind(tenant_id)
    .fetch_one(&mut *tx)
    .await?;
    let live: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "live!" FROM deliveries
         WHERE message_id = $1 AND status NOT IN ('delivered', 'dead', 'cancelled')"#,
        message_id,
    )
    .fetch_one(&mut *tx)
    .await?;
    if live > 0 {
        return Err(Error::Conflict(format!(
            "this delivery's payload is message {message_id}'s, shared by its deliveries, and \
             {live} of them may still be sent; cancel or wait for them first"
        )));
    }
    sqlx::query("UPDATE messages SET payload = 'null' WHERE id = $1")
        .bind(message_id)
        .execute(&mut *tx)
        .await?;
    let marked = sqlx::query!(
        "UPDATE deliveries SET payload_purged_at = now()
         WHERE message_id = $1 AND payload_purged_at IS NULL
         RETURNING id, channel_id",
        message_id,
    )
    .fetch_all(&mut *tx)
    .await?;
    for m in marked {
        let (delivery_id, channel_id) = (m.id, m.channel_id);
        audit::record(
            &mut *tx,
            &audit::Entry {
                details: serde_json::json!({
                    "delivery_id": delivery_id, "bytes": bytes, "message_id": message_id,
                }),
                ..audit::Entry::channel(tenant_id, channel_id, actor, "delivery.payload_purged")
            },
        )
        .await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::cancellable;
    use crate::deliveries::Status;

    #[test]
    fn only_undelivered_live_deliveries_are_cancellable() {
        for s in [
            Status::Pending,
            Status::Paused,
            Status::Failed,
            Status::Delivering,
        ] {
            assert!(cancellable(s), "{s}");
        }
        for s in [Status::Delivered, Status::Dead, Status::Cancelled] {
            assert!(!cancellable(s), "{s}");
        }
        assert!(Status::parse("nonsense").is_err());
    }
}
