//! Tenant routes for channels: create, list, read; enqueue deliveries to a channel.

use super::checked_url;
use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::{Json, ObjectOnly, Path, Query, RequestId};
use crate::openapi::{BadRequest, Conflict, Invalid, JsonBody, NotFound, TenantAuth};
use crate::page::{Page, PageQuery};
use crate::{ApiConfig, AppState};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::channels::{self, Channel, ChannelPatch, CreatedChannel, NewChannel};
use breakwater_core::deliveries::{self, Enqueued, NewDelivery};
use breakwater_core::page::Order;
use breakwater_core::{audit, circuit, hosts, tenants};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

pub fn router(cfg: &ApiConfig) -> Router<AppState> {
    // Body limits: a single delivery may carry a payload of max_payload_bytes plus its envelope
    // (checked precisely below); a batch has its own, larger limit.
    let single_limit = cfg.max_payload_bytes + 16 * 1024;
    Router::new()
        .route("/api/v1/channels", post(create).get(list))
        .route("/api/v1/channels/{id}", get(read).patch(update))
        .route("/api/v1/channels/{id}/pause", post(pause))
        .route("/api/v1/channels/{id}/resume", post(resume))
        .route("/api/v1/channels/{id}/replay", post(replay_window))
        .route(
            "/api/v1/channels/{id}/deliveries",
            post(enqueue_one).layer(DefaultBodyLimit::max(single_limit)),
        )
        .route(
            "/api/v1/channels/{id}/deliveries/batch",
            post(enqueue_batch).layer(DefaultBodyLimit::max(cfg.max_batch_body_bytes)),
        )
}

/// Body of `POST /api/v1/channels`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateChannel {
    /// The endpoint: an absolute `http` or `https` URL without credentials, at most 2048
    /// characters, whose host resolves to public addresses only (unless
    /// `allow_private_targets`).
    #[schema(
        format = "uri",
        max_length = 2048,
        example = "https://example.com/hooks"
    )]
    url: String,
    /// Display name.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Consecutive transient failures that open the circuit (null = the cluster default).
    #[schema(minimum = 1, maximum = 10000)]
    failure_threshold: Option<i32>,
    /// First cooldown of an open circuit before a probe, ms (null = the cluster default).
    #[schema(minimum = 1, maximum = 86400000)]
    cooldown_ms: Option<i64>,
    /// Consecutive successful probe deliveries before a half-open circuit closes: the probe,
    /// then this many minus one trial deliveries, one at a time (null = the cluster default).
    #[schema(minimum = 1, maximum = 100)]
    close_after_successes: Option<i32>,
    /// Replay the channel's recent dead letters when a probe closes its circuit.
    #[serde(default)]
    replay_dead_letters_on_close: bool,
    /// How far back that replay reaches, ms (default 1 h, at most 30 days).
    #[schema(minimum = 1, maximum = 2592000000_i64)]
    replay_window_ms: Option<i64>,
    /// Strict cluster-wide rate limit: `N/s`, `N/m` or `N/h` with N from 1 to 1 000 000
    /// (null = none).
    #[schema(example = "80/s")]
    rate_limit: Option<String>,
    /// Ceiling of the channel's adaptive concurrency, cluster-wide (null = the global one).
    #[schema(minimum = 1, maximum = 10000)]
    max_in_flight: Option<i32>,
    /// Event types the channel receives from `POST /api/v1/messages` (1 to 100; exact match);
    /// absent/null = every type.
    #[schema(value_type = Option<Vec<EventTypeFilter>>, min_items = 1, max_items = 100)]
    event_types: Option<Vec<String>>,
}

/// One event type of a channel's `event_types` filter: 1 to 100 ASCII letters, digits, `.`,
/// `_`, `-`, `:` and `/` (see `breakwater_core::channels::canonical_event_types`).
/// Documentation only: the filter is read as strings and checked by core.
#[derive(utoipa::ToSchema)]
#[schema(pattern = r"^[A-Za-z0-9._:/-]{1,100}$", example = "invoice.paid")]
#[allow(dead_code)]
pub(crate) struct EventTypeFilter(String);

/// Creates a channel. Its signing secret is in the response, shown once.
#[utoipa::path(
    post,
    path = "/api/v1/channels",
    tag = "channels",
    operation_id = "create_channel",
    request_body = CreateChannel,
    responses(
        (status = 201, description = "The channel, with its `signing_secret` (shown once).",
            body = CreatedChannel),
        JsonBody,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn create(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<CreateChannel>,
) -> Result<(StatusCode, axum::Json<CreatedChannel>), ApiError> {
    let url = checked_url("url", &body.url, state.inner.allow_private_targets).await?;
    let host_key = hosts::host_key(&url, state.inner.hosts.granularity)
        .map_err(|m| ApiError::invalid("url", m))?;
    let mut tx = state.begin_audited(&request).await?;
    let created = channels::create(
        &mut tx,
        key.tenant_id,
        &NewChannel {
            url,
            name: body.name,
            failure_threshold: body.failure_threshold,
            cooldown_ms: body.cooldown_ms,
            close_after_successes: body.close_after_successes,
            replay_dead_letters_on_close: body.replay_dead_letters_on_close,
            replay_window_ms: body.replay_window_ms,
            rate_limit: body.rate_limit,
            max_in_flight: body.max_in_flight,
            event_types: body.event_types,
            host_key: Some(host_key),
        },
        &audit::tenant_actor(key.key_id),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %key.tenant_id, channel_id = %created.channel.id, "channel created");
    Ok((StatusCode::CREATED, axum::Json(created)))
}

/// Lists the tenant's channels in creation order (oldest first), paged by cursor.
#[utoipa::path(
    get,
    path = "/api/v1/channels",
    tag = "channels",
    operation_id = "list_channels",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of channels.", body = Page<Channel>),
        BadRequest,
        Invalid,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<Channel>>, ApiError> {
    let keyset = q.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = channels::list(state.pool(), key.tenant_id, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |c| c.id)))
}

/// A channel with its circuit spelled out.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ChannelView {
    /// The channel's fields.
    #[serde(flatten)]
    channel: Channel,
    /// Its circuit breaker.
    circuit: CircuitView,
    /// Its cluster-wide concurrency.
    concurrency: ConcurrencyView,
    /// The state of its host circuit (shared with every channel on `host_key`): `closed` |
    /// `open` | `half_open`; null when the channel has no host key.
    #[schema(value_type = Option<breakwater_core::hosts::State>)]
    host_circuit_state: Option<String>,
}

/// The channel's cluster-wide concurrency, as the scheduler sees it now.
#[derive(Serialize, utoipa::ToSchema)]
struct ConcurrencyView {
    /// Deliveries of the channel in flight now, on every node.
    in_flight: i32,
    /// The adaptive limit in force (AIMD), whole deliveries.
    limit: u32,
    /// Its lower bound.
    floor: u32,
    /// Its upper bound: the channel's `max_in_flight`, or the global ceiling.
    ceiling: u32,
}

/// The circuit as an operator reads it.
#[derive(Serialize, utoipa::ToSchema)]
struct CircuitView {
    /// `closed` | `open` | `half_open` | `paused`.
    #[schema(value_type = circuit::State)]
    state: String,
    /// In this state since.
    since: chrono::DateTime<chrono::Utc>,
    /// Consecutive transient failures (while closed; the count at opening while open).
    consecutive_failures: i32,
    /// Effective threshold (override or global default).
    failure_threshold: i32,
    /// Effective first cooldown, ms.
    cooldown_ms: i64,
    /// Effective consecutive successes a half-open circuit needs to close (override or cluster
    /// default).
    close_after_successes: i32,
    /// Successful probe deliveries so far while half-open (0 in any other state).
    trial_successes: i32,
    /// Jobs parked by the circuit, waiting for release.
    parked: i64,
    /// When the next probe may run (open).
    next_probe_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Failed probes in a row.
    probe_failures: i32,
    /// No request before this (Retry-After).
    retry_after_until: Option<chrono::DateTime<chrono::Utc>>,
}

pub(crate) async fn view(state: &AppState, channel: Channel) -> Result<ChannelView, ApiError> {
    let parked = channels::parked_count(state.pool(), channel.id).await?;
    let (default_threshold, default_cooldown, _, _) =
        circuit::effective_defaults(state.pool(), &state.inner.circuit).await?;
    let (default_close_after, _) =
        circuit::effective_close_after_successes(state.pool(), &state.inner.circuit).await?;
    let circuit = CircuitView {
        state: channel.circuit_state.clone(),
        since: channel.circuit_changed_at,
        consecutive_failures: channel.consecutive_failures,
        failure_threshold: channel.failure_threshold.unwrap_or(default_threshold),
        cooldown_ms: channel.cooldown_ms.unwrap_or(default_cooldown),
        close_after_successes: channel.close_after_successes.unwrap_or(default_close_after),
        trial_successes: if channel.circuit_state == circuit::State::HalfOpen.as_str() {
            channel.trial_successes
        } else {
            0
        },
        parked,
        next_probe_at: channel.next_probe_at,
        probe_failures: channel.probe_failures,
        retry_after_until: channel.retry_after_until,
    };
    let limits = &state.inner.channel_limits;
    let group = breakwater_queue::group_state(state.pool(), channel.id)
        .await
        .map_err(breakwater_core::Error::from)?;
    let ceiling = channel
        .max_in_flight
        .map_or(limits.ceiling, |m| m.max(1) as u32);
    let floor = limits.floor.min(ceiling);
    let raw = group
        .as_ref()
        .and_then(|g| g.concurrency_limit)
        .map_or(limits.initial as f32, |l| l);
    let concurrency = ConcurrencyView {
        in_flight: group.map_or(0, |g| g.in_flight),
        limit: (raw.floor().max(0.0) as u32).clamp(floor, ceiling),
        floor,
        ceiling,
    };
    let host_circuit_state: Option<String> =
        sqlx::query_scalar("SELECT state FROM host_circuits WHERE host_key = $1")
            .bind(&channel.host_key)
            .fetch_optional(state.pool())
            .await?;
    Ok(ChannelView {
        channel,
        circuit,
        concurrency,
        host_circuit_state,
    })
}

/// Reads a channel: its settings, its circuit and its concurrency.
#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    operation_id = "get_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    responses(
        (status = 200, description = "The channel.", body = ChannelView),
        BadRequest,
        NotFound,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn read(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    Ok(axum::Json(view(&state, channel).await?))
}

/// Body of `PATCH /api/v1/channels/{id}`: every field optional; `null` clears an override.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchChannel {
    /// Display name (null removes it).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<String>, max_length = 200)]
    name: Option<Option<String>>,
    /// The endpoint (same rules as at creation).
    #[schema(format = "uri", max_length = 2048)]
    url: Option<String>,
    /// Failure threshold override (null = the cluster default).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    failure_threshold: Option<Option<i32>>,
    /// Cooldown override, ms (null = the cluster default).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400000)]
    cooldown_ms: Option<Option<i64>>,
    /// Consecutive successful probe deliveries before a half-open circuit closes (null = the
    /// cluster default).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 100)]
    close_after_successes: Option<Option<i32>>,
    /// Replay recent dead letters when a probe closes the circuit.
    replay_dead_letters_on_close: Option<bool>,
    /// How far back that replay reaches, ms.
    #[schema(minimum = 1, maximum = 2592000000_i64)]
    replay_window_ms: Option<i64>,
    /// Rate limit `N/s`, `N/m` or `N/h` (null removes it; applies at once to waiting
    /// deliveries).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<String>, example = "80/s")]
    rate_limit: Option<Option<String>>,
    /// Concurrency ceiling (null = the global one).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    max_in_flight: Option<Option<i32>>,
    /// Event types the channel receives from `POST /api/v1/messages` (1 to 100; exact match);
    /// `null` clears the filter (every type).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<Vec<EventTypeFilter>>, min_items = 1, max_items = 100)]
    event_types: Option<Option<Vec<String>>>,
}

/// Changes a channel's settings; absent fields stay as they are.
#[utoipa::path(
    patch,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    operation_id = "update_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body = PatchChannel,
    responses(
        (status = 200, description = "The channel as it is now.", body = ChannelView),
        JsonBody,
        NotFound,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn update(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<PatchChannel>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    // 404 before validating, so another tenant's id reveals nothing.
    channels::get(state.pool(), key.tenant_id, id).await?;
    let url = match &body.url {
        Some(u) => Some(checked_url("url", u, state.inner.allow_private_targets).await?),
        None => None,
    };
    let host_key = match &url {
        Some(u) => Some(
            hosts::host_key(u, state.inner.hosts.granularity)
                .map_err(|m| ApiError::invalid("url", m))?,
        ),
        None => None,
    };
    let patch = ChannelPatch {
        host_key,
        name: body.name,
        url,
        failure_threshold: body.failure_threshold,
        cooldown_ms: body.cooldown_ms,
        close_after_successes: body.close_after_successes,
        replay_dead_letters_on_close: body.replay_dead_letters_on_close,
        replay_window_ms: body.replay_window_ms,
        rate_limit: body.rate_limit,
        max_in_flight: body.max_in_flight,
        event_types: body.event_types,
    };
    let actor = audit::tenant_actor(key.key_id);
    let mut tx = state.begin_audited(&request).await?;
    let channel = channels::update(&mut tx, key.tenant_id, id, &patch, &actor).await?;
    tx.commit().await?;
    Ok(axum::Json(view(&state, channel).await?))
}

/// Body of `POST /api/v1/channels/{id}/deliveries`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnqueueOne {
    /// The event's type, 1 to 200 characters without control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$"
    )]
    #[schema(example = "invoice.paid")]
    event_type: String,
    /// The event's data: any JSON value, at most `api.max_payload_bytes` (256 KiB) as sent.
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

pub(crate) fn check_payload_size(
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
        e.field = Some(field);
        return Err(e);
    }
    Ok(())
}

/// The `Idempotency-Key` header of `POST /api/v1/channels/{id}/deliveries` (documentation only:
/// [`idempotency_key`] reads it).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub(crate) struct IdempotencyKey {
    /// A repeat with the same key (per tenant) returns the first delivery and enqueues nothing;
    /// 1 to 200 visible ASCII characters.
    #[param(rename = "Idempotency-Key", value_type = String, required = false)]
    #[param(min_length = 1, max_length = 200)]
    idempotency_key: Option<String>,
}

pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.to_string())).map_err(|_| {
            ApiError::invalid("idempotency_key", "Idempotency-Key must be visible ASCII")
        }),
    }
}

/// Loads the channel (404 for another tenant's) and the tenant's tier, then enqueues in one
/// transaction.
async fn enqueue(
    state: &AppState,
    key: &tenants::TenantKey,
    channel_id: Uuid,
    items: &[NewDelivery],
) -> Result<Vec<Enqueued>, ApiError> {
    let mut tx = state.pool().begin().await?;
    let channel = channels::get(&mut *tx, key.tenant_id, channel_id).await?;
    let tenant = tenants::get(&mut *tx, key.tenant_id).await?;
    // Hold the channel row (FOR SHARE) until commit: deliveries to an open or paused circuit
    // start `paused` (their jobs are held by the channel's parked job group), and a transition
    // waits for this insert, so a release never misses them.
    // No gate: the channel was deleted while this request waited for its row.
    let gate = circuit::lock_gate(&mut tx, channel.id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel"))?;
    let paused = gate.circuit_state == "open" || gate.circuit_state == "paused";
    let out = deliveries::enqueue(
        &mut tx,
        tenant.id,
        tenant.tier,
        channel.id,
        items,
        state.inner.max_attempts,
        paused,
    )
    .await?;
    tx.commit().await?;
    Ok(out)
}

/// Enqueues one delivery to the channel.
///
/// 202 with the delivery id. With an `Idempotency-Key` already used by this tenant, 202 with the
/// earlier delivery's id and nothing new enqueued.
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
        NotFound,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn enqueue_one(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(channel_id): Path<Uuid>,
    headers: HeaderMap,
    Json(body): Json<EnqueueOne>,
) -> Result<(StatusCode, axum::Json<Accepted>), ApiError> {
    check_payload_size(&state.inner.config, &body.payload, "payload")?;
    let item = NewDelivery {
        event_type: body.event_type,
        payload: body.payload,
        idempotency_key: idempotency_key(&headers)?,
    };
    let out = enqueue(&state, &key, channel_id, std::slice::from_ref(&item)).await?;
    let e = out.into_iter().next().expect("one result per item");
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(Accepted {
            id: e.id,
            status: e.status,
            idempotent_replay: !e.created,
        }),
    ))
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
    /// The event's type, 1 to 200 characters without control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$"
    )]
    #[schema(example = "invoice.paid")]
    event_type: String,
    /// The event's data: any JSON value, at most `api.max_payload_bytes` as sent.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    /// Like the `Idempotency-Key` header: 1 to 200 characters without control characters.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$"
    )]
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
/// invalid item refuses the whole batch (422 naming the item).
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
        NotFound,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn enqueue_batch(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(channel_id): Path<Uuid>,
    Json(body): Json<EnqueueBatch>,
) -> Result<(StatusCode, axum::Json<BatchAccepted>), ApiError> {
    let cfg = &state.inner.config;
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
        check_payload_size(cfg, &d.payload, "payload").map_err(|mut e| {
            e.detail = format!("deliveries[{i}].{}", e.detail);
            e
        })?;
        let item = NewDelivery {
            event_type: d.event_type,
            payload: d.payload,
            idempotency_key: d.idempotency_key,
        };
        deliveries::validate(&item).map_err(|e| {
            let mut api = ApiError::from(e);
            api.detail = format!("deliveries[{i}].{}", api.detail);
            api
        })?;
        items.push(item);
    }
    let out = enqueue(&state, &key, channel_id, &items).await?;
    let data = out
        .into_iter()
        .map(|e| Accepted {
            id: e.id,
            status: e.status,
            idempotent_replay: !e.created,
        })
        .collect();
    Ok((StatusCode::ACCEPTED, axum::Json(BatchAccepted { data })))
}

/// `?reason=` on manual circuit actions (optional; goes to the audit log and the alert).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReasonQuery {
    /// Why, for the audit log and the alert; at most 500 characters.
    #[param(max_length = 500)]
    pub(crate) reason: Option<String>,
}

/// Applies a manual change to the channel and answers with its view. Idempotent: a change that
/// is already in effect changes nothing and audits nothing.
pub(crate) async fn manual(
    state: &AppState,
    request: &RequestId,
    channel: Channel,
    change: circuit::Manual,
    actor: &str,
    reason: Option<String>,
) -> Result<ChannelView, ApiError> {
    let reason = reason.unwrap_or_else(|| format!("{} by {actor}", change.action()));
    if reason.chars().count() > 500 {
        return Err(ApiError::invalid(
            "reason",
            "must be at most 500 characters",
        ));
    }
    let mut tx = state.begin_audited(request).await?;
    circuit::apply_manual(
        &mut tx,
        channel.id,
        change,
        actor,
        &reason,
        &state.inner.circuit,
    )
    .await?;
    tx.commit().await?;
    let channel = channels::get_any(state.pool(), channel.id).await?;
    view(state, channel).await
}

/// Pauses the channel: parks the backlog and pauses the circuit.
///
/// Never probed while paused; new deliveries are accepted and parked. Idempotent. 200 with the
/// channel.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/pause",
    tag = "channels",
    operation_id = "pause_channel",
    params(("id" = Uuid, Path, description = "Channel id."), ReasonQuery),
    responses(
        (status = 200, description = "The channel, paused.", body = ChannelView),
        BadRequest,
        NotFound,
        Invalid,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn pause(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    let actor = audit::tenant_actor(key.key_id);
    Ok(axum::Json(
        manual(
            &state,
            &request,
            channel,
            circuit::Manual::Pause,
            &actor,
            q.reason,
        )
        .await?,
    ))
}

/// Resumes a paused channel: closes its circuit and releases every parked delivery.
///
/// One UPDATE releases the whole backlog. Idempotent. 200 with the channel.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/resume",
    tag = "channels",
    operation_id = "resume_channel",
    params(("id" = Uuid, Path, description = "Channel id."), ReasonQuery),
    responses(
        (status = 200, description = "The channel, resumed.", body = ChannelView),
        BadRequest,
        NotFound,
        Invalid,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn resume(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    let actor = audit::tenant_actor(key.key_id);
    Ok(axum::Json(
        manual(
            &state,
            &request,
            channel,
            circuit::Manual::Resume,
            &actor,
            q.reason,
        )
        .await?,
    ))
}

/// Body of `POST /api/v1/channels/{id}/replay`: the window in which deliveries went dead
/// (RFC 3339; default: the last 24 h up to now).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayWindow {
    /// Start (default: 24 h before `to`).
    from: Option<chrono::DateTime<chrono::Utc>>,
    /// End (default: now); not before `from`.
    to: Option<chrono::DateTime<chrono::Utc>>,
}

/// The deliveries a replay re-enqueued.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Replayed {
    /// How many.
    replayed: usize,
    /// Their ids.
    ids: Vec<Uuid>,
}

/// Replays the channel's dead deliveries from a window.
///
/// Re-enqueues the deliveries that went dead in the window (at most 10 000 per call). 200 with
/// the count and ids. Send `{}` for the last 24 h.
#[utoipa::path(
    post,
    path = "/api/v1/channels/{id}/replay",
    tag = "channels",
    operation_id = "replay_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body = ReplayWindow,
    responses(
        (status = 200, description = "The replayed deliveries.", body = Replayed),
        JsonBody,
        NotFound,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn replay_window(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<ReplayWindow>,
) -> Result<axum::Json<Replayed>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    let mut tx = state.begin_audited(&request).await?;
    // The default window ends at the database's now() (this transaction's), not the node's.
    let to = match body.to {
        Some(to) => to,
        None => breakwater_core::clock::db_now(&mut *tx).await?,
    };
    let from = body.from.unwrap_or(to - chrono::Duration::hours(24));
    if from > to {
        return Err(ApiError::invalid("from", "must not be after `to`"));
    }
    let ids = deliveries::replay(
        &mut tx,
        deliveries::ReplaySelector::ChannelWindow {
            tenant_id: key.tenant_id,
            channel_id: channel.id,
            from,
            to,
        },
        state.inner.max_attempts,
    )
    .await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            tenant_id: Some(key.tenant_id),
            channel_id: Some(channel.id),
            actor: &audit::tenant_actor(key.key_id),
            action: "deliveries.replayed",
            reason: Some("channel replay"),
            details: serde_json::json!({ "replayed": ids.len(), "from": from, "to": to }),
            ..Default::default()
        },
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(Replayed {
        replayed: ids.len(),
        ids,
    }))
}
