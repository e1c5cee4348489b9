//! Cells (docs/cells.md): a deployment split into independent cells, each a Postgres (in production a
//! Patroni cluster) with its own nodes and tenants, behind a router (deploy/cells/: HAProxy)
//! that sends every request to one cell. A tenant's credentials name its cell in their visible
//! prefix (`bw_<cell>_…`, `bwp_<cell>_…`, [`breakwater_core::api_key::generate_api_key`]); an
//! operator request names it in the [`HEADER`]. The router sets that header on every request
//! it forwards to the cell it chose, and a node checks it ([`misdirected`]), so a router whose
//! backends list a node of the wrong cell answers 421 instead of creating a tenant, or acting on
//! one, in a cell the operator did not mean.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The request header naming the cell a request is meant for (`Breakwater-Cell: <cell id>`).
pub const HEADER: &str = "breakwater-cell";

/// Refuses a request whose [`HEADER`] names another cell than this node's: 421
/// `misdirected_request` (RFC 9110 §15.5.20: this server is not the one that can answer it),
/// with the two cells in the detail. A request without the header, and every request on a node
/// without a cell, passes.
pub async fn misdirected(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(own) = state.settings().cell.as_ref() else {
        return next.run(req).await;
    };
    let named = req.headers().get(HEADER).map(|v| v.to_str().unwrap_or(""));
    match named {
        Some(named) if named.trim() != own.as_str() => ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!(
                "this request names cell {:?} (the {HEADER} header) but reached a node of cell \
                 {own:?}: the router's backends of that cell list a node of another",
                named.chars().take(16).collect::<String>()
            ),
        )
        .into_response(),
        _ => next.run(req).await,
    }
}
