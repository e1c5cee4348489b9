//! Operator routes (operator key): every channel's breaker across tenants, force open / close,
//! pause / resume any channel, the cluster-wide circuit defaults, and the whole audit log.

use super::audit::{page, AuditQuery};
use super::channels::{manual, view, ChannelView, ReasonQuery};
use crate::auth::Operator;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query, RequestId};
use crate::page::{Page, PageQuery};
use crate::AppState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::audit::{self, Record, ACTOR_OPERATOR};
use breakwater_core::channels::{self, OperatorChannel};
use breakwater_core::circuit::Manual;
use breakwater_core::page::Order;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/admin/channels", get(list))
        .route("/api/v1/admin/channels/{id}", get(read))
        .route("/api/v1/admin/channels/{id}/{action}", post(act))
        .route(
            "/api/v1/admin/circuit-defaults",
            get(defaults).patch(set_defaults),
        )
        .route("/api/v1/admin/audit", get(audit_log))
}

#[derive(Deserialize)]
struct ListQuery {
    state: Option<String>,
    tenant_id: Option<Uuid>,
    #[serde(flatten)]
    page: PageQuery,
}

/// `GET /api/v1/admin/channels?state=&tenant_id=&after=&limit=`: every channel's breaker, in
/// creation order, paged by cursor ([`crate::page`]).
async fn list(
    _: Operator,
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<OperatorChannel>>, ApiError> {
    if let Some(s) = &q.state {
        breakwater_core::circuit::State::parse(s).map_err(|_| {
            ApiError::invalid("state", "must be one of closed, open, half_open, paused")
        })?;
    }
    let keyset = q.page.keyset::<Uuid>(Order::OldestFirst)?;
    let rows = channels::list_all(state.pool(), q.state.as_deref(), q.tenant_id, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |c| c.channel.id)))
}

async fn read(
    _: Operator,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get_any(state.pool(), id).await?;
    Ok(axum::Json(view(&state, channel).await?))
}

/// `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
async fn act(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Path((id, action)): Path<(Uuid, String)>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let change = match action.as_str() {
        "open" => Manual::ForceOpen,
        "close" => Manual::ForceClose,
        "pause" => Manual::Pause,
        "resume" => Manual::Resume,
        _ => {
            return Err(ApiError::not_found(
                "action (one of open, close, pause, resume)",
            ))
        }
    };
    let channel = channels::get_any(state.pool(), id).await?;
    Ok(axum::Json(
        manual(&state, &request, channel, change, ACTOR_OPERATOR, q.reason).await?,
    ))
}

/// The cluster-wide circuit defaults: the database's value where an operator set one, else the
/// configuration's.
#[derive(Serialize)]
struct Defaults {
    failure_threshold: i32,
    cooldown_ms: i64,
    /// Whether each value comes from an operator's edit (true) or the configuration (false).
    failure_threshold_overridden: bool,
    cooldown_ms_overridden: bool,
}

async fn read_defaults(state: &AppState) -> Result<Defaults, ApiError> {
    let (failure_threshold, cooldown_ms, failure_threshold_overridden, cooldown_ms_overridden) =
        breakwater_core::circuit::effective_defaults(state.pool(), &state.inner.circuit).await?;
    Ok(Defaults {
        failure_threshold,
        cooldown_ms,
        failure_threshold_overridden,
        cooldown_ms_overridden,
    })
}

async fn defaults(
    _: Operator,
    State(state): State<AppState>,
) -> Result<axum::Json<Defaults>, ApiError> {
    Ok(axum::Json(read_defaults(&state).await?))
}

/// Body of `PATCH /api/v1/admin/circuit-defaults`; `null` returns a value to the configuration's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetDefaults {
    #[serde(default, deserialize_with = "super::nullable")]
    failure_threshold: Option<Option<i32>>,
    #[serde(default, deserialize_with = "super::nullable")]
    cooldown_ms: Option<Option<i64>>,
}

async fn set_defaults(
    _: Operator,
    State(state): State<AppState>,
    request: RequestId,
    Json(body): Json<SetDefaults>,
) -> Result<axum::Json<Defaults>, ApiError> {
    if body
        .failure_threshold
        .flatten()
        .is_some_and(|t| !(1..=10_000).contains(&t))
    {
        return Err(ApiError::invalid(
            "failure_threshold",
            "must be between 1 and 10000",
        ));
    }
    if body
        .cooldown_ms
        .flatten()
        .is_some_and(|c| !(1..=86_400_000).contains(&c))
    {
        return Err(ApiError::invalid(
            "cooldown_ms",
            "must be between 1 and 86400000 (24 h)",
        ));
    }
    let before = read_defaults(&state).await?;
    let mut tx = state.begin_audited(&request).await?;
    sqlx::query(
        "UPDATE circuit_defaults SET
            failure_threshold = CASE WHEN $1 THEN $2 ELSE failure_threshold END,
            cooldown_ms = CASE WHEN $3 THEN $4 ELSE cooldown_ms END,
            updated_at = now()",
    )
    .bind(body.failure_threshold.is_some())
    .bind(body.failure_threshold.flatten())
    .bind(body.cooldown_ms.is_some())
    .bind(body.cooldown_ms.flatten())
    .execute(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            actor: ACTOR_OPERATOR,
            action: "circuit_defaults.changed",
            // Old: the values in force (an override or the configuration's); new: what was
            // set (`null` returns a value to the configuration's).
            details: serde_json::json!({
                "old": { "failure_threshold": before.failure_threshold, "cooldown_ms": before.cooldown_ms },
                "new": { "failure_threshold": body.failure_threshold, "cooldown_ms": body.cooldown_ms },
            }),
            ..Default::default()
        },
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(read_defaults(&state).await?))
}

/// `GET /api/v1/admin/audit?tenant_id=&channel_id=&after=&limit=`: the whole audit log, newest
/// first, paged by cursor.
async fn audit_log(
    _: Operator,
    State(state): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<axum::Json<Page<Record>>, ApiError> {
    Ok(axum::Json(page(&state, q.tenant_id, &q).await?))
}
