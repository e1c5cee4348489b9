//! `GET /api/v1/audit?channel_id=&after=&limit=`: a tenant reads the audit log of its own
//! channels, newest first.

use super::query_id;
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

/// Filters of the tenant's audit read (paging: [`PageQuery`]): newest first, paged by cursor
/// ([`crate::page`]). No `tenant_id`: the tenant is the key's, so the route does not take one
/// (400 `invalid_query` as any parameter it does not take).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TenantAuditQuery {
    /// Only this channel's entries (another tenant's channel: 404).
    #[param(value_type = Option<Uuid>)]
    channel_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for TenantAuditQuery {
    const PAGED: bool = true;
}

/// Filters of the operator's audit read (paging: [`PageQuery`]), as [`TenantAuditQuery`] plus
/// any tenant.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Only this channel's entries.
    #[param(value_type = Option<Uuid>)]
    channel_id: Option<String>,
    /// Only this tenant's entries.
    #[param(value_type = Option<Uuid>)]
    tenant_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for AuditQuery {
    const PAGED: bool = true;
}

/// Reads a page of the entries of `tenant_id` (any tenant's: `None`) and of channel
/// `channel_id` (any: `None`).
async fn page(
    state: &AppState,
    tenant_id: Option<Uuid>,
    channel_id: Option<Uuid>,
    page: &PageQuery,
) -> Result<Page<Record>, ApiError> {
    let keyset = page.keyset::<i64>(Order::NewestFirst)?;
    let rows = audit::list(state.pool(), tenant_id, channel_id, &keyset).await?;
    Ok(Page::new(rows, &keyset, |r| r.id))
}

/// The operator's page of `q`: any tenant's entries, filtered as `q` asks (a filter that is not
/// a UUID: 422 naming it).
pub(crate) async fn operator_page(
    state: &AppState,
    q: &AuditQuery,
) -> Result<Page<Record>, ApiError> {
    let tenant_id = query_id("tenant_id", q.tenant_id.as_deref())?;
    let channel_id = query_id("channel_id", q.channel_id.as_deref())?;
    page(state, tenant_id, channel_id, &q.page).await
}

/// Reads the tenant's audit log (its own channels and itself), newest first.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    operation_id = "list_audit",
    params(TenantAuditQuery, PageQuery),
    responses(
        (status = 200, description = "A page of audit entries.", body = Page<Record>),
        WithQuery<TenantAuth>,
        NotFound,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    call: TenantCall,
    Query(q): Query<TenantAuditQuery>,
) -> Result<axum::Json<Page<Record>>, ApiError> {
    let channel_id = query_id("channel_id", q.channel_id.as_deref())?;
    // A tenant names only its own channels: another tenant's (or no) channel is a 404, as
    // everywhere else, not an empty page. (The operator's filter stays a filter.)
    if let Some(channel_id) = channel_id {
        channels::check_owned(call.state.pool(), call.tenant_id(), channel_id).await?;
    }
    Ok(axum::Json(
        page(&call.state, Some(call.tenant_id()), channel_id, &q.page).await?,
    ))
}
