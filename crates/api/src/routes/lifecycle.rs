//! Lifecycle routes: deleting a channel (tenant) or a tenant (operator), cancelling a delivery
//! and purging its payload (tenant). The rules are in `breakwater_core::lifecycle`; each call
//! is one transaction with one audit row.

use crate::call::{OperatorCall, TenantCall};
use crate::error::ApiError;
use crate::extract::Path;
use crate::responses::{ById, Conflict, OperatorAuth, TenantAuth};
use crate::AppState;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use axum::Router;
use breakwater_core::deliveries::{self, Delivery};
use breakwater_core::lifecycle;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/channels/{id}", delete(delete_channel))
        .route("/api/v1/tenants/{id}", delete(delete_tenant))
        .route("/api/v1/deliveries/{id}/cancel", post(cancel_delivery))
        .route("/api/v1/deliveries/{id}/payload", delete(purge_payload))
}

/// Deletes a channel and cancels its waiting deliveries.
///
/// `DELETE /api/v1/channels/{id}`: 204. The channel's waiting deliveries (parked ones too) are
/// cancelled with their jobs in the same transaction; an attempt in flight finishes and changes
/// nothing; from then on the channel is 404 everywhere and its endpoint gets no request.
#[utoipa::path(
    delete,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    operation_id = "delete_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    responses(
        (status = 204, description = "Deleted; its waiting deliveries are cancelled."),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn delete_channel(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    lifecycle::delete_channel(&mut tx, call.tenant_id(), id, call.actor()).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a tenant: its channels (as a channel delete) and its keys.
///
/// `DELETE /api/v1/tenants/{id}` (operator): 204. Every channel of the tenant is deleted as
/// above and every key of it revoked, in one transaction.
#[utoipa::path(
    delete,
    path = "/api/v1/tenants/{id}",
    tag = "tenants",
    operation_id = "delete_tenant",
    params(("id" = Uuid, Path, description = "Tenant id.")),
    responses(
        (status = 204, description = "Deleted; its channels are deleted and its keys revoked."),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn delete_tenant(
    call: OperatorCall,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    lifecycle::delete_tenant(&mut tx, id, call.actor()).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Cancels a delivery that is not final yet.
///
/// `POST /api/v1/deliveries/{id}/cancel`: 200 with the cancelled delivery. Allowed while it is
/// `pending`, `paused`, `failed` (waiting for a retry) or `delivering` (the attempt in flight
/// finishes and changes nothing); 409 once `delivered`, `dead` or already `cancelled`.
#[utoipa::path(
    post,
    path = "/api/v1/deliveries/{id}/cancel",
    tag = "deliveries",
    operation_id = "cancel_delivery",
    params(("id" = Uuid, Path, description = "Delivery id.")),
    responses(
        (status = 200, description = "The delivery, now `cancelled`.", body = Delivery),
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn cancel_delivery(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Delivery>, ApiError> {
    let mut tx = call.begin_audited().await?;
    lifecycle::cancel_delivery(&mut tx, call.tenant_id(), id, call.actor()).await?;
    tx.commit().await?;
    Ok(axum::Json(
        deliveries::get(call.state.pool(), call.tenant_id(), id).await?,
    ))
}

/// Purges a final delivery's payload.
///
/// `DELETE /api/v1/deliveries/{id}/payload`: 204; the payload becomes `null` and
/// `payload_purged_at` is set. Only for a final delivery (`delivered`, `dead`, `cancelled`):
/// 409 otherwise (cancel it first). Purging twice is fine (the second changes nothing).
#[utoipa::path(
    delete,
    path = "/api/v1/deliveries/{id}/payload",
    tag = "deliveries",
    operation_id = "purge_delivery_payload",
    params(("id" = Uuid, Path, description = "Delivery id.")),
    responses(
        (status = 204, description = "Purged (or already purged): the payload is `null` and \
            `payload_purged_at` set."),
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn purge_payload(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = call.begin_audited().await?;
    lifecycle::purge_payload(&mut tx, call.tenant_id(), id, call.actor()).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
