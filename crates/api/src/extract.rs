//! Extractors whose rejections are problem+json.

use crate::error::ApiError;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// `axum::Json` whose rejections become problems: malformed JSON → 400, well-formed but wrong
/// shape (missing field, wrong type, unknown field) → 422, missing `Content-Type:
/// application/json` → 415, body over the route's limit → 413.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(r) => Err(json_rejection(r)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    let status = r.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_body",
        StatusCode::BAD_REQUEST => "malformed_json",
        _ => "bad_request",
    };
    let detail = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            "request body is larger than this route accepts".to_string()
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "send the body as JSON with Content-Type: application/json".to_string()
        }
        _ => r.body_text(),
    };
    ApiError::new(status, code, detail)
}

/// `axum::extract::Path` whose rejection (e.g. an id that is not a UUID) is a 400 problem.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(r) => Err(path_rejection(r)),
        }
    }
}

fn path_rejection(r: PathRejection) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_path",
        format!("{} (ids are UUIDs)", r.body_text()),
    )
}

/// `axum::extract::Query` whose rejection is a 400 problem.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(r) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                r.body_text(),
            )),
        }
    }
}
