//! Loading and listing channels: a tenant's own, and every tenant's for the operator.

use super::{Channel, COLUMNS};
use crate::tenants::Tenant;
use crate::{Error, Result};
use serde::Serialize;
use sqlx::FromRow;
use sqlx::PgExecutor;
use std::sync::LazyLock;
use uuid::Uuid;

/// A channel's backlog as its reader sees it now: counts of its deliveries' waiting jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// Waiting for a send (due now or later; parked or not): the channel's whole backlog.
    pub waiting: i64,
    /// Of those, held by a parked circuit: the channel's own (open, half-open, paused) or its
    /// host's ([`breakwater_queue::parked_count`]).
    pub parked: i64,
    /// Of those not parked, waiting out the channel's `Retry-After` hold (`retry_after_until`
    /// later than the database clock's now): none is sent before the hold ends. 0 without one.
    /// Counted apart so that a view under a 1-h hold does not say `parked: 0` and nothing else
    /// while hundreds of deliveries wait.
    pub held: i64,
}

/// Reads `channel`'s [`Backlog`]: its waiting and parked jobs in one statement
/// ([`breakwater_queue::backlog`]) and, only if it has a `Retry-After` hold on record, whether
/// the hold is still on.
pub async fn backlog(pool: &sqlx::PgPool, channel: &Channel) -> Result<Backlog> {
    let jobs = breakwater_queue::backlog(pool, channel.id).await?;
    let hold_on = match channel.retry_after_until {
        Some(until) => {
            sqlx::query_scalar::<_, bool>("SELECT $1 > now()")
                .bind(until)
                .fetch_one(pool)
                .await?
        }
        None => false,
    };
    Ok(Backlog {
        waiting: jobs.waiting,
        parked: jobs.parked,
        held: if hold_on {
            jobs.waiting - jobs.parked
        } else {
            0
        },
    })
}

/// Loads `tenant_id`'s channel `id`. Another tenant's channel is [`Error::NotFound`], exactly
/// like a missing one.
pub async fn get(exec: impl PgExecutor<'_>, tenant_id: Uuid, id: Uuid) -> Result<Channel> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL"
    ))
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("channel"))
}

/// The statement of the enqueue gate: the one rule of every enqueue that creates deliveries on
/// the channels it reads (one channel, [`get_locked_for_enqueue`]; a message's fan-out,
/// [`crate::messages::send`]). `columns` is the select list over `channels c` (it must hold
/// `c.circuit_state`), `join` any tables joined to it (` JOIN tenants t ON t.id = c.tenant_id`,
/// or empty), `filter` the rest of the `WHERE` clause.
///
/// - What locks: each channel row the statement returns, `FOR SHARE` until the caller's
///   transaction ends; `OF c`, so a joined row (the tenant's: its tier, catalog and quotas) is
///   read, not locked. A circuit transition updates the row, so it waits for the enqueue's
///   insert, and an enqueue that waited reads the transition's committed state: a release
///   never misses a delivery created parked, and none is created `pending` behind a circuit
///   that has just opened. (The same lock as [`crate::circuit::enqueue_parked`], which a
///   replay or a recovery takes on its one channel.)
/// - In which order: by channel id, so that enqueues and anything else that locks several of
///   a tenant's channels in id order queue behind each other instead of deadlocking.
/// - Which channels: live ones (`c.deleted_at IS NULL`; Postgres checks it again on a row it
///   waited for, so a deletion that commits meanwhile drops the channel from the result).
/// - What state means parked: the `c.circuit_state` read under the lock, by
///   [`crate::circuit::State::parks_new_deliveries`] (open or paused: new deliveries start
///   `paused`, their jobs held by the channel's parked job group). Both paths decide with it.
///
/// The statement is shared, not the query: the single enqueue reads its tenant in the same
/// statement (one round trip for channel and tenant), while the fan-out has read its tenant
/// before inserting the message and selects its channels by subscription; one query for both
/// would cost the single enqueue a second statement.
pub(crate) fn enqueue_gate_sql(columns: &str, join: &str, filter: &str) -> String {
    format!(
        "SELECT {columns} FROM channels c{join}
         WHERE c.deleted_at IS NULL AND {filter}
         ORDER BY c.id
         FOR SHARE OF c"
    )
}

/// [`get`] with its tenant, through the enqueue gate ([`enqueue_gate_sql`]): the channel's row
/// locked `FOR SHARE` until the caller's transaction ends, the one read of an enqueue, one
/// statement. The channel it returns is read under the lock, so
/// `circuit_state.parks_new_deliveries()` is the enqueue's park-or-not decision. The tenant
/// (its tier, catalog and delivery quotas decide the rest of the enqueue) is read in the same
/// statement, unlocked, as [`crate::tenants::get`] would. [`Error::NotFound`] for a missing,
/// deleted (also while this waited for the lock) or another tenant's channel, or a deleted
/// tenant.
pub async fn get_locked_for_enqueue(
    tx: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<(Channel, Tenant)> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        let channel: Vec<String> = COLUMNS
            .split(',')
            .map(|c| format!("c.{}", c.trim()))
            .collect();
        enqueue_gate_sql(
            &format!(
                "{}, {}",
                channel.join(", "),
                crate::tenants::prefixed_columns()
            ),
            " JOIN tenants t ON t.id = c.tenant_id",
            "c.id = $1 AND c.tenant_id = $2 AND t.deleted_at IS NULL",
        )
    });
    let row = sqlx::query(&SQL)
        .bind(id)
        .bind(tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(Error::NotFound("channel"))?;
    Ok((Channel::from_row(&row)?, Tenant::from_prefixed_row(&row)?))
}

/// Checks that `tenant_id` owns channel `id`, deleted or not (a deleted channel's audit log
/// stays readable). Another tenant's channel is [`Error::NotFound`], exactly like a missing one.
pub async fn check_owned(exec: impl PgExecutor<'_>, tenant_id: Uuid, id: Uuid) -> Result<()> {
    sqlx::query_scalar::<_, i32>("SELECT 1 FROM channels WHERE id = $1 AND tenant_id = $2")
        .bind(id)
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?
        .map(|_| ())
        .ok_or(Error::NotFound("channel"))
}

/// Lists a page of `tenant_id`'s channels by id (ids are time-ordered UUIDv7, so oldest first
/// is creation order); see [`crate::page`].
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    page: &crate::page::Keyset<Uuid>,
) -> Result<Vec<Channel>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL{}{} LIMIT $2",
        page.seek("id", 3),
        page.order_by("id"),
    );
    let q = sqlx::query_as(&sql).bind(tenant_id).bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// A channel as the operator lists it: with its tenant, tier and parked count.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct OperatorChannel {
    /// The channel.
    #[sqlx(flatten)]
    #[serde(flatten)]
    pub channel: Channel,
    /// Tenant name.
    pub tenant_name: String,
    /// Tenant tier.
    #[schema(value_type = crate::Tier)]
    pub tier: String,
    /// Waiting deliveries held by a parked circuit: the channel's own (open, half-open, paused)
    /// or its host's; the same count as the channel view's `circuit.parked`.
    pub parked: i64,
}

/// A page of every tenant's channels (operator view) by id, optionally filtered by circuit
/// state and tenant; see [`crate::page`].
pub async fn list_all(
    exec: impl PgExecutor<'_>,
    state: Option<crate::circuit::State>,
    tenant_id: Option<Uuid>,
    page: &crate::page::Keyset<Uuid>,
) -> Result<Vec<OperatorChannel>> {
    let cols: String = COLUMNS
        .split(", ")
        .map(|c| format!("c.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {cols}, t.name AS tenant_name, t.tier,
                {parked} AS parked
         FROM channels c JOIN tenants t ON t.id = c.tenant_id
         WHERE c.deleted_at IS NULL AND ($1::text IS NULL OR c.circuit_state = $1)
           AND ($2::uuid IS NULL OR c.tenant_id = $2){}{}
         LIMIT $3",
        page.seek("c.id", 4),
        page.order_by("c.id"),
        parked = breakwater_queue::parked_count_sql("c.id"),
    );
    let q = sqlx::query_as(&sql)
        .bind(state)
        .bind(tenant_id)
        .bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// Loads any channel by id (operator), or [`Error::NotFound`].
pub async fn get_any(exec: impl PgExecutor<'_>, id: Uuid) -> Result<Channel> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("channel"))
}
