//! API keys (table `api_keys`): generated with high entropy, shown once, stored as SHA-256
//! digests. A tenant may hold several (at most its `active_keys` quota unrevoked,
//! [`crate::quotas`]), each with an optional name; it or the operator creates, lists and revokes them. A revoked key is refused
//! (401) from its next request on. Authentication itself is [`crate::tenants::authenticate`].
//!
//! A digest (not a slow password hash) is the right tool for 192-bit random keys: it cannot be
//! brute-forced, and it lets a request find its key with one indexed lookup.

use crate::{audit, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

pub(crate) use crate::api_key::{display_prefix, generate_api_key, hash_key};
pub use crate::api_key::{keys_match, TENANT_KEY_PREFIX};

/// A key as it is listed: never the key itself or its digest.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct ApiKey {
    /// Key id (the audit actor of its requests is `tenant:<id>`).
    pub id: Uuid,
    /// Its owner.
    pub tenant_id: Uuid,
    /// Optional label (1–200 characters), e.g. `"ci"`.
    pub name: Option<String>,
    /// The key's first 7 characters (`bw_` + 4), to tell keys apart; not a secret.
    pub prefix: String,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last request made with it (at most [`LAST_USED_RESOLUTION_S`] old); `None` = never used.
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked (listed only on request).
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A created key with the key itself, shown this once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreatedKey {
    /// The key's listing.
    #[serde(flatten)]
    pub key: ApiKey,
    /// The key (`bw_…`, `bw_<cell>_…` in a deployment with cells). Only its SHA-256 digest is
    /// stored; it cannot be shown again.
    pub api_key: String,
}

const KEY_COLUMNS: &str = "id, tenant_id, name, prefix, created_at, last_used_at, revoked_at";

fn check_key_name(name: Option<&str>) -> Result<Option<String>> {
    name.map(crate::names::display_name).transpose()
}

/// Creates a key for `tenant_id` named `name`, naming `cell` (this node's, `None` without cells:
/// [`generate_api_key`]), with a `key.created` audit row by `actor`
/// (the key's id and name, never the key), in the caller's transaction. Errors: the tenant is
/// missing or deleted ([`Error::NotFound`]), the name is invalid ([`Error::Invalid`]), or the
/// tenant already holds as many unrevoked keys as its `active_keys` quota allows (its override,
/// else `defaults.active_keys`; [`Error::QuotaExceeded`]).
///
/// The tenant's row is locked first (`FOR NO KEY UPDATE`), then the keys are counted in a
/// second statement: under READ COMMITTED that statement's snapshot is taken after the lock is
/// won, so it sees every key a creation that held the lock before committed, and two creations
/// cannot both pass the limit (one statement would count from the snapshot it took before
/// waiting). A tenant deletion either waits for this key (and revokes it) or comes first (and
/// this is a 404).
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: Option<&str>,
    defaults: &crate::quotas::QuotaDefaults,
    cell: Option<&crate::api_key::Cell>,
    actor: &str,
) -> Result<CreatedKey> {
    let name = check_key_name(name)?;
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Exclusive).await?;
    let live: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL",
    )
    .bind(tenant_id)
    .fetch_one(&mut *conn)
    .await?;
    crate::quotas::check_new_key(&mut *conn, tenant_id, live, defaults).await?;
    let api_key = generate_api_key(cell);
    let key: ApiKey = sqlx::query_as(&format!(
        "INSERT INTO api_keys (id, tenant_id, key_hash, prefix, name) VALUES ($1, $2, $3, $4, $5)
         RETURNING {KEY_COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(tenant_id)
    .bind(hash_key(&api_key))
    .bind(display_prefix(&api_key))
    .bind(&name)
    .fetch_one(&mut *conn)
    .await?;
    audit_key(&mut *conn, tenant_id, actor, "key.created", &key).await?;
    Ok(CreatedKey { key, api_key })
}

/// `tenant_id`'s keys in creation order (ids are UUIDv7), at most `limit` after key id `after`;
/// revoked ones only with `include_revoked`.
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    include_revoked: bool,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<ApiKey>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys
         WHERE tenant_id = $1 AND ($2 OR revoked_at IS NULL) AND ($3::uuid IS NULL OR id > $3)
         ORDER BY id LIMIT $4"
    ))
    .bind(tenant_id)
    .bind(include_revoked)
    .bind(after)
    .bind(limit)
    .fetch_all(exec)
    .await?)
}

/// Revokes `tenant_id`'s key `key_id` with a `key.revoked` audit row by `actor`, in the caller's
/// transaction. The key is refused from its next request on (also when it is the key making
/// this call). Another tenant's key, a missing one and one already revoked are all
/// [`Error::NotFound`]. One conditional UPDATE: of two racing revocations one wins and audits.
pub async fn revoke(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    key_id: Uuid,
    actor: &str,
) -> Result<ApiKey> {
    let key: ApiKey = sqlx::query_as(&format!(
        "UPDATE api_keys SET revoked_at = now()
         WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
         RETURNING {KEY_COLUMNS}"
    ))
    .bind(key_id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("api key"))?;
    audit_key(&mut *conn, tenant_id, actor, "key.revoked", &key).await?;
    Ok(key)
}

/// The audit row of a change to `tenant_id`'s key `key`: `actor` did `action` (`key.created`,
/// `key.revoked`), with the key's id and name (never the key).
async fn audit_key(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    actor: &str,
    action: &str,
    key: &ApiKey,
) -> Result<()> {
    audit::record(
        conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            details: serde_json::json!({ "key_id": key.id, "name": key.name }),
            ..audit::Entry::new(actor, action)
        },
    )
    .await
}

/// Revokes every unrevoked key of `tenant_id` (tenant deletion), in the caller's transaction.
/// Returns how many.
pub(crate) async fn revoke_all(exec: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1 AND revoked_at IS NULL",
    )
    .bind(tenant_id)
    .execute(exec)
    .await?
    .rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_trimmed_and_bounded() {
        assert_eq!(check_key_name(None).unwrap(), None);
        assert_eq!(check_key_name(Some(" ci ")).unwrap().as_deref(), Some("ci"));
        for bad in ["", "  ", "a\nb", &"x".repeat(201)] {
            assert!(check_key_name(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
