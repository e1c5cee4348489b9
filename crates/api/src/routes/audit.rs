//! `GET /api/v1/audit`: a tenant reads the audit log of its own channels.

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::Query;
use crate::openapi::{BadRequest, Invalid, TenantAuth};
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
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Only this channel's entries.
    pub(crate) channel_id: Option<Uuid>,
    /// Only this tenant's entries (a tenant may only name itself).
    pub(crate) tenant_id: Option<Uuid>,
    /// Entries older than this id (the previous page's `next_before`).
    pub(crate) before: Option<i64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub(crate) limit: Option<i64>,
}

/// A page of audit entries.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct AuditPage {
    /// The entries, newest first.
    data: Vec<Record>,
    /// The id to pass as `?before=` for the next page; null on the last page.
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

/// Reads the tenant's audit log (its own channels and itself), newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    operation_id = "list_audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of audit entries.", body = AuditPage),
        BadRequest,
        Invalid,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
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
