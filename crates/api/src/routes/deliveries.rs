//! Tenant routes for deliveries: `GET /api/v1/deliveries/{id}` with its attempts, replay and
//! resend, a channel's delivery list (`GET /api/v1/channels/{id}/deliveries`) and the
//! tenant-wide search (`GET /api/v1/deliveries`).

use super::{list_filter, query_id};
use crate::call::TenantCall;
use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, Conflict, TenantAuth, WithQuery};
use crate::AppState;
use axum::routing::get;
use axum::Router;
use breakwater_core::audit;
use breakwater_core::channels;
use breakwater_core::circuit;
use breakwater_core::deliveries::{self, Attempt, Delivery, DeliverySummary};
use breakwater_core::page::Order;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/deliveries", get(search))
        .route("/api/v1/deliveries/{id}", get(read))
        .route(
            "/api/v1/deliveries/{id}/resend",
            axum::routing::post(resend),
        )
        .route(
            "/api/v1/deliveries/{id}/replay",
            axum::routing::post(replay),
        )
        // The channel's POST (enqueue) on this path is in `channels`; axum merges the methods.
        .route("/api/v1/channels/{id}/deliveries", get(list))
}

/// `?status=&event_type=&since=&until=` of a channel's delivery list (paging: [`PageQuery`]).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only deliveries with this status.
    #[param(value_type = Option<breakwater_core::deliveries::Status>)]
    status: Option<String>,
    /// Only deliveries of this event type (exact match; 1 to 200 visible ASCII characters).
    #[param(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    event_type: Option<String>,
    /// Only deliveries accepted at or after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    since: Option<String>,
    /// Only deliveries accepted before this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    until: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for ListQuery {
    const PAGED: bool = true;
}

/// Lists a channel's deliveries, newest first, without their payloads.
///
/// `GET /api/v1/channels/{id}/deliveries?status=&event_type=&since=&until=&after=&limit=`: the
/// channel's deliveries, newest first by `(created_at, id)`, paged by cursor ([`crate::page`]),
/// without payloads; `since` (inclusive) and `until` (exclusive) bound when they were accepted.
/// Another tenant's channel → 404; an unknown `status`, or a bad `event_type`, `since` or
/// `until` → 422.
#[utoipa::path(
    get,
    path = "/api/v1/channels/{id}/deliveries",
    tag = "deliveries",
    operation_id = "list_channel_deliveries",
    params(("id" = Uuid, Path, description = "Channel id."), ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of deliveries.", body = Page<DeliverySummary>),
        ById<WithQuery<TenantAuth>>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn list(
    call: TenantCall,
    Path(channel_id): Path<Uuid>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<DeliverySummary>>, ApiError> {
    let channel = channels::get(call.state.pool(), call.tenant_id(), channel_id).await?;
    // An empty `status=` is refused like any other value that is not a status, as the
    // operator lists' `state=`: the same empty filter must not mean "all" in one list and a 422
    // in the other.
    let status = list_filter::<deliveries::Status>("status", q.status.as_deref())?;
    if let Some(t) = q.event_type.as_deref() {
        if t.is_empty() || t.len() > 200 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ApiError::invalid(
                "event_type",
                "must be 1 to 200 visible ASCII characters",
            ));
        }
    }
    let filter = deliveries::ListFilter {
        status,
        event_type: q.event_type.as_deref(),
        since: instant("since", q.since.as_deref())?,
        until: instant("until", q.until.as_deref())?,
    };
    let keyset = q.page.keyset::<deliveries::ListKey>(Order::NewestFirst)?;
    let rows = deliveries::list(
        call.state.pool(),
        call.tenant_id(),
        channel.id,
        &filter,
        &keyset,
    )
    .await?;
    Ok(axum::Json(Page::new(rows, &keyset, |d| {
        (d.created_at, d.id)
    })))
}

/// A list's time bound `field`: absent → `None`; an RFC 3339 instant in years 1 to 9999 (what
/// Postgres and the replay window accept alike), else 422 naming `field`. The value is the query
/// string's, decoded: an offset's `+` sent unencoded (`?since=2026-01-01T00:00:00+00:00`) reads
/// as a space there, so a refused value with a space says to send `+` as `%2B`.
pub(crate) fn instant(
    field: &'static str,
    raw: Option<&str>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    use chrono::Datelike;
    let Some(raw) = raw else { return Ok(None) };
    let t = chrono::DateTime::parse_from_rfc3339(raw.trim())
        .map_err(|_| {
            let mut detail = "must be an RFC 3339 instant, e.g. 2026-12-05T10:00:00Z".to_string();
            if raw.trim().contains(' ') {
                detail.push_str(
                    "; a `+` in a query string reads as a space: send it as %2B \
                     (2026-12-05T10:00:00%2B01:00)",
                );
            }
            ApiError::invalid(field, detail)
        })?
        .with_timezone(&chrono::Utc);
    if !(1..=9999).contains(&t.year()) {
        return Err(ApiError::invalid(field, "must be in years 1 to 9999"));
    }
    Ok(Some(t))
}

/// A delivery with every HTTP attempt made for it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DeliveryView {
    /// The delivery's fields.
    #[serde(flatten)]
    delivery: Delivery,
    /// Its attempts, oldest first.
    attempt_log: Vec<Attempt>,
}

impl DeliveryView {
    /// The calling tenant's delivery `id` as it is now, with its attempts (404 for another
    /// tenant's).
    async fn load(call: &TenantCall, id: Uuid) -> Result<Self, ApiError> {
        let delivery = deliveries::get(call.state.pool(), call.tenant_id(), id).await?;
        let attempt_log = deliveries::attempts(call.state.pool(), id).await?;
        Ok(DeliveryView {
            delivery,
            attempt_log,
        })
    }
}

/// Reads a delivery: its status and every attempt.
#[utoipa::path(
    get,
    path = "/api/v1/deliveries/{id}",
    tag = "deliveries",
    operation_id = "get_delivery",
    params(("id" = Uuid, Path, description = "Delivery id (its `webhook-id`).")),
    responses(
        (status = 200, description = "The delivery and its attempts.", body = DeliveryView),
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn read(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DeliveryView>, ApiError> {
    Ok(axum::Json(DeliveryView::load(&call, id).await?))
}

/// Replays one dead delivery.
///
/// Re-enqueues it with a fresh set of attempts. 202 with the delivery; 409 if it is not dead (a
/// delivery never gets a second live job).
#[utoipa::path(
    post,
    path = "/api/v1/deliveries/{id}/replay",
    tag = "deliveries",
    operation_id = "replay_delivery",
    params(("id" = Uuid, Path, description = "Delivery id.")),
    responses(
        (status = 202, description = "Re-enqueued; the delivery as it is now.",
            body = DeliveryView),
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn replay(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<(axum::http::StatusCode, axum::Json<DeliveryView>), ApiError> {
    let delivery = deliveries::get(call.state.pool(), call.tenant_id(), id).await?;
    let channel_id = delivery.summary.channel_id;
    let mut tx = call.begin_audited().await?;
    // Parked or not as an enqueue to its channel; `None`: the channel was deleted (409 below).
    let ids = match circuit::enqueue_parked(&mut tx, channel_id).await? {
        Some(parked) => {
            let one = deliveries::ReplaySelector::One {
                tenant_id: call.tenant_id(),
                channel_id,
                delivery_id: id,
            };
            deliveries::replay(&mut tx, one, parked, call.state.settings().max_attempts).await?
        }
        None => Vec::new(),
    };
    if ids.is_empty() {
        // `not_dead` only for a delivery that is not dead: a client may branch on the code, and
        // a dead delivery of a deleted channel is dead.
        let (code, detail) = if delivery.summary.status != deliveries::Status::Dead {
            let status = delivery.summary.status;
            let detail = format!("delivery is {status}; only dead deliveries can be replayed");
            ("not_dead", detail)
        } else if delivery.payload_purged_at.is_some() {
            let detail = "its payload was purged; a purged delivery cannot be replayed";
            ("conflict", detail.to_string())
        } else {
            let detail = "its channel was deleted; nothing can be sent to it";
            ("conflict", detail.to_string())
        };
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            code,
            detail,
        ));
    }
    let details = serde_json::json!({ "delivery_id": id });
    audited_accepted(&call, tx, channel_id, id, "delivery.replayed", details).await
}

/// The end of a delivery's replay or resend: the audit row of `action` (on the delivery's
/// channel `channel_id`, with `details`) in the call's transaction `tx`, its commit, then 202
/// with the delivery as it now is.
async fn audited_accepted(
    call: &TenantCall,
    mut tx: crate::call::CallTx,
    channel_id: Uuid,
    id: Uuid,
    action: &'static str,
    details: serde_json::Value,
) -> Result<(axum::http::StatusCode, axum::Json<DeliveryView>), ApiError> {
    audit::record(
        &mut *tx,
        &audit::Entry {
            details,
            ..audit::Entry::channel(call.tenant_id(), channel_id, call.actor(), action)
        },
    )
    .await?;
    tx.commit().await?;
    Ok((
        axum::http::StatusCode::ACCEPTED,
        axum::Json(DeliveryView::load(call, id).await?),
    ))
}

/// Resends one final delivery.
///
/// A new attempt series of a `delivered`, `dead` or `cancelled` delivery whose payload still
/// exists: it goes back to `pending` (or `paused`, parked, when its channel's circuit is open or
/// paused: it is sent when the channel resumes or its probe closes the circuit) with a fresh set
/// of attempts. It keeps its id, attempt log and `webhook-id` (the delivery id, or its
/// message's id): Standard Webhooks has `webhook-id` identify the message, so a receiver that
/// deduplicates by it sees the message it already has (README, "Resend and recover"). 202 with
/// the delivery; 409 `not_final` for a delivery still on its way, `payload_purged` once its
/// payload was purged, `conflict` when its channel was deleted. Audited as `delivery.resent`.
#[utoipa::path(
    post,
    path = "/api/v1/deliveries/{id}/resend",
    tag = "deliveries",
    operation_id = "resend_delivery",
    params(("id" = Uuid, Path, description = "Delivery id.")),
    responses(
        (status = 202, description = "Resent (pending, or paused when the channel parks it); \
            the delivery as it is now.", body = DeliveryView),
        Conflict,
        ById<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn resend(
    call: TenantCall,
    Path(id): Path<Uuid>,
) -> Result<(axum::http::StatusCode, axum::Json<DeliveryView>), ApiError> {
    let delivery = deliveries::get(call.state.pool(), call.tenant_id(), id).await?;
    let conflict =
        |code, detail: String| ApiError::new(axum::http::StatusCode::CONFLICT, code, detail);
    let status = delivery.summary.status;
    if !status.is_final() {
        return Err(conflict(
            "not_final",
            format!(
                "delivery is {status}; only a final delivery (delivered, dead or cancelled) can \
                 be resent, this one is still on its way"
            ),
        ));
    }
    if delivery.payload_purged_at.is_some() {
        return Err(conflict(
            "payload_purged",
            "its payload was purged; there is nothing left to resend".to_string(),
        ));
    }
    let channel_id = delivery.summary.channel_id;
    let mut tx = call.begin_audited().await?;
    // Parked or not as an enqueue to its channel; `None`: the channel was deleted.
    let Some(parked) = circuit::enqueue_parked(&mut tx, channel_id).await? else {
        return Err(conflict(
            "conflict",
            "its channel was deleted; nothing can be sent to it".to_string(),
        ));
    };
    let max_attempts = call.state.settings().max_attempts;
    if !deliveries::resend(&mut tx, call.tenant_id(), id, parked, max_attempts).await? {
        // Read above as final with a payload: a concurrent resend, replay or purge won.
        return Err(conflict(
            "conflict",
            "the delivery changed meanwhile (resent, replayed or purged); read it again"
                .to_string(),
        ));
    }
    let details = serde_json::json!({ "delivery_id": id, "was": status, "parked": parked });
    audited_accepted(&call, tx, channel_id, id, "delivery.resent", details).await
}

/// `?event_type=&status=&channel_id=&message_id=&since=&until=` of the tenant-wide delivery
/// search (paging: [`PageQuery`]).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SearchQuery {
    /// Only deliveries with this status.
    #[param(value_type = Option<breakwater_core::deliveries::Status>)]
    status: Option<String>,
    /// Only deliveries of this event type (exact match; 1 to 200 visible ASCII characters).
    #[param(min_length = 1, max_length = 200, pattern = "^[!-~]+$")]
    event_type: Option<String>,
    /// Only deliveries to this channel (another tenant's: an empty page).
    #[param(value_type = Option<Uuid>)]
    channel_id: Option<String>,
    /// Only deliveries of this message (`POST /api/v1/messages`; another tenant's: an empty
    /// page).
    #[param(value_type = Option<Uuid>)]
    message_id: Option<String>,
    /// Only deliveries accepted at or after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    since: Option<String>,
    /// Only deliveries accepted before this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    until: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for SearchQuery {
    const PAGED: bool = true;
}

/// Searches the tenant's deliveries on every channel, newest first, without payloads.
///
/// `GET /api/v1/deliveries?event_type=&status=&channel_id=&message_id=&since=&until=&after=&limit=`:
/// the calling tenant's deliveries, newest first by `(created_at, id)`, paged by cursor as every
/// list; each parameter narrows it, `since` (inclusive) and `until` (exclusive) bound when they
/// were accepted. No filter, a time window, `channel_id`, `message_id` and `status=dead` or
/// `cancelled` read an index range; another `status` and `event_type` filter the tenant's list
/// as it is walked, so a rare match costs more (39 ms for a type at 0.1 % of 1 M rows: docs/api.md,
/// "What a delivery search costs"). Another tenant's channel or message id finds nothing (an empty page, not a 404: a
/// search names no object). An unknown `status`, a bad `event_type`, id or instant, or `since`
/// after `until` → 422.
#[utoipa::path(
    get,
    path = "/api/v1/deliveries",
    tag = "deliveries",
    operation_id = "search_deliveries",
    params(SearchQuery, PageQuery),
    responses(
        (status = 200, description = "A page of deliveries.", body = Page<DeliverySummary>),
        WithQuery<TenantAuth>,
    ),
    security(("tenant_key" = [])),
)]
pub(crate) async fn search(
    call: TenantCall,
    Query(q): Query<SearchQuery>,
) -> Result<axum::Json<Page<DeliverySummary>>, ApiError> {
    let status = list_filter::<deliveries::Status>("status", q.status.as_deref())?;
    if let Some(t) = q.event_type.as_deref() {
        deliveries::check_event_type(t).map_err(|_| {
            ApiError::invalid("event_type", "must be 1 to 200 visible ASCII characters")
        })?;
    }
    let since = instant("since", q.since.as_deref())?;
    let until = instant("until", q.until.as_deref())?;
    if let (Some(s), Some(u)) = (since, until) {
        if s > u {
            return Err(ApiError::invalid("since", "must not be after `until`"));
        }
    }
    let filter = deliveries::SearchFilter {
        status,
        event_type: q.event_type.as_deref(),
        channel_id: query_id("channel_id", q.channel_id.as_deref())?,
        message_id: query_id("message_id", q.message_id.as_deref())?,
        since,
        until,
    };
    let keyset = q.page.keyset::<deliveries::ListKey>(Order::NewestFirst)?;
    let rows = deliveries::search(call.state.pool(), call.tenant_id(), &filter, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |d| {
        (d.created_at, d.id)
    })))
}
