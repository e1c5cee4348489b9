//! Tenants and their API keys (tables `tenants`, `api_keys`).

use crate::api_key as token;
use crate::{audit, signing, Error, Result, Tier};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use std::time::Duration;
use uuid::Uuid;

impl TryFrom<String> for Tier {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

/// How [`hold_live`] holds a tenant's row until the transaction ends. The tenant row is where
/// the creation of a key or a channel meets the tenant's deletion (an `UPDATE` of that row,
/// [`crate::lifecycle::delete_tenant`]): the deletion waits for the creation, then sees what it
/// made; or it comes first, and the creation finds the tenant deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// `FOR SHARE`: creations run side by side; only the deletion (or a change of the tenant)
    /// waits. For a channel creation.
    Share,
    /// `FOR NO KEY UPDATE`: one holder at a time, so what it counts after the lock (a statement
    /// that starts after it, under READ COMMITTED) stays true until it commits. For a key
    /// creation, which checks the cap of active keys.
    Exclusive,
}

/// Holds live tenant `tenant_id`'s row as `hold` says, in the caller's transaction;
/// [`Error::NotFound`] for a missing or deleted tenant.
pub(crate) async fn hold_live(conn: &mut PgConnection, tenant_id: Uuid, hold: Hold) -> Result<()> {
    let sql = match hold {
        Hold::Share => "SELECT 1 FROM tenants WHERE id = $1 AND deleted_at IS NULL FOR SHARE",
        Hold::Exclusive => {
            "SELECT 1 FROM tenants WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE"
        }
    };
    sqlx::query(sql)
        .bind(tenant_id)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::NotFound("tenant"))?;
    Ok(())
}

/// A tenant, as the API shows it (the alert secret is never included).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Tenant {
    /// Tenant id.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Tier: picks the queue of the tenant's deliveries.
    #[sqlx(try_from = "String")]
    pub tier: Tier,
    /// Where circuit alerts for this tenant's channels are sent, if anywhere.
    pub alert_url: Option<String>,
    /// Whether the tenant's own pause and resume of a channel send alerts (default false: they
    /// are audited but page nobody). Operator actions and the breaker's own transitions always
    /// alert (under the flapping policy).
    pub alert_on_manual: bool,
    /// Whether an enqueue or a message whose event type is not in the tenant's catalog
    /// ([`crate::event_types`]) is refused (422 on `event_type`); default false: accepted.
    pub reject_unknown_event_types: bool,
    /// The default retry policy of the tenant's channels ([`crate::retry_policy`]): each field
    /// a channel leaves unset comes from here, else from the service configuration; null = none.
    #[sqlx(json(nullable))]
    pub retry_policy: Option<crate::retry_policy::RetryPolicy>,
    /// The tenant's catalog version: 0 while it never had a catalogued event type, bumped by
    /// every change of its catalog (internal: keys the compiled-schema cache,
    /// [`crate::event_types::Cache`]).
    #[serde(skip)]
    #[schema(ignore)]
    pub event_catalog_version: i64,
    /// The tenant's delivery-quota overrides (internal: read with the tenant so that an enqueue
    /// of a tenant without a delivery quota spends no statement on quotas,
    /// [`crate::quotas::take_deliveries`]; the API shows quotas through [`crate::quotas`]).
    #[sqlx(flatten)]
    #[serde(skip)]
    #[schema(ignore)]
    pub delivery_quota: DeliveryOverrides,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A tenant's delivery-quota overrides (`tenants.quota_deliveries_per_second`, `_per_day`;
/// `None` = the cluster default; [`crate::quotas`] owns the rule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct DeliveryOverrides {
    /// `tenants.quota_deliveries_per_second`.
    pub quota_deliveries_per_second: Option<i32>,
    /// `tenants.quota_deliveries_per_day`.
    pub quota_deliveries_per_day: Option<i64>,
}

/// [`COLUMNS`] of table alias `t`, each named `t_<column>`: for a statement that reads a tenant
/// beside another table's row whose column names would clash (`id`, `name`, `created_at`), read
/// back with [`Tenant::from_prefixed_row`].
pub(crate) fn prefixed_columns() -> String {
    COLUMNS
        .split(',')
        .map(|c| format!("t.{0} AS t_{0}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Tenant {
    /// The tenant of a row read with [`prefixed_columns`] (`t_id`, `t_name`, …).
    pub(crate) fn from_prefixed_row(row: &sqlx::postgres::PgRow) -> sqlx::Result<Self> {
        use sqlx::Row;
        let tier: String = row.try_get("t_tier")?;
        let retry_policy: Option<sqlx::types::Json<crate::retry_policy::RetryPolicy>> =
            row.try_get("t_retry_policy")?;
        Ok(Self {
            id: row.try_get("t_id")?,
            name: row.try_get("t_name")?,
            tier: Tier::try_from(tier).map_err(|e| sqlx::Error::ColumnDecode {
                index: "t_tier".into(),
                source: Box::new(e),
            })?,
            alert_url: row.try_get("t_alert_url")?,
            alert_on_manual: row.try_get("t_alert_on_manual")?,
            reject_unknown_event_types: row.try_get("t_reject_unknown_event_types")?,
            retry_policy: retry_policy.map(|j| j.0),
            event_catalog_version: row.try_get("t_event_catalog_version")?,
            delivery_quota: DeliveryOverrides {
                quota_deliveries_per_second: row.try_get("t_quota_deliveries_per_second")?,
                quota_deliveries_per_day: row.try_get("t_quota_deliveries_per_day")?,
            },
            created_at: row.try_get("t_created_at")?,
        })
    }
}

/// The columns every read of a [`Tenant`] selects, in its field order.
pub(crate) const COLUMNS: &str = "id, name, tier, alert_url, alert_on_manual, \
    reject_unknown_event_types, retry_policy, event_catalog_version, \
    quota_deliveries_per_second, quota_deliveries_per_day, created_at";

impl Tenant {
    /// The tenant as an operator's reads show it: `alert_url` cut to its origin, since its path
    /// and query may carry the receiver's token (the rule of [`crate::audit::url_summary`]).
    pub fn for_operator(mut self) -> Self {
        self.alert_url = self.alert_url.as_deref().map(crate::audit::url_origin);
        self
    }
}

/// Input of [`create`].
#[derive(Debug, Clone)]
pub struct NewTenant {
    /// Display name, 1–200 characters.
    pub name: String,
    /// Tier (default `default`).
    pub tier: Tier,
    /// Alert webhook URL, already checked by the caller.
    pub alert_url: Option<String>,
    /// The cell of the node that creates it, which its first key names
    /// ([`token::generate_api_key`]); `None` in a deployment without cells.
    pub cell: Option<token::Cell>,
}

/// A created tenant with its secrets, shown once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreatedTenant {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: Tenant,
    /// The tenant's API key (`bw_…`, `bw_<cell>_…` in a deployment with cells). Only its
    /// SHA-256 digest is stored.
    pub api_key: String,
    /// The secret (`whsec_…`) that signs the tenant's alert webhooks.
    pub alert_secret: String,
}

/// An authenticated tenant key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantKey {
    /// The tenant the key belongs to.
    pub tenant_id: Uuid,
    /// The key's id (the audit actor is `tenant:<key id>`).
    pub key_id: Uuid,
}

/// Creates a tenant and its first API key, with a `tenant.created` audit row by `actor`, in one
/// transaction (a savepoint when the caller's connection is in one).
pub async fn create(
    conn: &mut PgConnection,
    new: &NewTenant,
    actor: &str,
) -> Result<CreatedTenant> {
    let name = crate::names::display_name(&new.name)?;
    let alert_secret = signing::generate_secret();
    let api_key = token::generate_api_key(new.cell.as_ref());
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let tenant: Tenant = sqlx::query_as(&format!(
        "INSERT INTO tenants (id, name, tier, alert_url, alert_secret) VALUES ($1, $2, $3, $4, $5)
         RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(name)
    .bind(new.tier.as_str())
    .bind(&new.alert_url)
    .bind(&alert_secret)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("INSERT INTO api_keys (id, tenant_id, key_hash, prefix) VALUES ($1, $2, $3, $4)")
        .bind(Uuid::now_v7())
        .bind(tenant.id)
        .bind(token::hash_key(&api_key))
        .bind(token::display_prefix(&api_key))
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(tenant.id),
            actor,
            action: "tenant.created",
            details: serde_json::json!({ "new": audited_settings(&tenant) }),
            ..Default::default()
        },
    )
    .await?;
    tx.commit().await?;
    Ok(CreatedTenant {
        tenant,
        api_key,
        alert_secret,
    })
}

/// Finds the tenant of a presented API key (by its digest; revoked keys do not match) and
/// records that the key was used: `last_used_at` is written at most once a minute per key
/// ([`token::LAST_USED_RESOLUTION_S`]), so a busy key costs no write per request.
///
/// One statement. The write is conditional on the row's own `last_used_at`, so of many requests
/// racing at the minute's turn one writes and the others, re-checking the row after its lock,
/// write nothing.
pub async fn authenticate(exec: impl PgExecutor<'_>, api_key: &str) -> Result<Option<TenantKey>> {
    Ok(authenticate_taking(exec, api_key, None)
        .await?
        .map(|(key, _)| key))
}

/// [`authenticate`], and in the same statement, when `ingress` is given, one request taken from
/// the key's tenant's ingress limit ([`crate::ingress::take_ingress`], the same upsert): the
/// second value is `None` when it was taken (or no limit is given), `Some(wait)` when the
/// request is refused and may be retried after `wait` (at least 1 ms). One round trip per API
/// request instead of two. Nothing is taken for a key that does not match.
pub async fn authenticate_taking(
    exec: impl PgExecutor<'_>,
    api_key: &str,
    ingress: Option<crate::ingress::Ingress>,
) -> Result<Option<(TenantKey, Option<Duration>)>> {
    // $3 and $4: T and τ in µs, NULL without a limit (then the upsert has no row to take).
    let (t, tau) = ingress.map(|i| i.params()).unzip();
    let sql = format!(
        "WITH k AS (
             SELECT tenant_id, id FROM api_keys
             WHERE key_hash = $1 AND revoked_at IS NULL AND tenant_id IS NOT NULL
         ), touched AS (
             UPDATE api_keys a SET last_used_at = now()
             FROM k
             WHERE a.id = k.id AND a.revoked_at IS NULL
               AND (a.last_used_at IS NULL OR a.last_used_at < now() - $2::float8 * interval '1 second')
         ), taken AS (
             {upsert}
         )
         SELECT k.tenant_id, k.id,
                $3::float8 IS NULL OR EXISTS (SELECT 1 FROM taken),
                (SELECT {wait} FROM tenant_ingress WHERE tenant_id = k.tenant_id)
         FROM k",
        upsert = crate::ingress::ingress_upsert(
            "SELECT tenant_id FROM k WHERE $3::float8 IS NOT NULL",
            "$3",
            "$4"
        ),
        wait = crate::ingress::ingress_wait_us("$3", "$4"),
    );
    let row: Option<(Uuid, Uuid, bool, Option<f64>)> = sqlx::query_as(&sql)
        .bind(token::hash_key(api_key))
        .bind(token::LAST_USED_RESOLUTION_S as f64)
        .bind(t)
        .bind(tau)
        .fetch_optional(exec)
        .await?;
    Ok(row.map(|(tenant_id, key_id, taken, wait_us)| {
        let refused = (!taken).then(|| crate::ingress::ingress_wait(wait_us));
        (TenantKey { tenant_id, key_id }, refused)
    }))
}

/// Loads a tenant ([`Error::NotFound`] if there is none, or it was deleted).
pub async fn get(exec: impl PgExecutor<'_>, id: Uuid) -> Result<Tenant> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tenants WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("tenant"))
}

/// A page of every tenant by id (time-ordered UUIDv7: oldest first is creation order); see
/// [`crate::page`]. Operator only: the caller checks the operator key.
pub async fn list(
    exec: impl PgExecutor<'_>,
    page: &crate::page::Keyset<Uuid>,
) -> Result<Vec<Tenant>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM tenants WHERE deleted_at IS NULL{}{} LIMIT $1",
        page.seek("id", 2),
        page.order_by("id"),
    );
    let q = sqlx::query_as(&sql).bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// Where a tenant's alerts go and the secret that signs them (`None` if it has no alert URL, or
/// was deleted: a deleted tenant hears nothing more).
pub async fn alert_target(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
) -> Result<Option<(String, String)>> {
    let row: Option<(Option<String>, String)> = sqlx::query_as(
        "SELECT alert_url, alert_secret FROM tenants WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?;
    Ok(row.and_then(|(url, secret)| url.map(|u| (u, secret))))
}

/// Changes to a tenant (`PATCH`): `None` leaves a field alone; `alert_url: Some(None)`
/// removes it. The URL is already checked. Only the operator may change `name` and `tier`; the
/// tenant itself may change `alert_url` and `alert_on_manual`.
#[derive(Debug, Clone, Default)]
pub struct TenantPatch {
    /// New alert URL, or removal.
    pub alert_url: Option<Option<String>>,
    /// New display name, 1–200 characters.
    pub name: Option<String>,
    /// New tier: the tenant's waiting delivery jobs move to its queue.
    pub tier: Option<Tier>,
    /// New `alert_on_manual` (the tenant may change it itself).
    pub alert_on_manual: Option<bool>,
    /// New `reject_unknown_event_types` (the tenant may change it itself).
    pub reject_unknown_event_types: Option<bool>,
    /// New default retry policy of the tenant's channels, or removal (`Some(None)`); the tenant
    /// may change it itself. Checked here ([`crate::retry_policy::RetryPolicy::checked`]).
    pub retry_policy: Option<Option<crate::retry_policy::RetryPolicy>>,
}

/// A tenant's settings as the audit log shows them: the alert URL as
/// [`audit::url_summary`], never a secret.
fn audited_settings(t: &Tenant) -> serde_json::Value {
    serde_json::json!({
        "name": t.name,
        "tier": t.tier,
        "alert_url": t.alert_url.as_deref().map(audit::url_summary),
        "alert_on_manual": t.alert_on_manual,
        "reject_unknown_event_types": t.reject_unknown_event_types,
        "retry_policy": t.retry_policy,
    })
}

/// Applies `patch` to tenant `id` ([`Error::NotFound`] if there is none) in one transaction (a
/// savepoint when the caller's connection is in one): name, alert URL and `alert_on_manual`,
/// then a tier change,
/// which moves the tenant's waiting jobs (`change_tier`). Writes one `tenant.updated` audit
/// row by `actor` with the old and new values of what changed (none when nothing did), and
/// `jobs_moved` when the tier changed. Returns the tenant and the jobs moved (`None` without a
/// tier change).
pub async fn update(
    conn: &mut PgConnection,
    id: Uuid,
    patch: &TenantPatch,
    actor: &str,
) -> Result<(Tenant, Option<u64>)> {
    let name = patch
        .name
        .as_deref()
        .map(crate::names::display_name)
        .transpose()?;
    let retry_policy = match &patch.retry_policy {
        Some(Some(p)) => p.clone().checked()?,
        _ => None,
    };
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let old: Tenant = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tenants
         WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("tenant"))?;
    let mut tenant: Tenant = sqlx::query_as(&format!(
        "UPDATE tenants SET
            alert_url = CASE WHEN $2 THEN $3 ELSE alert_url END,
            name = coalesce($4, name),
            alert_on_manual = coalesce($5, alert_on_manual),
            reject_unknown_event_types = coalesce($6, reject_unknown_event_types),
            retry_policy = CASE WHEN $7 THEN $8 ELSE retry_policy END,
            updated_at = now()
         WHERE id = $1
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(patch.alert_url.is_some())
    .bind(patch.alert_url.clone().flatten())
    .bind(name)
    .bind(patch.alert_on_manual)
    .bind(patch.reject_unknown_event_types)
    .bind(patch.retry_policy.is_some())
    .bind(retry_policy.map(sqlx::types::Json))
    .fetch_one(&mut *tx)
    .await?;
    let mut jobs_moved = None;
    if let Some(tier) = patch.tier.filter(|t| *t != old.tier) {
        let (t, moved) = change_tier(&mut tx, id, tier).await?;
        tenant = t;
        jobs_moved = Some(moved);
    }
    if let Some(mut details) = audit::changes(&audited_settings(&old), &audited_settings(&tenant)) {
        if let Some(moved) = jobs_moved {
            details["jobs_moved"] = moved.into();
        }
        audit::record(
            &mut *tx,
            &audit::Entry {
                tenant_id: Some(id),
                actor,
                action: "tenant.updated",
                details,
                ..Default::default()
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok((tenant, jobs_moved))
}

/// Replaces the tenant's alert signing secret and writes a `tenant.alert_secret_rotated` audit
/// row by `actor` (without the secret); returns the new secret (shown once). Run it in the
/// caller's transaction so the two happen together.
pub async fn rotate_alert_secret(conn: &mut PgConnection, id: Uuid, actor: &str) -> Result<String> {
    let secret = signing::generate_secret();
    let n = sqlx::query(
        "UPDATE tenants SET alert_secret = $2, updated_at = now() WHERE id = $1 AND deleted_at IS NULL",
    )
        .bind(id)
        .bind(&secret)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(Error::NotFound("tenant"));
    }
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(id),
            actor,
            action: "tenant.alert_secret_rotated",
            ..Default::default()
        },
    )
    .await?;
    Ok(secret)
}

/// Moves a tenant to `tier`: updates the row and moves every waiting (available or scheduled)
/// delivery job of the tenant's channels to the new tier's queue, in one transaction. Jobs
/// already executing finish where they are. A job moves (UPDATE of its queue column), it is
/// never copied, so no delivery ever has two live jobs. Returns the number of jobs moved.
async fn change_tier(conn: &mut PgConnection, id: Uuid, tier: Tier) -> Result<(Tenant, u64)> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let tenant: Tenant = sqlx::query_as(&format!(
        "UPDATE tenants SET tier = $2, updated_at = now() WHERE id = $1
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(tier.as_str())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("tenant"))?;
    let queues: Vec<String> = Tier::ALL.iter().map(|t| t.queue().to_string()).collect();
    let channel_ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM channels WHERE tenant_id = $1")
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
    let moved = breakwater_queue::move_waiting(
        &mut *tx,
        &channel_ids,
        crate::JOB_DELIVER,
        &queues,
        tier.queue(),
    )
    .await?;
    breakwater_queue::notify_queues(&mut *tx, &[tier.queue().to_string()]).await?;
    tx.commit().await?;
    Ok((tenant, moved))
}
