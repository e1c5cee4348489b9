//! Tenants and their API keys (tables `tenants`, `api_keys`).

use crate::{keys, signing, Error, Result, Tier};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

impl TryFrom<String> for Tier {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

/// A tenant, as the API shows it (the alert secret is never included).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
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
    /// Creation time.
    pub created_at: DateTime<Utc>,
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
}

/// A created tenant with its secrets, shown once.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedTenant {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: Tenant,
    /// The tenant's API key (`bw_…`). Only its SHA-256 digest is stored.
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

/// Creates a tenant and its first API key in one transaction.
pub async fn create(conn: &mut PgConnection, new: &NewTenant) -> Result<CreatedTenant> {
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::invalid("name", "must be 1 to 200 characters"));
    }
    let alert_secret = signing::generate_secret();
    let api_key = keys::generate_api_key();
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let tenant: Tenant = sqlx::query_as(
        "INSERT INTO tenants (id, name, tier, alert_url, alert_secret) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, name, tier, alert_url, created_at",
    )
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
        .bind(keys::hash_key(&api_key))
        .bind(keys::display_prefix(&api_key))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(CreatedTenant {
        tenant,
        api_key,
        alert_secret,
    })
}

/// Finds the tenant of a presented API key (by its digest; revoked keys do not match).
pub async fn authenticate(exec: impl PgExecutor<'_>, api_key: &str) -> Result<Option<TenantKey>> {
    let row: Option<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT tenant_id, id FROM api_keys
         WHERE key_hash = $1 AND revoked_at IS NULL AND tenant_id IS NOT NULL",
    )
    .bind(keys::hash_key(api_key))
    .fetch_optional(exec)
    .await?;
    Ok(row.map(|(tenant_id, key_id)| TenantKey { tenant_id, key_id }))
}

/// Loads a tenant.
pub async fn get(exec: impl PgExecutor<'_>, id: Uuid) -> Result<Tenant> {
    sqlx::query_as("SELECT id, name, tier, alert_url, created_at FROM tenants WHERE id = $1")
        .bind(id)
        .fetch_optional(exec)
        .await?
        .ok_or(Error::NotFound("tenant"))
}

/// Where a tenant's alerts go and the secret that signs them (`None` if it has no alert URL).
pub async fn alert_target(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
) -> Result<Option<(String, String)>> {
    let row: Option<(Option<String>, String)> =
        sqlx::query_as("SELECT alert_url, alert_secret FROM tenants WHERE id = $1")
            .bind(tenant_id)
            .fetch_optional(exec)
            .await?;
    Ok(row.and_then(|(url, secret)| url.map(|u| (u, secret))))
}

/// Changes to a tenant (operator `PATCH`): `None` leaves a field alone; `alert_url: Some(None)`
/// removes it. The URL is already checked.
#[derive(Debug, Clone, Default)]
pub struct TenantPatch {
    /// New alert URL, or removal.
    pub alert_url: Option<Option<String>>,
    /// New display name.
    pub name: Option<String>,
}

/// Applies `patch` (not the tier: see [`change_tier`]).
pub async fn update(exec: impl PgExecutor<'_>, id: Uuid, patch: &TenantPatch) -> Result<Tenant> {
    if let Some(name) = &patch.name {
        if name.trim().is_empty() || name.chars().count() > 200 {
            return Err(Error::invalid("name", "must be 1 to 200 characters"));
        }
    }
    sqlx::query_as(
        "UPDATE tenants SET
            alert_url = CASE WHEN $2 THEN $3 ELSE alert_url END,
            name = coalesce($4, name),
            updated_at = now()
         WHERE id = $1
         RETURNING id, name, tier, alert_url, created_at",
    )
    .bind(id)
    .bind(patch.alert_url.is_some())
    .bind(patch.alert_url.clone().flatten())
    .bind(patch.name.as_deref().map(str::trim))
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("tenant"))
}

/// Replaces the tenant's alert signing secret; returns the new one (shown once).
pub async fn rotate_alert_secret(exec: impl PgExecutor<'_>, id: Uuid) -> Result<String> {
    let secret = signing::generate_secret();
    let n = sqlx::query("UPDATE tenants SET alert_secret = $2, updated_at = now() WHERE id = $1")
        .bind(id)
        .bind(&secret)
        .execute(exec)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(Error::NotFound("tenant"));
    }
    Ok(secret)
}

/// Moves a tenant to `tier`: updates the row and moves every waiting (available or scheduled)
/// delivery job of the tenant's channels to the new tier's queue, in one transaction. Jobs
/// already executing finish where they are. A job moves (UPDATE of its queue column), it is
/// never copied, so no delivery ever has two live jobs. Returns the number of jobs moved.
pub async fn change_tier(conn: &mut PgConnection, id: Uuid, tier: Tier) -> Result<(Tenant, u64)> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let tenant: Tenant = sqlx::query_as(
        "UPDATE tenants SET tier = $2, updated_at = now() WHERE id = $1
         RETURNING id, name, tier, alert_url, created_at",
    )
    .bind(id)
    .bind(tier.as_str())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("tenant"))?;
    let queues: Vec<String> = Tier::ALL.iter().map(|t| t.queue().to_string()).collect();
    let moved = sqlx::query(
        "UPDATE jobs SET queue = $2
         WHERE group_id IN (SELECT id FROM channels WHERE tenant_id = $1)
           AND state IN ('available', 'scheduled') AND kind = $3 AND queue = ANY($4) AND queue <> $2",
    )
    .bind(id)
    .bind(tier.queue())
    .bind(crate::JOB_DELIVER)
    .bind(&queues)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    breakwater_queue::notify_queues(&mut *tx, &[tier.queue().to_string()]).await?;
    tx.commit().await?;
    Ok((tenant, moved))
}
