//! API keys: a tenant's own (`/api/v1/tenant/keys`, tenant key) and any tenant's
//! (`/api/v1/tenants/{id}/keys`, operator key). Create (the key is shown once), list (never the
//! key or its digest), revoke (401 from the key's next request on). Each write is audited
//! (`key.created`, `key.revoked`) without the key.

use crate::call::{Call, OperatorCall, TenantCall};
use crate::created::Created;
use crate::error::ApiError;
use crate::extract::{OptionalJson, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, Conflict, JsonBody, OperatorAuth, TenantAuth, WithQuery};
use crate::AppState;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::Router;
use breakwater_core::keys::{self, ApiKey, CreatedKey};
use breakwater_core::page::Order;
use breakwater_core::tenants;
use serde::Deserialize;
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

/// Body of `POST …/keys`: an optional label (no body: no label).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateKey {
    /// A label, e.g. `"ci"`: 1 to 200 characters (trimmed) without control,
    /// bidirectional formatting or invisible characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F\u00AD\u034F\u115F\u1160\u180E\u200B\u200E\u200F\u2028\u2029\u202A-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]*\S[^\u0000-\u001F\u007F-\u009F\u00AD\u034F\u115F\u1160\u180E\u200B\u200E\u200F\u2028\u2029\u202A-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]*$",
        example = "ci"
    )]
    name: Option<String>,
}

/// Filter of a key list (paging: [`PageQuery`]): oldest first.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Also list revoked keys: `true` or `false` (default); anything else is a 422.
    // A string, as every field beside a flattened `PageQuery` must be (serde hands flattened
    // query values over as strings, so a `bool` would refuse `true`).
    #[param(value_type = Option<bool>)]
    include_revoked: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for ListQuery {
    const PAGED: bool = true;
}

/// Creates a key for `tenant_id`, audited as the caller; the answer's `Location` is the key's
/// path under `keys_path` (the caller's route to the tenant's keys, e.g. `/api/v1/tenant/keys`).
async fn create<K>(
    call: &Call<K>,
    tenant_id: Uuid,
    keys_path: &str,
    body: CreateKey,
) -> Result<Created<CreatedKey>, ApiError> {
    let mut tx = call.begin_audited().await?;
    let created = keys::create(
        &mut tx,
        tenant_id,
        body.name.as_deref(),
        &call.state.quota_defaults(),
        call.state.settings().cell.as_ref(),
        call.actor(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(%tenant_id, key_id = %created.key.id, "api key created");
    let location = format!("{keys_path}/{}", created.key.id);
    Ok(Created::at(location, created))
}

/// A page of `tenant_id`'s keys, oldest first, paged by cursor ([`crate::page`]).
async fn list(state: &AppState, tenant_id: Uuid, q: ListQuery) -> Result<Page<ApiKey>, ApiError> {
    let include_revoked = match q.include_revoked.as_deref().map(str::trim) {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "include_revoked",
                "must be true or false",
            ))
        }
    };
    let keyset = q.page.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = keys::list(
        state.pool(),
        tenant_id,
        include_revoked,
        keyset.after,
        keyset.limit,
    )
    .await?;
    Ok(Page::new(rows, &keyset, |k| k.id))
}

/// Revokes `tenant_id`'s key `key_id` (404 when it is not that tenant's, or already revoked),
/// audited as the caller.
async fn revoke<K>(call: &Call<K>, tenant_id: Uuid, key_id: Uuid) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    keys::revoke(&mut tx, tenant_id, key_id, call.actor()).await?;
    tx.commit().await?;
    tracing::info!(%tenant_id, %key_id, "api key revoked");
    Ok(StatusCode::NO_CONTENT)
}

/// Creates an API key for the calling tenant; the key is shown once.
///
/// `POST /api/v1/tenant/keys {name?}`: 201 with the key's listing and `api_key`, shown once. 409
/// `quota_exceeded` (`quota: "active_keys"`) when the tenant already holds its `active_keys`
/// quota of unrevoked keys (default `api.quota_active_keys`, 100).
#[utoipa::path(
    post,
    path = "/api/v1/tenant/keys",
    tag = "keys",
    operation_id = "create_own_key",
    request_body(content = Option<CreateKey>, description = "Optional: no body (or `{}`) is a key without a label."),
    responses(
        (status = 201, description = "The key, with `api_key` (shown once).", body = CreatedKey,
            headers(("Location" = String, description = "The new key: `/api/v1/tenant/keys/{id}`."))),
        JsonBody,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_create(
    call: TenantCall,
    OptionalJson(body): OptionalJson<CreateKey>,
) -> Result<Created<CreatedKey>, ApiError> {
    create(&call, call.tenant_id(), "/api/v1/tenant/keys", body).await
}

/// Lists the calling tenant's API keys (never the keys themselves), oldest first.
///
/// `GET /api/v1/tenant/keys?include_revoked=&after=&limit=`, paged by cursor.
#[utoipa::path(
    get,
    path = "/api/v1/tenant/keys",
    tag = "keys",
    operation_id = "list_own_keys",
    params(ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of keys.", body = Page<ApiKey>),
        WithQuery<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_list(
    call: TenantCall,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<ApiKey>>, ApiError> {
    Ok(axum::Json(list(&call.state, call.tenant_id(), q).await?))
}

/// Revokes one of the calling tenant's API keys.
///
/// `DELETE /api/v1/tenant/keys/{id}`: 204; the key making the call may revoke itself. 404 for a
/// key that is not the tenant's, or already revoked.
#[utoipa::path(
    delete,
    path = "/api/v1/tenant/keys/{id}",
    tag = "keys",
    operation_id = "revoke_own_key",
    params(("id" = Uuid, Path, description = "Key id.")),
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

/// Creates an API key for a tenant; the key is shown once.
///
/// `POST /api/v1/tenants/{id}/keys {name?}` (operator): 201 with the key, shown once. 404 for a
/// missing or deleted tenant; 409 `quota_exceeded` when it already holds its `active_keys` quota
/// of unrevoked keys.
#[utoipa::path(
    post,
    path = "/api/v1/tenants/{id}/keys",
    tag = "tenants",
    operation_id = "create_tenant_key",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    request_body(content = Option<CreateKey>, description = "Optional: no body (or `{}`) is a key without a label."),
    responses(
        (status = 201, description = "The key, with `api_key` (shown once).", body = CreatedKey,
            headers(("Location" = String, description = "The new key: `/api/v1/tenants/{id}/keys/{key_id}`."))),
        JsonBody,
        Conflict,
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_create(
    call: OperatorCall,
    Path(tenant_id): Path<Uuid>,
    OptionalJson(body): OptionalJson<CreateKey>,
) -> Result<Created<CreatedKey>, ApiError> {
    let keys_path = format!("/api/v1/tenants/{tenant_id}/keys");
    create(&call, tenant_id, &keys_path, body).await
}

/// Lists a tenant's API keys (never the keys themselves), oldest first.
///
/// `GET /api/v1/tenants/{id}/keys?include_revoked=&after=&limit=` (operator), paged by cursor:
/// 404 for a missing or deleted tenant.
#[utoipa::path(
    get,
    path = "/api/v1/tenants/{id}/keys",
    tag = "tenants",
    operation_id = "list_tenant_keys",
    params(("id" = Uuid, Path, description = "Tenant id."), ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of keys.", body = Page<ApiKey>),
        ById<WithQuery<OperatorAuth>>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_list(
    call: OperatorCall,
    Path(tenant_id): Path<Uuid>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<ApiKey>>, ApiError> {
    tenants::get(call.state.pool(), tenant_id).await?;
    Ok(axum::Json(list(&call.state, tenant_id, q).await?))
}

/// Revokes a tenant's API key.
///
/// `DELETE /api/v1/tenants/{id}/keys/{key_id}` (operator): 204; 404 when the key is not that
/// tenant's, or already revoked.
#[utoipa::path(
    delete,
    path = "/api/v1/tenants/{id}/keys/{key_id}",
    tag = "tenants",
    operation_id = "revoke_tenant_key",
    params(
        ("id" = Uuid, Path, description = "Tenant id."),
        ("key_id" = Uuid, Path, description = "Key id."),
    ),
    responses(
        (status = 204, description = "Revoked: refused (401) from its next request on."),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_revoke(
    call: OperatorCall,
    Path((tenant_id, key_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    revoke(&call, tenant_id, key_id).await
}
