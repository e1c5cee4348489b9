//! Operator routes for tenants: `POST /api/v1/tenants`, `GET /api/v1/tenants` (list), read,
//! update; and the tenant's own `GET`/`PATCH /api/v1/tenant`.

use super::checked_url;
use crate::call::{Call, OperatorCall, TenantCall};
use crate::created::Created;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, JsonBody, OperatorAuth, TenantAuth, WithQuery};
use crate::AppState;
use axum::routing::post;
use axum::Router;
use breakwater_core::alerts::events::{self, EventSettings, EventSettingsPatch};
use breakwater_core::page::Order;
use breakwater_core::quotas::{self, QuotaPatch, Quotas};
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
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateTenant {
    /// Display name, 1 to 200 characters (trimmed) without control, bidirectional
    /// formatting or invisible characters.
    #[schema(min_length = 1, max_length = 200, example = "acme")]
    name: String,
    /// Tier (default `default`): picks the queue of the tenant's deliveries.
    #[schema(value_type = Option<Tier>)]
    tier: Option<String>,
    /// Where circuit alerts are sent (same rules as a channel URL); empty or null = none.
    #[schema(max_length = 2048)]
    alert_url: Option<String>,
}

/// Creates a tenant and its first API key.
///
/// 201 with the tenant, its `api_key` (shown once, stored hashed) and `alert_secret`.
#[utoipa::path(
    post,
    path = "/api/v1/tenants",
    tag = "tenants",
    operation_id = "create_tenant",
    request_body = CreateTenant,
    responses(
        (status = 201, description = "The tenant, with its `api_key` and `alert_secret` (shown \
            once).", body = CreatedTenant,
            headers(("Location" = String, description = "The new tenant: `/api/v1/tenants/{id}`."))),
        JsonBody,
        OperatorAuth,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn create(
    call: OperatorCall,
    Json(body): Json<CreateTenant>,
) -> Result<Created<CreatedTenant>, ApiError> {
    let tier = match body.tier.as_deref() {
        None => Tier::default(),
        Some(t) => t.parse::<Tier>()?,
    };
    let alert_url = checked_alert_url(&call.state, body.alert_url).await?;
    let mut tx = call.begin_audited().await?;
    let created = tenants::create(
        &mut tx,
        &NewTenant {
            name: body.name,
            tier,
            alert_url,
            cell: call.state.settings().cell.clone(),
        },
        call.actor(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %created.tenant.id, tier = %created.tenant.tier, "tenant created");
    let location = format!("/api/v1/tenants/{}", created.tenant.id);
    Ok(Created::at(location, created))
}

/// Body of `PATCH /api/v1/tenants/{id}` (operator): every field optional; `alert_url: null`
/// removes it. A tier change moves the tenant's waiting deliveries to the new tier's queue.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OperatorPatch {
    /// Display name, 1 to 200 characters (trimmed; not null) without control,
    /// bidirectional formatting or invisible characters.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = String, min_length = 1, max_length = 200)]
    name: Option<String>,
    /// Tier (not null); a change moves the tenant's waiting deliveries to the new tier's queue.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = Tier)]
    tier: Option<String>,
    /// Alert URL (null or empty removes it).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<String>, max_length = 2048)]
    alert_url: Option<Option<String>>,
    /// Whether the tenant's own pause and resume of a channel send alerts (default false:
    /// audited, but nobody is paged; not null). Operator actions always alert.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = bool)]
    alert_on_manual: Option<bool>,
    /// Delivery-level alert events (each optional, none null): `delivery_dead` (default true),
    /// `channel_failing` and `channel_recovered` (default false), `dead_window_ms` (1 000 –
    /// 86 400 000, default 300 000), `dead_alerts_per_window` (0 – 100, default 5),
    /// `failing_window_ms` (1 000 – 86 400 000, default 300 000), `failing_threshold_percent`
    /// (1 – 100, default 50), `failing_min_attempts` (1 – 10 000, default 20). Audited as
    /// `tenant.alert_events_changed`.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = EventSettingsPatch)]
    alert_events: Option<EventSettingsPatch>,
    /// The tenant's quotas (not null): each given one is set, a `null` one goes back to the
    /// cluster default (`api.quota_*`), an absent one is left alone. Only the operator sets
    /// them.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = QuotaPatch)]
    quotas: Option<QuotaPatch>,
    /// Whether an enqueue or a message whose event type is not in the tenant's event-type
    /// catalog is refused (422 on `event_type`); default false: accepted (not null).
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = bool)]
    reject_unknown_event_types: Option<bool>,
    /// The default retry policy of the tenant's channels (`max_attempts`, `backoff`,
    /// `request_timeout_ms`, each optional; see `RetryPolicy`): a field a channel leaves unset
    /// comes from here, else from the service configuration. Applies to deliveries accepted
    /// after the change. `null` removes it.
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<breakwater_core::retry_policy::RetryPolicy>)]
    retry_policy: Option<Option<breakwater_core::retry_policy::RetryPolicy>>,
}

/// A tenant with the quotas in force for it.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct TenantQuotas {
    /// The tenant's fields.
    #[serde(flatten)]
    tenant: tenants::Tenant,
    /// Its quotas: the operator's override where there is one, else the cluster default.
    quotas: Quotas,
    /// Its delivery-level alert event settings (the defaults until it changes them).
    alert_events: EventSettings,
}

/// A tenant, its quotas and, after a tier change, how many waiting jobs moved queue.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct TenantView {
    /// The tenant's fields.
    #[serde(flatten)]
    tenant: tenants::Tenant,
    /// Its quotas: the operator's override where there is one, else the cluster default.
    quotas: Quotas,
    /// Its delivery-level alert event settings (the defaults until it changes them).
    alert_events: EventSettings,
    /// After a tier change: how many waiting jobs moved to the new tier's queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs_moved: Option<u64>,
}

/// `tenant` with the quotas in force for it (404 if it was deleted meanwhile).
async fn with_quotas(state: &AppState, tenant: tenants::Tenant) -> Result<TenantQuotas, ApiError> {
    let quotas = quotas::get(state.pool(), tenant.id, &state.quota_defaults()).await?;
    let alert_events = events::get(state.pool(), tenant.id).await?;
    Ok(TenantQuotas {
        tenant,
        quotas,
        alert_events,
    })
}

/// An alert URL as a body gives it: null or empty → none; anything else is checked like a
/// channel URL ([`checked_url`], errors on `alert_url`).
async fn checked_alert_url(
    state: &AppState,
    url: Option<String>,
) -> Result<Option<String>, ApiError> {
    match url.as_deref() {
        None | Some("") => Ok(None),
        Some(u) => Ok(Some(
            checked_url("alert_url", u, state.settings().allow_private_targets).await?,
        )),
    }
}

/// A PATCH's `alert_url`: absent → unchanged; else [`checked_alert_url`] (null or empty removes
/// it).
async fn patched_alert_url(
    state: &AppState,
    url: Option<Option<String>>,
) -> Result<Option<Option<String>>, ApiError> {
    match url {
        Some(url) => Ok(Some(checked_alert_url(state, url).await?)),
        None => Ok(None),
    }
}

/// Applies `patch` and, when given (the operator only), `quota_patch` to the tenant `tenant_id`
/// in one transaction audited as the caller: the tenant as it is now, its quotas and, after a
/// tier change, how many waiting jobs moved queue.
async fn update<K>(
    call: &Call<K>,
    tenant_id: Uuid,
    patch: &tenants::TenantPatch,
    quota_patch: Option<&QuotaPatch>,
    events_patch: Option<&EventSettingsPatch>,
) -> Result<TenantView, ApiError> {
    let defaults = call.state.quota_defaults();
    let mut tx = call.begin_audited().await?;
    let (tenant, jobs_moved) = tenants::update(&mut tx, tenant_id, patch, call.actor()).await?;
    let quotas = match quota_patch {
        Some(q) => quotas::set(&mut tx, tenant_id, q, &defaults, call.actor()).await?,
        None => quotas::get(&mut *tx, tenant_id, &defaults).await?,
    };
    let alert_events = match events_patch {
        Some(p) => events::set(&mut tx, tenant_id, p, call.actor()).await?,
        None => events::get(&mut *tx, tenant_id).await?,
    };
    tx.commit().await?;
    Ok(TenantView {
        tenant,
        quotas,
        alert_events,
        jobs_moved,
    })
}

/// `GET /api/v1/tenants?after=&limit=` (operator): every tenant in creation order, paged by
/// cursor ([`crate::page`]). Never shows a secret or a key; each `alert_url` as its origin only.
#[utoipa::path(
    get,
    path = "/api/v1/tenants",
    tag = "tenants",
    operation_id = "list_tenants",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of tenants.", body = Page<tenants::Tenant>),
        WithQuery<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_list(
    call: OperatorCall,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<tenants::Tenant>>, ApiError> {
    let keyset = q.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = tenants::list(call.state.pool(), &keyset).await?;
    let rows = rows
        .into_iter()
        .map(tenants::Tenant::for_operator)
        .collect();
    Ok(axum::Json(Page::new(rows, &keyset, |t| t.id)))
}

/// Reads a tenant; its `alert_url` is shown as its origin only (a path or query may carry the
/// receiver's token), as in the list and the update's answer.
#[utoipa::path(
    get,
    path = "/api/v1/tenants/{id}",
    tag = "tenants",
    operation_id = "get_tenant",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    responses(
        (status = 200, description = "The tenant and its quotas.", body = TenantQuotas),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_read(
    call: OperatorCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<TenantQuotas>, ApiError> {
    let tenant = tenants::get(call.state.pool(), id).await?.for_operator();
    Ok(axum::Json(with_quotas(&call.state, tenant).await?))
}

/// Changes a tenant's name, tier, alert URL, `alert_on_manual`, `reject_unknown_event_types`,
/// default `retry_policy` or quotas.
///
/// `quotas` (`{channels, active_keys, deliveries_per_second, deliveries_per_day}`, each optional,
/// `null` = back to the cluster default) applies from the tenant's next request; lowering a
/// count below what the tenant holds removes nothing, it only refuses new ones. Audited as
/// `tenant.quotas_changed`.
#[utoipa::path(
    patch,
    path = "/api/v1/tenants/{id}",
    tag = "tenants",
    operation_id = "update_tenant",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    request_body = OperatorPatch,
    responses(
        (status = 200, description = "The tenant and its quotas as they are now.",
            body = TenantView),
        JsonBody,
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_update(
    call: OperatorCall,
    Path(id): Path<Uuid>,
    Json(body): Json<OperatorPatch>,
) -> Result<axum::Json<TenantView>, ApiError> {
    tenants::get(call.state.pool(), id).await?;
    let tier = body.tier.as_deref().map(str::parse::<Tier>).transpose()?;
    let alert_url = patched_alert_url(&call.state, body.alert_url).await?;
    if let Some(q) = &body.quotas {
        q.validate()?;
    }
    if let Some(e) = &body.alert_events {
        e.validate()?;
    }
    let patch = tenants::TenantPatch {
        alert_url,
        name: body.name,
        tier,
        alert_on_manual: body.alert_on_manual,
        reject_unknown_event_types: body.reject_unknown_event_types,
        retry_policy: body.retry_policy,
    };
    let mut view = update(
        &call,
        id,
        &patch,
        body.quotas.as_ref(),
        body.alert_events.as_ref(),
    )
    .await?;
    view.tenant = view.tenant.for_operator();
    Ok(axum::Json(view))
}

/// A new alert signing secret.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Rotated {
    /// The new secret (`whsec_…`), shown once; it signs every alert from now on.
    alert_secret: String,
}

/// Rotates the alert signing secret of the tenant `tenant_id`, audited as the caller.
async fn rotate<K>(call: &Call<K>, tenant_id: Uuid) -> Result<axum::Json<Rotated>, ApiError> {
    let mut tx = call.begin_audited().await?;
    let alert_secret = tenants::rotate_alert_secret(&mut tx, tenant_id, call.actor()).await?;
    tx.commit().await?;
    Ok(axum::Json(Rotated { alert_secret }))
}

/// Rotates a tenant's alert signing secret.
#[utoipa::path(
    post,
    path = "/api/v1/tenants/{id}/alert-secret",
    tag = "tenants",
    operation_id = "rotate_tenant_alert_secret",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    responses(
        (status = 200, description = "The new secret, shown once.", body = Rotated),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn operator_rotate(
    call: OperatorCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Rotated>, ApiError> {
    rotate(&call, id).await
}

/// Body of `PATCH /api/v1/tenant` (the tenant itself): its alert URL (`null` removes it) and
/// whether its own pause and resume alert.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelfPatch {
    /// Alert URL (null or empty removes it).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<String>, max_length = 2048)]
    alert_url: Option<Option<String>>,
    /// Whether the tenant's own pause and resume of a channel send alerts (default false:
    /// audited, but nobody is paged; not null). Operator actions always alert.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = bool)]
    alert_on_manual: Option<bool>,
    /// Whether an enqueue or a message whose event type is not in the tenant's event-type
    /// catalog is refused (422 on `event_type`); default false: accepted (not null).
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = bool)]
    reject_unknown_event_types: Option<bool>,
    /// The default retry policy of the tenant's channels (`max_attempts`, `backoff`,
    /// `request_timeout_ms`, each optional; see `RetryPolicy`): a field a channel leaves unset
    /// comes from here, else from the service configuration. Applies to deliveries accepted
    /// after the change. `null` removes it.
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<breakwater_core::retry_policy::RetryPolicy>)]
    retry_policy: Option<Option<breakwater_core::retry_policy::RetryPolicy>>,
    /// Delivery-level alert events (each optional, none null): `delivery_dead` (default true),
    /// `channel_failing` and `channel_recovered` (default false), `dead_window_ms` (1 000 –
    /// 86 400 000, default 300 000), `dead_alerts_per_window` (0 – 100, default 5),
    /// `failing_window_ms` (1 000 – 86 400 000, default 300 000), `failing_threshold_percent`
    /// (1 – 100, default 50), `failing_min_attempts` (1 – 10 000, default 20). Audited as
    /// `tenant.alert_events_changed`.
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(value_type = EventSettingsPatch)]
    alert_events: Option<EventSettingsPatch>,
}

/// Reads the calling tenant and its quotas (which only the operator can change).
#[utoipa::path(
    get,
    path = "/api/v1/tenant",
    tag = "tenant",
    operation_id = "get_own_tenant",
    responses(
        (status = 200, description = "The tenant and its quotas.", body = TenantQuotas),
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_read(call: TenantCall) -> Result<axum::Json<TenantQuotas>, ApiError> {
    let tenant = tenants::get(call.state.pool(), call.tenant_id()).await?;
    Ok(axum::Json(with_quotas(&call.state, tenant).await?))
}

/// Changes the calling tenant's alert URL, `alert_on_manual`, `reject_unknown_event_types` or
/// the default `retry_policy` of its channels, or `alert_events` (its delivery-level alert
/// events: see the README's "Delivery events").
/// Not its quotas: a body with
/// `quotas` is a 422 `invalid_body` (unknown field), since only the operator sets them.
#[utoipa::path(
    patch,
    path = "/api/v1/tenant",
    tag = "tenant",
    operation_id = "update_own_tenant",
    request_body = SelfPatch,
    responses(
        (status = 200, description = "The tenant and its quotas as they are now.",
            body = TenantQuotas),
        JsonBody,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_update(
    call: TenantCall,
    Json(body): Json<SelfPatch>,
) -> Result<axum::Json<TenantQuotas>, ApiError> {
    let alert_url = patched_alert_url(&call.state, body.alert_url).await?;
    if let Some(e) = &body.alert_events {
        e.validate()?;
    }
    let patch = tenants::TenantPatch {
        alert_url,
        alert_on_manual: body.alert_on_manual,
        reject_unknown_event_types: body.reject_unknown_event_types,
        retry_policy: body.retry_policy,
        ..Default::default()
    };
    let view = update(
        &call,
        call.tenant_id(),
        &patch,
        None,
        body.alert_events.as_ref(),
    )
    .await?;
    Ok(axum::Json(TenantQuotas {
        tenant: view.tenant,
        quotas: view.quotas,
        alert_events: view.alert_events,
    }))
}

/// Rotates the calling tenant's alert signing secret.
#[utoipa::path(
    post,
    path = "/api/v1/tenant/alert-secret",
    tag = "tenant",
    operation_id = "rotate_own_alert_secret",
    responses(
        (status = 200, description = "The new secret, shown once.", body = Rotated),
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn self_rotate(call: TenantCall) -> Result<axum::Json<Rotated>, ApiError> {
    rotate(&call, call.tenant_id()).await
}
