//! Deliveries and their attempts (tables `deliveries`, `delivery_attempts`), and the jobs that
//! carry them.

use crate::{Error, Result, Tier, JOB_DELIVER};
use breakwater_queue::NewJob;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Longest accepted event type, in characters.
pub const MAX_EVENT_TYPE_LEN: usize = 200;
/// Longest accepted idempotency key, in characters.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 200;

/// One delivery to enqueue.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// Event type, e.g. `invoice.paid`: 1–200 characters, no control characters.
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

/// Checks an event type (of a delivery or a message): 1–200 characters once trimmed, no control
/// characters. Errors name `event_type`.
pub fn check_event_type(event_type: &str) -> Result<()> {
    let et = event_type.trim();
    if et.is_empty() {
        return Err(Error::invalid("event_type", "must not be empty"));
    }
    if et.chars().count() > MAX_EVENT_TYPE_LEN || et.chars().any(char::is_control) {
        return Err(Error::invalid(
            "event_type",
            "must be at most 200 characters without control characters",
        ));
    }
    Ok(())
}

/// Checks an idempotency key: 1–200 characters, no control characters. Errors name
/// `idempotency_key`.
pub fn check_idempotency_key(k: &str) -> Result<()> {
    if k.is_empty()
        || k.chars().count() > MAX_IDEMPOTENCY_KEY_LEN
        || k.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "idempotency_key",
            "must be 1 to 200 characters without control characters",
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
/// another channel is an [`Error::Conflict`].
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
    let event_types: Vec<&str> = items.iter().map(|d| d.event_type.trim()).collect();
    let payloads: Vec<&str> = items.iter().map(|d| d.payload.get()).collect();
    let keys: Vec<Option<&str>> = items.iter().map(|d| d.idempotency_key.as_deref()).collect();

    // ON CONFLICT on the partial unique index (tenant_id, idempotency_key): a repeated key
    // inserts nothing, even when two requests race; the earlier row is looked up below.
    let inserted: Vec<(Uuid,)> = sqlx::query_as(
        r#"
        INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, idempotency_key, status)
        SELECT id, $2, $3, event_type, payload, key, $7
        FROM unnest($1::uuid[], $4::text[], $5::text[], $6::text[]) AS t(id, event_type, payload, key)
        ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
        "#,
    )
    .bind(&ids)
    .bind(tenant_id)
    .bind(channel_id)
    .bind(&event_types)
    .bind(&payloads)
    .bind(&keys)
    .bind(if paused { Status::Paused } else { Status::Pending })
    .fetch_all(&mut *tx)
    .await?;
    let inserted: std::collections::HashSet<Uuid> = inserted.into_iter().map(|r| r.0).collect();

    let mut results = Vec::with_capacity(items.len());
    let mut jobs = Vec::with_capacity(inserted.len());
    for (i, id) in ids.iter().enumerate() {
        if inserted.contains(id) {
            results.push(Enqueued {
                id: *id,
                created: true,
                status: if paused {
                    Status::Paused
                } else {
                    Status::Pending
                },
            });
            let job = delivery_job(tier, channel_id, *id, max_attempts);
            jobs.push(job);
            continue;
        }
        let key = keys[i].expect("only keyed rows can conflict");
        let (existing, existing_channel, existing_type, existing_payload, existing_status): (
            Uuid,
            Uuid,
            String,
            String,
            Status,
        ) = sqlx::query_as(
            "SELECT id, channel_id, event_type, payload, status FROM deliveries
             WHERE tenant_id = $1 AND idempotency_key = $2",
        )
        .bind(tenant_id)
        .bind(key)
        .fetch_one(&mut *tx)
        .await?;
        if existing_channel != channel_id {
            return Err(Error::Conflict(format!(
                "idempotency key {key:?} was already used for a delivery to another channel"
            )));
        }
        // A retried request must be the same request: a reused key with another event would
        // silently drop that event.
        if existing_type != event_types[i] || existing_payload != payloads[i] {
            return Err(Error::Conflict(format!(
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
pub fn delivery_job(tier: Tier, channel_id: Uuid, delivery_id: Uuid, max_attempts: i32) -> NewJob {
    NewJob::new(
        tier.queue(),
        JOB_DELIVER,
        serde_json::json!({ "delivery_id": delivery_id }),
    )
    .group(channel_id)
    .unique_key(format!("delivery:{delivery_id}"))
    .max_attempts(max_attempts)
}

/// A delivery as the API shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Delivery {
    /// Delivery id (the `webhook-id` of a delivery enqueued to its channel directly).
    pub id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// The message this delivery fans out, if it was made by `POST /api/v1/messages`; its id is
    /// then the `webhook-id` (see [`crate::messages`]).
    pub message_id: Option<Uuid>,
    /// Event type.
    pub event_type: String,
    /// Event data: the JSON value that was sent, as it was sent (any JSON value; `null` once
    /// purged, see `payload_purged_at`).
    #[sqlx(try_from = "String")]
    #[schema(value_type = serde_json::Value)]
    pub payload: RawJson,
    /// `pending` | `delivering` | `paused` | `delivered` | `failed` (retry scheduled) | `dead` |
    /// `cancelled` (by its tenant, or its channel or tenant was deleted; the reason is in
    /// `last_error`). `delivered`, `dead` and `cancelled` are final.
    pub status: Status,
    /// HTTP attempts made.
    pub attempts: i32,
    /// Idempotency key, if one was given to the per-channel enqueue (a message's key is on the
    /// message).
    pub idempotency_key: Option<String>,
    /// Last error, if any.
    pub last_error: Option<String>,
    /// Accepted at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Delivered at.
    pub delivered_at: Option<DateTime<Utc>>,
    /// When the tenant purged the payload ([`crate::lifecycle::purge_payload`]), if it did.
    #[sqlx(default)]
    pub payload_purged_at: Option<DateTime<Utc>>,
}

/// One HTTP attempt as the API shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Attempt {
    /// Attempt number of the delivery, from 1.
    pub attempt: i32,
    /// When the request started.
    pub started_at: DateTime<Utc>,
    /// How long it took, ms.
    pub duration_ms: i32,
    /// `success` | `transient` | `permanent`.
    pub outcome: String,
    /// HTTP status, if a response arrived.
    pub status_code: Option<i32>,
    /// `connect` | `timeout` | `blocked` | `other`, when no status.
    pub error_kind: Option<String>,
    /// Error text.
    pub error: Option<String>,
    /// The first bytes of the response body.
    pub response_excerpt: Option<String>,
}

/// The `SELECT … FROM` that reads [`Delivery`] rows (alias `d`; append `WHERE …`): a delivery of
/// a message has no payload of its own and shows its message's (stored once for all channels), so
/// every query that reads a delivery's payload goes through this join.
pub const DELIVERY_SELECT: &str = "SELECT d.id, d.channel_id, d.message_id, d.event_type,
        coalesce(d.payload, m.payload) AS payload, d.status, d.attempts, d.idempotency_key,
        d.last_error, d.created_at, d.updated_at, d.delivered_at, d.payload_purged_at
    FROM deliveries d LEFT JOIN messages m ON m.id = d.message_id";

/// Loads `tenant_id`'s delivery `id` ([`Error::NotFound`] for another tenant's).
pub async fn get(exec: impl PgExecutor<'_>, tenant_id: Uuid, id: Uuid) -> Result<Delivery> {
    sqlx::query_as(&format!(
        "{DELIVERY_SELECT} WHERE d.id = $1 AND d.tenant_id = $2"
    ))
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("delivery"))
}

/// The attempts of a delivery, in order.
pub async fn attempts(exec: impl PgExecutor<'_>, delivery_id: Uuid) -> Result<Vec<Attempt>> {
    Ok(sqlx::query_as(
        "SELECT attempt, started_at, duration_ms, outcome, status_code, error_kind, error, response_excerpt
         FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt, id",
    )
    .bind(delivery_id)
    .fetch_all(exec)
    .await?)
}

/// Everything a worker needs to send one delivery.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Dispatch {
    /// Delivery id.
    pub id: Uuid,
    /// The `webhook-id` header: the message id for a delivery of a message (the same on every
    /// channel it fans out to), else the delivery id; the same on every attempt either way
    /// (Standard Webhooks: "the same when the same webhook is being resent").
    pub webhook_id: Uuid,
    /// Tenant.
    pub tenant_id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// Event type.
    pub event_type: String,
    /// Event data.
    pub payload: String,
    /// Accepted at.
    pub created_at: DateTime<Utc>,
    /// Attempts made before this one.
    pub attempts: i32,
    /// Endpoint.
    pub url: String,
    /// Channel secret (`whsec_…`); never log it.
    pub signing_secret: String,
    /// The channel's previous secret while its rotation's grace period lasts (database time),
    /// else `None`: the request then carries a second signature made with it. Never log it.
    pub previous_signing_secret: Option<String>,
    /// Whether the endpoint is in a rejection streak (401/403, `channels.rejected_since` set):
    /// a success then ends it ([`crate::alerts::rejection_cleared`]); otherwise a success costs
    /// no extra statement.
    pub rejected: bool,
    /// The database's time of this read, just before the request: the attempt's `started_at`
    /// (compared with `now()` and `circuit_changed_at` by the health check, so on the database
    /// clock, see [`crate::clock`]).
    pub started_at: DateTime<Utc>,
}

/// Marks the delivery `delivering` and loads what the worker needs, in one statement. `None` if
/// the delivery is gone or already final (delivered, dead or cancelled): the job then has
/// nothing to do. A delivery of a message reads the message's payload (stored once for all its
/// channels).
pub async fn begin_attempt(
    exec: impl PgExecutor<'_>,
    delivery_id: Uuid,
) -> Result<Option<Dispatch>> {
    Ok(sqlx::query_as(
        r#"
        UPDATE deliveries d SET status = 'delivering', rate_slot_at = NULL, updated_at = now()
        FROM channels c
        WHERE d.id = $1 AND c.id = d.channel_id AND d.status NOT IN ('delivered', 'dead', 'cancelled')
        RETURNING d.id, coalesce(d.message_id, d.id) AS webhook_id, d.tenant_id, d.channel_id,
                  d.event_type,
                  coalesce(d.payload, (SELECT m.payload FROM messages m WHERE m.id = d.message_id))
                      AS payload,
                  d.created_at, d.attempts, c.url, c.signing_secret,
                  CASE WHEN c.previous_secret_expires_at > now() THEN c.previous_signing_secret END
                      AS previous_signing_secret,
                  c.rejected_since IS NOT NULL AS rejected,
                  now() AS started_at
        "#,
    )
    .bind(delivery_id)
    .fetch_optional(exec)
    .await?)
}

/// One finished HTTP attempt to record.
#[derive(Debug, Clone)]
pub struct AttemptRecord<'a> {
    /// Delivery.
    pub delivery_id: Uuid,
    /// Its channel.
    pub channel_id: Uuid,
    /// Whether this attempt was the channel's half-open probe.
    pub probe: bool,
    /// When the request started.
    pub started_at: DateTime<Utc>,
    /// How long it took, ms.
    pub duration_ms: i32,
    /// `success` | `transient` | `permanent`.
    pub outcome: &'a str,
    /// HTTP status, if any.
    pub status_code: Option<i32>,
    /// `connect` | `timeout` | `blocked` | `other`, when no status.
    pub error_kind: Option<&'a str>,
    /// Error text, if failed.
    pub error: Option<&'a str>,
    /// The first bytes of the response body.
    pub response_excerpt: Option<&'a str>,
    /// Node that made it.
    pub node_id: &'a str,
    /// The delivery's status afterwards: `delivered`, `failed` (retry scheduled) or `dead`.
    pub new_status: &'a str,
}

/// Records an attempt row and moves the delivery to its new status, in the caller's
/// transaction. The attempt number is the delivery's `attempts + 1`.
///
/// Returns false when the delivery was cancelled while the attempt was in flight (by its tenant,
/// or its channel was deleted): the attempt is still logged, but the delivery stays `cancelled`
/// and the caller must let the result change nothing else (no circuit, no retry). Also false
/// when the delivery no longer exists. The delivery's row lock makes this exact: a cancel
/// either committed before (seen here) or waits for this transaction and then finds the
/// delivery final (a channel deletion skips a locked row instead; the worker's gate cancels it
/// later, see [`crate::lifecycle`]).
pub async fn record_attempt(tx: &mut PgConnection, r: &AttemptRecord<'_>) -> Result<bool> {
    let applied: Option<bool> = sqlx::query_scalar(
        r#"
        WITH d AS (
            UPDATE deliveries
            SET attempts = attempts + 1,
                status = CASE WHEN status = 'cancelled' THEN status ELSE $9 END,
                last_error = CASE WHEN status = 'cancelled' THEN last_error ELSE $7 END,
                updated_at = CASE WHEN status = 'cancelled' THEN updated_at ELSE now() END,
                delivered_at = CASE WHEN status <> 'cancelled' AND $9 = 'delivered' THEN now()
                                    ELSE delivered_at END
            WHERE id = $1
            RETURNING attempts, status
        ), logged AS (
            INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome,
                                           status_code, error_kind, error, response_excerpt, node_id,
                                           channel_id, probe)
            SELECT $1, d.attempts, $2, $3, $4, $5, $6, $7, $8, $10, $11, $12 FROM d
        )
        SELECT status <> 'cancelled' FROM d
        "#,
    )
    .bind(r.delivery_id)
    .bind(r.started_at)
    .bind(r.duration_ms)
    .bind(r.outcome)
    .bind(r.status_code)
    .bind(r.error_kind)
    .bind(r.error)
    .bind(r.response_excerpt)
    .bind(r.new_status)
    .bind(r.node_id)
    .bind(r.channel_id)
    .bind(r.probe)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(applied.unwrap_or(false))
}

/// Ends a delivery whose channel is gone (deleted while its job waited or ran): `cancelled`
/// with `reason` in `last_error`, unless it is already final. Returns whether it changed. For
/// the worker, which then ends the job itself.
pub async fn cancel_orphan(
    exec: impl PgExecutor<'_>,
    delivery_id: Uuid,
    reason: &str,
) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE deliveries SET status = 'cancelled', last_error = $2, updated_at = now()
         WHERE id = $1 AND status NOT IN ('delivered', 'dead', 'cancelled')",
    )
    .bind(delivery_id)
    .bind(reason)
    .execute(exec)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Which dead deliveries to replay.
#[derive(Debug, Clone, Copy)]
pub enum ReplaySelector {
    /// One delivery of a tenant.
    One {
        /// Owner (another tenant's delivery is not found).
        tenant_id: Uuid,
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

/// Re-enqueues dead deliveries (dead letters): each goes back to `pending` with a fresh job on
/// its tenant's tier queue (`max_attempts` attempts). Only `dead` deliveries move whose payload
/// was not purged and whose channel was not deleted, and the job's
/// unique key is the delivery, so a replay never creates a second live job for a delivery, and
/// replaying twice replays once. In the caller's transaction. Returns the ids replayed.
pub async fn replay(
    tx: &mut PgConnection,
    selector: ReplaySelector,
    max_attempts: i32,
) -> Result<Vec<Uuid>> {
    let (tenant_id, delivery_id, channel_id, from, to) = match selector {
        ReplaySelector::One {
            tenant_id,
            delivery_id,
        } => (tenant_id, Some(delivery_id), None, None, None),
        ReplaySelector::ChannelWindow {
            tenant_id,
            channel_id,
            from,
            to,
        } => (tenant_id, None, Some(channel_id), Some(from), Some(to)),
    };
    let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
        r#"
        WITH picked AS (
            SELECT id FROM deliveries
            WHERE tenant_id = $1 AND status = 'dead' AND payload_purged_at IS NULL
              AND channel_id IN (SELECT id FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL)
              AND ($2::uuid IS NULL OR id = $2)
              AND ($3::uuid IS NULL OR (channel_id = $3 AND updated_at BETWEEN $4 AND $5))
            ORDER BY updated_at
            LIMIT $6
            FOR UPDATE
        )
        UPDATE deliveries d SET status = 'pending', updated_at = now()
        FROM picked, tenants t
        WHERE d.id = picked.id AND t.id = d.tenant_id
        RETURNING d.id, d.channel_id, t.tier
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
    let jobs: Vec<NewJob> = rows
        .iter()
        .map(|(id, channel, tier)| {
            let tier: Tier = tier.parse().unwrap_or_default();
            delivery_job(tier, *channel, *id, max_attempts)
        })
        .collect();
    breakwater_queue::enqueue_many(&mut *tx, &jobs).await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// A delivery's status, the `deliveries.status` column (`text`, checked by the table's CHECK
/// constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
/// encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the API's
/// JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
/// ([`Status::is_final`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    sqlx::Type,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = DeliveryStatus)]
pub enum Status {
    /// Waiting for its next attempt.
    Pending,
    /// An attempt is in flight.
    Delivering,
    /// Held by an open or paused circuit.
    Paused,
    /// A retry is scheduled.
    Failed,
    /// Final: the endpoint accepted it.
    Delivered,
    /// Final: out of attempts, or a permanent failure.
    Dead,
    /// Final: cancelled by its tenant, or its channel or tenant was deleted.
    Cancelled,
}

impl Status {
    /// Every status, in the order the API lists them (`pending`, `delivering`, `paused`,
    /// `failed`, `delivered`, `dead`, `cancelled`).
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Delivering,
        Status::Paused,
        Status::Failed,
        Status::Delivered,
        Status::Dead,
        Status::Cancelled,
    ];

    /// The column value (and JSON string).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Delivering => "delivering",
            Status::Paused => "paused",
            Status::Failed => "failed",
            Status::Delivered => "delivered",
            Status::Dead => "dead",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses the column value; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Status::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The statuses a delivery never leaves on its own (only a replay of a `dead` one starts it
    /// again): `delivered`, `dead`, `cancelled`. Retention prunes only these
    /// ([`crate::retention`]); the migration's `deliveries_retention_idx` has the same list.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Delivered | Status::Dead | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A delivery as a list shows it: everything but the payload (up to 256 KiB each; read one
/// delivery for it).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct DeliverySummary {
    /// Delivery id (= `webhook-id`).
    pub id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// Event type.
    pub event_type: String,
    /// Its status.
    pub status: Status,
    /// HTTP attempts made.
    pub attempts: i32,
    /// Idempotency key, if one was given.
    pub idempotency_key: Option<String>,
    /// Last error, if any.
    pub last_error: Option<String>,
    /// Accepted at (the enqueue transaction's time: a batch shares it), microseconds kept.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Delivered at.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// The list key of a delivery: `(created_at, id)`.
pub type ListKey = (DateTime<Utc>, Uuid);

/// A page of `tenant_id`'s deliveries to `channel_id`, newest first by `(created_at, id)`,
/// optionally only those with `status`. Uses
/// `deliveries_channel_list_idx`: a seek to the cursor, then index order; with a status filter
/// the scan reads past the channel's rows of other statuses.
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    channel_id: Uuid,
    status: Option<Status>,
    page: &crate::page::Keyset<ListKey>,
) -> Result<Vec<DeliverySummary>> {
    let sql = format!(
        "SELECT id, channel_id, event_type, status, attempts, idempotency_key, last_error,
                created_at, updated_at, delivered_at
         FROM deliveries
         WHERE channel_id = $1 AND tenant_id = $2 AND ($3::text IS NULL OR status = $3){}{}
         LIMIT $4",
        page.seek("created_at, id", 5),
        page.order_by("created_at, id"),
    );
    let mut q = sqlx::query_as(&sql)
        .bind(channel_id)
        .bind(tenant_id)
        .bind(status)
        .bind(page.limit);
    if let Some((at, id)) = page.after {
        q = q.bind(at).bind(id);
    }
    Ok(q.fetch_all(exec).await?)
}
