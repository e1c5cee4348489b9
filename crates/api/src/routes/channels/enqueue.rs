//! Enqueueing deliveries to a channel: one (`POST …/deliveries`) or a batch
//! (`POST …/deliveries/batch`), with the channel's park decision at enqueue.

use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::{Json, ObjectOnly, Path};
use crate::responses::{ById, Conflict, JsonBody, TenantAuth};
use crate::ApiConfig;
use axum::http::{HeaderMap, StatusCode};
use breakwater_core::channels;
use breakwater_core::deliveries::{self, Enqueued, NewDelivery};
use breakwater_core::{event_types, quotas};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

/// Body of `POST /api/v1/channels/{id}/deliveries`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnqueueOne {
    /// The event's type, 1 to 200 visible ASCII characters (no spaces).
    #[schema(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    #[schema(example = "invoice.paid")]
    event_type: String,
    /// The event's data: any JSON value, at most `api.max_payload_bytes` (256 KiB) as sent;
    /// valid against the event type's schema when the tenant's catalog gives it one.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
}

/// Response of an accepted delivery.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Accepted {
    /// The delivery id (also its `webhook-id`).
    id: Uuid,
    /// `pending` (or `paused` behind an open circuit) when new; the earlier delivery's status on
    /// an idempotent replay.
    #[schema(value_type = String)]
    status: deliveries::Status,
    /// True when the `Idempotency-Key` matched an earlier delivery, whose id this is.
    idempotent_replay: bool,
}

impl From<Enqueued> for Accepted {
    /// A delivery that was not created is an idempotent replay of an earlier one.
    fn from(e: Enqueued) -> Self {
        Accepted {
            id: e.id,
            status: e.status,
            idempotent_replay: !e.created,
        }
    }
}

/// Checks a delivery's (or message's) `payload` as `field`: at most `api.max_payload_bytes`
/// of JSON text (else 413), with no duplicate key and no lone surrogate anywhere (else 422,
/// [`breakwater_core::deliveries::check_payload_text`]).
pub(crate) fn check_payload(
    cfg: &ApiConfig,
    payload: &RawValue,
    field: &'static str,
) -> Result<(), ApiError> {
    let size = payload.get().len();
    if size > cfg.max_payload_bytes {
        let mut e = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "{field} is {size} bytes; the limit is {} bytes",
                cfg.max_payload_bytes
            ),
        );
        e.field = Some(field.into());
        return Err(e);
    }
    // Stored and signed as given, read back through jsonb: refused where the two would differ.
    breakwater_core::deliveries::check_payload_text(payload.get())
        .map_err(|m| ApiError::invalid(field, m))
}

/// The `Idempotency-Key` header of `POST /api/v1/channels/{id}/deliveries` (documentation only:
/// [`idempotency_key`] reads it).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub(crate) struct IdempotencyKey {
    /// A repeat with the same key (per tenant) returns the first delivery and enqueues nothing;
    /// 1 to 200 visible ASCII characters (no spaces).
    #[param(rename = "Idempotency-Key", value_type = String, required = false)]
    #[param(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    idempotency_key: Option<String>,
}

/// The request's `Idempotency-Key` header, if any (its form is checked by core). More than one
/// → 422 on `idempotency_key` (which one the client meant is not ours to guess); a value that is
/// not visible ASCII → 422 too.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut given = headers.get_all("idempotency-key").iter();
    match (given.next(), given.next()) {
        (None, _) => Ok(None),
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "idempotency_key",
            "send one Idempotency-Key header, not several",
        )),
        (Some(v), None) => v.to_str().map(|s| Some(s.to_string())).map_err(|_| {
            ApiError::invalid("idempotency_key", "Idempotency-Key must be visible ASCII")
        }),
    }
}

/// Loads the channel (404 for another tenant's) and the tenant, checks each item against the
/// tenant's event-type catalog ([`event_types::check_event`]: 422 `schema_violation` on
/// `payload`, or on `event_type` for a refused unknown type), then enqueues in one
/// transaction, which also takes the deliveries from the tenant's delivery quotas (over one:
/// 429 `quota_exceeded`, and nothing is enqueued). A conflict of one item is named as item `i` of `list` when the items came as a
/// list (`deliveries[i].idempotency_key`).
async fn enqueue(
    call: &TenantCall,
    channel_id: Uuid,
    items: &[NewDelivery],
    list: Option<&str>,
) -> Result<Vec<Enqueued>, ApiError> {
    let mut tx = call.begin().await?;
    // The channel through core's enqueue gate (the fan-out's too): its row held FOR SHARE until
    // commit, so a transition waits for this insert and a release never misses it; deliveries
    // to an open or paused circuit start `paused` (held by the channel's parked job group).
    // The tenant comes in the same statement (its tier, catalog and quotas).
    let (channel, tenant) =
        channels::get_locked_for_enqueue(&mut tx, call.tenant_id(), channel_id).await?;
    let paused = channel.circuit_state.parks_new_deliveries();
    // The tenant's event-type catalog: a schema to match, an unknown type to refuse. Costs
    // nothing for a tenant without a catalog (the row just read says so).
    for (i, item) in items.iter().enumerate() {
        event_types::check_event(
            &mut tx,
            call.state.event_types(),
            &tenant,
            &item.event_type,
            &item.payload,
        )
        .await
        .map_err(|e| match list {
            Some(list) => ApiError::from(e).in_item(list, i),
            None => ApiError::from(e),
        })?;
    }
    let out = deliveries::enqueue(
        &mut tx,
        tenant.id,
        tenant.tier,
        channel.id,
        items,
        call.state.settings().max_attempts,
        paused,
    )
    .await
    .map_err(|e| {
        let item = match &e {
            breakwater_core::Error::ItemConflict { index, .. } => Some(*index),
            _ => None,
        };
        match (ApiError::from(e), item.zip(list)) {
            (problem, Some((index, list))) => problem.in_item(list, index),
            (problem, None) => problem,
        }
    })?;
    // Last before the commit: the tenant's delivery quotas, for the deliveries this request
    // created (an idempotent replay creates none). A refusal drops the transaction, so none of
    // them is created; the usage row stays locked until the commit, as briefly as possible.
    let created = out.iter().filter(|e| e.created).count();
    quotas::take_deliveries(&mut tx, &tenant, created, &call.state.quota_defaults()).await?;
    tx.commit().await?;
    Ok(out)
}

/// Enqueues one delivery to the channel.
///
/// 202 with the delivery id. When the tenant's event-type catalog gives `event_type` a JSON
/// Schema, `payload` must match it: else 422 `schema_violation` with `errors` naming the JSON
/// pointer of each failing part (the first 5). An event type not in the catalog is accepted,
/// unless the tenant set `reject_unknown_event_types` (422 on `event_type`). With an `Idempotency-Key` already used by this tenant, 202 with the
/// earlier delivery's id and nothing new enqueued. 429 `quota_exceeded` over the tenant's
/// `deliveries_per_second` or `deliveries_per_day` quota.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/deliveries",
    tag = "channels",
    operation_id = "enqueue_delivery",
    params(
        ("id" = Uuid, Path, description = "Channel id."),
        IdempotencyKey,
    ),
    request_body = EnqueueOne,
    responses(
        (status = 202, description = "Accepted (or an idempotent replay).", body = Accepted,
            links(
                ("GetDelivery" = (operation_id = "get_delivery",
                    parameters(("id" = "$response.body#/id")),
                    description = "The delivery's status and attempts.")),
                ("ReplayDelivery" = (operation_id = "replay_delivery",
                    parameters(("id" = "$response.body#/id")),
                    description = "Replay it once it is dead.")),
                ("CancelDelivery" = (operation_id = "cancel_delivery",
                    parameters(("id" = "$response.body#/id")),
                    description = "Cancel it while it is not final.")),
            )),
        JsonBody,
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn enqueue_one(
    call: TenantCall,
    Path(channel_id): Path<Uuid>,
    headers: HeaderMap,
    Json(body): Json<EnqueueOne>,
) -> Result<(StatusCode, axum::Json<Accepted>), ApiError> {
    check_payload(&call.state.settings().config, &body.payload, "payload")?;
    let item = NewDelivery {
        event_type: body.event_type,
        payload: body.payload,
        idempotency_key: idempotency_key(&headers)?,
    };
    let out = enqueue(&call, channel_id, std::slice::from_ref(&item), None).await?;
    let e = out.into_iter().next().expect("one result per item");
    Ok((StatusCode::ACCEPTED, axum::Json(Accepted::from(e))))
}

/// Body of `POST /api/v1/channels/{id}/deliveries/batch`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnqueueBatch {
    /// 1 to `api.max_batch_size` (1000) deliveries.
    #[schema(value_type = Vec<BatchItem>, min_items = 1, max_items = 1000)]
    deliveries: Vec<ObjectOnly<BatchItem>>,
}

/// One delivery of a batch.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchItem {
    /// The event's type, 1 to 200 visible ASCII characters (no spaces).
    #[schema(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    #[schema(example = "invoice.paid")]
    event_type: String,
    /// The event's data: any JSON value, at most `api.max_payload_bytes` as sent.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    /// Like the `Idempotency-Key` header: 1 to 200 visible ASCII characters (no spaces).
    #[schema(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    idempotency_key: Option<String>,
}

/// The result of a batch: one entry per input, in order.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct BatchAccepted {
    /// One `{id, status, idempotent_replay}` per input, in order.
    data: Vec<Accepted>,
}

/// Enqueues up to 1000 deliveries to the channel in one transaction.
///
/// 202 with one `{id, status, idempotent_replay}` per input, in order. All or nothing: one
/// invalid item refuses the whole batch (422 naming the item), and so does a batch whose new
/// deliveries would take the tenant over its `deliveries_per_second` or `deliveries_per_day`
/// quota (429 `quota_exceeded`; every new delivery counts).
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/deliveries/batch",
    tag = "channels",
    operation_id = "enqueue_delivery_batch",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body = EnqueueBatch,
    responses(
        (status = 202, description = "Accepted, one result per input in order.",
            body = BatchAccepted),
        JsonBody,
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn enqueue_batch(
    call: TenantCall,
    Path(channel_id): Path<Uuid>,
    headers: HeaderMap,
    Json(body): Json<EnqueueBatch>,
) -> Result<(StatusCode, axum::Json<BatchAccepted>), ApiError> {
    // One key for a whole batch would mean nothing per delivery; refused, not ignored.
    if headers.contains_key("idempotency-key") {
        return Err(ApiError::invalid(
            "idempotency_key",
            "a batch takes no Idempotency-Key header: give each delivery its own idempotency_key",
        ));
    }
    let cfg = &call.state.settings().config;
    if body.deliveries.is_empty() || body.deliveries.len() > cfg.max_batch_size {
        return Err(ApiError::invalid(
            "deliveries",
            format!(
                "must hold 1 to {} deliveries, not {}",
                cfg.max_batch_size,
                body.deliveries.len()
            ),
        ));
    }
    let mut items = Vec::with_capacity(body.deliveries.len());
    for (i, ObjectOnly(d)) in body.deliveries.into_iter().enumerate() {
        check_payload(cfg, &d.payload, "payload").map_err(|e| e.in_item("deliveries", i))?;
        let item = NewDelivery {
            event_type: d.event_type,
            payload: d.payload,
            idempotency_key: d.idempotency_key,
        };
        deliveries::validate(&item).map_err(|e| ApiError::from(e).in_item("deliveries", i))?;
        items.push(item);
    }
    let out = enqueue(&call, channel_id, &items, Some("deliveries")).await?;
    let data = out.into_iter().map(Accepted::from).collect();
    Ok((StatusCode::ACCEPTED, axum::Json(BatchAccepted { data })))
}
