//! Operator routes (operator key): every channel's breaker across tenants, force open / close,
//! pause / resume any channel, the cluster-wide circuit defaults, and the whole audit log.

use super::audit::{operator_page, AuditQuery};
use super::channels::{manual, view, ChannelView, ReasonQuery};
use super::{list_filter, path_action, query_id};
use crate::call::OperatorCall;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, Conflict, JsonBody, OperatorAuth, WithQuery};
use crate::AppState;
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::audit::Record;
use breakwater_core::channels::{self, OperatorChannel};
use breakwater_core::circuit::{self, Manual};
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

/// Filters and paging of `GET /api/v1/admin/channels`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only channels whose circuit is in this state.
    #[param(value_type = Option<breakwater_core::circuit::State>)]
    state: Option<String>,
    /// Only this tenant's channels.
    #[param(value_type = Option<Uuid>)]
    tenant_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for ListQuery {
    const PAGED: bool = true;
}

/// Lists every tenant's channels and their breakers.
///
/// Each `url` is its origin only (`https://hooks.example.com:8443`): a receiver's path and query
/// often carry its token, so only the tenant's own views show them (as in the audit log).
#[utoipa::path(
    get,
    path = "/api/v1/admin/channels",
    tag = "operator",
    operation_id = "admin_list_channels",
    params(ListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of channels.", body = Page<OperatorChannel>),
        WithQuery<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn list(
    call: OperatorCall,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<OperatorChannel>>, ApiError> {
    let circuit_state = list_filter::<circuit::State>("state", q.state.as_deref())?;
    let keyset = q.page.keyset::<Uuid>(Order::OldestFirst)?;
    let tenant_id = query_id("tenant_id", q.tenant_id.as_deref())?;
    let rows = channels::list_all(call.state.pool(), circuit_state, tenant_id, &keyset).await?;
    let rows = rows
        .into_iter()
        .map(|row| OperatorChannel {
            channel: row.channel.for_operator(),
            ..row
        })
        .collect();
    Ok(axum::Json(Page::new(rows, &keyset, |c| c.channel.id)))
}

/// Reads any tenant's channel.
///
/// Its `url` is the origin only, as in the list.
#[utoipa::path(
    get,
    path = "/api/v1/admin/channels/{id}",
    tag = "operator",
    operation_id = "admin_get_channel",
    params(("id" = Uuid, Path, description = "Channel id.")),
    responses(
        (status = 200, description = "The channel.", body = ChannelView),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn read(
    call: OperatorCall,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let channel = channels::get_any(call.state.pool(), id)
        .await?
        .for_operator();
    Ok(axum::Json(view(&call.state, channel).await?))
}

/// A manual action on a channel's circuit, by the operator.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // documents the `{action}` path segment, which the handler matches as text
pub(crate) enum AdminAction {
    /// Force the circuit open: park the backlog; probes follow as usual.
    Open,
    /// Force the circuit closed: release the backlog.
    Close,
    /// Pause: park the backlog, never probe.
    Pause,
    /// Resume a paused channel.
    Resume,
}

/// Forces a channel's circuit open or closed, or pauses or resumes it.
///
/// `POST /api/v1/admin/channels/{id}/{open|close|pause|resume}?reason=`: audited as `operator`.
/// Idempotent. Any other action is 404. A pause or an open holds the circuit (`operator_hold`):
/// the tenant can neither pause nor resume the channel until a resume or close here (or a probe
/// after an open) closes it. 409 to resume a channel that is open or half-open, not paused. A
/// close also ends a `Retry-After` hold, in any state; a resume of a pause that began while the
/// circuit was open returns it to `open` with a probe at once (as the tenant's).
#[utoipa::path(
    post,
    path = "/api/v1/admin/channels/{id}/{action}",
    tag = "operator",
    operation_id = "admin_channel_action",
    params(
        ("id" = Uuid, Path, description = "Channel id."),
        ("action" = inline(AdminAction), Path, description = "What to do."),
        ReasonQuery,
    ),
    responses(
        (status = 200, description = "The channel as it is now.", body = ChannelView),
        Conflict,
        ById<WithQuery<OperatorAuth>>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn act(
    call: OperatorCall,
    Path((id, action)): Path<(Uuid, String)>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<ChannelView>, ApiError> {
    let change = path_action(
        &action,
        &[
            ("open", Manual::ForceOpen),
            ("close", Manual::ForceClose),
            ("pause", Manual::Pause),
            ("resume", Manual::Resume),
        ],
    )?;
    let channel = channels::get_any(call.state.pool(), id).await?;
    let by = circuit::ManualBy::Operator;
    Ok(axum::Json(manual(&call, channel, (change, by), q).await?))
}

/// The cluster-wide circuit defaults: the database's value where an operator set one, else the
/// configuration's.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = CircuitDefaults)]
pub(crate) struct Defaults {
    /// Consecutive transient failures that open a circuit.
    failure_threshold: i32,
    /// First cooldown of an open circuit, ms.
    cooldown_ms: i64,
    /// Whether `failure_threshold` comes from an operator's edit (true) or the configuration.
    failure_threshold_overridden: bool,
    /// Whether `cooldown_ms` comes from an operator's edit (true) or the configuration.
    cooldown_ms_overridden: bool,
    /// Consecutive successful probe deliveries a half-open circuit needs to close (1–100).
    close_after_successes: i32,
    /// Whether `close_after_successes` comes from an operator's edit (true) or the
    /// configuration.
    close_after_successes_overridden: bool,
}

async fn read_defaults(state: &AppState) -> Result<Defaults, ApiError> {
    let (failure_threshold, cooldown_ms, failure_threshold_overridden, cooldown_ms_overridden) =
        breakwater_core::circuit::effective_defaults(state.pool(), &state.settings().circuit)
            .await?;
    let (close_after_successes, close_after_successes_overridden) =
        breakwater_core::circuit::effective_close_after_successes(
            state.pool(),
            &state.settings().circuit,
        )
        .await?;
    Ok(Defaults {
        failure_threshold,
        cooldown_ms,
        failure_threshold_overridden,
        cooldown_ms_overridden,
        close_after_successes,
        close_after_successes_overridden,
    })
}

/// Reads the cluster-wide circuit defaults.
#[utoipa::path(
    get,
    path = "/api/v1/admin/circuit-defaults",
    tag = "operator",
    operation_id = "get_circuit_defaults",
    responses(
        (status = 200, description = "The defaults in force.", body = Defaults),
        OperatorAuth,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn defaults(call: OperatorCall) -> Result<axum::Json<Defaults>, ApiError> {
    Ok(axum::Json(read_defaults(&call.state).await?))
}

/// Body of `PATCH /api/v1/admin/circuit-defaults`; `null` returns a value to the configuration's.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetDefaults {
    /// Failure threshold (null = the configuration's).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    failure_threshold: Option<Option<i32>>,
    /// First cooldown, ms (null = the configuration's).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400000)]
    cooldown_ms: Option<Option<i64>>,
    /// Consecutive successes to close (null = the configuration's).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 100)]
    close_after_successes: Option<Option<i32>>,
}

/// Changes the cluster-wide circuit defaults, at run time.
///
/// They apply to every channel without its own override.
#[utoipa::path(
    patch,
    path = "/api/v1/admin/circuit-defaults",
    tag = "operator",
    operation_id = "update_circuit_defaults",
    request_body = SetDefaults,
    responses(
        (status = 200, description = "The defaults in force now.", body = Defaults),
        JsonBody,
        OperatorAuth,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn set_defaults(
    call: OperatorCall,
    Json(body): Json<SetDefaults>,
) -> Result<axum::Json<Defaults>, ApiError> {
    let change = circuit::DefaultsChange {
        failure_threshold: body.failure_threshold,
        cooldown_ms: body.cooldown_ms,
        close_after_successes: body.close_after_successes,
    };
    let mut tx = call.begin_audited().await?;
    // Checks the ranges (a 422 naming the field rolls the transaction back: nothing written) and
    // audits what changed, if anything did.
    circuit::set_defaults(
        &mut tx,
        &change,
        &call.state.settings().circuit,
        call.actor(),
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(read_defaults(&call.state).await?))
}

/// Reads the whole audit log, newest first.
///
/// `GET /api/v1/admin/audit?tenant_id=&channel_id=&after=&limit=`.
#[utoipa::path(
    get,
    path = "/api/v1/admin/audit",
    tag = "operator",
    operation_id = "admin_list_audit",
    params(AuditQuery, PageQuery),
    responses(
        (status = 200, description = "A page of audit entries.", body = Page<Record>),
        WithQuery<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn audit_log(
    call: OperatorCall,
    Query(q): Query<AuditQuery>,
) -> Result<axum::Json<Page<Record>>, ApiError> {
    Ok(axum::Json(operator_page(&call.state, &q).await?))
}
