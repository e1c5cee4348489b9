//! The audit log: who did what to which channel, when (table `audit_log`).

use crate::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

/// The system actor: transitions the circuit breaker makes on its own.
pub(crate) const ACTOR_CIRCUIT_BREAKER: &str = "circuit_breaker";
/// The operator actor.
pub const ACTOR_OPERATOR: &str = "operator";

/// The actor string of a tenant API key: `tenant:<key id>`.
pub fn tenant_actor(key_id: Uuid) -> String {
    format!("tenant:{key_id}")
}

/// Whether `actor` is the tenant itself: one of its API keys ([`tenant_actor`]) or one of its
/// portal sessions ([`crate::portal::actor`], `portal:<session id>`), not the operator or the
/// system.
pub(crate) fn is_tenant_actor(actor: &str) -> bool {
    actor.starts_with("tenant:") || actor.starts_with("portal:")
}

/// One audit entry to write.
#[derive(Debug, Clone, Default)]
pub struct Entry<'a> {
    /// Tenant concerned.
    pub tenant_id: Option<Uuid>,
    /// Channel concerned.
    pub channel_id: Option<Uuid>,
    /// Who: [`ACTOR_CIRCUIT_BREAKER`], [`ACTOR_OPERATOR`], [`tenant_actor`] or a portal session
    /// ([`crate::portal::actor`]).
    pub actor: &'a str,
    /// What, e.g. `circuit.opened`, `channel.paused`.
    pub action: &'a str,
    /// Circuit state before.
    pub from_state: Option<&'a str>,
    /// Circuit state after.
    pub to_state: Option<&'a str>,
    /// Why, for a person.
    pub reason: Option<&'a str>,
    /// Anything else, as JSON.
    pub details: serde_json::Value,
}

impl<'a> Entry<'a> {
    /// An entry: `actor` did `action`, concerning no tenant or channel, with no states, no
    /// reason and no details (written as `{}`). Set the rest with struct update syntax or
    /// [`Entry::transition`].
    pub fn new(actor: &'a str, action: &'a str) -> Self {
        Entry {
            actor,
            action,
            ..Default::default()
        }
    }

    /// An entry about `tenant_id`'s channel `channel_id`: `actor` did `action`, with no states,
    /// no reason and no details (written as `{}`). Set the rest with struct update syntax:
    /// `Entry { reason: Some(why), ..Entry::channel(tenant_id, channel_id, actor, action) }`.
    pub fn channel(tenant_id: Uuid, channel_id: Uuid, actor: &'a str, action: &'a str) -> Self {
        Entry {
            tenant_id: Some(tenant_id),
            channel_id: Some(channel_id),
            ..Entry::new(actor, action)
        }
    }

    /// This entry as a circuit transition (of a channel or a host): from state `from` to state
    /// `to` (column values, e.g. `half_open`), for `reason`, with `details`.
    pub fn transition(
        self,
        from: &'a str,
        to: &'a str,
        reason: &'a str,
        details: serde_json::Value,
    ) -> Self {
        Entry {
            from_state: Some(from),
            to_state: Some(to),
            reason: Some(reason),
            details,
            ..self
        }
    }
}

/// A circuit transition (of a channel or a host) that its caller won and audited, with the
/// audit row's states (`closed`, `open`, `half_open`, `paused`; a trial and a probe takeover go
/// from `half_open` to `half_open`). Core returns these; the caller counts each in the metric
/// `breakwater.circuit.transitions` only after its transaction commits, so a transition that
/// was rolled back (a watcher that lost its claim, a result whose job was rescued) is never
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transitioned {
    /// State before.
    pub from: &'static str,
    /// State after.
    pub to: &'static str,
}

/// A stored audit entry.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
#[schema(as = AuditRecord)]
pub struct Record {
    /// Sequence number.
    pub id: i64,
    /// When (database time).
    pub at: DateTime<Utc>,
    /// Tenant concerned.
    pub tenant_id: Option<Uuid>,
    /// Channel concerned.
    pub channel_id: Option<Uuid>,
    /// Who.
    pub actor: String,
    /// What.
    pub action: String,
    /// Circuit state before.
    pub from_state: Option<String>,
    /// Circuit state after.
    pub to_state: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Details: for a change of settings, `{"old": {field: value}, "new": {field: value}}` with
    /// only the fields that changed (see [`changes`]); never a secret.
    pub details: serde_json::Value,
    /// The `x-request-id` of the API request that made the change; `None` for the system's own
    /// changes (see [`begin_request`]).
    pub request_id: Option<String>,
}

/// Writes one entry (inside the caller's transaction, so it exists exactly when the change does).
///
/// An entry with both a `from_state` and a `to_state` is a circuit transition: every transition
/// is audited exactly once, by the caller that won it (see [`crate::circuit`]). It is not
/// counted here: the function that made it returns it ([`Transitioned`]), and the worker or the
/// API counts it in `breakwater.circuit.transitions` once its transaction has committed.
pub async fn record(exec: impl PgExecutor<'_>, e: &Entry<'_>) -> Result<()> {
    sqlx::query(
        "INSERT INTO audit_log (tenant_id, channel_id, actor, action, from_state, to_state, reason, details)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(e.tenant_id)
    .bind(e.channel_id)
    .bind(e.actor)
    .bind(e.action)
    .bind(e.from_state)
    .bind(e.to_state)
    .bind(e.reason)
    .bind(if e.details.is_null() { serde_json::json!({}) } else { e.details.clone() })
    .execute(exec)
    .await?;
    Ok(())
}

/// A page of audit entries by id, newest first (ids follow commit order closely; `at` is each
/// transaction's start), filtered by tenant (always, for a tenant) and optionally channel; see
/// [`crate::page`].
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Option<Uuid>,
    channel_id: Option<Uuid>,
    page: &crate::page::Keyset<i64>,
) -> Result<Vec<Record>> {
    let sql = format!(
        "SELECT id, at, tenant_id, channel_id, actor, action, from_state, to_state, reason, details, request_id
         FROM audit_log
         WHERE ($1::uuid IS NULL OR tenant_id = $1)
           AND ($2::uuid IS NULL OR channel_id = $2){}{}
         LIMIT $3",
        page.seek("id", 4),
        page.order_by("id"),
    );
    let q = sqlx::query_as(&sql)
        .bind(tenant_id)
        .bind(channel_id)
        .bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// Tags the current transaction with the API request's id: every audit row written in it gets
/// `request_id` (the column's default reads this transaction-local setting). Call it first in
/// each state-changing transaction of the API.
pub async fn begin_request(exec: impl PgExecutor<'_>, request_id: &str) -> Result<()> {
    sqlx::query("SELECT set_config('breakwater.request_id', $1, true)")
        .bind(request_id)
        .execute(exec)
        .await?;
    Ok(())
}

/// The fields of two JSON objects (`old`, `new`, e.g. a channel's settings before and after a
/// `PATCH`) that differ, as `{"old": {field: value}, "new": {field: value}}`, or `None` when
/// nothing differs. A field missing from one side counts as `null`.
pub fn changes(old: &serde_json::Value, new: &serde_json::Value) -> Option<serde_json::Value> {
    let empty = serde_json::Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let null = serde_json::Value::Null;
    let mut was = serde_json::Map::new();
    let mut now = serde_json::Map::new();
    for key in o.keys().chain(n.keys()) {
        let (a, b) = (o.get(key).unwrap_or(&null), n.get(key).unwrap_or(&null));
        if a != b && !was.contains_key(key) {
            was.insert(key.clone(), a.clone());
            now.insert(key.clone(), b.clone());
        }
    }
    (!was.is_empty()).then(|| serde_json::json!({ "old": was, "new": now }))
}

/// How a URL appears in the audit log: its origin (`https://host:port`) and a fingerprint (the
/// first 16 hex digits of the SHA-256 of the whole URL), never its path or query, which often
/// carry a receiver's token. Two different URLs to one host still show as a change.
pub(crate) fn url_summary(url: &str) -> serde_json::Value {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(url.as_bytes());
    serde_json::json!({ "origin": url_origin(url), "sha256": hex::encode(&digest[..8]) })
}

/// `url`'s origin (`scheme://host[:port]`, RFC 6454), never its path or query; empty for a text
/// that is no URL.
pub(crate) fn url_origin(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_keeps_only_what_differs() {
        let old = json!({"a": 1, "b": "x", "c": null});
        let new = json!({"a": 1, "b": "y", "c": 5});
        assert_eq!(
            changes(&old, &new),
            Some(json!({"old": {"b": "x", "c": null}, "new": {"b": "y", "c": 5}}))
        );
        assert_eq!(changes(&old, &old), None);
    }

    #[test]
    fn url_summary_hides_path_and_query() {
        let s = url_summary("https://hooks.example.com:8443/T000/B000/secret?token=abc");
        assert_eq!(s["origin"], "https://hooks.example.com:8443");
        assert!(!s.to_string().contains("secret") && !s.to_string().contains("abc"));
        assert_ne!(
            s["sha256"],
            url_summary("https://hooks.example.com:8443/other")["sha256"]
        );
    }
}
