//! Portal sessions ([`breakwater_core::portal`]): the tenant opens its own
//! (`/api/v1/tenant/portal-sessions`, with an API key), the operator any tenant's
//! (`/api/v1/tenants/{id}/portal-sessions`). The answer carries the portal URL with the token in
//! its fragment (`/portal#token=bwp_…`), shown once: a fragment is never sent to a server, so
//! the token stays out of access logs and of any `Referer`. Revoking is a `DELETE` of the
//! session under the same prefix. Both are audited (`portal_session.created`,
//! `portal_session.revoked`) without the token. A portal session itself cannot open or revoke
//! sessions ([`crate::auth::portal_may`]).

use crate::auth::Via;
use crate::call::{Call, OperatorCall, TenantCall};
use crate::created::Created;
use crate::error::ApiError;
use crate::extract::{Json, Path};
use crate::responses::{ById, JsonBody, NotFound, OperatorAuth, TenantAuth};
use crate::AppState;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::Router;
use breakwater_core::portal::{self, PortalSession, Scope};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tenant/portal-sessions", post(self_open))
        .route("/api/v1/tenant/portal-sessions/{id}", delete(self_revoke))
        .route("/api/v1/portal/session", get(current))
        .route("/api/v1/tenants/{id}/portal-sessions", post(operator_open))
        .route(
            "/api/v1/tenants/{id}/portal-sessions/{session_id}",
            delete(operator_revoke),
        )
}

/// Body of `POST …/portal-sessions`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenSession {
    /// `manage` (read and change the tenant's channels and deliveries) or `read` (every write
    /// refused with 403).
    #[schema(value_type = Scope)]
    scope: String,
    /// Lifetime, seconds: 1 to 86 400 (24 h); default 3 600 (1 h). Longer → 422.
    #[schema(minimum = 1, maximum = 86400, example = 3600)]
    ttl_s: Option<i64>,
}

/// An opened portal session: its URL holds the token, shown this once.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct OpenedSession {
    /// Session id (revoke it with `DELETE …/portal-sessions/{id}`; what it does is audited as
    /// `portal:<id>`).
    id: Uuid,
    /// Its tenant.
    tenant_id: Uuid,
    /// `manage` or `read`.
    scope: Scope,
    /// The portal page with the token in the fragment: `<api.public_url>/portal#token=bwp_…`
    /// (a path when `api.public_url` is empty). Open it or embed it in an `<iframe>`; only the
    /// token's digest is stored, so it cannot be shown again.
    #[schema(example = "https://hooks.example.com/portal#token=bwp_…")]
    url: String,
    /// Refused (401) from this instant on.
    expires_at: DateTime<Utc>,
}

/// Opens a session for `tenant_id` as the caller; `Location` is the session under
/// `sessions_path`.
async fn open<K>(
    call: &Call<K>,
    tenant_id: Uuid,
    sessions_path: &str,
    body: OpenSession,
) -> Result<Created<OpenedSession>, ApiError> {
    let scope = Scope::parse(&body.scope)
        .map_err(|_| ApiError::invalid("scope", "must be one of manage, read"))?;
    let ttl_s = portal::check_ttl(body.ttl_s)?;
    let mut tx = call.begin_audited().await?;
    let cell = call.state.settings().cell.as_ref();
    let opened = portal::open(&mut tx, tenant_id, scope, ttl_s, cell, call.actor()).await?;
    tx.commit().await?;
    let s = opened.session;
    // The token is never logged: only the session's id.
    tracing::info!(%tenant_id, session_id = %s.id, scope = %s.scope, "portal session opened");
    let base = call
        .state
        .settings()
        .config
        .public_url
        .trim_end_matches('/');
    Ok(Created::at(
        format!("{sessions_path}/{}", s.id),
        OpenedSession {
            id: s.id,
            tenant_id: s.tenant_id,
            scope: s.scope,
            url: format!("{base}/portal#token={}", opened.token),
            expires_at: s.expires_at,
        },
    ))
}

async fn revoke<K>(
    call: &Call<K>,
    tenant_id: Uuid,
    session_id: Uuid,
) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    portal::revoke(&mut tx, tenant_id, session_id, call.actor()).await?;
    tx.commit().await?;
    tracing::info!(%tenant_id, %session_id, "portal session revoked");
    Ok(StatusCode::NO_CONTENT)
}

/// Opens a portal session for the calling tenant.
///
/// `POST /api/v1/tenant/portal-sessions {scope, ttl_s?}` with an API key (a portal session
/// cannot open another: 403): 201 with the session's `url`, which holds the token, shown once.
/// 422 on `scope` or `ttl_s` (more than 24 h).
#[utoipa::path(
    post,
    path = "/api/v1/tenant/portal-sessions",
    tag = "portal",
    operation_id = "open_own_portal_session",
    request_body = OpenSession,
    responses(
        (status = 201, description = "The session, with its `url` (shown once).", body = OpenedSession,
            headers(("Location" = String, description = "The session: `/api/v1/tenant/portal-sessions/{id}`."))),
        JsonBody,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_open(
    call: TenantCall,
    Json(body): Json<OpenSession>,
) -> Result<Created<OpenedSession>, ApiError> {
    let tenant_id = call.tenant_id();
    open(&call, tenant_id, "/api/v1/tenant/portal-sessions", body).await
}

/// Revokes one of the calling tenant's portal sessions.
///
/// `DELETE /api/v1/tenant/portal-sessions/{id}` with an API key: 204; the session is refused
/// (401) from its next request on. 404 for a session that is not the tenant's, or already
/// revoked.
#[utoipa::path(
    delete,
    path = "/api/v1/tenant/portal-sessions/{id}",
    tag = "portal",
    operation_id = "revoke_own_portal_session",
    params(("id" = Uuid, Path, description = "Session id.")),
    responses(
        (status = 204, description = "Revoked: refused (401) from its next request on."),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_revoke(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    revoke(&call, call.tenant_id(), id).await
}

/// The portal session making the call: its scope and expiry (what the portal page shows).
///
/// `GET /api/v1/portal/session` with a portal session's token: 200 with the session (never its
/// token). With an API key: 404 (a key is not a session).
#[utoipa::path(
    get,
    path = "/api/v1/portal/session",
    tag = "portal",
    operation_id = "get_current_portal_session",
    responses(
        (status = 200, description = "The calling session.", body = PortalSession),
        NotFound,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn current(call: TenantCall) -> Result<axum::Json<PortalSession>, ApiError> {
    let Via::Portal { session_id, .. } = call.via() else {
        return Err(ApiError::not_found(
            "portal session (this call uses an API key)",
        ));
    };
    Ok(axum::Json(
        portal::get(call.state.pool(), call.tenant_id(), session_id).await?,
    ))
}

/// Opens a portal session for a tenant.
///
/// `POST /api/v1/tenants/{id}/portal-sessions {scope, ttl_s?}` (operator): 201 with the
/// session's `url`, shown once. 404 for a missing or deleted tenant; 422 on `scope` or `ttl_s`.
#[utoipa::path(
    post,
    path = "/api/v1/tenants/{id}/portal-sessions",
    tag = "portal",
    operation_id = "open_tenant_portal_session",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    request_body = OpenSession,
    responses(
        (status = 201, description = "The session, with its `url` (shown once).", body = OpenedSession,
            headers(("Location" = String, description = "The session: `/api/v1/tenants/{id}/portal-sessions/{session_id}`."))),
        JsonBody,
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_open(
    call: OperatorCall,
    Path(tenant_id): Path<Uuid>,
    Json(body): Json<OpenSession>,
) -> Result<Created<OpenedSession>, ApiError> {
    let path = format!("/api/v1/tenants/{tenant_id}/portal-sessions");
    open(&call, tenant_id, &path, body).await
}

/// Revokes a tenant's portal session.
///
/// `DELETE /api/v1/tenants/{id}/portal-sessions/{session_id}` (operator): 204; 404 when the
/// session is not that tenant's, or already revoked.
#[utoipa::path(
    delete,
    path = "/api/v1/tenants/{id}/portal-sessions/{session_id}",
    tag = "portal",
    operation_id = "revoke_tenant_portal_session",
    params(
        ("id" = Uuid, Path, description = "Tenant id."),
        ("session_id" = Uuid, Path, description = "Session id."),
    ),
    responses(
        (status = 204, description = "Revoked: refused (401) from its next request on."),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_revoke(
    call: OperatorCall,
    Path((tenant_id, session_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    revoke(&call, tenant_id, session_id).await
}
