//! Deliveries and their attempts as the API shows them: one delivery, its attempts, and a
//! page of a channel's deliveries; and deliveries counted by status.

use super::{RawJson, Status};
use crate::outcome::Class;
use crate::{Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;
use std::collections::HashMap;
use uuid::Uuid;

/// A delivery as the API shows it when it is read alone: its list row ([`DeliverySummary`]) and
/// what only a single read shows, the message it fans out and the payload.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Delivery {
    /// The fields a page of deliveries shows too.
    #[serde(flatten)]
    #[sqlx(flatten)]
    pub summary: DeliverySummary,
    /// The message this delivery fans out, if it was made by `POST /api/v1/messages`; its id is
    /// then the `webhook-id` (see [`crate::messages`]).
    pub message_id: Option<Uuid>,
    /// Event data: the JSON value that was sent, as it was sent (any JSON value; `null` once
    /// purged, see `payload_purged_at`).
    #[sqlx(try_from = "String")]
    #[schema(value_type = serde_json::Value)]
    pub payload: RawJson,
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
    pub outcome: Class,
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
pub(crate) const DELIVERY_SELECT: &str = "SELECT d.id, d.channel_id, d.message_id, d.event_type,
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
    Ok(sqlx::query_as!(
        Attempt,
        r#"SELECT attempt, started_at, duration_ms, outcome AS "outcome: Class", status_code,
                  error_kind, error, response_excerpt
         FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt, id"#,
        delivery_id,
    )
    .fetch_all(exec)
    .await?)
}

/// A delivery as a list shows it: everything but the message and the payload (up to 256 KiB
/// each; `GET /api/v1/deliveries/{id}` shows them).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct DeliverySummary {
    /// Delivery id (the `webhook-id` of a delivery enqueued to its channel directly; a message's
    /// deliveries carry the message's id as `webhook-id`).
    pub id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// Event type.
    pub event_type: String,
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
    /// Accepted at (the enqueue transaction's time: a batch shares it), microseconds kept.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Delivered at.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// The list key of a delivery: `(created_at, id)`.
pub type ListKey = (DateTime<Utc>, Uuid);

/// What a channel's delivery list keeps ([`list`]): each set field narrows it.
#[derive(Debug, Clone, Default)]
pub struct ListFilter<'a> {
    /// Only deliveries with this status.
    pub status: Option<Status>,
    /// Only deliveries of this event type (exact match).
    pub event_type: Option<&'a str>,
    /// Only deliveries accepted at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only deliveries accepted before this instant.
    pub until: Option<DateTime<Utc>>,
}

/// A page of `tenant_id`'s deliveries to `channel_id`, newest first by `(created_at, id)`,
/// narrowed by `filter`. Uses `deliveries_channel_list_idx`: a seek to the cursor (or to
/// `until`), then index order, stopping at `since`; a status or event type filter reads past
/// the channel's rows that do not match.
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    channel_id: Uuid,
    filter: &ListFilter<'_>,
    page: &crate::page::Keyset<ListKey>,
) -> Result<Vec<DeliverySummary>> {
    let sql = format!(
        "SELECT id, channel_id, event_type, status, attempts, idempotency_key, last_error,
                created_at, updated_at, delivered_at
         FROM deliveries
         WHERE channel_id = $1 AND tenant_id = $2 AND ($3::text IS NULL OR status = $3)
           AND ($5::text IS NULL OR event_type = $5)
           AND ($6::timestamptz IS NULL OR created_at >= $6)
           AND ($7::timestamptz IS NULL OR created_at < $7){}{}
         LIMIT $4",
        page.seek("created_at, id", 8),
        page.order_by("created_at, id"),
    );
    let q = sqlx::query_as(&sql)
        .bind(channel_id)
        .bind(tenant_id)
        .bind(filter.status)
        .bind(page.limit)
        .bind(filter.event_type)
        .bind(filter.since)
        .bind(filter.until);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// Deliveries counted by [`Status`]: 0 for a status none has. Read by
/// [`channel_status_counts`] and [`status_counts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts(HashMap<Status, i64>);

impl StatusCounts {
    /// How many deliveries have `status`.
    pub fn get(&self, status: Status) -> i64 {
        self.0.get(&status).copied().unwrap_or(0)
    }

    /// How many have any of `statuses` (each status counted once however often it is listed).
    pub fn sum(&self, statuses: &[Status]) -> i64 {
        Status::ALL
            .iter()
            .filter(|s| statuses.contains(s))
            .map(|&s| self.get(s))
            .sum()
    }

    /// How many there are, whatever their status.
    pub fn total(&self) -> i64 {
        self.0.values().sum()
    }
}

/// Channel `channel_id`'s deliveries by status (any tenant's channel: the caller checks who
/// may see it). One aggregate over the channel's rows (an index range on `channel_id`); its
/// cost grows with the channel's deliveries, finished ones included (until retention prunes
/// them).
pub async fn channel_status_counts(
    exec: impl PgExecutor<'_>,
    channel_id: Uuid,
) -> Result<StatusCounts> {
    let rows = sqlx::query!(
        r#"SELECT status AS "status: Status", count(*) AS "n!"
         FROM deliveries WHERE channel_id = $1 GROUP BY status"#,
        channel_id,
    )
    .fetch_all(exec)
    .await?;
    Ok(StatusCounts(
        rows.into_iter().map(|r| (r.status, r.n)).collect(),
    ))
}

/// Every delivery of every tenant, by status: one scan of the whole `deliveries` table, so for
/// a small database (the demo's), not for a production one's regular use.
pub async fn status_counts(exec: impl PgExecutor<'_>) -> Result<StatusCounts> {
    let rows = sqlx::query!(
        r#"SELECT status AS "status: Status", count(*) AS "n!" FROM deliveries GROUP BY status"#,
    )
    .fetch_all(exec)
    .await?;
    Ok(StatusCounts(
        rows.into_iter().map(|r| (r.status, r.n)).collect(),
    ))
}

/// What a tenant-wide delivery search keeps ([`search`]): each set field narrows it.
#[derive(Debug, Clone, Default)]
pub struct SearchFilter<'a> {
    /// Only deliveries with this status.
    pub status: Option<Status>,
    /// Only deliveries of this event type (exact match).
    pub event_type: Option<&'a str>,
    /// Only deliveries to this channel.
    pub channel_id: Option<Uuid>,
    /// Only deliveries of this message (`POST /api/v1/messages`).
    pub message_id: Option<Uuid>,
    /// Only deliveries accepted at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only deliveries accepted before this instant.
    pub until: Option<DateTime<Utc>>,
}

/// A page of `tenant_id`'s deliveries on every channel, newest first by `(created_at, id)`,
/// narrowed by `filter`. The statement holds only the conditions that are set, so each
/// combination is planned for itself (migration `20261206200000_delivery_search` and earlier):
/// `message_id` → `deliveries_message_idx` (a message has one delivery per channel, sorted
/// after); `channel_id` → `deliveries_channel_list_idx`; `status` dead or cancelled →
/// the partial `deliveries_tenant_failed_idx`; otherwise `deliveries_tenant_list_idx`, a seek to
/// the cursor (or `until`), stopping at `since`. Another `status` and an `event_type` have no
/// index of their own (each would cost every delivery's writes): they filter that walk, which
/// reads more entries the rarer the match. Measured at 1 M rows in docs/benchmarks-history.md
/// ("Delivery search at 1 M rows", "The indexes kept").
pub async fn search(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    filter: &SearchFilter<'_>,
    page: &crate::page::Keyset<ListKey>,
) -> Result<Vec<DeliverySummary>> {
    let mut sql = String::from(
        "SELECT id, channel_id, event_type, status, attempts, idempotency_key, last_error,
                created_at, updated_at, delivered_at
         FROM deliveries
         WHERE tenant_id = $1",
    );
    let mut n = 2;
    let mut cond = |sql: &mut String, c: &str, set: bool| {
        if set {
            sql.push_str(&format!(" AND {c} ${n}"));
            n += 1;
        }
    };
    cond(&mut sql, "status =", filter.status.is_some());
    cond(&mut sql, "event_type =", filter.event_type.is_some());
    cond(&mut sql, "channel_id =", filter.channel_id.is_some());
    cond(&mut sql, "message_id =", filter.message_id.is_some());
    cond(&mut sql, "created_at >=", filter.since.is_some());
    cond(&mut sql, "created_at <", filter.until.is_some());
    sql.push_str(&page.seek("created_at, id", n));
    sql.push_str(&page.order_by("created_at, id"));
    sql.push_str(&format!(" LIMIT {}", page.limit.max(0)));
    let mut q = sqlx::query_as(&sql).bind(tenant_id);
    if let Some(s) = filter.status {
        q = q.bind(s);
    }
    if let Some(t) = filter.event_type {
        q = q.bind(t);
    }
    if let Some(c) = filter.channel_id {
        q = q.bind(c);
    }
    if let Some(m) = filter.message_id {
        q = q.bind(m);
    }
    if let Some(t) = filter.since {
        q = q.bind(t);
    }
    if let Some(t) = filter.until {
        q = q.bind(t);
    }
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}
