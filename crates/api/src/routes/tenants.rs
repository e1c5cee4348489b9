//! Operator routes for tenants: `POST /api/v1/tenants`.

use super::checked_url;
use crate::auth::Operator;
use crate::error::ApiError;
use crate::extract::Json;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use breakwater_core::tenants::{self, CreatedTenant, NewTenant};
use breakwater_core::Tier;
use serde::Deserialize;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/tenants", post(create))
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
    let mut conn = state.pool().acquire().await?;
    let created = tenants::create(
        &mut conn,
        &NewTenant {
            name: body.name,
            tier,
            alert_url,
        },
    )
    .await?;
    tracing::info!(tenant_id = %created.tenant.id, tier = %created.tenant.tier, "tenant created");
    Ok((StatusCode::CREATED, axum::Json(created)))
}
