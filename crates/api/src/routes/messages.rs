//! Tenant routes for messages: `POST /api/v1/messages` fans one event out to every subscribed
//! channel; `GET /api/v1/messages/{id}` shows each channel's delivery. See
//! [`breakwater_core::messages`] for the rules (subscriptions, one transaction, `webhook-id`).

use super::channels::{check_payload, idempotency_key, IdempotencyKey};
use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::limit_body;
use crate::extract::{Json, Path};
use crate::responses::{ById, Conflict, JsonBody, TenantAuth};
use crate::{ApiConfig, AppState};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::messages::{self, FannedOut, Message, NewMessage};
use breakwater_core::{event_types, quotas, tenants};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

pub fn router(cfg: &ApiConfig) -> Router<AppState> {
    // A payload of max_payload_bytes plus its envelope and up to 1000 channel ids (≈ 40 KiB).
    let limit = cfg.max_payload_bytes + 64 * 1024;
    Router::new()
        .route("/api/v1/messages", limit_body(post(send), limit))
        .route("/api/v1/messages/{id}", get(read))
}

/// Body of `POST /api/v1/messages`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendMessage {
    /// The event's type, 1 to 200 visible ASCII characters (no spaces; matched against each
    /// channel's `event_types`: an exact name, or a prefix wildcard such as `invoice.*`). When
    /// the tenant's catalog gives the type a schema, `payload` must be valid against it (422
    /// `schema_violation`).
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[!-~]+$",
        example = "invoice.paid"
    )]
    event_type: String,
    /// The event's data: any JSON value, at most `api.max_payload_bytes` as sent.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    /// Only these channels (of those whose filter matches), 1 to 1000 of the tenant's channel
    /// ids; absent = every subscribed channel.
    #[schema(min_items = 1, max_items = 1000)]
    channels: Option<Vec<Uuid>>,
}

/// Response of `POST /api/v1/messages`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct MessageAccepted {
    /// The message id: the `webhook-id` of every delivery of it.
    id: Uuid,
    event_type: String,
    created_at: DateTime<Utc>,
    /// True when the `Idempotency-Key` matched an earlier message, whose id and deliveries
    /// (with their current status) these are; nothing new was enqueued.
    idempotent_replay: bool,
    /// `{channel_id, delivery_id, status}` per subscribed channel, by channel id.
    deliveries: Vec<FannedOut>,
}

/// Sends one event to every channel that subscribes to its type.
///
/// `POST /api/v1/messages` (tenant key; optional `Idempotency-Key` header, up to 200 visible
/// ASCII characters, unique per tenant among messages): 202 with the message id and one delivery
/// per channel whose `event_types` filter matches (channels without a filter get every type)
/// and whose payload `filter` (JSON Logic over `{event_type, payload}`), if any, is truthy,
/// limited to `channels` when given. No subscribed channel: 202 with no deliveries. Errors: 422
/// `schema_violation` when the tenant's event-type catalog gives the type a JSON Schema that
/// `payload` fails (`errors` names the JSON pointer of each failing part, the first 5), 422 on
/// `event_type` for a type not in the catalog when the tenant sets
/// `reject_unknown_event_types`, 422 for a bad field or a `channels` id that is not one of the tenant's channels (field
/// `channels`; the same for another tenant's id as for a missing one), 422 on `payload` when
/// the channels' filters take longer than 500 ms in all to evaluate on it (nothing is sent),
/// 413 for a payload over
/// `api.max_payload_bytes`, 409 for an idempotency key reused with another request. One
/// transaction, a bounded number of statements whatever the number of channels; it counts as
/// one request against the tenant's ingress limit, and as one delivery per channel against its
/// `deliveries_per_second` and `deliveries_per_day` quotas: a fan-out over either is refused
/// whole (429 `quota_exceeded`, no delivery created). Not audited: like an enqueue, the message and
/// its deliveries are their own record.
#[utoipa::path(
    post,
    path = "/api/v1/messages",
    tag = "messages",
    operation_id = "send_message",
    params(IdempotencyKey),
    request_body = SendMessage,
    responses(
        (status = 202, description = "Accepted (or an idempotent replay): the message id and \
            one delivery per subscribed channel.", body = MessageAccepted,
            links(
                ("GetMessage" = (operation_id = "get_message",
                    parameters(("id" = "$response.body#/id")),
                    description = "The message and each channel's delivery.")),
            )),
        JsonBody,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn send(
    call: TenantCall,
    headers: HeaderMap,
    Json(body): Json<SendMessage>,
) -> Result<(StatusCode, axum::Json<MessageAccepted>), ApiError> {
    check_payload(&call.state.settings().config, &body.payload, "payload")?;
    let message = NewMessage {
        event_type: body.event_type,
        payload: body.payload,
        idempotency_key: idempotency_key(&headers)?,
        channels: body.channels,
    };
    messages::validate(&message)?;
    let mut tx = call.begin().await?;
    let tenant = tenants::get(&mut *tx, call.tenant_id()).await?;
    // The tenant's event-type catalog, checked once for the message (not per channel).
    event_types::check_event(
        &mut tx,
        call.state.event_types(),
        &tenant,
        &message.event_type,
        &message.payload,
    )
    .await?;
    let sent = messages::send(
        &mut tx,
        tenant.id,
        tenant.tier,
        &message,
        call.state.settings().max_attempts,
    )
    .await?;
    // Every delivery of the fan-out counts against the tenant's delivery quotas, taken last
    // before the commit: over one, the transaction is dropped and no delivery is created.
    let created = if sent.created {
        sent.deliveries.len()
    } else {
        0
    };
    quotas::take_deliveries(&mut tx, &tenant, created, &call.state.quota_defaults()).await?;
    tx.commit().await?;
    if sent.created {
        tracing::info!(
            tenant_id = %call.tenant_id(), message_id = %sent.id, deliveries = sent.deliveries.len(),
            "message fanned out"
        );
    }
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(MessageAccepted {
            id: sent.id,
            event_type: message.event_type,
            created_at: sent.created_at,
            idempotent_replay: !sent.created,
            deliveries: sent.deliveries,
        }),
    ))
}

/// Reads a message and each channel's delivery of it.
///
/// `GET /api/v1/messages/{id}`: the message (event type, payload, idempotency key, the channels
/// it named) and each channel's delivery with its status, attempts and last error. 404 for
/// another tenant's message.
#[utoipa::path(
    get,
    path = "/api/v1/messages/{id}",
    tag = "messages",
    operation_id = "get_message",
    params(("id" = Uuid, Path, description = "Message id (the `webhook-id` of its deliveries).")),
    responses(
        (status = 200, description = "The message and each channel's delivery.", body = Message),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn read(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Message>, ApiError> {
    let mut conn = call.state.pool().acquire().await?;
    Ok(axum::Json(
        messages::get(&mut conn, call.tenant_id(), id).await?,
    ))
}
