//! Recovering a channel: resending its final deliveries accepted since a time, narrowed by
//! status and event type, in bounded steps ([`recover`]), or counting what would go
//! ([`preview`]).

use super::{replay::restart, ListKey, Status};
use crate::page::{Keyset, Order};
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Most deliveries one recover call resends; the answer's cursor continues after them.
pub const MAX_RECOVER: i64 = 1_000;
/// How many ids a dry run shows (the first ones that would go, oldest first).
pub(crate) const PREVIEW_IDS: i64 = 10;
/// Most entries in a recover's `event_types` list.
pub const MAX_RECOVER_EVENT_TYPES: usize = 100;

/// Which of a channel's deliveries a recover resends: those of `tenant_id`'s channel
/// `channel_id` accepted (`created_at`) in `[since, until)`, whose status is one of `statuses`
/// (final ones: `delivered`, `dead`, `cancelled`; a caller refuses others), of one of
/// `event_types` (`None`: any), whose payload was not purged; oldest first by
/// `(created_at, id)`, strictly after `after` when continuing.
#[derive(Debug, Clone)]
pub struct RecoverFilter<'a> {
    /// Owner.
    pub tenant_id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// Accepted at or after.
    pub since: DateTime<Utc>,
    /// Accepted before (`None`: no bound).
    pub until: Option<DateTime<Utc>>,
    /// Final statuses to resend (non-empty).
    pub statuses: &'a [Status],
    /// Event types to resend (exact match; `None`: any).
    pub event_types: Option<&'a [String]>,
    /// Continue strictly after this `(created_at, id)` (the previous call's last).
    pub after: Option<ListKey>,
}

impl RecoverFilter<'_> {
    /// `SELECT {what} FROM deliveries d WHERE …` for this filter, with its parameters bound
    /// in this order: `$1` channel, `$2` tenant, `$3` statuses, `$4` since, then `until`,
    /// `event_types` and the cursor only when set (so the statement of each combination is a
    /// plain index range on `deliveries_channel_list_idx`), then `tail` (e.g. `ORDER BY …`).
    fn sql(&self, what: &str, tail: &str, keyset: &Keyset<ListKey>) -> String {
        let mut sql = format!(
            "SELECT {what} FROM deliveries d
             WHERE d.channel_id = $1 AND d.tenant_id = $2 AND d.status = ANY($3)
               AND d.payload_purged_at IS NULL AND d.created_at >= $4"
        );
        let mut n = 5;
        if self.until.is_some() {
            sql.push_str(&format!(" AND d.created_at < ${n}"));
            n += 1;
        }
        if self.event_types.is_some() {
            sql.push_str(&format!(" AND d.event_type = ANY(${n})"));
            n += 1;
        }
        sql.push_str(&keyset.seek("d.created_at, d.id", n));
        sql.push_str(
            " AND EXISTS (SELECT 1 FROM channels c WHERE c.id = $1 AND c.deleted_at IS NULL) ",
        );
        sql.push_str(tail);
        sql
    }

    /// The query `sql` with this filter's parameters bound ([`RecoverFilter::sql`]'s order).
    fn bind<'q, O>(
        &'q self,
        q: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
        keyset: &Keyset<ListKey>,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        let statuses: Vec<&'static str> = self.statuses.iter().map(|s| s.as_str()).collect();
        let mut q = q
            .bind(self.channel_id)
            .bind(self.tenant_id)
            .bind(statuses)
            .bind(self.since);
        if let Some(until) = self.until {
            q = q.bind(until);
        }
        if let Some(types) = self.event_types {
            q = q.bind(types);
        }
        keyset.bind_cursor(q)
    }

    fn keyset(&self, limit: i64) -> Keyset<ListKey> {
        Keyset {
            after: self.after,
            limit,
            order: Order::OldestFirst,
        }
    }
}

/// What one recover call resent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The deliveries resent, oldest first.
    pub ids: Vec<Uuid>,
    /// The `(created_at, id)` of the last delivery this call looked at, when more may match
    /// after it (the call stopped at its bound): continue after it. `None`: the window is done.
    pub next: Option<ListKey>,
}

/// Resends up to `limit` (at most [`MAX_RECOVER`]) deliveries that `filter` selects, oldest
/// first ([`restart`]: same row and id, so the same `webhook-id`; `parked` as the caller
/// decided for the channel under its gate lock, [`crate::circuit::enqueue_parked`]). In the
/// caller's transaction.
///
/// Idempotent while the first run's deliveries are on their way: only final deliveries are
/// picked, and a resent one is `pending`/`paused`/`delivering`/`failed` until its new series
/// ends, so a second call skips it. The rows are locked (`FOR UPDATE`) until the caller
/// commits; a concurrent recover of the same window waits for them, then re-reads their status
/// and skips them. Cost: one range of `deliveries_channel_list_idx` from `since` (or the
/// cursor), filtered by status, event type and purge.
pub async fn recover(
    tx: &mut PgConnection,
    filter: &RecoverFilter<'_>,
    parked: bool,
    max_attempts: i32,
    limit: i64,
) -> Result<Recovered> {
    let limit = limit.clamp(1, MAX_RECOVER);
    let keyset = filter.keyset(limit + 1);
    let sql = filter.sql(
        "d.created_at, d.id",
        "ORDER BY d.created_at, d.id LIMIT $LIMIT FOR UPDATE OF d",
        &keyset,
    );
    // The LIMIT is a literal: every other parameter's number depends on the filter.
    let sql = sql.replace("$LIMIT", &(limit + 1).to_string());
    let mut rows: Vec<(DateTime<Utc>, Uuid)> = filter
        .bind(sqlx::query_as(&sql), &keyset)
        .fetch_all(&mut *tx)
        .await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next = if more { rows.last().copied() } else { None };
    let ids: Vec<Uuid> = rows.iter().map(|r| r.1).collect();
    let ids = restart(tx, &ids, parked, max_attempts).await?;
    Ok(Recovered { ids, next })
}

/// A dry run of [`recover`]: how many deliveries `filter` selects now (the whole window, not
/// only one call's bound) and the first [`PREVIEW_IDS`] of them, oldest first. Sends, locks and
/// changes nothing. One count over the channel's range of `deliveries_channel_list_idx`.
pub async fn preview(
    exec: &mut PgConnection,
    filter: &RecoverFilter<'_>,
) -> Result<(i64, Vec<Uuid>)> {
    let keyset = filter.keyset(PREVIEW_IDS);
    let count_sql = filter.sql("count(*)", "", &keyset);
    let (count,): (i64,) = filter
        .bind(sqlx::query_as(&count_sql), &keyset)
        .fetch_one(&mut *exec)
        .await?;
    let ids_sql = filter.sql(
        "d.id",
        &format!("ORDER BY d.created_at, d.id LIMIT {PREVIEW_IDS}"),
        &keyset,
    );
    let ids: Vec<(Uuid,)> = filter
        .bind(sqlx::query_as(&ids_sql), &keyset)
        .fetch_all(&mut *exec)
        .await?;
    Ok((count, ids.into_iter().map(|r| r.0).collect()))
}
