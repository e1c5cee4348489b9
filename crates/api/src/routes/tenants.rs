//! Operator routes for tenants: `POST /api/v1/tenants`, `GET /api/v1/tenants` (list), read,
//! update; and the tenant's own `GET`/`PATCH /api/v1/tenant`.

use super::checked_url;
use crate::auth::{Operator, Tenant};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query, RequestId};
use crate::page::{Page, PageQuery};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use breakwater_core::audit;
use breakwater_core::page::Order;
use breakwater_core::tenants::{self, CreatedTenant, NewTenant};
use breakwater_core::Tier;
use serde::Deserialize;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tenants", post(create).get(operator_list))
        .route(
            "/api/v1/tenants/{id}",
            axum::routing::get(operator_read).patch(operator_update),
        )
        .route("/api/v1/tenants/{id}/alert-secret", post(operator_rotate))
        .route(
            "/api/v1/tenant",
            axum::routing::get(self_read).patch(self_update),
        )
        .route("/api/v1/tenant/alert-secret", post(self_rotate))
}

/// Body of `POST /api/v1/tenants`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    name: String,
    tier: Option<String>,
    alert_url: Option<String>,
}

/// 201 with the tenant, its `api_key` (shown once, stored hashed) and `alert_secret`.
async fn create(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<CreateTenant>,
) -> Result<(StatusCode, axum::Json<CreatedTenant>), ApiError> {
    let tier = match body.tier.as_deref() {
        None => Tier::default(),
        Some(t) => t.parse::<Tier>()?,
    };
    let alert_url = match body.alert_url.as_deref() {
        None | Some("") => None,
        Some(u) => Some(checked_url("alert_url", u, state.inner.allow_private_targets).await?),
    };
    let mut tx = state.begin_audited(&request).await?;
    let created = tenants::create(
        &mut tx,
        &NewTenant {
            name: body.name,
            tier,
            alert_url,
        },
        audit::ACTOR_OPERATOR,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %created.tenant.id, tier = %created.tenant.tier, "tenant created");
    Ok((StatusCode::CREATED, axum::Json(created)))
}

/// Body of `PATCH /api/v1/tenants/{id}` (operator): every field optional; `alert_url: null`
/// removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OperatorPatch {
    name: Option<String>,
    tier: Option<String>,
    #[serde(default, deserialize_with = "super::nullable")]
    alert_url: Option<Option<String>>,
}

/// A tenant and, after a tier change, how many waiting jobs moved queue.
#[derive(serde::Serialize)]
struct TenantView {
    #[serde(flatten)]
    tenant: tenants::Tenant,
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs_moved: Option<u64>,
}

async fn checked_alert_url(
    state: &AppState,
    url: Option<Option<String>>,
) -> Result<Option<Option<String>>, ApiError> {
    Ok(match url {
        Some(Some(u)) if !u.is_empty() => Some(Some(
            checked_url("alert_url", &u, state.inner.allow_private_targets).await?,
        )),
        Some(_) => Some(None),
        None => None,
    })
}

/// `GET /api/v1/tenants?after=&limit=` (operator): every tenant in creation order, paged by
/// cursor ([`crate::page`]). Never shows a secret or a key.
async fn operator_list(
    _: Operator,
    State(state): State<AppState>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<tenants::Tenant>>, ApiError> {
    let keyset = q.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = tenants::list(state.pool(), &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |t| t.id)))
}

async fn operator_read(
    _: Operator,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<tenants::Tenant>, ApiError> {
    Ok(axum::Json(tenants::get(state.pool(), id).await?))
}

async fn operator_update(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<OperatorPatch>,
) -> Result<axum::Json<TenantView>, ApiError> {
    tenants::get(state.pool(), id).await?;
    let tier = body.tier.as_deref().map(str::parse::<Tier>).transpose()?;
    let alert_url = checked_alert_url(&state, body.alert_url).await?;
    let patch = tenants::TenantPatch {
        alert_url,
        name: body.name,
        tier,
    };
    let mut tx = state.begin_audited(&request).await?;
    let (tenant, jobs_moved) = tenants::update(&mut tx, id, &patch, audit::ACTOR_OPERATOR).await?;
    tx.commit().await?;
    Ok(axum::Json(TenantView { tenant, jobs_moved }))
}

#[derive(serde::Serialize)]
struct Rotated {
    alert_secret: String,
}

async fn operator_rotate(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Rotated>, ApiError> {
    let mut tx = state.begin_audited(&request).await?;
    let alert_secret = tenants::rotate_alert_secret(&mut tx, id, audit::ACTOR_OPERATOR).await?;
    tx.commit().await?;
    Ok(axum::Json(Rotated { alert_secret }))
}

/// Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL (`null` removes it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SelfPatch {
    #[serde(default, deserialize_with = "super::nullable")]
    alert_url: Option<Option<String>>,
}

async fn self_read(
    Tenant(key): Tenant,
    State(state): State<AppState>,
) -> Result<axum::Json<tenants::Tenant>, ApiError> {
    Ok(axum::Json(tenants::get(state.pool(), key.tenant_id).await?))
}

async fn self_update(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<SelfPatch>,
) -> Result<axum::Json<tenants::Tenant>, ApiError> {
    let alert_url = checked_alert_url(&state, body.alert_url).await?;
    let patch = tenants::TenantPatch {
        alert_url,
        ..Default::default()
    };
    let actor = audit::tenant_actor(key.key_id);
    let mut tx = state.begin_audited(&request).await?;
    let (tenant, _) = tenants::update(&mut tx, key.tenant_id, &patch, &actor).await?;
    tx.commit().await?;
    Ok(axum::Json(tenant))
}

/// `POST /api/v1/tenant/alert-secret`: a new alert signing secret, shown once.
async fn self_rotate(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
) -> Result<axum::Json<Rotated>, ApiError> {
    let actor = audit::tenant_actor(key.key_id);
    let mut tx = state.begin_audited(&request).await?;
    let alert_secret = tenants::rotate_alert_secret(&mut tx, key.tenant_id, &actor).await?;
    tx.commit().await?;
    Ok(axum::Json(Rotated { alert_secret }))
}
