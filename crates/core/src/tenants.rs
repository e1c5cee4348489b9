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
