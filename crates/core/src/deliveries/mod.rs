//! Deliveries and their attempts (tables `deliveries`, `delivery_attempts`), and the jobs that
//! carry them.
//!
//! - this file: validating and enqueueing new deliveries, and the job that carries one;
//! - [`status`]: the delivery [`Status`];
//! - `read`: a delivery, its attempts and a channel's list, as the API shows them, and
//!   deliveries counted by status;
//! - `attempt`: what a worker reads before an attempt and writes after it;
//! - `replay`: re-enqueueing dead deliveries and resending a final one;
//! - `recover`: resending a channel's final deliveries since a time, in bounded steps.

mod attempt;
mod payload;
mod read;
mod recover;
mod replay;
pub mod status;

pub use payload::check_payload_text;

pub use attempt::{
    begin_attempt, cancel_orphan, record_successes, Dispatch, Endpoint, Success, SuccessRecorded,
};
pub(crate) use attempt::{record_attempt, AttemptRecord, Recorded};
pub use read::search;
pub use read::{
    attempts, channel_status_counts, get, list, status_counts, Attempt, Delivery, DeliverySummary,
    ListFilter, ListKey, SearchFilter, StatusCounts,
};
pub use recover::{
    preview as recover_preview, recover, RecoverFilter, Recovered, MAX_RECOVER,
    MAX_RECOVER_EVENT_TYPES,
};
pub use replay::{replay, resend, ReplaySelector};
pub use status::Status;

use crate::{Error, Result, Tier, JOB_DELIVER};
use breakwater_queue::NewJob;
use serde::Serialize;
use serde_json::value::RawValue;
use sqlx::PgConnection;
use uuid::Uuid;

/// Longest accepted event type, in characters.
pub(crate) const MAX_EVENT_TYPE_LEN: usize = 200;
/// Longest accepted idempotency key, in characters.
pub(crate) const MAX_IDEMPOTENCY_KEY_LEN: usize = 200;

/// One delivery to enqueue.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// Event type, e.g. `invoice.paid`: 1–200 visible ASCII characters.
    pub event_type: String,
    /// The event's data: any JSON value, as the exact JSON text the tenant sent (it is stored
    /// and delivered byte for byte, so numbers keep their precision and keys their order).
    pub payload: Box<RawValue>,
    /// Optional idempotency key, unique per tenant.
    pub idempotency_key: Option<String>,
}

/// Checks a delivery's fields; errors name the field.
pub fn validate(d: &NewDelivery) -> Result<()> {
    check_event_type(&d.event_type)?;
    if let Some(k) = &d.idempotency_key {
        check_idempotency_key(k)?;
    }
    Ok(())
}

/// Whether `s` is 1 to `max` visible ASCII characters (`!` to `~`: no space, no control
/// character, nothing beyond ASCII): the form of an event type and of an idempotency key, which
/// travel as they are in HTTP headers and logs (README, "Accepted ranges").
fn is_visible_ascii(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Checks an event type (of a delivery or a message): 1–200 visible ASCII characters, e.g.
/// `invoice.paid`. Errors name `event_type`.
pub fn check_event_type(event_type: &str) -> Result<()> {
    if !is_visible_ascii(event_type, MAX_EVENT_TYPE_LEN) {
        return Err(Error::invalid(
            "event_type",
            "must be 1 to 200 visible ASCII characters (no spaces)",
        ));
    }
    Ok(())
}

/// Checks an idempotency key: 1–200 visible ASCII characters. Errors name `idempotency_key`.
pub(crate) fn check_idempotency_key(k: &str) -> Result<()> {
    if !is_visible_ascii(k, MAX_IDEMPOTENCY_KEY_LEN) {
        return Err(Error::invalid(
            "idempotency_key",
            "must be 1 to 200 visible ASCII characters (no spaces)",
        ));
    }
    Ok(())
}

/// JSON text kept as it was sent; serializes as the JSON it holds.
#[derive(Debug, Clone)]
pub struct RawJson(pub Box<RawValue>);

impl TryFrom<String> for RawJson {
    type Error = serde_json::Error;

    /// Checks that `s` is JSON.
    fn try_from(s: String) -> std::result::Result<Self, Self::Error> {
        RawValue::from_string(s).map(RawJson)
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The result of enqueueing one delivery.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Enqueued {
    /// The delivery id (also its `webhook-id`).
    pub id: Uuid,
    /// False when the idempotency key matched an earlier delivery, whose id this is.
    pub created: bool,
    /// The delivery's status (`pending` or `paused` when new; the earlier delivery's status on
    /// an idempotent replay).
    pub status: Status,
}

/// Inserts deliveries for `channel_id` of `tenant_id` and one `deliver` job each on the tier's
/// queue (group = channel, unique key = delivery), in the caller's transaction. Items are
/// validated first; the whole batch is refused if one is invalid. A repeated idempotency key
/// returns the earlier delivery (`created: false`) and enqueues nothing; one that was used for
/// another channel, or for another event type or payload, is an [`Error::ItemConflict`] naming
/// the item (field `idempotency_key`).
///
/// Each delivery gets a copy of the retry policy in force from its tenant and channel
/// ([`crate::retry_policy`]); its job gets that policy's `max_attempts`, else `max_attempts`
/// (`worker.max_attempts`).
///
/// With `paused` (for a channel whose circuit is open or paused) the deliveries start `paused`.
/// Their jobs need no parking of their own: the channel's job group is parked, so the fetch does
/// not take them until it is released. The caller holds the channel row (see
/// [`crate::circuit::lock_gate`]) so that a release cannot run between its read and this insert.
///
/// Results are in input order.
pub async fn enqueue(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    tier: Tier,
    channel_id: Uuid,
    items: &[NewDelivery],
    max_attempts: i32,
    paused: bool,
) -> Result<Vec<Enqueued>> {
    for d in items {
        validate(d)?;
    }
    let ids: Vec<Uuid> = items.iter().map(|_| Uuid::now_v7()).collect();
    let event_types: Vec<&str> = items.iter().map(|d| d.event_type.as_str()).collect();
    let payloads: Vec<&str> = items.iter().map(|d| d.payload.get()).collect();
    let keys: Vec<Option<&str>> = items.iter().map(|d| d.idempotency_key.as_deref()).collect();

    // ON CONFLICT on the partial unique index (tenant_id, idempotency_key): a repeated key
    // inserts nothing, even when two requests race; the earlier row is looked up below.
    let status = if paused {
        Status::Paused
    } else {
        Status::Pending
    };
    // The retry policy is copied from the tenant's default and the channel's own (the channel's
    // fields win, [`crate::retry_policy`]), in this statement: a policy change applies to the
    // deliveries accepted after it. Its `max_attempts` (if set) is the job's.
    let inserted = sqlx::query!(
        r#"
        INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, idempotency_key, status,
                                retry_policy)
        SELECT t.id, $2, $3, t.event_type, t.payload, t.key, $7, p.policy
        FROM unnest($1::uuid[], $4::text[], $5::text[], $6::text[]) AS t(id, event_type, payload, key)
        LEFT JOIN LATERAL (
            SELECT nullif(coalesce(tn.retry_policy, '{}') || coalesce(c.retry_policy, '{}'), '{}'::jsonb)
                       AS policy
            FROM channels c JOIN tenants tn ON tn.id = c.tenant_id
            WHERE c.id = $3
        ) p ON true
        ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id, (retry_policy->>'max_attempts')::int AS max_attempts
        "#,
        &ids[..],
        tenant_id,
        channel_id,
        &event_types as _,
        &payloads as _,
        &keys as _,
        status as _,
    )
    .fetch_all(&mut *tx)
    .await?;
    let inserted: std::collections::HashMap<Uuid, Option<i32>> = inserted
        .into_iter()
        .map(|r| (r.id, r.max_attempts))
        .collect();

    let mut results = Vec::with_capacity(items.len());
    let mut jobs = Vec::with_capacity(inserted.len());
    for (i, id) in ids.iter().enumerate() {
        if let Some(own_attempts) = inserted.get(id) {
            results.push(Enqueued {
                id: *id,
                created: true,
                status: if paused {
                    Status::Paused
                } else {
                    Status::Pending
                },
            });
            let attempts = own_attempts.unwrap_or(max_attempts);
            jobs.push(delivery_job(tier, channel_id, *id, attempts));
            continue;
        }
        let key = keys[i].expect("only keyed rows can conflict");
        let row = sqlx::query!(
            r#"SELECT id, channel_id, event_type, payload AS "payload!", status AS "status: Status"
             FROM deliveries
             WHERE tenant_id = $1 AND idempotency_key = $2"#,
            tenant_id,
            key,
        )
        .fetch_one(&mut *tx)
        .await?;
        let (existing, existing_channel, existing_type, existing_payload, existing_status) = (
            row.id,
            row.channel_id,
            row.event_type,
            row.payload,
            row.status,
        );
        let conflict = |message: String| Error::ItemConflict {
            index: i,
            field: "idempotency_key",
            message,
        };
        if existing_channel != channel_id {
            return Err(conflict(format!(
                "idempotency key {key:?} was already used for a delivery to another channel"
            )));
        }
        // A retried request must be the same request: a reused key with another event would
        // silently drop that event.
        if existing_type != event_types[i] || existing_payload != payloads[i] {
            return Err(conflict(format!(
                "idempotency key {key:?} was already used for a different event type or payload"
            )));
        }
        results.push(Enqueued {
            id: existing,
            created: false,
            status: existing_status,
        });
    }
    breakwater_queue::enqueue_many(&mut *tx, &jobs).await?;
    Ok(results)
}

/// The queue job that carries one delivery.
pub(crate) fn delivery_job(
    tier: Tier,
    channel_id: Uuid,
    delivery_id: Uuid,
    max_attempts: i32,
) -> NewJob {
    NewJob::new(
        tier.queue(),
        JOB_DELIVER,
        serde_json::json!({ "delivery_id": delivery_id }),
    )
    .group(channel_id)
    .unique_key(format!("delivery:{delivery_id}"))
    .max_attempts(max_attempts)
}
