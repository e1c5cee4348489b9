//! `GET /api/v1/audit?channel_id=&after=&limit=`: a tenant reads the audit log of its own
//! channels, newest first.

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::Query;
use crate::page::{Page, PageQuery};
use crate::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use breakwater_core::audit::{self, Record};
use breakwater_core::page::Order;
use serde::Deserialize;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/audit", get(list))
}

/// Filters and paging of audit reads: newest first, paged by cursor ([`crate::page`]).
#[derive(Deserialize)]
pub(crate) struct AuditQuery {
    pub(crate) channel_id: Option<Uuid>,
    pub(crate) tenant_id: Option<Uuid>,
    #[serde(flatten)]
    pub(crate) page: PageQuery,
}

/// Reads a page; `tenant_id` is forced for tenants.
pub(crate) async fn page(
    state: &AppState,
    tenant_id: Option<Uuid>,
    q: &AuditQuery,
) -> Result<Page<Record>, ApiError> {
    let keyset = q.page.keyset::<i64>(Order::NewestFirst)?;
    let rows = audit::list(state.pool(), tenant_id, q.channel_id, &keyset).await?;
    Ok(Page::new(rows, &keyset, |r| r.id))
}

async fn list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<axum::Json<Page<Record>>, ApiError> {
    if q.tenant_id.is_some_and(|t| t != key.tenant_id) {
        return Err(ApiError::invalid(
            "tenant_id",
            "a tenant reads only its own audit log",
        ));
    }
    Ok(axum::Json(page(&state, Some(key.tenant_id), &q).await?))
}
