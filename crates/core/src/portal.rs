//! Tenant portal sessions (table `portal_sessions`): a short-lived credential for one
//! tenant with a scope ([`Scope`]), opened by the operator or by the tenant with an API key, for
//! the tenant's own users on the portal page (`/portal`).
//!
//! The token is 256 random bits (`bwp_` + 43 URL-safe base64 characters), shown once (in the
//! portal URL's fragment) and stored as its SHA-256 digest, as API keys are ([`crate::api_key`]):
//! a digest is enough for a random token of that size and lets a request find its session with
//! one indexed lookup. A session lasts `ttl_s` seconds ([`DEFAULT_TTL_S`], at most
//! [`MAX_TTL_S`]); a revoked or expired one is refused (401) from its next request on. Opening
//! and revoking are audited (`portal_session.created`, `portal_session.revoked`) with the
//! session's id and scope, never the token; what a session does is audited as
//! [`actor`] (`portal:<session id>`).

use crate::api_key::{hash_key, Cell};
use crate::{audit, Error, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Prefix of portal session tokens (tells them apart from API keys, `bw_`).
pub const TOKEN_PREFIX: &str = "bwp_";

/// A session's lifetime when the request names none, seconds (1 h).
pub(crate) const DEFAULT_TTL_S: i64 = 3_600;

/// The longest lifetime a session may be given, seconds (24 h): a portal link is for a person's
/// visit, not a standing credential (that is an API key).
pub(crate) const MAX_TTL_S: i64 = 86_400;

/// What a portal session may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Scope {
    /// Read and change the tenant's channels and deliveries (create, edit, delete, pause,
    /// resume, replay, rotate a signing secret, send a test event).
    Manage,
    /// Read only: every write is refused (403).
    Read,
}

column_text!(Scope, field "scope", what "scope", {
    Manage => "manage",
    Read => "read",
});

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session as it is listed: never its token or its digest.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct PortalSession {
    /// Session id (the audit actor of what it does is `portal:<id>`).
    pub id: Uuid,
    /// The one tenant it acts for.
    pub tenant_id: Uuid,
    /// `manage` or `read`.
    pub scope: Scope,
    /// Who opened it: `operator` or `tenant:<api key id>`.
    pub created_by: String,
    /// Opened at.
    pub created_at: DateTime<Utc>,
    /// Refused (401) from this instant on.
    pub expires_at: DateTime<Utc>,
    /// When it was revoked; null while it is not.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An opened session with its token, shown this once.
#[derive(Debug, Clone)]
pub struct OpenedSession {
    /// The session.
    pub session: PortalSession,
    /// The token (`bwp_…`); only its digest is stored.
    pub token: String,
}

/// An authenticated portal session: whose, and what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionAuth {
    /// The session's id.
    pub session_id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// Its scope.
    pub scope: Scope,
}

/// The audit actor of what session `session_id` does: `portal:<session id>`.
pub fn actor(session_id: Uuid) -> String {
    format!("portal:{session_id}")
}

/// Random characters of a token (32 random bytes in URL-safe base64).
pub const TOKEN_RANDOM_CHARS: usize = 43;

/// A fresh token: [`TOKEN_PREFIX`] + 43 URL-safe base64 characters (32 random bytes), or with a
/// cell `bwp_<cell>_` + the same 43, so the router in front of the cells sends the portal's
/// requests to the tenant's cell as it does its API keys' ([`crate::api_key::credential_cell`]).
pub(crate) fn generate_token(cell: Option<&Cell>) -> String {
    crate::api_key::generate_credential(TOKEN_PREFIX, cell, 32)
}

/// The lifetime a request asks for, checked: `None` is [`DEFAULT_TTL_S`]; 1 to [`MAX_TTL_S`]
/// seconds, else [`Error::Invalid`] on `ttl_s`.
pub fn check_ttl(ttl_s: Option<i64>) -> Result<i64> {
    match ttl_s {
        None => Ok(DEFAULT_TTL_S),
        Some(t) if (1..=MAX_TTL_S).contains(&t) => Ok(t),
        Some(_) => Err(Error::invalid(
            "ttl_s",
            format!("must be 1 to {MAX_TTL_S} seconds (24 h); default {DEFAULT_TTL_S}"),
        )),
    }
}

const COLUMNS: &str = "id, tenant_id, scope, created_by, created_at, expires_at, revoked_at";

/// Opens a session for `tenant_id` with `scope`, lasting `ttl_s` seconds (checked by the caller
/// with [`check_ttl`]), its token naming `cell` (this node's, [`generate_token`]), with a
/// `portal_session.created` audit row by `actor` (the session's id, scope and expiry, never the
/// token), in the caller's transaction. A missing or deleted tenant
/// is [`Error::NotFound`]; the tenant's row is held `FOR SHARE` so a deletion either waits for
/// the session (and revokes it) or comes first.
pub async fn open(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    scope: Scope,
    ttl_s: i64,
    cell: Option<&Cell>,
    actor: &str,
) -> Result<OpenedSession> {
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Share).await?;
    let token = generate_token(cell);
    let session: PortalSession = sqlx::query_as(&format!(
        "INSERT INTO portal_sessions (id, tenant_id, token_hash, scope, created_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, now() + $6::float8 * interval '1 second')
         RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(tenant_id)
    .bind(hash_key(&token))
    .bind(scope)
    .bind(actor)
    .bind(ttl_s as f64)
    .fetch_one(&mut *conn)
    .await?;
    audit_session(&mut *conn, actor, "portal_session.created", &session).await?;
    Ok(OpenedSession { session, token })
}

/// The live session `token` belongs to: not revoked, not expired, of a tenant that is not
/// deleted. `None` for anything else (the caller answers 401).
pub async fn authenticate(exec: impl PgExecutor<'_>, token: &str) -> Result<Option<SessionAuth>> {
    if !token.starts_with(TOKEN_PREFIX) {
        return Ok(None);
    }
    let row: Option<(Uuid, Uuid, Scope)> = sqlx::query_as(
        "SELECT s.id, s.tenant_id, s.scope FROM portal_sessions s
         JOIN tenants t ON t.id = s.tenant_id AND t.deleted_at IS NULL
         WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()",
    )
    .bind(hash_key(token))
    .fetch_optional(exec)
    .await?;
    Ok(row.map(|(session_id, tenant_id, scope)| SessionAuth {
        session_id,
        tenant_id,
        scope,
    }))
}

/// Session `session_id` of `tenant_id` ([`Error::NotFound`] for another tenant's or a missing
/// one).
pub async fn get(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    session_id: Uuid,
) -> Result<PortalSession> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM portal_sessions WHERE id = $1 AND tenant_id = $2"
    ))
    .bind(session_id)
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("portal session"))
}

/// Revokes `tenant_id`'s session `session_id` with a `portal_session.revoked` audit row by
/// `actor`, in the caller's transaction; it is refused from its next request on. Another
/// tenant's session, a missing one and one already revoked are all [`Error::NotFound`]; an
/// expired one can still be revoked (it changes nothing but the record). One conditional UPDATE:
/// of two racing revocations one wins and audits.
pub async fn revoke(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    session_id: Uuid,
    actor: &str,
) -> Result<PortalSession> {
    let session: PortalSession = sqlx::query_as(&format!(
        "UPDATE portal_sessions SET revoked_at = now()
         WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(session_id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("portal session"))?;
    audit_session(&mut *conn, actor, "portal_session.revoked", &session).await?;
    Ok(session)
}

/// Revokes every live session of `tenant_id` (tenant deletion), in the caller's transaction.
/// Returns how many.
pub(crate) async fn revoke_all(exec: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE portal_sessions SET revoked_at = now()
         WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > now()",
    )
    .bind(tenant_id)
    .execute(exec)
    .await?
    .rows_affected())
}

/// The audit row of a change to session `s`: `actor` did `action` (`portal_session.created`,
/// `portal_session.revoked`), with the session's id, scope and expiry (never its token).
async fn audit_session(
    conn: &mut PgConnection,
    actor: &str,
    action: &str,
    s: &PortalSession,
) -> Result<()> {
    audit::record(
        conn,
        &audit::Entry {
            tenant_id: Some(s.tenant_id),
            details: serde_json::json!({
                "session_id": s.id,
                "scope": s.scope,
                "expires_at": s.expires_at,
            }),
            ..audit::Entry::new(actor, action)
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_256_random_bits_behind_their_prefix() {
        let a = generate_token(None);
        let b = generate_token(None);
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + TOKEN_RANDOM_CHARS);
        // Never mistaken for an API key (`bw_`).
        assert!(!a.starts_with(crate::api_key::TENANT_KEY_PREFIX));
        let cell = crate::api_key::credential_cell;
        assert_eq!(cell(&a, TOKEN_PREFIX, TOKEN_RANDOM_CHARS), None);
        let c = generate_token(Some(&Cell::new("b2").unwrap()));
        assert!(c.starts_with("bwp_b2_"), "{c}");
        assert_eq!(c.len(), "bwp_b2_".len() + TOKEN_RANDOM_CHARS);
        assert_eq!(cell(&c, TOKEN_PREFIX, TOKEN_RANDOM_CHARS), Some("b2"));
    }

    #[test]
    fn ttl_defaults_to_an_hour_and_stops_at_a_day() {
        assert_eq!(check_ttl(None).unwrap(), 3_600);
        assert_eq!(check_ttl(Some(1)).unwrap(), 1);
        assert_eq!(check_ttl(Some(86_400)).unwrap(), 86_400);
        for bad in [0, -1, 86_401, i64::MAX] {
            let e = check_ttl(Some(bad)).unwrap_err().to_string();
            assert!(e.starts_with("ttl_s:"), "{e}");
        }
    }

    #[test]
    fn the_actor_names_the_session() {
        let id = Uuid::nil();
        assert_eq!(actor(id), format!("portal:{id}"));
    }
}
