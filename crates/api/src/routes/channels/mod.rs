//! Tenant routes for channels: create, list, read; enqueue deliveries to a channel.
//!
//! - this file: the router, and creating, listing, reading and updating a channel;
//! - [`enqueue`]: enqueueing one delivery or a batch to a channel;
//! - [`manual`]: the manual circuit actions (pause, resume), the replay of a window of dead
//!   deliveries and the recover of final deliveries since a time;
//! - [`filter`]: testing a channel's payload filter on a sample message;
//! - [`explain`]: what the channel's breaker and retry policy will do to a dead endpoint, from
//!   its settings alone.

pub(crate) mod enqueue;
pub(crate) mod explain;
pub(crate) mod filter;
pub(crate) mod manual;

pub(crate) use enqueue::{check_payload, idempotency_key, IdempotencyKey};
use enqueue::{enqueue_batch, enqueue_one};
use explain::explain_circuit;
use filter::test_filter;
pub(crate) use manual::{count_committed, manual, ReasonQuery};
use manual::{pause, recover, replay_window, resume};

use super::checked_url;
use crate::call::TenantCall;
use crate::created::Created;
use crate::error::ApiError;
use crate::extract::limit_body;
use crate::extract::{Json, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, Conflict, JsonBody, TenantAuth, WithQuery};
use crate::{ApiConfig, AppState};
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::channels::{self, Channel, ChannelPatch, CreatedChannel, NewChannel};
use breakwater_core::page::Order;
use breakwater_core::retry_policy::{self, PolicyInForce};
use breakwater_core::{circuit, hosts, quotas};
use serde::Serialize;
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
        .route("/api/v1/channels/{id}/recover", post(recover))
        .route(
            "/api/v1/channels/{id}/circuit/explain",
            get(explain_circuit),
        )
        .route(
            "/api/v1/channels/{id}/deliveries",
            limit_body(post(enqueue_one), single_limit),
        )
        .route(
            "/api/v1/channels/{id}/filter/test",
            limit_body(post(test_filter), single_limit),
        )
        .route(
            "/api/v1/channels/{id}/deliveries/batch",
            limit_body(post(enqueue_batch), cfg.max_batch_body_bytes),
        )
}

/// A channel's endpoint, checked ([`checked_url`]), and its host key ([`hosts::host_key`] at the
/// configured granularity). Either refusal is a 422 on `url`.
async fn checked_endpoint(state: &AppState, raw: &str) -> Result<(String, String), ApiError> {
    let settings = state.settings();
    let url = checked_url("url", raw, settings.allow_private_targets).await?;
    let host_key = hosts::host_key(&url, settings.hosts.granularity)
        .map_err(|m| ApiError::invalid("url", m))?;
    Ok((url, host_key))
}

/// An OAuth2 `auth`'s token URL, checked as a channel's URL is ([`checked_url`]: the same SSRF
/// rules) and normalized in place; a refusal is a 422 on `auth.token_url`.
async fn checked_token_url(
    state: &AppState,
    auth: Option<&mut channels::AuthInput>,
) -> Result<(), ApiError> {
    if let Some(url) = auth.and_then(channels::AuthInput::token_url_mut) {
        let allow_private = state.settings().allow_private_targets;
        *url = checked_url("auth.token_url", url, allow_private).await?;
    }
    Ok(())
}

/// Creates a channel. Its signing secret is in the response, shown once.
///
/// 409 `quota_exceeded` (`quota: "channels"`) when the tenant already holds its `channels` quota
/// of live channels (default `api.quota_channels`, 1000): nothing is created.
#[utoipa::path(
    post,
    path = "/api/v1/channels",
    tag = "channels",
    operation_id = "create_channel",
    request_body = NewChannel,
    responses(
        (status = 201, description = "The channel, with its `signing_secret` (shown once).",
            body = CreatedChannel,
            headers(("Location" = String, description = "The new channel: `/api/v1/channels/{id}`."))),
        JsonBody,
        Conflict,
        TenantAuth,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn create(
    call: TenantCall,
    Json(mut new): Json<NewChannel>,
) -> Result<Created<CreatedChannel>, ApiError> {
    let (url, host_key) = checked_endpoint(&call.state, &new.url).await?;
    (new.url, new.host_key) = (url, Some(host_key));
    checked_token_url(&call.state, new.auth.as_mut()).await?;
    let mut tx = call.begin_audited().await?;
    // The quota's check holds the tenant row until the commit: a creation on another node
    // waits, then counts this channel.
    quotas::hold_for_channel(&mut tx, call.tenant_id(), &call.state.quota_defaults()).await?;
    let created = channels::create(&mut tx, call.tenant_id(), &new, call.actor()).await?;
    tx.commit().await?;
    tracing::info!(tenant_id = %call.tenant_id(), channel_id = %created.channel.id, "channel created");
    let location = format!("/api/v1/channels/{}", created.channel.id);
    Ok(Created::at(location, created))
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
        WithQuery<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    call: TenantCall,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<Page<Channel>>, ApiError> {
    let keyset = q.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = channels::list(call.state.pool(), call.tenant_id(), &keyset).await?;
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
    host_circuit_state: Option<hosts::State>,
    /// The retry policy the channel's new deliveries are accepted with: each field the
    /// channel's own (`retry_policy`), else its tenant's default, else the service
    /// configuration's, with where each comes from. Deliveries already accepted keep the policy
    /// they were accepted with.
    retry_policy_in_force: PolicyInForce,
}

/// The channel's cluster-wide concurrency, as the scheduler sees it now.
#[derive(Serialize, utoipa::ToSchema)]
struct ConcurrencyView {
    /// Deliveries of the channel in flight now, on every node.
    in_flight: i32,
    /// Deliveries of the channel waiting for a send (due now or later, parked, held or not):
    /// its backlog.
    waiting: i64,
    /// The adaptive limit in force (it follows the endpoint's own latency), whole deliveries.
    limit: u32,
    /// Its lower bound.
    floor: u32,
    /// Its upper bound: the channel's `max_in_flight`, or the global ceiling; 1 for a `fifo`
    /// channel.
    ceiling: u32,
}

/// The circuit as an operator reads it.
#[derive(Serialize, utoipa::ToSchema)]
struct CircuitView {
    /// `closed` | `open` | `half_open` | `paused`.
    state: circuit::State,
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
    /// Jobs parked by the circuit (the channel's own, or its host's), waiting for release.
    parked: i64,
    /// Deliveries not parked but waiting out the `Retry-After` hold (`retry_after_until`): none
    /// is sent before it ends. 0 without a hold.
    held: i64,
    /// When the next probe may run (open).
    next_probe_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Failed probes in a row.
    probe_failures: i32,
    /// No request before this (Retry-After).
    retry_after_until: Option<chrono::DateTime<chrono::Utc>>,
    /// An operator holds the circuit (paused it or forced it open): the tenant can neither
    /// pause nor resume it (409) until an operator resumes or closes it, or a probe closes it.
    operator_hold: bool,
}

pub(crate) async fn view(state: &AppState, channel: Channel) -> Result<ChannelView, ApiError> {
    let backlog = channels::backlog(state.pool(), &channel).await?;
    let (default_threshold, default_cooldown, _, _) =
        circuit::effective_defaults(state.pool(), &state.settings().circuit).await?;
    let (default_close_after, _) =
        circuit::effective_close_after_successes(state.pool(), &state.settings().circuit).await?;
    let circuit = CircuitView {
        state: channel.circuit_state,
        since: channel.circuit_changed_at,
        consecutive_failures: channel.consecutive_failures,
        failure_threshold: channel.failure_threshold.unwrap_or(default_threshold),
        cooldown_ms: channel.cooldown_ms.unwrap_or(default_cooldown),
        close_after_successes: channel.close_after_successes.unwrap_or(default_close_after),
        trial_successes: if channel.circuit_state == circuit::State::HalfOpen {
            channel.trial_successes
        } else {
            0
        },
        parked: backlog.parked,
        held: backlog.held,
        next_probe_at: channel.next_probe_at,
        probe_failures: channel.probe_failures,
        retry_after_until: channel.retry_after_until,
        operator_hold: channel.operator_hold,
    };
    let limits = &state.settings().channel_limits;
    let group = breakwater_queue::group_state(state.pool(), channel.id)
        .await
        .map_err(breakwater_core::Error::from)?;
    // A fifo channel sends one delivery at a time, whatever its limits say.
    let fifo = channel.ordering == channels::DeliveryOrdering::Fifo;
    let (floor, ceiling) = limits.bounds(channel.max_in_flight, fifo);
    let limit = group.as_ref().and_then(|g| g.concurrency_limit);
    let concurrency = ConcurrencyView {
        in_flight: group.map_or(0, |g| g.in_flight),
        waiting: backlog.waiting,
        limit: limits.cap(limit, channel.max_in_flight, fifo),
        floor,
        ceiling,
    };
    let host_circuit_state = hosts::state_of(state.pool(), channel.host_key.as_deref()).await?;
    let retry_policy_in_force = policy_in_force(state, &channel).await?;
    Ok(ChannelView {
        channel,
        circuit,
        concurrency,
        host_circuit_state,
        retry_policy_in_force,
    })
}

/// The retry policy in force for `channel`: its own, its tenant's default (read now), the
/// service configuration ([`retry_policy::in_force`]).
pub(crate) async fn policy_in_force(
    state: &AppState,
    channel: &Channel,
) -> Result<PolicyInForce, ApiError> {
    let tenant = breakwater_core::tenants::get(state.pool(), channel.tenant_id).await?;
    Ok(retry_policy::in_force(
        channel.retry_policy.as_ref(),
        tenant.retry_policy.as_ref(),
        &state.settings().retry,
    ))
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
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn read(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get(call.state.pool(), call.tenant_id(), id).await?;
    Ok(axum::Json(view(&call.state, channel).await?))
}

/// Changes a channel's settings; absent fields stay as they are.
#[utoipa::path(
    patch,
    path = "/api/v1/channels/{id}",
    tag = "channels",
    operation_id = "update_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    request_body = ChannelPatch,
    responses(
        (status = 200, description = "The channel as it is now.", body = ChannelView),
        JsonBody,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn update(
    call: TenantCall,
    Path(id): Path<Uuid>,
    Json(mut patch): Json<ChannelPatch>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    // 404 before validating, so another tenant's id reveals nothing.
    channels::get(call.state.pool(), call.tenant_id(), id).await?;
    if let Some(raw) = &patch.url {
        let (url, host_key) = checked_endpoint(&call.state, raw).await?;
        (patch.url, patch.host_key) = (Some(url), Some(host_key));
    }
    checked_token_url(&call.state, patch.auth.as_mut().and_then(Option::as_mut)).await?;
    let mut tx = call.begin_audited().await?;
    let channel = channels::update(&mut tx, call.tenant_id(), id, &patch, call.actor()).await?;
    tx.commit().await?;
    Ok(axum::Json(view(&call.state, channel).await?))
}
