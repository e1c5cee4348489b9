//! `GET /api/v1/openapi.json`: the API's OpenAPI 3.1 document ([`crate::openapi`]), public and
//! built once per process.

use crate::AppState;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/openapi.json", get(spec))
}

/// This document: the API's OpenAPI 3.1 description.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "observability",
    operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI document.", body = Object,
        content_type = "application/json")),
)]
pub(crate) async fn spec() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::json(),
    )
}
