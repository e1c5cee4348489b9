//! Tenant route for a channel's signing secret: `POST /api/v1/channels/{id}/secret/rotate`.

use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::{OptionalJson, Path};
use crate::responses::{ById, JsonBody, TenantAuth};
use crate::AppState;
use axum::routing::post;
use axum::Router;
use breakwater_core::channels::{self, RotatedSecret, DEFAULT_ROTATION_GRACE_MS};
use serde::Deserialize;
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/channels/{id}/secret/rotate", post(rotate))
}

/// Body of `POST /api/v1/channels/{id}/secret/rotate` (optional: no body, or `{}`, is the
/// default grace period).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[schema(as = RotateSecret)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rotate {
    /// How long the old secret keeps signing too, ms: 0 to 604 800 000 (7 days); default
    /// 86 400 000 (24 h).
    #[schema(minimum = 0, maximum = 604800000)]
    grace_ms: Option<i64>,
}

/// Rotates the channel's signing secret, with a grace period for the old one.
///
/// `POST /api/v1/channels/{id}/secret/rotate {grace_ms?}`: a fresh signing secret, shown once in
/// the answer (200 `{channel_id, signing_secret, previous_secret_expires_at}`). For the grace
/// period every request carries `webhook-signature: v1,<new> v1,<old>`, so a receiver holding
/// either secret verifies; after it only `v1,<new>`. Audited as `channel.secret_rotated` (the
/// grace period, never a secret). 404 for another tenant's channel; 422 for a `grace_ms` out of
/// range. See [`channels::rotate_secret`].
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/secret/rotate",
    tag = "channels",
    operation_id = "rotate_channel_secret",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body(content = Option<Rotate>, description = "Optional: no body (or `{}`) is the \
        default grace period of 24 h."),
    responses(
        (status = 200, description = "The new secret (shown once) and until when the old one \
            still signs.", body = RotatedSecret),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn rotate(
    call: TenantCall,
    Path(id): Path<Uuid>,
    OptionalJson(body): OptionalJson<Rotate>,
) -> Result<axum::Json<RotatedSecret>, ApiError> {
    // 404 before validating, so another tenant's id reveals nothing.
    channels::get(call.state.pool(), call.tenant_id(), id).await?;
    let grace_ms = body.grace_ms.unwrap_or(DEFAULT_ROTATION_GRACE_MS);
    let mut tx = call.begin_audited().await?;
    let rotated =
        channels::rotate_secret(&mut tx, call.tenant_id(), id, grace_ms, call.actor()).await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %call.tenant_id(), channel_id = %id, grace_ms, "signing secret rotated");
    Ok(axum::Json(rotated))
}
