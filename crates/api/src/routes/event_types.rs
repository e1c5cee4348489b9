//! The tenant's event-type catalog: `POST/GET /api/v1/event-types`,
//! `GET/PATCH/DELETE /api/v1/event-types/{name}`; the operator reads a tenant's with
//! `GET /api/v1/tenants/{id}/event-types[/{name}]`. See [`breakwater_core::event_types`] for the
//! rules (names, schemas, hard delete, the enqueue-time check).

use crate::call::{OperatorCall, TenantCall};
use crate::created::Created;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, Conflict, JsonBody, OperatorAuth, TenantAuth, WithQuery};
use crate::AppState;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use breakwater_core::event_types::{self, EventType, EventTypePatch, NewEventType, Subscriber};
use breakwater_core::page::Order;
use breakwater_core::tenants;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/event-types", get(list).post(create))
        .route(
            "/api/v1/event-types/{name}",
            get(read).patch(update).delete(remove),
        )
        .route("/api/v1/tenants/{id}/event-types", get(operator_list))
        .route(
            "/api/v1/tenants/{id}/event-types/{name}",
            get(operator_read),
        )
}

/// Body of `POST /api/v1/event-types`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateEventType {
    /// 1 to 128 characters: segments of ASCII letters, digits, `_` and `-` joined by single
    /// dots.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$",
        example = "invoice.paid"
    )]
    name: String,
    /// What the event means, at most 1000 characters (trimmed; empty or null: none).
    #[schema(max_length = 1000)]
    description: Option<String>,
    /// A JSON Schema (draft 2020-12; an object, or true/false) every payload of this type must
    /// match, at most 64 KiB as JSON; `$ref`s resolve only inside it. Null or absent: any
    /// payload.
    #[serde(default)]
    #[schema(value_type = Option<serde_json::Value>)]
    schema: Option<Value>,
    /// An example payload, at most 64 KiB as JSON, valid against `schema` (422
    /// `schema_violation` on `example` otherwise). Null or absent: none.
    #[serde(default)]
    #[schema(value_type = Option<serde_json::Value>)]
    example: Option<Value>,
    /// Mark the type deprecated (informational; still accepted). Default false.
    #[serde(default)]
    deprecated: bool,
}

/// Body of `PATCH /api/v1/event-types/{name}`: every field optional; `null` removes a
/// description, schema or example. The name cannot change (create another, delete this one).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchEventType {
    /// New description (null removes it).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<String>, max_length = 1000)]
    description: Option<Option<String>>,
    /// New JSON Schema (null removes it). The example (new or kept) must be valid against it.
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<serde_json::Value>)]
    schema: Option<Option<Value>>,
    /// New example (null removes it), valid against the schema (new or kept).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<serde_json::Value>)]
    example: Option<Option<Value>>,
    /// New deprecated flag (not null).
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = bool)]
    deprecated: Option<bool>,
}

/// An event type with the tenant's channels that take it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EventTypeView {
    /// The event type.
    #[serde(flatten)]
    event_type: EventType,
    /// The tenant's live channels that receive this type from `POST /api/v1/messages` (by
    /// exact name, by a wildcard such as `invoice.*`, or because they have no filter), by id,
    /// at most 100.
    channels: Vec<Subscriber>,
    /// True when more than 100 channels take it (only the first 100 are listed).
    channels_truncated: bool,
}

/// `event_type` of `tenant_id` with its subscribed channels.
async fn view(
    state: &AppState,
    tenant_id: Uuid,
    event_type: EventType,
) -> Result<EventTypeView, ApiError> {
    let (channels, channels_truncated) =
        event_types::subscribers(state.pool(), tenant_id, &event_type.name).await?;
    Ok(EventTypeView {
        event_type,
        channels,
        channels_truncated,
    })
}

/// Adds an event type to the calling tenant's catalog.
///
/// 201 with the entry. 422 naming the field for a bad name, description or schema, or an
/// example that fails the schema (`schema_violation`, with the JSON pointer of each failing
/// part); 409 when the name is already catalogued. Audited as `event_type.created`.
#[utoipa::path(
    post,
    path = "/api/v1/event-types",
    tag = "event types",
    operation_id = "create_event_type",
    request_body = CreateEventType,
    responses(
        (status = 201, description = "The new entry.", body = EventType,
            headers(("Location" = String, description = "The entry: `/api/v1/event-types/{name}`."))),
        JsonBody,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn create(
    call: TenantCall,
    Json(body): Json<CreateEventType>,
) -> Result<Created<EventType>, ApiError> {
    let new = NewEventType {
        name: body.name,
        description: body.description,
        schema: body.schema,
        example: body.example,
        deprecated: body.deprecated,
    };
    let mut tx = call.begin_audited().await?;
    let created = event_types::create(&mut tx, call.tenant_id(), &new, call.actor()).await?;
    tx.commit().await?;
    let location = format!("/api/v1/event-types/{}", created.name);
    Ok(Created::at(location, created))
}

/// A page of `tenant_id`'s catalog, by name.
async fn page(
    state: &AppState,
    tenant_id: Uuid,
    q: &PageQuery,
) -> Result<Page<EventType>, ApiError> {
    let keyset = q.keyset::<String>(Order::OldestFirst)?;
    let rows = event_types::list(state.pool(), tenant_id, &keyset).await?;
    Ok(Page::new(rows, &keyset, |e| e.name.clone()))
}

/// Lists the calling tenant's event types, by name (bytewise), paged by cursor.
#[utoipa::path(
    get,
    path = "/api/v1/event-types",
    tag = "event types",
    operation_id = "list_event_types",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of event types.", body = Page<EventType>),
        WithQuery<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    call: TenantCall,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<EventType>>, ApiError> {
    Ok(axum::Json(page(&call.state, call.tenant_id(), &q).await?))
}

/// Reads one of the calling tenant's event types, with the channels that take it.
///
/// 404 for a name that is not in the tenant's catalog (another tenant's reads the same).
#[utoipa::path(
    get,
    path = "/api/v1/event-types/{name}",
    tag = "event types",
    operation_id = "get_event_type",
    params(("name" = String, Path, description = "Event type name, e.g. `invoice.paid`.")),
    responses(
        (status = 200, description = "The event type and its subscribed channels.",
            body = EventTypeView),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn read(
    call: TenantCall,
    Path(name): Path<String>,
) -> Result<axum::Json<EventTypeView>, ApiError> {
    let e = event_types::get(call.state.pool(), call.tenant_id(), &name).await?;
    Ok(axum::Json(view(&call.state, call.tenant_id(), e).await?))
}

/// Changes one of the calling tenant's event types.
///
/// 200 with the entry as it is now; the next enqueue of the type checks its new schema. 422 as
/// on create (a new schema that the kept example fails: `schema_violation` on `example`); 404
/// for a name not in the catalog. Audited once as `event_type.updated` (nothing when nothing
/// changed).
#[utoipa::path(
    patch,
    path = "/api/v1/event-types/{name}",
    tag = "event types",
    operation_id = "update_event_type",
    params(("name" = String, Path, description = "Event type name.")),
    request_body = PatchEventType,
    responses(
        (status = 200, description = "The entry as it is now.", body = EventType),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn update(
    call: TenantCall,
    Path(name): Path<String>,
    Json(body): Json<PatchEventType>,
) -> Result<axum::Json<EventType>, ApiError> {
    let patch = EventTypePatch {
        description: body.description,
        schema: body.schema,
        example: body.example,
        deprecated: body.deprecated,
    };
    let mut tx = call.begin_audited().await?;
    let e = event_types::update(&mut tx, call.tenant_id(), &name, &patch, call.actor()).await?;
    tx.commit().await?;
    Ok(axum::Json(e))
}

/// Removes an event type from the calling tenant's catalog.
///
/// 204. A hard delete: channels that name the type keep receiving it (their filters are text),
/// and it is then an unknown type (refused only when the tenant sets
/// `reject_unknown_event_types`). The name can be registered again. Audited as
/// `event_type.deleted`.
#[utoipa::path(
    delete,
    path = "/api/v1/event-types/{name}",
    tag = "event types",
    operation_id = "delete_event_type",
    params(("name" = String, Path, description = "Event type name.")),
    responses(
        (status = 204, description = "Removed from the catalog."),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn remove(
    call: TenantCall,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    event_types::delete(&mut tx, call.tenant_id(), &name, call.actor()).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Lists a tenant's event types (operator), by name, paged by cursor.
///
/// 404 for a missing or deleted tenant.
#[utoipa::path(
    get,
    path = "/api/v1/tenants/{id}/event-types",
    tag = "tenants",
    operation_id = "list_tenant_event_types",
    params(("id" = Uuid, Path, description = "Tenant id."), PageQuery),
    responses(
        (status = 200, description = "A page of event types.", body = Page<EventType>),
        ById<WithQuery<OperatorAuth>>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_list(
    call: OperatorCall,
    Path(tenant_id): Path<Uuid>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<EventType>>, ApiError> {
    tenants::get(call.state.pool(), tenant_id).await?;
    Ok(axum::Json(page(&call.state, tenant_id, &q).await?))
}

/// Reads one of a tenant's event types (operator), with the channels that take it.
#[utoipa::path(
    get,
    path = "/api/v1/tenants/{id}/event-types/{name}",
    tag = "tenants",
    operation_id = "get_tenant_event_type",
    params(
        ("id" = Uuid, Path, description = "Tenant id."),
        ("name" = String, Path, description = "Event type name."),
    ),
    responses(
        (status = 200, description = "The event type and its subscribed channels.",
            body = EventTypeView),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_read(
    call: OperatorCall,
    Path((tenant_id, name)): Path<(Uuid, String)>,
) -> Result<axum::Json<EventTypeView>, ApiError> {
    tenants::get(call.state.pool(), tenant_id).await?;
    let e = event_types::get(call.state.pool(), tenant_id, &name).await?;
    Ok(axum::Json(view(&call.state, tenant_id, e).await?))
}
