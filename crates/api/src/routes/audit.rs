//! `GET /api/v1/audit?channel_id=&after=&limit=`: a tenant reads the audit log of its own
//! channels, newest first.

use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::Query;
use crate::page::{Page, PageQuery};
use crate::responses::{NotFound, TenantAuth, WithQuery};
use crate::AppState;
use axum::routing::get;
use axum::Router;
use breakwater_core::audit::{self, Record};
use breakwater_core::channels;
use breakwater_core::page::Order;
use serde::Deserialize;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/audit", get(list))
}

/// Filters of audit reads (paging: [`PageQuery`]): newest first, paged by cursor
/// ([`crate::page`]).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Only this channel's entries.
    pub(crate) channel_id: Option<Uuid>,
    /// Only this tenant's entries (a tenant may only name itself).
    pub(crate) tenant_id: Option<Uuid>,
    #[serde(flatten)]
    #[param(ignore)]
    pub(crate) page: PageQuery,
}

impl crate::extract::QueryParams for AuditQuery {
    const PAGED: bool = true;
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

/// Reads the tenant's audit log (its own channels and itself), newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    operation_id = "list_audit",
    params(AuditQuery, PageQuery),
    responses(
        (status = 200, description = "A page of audit entries.", body = Page<Record>),
        WithQuery<TenantAuth>,
        NotFound,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    call: TenantCall,
    Query(q): Query<AuditQuery>,
) -> Result<axum::Json<Page<Record>>, ApiError> {
    if q.tenant_id.is_some_and(|t| t != call.tenant_id()) {
        return Err(ApiError::invalid(
            "tenant_id",
            "a tenant reads only its own audit log",
        ));
    }
    // A tenant names only its own channels: another tenant's (or no) channel is a 404, as
    // everywhere else, not an empty page. (The operator's filter stays a filter.)
    if let Some(channel_id) = q.channel_id {
        channels::check_owned(call.state.pool(), call.tenant_id(), channel_id).await?;
    }
    Ok(axum::Json(
        page(&call.state, Some(call.tenant_id()), &q).await?,
    ))
}
