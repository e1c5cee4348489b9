//! Operator routes for host circuits (operator key): list and read every host's circuit, force
//! one open or closed, and override its threshold, cooldown and in-flight cap. See
//! [`breakwater_core::hosts`] for what a host circuit is.

use super::channels::{count_committed, ReasonQuery};
use super::{list_filter, path_action};
use crate::call::OperatorCall;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::page::{Page, PageQuery};
use crate::responses::{ById, JsonBody, OperatorAuth, WithQuery};
use crate::AppState;
use axum::routing::{get, post};
use axum::Router;
use breakwater_core::hosts::{self, HostCircuit, Manual, Overrides};
use breakwater_core::page::Order;
use serde::Deserialize;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/admin/hosts", get(list))
        .route("/api/v1/admin/hosts/{host}", get(read).patch(update))
        .route("/api/v1/admin/hosts/{host}/{action}", post(act))
}

/// Filters and paging of `GET /api/v1/admin/hosts`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HostListQuery {
    /// Only hosts whose circuit is in this state.
    #[param(value_type = Option<hosts::State>)]
    state: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageQuery,
}

impl crate::extract::QueryParams for HostListQuery {
    const PAGED: bool = true;
}

/// Lists host circuits by host key: state, channels, parked jobs, in flight and cap.
#[utoipa::path(
    get,
    path = "/api/v1/admin/hosts",
    tag = "operator",
    operation_id = "admin_list_hosts",
    params(HostListQuery, PageQuery),
    responses(
        (status = 200, description = "A page of host circuits.", body = Page<HostCircuit>),
        WithQuery<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn list(
    call: OperatorCall,
    Query(q): Query<HostListQuery>,
) -> Result<axum::Json<Page<HostCircuit>>, ApiError> {
    let host_state = list_filter::<hosts::State>("state", q.state.as_deref())?;
    let keyset = q.page.keyset::<String>(Order::OldestFirst)?;
    let mut conn = call.state.pool().acquire().await?;
    let rows = hosts::list(&mut conn, host_state, &call.state.settings().hosts, &keyset).await?;
    Ok(axum::Json(Page::new(rows, &keyset, |h| h.host_key.clone())))
}

/// Reads one host circuit.
#[utoipa::path(
    get,
    path = "/api/v1/admin/hosts/{host}",
    tag = "operator",
    operation_id = "admin_get_host",
    params(("host" = String, Path, description = "Host key, e.g. `api.example.com` or `127.0.0.1:8080`.")),
    responses(
        (status = 200, description = "The host circuit.", body = HostCircuit),
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn read(
    call: OperatorCall,
    Path(host): Path<String>,
) -> Result<axum::Json<HostCircuit>, ApiError> {
    Ok(axum::Json(load(&call.state, &host).await?))
}

/// The host circuit `host` as it is now (404 when there is no such host circuit).
async fn load(state: &AppState, host: &str) -> Result<HostCircuit, ApiError> {
    let mut conn = state.pool().acquire().await?;
    Ok(hosts::get(&mut conn, host, &state.settings().hosts).await?)
}

/// A manual action on a host circuit.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // documents the `{action}` path segment, which the handler matches as text
pub(crate) enum HostAction {
    /// Force the host open: park every channel on it; host probes follow after the cooldown.
    Open,
    /// Force the host closed: release every channel on it (each channel's own circuit still
    /// applies).
    Close,
}

/// Forces a host circuit open or closed.
///
/// `POST /api/v1/admin/hosts/{host}/{open|close}?reason=`: audited as `operator`, alerted to
/// every tenant with channels on the host. Idempotent: a host already there changes nothing and
/// audits nothing. Any other action is 404.
#[utoipa::path(
    post,
    path = "/api/v1/admin/hosts/{host}/{action}",
    tag = "operator",
    operation_id = "admin_host_action",
    params(
        ("host" = String, Path, description = "Host key."),
        ("action" = inline(HostAction), Path, description = "What to do."),
        ReasonQuery,
    ),
    responses(
        (status = 200, description = "The host circuit as it is now.", body = HostCircuit),
        ById<WithQuery<OperatorAuth>>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn act(
    call: OperatorCall,
    Path((host, action)): Path<(String, String)>,
    Query(q): Query<ReasonQuery>,
) -> Result<axum::Json<HostCircuit>, ApiError> {
    let (change, action) = path_action(
        &action,
        &[
            ("open", (Manual::ForceOpen, "host.forced_open")),
            ("close", (Manual::ForceClose, "host.forced_closed")),
        ],
    )?;
    load(&call.state, &host).await?;
    let reason = q.or_default(action, call.actor())?;
    let mut tx = call.begin_audited().await?;
    let cfg = &call.state.settings().hosts;
    let moved = hosts::apply_manual(&mut tx, &host, change, call.actor(), &reason, cfg).await?;
    tx.commit().await?;
    count_committed(moved.map(|t| t.counted()));
    Ok(axum::Json(load(&call.state, &host).await?))
}

/// Body of `PATCH /api/v1/admin/hosts/{host}`; `null` returns a value to the configuration's.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchHost {
    /// Distinct failing channels within the window that open the host (null = `hosts.failure_threshold`).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    failure_threshold: Option<Option<i32>>,
    /// First cooldown, ms (null = `hosts.cooldown_ms`).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400000)]
    cooldown_ms: Option<Option<i64>>,
    /// Cap of deliveries in flight to the host, cluster-wide (null = `hosts.max_in_flight`, if set; else not capped).
    #[serde(default, deserialize_with = "super::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 100000)]
    max_in_flight: Option<Option<i32>>,
}

/// Overrides a host circuit's threshold, cooldown or in-flight cap.
///
/// Audited (`host.settings_changed`, old and new values) when something changed.
#[utoipa::path(
    patch,
    path = "/api/v1/admin/hosts/{host}",
    tag = "operator",
    operation_id = "admin_update_host",
    params(("host" = String, Path, description = "Host key.")),
    request_body = PatchHost,
    responses(
        (status = 200, description = "The host circuit as it is now.", body = HostCircuit),
        JsonBody,
        ById<OperatorAuth>,
    ),
    security(("operator_key" = [])),
)]
pub(crate) async fn update(
    call: OperatorCall,
    Path(host): Path<String>,
    Json(body): Json<PatchHost>,
) -> Result<axum::Json<HostCircuit>, ApiError> {
    load(&call.state, &host).await?;
    let mut tx = call.begin_audited().await?;
    hosts::set_overrides(
        &mut tx,
        &host,
        &Overrides {
            failure_threshold: body.failure_threshold,
            cooldown_ms: body.cooldown_ms,
            max_in_flight: body.max_in_flight,
        },
        call.actor(),
    )
    .await?;
    tx.commit().await?;
    Ok(axum::Json(load(&call.state, &host).await?))
}
