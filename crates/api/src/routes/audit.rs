//! `GET /api/v1/audit`: a tenant reads the audit log of its own channels.

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::Query;
use crate::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use breakwater_core::audit::{self, Record};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/audit", get(list))
}

/// Filters and paging of audit reads: newest first; pass `next_before` as `?before=`.
#[derive(Deserialize)]
pub(crate) struct AuditQuery {
    pub(crate) channel_id: Option<Uuid>,
    pub(crate) tenant_id: Option<Uuid>,
    pub(crate) before: Option<i64>,
    pub(crate) limit: Option<i64>,
}

/// A page of audit entries.
#[derive(Serialize)]
pub(crate) struct AuditPage {
    data: Vec<Record>,
    next_before: Option<i64>,
}

/// Reads a page; `tenant_id` is forced for tenants.
pub(crate) async fn page(
    state: &AppState,
    tenant_id: Option<Uuid>,
    q: &AuditQuery,
) -> Result<AuditPage, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let data = audit::list(state.pool(), tenant_id, q.channel_id, q.before, limit).await?;
    let next_before = (data.len() as i64 == limit)
        .then(|| data.last().map(|r| r.id))
        .flatten();
    Ok(AuditPage { data, next_before })
}

async fn list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<axum::Json<AuditPage>, ApiError> {
    if q.tenant_id.is_some_and(|t| t != key.tenant_id) {
        return Err(ApiError::invalid(
            "tenant_id",
            "a tenant reads only its own audit log",
        ));
    }
    Ok(axum::Json(page(&state, Some(key.tenant_id), &q).await?))
}
