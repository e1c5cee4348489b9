//! Tenant routes for channels: create, list, read; enqueue deliveries to a channel.

use super::checked_url;
use crate::auth::Tenant;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query, RequestId};
use crate::page::{Page, PageQuery};
use crate::{ApiConfig, AppState};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::channels::{self, Channel, ChannelPatch, CreatedChannel, NewChannel};
use breakwater_core::deliveries::{self, Enqueued, NewDelivery};
use breakwater_core::page::Order;
use breakwater_core::{audit, circuit, tenants};
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
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateChannel {
    url: String,
    name: Option<String>,
    failure_threshold: Option<i32>,
    cooldown_ms: Option<i64>,
    #[serde(default)]
    replay_dead_letters_on_close: bool,
    replay_window_ms: Option<i64>,
    rate_limit: Option<String>,
    max_in_flight: Option<i32>,
}

async fn create(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<CreateChannel>,
) -> Result<(StatusCode, axum::Json<CreatedChannel>), ApiError> {
    let url = checked_url("url", &body.url, state.inner.allow_private_targets).await?;
    let mut tx = state.begin_audited(&request).await?;
    let created = channels::create(
        &mut tx,
        key.tenant_id,
        &NewChannel {
            url,
            name: body.name,
            failure_threshold: body.failure_threshold,
            cooldown_ms: body.cooldown_ms,
            replay_dead_letters_on_close: body.replay_dead_letters_on_close,
            replay_window_ms: body.replay_window_ms,
            rate_limit: body.rate_limit,
            max_in_flight: body.max_in_flight,
        },
        &audit::tenant_actor(key.key_id),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %key.tenant_id, channel_id = %created.channel.id, "channel created");
    Ok((StatusCode::CREATED, axum::Json(created)))
}

/// `GET /api/v1/channels?after=&limit=`: the tenant's channels in creation order (oldest
/// first), paged by cursor ([`crate::page`]).
async fn list(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<Channel>>, ApiError> {
    let keyset = q.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = channels::list(state.pool(), key.tenant_id, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |c| c.id)))
}

/// A channel with its circuit spelled out.
#[derive(Serialize)]
pub(crate) struct ChannelView {
    #[serde(flatten)]
    channel: Channel,
    circuit: CircuitView,
    concurrency: ConcurrencyView,
}

/// The channel's cluster-wide concurrency, as the scheduler sees it now.
#[derive(Serialize)]
struct ConcurrencyView {
    /// Deliveries of the channel in flight now, on every node.
    in_flight: i32,
    /// The adaptive limit in force (AIMD), whole deliveries.
    limit: u32,
    /// Its bounds: the floor and the ceiling (the channel's `max_in_flight`, or the global one).
    floor: u32,
    ceiling: u32,
}

/// The circuit as an operator reads it.
#[derive(Serialize)]
struct CircuitView {
    /// `closed` | `open` | `half_open` | `paused`.
    state: String,
    /// In this state since.
    since: chrono::DateTime<chrono::Utc>,
    /// Consecutive transient failures (while closed; the count at opening while open).
    consecutive_failures: i32,
    /// Effective threshold (override or global default).
    failure_threshold: i32,
    /// Effective first cooldown, ms.
    cooldown_ms: i64,
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
    let circuit = CircuitView {
        state: channel.circuit_state.clone(),
        since: channel.circuit_changed_at,
        consecutive_failures: channel.consecutive_failures,
        failure_threshold: channel.failure_threshold.unwrap_or(default_threshold),
        cooldown_ms: channel.cooldown_ms.unwrap_or(default_cooldown),
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
    Ok(ChannelView {
        channel,
        circuit,
        concurrency,
    })
}

async fn read(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    Ok(axum::Json(view(&state, channel).await?))
}

/// Body of `PATCH /api/v1/channels/{id}`: every field optional; `null` clears an override.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchChannel {
    #[serde(default, deserialize_with = "super::nullable")]
    name: Option<Option<String>>,
    url: Option<String>,
    #[serde(default, deserialize_with = "super::nullable")]
    failure_threshold: Option<Option<i32>>,
    #[serde(default, deserialize_with = "super::nullable")]
    cooldown_ms: Option<Option<i64>>,
    replay_dead_letters_on_close: Option<bool>,
    replay_window_ms: Option<i64>,
    #[serde(default, deserialize_with = "super::nullable")]
    rate_limit: Option<Option<String>>,
    #[serde(default, deserialize_with = "super::nullable")]
    max_in_flight: Option<Option<i32>>,
}

async fn update(
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
    let patch = ChannelPatch {
        name: body.name,
        url,
        failure_threshold: body.failure_threshold,
        cooldown_ms: body.cooldown_ms,
        replay_dead_letters_on_close: body.replay_dead_letters_on_close,
        replay_window_ms: body.replay_window_ms,
        rate_limit: body.rate_limit,
        max_in_flight: body.max_in_flight,
    };
    let actor = audit::tenant_actor(key.key_id);
    let mut tx = state.begin_audited(&request).await?;
    let channel = channels::update(&mut tx, key.tenant_id, id, &patch, &actor).await?;
    tx.commit().await?;
    Ok(axum::Json(view(&state, channel).await?))
}

/// Body of `POST /api/v1/channels/{id}/deliveries`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueOne {
    event_type: String,
    payload: Box<RawValue>,
}

/// Response of an accepted delivery.
#[derive(Serialize)]
struct Accepted {
    id: Uuid,
    /// `pending` (or `paused` behind an open circuit) when new; the earlier delivery's status on
    /// an idempotent replay.
    status: String,
    /// True when the `Idempotency-Key` matched an earlier delivery, whose id this is.
    idempotent_replay: bool,
}

fn check_payload_size(
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

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
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
    let gate = circuit::lock_gate(&mut tx, channel.id).await?;
    let paused = gate.is_some_and(|g| g.circuit_state == "open" || g.circuit_state == "paused");
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

/// 202 with the delivery id. With an `Idempotency-Key` already used by this tenant, 202 with the
/// earlier delivery's id and nothing new enqueued.
async fn enqueue_one(
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
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnqueueBatch {
    deliveries: Vec<BatchItem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchItem {
    event_type: String,
    payload: Box<RawValue>,
    idempotency_key: Option<String>,
}

#[derive(Serialize)]
struct BatchAccepted {
    data: Vec<Accepted>,
}

/// 202 with one `{id, status, idempotent_replay}` per input, in order. All or nothing: one
/// invalid item refuses the whole batch (422 naming the item).
async fn enqueue_batch(
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
    for (i, d) in body.deliveries.into_iter().enumerate() {
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
#[derive(Deserialize)]
pub(crate) struct ReasonQuery {
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

/// `POST /api/v1/channels/{id}/pause`: parks the backlog and pauses the circuit (never probed;
/// new deliveries are accepted and parked). 200 with the channel.
async fn pause(
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

/// `POST /api/v1/channels/{id}/resume`: closes a paused circuit and releases every parked job in
/// one UPDATE. 200 with the channel.
async fn resume(
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
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReplayWindow {
    from: Option<chrono::DateTime<chrono::Utc>>,
    to: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Serialize)]
struct Replayed {
    replayed: usize,
    ids: Vec<Uuid>,
}

/// Re-enqueues the channel's dead deliveries from a window (at most 10 000 per call). 200 with
/// the count and ids.
async fn replay_window(
    Tenant(key): Tenant,
    State(state): State<AppState>,
    request: RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<ReplayWindow>,
) -> Result<axum::Json<Replayed>, ApiError> {
    let channel = channels::get(state.pool(), key.tenant_id, id).await?;
    let to = body.to.unwrap_or_else(chrono::Utc::now);
    let from = body.from.unwrap_or(to - chrono::Duration::hours(24));
    if from > to {
        return Err(ApiError::invalid("from", "must not be after `to`"));
    }
    let mut tx = state.begin_audited(&request).await?;
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
