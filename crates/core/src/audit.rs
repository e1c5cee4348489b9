//! The audit log: who did what to which channel, when (table `audit_log`).

use crate::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

/// The system actor: transitions the circuit breaker makes on its own.
pub const ACTOR_CIRCUIT_BREAKER: &str = "circuit_breaker";
/// The operator actor.
pub const ACTOR_OPERATOR: &str = "operator";

/// The actor string of a tenant API key: `tenant:<key id>`.
pub fn tenant_actor(key_id: Uuid) -> String {
    format!("tenant:{key_id}")
}

/// One audit entry to write.
#[derive(Debug, Clone, Default)]
pub struct Entry<'a> {
    /// Tenant concerned.
    pub tenant_id: Option<Uuid>,
    /// Channel concerned.
    pub channel_id: Option<Uuid>,
    /// Who: [`ACTOR_CIRCUIT_BREAKER`], [`ACTOR_OPERATOR`] or [`tenant_actor`].
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

/// A stored audit entry.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
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
    /// Details.
    pub details: serde_json::Value,
}

/// Writes one entry (inside the caller's transaction, so it exists exactly when the change does).
///
/// An entry with both a `from_state` and a `to_state` is a circuit transition: every transition
/// is audited exactly once, by the caller that won it (see [`crate::circuit`]), so this is where
/// `breakwater.circuit.transitions` is counted. It is counted when the row is written; the rare
/// transaction that is rolled back afterwards (a probe watcher that lost its claim) is counted
/// anyway.
pub async fn record(exec: impl PgExecutor<'_>, e: &Entry<'_>) -> Result<()> {
    if let (Some(from), Some(to)) = (e.from_state, e.to_state) {
        breakwater_telemetry::circuit_transition(from, to);
    }
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

/// Lists entries for a channel, oldest first.
pub async fn for_channel(exec: impl PgExecutor<'_>, channel_id: Uuid) -> Result<Vec<Record>> {
    Ok(sqlx::query_as(
        "SELECT id, at, tenant_id, channel_id, actor, action, from_state, to_state, reason, details
         FROM audit_log WHERE channel_id = $1 ORDER BY id",
    )
    .bind(channel_id)
    .fetch_all(exec)
    .await?)
}

/// A page of audit entries, newest first: filtered by tenant (always, for a tenant) and
/// optionally channel; `before` is the id to page from (exclusive).
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Option<Uuid>,
    channel_id: Option<Uuid>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Record>> {
    Ok(sqlx::query_as(
        "SELECT id, at, tenant_id, channel_id, actor, action, from_state, to_state, reason, details
         FROM audit_log
         WHERE ($1::uuid IS NULL OR tenant_id = $1)
           AND ($2::uuid IS NULL OR channel_id = $2)
           AND ($3::int8 IS NULL OR id < $3)
         ORDER BY id DESC LIMIT $4",
    )
    .bind(tenant_id)
    .bind(channel_id)
    .bind(before)
    .bind(limit)
    .fetch_all(exec)
    .await?)
}
