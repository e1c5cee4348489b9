//! Tenant routes for deliveries: `GET /api/v1/deliveries/{id}` with its attempts, replay, and
//! a channel's delivery list (`GET /api/v1/channels/{id}/deliveries`).

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::{Path, Query, RequestId};
use crate::page::{Page, PageQuery};
use crate::AppState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use breakwater_core::audit;
use breakwater_core::channels;
use breakwater_core::deliveries::{self, Attempt, Delivery, DeliverySummary};
use breakwater_core::page::Order;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/deliveries/{id}", get(read))
        .route(
            "/api/v1/deliveries/{id}/replay",
            axum::routing::post(replay),
        )
        // The channel's POST (enqueue) on this path is in `channels`; axum merges the methods.
        .route("/api/v1/channels/{id}/deliveries", get(list))
}

/// `?status=&after=&limit=` of a channel's delivery list.
#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

/// `GET /api/v1/channels/{id}/deliveries?status=&after=&limit=`: the channel's deliveries,
/// newest first by `(created_at, id)`, paged by cursor ([`crate::page`]), without payloads.
/// Another tenant's channel → 404; an unknown `status` → 422.
async fn list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(channel_id): Path<Uuid>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<DeliverySummary>>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, channel_id).await?;
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some(s) if deliveries::STATUSES.contains(&s) => Some(s),
        Some(_) => {
            return Err(ApiError::invalid(
                "status",
                format!("must be one of {}", deliveries::STATUSES.join(", ")),
            ))
        }
    };
    let keyset = q.page.keyset::<deliveries::ListKey>(Order::NewestFirst)?;
    let rows = deliveries::list(state.pool(), key.tenant_id, channel.id, status, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |d| {
        (d.created_at, d.id)
    })))
}

#[derive(Serialize)]
struct DeliveryView {
    #[serde(flatten)]
    delivery: Delivery,
    attempt_log: Vec<Attempt>,
}

async fn read(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DeliveryView>, ApiError> {
    let delivery = deliveries::get(state.pool(), key.tenant_id, id).await?;
    let attempt_log = deliveries::attempts(state.pool(), id).await?;
    Ok(axum::Json(DeliveryView {
        delivery,
        attempt_log,
    }))
}

/// `POST /api/v1/deliveries/{id}/replay`: re-enqueues one dead delivery. 202 with the delivery;
/// 409 if it is not dead (a delivery never gets a second live job).
async fn replay(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
) -> Result<(axum::http::StatusCode, axum::Json<DeliveryView>), ApiError> {
    let delivery = deliveries::get(state.pool(), key.tenant_id, id).await?;
    let mut tx = state.begin_audited(&request).await?;
    let ids = deliveries::replay(
        &mut tx,
        deliveries::ReplaySelector::One {
            tenant_id: key.tenant_id,
            delivery_id: id,
        },
        state.inner.max_attempts,
    )
    .await?;
    if ids.is_empty() {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "not_dead",
            format!(
                "delivery is {}; only dead deliveries can be replayed",
                delivery.status
            ),
        ));
    }
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(key.tenant_id),
            channel_id: Some(delivery.channel_id),
            actor: &audit::tenant_actor(key.key_id),
            action: "delivery.replayed",
            details: serde_json::json!({ "delivery_id": id }),
            ..Default::default()
        },
    )
    .await?;
    tx.commit().await?;
    let delivery = deliveries::get(state.pool(), key.tenant_id, id).await?;
    let attempt_log = deliveries::attempts(state.pool(), id).await?;
    Ok((
        axum::http::StatusCode::ACCEPTED,
        axum::Json(DeliveryView {
            delivery,
            attempt_log,
        }),
    ))
}
