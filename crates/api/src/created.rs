//! The answer to a request that created an object: `201 Created` with a `Location` header that
//! names the new object (RFC 9110 §15.3.2 and §10.2.2), and the object as JSON.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// `201 Created`, `Location: <location>` (an absolute path, e.g. `/api/v1/channels/<uuid>`)
/// and `body` as JSON.
pub(crate) struct Created<T> {
    location: String,
    body: T,
}

impl<T> Created<T> {
    /// `body`, created at `location` (an absolute path of this API).
    pub(crate) fn at(location: String, body: T) -> Self {
        Self { location, body }
    }
}

impl<T: serde::Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        let mut response = (StatusCode::CREATED, axum::Json(self.body)).into_response();
        // The location is built from UUIDs and fixed segments: always a valid header value.
        if let Ok(value) = HeaderValue::try_from(self.location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        response
    }
}
