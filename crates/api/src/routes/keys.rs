//! API keys: a tenant's own (`/api/v1/tenant/keys`, tenant key) and any tenant's
//! (`/api/v1/tenants/{id}/keys`, operator key). Create (the key is shown once), list (never the
//! key or its digest), revoke (401 from the key's next request on). Each write is audited
//! (`key.created`, `key.revoked`) without the key.

use crate::auth::{Operator, Tenant};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query, RequestId};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::Router;
use breakwater_core::audit::{self, ACTOR_OPERATOR};
use breakwater_core::keys::{self, ApiKey, CreatedKey};
use breakwater_core::tenants;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tenant/keys", post(self_create).get(self_list))
        .route("/api/v1/tenant/keys/{id}", delete(self_revoke))
        .route(
            "/api/v1/tenants/{id}/keys",
            post(operator_create).get(operator_list),
        )
        .route(
            "/api/v1/tenants/{id}/keys/{key_id}",
            delete(operator_revoke),
        )
}

/// Body of `POST …/keys`: an optional label (1–200 characters).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    name: Option<String>,
}

/// `?include_revoked=true&after=<key id>&limit=` (limit 1–1000, default 100).
#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    include_revoked: bool,
    after: Option<Uuid>,
    limit: Option<i64>,
}

/// A page of keys, oldest first; pass `next_after` as `?after=` for the next one.
#[derive(Serialize)]
struct KeyPage {
    data: Vec<ApiKey>,
    next_after: Option<Uuid>,
}

async fn create(
    state: &AppState,
    request: &RequestId,
    tenant_id: Uuid,
    body: CreateKey,
    actor: &str,
) -> Result<(StatusCode, axum::Json<CreatedKey>), ApiError> {
    let mut tx = state.begin_audited(request).await?;
    let created = keys::create(&mut tx, tenant_id, body.name.as_deref(), actor).await?;
    tx.commit().await?;
    tracing::info!(%tenant_id, key_id = %created.key.id, "api key created");
    Ok((StatusCode::CREATED, axum::Json(created)))
}

async fn list(state: &AppState, tenant_id: Uuid, q: ListQuery) -> Result<KeyPage, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let data = keys::list(state.pool(), tenant_id, q.include_revoked, q.after, limit).await?;
    let next_after = (data.len() as i64 == limit)
        .then(|| data.last().map(|k| k.id))
        .flatten();
    Ok(KeyPage { data, next_after })
}

async fn revoke(
    state: &AppState,
    request: &RequestId,
    tenant_id: Uuid,
    key_id: Uuid,
    actor: &str,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.begin_audited(request).await?;
    keys::revoke(&mut tx, tenant_id, key_id, actor).await?;
    tx.commit().await?;
    tracing::info!(%tenant_id, %key_id, "api key revoked");
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/tenant/keys {name?}`: 201 with the key's listing and `api_key`, shown once.
async fn self_create(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<CreateKey>,
) -> Result<(StatusCode, axum::Json<CreatedKey>), ApiError> {
    let actor = audit::tenant_actor(key.key_id);
    create(&state, &request, key.tenant_id, body, &actor).await
}

/// `GET /api/v1/tenant/keys`: the tenant's keys.
async fn self_list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<KeyPage>, ApiError> {
    Ok(axum::Json(list(&state, key.tenant_id, q).await?))
}

/// `DELETE /api/v1/tenant/keys/{id}`: 204; the key making the call may revoke itself.
async fn self_revoke(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let actor = audit::tenant_actor(key.key_id);
    revoke(&state, &request, key.tenant_id, id, &actor).await
}

/// `POST /api/v1/tenants/{id}/keys {name?}` (operator): 201 with the key, shown once.
async fn operator_create(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Path(tenant_id): Path<Uuid>,
    Json(body): Json<CreateKey>,
) -> Result<(StatusCode, axum::Json<CreatedKey>), ApiError> {
    create(&state, &request, tenant_id, body, ACTOR_OPERATOR).await
}

/// `GET /api/v1/tenants/{id}/keys` (operator): 404 for a missing or deleted tenant.
async fn operator_list(
    _: Operator,
    State(state): State<AppState>,
    Path(tenant_id): Path<Uuid>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<KeyPage>, ApiError> {
    tenants::get(state.pool(), tenant_id).await?;
    Ok(axum::Json(list(&state, tenant_id, q).await?))
}

/// `DELETE /api/v1/tenants/{id}/keys/{key_id}` (operator): 204; 404 when the key is not that
/// tenant's, or already revoked.
async fn operator_revoke(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Path((tenant_id, key_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    revoke(&state, &request, tenant_id, key_id, ACTOR_OPERATOR).await
}
